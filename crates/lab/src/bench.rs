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
/// signal stopped it early (only whole configurations are kept then, none summarized).
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

/// The loop of [`run`]; the signal that stopped it, if one did.
fn run_all(
    req: &BenchRequest,
    session: &mut Option<KnobSession>,
    measurer: &mut dyn Measurer,
    progress: &mut dyn FnMut(&str),
    configs: &mut Vec<LabConfig>,
) -> anyhow::Result<Option<i32>> {
    let (total, mut done) = (req.pages.len() * req.specs.len() * req.repeat as usize, 0);
    for config_pages in &req.pages {
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
        for spec in &req.specs {
            let mut config = LabConfig {
                subject: spec.to_string(),
                label: label.clone(),
                pages: config_pages.clone(),
                thp: req.mode.as_str().to_string(),
                ..Default::default()
            };
            for r in 0..req.repeat {
                if let Some(sig) = session::interrupted() {
                    return Ok(Some(sig));
                }
                done += 1;
                progress(&format!(
                    "[{done}/{total}] {spec} under {label} (run {}/{})",
                    r + 1,
                    req.repeat
                ));
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
                        Some(sig) => return Ok(Some(sig)),
                        None => return Err(e),
                    },
                };
                if let Some(sig) = outcome.interrupted {
                    return Ok(Some(sig));
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
                config.runs.push(outcome.measurement);
            }
            configs.push(config);
        }
    }
    Ok(None)
}
