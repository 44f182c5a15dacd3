//! `pagelab bench --predict`: the model's estimate of each native kernel, from the model's
//! workload of the same name and parameters, timed on a machine with caches (this machine's
//! preset by default, nested paging included).
//!
//! A kernel's measured figure is a steady state (the fastest warm round of `stride`, the
//! best pass of `stream`, a long loop of `gups` and `chase`, all after the data was written
//! once), so the estimate is one too: the model runs the workload twice, with `a` and `b`
//! units of work after the same initialisation, and the estimate is the difference of the
//! two runs' cycles over `b - a`. The cold misses, the initialisation and the program's
//! start cancel out; what is left is what each further unit of work costs.

use anyhow::{Context, Result};
use pagelab_core::PageSize;
use pagelab_lab::native::KernelSpec;
use pagelab_report::lab_table::KernelPrediction;
use pagelab_report::LabResult;
use pagelab_workloads::fmt_size;
use std::collections::BTreeMap;

/// `--machine measured`: this machine, measured first as `pagelab machines --measure` does
/// (the caches a core really gets, memory, frame placement, misses and walks in flight, on
/// the preset of this CPU), written to the private directory and modelled from there.
pub const MEASURED: &str = "measured";

/// The machine `--predict` models by default: this machine, measured ([`MEASURED`]). Its
/// file met the 25% goal on 6 of 6 and 4 of 6 kernels where the preset alone met 2 of 6
/// (docs/cost.md).
pub const DEFAULT_MACHINE: &str = MEASURED;

/// Measures this machine ([`MEASURED`]), its host's block translations too when `blocks`;
/// returns the machine file's path.
///
/// # Errors
/// A measurement that fails, or a file that cannot be written.
pub fn measure_here(blocks: bool) -> Result<String> {
    // The probe's own defaults, which are `machines --measure`'s too.
    let o = pagelab_lab::probe::ProbeOptions::default();
    use super::machines_probe::probe_in_model;
    let m = super::machines_measure::measure(pagelab_machine::host::HOST, o.max, o.repeat, blocks)?;
    let dir = pagelab_sys::private::private_dir()
        .context("finding the private directory for the measured machine file")?;
    let path = dir.join("measured.toml");
    std::fs::write(&path, &m.text).with_context(|| format!("writing {}", path.display()))?;
    let file = path.display().to_string();
    for l in m.summary.iter().chain(&probe_in_model(&file, &m)?) {
        if !l.is_empty() {
            eprintln!("pagelab: --predict --machine measured: {}", l.trim_start());
        }
    }
    eprintln!(
        "pagelab: --predict --machine measured: wrote {} (`pagelab machines --measure` \
         prints the whole curve)",
        path.display()
    );
    Ok(path.display().to_string())
}
/// The virtualisation `--predict` models by default. This machine is a KVM guest, whose
/// host page cannot be read from inside but shows in time: `machines --measure` (and so
/// `--machine measured`) writes what its probe found as `[nested] host_page`, which
/// `nested` alone models; a machine file without one is modelled over 2M host pages.
pub const DEFAULT_VIRT: &str = "nested";

/// The two model workloads that estimate one kernel, and the units of work between them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ModelPair {
    /// The workload with fewer units of work.
    pub small: String,
    /// The workload with more.
    pub large: String,
    /// Units of work (`large` minus `small`): accesses, elements, updates or steps.
    pub ops: u64,
}

/// Passes over the heap a stride pair's smaller workload makes at least: warm enough that
/// the passes between it and the larger one are the steady state. A TLB that replaces at
/// random (the `zen4` L2 D-TLB) settles over the first passes of a heap larger than it: on
/// the 16M every-page stride the difference of 3 and 6 passes gave 7.7 cycles an access at
/// 4K, of 8 and 16 passes 4.4, of 32 and 64 passes 4.4.
pub const STRIDE_WARM_PASSES: u64 = 8;

/// Accesses a stride pair's smaller workload makes at least (and the pair's difference
/// too): on a small heap a few passes are a few dozen accesses, which the initialisation's
/// misses still in flight hide (128K, every 16th page: 0 cycles between 3 and 6 passes, 3
/// between 1000 and 2000).
pub const STRIDE_WARM_ACCESSES: u64 = 1 << 16;

