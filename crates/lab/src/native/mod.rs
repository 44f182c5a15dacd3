//! Native microbenchmarks matching the model's built-in workloads, for `pagelab bench`.
//!
//! Each kernel does on this machine what the model's workload of the same name does in a
//! trace (see `pagelab_workloads`), with the same parameter names; the defaults are larger,
//! because a timing needs more work than a trace does (every default is listed below):
//!
//! | kernel | what it does | default (`--quick`) | headline |
//! |---|---|---|---|
//! | `stride` | Winwood et al.'s (OLS 2002) section 5.1 benchmark: one 8-byte load per `page`, every `every`-th page, the in-page offset advancing `line` bytes per touched page | `heap`: sweep 128K..32M (128K, 2M, 8M); `every`: sweep 1 and 16; `page=4K`, `line=64`; `iters=auto`: passes for 4M loads (64K) per round; `rounds=5` timed rounds | `ns_per_access` (fastest round) |
//! | `stream` | McCalpin's STREAM: copy, scale, add, triad over three `n`-element f64 arrays | `n=2M` (256K), `iters=10` (3) | `ns_per_element` (best pass of each of the four), `mb_per_s` (triad's best pass) |
//! | `gups` | HPCC RandomAccess: `table[ran & mask] ^= ran`, the model's LFSR and seed | `table=64M` (8M), `updates=4M` (256K), `seed=1` | `ns_per_update` |
//! | `chase` | a dependent pointer chase around the model's random cycle ([`pagelab_workloads::Permutation`]) | `nodes=512K` (64K), `node=64`, `steps=2M` (256K), `seed=1` | `ns_per_step` |
//! | `fault` | the cost of first touch: one 8-byte write per 4K of `size` bytes, nothing else | `size=256M` (32M) | `first_touch_ns_per_mb` |
//!
//! `stride`, `gups` and `chase` also take `pool=SIZE`: under the 4K baseline their data's
//! frames are drawn from that many bytes of whole 2M blocks ([`pool`]).
//!
//! Every kernel maps its data with [`Region`] (anonymous, private, 2M-aligned, advised as
//! the page-size configuration asks: [`Advice`]), writes all of it once (the **first touch**,
//! timed separately: that is where the page faults are taken), then runs its timed loop.
//! Besides its headline figure each reports `ns_per_op` (time per unit of work, lower is
//! better, for uniform tables and plots: [`KernelSpec::op_metric`]), `data_bytes`,
//! `first_touch_seconds`, `first_touch_ns_per_mb`, `first_touch_faults`, `loop_seconds`
//! and `loop_faults` (the thread's minor faults from `getrusage` around each phase).
//!
//! A spec is written `KERNEL[:key=value,...]`; [`expand`] turns `stride` without `heap` or
//! `every` into the paper's sweep. A spec's [`Display`](std::fmt::Display) is canonical: every
//! parameter, `iters` resolved, so a child process given it runs exactly that.
//!
//! ```no_run
//! use pagelab_lab::native::{expand, Advice, Scale};
//! let specs = expand("gups:table=8M,updates=100000", Scale::Full).unwrap();
//! let metrics = specs[0].run(Advice::NoHugePage).unwrap();
//! println!("{} ns per update", metrics["ns_per_update"]);
//! ```

mod chase;
mod fault;
mod gups;
pub(crate) mod params;
pub mod pool;
mod region;
mod stream;
mod stride;

pub use chase::Chase;
pub use fault::Fault;
pub use gups::Gups;
pub use region::{Plain, Region, REGION_ALIGN};
pub use stream::Stream;
pub use stride::Stride;

use anyhow::{anyhow, bail, Context, Result};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;
use std::time::Instant;

/// A kernel's figures by name (`ns_per_access`, `first_touch_faults`, ...).
pub type Metrics = BTreeMap<String, f64>;

/// The kernels, in the order `pagelab bench` runs them by default.
pub const KERNELS: [&str; 5] = ["stride", "stream", "gups", "chase", "fault"];

/// How big the defaults are: full timing runs, or `--quick` runs for tests.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scale {
    /// The defaults in the table of the module documentation.
    Full,
    /// The bracketed defaults: everything small, for tests and a first look.
    Quick,
}

