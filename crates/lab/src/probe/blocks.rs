//! The host's translations of 2M blocks of guest memory, as pooled kernels show them
//! (`pagelab machines --measure`, as root; the model's side is
//! `pagelab_machine::blocks`).
//!
//! On 4K pages whose frames are drawn from pools of whole 2M blocks (`pool=`,
//! [`crate::native::pool`]): the every-page stride over 16M with pools of 16M (8 blocks) up
//! to [`MAX_POOL`], and a chase over 8192 pages with a pool of 32M (16 blocks) and the
//! largest, the two taken in turn [`CHASE_ROUNDS`] times, the fastest run of each counting
//! (a slow minute of the guest's then falls on both alike, as in `super::Rounds`). Every
//! kernel's pool is the first bytes of one reserve of the largest size, faulted in once
//! ([`crate::native::pool::lending`]: the runs cleared about 39G of pages when each made its
//! own), whose pages each kernel gives back when it ends; the reserve is unmapped on every
//! path, and held to half the memory available.

use crate::native::{Advice, KernelSpec, Scale};
use anyhow::{bail, Context, Result};

/// The largest pool: 4096 blocks.
pub const MAX_POOL: u64 = 8 << 30;
/// The stride's pools below the largest.
const STRIDE_POOLS: [u64; 5] = [16 << 20, 256 << 20, 1 << 30, 2 << 30, 4 << 30];
/// The chase's pool with few blocks.
const CHASE_FEW: u64 = 32 << 20;
/// Runs of each chase, taken in turn.
pub const CHASE_ROUNDS: usize = 3;
const _: () = assert!(CHASE_ROUNDS > 0, "every chase runs at least once");
/// The smallest largest pool worth measuring: 512 blocks.
const MIN_LARGEST: u64 = 1 << 30;

/// One pooled kernel as measured.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PooledRun {
    /// The pool, bytes.
    pub pool: u64,
    /// The 2M blocks its frames fell in, as pagemap showed them.
    pub pool_blocks: u64,
    /// ns per access (the stride's fastest round) or per step (the chase).
    pub ns: f64,
}

/// What [`blocks`] measured.
#[derive(Clone, Debug, PartialEq)]
pub struct BlocksProbe {
    /// The stride, fewest blocks first.
    pub stride: Vec<PooledRun>,
    /// The chase with few blocks and with many: the fastest run of each.
    pub chase: [PooledRun; 2],
    /// The most the runs of one chase differed by, ns a step: what the two chases' difference
    /// must exceed to be more than noise.
    pub chase_noise: f64,
}

/// The every-page stride over 16M with `pool`.
pub fn stride_spec(pool: u64) -> String {
    format!(
        "stride:heap=16M,every=1,iters=256,pool={}",
        crate::native::params::size_text(pool)
    )
}

/// The chase over 8192 pages, one line each, with `pool`.
pub fn chase_spec(pool: u64) -> String {
    format!(
        "chase:nodes=8192,node=4K,steps=4194304,pool={}",
        crate::native::params::size_text(pool)
    )
}

/// The largest pool for `available` bytes of memory available: [`MAX_POOL`], or the
/// largest power of two up to half of it.
pub fn largest_pool(available: u64) -> u64 {
    let half = available / 2;
    if half >= MAX_POOL {
        MAX_POOL
    } else if half == 0 {
        0
    } else {
        1 << (63 - half.leading_zeros())
    }
}

/// Measures the pooled kernels under the 4K baseline; `progress` hears each step.
///
/// # Errors
/// Less than 2G of memory available (a pool of 512 blocks at half of it), or a kernel that
/// fails (pagemap hidden when not root, THP unable to collapse a pool).
pub fn blocks(progress: &mut dyn FnMut(&str)) -> Result<BlocksProbe> {
    let available = crate::native::pool::mem_available()?
        .context("/proc/meminfo gives no MemAvailable to size the pools by")?;
    let largest = largest_pool(available);
    if largest < MIN_LARGEST {
        bail!(
            "{} of memory available: the block probe's largest pool ({} at least) is held to \
             half of it",
            pagelab_core::Bytes(available),
            pagelab_core::Bytes(MIN_LARGEST)
        );
    }
    let mut pools: Vec<u64> = STRIDE_POOLS.into_iter().filter(|&p| p < largest).collect();
    pools.push(largest);
    progress(&format!(
        "host blocks: faulting in {} of 2M blocks, which every pooled kernel draws from",
        pagelab_core::Bytes(largest)
    ));
    let reserve = crate::native::pool::Reserve::new(largest)
        .context("the block probe's pool of the largest size")?;
    crate::native::pool::lending(reserve, || pooled_runs(&pools, progress))
}