/// The model workloads of `spec` (none for `fault`, whose cost, first touch, the model does
/// not time). Data starts 2M-aligned, as the native kernels map it.
pub fn model_pair(spec: &KernelSpec) -> Option<ModelPair> {
    let pair = |f: &dyn Fn(u64) -> String, a: u64, b: u64, per: u64| ModelPair {
        small: f(a),
        large: f(b),
        ops: (b - a) * per,
    };
    Some(match spec {
        KernelSpec::Stride(s) => {
            let per = (s.heap / s.page).div_ceil(s.every);
            let warm = STRIDE_WARM_PASSES.max(STRIDE_WARM_ACCESSES.div_ceil(per));
            pair(
                &|iters| {
                    format!(
                        "stride:heap={},page={},line={},every={},iters={iters},align=2M",
                        fmt_size(s.heap),
                        fmt_size(s.page),
                        s.line,
                        s.every
                    )
                },
                warm,
                2 * warm,
                per,
            )
        }
        KernelSpec::Stream(s) => pair(
            &|iters| format!("stream:n={},iters={iters},align=2M", s.n),
            1,
            2,
            4 * s.n,
        ),
        KernelSpec::Gups(g) => pair(
            &|updates| {
                format!(
                    "gups:table={},updates={updates},seed={},align=2M",
                    fmt_size(g.table),
                    g.seed
                )
            },
            g.updates / 2,
            g.updates.max(2),
            1,
        ),
        KernelSpec::Chase(c) => pair(
            &|steps| {
                format!(
                    "chase:nodes={},node={},steps={steps},seed={},align=2M",
                    c.nodes, c.node, c.seed
                )
            },
            c.steps / 2,
            c.steps.max(2),
            1,
        ),
        KernelSpec::Fault(_) => return None,
    })
}

/// Whether the speed-up goal holds `spec`: stride heaps of 16M and more, gups and chase.
pub fn goal_holds(spec: &KernelSpec) -> bool {
    match spec {
        KernelSpec::Stride(s) => s.heap >= 16 << 20,
        KernelSpec::Gups(_) | KernelSpec::Chase(_) => true,
        KernelSpec::Stream(_) | KernelSpec::Fault(_) => false,
    }
}

/// The single page sizes of `configs`, sorted (a configuration of several sizes is not one
/// fixed size, which is what the model's study runs).
fn single_sizes(configs: &[Vec<PageSize>]) -> Vec<PageSize> {
    let mut sizes: Vec<PageSize> = configs
        .iter()
        .filter(|c| c.len() == 1)
        .map(|c| c[0])
        .collect();
    sizes.sort();
    sizes.dedup();
    sizes
}

/// The study and the cost model of `machine` for `configs`' single sizes; an error where
/// the machine cannot time a run.
pub(crate) fn model_of(
    configs: &[Vec<PageSize>],
    machine: &str,
    virt: Option<&str>,
) -> Result<(pagelab_engine::StudyConfig, pagelab_engine::CostConfig)> {
    let text: Vec<String> = single_sizes(configs)
        .iter()
        .map(PageSize::to_string)
        .collect();
    let (cfg, m) =
        pagelab::model::machine_study_config(Some(machine), Some(&text.join(",")), None)?;
    if pagelab::model::cost_config(m.as_ref(), &cfg, None)?.is_none() {
        anyhow::bail!(
            "--predict --machine {machine}: the machine gives no caches and latencies to time \
             a run with; give one with a [caches] section, such as zen4 or emeraldrapids \
             (see `pagelab machines`)"
        );
    }
    let cost = pagelab::model::cost_config(m.as_ref(), &cfg, virt)?
        .context("a machine with caches gives a cost model")?;
    Ok((cfg, cost))
}

/// Checks that `machine` can time `configs` under `virt`, before anything is measured.
///
/// # Errors
/// A machine that does not load, or gives no caches and latencies.
pub fn check_machine(configs: &[Vec<PageSize>], machine: &str, virt: Option<&str>) -> Result<()> {
    model_of(configs, machine, virt).map(|_| ())
}