/// What a kernel tells the kernel about its data's page size (madvise on the whole region).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Advice {
    /// `MADV_NOHUGEPAGE`: base pages whatever the knobs say (the 4K baseline).
    NoHugePage,
    /// No advice: THP only where a size is `always` (`--thp always`).
    None,
    /// `MADV_HUGEPAGE`: THP where a size is `always` or `madvise` (`--thp madvise`).
    HugePage,
}

impl Advice {
    /// The madvise flag, if any.
    pub(crate) fn madvise_flag(self) -> Option<rustix::mm::Advice> {
        match self {
            Advice::NoHugePage => Some(rustix::mm::Advice::LinuxNoHugepage),
            Advice::None => None,
            Advice::HugePage => Some(rustix::mm::Advice::LinuxHugepage),
        }
    }
}

impl fmt::Display for Advice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Advice::NoHugePage => "nohugepage",
            Advice::None => "none",
            Advice::HugePage => "hugepage",
        })
    }
}

impl FromStr for Advice {
    type Err = anyhow::Error;
    fn from_str(s: &str) -> Result<Advice> {
        match s {
            "nohugepage" => Ok(Advice::NoHugePage),
            "none" => Ok(Advice::None),
            "hugepage" => Ok(Advice::HugePage),
            _ => bail!("advice `{s}` is not one of nohugepage, none, hugepage"),
        }
    }
}

/// One kernel with every parameter resolved.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum KernelSpec {
    /// Winwood et al.'s (OLS 2002) stride benchmark.
    Stride(Stride),
    /// STREAM.
    Stream(Stream),
    /// RandomAccess.
    Gups(Gups),
    /// Pointer chase.
    Chase(Chase),
    /// First-touch cost.
    Fault(Fault),
}

impl KernelSpec {
    /// Parses one spec; `stride` without `heap` or `every` takes the first value of the
    /// sweep (use [`expand`] for the whole sweep).
    ///
    /// # Errors
    /// An unknown kernel (lists them), an unknown or repeated key (lists the kernel's keys),
    /// or a value out of range (says what is allowed).
    pub fn parse(text: &str, scale: Scale) -> Result<KernelSpec> {
        let mut all = expand(text, scale)?;
        Ok(all.swap_remove(0))
    }

    /// The bytes of 2M blocks the kernel's 4K frames are drawn from (`pool=`), if any.
    pub fn pool(&self) -> Option<u64> {
        match self {
            KernelSpec::Stride(s) => s.pool,
            KernelSpec::Gups(g) => g.pool,
            KernelSpec::Chase(c) => c.pool,
            KernelSpec::Stream(_) | KernelSpec::Fault(_) => None,
        }
    }

