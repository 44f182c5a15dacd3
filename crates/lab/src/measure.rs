//! The [`Measurer`] seam: what the lab learns from the machine about one run of a program.
//!
//! Everything the lab measures comes through this trait: the program's own resource usage
//! (`wait4`), the kernel's counters (per-size mTHP stats, `/proc/vmstat`'s `thp_*`, the
//! hugetlb pools) and the hardware counters (perf). [`measure`] turns what a measurer reports
//! into one [`Measurement`] (deltas of the counters, per-size allocations and fallbacks), and
//! [`crate::runner::summarize`] turns measurements into medians, spreads and speed-ups; both
//! are the lab's own arithmetic, tested through [`fake::FakeMeasurer`] without root. The real
//! implementation is [`Host`].

pub mod fake;

use crate::counters::{self, CounterSnapshot};
use crate::perf::HwReading;
use crate::runner::RunSpec;
use crate::sysfs::Sysfs;
use anyhow::Result;
use pagelab_report::{ExitInfo, Measurement};
use std::collections::BTreeMap;
use std::time::Duration;

/// What one execution of a program gave, before the lab's arithmetic.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Execution {
    /// From just before the program started until it was reaped.
    pub wall: Duration,
    /// The program's own usage (its `wait4` resource usage, children it waited for included).
    pub usage: pagelab_sys::process::Usage,
    /// The program's (minor, major) faults from its exec on ([`crate::perf::ExecFaults`]),
    /// when the kernel counts them: `wait4`'s also hold those of the child before its exec.
    pub exec_faults: Option<(u64, u64)>,
    /// The large folios each of the program's processes had mapped at its exit, summed, when
    /// [`RunSpec::folios_at_exit`] asked for them and they could be read.
    pub exit_folios: Option<ExitFolios>,
    /// How it ended.
    pub exit: ExitInfo,
    /// Hardware counters over the run: each a count or `None`, with the reason when any is
    /// unavailable.
    pub hw: HwReading,
    /// Each hugetlb pool's peak pages in use during the run beyond those in use before, by size
    /// (`"2M"`); only pools that held pages.
    pub pool_peaks: Vec<(String, u64)>,
    /// What pagelab's LD_PRELOAD shim reported, if it was preloaded and reported: the
    /// program's own peak RSS (0 when unknown) and its named figures.
    pub shim: Option<(u64, Vec<(&'static str, f64)>)>,
    /// The program's standard output, when the spec asked to capture it.
    pub stdout: Vec<u8>,
    /// The held signal pagelab received (and passed on to the program) while it ran.
    pub interrupted: Option<i32>,
}

/// The large folios a program's processes had mapped at their exits ([`crate::folios`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ExitFolios {
    /// The folios, summed over the processes.
    pub folios: crate::folios::Folios,
    /// How many processes were read at their exit.
    pub processes: u64,
    /// Each process's mappings at its exit, in the order the processes exited.
    pub mappings: Vec<(u32, Vec<crate::folios::MapsFolios>)>,
}

/// Measures runs of programs.
///
/// Contract:
/// - [`Measurer::snapshot`] reads every kernel counter the measurer knows at one moment, keyed
///   as [`CounterSnapshot`] documents (`hugepages-64kB/anon_fault_alloc`,
///   `vmstat/thp_fault_alloc`, `hugetlb-2048kB/free_hugepages`); a counter it cannot read is
///   absent, never 0. The counters are system-wide and only grow or shrink as the kernel moves
///   them; reading them changes nothing.
/// - [`Measurer::execute`] starts `spec.argv` with `spec.env` added to pagelab's environment,
///   calls `started` with the program's pid once it runs (before it is waited for), and returns
///   only once the program is reaped. Hardware counters count from just before the start to
///   the reaping and nothing outside it; `usage` is the program's own, not pagelab's. A program
///   that ran and failed, or was killed, is `Ok` with its [`ExitInfo`]; `Err` means it never
///   ran (not found, not executable, interrupted before the start). A signal pagelab catches
///   meanwhile is passed on to the program and reported in [`Execution::interrupted`].
/// - The lab calls, for each run, `snapshot`, `execute`, `snapshot`, in that order, and
///   attributes the difference of the two snapshots to the run.
pub trait Measurer {
    /// The kernel's counters now.
    fn snapshot(&mut self) -> CounterSnapshot;

    /// Runs the program once and measures it (see the contract above).
    fn execute(
        &mut self,
        spec: &RunSpec,
        started: &mut dyn FnMut(u32) -> Result<()>,
    ) -> Result<Execution>;
}

/// The metric of the processes read at their exit (with [`RunSpec::folios_at_exit`]).
pub const EXIT_PROCESSES: &str = "exit_processes";
/// The metrics' prefix of anonymous folios mapped at exit, by size (`exit_anon_folios/64K`).
pub const EXIT_ANON_FOLIOS: &str = "exit_anon_folios";
/// The metrics' prefix of page-cache folios mapped at exit, by size (`exit_file_folios/2M`).
pub const EXIT_FILE_FOLIOS: &str = "exit_file_folios";

