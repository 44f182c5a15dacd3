//! `pagelab bench`'s runs: every native kernel under every page-size configuration, each run a
//! fresh child (`pagelab bench-child`) measured through a [`Measurer`].

use crate::measure::{measure, Measurer};
use crate::native::{Advice, ChildReport, KernelSpec};
use crate::runner::{self, RunSpec};
use crate::session::{self, KnobSession};
use crate::sysfs::{Sysfs, ThpMode};
use crate::LabError;
use anyhow::{bail, Context};
use pagelab_core::PageSize;
use pagelab_report::{LabConfig, LabResult};
use std::ffi::OsString;

/// What to benchmark.
#[derive(Clone, Debug)]
pub struct BenchRequest {
    /// Page-size configurations, each the sizes available together (4K alone: the baseline).
    pub pages: Vec<Vec<PageSize>>,
    /// How the sizes are enabled.
    pub mode: ThpMode,
    /// Runs of each (kernel, configuration).
    pub repeat: u32,
    /// The kernels.
    pub specs: Vec<KernelSpec>,
    /// The child command: the pagelab binary and `bench-child`; `--advice=...` and the spec
    /// are appended.
    pub child: Vec<OsString>,
}

/// Whether `pages` is the 4K baseline.
pub fn is_baseline(pages: &[PageSize]) -> bool {
    pages.iter().all(|&p| p == PageSize::K4)
}

/// Runs every (configuration, kernel, repetition) in that order, with the knobs of `session`
/// (none: the knobs cannot be changed here, and only the baseline runs, its data advised
/// MADV_NOHUGEPAGE), and returns the summarized result; `interrupted_by` says when a held
/// signal stopped it early (only whole rounds are kept then, none summarized: see
/// [`run_all`]).
/// `progress` hears about each run. A child that fails is an error naming the kernel and
/// configuration.
pub fn run(
    sysfs: &Sysfs,
    req: &BenchRequest,
    mut session: Option<KnobSession>,
    measurer: &mut dyn Measurer,
    progress: &mut dyn FnMut(&str),
) -> Result<LabResult, LabError> {
    let mut result = LabResult::new("bench", sysfs.host_info());
    let outcome = run_all(req, &mut session, measurer, progress, &mut result.configs);
    if let Some(s) = session {
        s.restore().context("restoring the THP knobs")?;
    }
    result.interrupted_by = outcome?;
    if result.interrupted_by.is_none() {
        runner::summarize(&mut result.configs);
    }
    Ok(result)
}

/// Adds the rounds of `more` (a later [`run`] of some of the same kernels and
/// configurations) to `into`: each configuration's runs after its own, so that run `i` of
/// every configuration of a kernel still comes from one round; a configuration `into`
/// lacks is added. The summaries and speed-ups are made again over all the runs, and a
/// signal that stopped `more` is `into`'s (its whole rounds are kept, as [`run`] keeps them).
pub fn append_rounds(into: &mut LabResult, more: LabResult) {
    for c in more.configs {
        match into
            .configs
            .iter_mut()
            .find(|o| o.subject == c.subject && o.label == c.label)
        {
            Some(o) => o.runs.extend(c.runs),
            None => into.configs.push(c),
        }
    }
    into.failed_runs += more.failed_runs;
    into.interrupted_by = into.interrupted_by.or(more.interrupted_by);
    runner::summarize(&mut into.configs);
}

/// The loop of [`run`]; the signal that stopped it, if one did.
///
/// The runs go in rounds: each round runs every kernel once under every configuration, so
/// that a stretch of the machine being slower or faster (a neighbour of this VM, a
/// frequency change) falls on one run of each configuration rather than on all the runs
/// of one, and the ratios between configurations, which is what a user reads, stay
/// honest. The knobs are set again for each configuration in each round. When a signal
/// stops it, only the rounds that completed are kept (none: no configuration).
fn run_all(
    req: &BenchRequest,
    session: &mut Option<KnobSession>,
    measurer: &mut dyn Measurer,
    progress: &mut dyn FnMut(&str),
    configs: &mut Vec<LabConfig>,
) -> anyhow::Result<Option<i32>> {
    let (total, mut done) = (req.pages.len() * req.specs.len() * req.repeat as usize, 0);
    let mut slots: Vec<LabConfig> = req
        .pages
        .iter()
        .flat_map(|config_pages| {
            let label = runner::config_label(config_pages, None);
            req.specs.iter().map(move |spec| LabConfig {
                subject: spec.to_string(),
                label: label.clone(),
                pages: config_pages.clone(),
                thp: req.mode.as_str().to_string(),
                ..Default::default()
            })
        })
        .collect();
    let mut rounds = 0;
    let stopped = 'rounds: {
        for r in 0..req.repeat {
            for (c, config_pages) in req.pages.iter().enumerate() {
                let label = runner::config_label(config_pages, None);
                if let Some(s) = session.as_mut() {
                    s.configure(config_pages, req.mode)
                        .with_context(|| format!("configuring {label}"))?;
                }
                let advice = if is_baseline(config_pages) {
                    Advice::NoHugePage
                } else if req.mode == ThpMode::Madvise {
                    Advice::HugePage
                } else {
                    Advice::None
                };
                for (k, spec) in req.specs.iter().enumerate() {
                    if let Some(sig) = session::interrupted() {
                        break 'rounds Some(sig);
                    }
                    done += 1;
                    progress(&format!(
                        "[{done}/{total}] {spec} under {label} (run {}/{})",
                        r + 1,
                        req.repeat
                    ));
                    match one_run(req, session, measurer, spec, &label, advice)? {
                        Ok(run) => slots[c * req.specs.len() + k].runs.push(run),
                        Err(sig) => break 'rounds Some(sig),
                    }
                }
            }
            rounds += 1;
        }
        None
    };
    for mut slot in slots {
        slot.runs.truncate(rounds);
        if !slot.runs.is_empty() {
            configs.push(slot);
        }
    }
    Ok(stopped)
}

/// One child's run of `spec` under `label`: its measurement with the child's metrics, or
/// the signal that stopped it.
fn one_run(
    req: &BenchRequest,
    session: &mut Option<KnobSession>,
    measurer: &mut dyn Measurer,
    spec: &KernelSpec,
    label: &str,
    advice: Advice,
) -> anyhow::Result<Result<pagelab_report::Measurement, i32>> {
    let mut argv = req.child.clone();
    argv.push(format!("--advice={advice}").into());
    argv.push(spec.to_string().into());
    let run = RunSpec {
        argv,
        env: Vec::new(),
        capture_stdout: true,
        no_randomize: false,
        folios_at_exit: false,
    };
    let measured = measure(measurer, &run, &mut |pid| match session.as_mut() {
        Some(s) => s.note_program(pid, "pagelab bench-child"),
        None => Ok(()),
    });
    let mut outcome = match measured {
        Ok(outcome) => outcome,
        // A signal between the check above and the child's start.
        Err(e) => match crate::LabError::interrupt_in(&e) {
            Some(sig) => return Ok(Err(sig)),
            None => return Err(e),
        },
    };
    if let Some(sig) = outcome.interrupted {
        return Ok(Err(sig));
    }
    let exit = &outcome.measurement.exit;
    if exit.code != Some(0) {
        bail!(
            "the benchmark child for `{spec}` under {label} failed (exit code {:?}, \
             signal {:?}); its error is above",
            exit.code,
            exit.signal
        );
    }
    let report = ChildReport::from_stdout(&outcome.stdout)
        .with_context(|| format!("`{spec}` under {label}"))?;
    outcome.measurement.metrics = report.metrics;
    Ok(Ok(outcome.measurement))
}