    /// The kernel's name (`stride`, ...).
    pub fn name(&self) -> &'static str {
        match self {
            KernelSpec::Stride(_) => "stride",
            KernelSpec::Stream(_) => "stream",
            KernelSpec::Gups(_) => "gups",
            KernelSpec::Chase(_) => "chase",
            KernelSpec::Fault(_) => "fault",
        }
    }

    /// The headline metric's name and whether larger is better.
    pub fn headline(&self) -> (&'static str, bool) {
        match self {
            KernelSpec::Stride(_) => ("ns_per_access", false),
            KernelSpec::Stream(_) => ("ns_per_element", false),
            KernelSpec::Gups(_) => ("ns_per_update", false),
            KernelSpec::Chase(_) => ("ns_per_step", false),
            KernelSpec::Fault(_) => ("first_touch_ns_per_mb", false),
        }
    }

    /// What `pagelab_report::lab_table::bench_tables` needs to know of this kernel. A stride
    /// with a pool has a table of its own: the sweep's rows are heaps, and pooled and
    /// unpooled runs of one heap would share a row.
    pub fn bench_kernel(&self) -> pagelab_report::lab_table::BenchKernel {
        use pagelab_report::lab_table::BenchKernel;
        match self {
            KernelSpec::Stride(s) if s.pool.is_none() => BenchKernel::Stride {
                subject: self.to_string(),
                heap: s.heap,
                every: s.every,
            },
            _ => {
                let (headline, larger_is_better) = self.headline();
                BenchKernel::Other {
                    subject: self.to_string(),
                    headline: headline.to_string(),
                    larger_is_better,
                }
            }
        }
    }

    /// The metric that is time per unit of work (copied to `ns_per_op`): per access, per
    /// array element, per update, per step, per 4K page first-touched.
    pub fn op_metric(&self) -> &'static str {
        match self {
            KernelSpec::Stride(_) => "ns_per_access",
            KernelSpec::Stream(_) => "ns_per_element",
            KernelSpec::Gups(_) => "ns_per_update",
            KernelSpec::Chase(_) => "ns_per_step",
            KernelSpec::Fault(_) => "ns_per_page",
        }
    }

    /// Bytes of data the kernel maps and first-touches.
    pub fn data_bytes(&self) -> u64 {
        match self {
            KernelSpec::Stride(k) => k.heap,
            KernelSpec::Stream(k) => 3 * 8 * k.n,
            KernelSpec::Gups(k) => k.table,
            KernelSpec::Chase(k) => k.nodes * k.node,
            KernelSpec::Fault(k) => k.size,
        }
    }

    /// Runs the kernel in this process with its data advised as `advice`.
    ///
    /// # Errors
    /// When the data cannot be mapped or advised.
    pub fn run(&self, advice: Advice) -> Result<Metrics> {
        let mut m = Metrics::new();
        match self {
            KernelSpec::Stride(k) => k.run(advice, &mut m)?,
            KernelSpec::Stream(k) => k.run(advice, &mut m)?,
            KernelSpec::Gups(k) => k.run(advice, &mut m)?,
            KernelSpec::Chase(k) => k.run(advice, &mut m)?,
            KernelSpec::Fault(k) => k.run(advice, &mut m)?,
        }
        m.insert("data_bytes".into(), self.data_bytes() as f64);
        let ns = m[self.op_metric()];
        m.insert("ns_per_op".into(), ns);
        Ok(m)
    }
}

impl fmt::Display for KernelSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            KernelSpec::Stride(k) => k.fmt(f),
            KernelSpec::Stream(k) => k.fmt(f),
            KernelSpec::Gups(k) => k.fmt(f),
            KernelSpec::Chase(k) => k.fmt(f),
            KernelSpec::Fault(k) => k.fmt(f),
        }
    }
}

/// Parses `KERNEL[:key=value,...]` into the specs it stands for: one, or for `stride`
/// without `heap` and/or `every`, the paper's sweep over the missing ones.
///
/// # Errors
/// As [`KernelSpec::parse`].
pub fn expand(text: &str, scale: Scale) -> Result<Vec<KernelSpec>> {
    let text = text.trim();
    let (name, rest) = text.split_once(':').unwrap_or((text, ""));
    let specs = match name.trim().to_ascii_lowercase().as_str() {
        "stride" => stride::expand(rest, scale)?
            .into_iter()
            .map(KernelSpec::Stride)
            .collect(),
        "stream" => vec![KernelSpec::Stream(Stream::parse(rest, scale)?)],
        "gups" => vec![KernelSpec::Gups(Gups::parse(rest, scale)?)],
        "chase" => vec![KernelSpec::Chase(Chase::parse(rest, scale)?)],
        "fault" => vec![KernelSpec::Fault(Fault::parse(rest, scale)?)],
        other => bail!(
            "unknown kernel `{other}` in `{text}`: the kernels are {}",
            KERNELS.join(", ")
        ),
    };
    Ok(specs)
}

/// Every kernel's default specs, the stride sweep first: what `pagelab bench` runs with no
/// kernel named.
pub fn default_specs(scale: Scale) -> Vec<KernelSpec> {
    KERNELS
        .iter()
        .flat_map(|k| expand(k, scale).expect("the defaults are valid"))
        .collect()
}

/// What a `pagelab bench-child` prints: one JSON line.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ChildReport {
    /// The canonical spec that ran.
    pub spec: String,
    /// How the data was advised.
    pub advice: String,
    /// The kernel's figures.
    pub metrics: Metrics,
}

