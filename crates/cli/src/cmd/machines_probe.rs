//! `pagelab machines --measure`'s probe in the model: the probe's loads
//! ([`pagelab_lab::probe::overlap`]) run through the model of the file being measured, and
//! what they give the file: a walk's own cost, and whether an interval between walks stays.

use super::bench_predict::KernelFrames;
use super::machines_measure::Measured;
use anyhow::{Context, Result};
use pagelab_cache::MAX_WALK_CYCLES;
use pagelab_core::PageSize;
use pagelab_lab::probe::overlap::OverlapProbe;
use pagelab_workloads::Visit;

/// Steps of the model's two runs of each of the probe's loads ([`probe_in_model`]): their
/// difference is the steady state.
const MODEL_STEPS: (u64, u64) = (100_000, 200_000);

/// The model's cycles per load of the probe's loads, as [`model_of_probe`] runs them.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ProbeModel {
    /// One line per 4K page: `[order][page]`, dependent then independent, 4K then 2M pages.
    pub spread: [[f64; 2]; 2],
    /// Packed lines on a 2M page: dependent, independent.
    pub packed: [f64; 2],
    /// The spread lines visited in address order: `[order][page]` as [`ProbeModel::spread`].
    pub sequential: [[f64; 2]; 2],
}

/// The probe's loads ([`pagelab_lab::probe::overlap`]: `count` lines one per 4K page on 4K
/// and on 2M-advised pages, and packed, each load on the last and independent) in the
/// model of the machine file at `path` (`--virt nested`): its `lines` workload visits the
/// same lines in the same order. The lines one per 4K page visited at random lie on frames
/// placed as `walk_frames` says where given (the walk measurement's pool: [`walk_frames`]),
/// else as the file's `[frames]` says.
///
/// # Errors
/// A file the model cannot time with, or a run that fails.
pub fn model_of_probe(
    path: &str,
    count: u64,
    walk_frames: Option<KernelFrames>,
) -> Result<ProbeModel> {
    use super::bench_predict::{steady_state, with_frames, ModelPair, DEFAULT_VIRT};
    let (cfg, machine) = pagelab::model::machine_study_config(Some(path), Some("4K,2M"), None)?;
    let file_cost = pagelab::model::cost_config(machine.as_ref(), &cfg, Some(DEFAULT_VIRT))?
        .context("a measured machine file has caches")?;
    let walk_cost = walk_frames.map(|f| with_frames(&file_cost, &f));
    let run = |spacing: &str, order: &str, visit: Visit| {
        let cost = match (&walk_cost, spacing, visit) {
            (Some(c), "4K", Visit::Random) => c,
            _ => &file_cost,
        };
        let w = |steps: u64| {
            format!(
                "lines:lines={count},spacing={spacing},order={order},visit={},steps={steps}",
                visit.name()
            )
        };
        let pair = ModelPair {
            small: w(MODEL_STEPS.0),
            large: w(MODEL_STEPS.1),
            ops: MODEL_STEPS.1 - MODEL_STEPS.0,
        };
        let what = format!("the probe's {order} lines, visited {}", visit.name());
        steady_state(&cfg, cost, &pair, &what)
    };
    let mut out = ProbeModel {
        spread: [[0.0; 2]; 2],
        packed: [0.0; 2],
        sequential: [[0.0; 2]; 2],
    };
    for (i, order) in ["dependent", "independent"].into_iter().enumerate() {
        let spread = run("4K", order, Visit::Random)?;
        out.spread[i] = [spread[0], spread[1]];
        out.packed[i] = run("64", order, Visit::Random)?[1];
        let in_order = run("4K", order, Visit::Sequential)?;
        out.sequential[i] = [in_order[0], in_order[1]];
    }
    Ok(out)
}

/// Where the walk measurement's 4K frames lay, as the model places them, where they were
/// drawn from a pool ([`pagelab_lab::probe::overlap::walk_pool`]): over the blocks they
/// fell in, as a pooled kernel's are ([`super::bench_predict::kernel_frames`]). `None`
/// where the kernel's allocator placed them, or pagemap hid them: the machine file's
/// `[frames]` then.
pub fn walk_frames(ov: &OverlapProbe) -> Option<KernelFrames> {
    let f = ov.walk_frames?;
    ov.walk_pool.is_ok().then_some(KernelFrames {
        neighbours: f.neighbours,
        span: f.blocks * (2 << 20),
    })
}

/// The probe's loads as measured and as the model of the machine file at `path` puts them
/// ([`model_of_probe`]). Lines of a table, cycles at the measured clock.
///
/// # Errors
/// A file the model cannot time with, or a run that fails.
pub fn probe_in_model(path: &str, m: &Measured) -> Result<Vec<String>> {
    let p = &m.probe;
    let count = p.walk_pages;
    let model = model_of_probe(path, count, walk_frames(p))?;
    let spread = format!("one per 4K over {}", pagelab_core::Bytes(count * 4096));
    let in_order = "the same, in order".to_string();
    let packed = format!("packed into {}", pagelab_core::Bytes(count * 64));
    let mut out = vec![
        String::new(),
        format!(
            "the probe's loads ({count} lines), measured and in the model of this file \
             (--virt {}; the `lines` workload), cycles per load at {:.2} GHz:",
            super::bench_predict::DEFAULT_VIRT,
            m.ghz
        ),
        format!(
            "{:<20}  {:<4}  {:<11}  {:>11}  {:>8}  {:>7}  {:>14}",
            "lines", "page", "order", "measured ns", "= cycles", "model", "model/measured"
        ),
    ];
    let pick = |t: (f64, f64), i: usize| if i == 0 { t.0 } else { t.1 };
    for (i, order) in ["dependent", "independent"].into_iter().enumerate() {
        let rows = [
            (&spread, "4K", pick(p.walk_base, i), model.spread[i][0]),
            (&spread, "2M", pick(p.host.spread, i), model.spread[i][1]),
            (
                &in_order,
                "4K",
                pick(p.sequential[0], i),
                model.sequential[i][0],
            ),
            (
                &in_order,
                "2M",
                pick(p.sequential[1], i),
                model.sequential[i][1],
            ),
        ];
        for (label, page, measured, modelled) in rows {
            out.push(row(label, page, order, measured, m.ghz, modelled));
        }
    }
    for (i, order) in ["dependent", "independent"].into_iter().enumerate() {
        let measured = pick(p.host.packed, i);
        out.push(row(&packed, "2M", order, measured, m.ghz, model.packed[i]));
    }
    Ok(out)
}

