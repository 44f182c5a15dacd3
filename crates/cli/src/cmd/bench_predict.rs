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
    Ok(steady_costs(cfg, cost, pair, what)?
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

/// [`steady_state`] with the block translations missed.
///
/// # Errors
/// A workload that does not open, or a run that fails.
pub fn steady_costs(
    cfg: &pagelab_engine::StudyConfig,
    cost: &pagelab_engine::CostConfig,
    pair: &ModelPair,
    what: &str,
) -> Result<Vec<Steady>> {
    let mut counts = Vec::new();
    for w in [&pair.small, &pair.large] {
        let progress = &mut crate::progress::Progress::new(&format!("model of {what}"));
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
mod tests {
    use super::*;
    use pagelab_lab::native::{expand, Scale};

    fn one(text: &str) -> KernelSpec {
        expand(text, Scale::Full).unwrap().swap_remove(0)
    }

    #[test]
    fn each_kernel_maps_to_the_model_workload_of_its_parameters() {
        // 256 accesses a pass: 256 passes make the warm 65536 accesses.
        let p = model_pair(&one("stride:heap=16M,every=16,iters=7")).unwrap();
        assert_eq!(
            p.small,
            "stride:heap=16M,page=4K,line=64,every=16,iters=256,align=2M"
        );
        assert_eq!(
            p.large,
            "stride:heap=16M,page=4K,line=64,every=16,iters=512,align=2M"
        );
        assert_eq!(p.ops, 256 * 256);
        // 16384 accesses a pass: the warm passes decide.
        let p = model_pair(&one("stride:heap=64M,iters=7")).unwrap();
        assert!(p.small.contains(",iters=8,") && p.large.contains(",iters=16,"));
        assert_eq!(p.ops, 8 * 16384);
        let p = model_pair(&one("gups:table=8M,updates=1000,seed=3")).unwrap();
        assert_eq!(p.large, "gups:table=8M,updates=1000,seed=3,align=2M");
        assert_eq!((p.small.contains("updates=500,"), p.ops), (true, 500));
        let p = model_pair(&one("chase:nodes=100,node=128,steps=11")).unwrap();
        assert_eq!(p.small, "chase:nodes=100,node=128,steps=5,seed=1,align=2M");
        assert_eq!(p.ops, 6);
        assert_eq!(model_pair(&one("stream:n=1000")).unwrap().ops, 4000);
        assert_eq!(model_pair(&one("fault:size=4M")), None);
        assert!(goal_holds(&one("stride:heap=16M,every=1")));
        assert!(!goal_holds(&one("stride:heap=8M,every=1")));
        assert!(!goal_holds(&one("stream")));
    }

    #[test]
    fn a_strides_steady_state_is_taken_after_its_warm_passes() {
        let (cfg, cost) = model_of(&[vec![PageSize::K4]], "zen4", Some("nested")).unwrap();
        // A small heap: each pass two accesses, which the initialisation's misses hid
        // between 3 and 6 passes (0 cycles); warm, the loop's own instructions at least
        // (6 at zen4's 0.5 cycles).
        let pair = model_pair(&one("stride:heap=128K,every=16")).unwrap();
        let small = steady_state(&cfg, &cost, &pair, "small heap").unwrap();
        assert!(small[0] >= 3.0, "{small:?}");
        // A heap larger than the L2 D-TLB, which replaces at random: the pair's cycles an
        // access are those of later passes, not of the passes that fill the TLB.
        let pair = model_pair(&one("stride:heap=16M,every=1")).unwrap();
        let warm = steady_state(&cfg, &cost, &pair, "warm").unwrap()[0];
        let later = ModelPair {
            small: pair.small.replace(",iters=16,", ",iters=32,"),
            large: pair.large.replace(",iters=32,", ",iters=64,"),
            ops: 2 * pair.ops,
        };
        assert_ne!(later.small, pair.small);
        let later = steady_state(&cfg, &cost, &later, "later").unwrap()[0];
        assert!((warm / later - 1.0).abs() < 0.02, "{warm} against {later}");
    }

    #[test]
    fn a_kernels_frames_are_the_medians_of_its_4k_runs() {
        use pagelab_report::{LabConfig, Measurement};
        let run = |n: Option<f64>, span: f64| Measurement {
            metrics: n
                .map(|n| {
                    [
                        ("frame_neighbours".into(), n),
                        ("frame_span_bytes".into(), span),
                    ]
                })
                .into_iter()
                .flatten()
                .collect(),
            ..Default::default()
        };
        let pooled = |blocks: f64| {
            let mut m = run(Some(0.0), 2e10);
            m.metrics.insert("pool_blocks".into(), blocks);
            m
        };
        let counted = |blocks: f64| {
            let mut m = run(Some(0.3), 2e10);
            m.metrics.insert("frame_blocks".into(), blocks);
            m
        };
        let config = |subject: &str, pages: &[PageSize], runs| LabConfig {
            subject: subject.into(),
            pages: pages.to_vec(),
            runs,
            ..Default::default()
        };
        let (k4, m2) = (PageSize::K4, PageSize::M2);
        let result = LabResult {
            configs: vec![
                config(
                    "stride:a",
                    &[k4],
                    vec![
                        run(Some(0.9), 4e9),
                        run(Some(0.0), 2e10),
                        run(Some(0.1), 3e10),
                    ],
                ),
                // 2M runs' frames are not the 4K pages'; runs without frames (not root) give
                // none.
                config("stride:a", &[m2], vec![run(Some(1.0), 1.0)]),
                config("gups:b", &[k4], vec![run(None, 0.0)]),
                // Drawn from a pool: spread over the blocks the pool came back in.
                config(
                    "chase:c",
                    &[k4],
                    [4565.0, 4100.0, 4200.0].map(pooled).to_vec(),
                ),
                // Left to the allocator, with their blocks counted: over those blocks.
                config(
                    "stream:d",
                    &[k4],
                    [16.0, 2700.0, 40.0].map(counted).to_vec(),
                ),
            ],
            ..Default::default()
        };
        let f = kernel_frames(&result);
        assert_eq!(f.len(), 3, "{f:?}");
        assert_eq!(
            f["stream:d"],
            KernelFrames {
                neighbours: 0.3,
                span: 40 << 21
            }
        );
        assert_eq!(
            f["chase:c"],
            KernelFrames {
                neighbours: 0.0,
                span: 4200 << 21
            }
        );
        assert_eq!(
            f["stride:a"],
            KernelFrames {
                neighbours: 0.1,
                span: 20_000_000_000
            }
        );
        // Placed as they lay: scattered over whole 2M blocks, within the machine's memory.
        let (cfg, cost) = model_of(&[vec![k4]], "zen4", Some("nested")).unwrap();
        let placed = with_frames(&cost, &f["stride:a"]);
        let frames = placed.machine.cost.frames;
        assert_eq!(frames.placement, pagelab_cache::FramePlacement::Scattered);
        assert_eq!(frames.neighbours, Some(0.1));
        assert_eq!(frames.span.unwrap() % (2 << 20), 0);
        assert!(frames.span.unwrap() >= 20_000_000_000);
        let wide = KernelFrames {
            neighbours: 2.0,
            span: 1 << 50,
        };
        let capped = with_frames(&cost, &wide).machine.cost.frames;
        assert_eq!(
            (capped.span, capped.neighbours),
            (Some(24 << 30), Some(1.0))
        );
        // And the model runs on it: a scattered heap costs a chase's 4K walks more.
        let pair = model_pair(&one("chase:nodes=16384,node=4096,steps=40000")).unwrap();
        let first = steady_state(&cfg, &cost, &pair, "first touch").unwrap();
        let spread = steady_state(&cfg, &placed, &pair, "scattered").unwrap();
        assert!(spread[0] > first[0], "{spread:?} against {first:?}");
    }

    #[test]
    fn a_pooled_kernel_is_modelled_with_its_pool_not_its_measured_frames() {
        let measured = |subject: &str| {
            BTreeMap::from([(
                subject.to_string(),
                KernelFrames {
                    neighbours: 0.8,
                    span: 20 << 30,
                },
            )])
        };
        let pooled = one("stride:heap=16M,every=1,iters=4,pool=8G");
        // Without runs that recorded frames, the pool as asked; with them, as measured.
        assert_eq!(
            frames_for(&pooled, &BTreeMap::new()),
            Some((
                KernelFrames {
                    neighbours: 0.0,
                    span: 8 << 30
                },
                true
            ))
        );
        let m = measured(&pooled.to_string());
        assert_eq!(
            frames_for(&pooled, &m),
            Some((m[&pooled.to_string()], true))
        );
        let plain = one("stride:heap=16M,every=1,iters=4");
        let m = measured(&plain.to_string());
        assert_eq!(frames_for(&plain, &m), Some((m[&plain.to_string()], false)));
        assert_eq!(frames_for(&plain, &BTreeMap::new()), None);
        // The model's own pair of runs does not carry the pool: the frames do.
        let pair = model_pair(&pooled).unwrap();
        assert!(!pair.small.contains("pool"), "{}", pair.small);
    }
}