/// The stride with each of `pools` (the last the largest), then the two chases in turn.
fn pooled_runs(pools: &[u64], progress: &mut dyn FnMut(&str)) -> Result<BlocksProbe> {
    let largest = *pools.last().context("no pool to run the stride with")?;
    let total = pools.len() + 2 * CHASE_ROUNDS;
    let mut run = |spec: String, done: usize| -> Result<PooledRun> {
        progress(&format!("host blocks {done} of {total}: {spec}"));
        let k = KernelSpec::parse(&spec, Scale::Full)?;
        let m = k
            .run(Advice::NoHugePage)
            .with_context(|| format!("the block probe's `{spec}`"))?;
        let of = |key: &str| {
            m.get(key)
                .copied()
                .with_context(|| format!("`{spec}` recorded no {key}"))
        };
        Ok(PooledRun {
            pool: k.pool().unwrap_or(0),
            pool_blocks: of("pool_blocks")? as u64,
            ns: of("ns_per_op")?,
        })
    };
    let mut stride = Vec::new();
    for (i, &p) in pools.iter().enumerate() {
        stride.push(run(stride_spec(p), i + 1)?);
    }
    let pools_done = pools.len();
    let chase = [CHASE_FEW, largest];
    let mut fastest = [None::<PooledRun>; 2];
    let mut slowest = [f64::NEG_INFINITY; 2];
    for round in 0..CHASE_ROUNDS {
        for (i, pool) in chase.iter().enumerate() {
            let r = run(chase_spec(*pool), pools_done + 2 * round + i + 1)?;
            slowest[i] = slowest[i].max(r.ns);
            if fastest[i].is_none_or(|best| r.ns < best.ns) {
                fastest[i] = Some(r);
            }
        }
    }
    // Never taken: every chase ran at least once (`CHASE_ROUNDS`).
    let [few, many] = [0, 1].map(|i| {
        fastest[i].unwrap_or(PooledRun {
            pool: chase[i],
            pool_blocks: 0,
            ns: f64::NAN,
        })
    });
    let chase_noise = (slowest[0] - few.ns).max(slowest[1] - many.ns);
    Ok(BlocksProbe {
        stride,
        chase: [few, many],
        chase_noise,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_largest_pool_is_a_power_of_two_within_half_the_memory() {
        assert_eq!(largest_pool(24 << 30), MAX_POOL);
        assert_eq!(largest_pool(16 << 30), MAX_POOL);
        assert_eq!(largest_pool(15 << 30), 4 << 30);
        assert_eq!(largest_pool(3 << 30), 1 << 30);
        assert_eq!(largest_pool(0), 0);
    }

    #[test]
    fn the_specs_parse_as_pooled_kernels() {
        for spec in [stride_spec(16 << 20), chase_spec(8 << 30)] {
            let k = KernelSpec::parse(&spec, Scale::Full).unwrap();
            assert!(k.pool().is_some(), "{spec}");
        }
        assert!(stride_spec(1 << 30).ends_with("pool=1G"));
    }

    /// As root with THP: the stride with a pool of 8 blocks and of 128, its frames in them.
    #[test]
    fn pooled_strides_run_in_their_blocks() {
        if !pagelab_sys::process::is_root() {
            eprintln!("skipped: needs root (pagemap) for pool=");
            return;
        }
        for (pool, blocks) in [(16u64 << 20, 8u64), (256 << 20, 128)] {
            let k = KernelSpec::parse(&stride_spec(pool), Scale::Full).unwrap();
            let m = k.run(Advice::NoHugePage).unwrap();
            let got = m["pool_blocks"] as u64;
            assert!((blocks..=2 * blocks).contains(&got), "{pool}: {got} blocks");
            assert!(m["ns_per_op"] > 0.0);
        }
    }
}