/// Where a kernel's 4K runs' frames lay: the medians of their share of consecutive pages on
/// neighbouring frames and of the bytes of the 2M blocks they fell in.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct KernelFrames {
    /// The median `frame_neighbours`.
    pub neighbours: f64,
    /// The median `pool_blocks` or `frame_blocks`, as bytes of 2M blocks, else the median
    /// `frame_span_bytes`.
    pub span: u64,
}

/// Each kernel's [`KernelFrames`], by subject, from its 4K configuration's runs that
/// recorded them (as root: pagemap hides frames from others). A kernel whose frames were
/// drawn from a pool (`pool_blocks`) spans the pool's blocks, wherever they lay; another
/// spans the blocks its frames fell in (`frame_blocks`, since session 39: the host's block
/// translations a walk needs are those blocks', not the span's), or where runs did not
/// count them their span.
pub fn kernel_frames(result: &LabResult) -> BTreeMap<String, KernelFrames> {
    let median = |mut v: Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v.get(v.len() / 2).copied()
    };
    result
        .configs
        .iter()
        .filter(|c| c.pages == [PageSize::K4])
        .filter_map(|c| {
            let of = |key: &str| {
                median(
                    c.runs
                        .iter()
                        .filter_map(|r| r.metrics.get(key).copied())
                        .collect(),
                )
            };
            let neighbours = of("frame_neighbours")?;
            // A pooled kernel's frames were drawn from the pool's blocks, wherever those lay,
            // another's lie in the blocks it counted: their span for the model is the
            // blocks' bytes.
            let span = match of("pool_blocks").or_else(|| of("frame_blocks")) {
                Some(blocks) => blocks * (2 << 20) as f64,
                None => of("frame_span_bytes")?,
            };
            Some((
                c.subject.clone(),
                KernelFrames {
                    neighbours,
                    span: span as u64,
                },
            ))
        })
        .collect()
}

/// `cost` with its frames placed as `f` says: scattered over the span (whole 2M blocks, at
/// most the machine's memory), that share of small frames right above the last.
pub fn with_frames(
    cost: &pagelab_engine::CostConfig,
    f: &KernelFrames,
) -> pagelab_engine::CostConfig {
    let mut c = cost.clone();
    c.machine.cost.frames =
        super::machines_measure::frames_spec(f.neighbours, f.span, c.machine.memory);
    c
}

/// The frames `spec` is modelled with, and whether they are its pool's: its 4K runs' frames
/// as measured (in `measured`, by subject: for a pooled kernel, spread over the blocks its
/// pool came back in, [`kernel_frames`]), else for a kernel with a pool (`pool=`) the same
/// draw as the machine's, 4K frames at random over the pool's bytes.
pub fn frames_for(
    spec: &KernelSpec,
    measured: &BTreeMap<String, KernelFrames>,
) -> Option<(KernelFrames, bool)> {
    let runs = measured.get(&spec.to_string()).copied();
    match spec.pool() {
        Some(span) => Some((
            runs.unwrap_or(KernelFrames {
                neighbours: 0.0,
                span,
            }),
            true,
        )),
        None => runs.map(|f| (f, false)),
    }
}