fn row(label: &str, page: &str, order: &str, ns: f64, ghz: f64, modelled: f64) -> String {
    let cycles = ns * ghz;
    format!(
        "{label:<20}  {page:<4}  {order:<11}  {ns:>11.2}  {cycles:>8.1}  {modelled:>7.1}  {:>14.2}",
        modelled / cycles
    )
}

/// A walk's own cost, in cycles: what a walk adds to a dependent load on the machine (the
/// probe's spread lines less its packed ones) beyond what the same walk's reads add in
/// `model`, the probe in the model of a file whose `costs.walk` is 0 ([`model_of_probe`]),
/// which reads every entry through the caches and charges nothing else. The splintered walk of a guest 2M page over 4K host
/// pages gives it where the host's page is 4K: its frames are one 2M block whatever the
/// guest's free lists hold, so its reads are the same in the model as on the machine. Else
/// the walk of 4K pages gives it. `None` where neither walk showed, or THP gave the probe
/// no 2M pages; with the measured and the model's figure otherwise.
pub fn walk_cost(model: &ProbeModel, ov: &OverlapProbe, ghz: f64) -> Option<WalkCost> {
    if !ov.host.huge_ok {
        return None;
    }
    let packed = ov.host.packed.0;
    let (kind, measured, modelled) = if ov.host.host_page() == Some(PageSize::K4) {
        ("splintered", ov.host.spread.0, model.spread[0][1])
    } else {
        ("4K", ov.walk_base.0, model.spread[0][0])
    };
    let measured = (measured - packed) * ghz;
    let modelled = modelled - model.packed[0];
    if measured <= 0.0 {
        return None;
    }
    Some(WalkCost {
        kind,
        measured,
        modelled,
        cycles: (measured - modelled)
            .round()
            .clamp(0.0, f64::from(MAX_WALK_CYCLES)) as u32,
    })
}

/// What [`interval_check`] found: the splintered walks' independent loads, cycles, as
/// measured and in the model without an interval, and the interval they were read as.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct IntervalCheck {
    /// The machine's cycles per load.
    pub measured: f64,
    /// The model's, without an interval.
    pub modelled: f64,
    /// The interval read from the counts of walks in flight, cycles.
    pub interval: u32,
}

impl IntervalCheck {
    /// Whether the interval stays: the model without it is faster than the machine.
    pub fn kept(&self) -> bool {
        self.modelled < self.measured
    }

    pub(crate) fn text(&self) -> String {
        let (verdict, result) = if self.kept() {
            (
                "the interval makes up some of the difference",
                self.interval,
            )
        } else {
            ("an interval would only slow it further", 0)
        };
        format!(
            "the interval against the model: without one, the spread lines' independent loads \
             on 2M-advised pages take {:.1} cycles in the model of this file, {:.1} on the \
             machine; {verdict}: walk_interval = {result}",
            self.modelled, self.measured
        )
    }
}

/// An interval between walks (`interval` cycles, read from the splintered walks:
/// [`OverlapProbe::walk_interval_ns`]) held to the loads it was read from: the spread lines
/// on 2M-advised pages, independent, in `model` (the probe in the model of a file without
/// an interval: [`model_of_probe`]), against the machine. The interval slows the model's splintered walks down;
/// where the model without it is already as slow as the machine on those loads or slower,
/// what the two counts of walks in flight differed by is not an interval (on this
/// project's Emerald Rapids guest the model took 15.5-17.3 cycles where the machine took
/// 11.0-12.4, and two counts 1.5 times apart set an interval of 8 cycles that took the
/// every-page strides' modelled speed-up from 1.3-1.4 to 1.0: docs/cost.md, session 42).
pub fn interval_check(
    model: &ProbeModel,
    ov: &OverlapProbe,
    ghz: f64,
    interval: u32,
) -> IntervalCheck {
    IntervalCheck {
        measured: ov.host.spread.1 * ghz,
        modelled: model.spread[1][1],
        interval,
    }
}

/// What [`walk_cost`] found.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct WalkCost {
    /// The walk it came from: `splintered` or `4K`.
    pub kind: &'static str,
    /// Cycles the walk adds to a dependent load, measured and in the model.
    pub measured: f64,
    pub modelled: f64,
    /// Their difference, rounded, at least 0: `costs.walk`.
    pub cycles: u32,
}

impl WalkCost {
    pub(crate) fn text(&self) -> String {
        format!(
            "a walk's own cost: {} walks add {:.1} cycles to a dependent load, their reads \
             {:.1} in the model: walk = {} cycles",
            self.kind, self.measured, self.modelled, self.cycles
        )
    }
}
