//! The kernel's side of `pagelab validate -- PROGRAM`: the program run natively under each
//! configuration and THP mode, several times, with the THP settings the kernel held read
//! back for the model.
//!
//! The program runs as it is, with pagelab's environment and nothing added (no malloc
//! tunable, no shim), so that the one captured trace is the program every native run ran:
//! in madvise mode only the program's own `madvise(MADV_HUGEPAGE)` calls ask for large
//! pages, and the model sees those calls in the trace.

use super::config_label;
use crate::measure::{measure, Host};
use crate::runner::RunSpec;
use crate::session::{self, KnobSession};
use crate::sysfs::{Sysfs, ThpMode};
use crate::LabError;
use anyhow::Context;
use pagelab_core::PageSize;
use pagelab_report::Measurement;
use std::ffi::OsString;

/// What to run.
#[derive(Clone, Debug)]
pub struct ProgramOptions {
    /// The program and its arguments.
    pub argv: Vec<OsString>,
    /// Page-size configurations; each a set of sizes (4K alone is the baseline).
    pub configs: Vec<Vec<PageSize>>,
    /// The THP modes, each with every configuration.
    pub modes: Vec<ThpMode>,
    /// Native runs per (configuration, mode), for the kernel's run-to-run noise.
    pub repeat: usize,
}

/// One configuration in one mode, as the kernel ran it.
#[derive(Clone, Debug)]
pub struct NativeCase {
    /// The sizes enabled.
    pub pages: Vec<PageSize>,
    /// Their label (`4K`, `64K`, `all`).
    pub label: String,
    /// The THP mode.
    pub mode: ThpMode,
    /// The settings the kernel held, in the `linux-thp` policy's words.
    pub settings: String,
    /// Each run's measurement.
    pub runs: Vec<Measurement>,
}

/// Runs the program `opts.repeat` times under every (mode, configuration), restoring every
/// knob before returning, whatever happens. A program that fails (non-zero exit or a signal)
/// is an error naming the case: its counts would not be the program's whole life.
pub fn run_native(
    sysfs: &Sysfs,
    opts: &ProgramOptions,
    mut progress: impl FnMut(&str),
) -> Result<Vec<NativeCase>, LabError> {
    sysfs.require_thp()?;
    let thp_sizes = sysfs.thp_sizes();
    let mut session = KnobSession::begin(sysfs)?;
    let total = opts.modes.len() * opts.configs.len() * opts.repeat;
    let spec = RunSpec {
        argv: opts.argv.clone(),
        env: Vec::new(),
        capture_stdout: true,
    };
    let name = spec.argv.first().cloned().unwrap_or_default();
    let mut out = Vec::new();
    let mut step = 0;
    for &mode in &opts.modes {
        for pages in &opts.configs {
            let label = config_label(pages, &thp_sizes);
            session
                .configure(pages, mode)
                .with_context(|| format!("configuring {label} in {mode} mode"))?;
            let settings = super::replay::current_settings(sysfs)?;
            let mut case = NativeCase {
                pages: pages.clone(),
                label,
                mode,
                settings,
                runs: Vec::new(),
            };
            for _ in 0..opts.repeat {
                step += 1;
                progress(&format!(
                    "[{step}/{total}] native run under {} ({mode})",
                    case.label
                ));
                let measured = match session::interrupted() {
                    Some(signal) => Err(LabError::Interrupted { signal }.into()),
                    None => measure(&mut Host::new(sysfs), &spec, &mut |pid| {
                        session.note_program(pid, &name.to_string_lossy())
                    }),
                };
                let run = match measured {
                    Ok(run) => run,
                    Err(e) => {
                        let interrupt = LabError::interrupt_in(&e).or_else(session::interrupted);
                        session.restore()?;
                        return Err(match interrupt {
                            Some(signal) => LabError::Interrupted { signal },
                            None => e.into(),
                        });
                    }
                };
                if let Some(signal) = run.interrupted.or_else(session::interrupted) {
                    session.restore()?;
                    return Err(LabError::Interrupted { signal });
                }
                if run.measurement.exit.code != Some(0) {
                    session.restore()?;
                    return Err(anyhow::anyhow!(
                        "`{}` failed under {} ({mode}): {:?}; validate needs a program that succeeds",
                        name.to_string_lossy(),
                        case.label,
                        run.measurement.exit
                    )
                    .into());
                }
                case.runs.push(run.measurement);
            }
            out.push(case);
        }
    }
    session.restore()?;
    Ok(out)
}