/// What one measured run gave: its [`Measurement`], the captured output, the signal.
#[derive(Clone, Debug, Default)]
pub struct RunOutcome {
    /// The figures of the run.
    pub measurement: Measurement,
    /// The program's standard output, when [`RunSpec::capture_stdout`] asked for it.
    pub stdout: Vec<u8>,
    /// The signal pagelab received (and passed on to the program) during the run, if any.
    pub interrupted: Option<i32>,
    /// Each process's mappings at its exit, in exit order, when the folios at exit were
    /// read ([`RunSpec::folios_at_exit`]); empty otherwise.
    pub exit_mappings: Vec<(u32, Vec<crate::folios::MapsFolios>)>,
}

/// Runs `spec` once through `m` and makes its [`Measurement`]: wall, user and system time,
/// minor and major faults (from the program's exec on when the measurer counts them so,
/// else `wait4`'s, which also hold the child's before its exec; `wait4`'s stay in
/// `metrics/rusage_minor_faults` and `metrics/rusage_major_faults`), the large folios mapped
/// at exit when counted (`metrics/exit_anon_folios/SIZE`, `metrics/exit_file_folios/SIZE`,
/// `metrics/exit_processes`), peak RSS (the shim's figure of the program's own peak when it
/// reported one, since `wait4`'s also counts pagelab's address space, which the child started
/// in before `exec`; `wait4`'s stays in `metrics/rusage_maxrss_bytes`), the kernel counters'
/// deltas and from them the THP allocations and fallbacks per size, hardware counters, the
/// hugetlb pools' peak use, the shim's figures, and how the program ended.
pub fn measure(
    m: &mut dyn Measurer,
    spec: &RunSpec,
    started: &mut dyn FnMut(u32) -> Result<()>,
) -> Result<RunOutcome> {
    let before = m.snapshot();
    let e = m.execute(spec, started)?;
    let delta = before.delta(&m.snapshot());
    let mut metrics = BTreeMap::new();
    metrics.insert(
        "rusage_maxrss_bytes".to_string(),
        e.usage.max_rss_bytes as f64,
    );
    for (size, pages) in &e.pool_peaks {
        metrics.insert(format!("hugetlb_peak_in_use/{size}"), *pages as f64);
    }
    // The program's own faults: from its exec on when the kernel counts them so, else
    // wait4's; wait4's stay in the metrics either way.
    metrics.insert("rusage_minor_faults".into(), e.usage.minor_faults as f64);
    metrics.insert("rusage_major_faults".into(), e.usage.major_faults as f64);
    let (faults, major_faults) = e
        .exec_faults
        .unwrap_or((e.usage.minor_faults, e.usage.major_faults));
    if let Some(x) = &e.exit_folios {
        metrics.insert(EXIT_PROCESSES.into(), x.processes as f64);
        for (prefix, by) in [
            (EXIT_ANON_FOLIOS, &x.folios.anon),
            (EXIT_FILE_FOLIOS, &x.folios.file),
        ] {
            for (size, n) in by {
                metrics.insert(format!("{prefix}/{size}"), *n as f64);
            }
        }
    }
    let mut peak_rss_bytes = e.usage.max_rss_bytes;
    if let Some((program_peak, figures)) = &e.shim {
        if *program_peak > 0 {
            peak_rss_bytes = *program_peak;
        }
        for (name, value) in figures {
            metrics.insert(name.to_string(), *value);
        }
    }
    let measurement = Measurement {
        wall_seconds: e.wall.as_secs_f64(),
        user_seconds: e.usage.user.as_secs_f64(),
        system_seconds: e.usage.system.as_secs_f64(),
        faults,
        major_faults,
        faults_by_size: counters::faults_by_size(&delta),
        fallbacks_by_size: counters::fallbacks_by_size(&delta),
        kernel_counters: delta,
        peak_rss_bytes,
        hw: e.hw.values,
        hw_unavailable: e.hw.unavailable,
        metrics,
        exit: e.exit,
    };
    Ok(RunOutcome {
        measurement,
        stdout: e.stdout,
        interrupted: e.interrupted,
        exit_mappings: e.exit_folios.map(|x| x.mappings).unwrap_or_default(),
    })
}

/// The real machine: `wait4`, the kernel's counters under a [`Sysfs`], perf_event_open.
#[derive(Clone, Debug)]
pub struct Host {
    sysfs: Sysfs,
}

impl Host {
    /// Measures through the counters under `sysfs` (the host's, or a fake tree's).
    pub fn new(sysfs: &Sysfs) -> Host {
        Host {
            sysfs: sysfs.clone(),
        }
    }
}

impl Measurer for Host {
    fn snapshot(&mut self) -> CounterSnapshot {
        CounterSnapshot::take(&self.sysfs)
    }

    fn execute(
        &mut self,
        spec: &RunSpec,
        started: &mut dyn FnMut(u32) -> Result<()>,
    ) -> Result<Execution> {
        crate::runner::execute(&self.sysfs, spec, started)
    }
}