/// The model's cycles per unit of work of every kernel under every configuration of a
/// single page size. `machine` is a preset or file with caches; `virt` as `--virt`; a
/// kernel in `frames` is modelled with its frames placed so ([`with_frames`]), the others
/// as the machine's `[frames]` says. Also returns the host page modelled, if nested.
/// After a held signal ([`pagelab_sys::signals::received`]) it models no further kernel.
///
/// # Errors
/// A machine that cannot time a run, or a model run that fails.
pub fn predict(
    specs: &[KernelSpec],
    configs: &[Vec<PageSize>],
    machine: &str,
    virt: Option<&str>,
    frames: &BTreeMap<String, KernelFrames>,
) -> Result<(Vec<KernelPrediction>, Option<PageSize>)> {
    let sizes = single_sizes(configs);
    let (cfg, cost) = model_of(configs, machine, virt)?;
    let mut out = Vec::new();
    for spec in specs {
        if pagelab_sys::signals::received().is_some() {
            // Interrupted (the caller holds the signals while it models): stop here.
            break;
        }
        let Some(pair) = model_pair(spec) else {
            continue;
        };
        let subject = spec.to_string();
        let cycles = match frames_for(spec, frames) {
            Some((f, pooled)) => {
                if pooled {
                    eprintln!(
                        "pagelab: --predict: {subject} modelled with its 4K frames at random \
                         over its pool of {} ({:.0} 2M blocks)",
                        pagelab_core::Bytes(f.span),
                        f.span as f64 / (2 << 20) as f64
                    );
                } else {
                    eprintln!(
                        "pagelab: --predict: {subject} modelled with its 4K runs' frames: \
                         {:.1}% of consecutive pages on neighbouring frames, the rest at \
                         random over {} ({:.0} 2M blocks; --frames machine: the machine \
                         file's)",
                        f.neighbours * 100.0,
                        pagelab_core::Bytes(f.span),
                        f.span as f64 / (2 << 20) as f64
                    );
                }
                steady_state(&cfg, &with_frames(&cost, &f), &pair, &subject)?
            }
            None => steady_state(&cfg, &cost, &pair, &subject)?,
        };
        out.push(KernelPrediction {
            subject,
            goal: goal_holds(spec),
            cycles_per_op: sizes
                .iter()
                .zip(cycles)
                .map(|(s, c)| (s.to_string(), c))
                .collect(),
        });
    }
    Ok((out, cost.nested_host))
}

/// The model's steady state of `pair` under each of `cfg`'s page sizes, in their order:
/// the difference of its two workloads' cycles over its units of work. `what` names it in
/// the progress line and in errors.
///
/// # Errors
/// A workload that does not open, or a run that fails.
pub fn steady_state(
    cfg: &pagelab_engine::StudyConfig,
    cost: &pagelab_engine::CostConfig,
    pair: &ModelPair,
    what: &str,
) -> Result<Vec<f64>> {
    Ok(steady_costs(cfg, cost, pair, what, true)?
        .into_iter()
        .map(|c| c.cycles)
        .collect())
}

/// The model's steady state of one page size's run: cycles, and blocks of guest memory
/// whose host translation its walks missed ([`pagelab_cache::blocks`]), per unit of work.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Steady {
    /// Cycles per unit of work.
    pub cycles: f64,
    /// The host's block translations missed per unit of work.
    pub block_misses: f64,
}

/// [`steady_state`] with the block translations missed; its progress line drawn only when
/// `show`.
///
/// # Errors
/// A workload that does not open, or a run that fails.
pub fn steady_costs(
    cfg: &pagelab_engine::StudyConfig,
    cost: &pagelab_engine::CostConfig,
    pair: &ModelPair,
    what: &str,
    show: bool,
) -> Result<Vec<Steady>> {
    let mut counts = Vec::new();
    for w in [&pair.small, &pair.large] {
        let label = format!("model of {what}");
        let progress = &mut if show {
            crate::progress::Progress::new(&label)
        } else {
            crate::progress::Progress::hidden(&label)
        };
        let mut src = pagelab::builtin::open(w)?;
        let r = pagelab_engine::run_cost_study(&mut *src, cfg, cost, progress)
            .with_context(|| format!("the model of `{what}` ({w})"))?;
        counts.push(
            r.runs
                .iter()
                .map(|run| {
                    run.cost
                        .as_ref()
                        .map_or((0, 0), |c| (c.cycles, c.host_block_misses))
                })
                .collect::<Vec<(u64, u64)>>(),
        );
    }
    let per_op = |b: u64, a: u64| b.saturating_sub(a) as f64 / pair.ops as f64;
    Ok(counts[1]
        .iter()
        .zip(&counts[0])
        .map(|(b, a)| Steady {
            cycles: per_op(b.0, a.0),
            block_misses: per_op(b.1, a.1),
        })
        .collect())
}

#[cfg(test)]
#[path = "bench_predict_tests.rs"]
mod tests;