impl ChildReport {
    /// Finds the report line in a child's standard output.
    ///
    /// # Errors
    /// When no line parses as a report (the error quotes the output's start).
    pub fn from_stdout(stdout: &[u8]) -> Result<ChildReport> {
        let text = String::from_utf8_lossy(stdout);
        text.lines()
            .rev()
            .find_map(|l| serde_json::from_str(l.trim()).ok())
            .ok_or_else(|| {
                let head: String = text.chars().take(200).collect();
                anyhow!("the benchmark child printed no report line (its output began: {head:?})")
            })
    }
}

/// Runs `spec` here and returns the line a child prints.
///
/// # Errors
/// As [`expand`] and [`KernelSpec::run`].
pub fn run_child(spec: &str, advice: Advice) -> Result<String> {
    let k =
        KernelSpec::parse(spec, Scale::Full).with_context(|| format!("kernel spec `{spec}`"))?;
    let metrics = k.run(advice).with_context(|| format!("running `{k}`"))?;
    let report = ChildReport {
        spec: k.to_string(),
        advice: advice.to_string(),
        metrics,
    };
    Ok(serde_json::to_string(&report)?)
}

/// The calling thread's minor faults so far (`RUSAGE_THREAD`: the kernels run on one
/// thread, and other threads of the process, such as parallel tests, do not count).
pub fn minor_faults() -> u64 {
    pagelab_sys::process::minor_faults(pagelab_sys::process::Who::Thread)
}

/// Seconds and minor faults of one phase.
pub(crate) struct Phase {
    start: Instant,
    faults: u64,
}

impl Phase {
    pub(crate) fn start() -> Phase {
        Phase {
            faults: minor_faults(),
            start: Instant::now(),
        }
    }

    /// (seconds, minor faults) since `start`.
    pub(crate) fn stop(self) -> (f64, u64) {
        let secs = self.start.elapsed().as_secs_f64();
        (secs, minor_faults() - self.faults)
    }
}

/// Maps `bytes` advised as `advice`, first-touches all of it with `touch`, and records the
/// `first_touch_*` metrics. With a `pool` (bytes) and the 4K baseline's advice, the pages
/// lie on frames drawn from that many bytes of 2M blocks ([`pool::pooled`], seeded with
/// `seed`), and the first touch's time and faults include the pool's: `pool_blocks` says
/// how many blocks it held.
pub(crate) fn first_touch(
    bytes: u64,
    advice: Advice,
    (pool, seed): (Option<u64>, u64),
    m: &mut Metrics,
    touch: impl FnOnce(&mut Region),
) -> Result<Region> {
    let phase = Phase::start();
    let mut region = match pool {
        Some(pool) if advice == Advice::NoHugePage => {
            let (region, blocks) = pool::pooled(bytes, pool, seed)?;
            m.insert("pool_blocks".into(), blocks as f64);
            region
        }
        _ => {
            let len = usize::try_from(bytes)
                .context("the data does not fit this machine's address space")?;
            Region::new(len, advice)?
        }
    };
    touch(&mut region);
    let (secs, faults) = phase.stop();
    m.insert("first_touch_seconds".into(), secs);
    m.insert(
        "first_touch_ns_per_mb".into(),
        secs * 1e9 / (bytes as f64 / (1 << 20) as f64),
    );
    m.insert("first_touch_faults".into(), faults as f64);
    // Where the data's 4K frames lie, where pagemap shows them (root): the share of
    // consecutive pages on neighbouring frames and the 2M blocks they fall in, which decide
    // what a walk of 4K pages costs (docs/cost.md). A note on the run, never its failure.
    if let Ok(Some(f)) = crate::probe::frames_of(region.as_mut_ptr() as u64, bytes) {
        m.insert("frame_neighbours".into(), f.neighbours);
        m.insert("frame_blocks".into(), f.blocks as f64);
        m.insert("frame_span_bytes".into(), f.span as f64);
    }
    Ok(region)
}

/// Records the timed loop's seconds and faults, and `name` = ns per `ops`.
pub(crate) fn record_loop(m: &mut Metrics, phase: Phase, ops: u64, name: &str) {
    let (secs, faults) = phase.stop();
    m.insert("loop_seconds".into(), secs);
    m.insert("loop_faults".into(), faults as f64);
    m.insert(name.into(), secs * 1e9 / ops.max(1) as f64);
}

#[cfg(test)]
mod tests;
