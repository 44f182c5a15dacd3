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
use pagelab_report::validate_mappings::{ExitMapping, ExitProcess};
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
    /// Run the program without address-space randomisation (as `setarch -R`), where the
    /// model lays it out as Linux does without randomisation.
    pub no_randomize: bool,
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
    /// Each run's processes' mappings at their exits, in exit order (empty where the folios
    /// at exit could not be read), for `validate --per-mapping`.
    pub exit_mappings: Vec<Vec<(u32, Vec<crate::folios::MapsFolios>)>>,
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
        no_randomize: opts.no_randomize,
        folios_at_exit: true,
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
                exit_mappings: Vec::new(),
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
                case.exit_mappings.push(run.exit_mappings);
            }
            out.push(case);
        }
    }
    session.restore()?;
    Ok(out)
}

impl NativeCase {
    /// Run `run`'s processes' mappings at their exits, in exit order, as
    /// `validate --per-mapping` compares them: pages present and large anonymous folios.
    pub fn exit_mappings_of(&self, run: usize) -> Vec<ExitProcess> {
        let Some(processes) = self.exit_mappings.get(run) else {
            return Vec::new();
        };
        processes
            .iter()
            .map(|(pid, maps)| ExitProcess {
                pid: *pid,
                mappings: maps
                    .iter()
                    .map(|m| ExitMapping {
                        start: m.start,
                        end: m.end,
                        name: m.name.clone(),
                        pages: m.pages,
                        zero: m.zero,
                        folios: m
                            .folios
                            .anon
                            .iter()
                            .map(|(s, n)| (s.to_string(), *n))
                            .collect(),
                    })
                    .collect(),
            })
            .collect()
    }
}

/// Where the kernel exposes `fault_around_bytes` (debugfs, when mounted).
pub const FAULT_AROUND_FILE: &str = "/sys/kernel/debug/fault_around_bytes";

/// Linux's default `fault_around_bytes`.
pub const DEFAULT_FAULT_AROUND: u64 = 64 << 10;

/// The kernel's `fault_around_bytes` and whether it was read (`false`: debugfs does not
/// expose it here, and the default, 64K, is assumed).
pub fn fault_around_bytes() -> (u64, bool) {
    match std::fs::read_to_string(FAULT_AROUND_FILE)
        .ok()
        .and_then(|s| s.trim().parse().ok())
    {
        Some(n) => (n, true),
        None => (DEFAULT_FAULT_AROUND, false),
    }
}

/// The read-around window, in 4K pages, of the block device holding `path`: its
/// `read_ahead_kb` (`/sys/class/bdi/MAJOR:MINOR/read_ahead_kb`); `None` when the device has
/// none (tmpfs) or it cannot be read.
pub fn read_ahead_pages(path: &std::path::Path) -> Option<u64> {
    use std::os::unix::fs::MetadataExt;
    let dev = std::fs::metadata(path).ok()?.dev();
    let bdi = format!(
        "/sys/class/bdi/{}:{}/read_ahead_kb",
        libc::major(dev),
        libc::minor(dev)
    );
    let kb: u64 = std::fs::read_to_string(bdi).ok()?.trim().parse().ok()?;
    Some(kb / 4)
}
