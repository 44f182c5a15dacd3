//! `stride`: Winwood et al.'s (OLS 2002) section 5.1 micro-benchmark, natively.

use super::params::{pool_text, size_text, Pairs};
use super::{first_touch, record_loop, Advice, Metrics, Phase, Scale};
use anyhow::{bail, Result};
use pagelab_core::PageSize;
use std::fmt;

/// Loads one timed round makes at least (`iters=auto`), full scale.
const AUTO_ACCESSES: u64 = 1 << 22;
/// The same, `--quick`.
const AUTO_ACCESSES_QUICK: u64 = 1 << 16;
/// The heap sweep: the paper's 128K..32M, in doublings.
const SWEEP: [u64; 9] = [
    128 << 10,
    256 << 10,
    512 << 10,
    1 << 20,
    2 << 20,
    4 << 20,
    8 << 20,
    16 << 20,
    32 << 20,
];
/// The heap sweep of `--quick`.
const SWEEP_QUICK: [u64; 3] = [128 << 10, 2 << 20, 8 << 20];
/// The paper's two strides: every page, and every 16th (one PTE per cache line).
const EVERY_SWEEP: [u64; 2] = [1, 16];
const KEYS: [&str; 7] = ["heap", "page", "line", "every", "iters", "rounds", "pool"];
/// Timed rounds by default.
const ROUNDS: u64 = 5;

/// One stride run: each of `iters` passes loads one 8-byte word from every `every`-th
/// `page` of a `heap`, the in-page offset advancing `line` bytes per touched page
/// (wrapping within the page) and restarting at 0 each pass, as the model's `stride`.
/// The passes run `rounds` times, each round timed alone: `ns_per_access` is the fastest
/// round's (as STREAM reports its best pass: on a shared or virtual machine the fastest is
/// the most repeatable), `ns_per_access_mean` all rounds'.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Stride {
    /// Heap bytes, a multiple of `page`.
    pub heap: u64,
    /// Distance between touched pages.
    pub page: u64,
    /// In-page offset step.
    pub line: u64,
    /// Touch every n-th page.
    pub every: u64,
    /// Passes over the heap per round.
    pub iters: u64,
    /// Timed rounds of `iters` passes.
    pub rounds: u64,
    /// Under the 4K baseline, the heap's frames drawn from this many bytes of 2M blocks
    /// ([`super::pool`]); `None`: as the kernel's allocator gives them.
    pub pool: Option<u64>,
}

/// Every spec a `stride` text stands for: the sweep over `heap` and/or `every` when absent.
pub(crate) fn expand(text: &str, scale: Scale) -> Result<Vec<Stride>> {
    let p = Pairs::new("stride", text, &KEYS)?;
    let heaps: Vec<Option<u64>> = if p.raw("heap").is_some() {
        vec![None]
    } else {
        let sweep: &[u64] = match scale {
            Scale::Full => &SWEEP,
            Scale::Quick => &SWEEP_QUICK,
        };
        sweep.iter().copied().map(Some).collect()
    };
    let everys: Vec<Option<u64>> = if p.raw("every").is_some() {
        vec![None]
    } else {
        EVERY_SWEEP.iter().copied().map(Some).collect()
    };
    let mut out = Vec::new();
    for every in &everys {
        for heap in &heaps {
            out.push(Stride::from_pairs(&p, *heap, *every, scale)?);
        }
    }
    Ok(out)
}

impl Stride {
    fn from_pairs(
        p: &Pairs<'_>,
        heap: Option<u64>,
        every: Option<u64>,
        scale: Scale,
    ) -> Result<Stride> {
        let page = p.pow2_size("page", PageSize::K4.bytes(), 64, PageSize::G1.bytes())?;
        let heap = match heap {
            Some(h) => h,
            None => p.size("heap", 4 << 20, page, 1 << 40)?,
        };
        if !heap.is_multiple_of(page) {
            bail!(
                "stride: heap={} is not a multiple of page={}",
                size_text(heap),
                size_text(page)
            );
        }
        let line = p.pow2_size("line", 64, 8, page)?;
        let every = match every {
            Some(e) => e,
            None => p.count("every", 1, 1, u32::MAX as u64)?,
        };
        let touches = (heap / page).div_ceil(every);
        let iters = match p.count_or_auto("iters", 1, u64::MAX)? {
            Some(n) => n,
            None => {
                let target = match scale {
                    Scale::Full => AUTO_ACCESSES,
                    Scale::Quick => AUTO_ACCESSES_QUICK,
                };
                target.div_ceil(touches)
            }
        };
        Ok(Stride {
            heap,
            page,
            line,
            every,
            iters,
            rounds: p.count("rounds", ROUNDS, 1, 1 << 20)?,
            pool: p.pool(heap)?,
        })
    }

    /// Pages loaded per pass.
    pub fn touches(&self) -> u64 {
        (self.heap / self.page).div_ceil(self.every)
    }

    pub(crate) fn run(&self, advice: Advice, m: &mut Metrics) -> Result<()> {
        let mut region = first_touch(self.heap, advice, (self.pool, 1), m, |r| {
            r.as_mut_slice::<u64>().fill(1);
        })?;
        let base = region.as_mut_ptr() as *const u8;
        let step = (self.every * self.page) as usize;
        let (heap, mask, line) = (
            self.heap as usize,
            self.page as usize - 1,
            self.line as usize,
        );
        let phase = Phase::start();
        let mut sum = 0u64;
        let mut best = f64::INFINITY;
        for _ in 0..self.rounds {
            let round = std::time::Instant::now();
            for _ in 0..self.iters {
                let (mut off, mut in_page) = (0usize, 0usize);
                while off < heap {
                    // SAFETY: off + in_page + 8 <= heap: off < heap, both multiples of 8,
                    // and in_page < page divides heap - off.
                    sum = sum.wrapping_add(unsafe {
                        std::ptr::read_volatile(base.add(off + in_page) as *const u64)
                    });
                    off += step;
                    in_page = (in_page + line) & mask;
                }
            }
            best = best.min(round.elapsed().as_secs_f64());
        }
        std::hint::black_box(sum);
        let per_round = self.iters * self.touches();
        record_loop(m, phase, self.rounds * per_round, "ns_per_access_mean");
        m.insert("ns_per_access".into(), best * 1e9 / per_round.max(1) as f64);
        m.insert("accesses".into(), (self.rounds * per_round) as f64);
        Ok(())
    }
}

impl fmt::Display for Stride {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "stride:heap={},page={},line={},every={},iters={},rounds={}",
            size_text(self.heap),
            size_text(self.page),
            size_text(self.line),
            self.every,
            self.iters,
            self.rounds
        )?;
        pool_text(f, self.pool)
    }
}
