//! Running a real program once under a configuration, and measuring it.
//!
//! [`run_once`] starts the program with the configuration's environment ([`config_env`]),
//! and measures: wall time, user and system time, minor and major faults (the child's
//! `wait4` resource usage), the change in the kernel's THP and hugetlb counters
//! ([`crate::counters`]), hardware counters where the CPU has them ([`crate::perf`]), peak
//! RSS, and how the program ended. The caller's [`crate::session::KnobSession`] has already set
//! the knobs and catches SIGINT, SIGTERM, SIGHUP and SIGQUIT; a signal pagelab receives while
//! the program runs is passed on to the program, pagelab waits for it, and the outcome says
//! it was interrupted, so the caller can restore the knobs and exit 128+signal.
//!
//! [`summarize`] turns repetitions into medians and spreads, and speed-ups over the 4K
//! baseline.

use crate::counters;
use crate::measure::{measure, Execution, ExitFolios, Host};
use crate::perf::HwCounters;
use crate::session::{self, KnobSession};
use crate::shim;
use crate::sysfs::{Sysfs, ThpMode};
use anyhow::{bail, Context, Result};
use pagelab_core::PageSize;
use pagelab_report::{ExitInfo, LabConfig, Measurement, Summary};
use pagelab_sys::process::{wait_with_usage, Ended, Pidfd};
use std::collections::BTreeMap;
use std::ffi::{OsStr, OsString};
use std::io::Read;
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A program to run once.
#[derive(Clone, Debug, Default)]
pub struct RunSpec {
    /// The program and its arguments (`argv[0]` is looked up in `PATH`).
    pub argv: Vec<OsString>,
    /// Environment variables to set on top of pagelab's own environment.
    pub env: Vec<(OsString, OsString)>,
    /// Collect the program's standard output into [`RunOutcome::stdout`] instead of letting it
    /// through.
    pub capture_stdout: bool,
    /// Run the program without address-space randomisation (as `setarch -R`).
    pub no_randomize: bool,
    /// Count the large folios each process of the program has mapped at its exit
    /// ([`crate::folios`]), following the processes it forks with `ptrace`; root only (the
    /// frames are root's to see), so elsewhere [`Execution::exit_folios`] stays `None`.
    pub folios_at_exit: bool,
}

pub use crate::measure::RunOutcome;

/// How often the watching thread looks for a signal caught by the session and samples the
/// hugetlb pools.
const SIGNAL_POLL: Duration = Duration::from_millis(5);

/// Runs `spec.argv` once on this machine (the configuration's knobs are already set by the
/// caller's `KnobSession`) and measures it through [`Host`]. Errors when there is no
/// program, when it cannot be started, or when pagelab was already interrupted before the run.
///
/// The program gets a parent-death signal (SIGKILL when pagelab dies, even by SIGKILL), and
/// with a `session` its pid is noted in the session's journal, so the next pagelab can end it
/// should that signal be lost.
pub fn run_once(
    sysfs: &Sysfs,
    spec: &RunSpec,
    mut session: Option<&mut KnobSession>,
) -> Result<RunOutcome> {
    let program = spec.argv.first().cloned().unwrap_or_default();
    measure(
        &mut Host::new(sysfs),
        spec,
        &mut |pid| match session.as_mut() {
            Some(s) => s.note_program(pid, &program.to_string_lossy()),
            None => Ok(()),
        },
    )
}

/// [`Host`]'s execution: starts the program, forwards signals, samples the pools, waits.
pub(crate) fn execute(
    sysfs: &Sysfs,
    spec: &RunSpec,
    started: &mut dyn FnMut(u32) -> Result<()>,
) -> Result<Execution> {
    let Some((program, args)) = spec.argv.split_first() else {
        bail!("no program to run: give one after `--`");
    };
    if let Some(sig) = session::interrupted() {
        // Typed, so that callers stop as after an interrupted run and the command exits
        // 128 + signal: the signal can land between a caller's own check and this one.
        return Err(
            anyhow::Error::new(crate::LabError::Interrupted { signal: sig })
                .context(format!("{} had not started", show(program))),
        );
    }
    let report = shim::ReportFile::for_env(&spec.env)?;
    let mut cmd = Command::new(program);
    cmd.args(args).envs(spec.env.iter().map(|(k, v)| (k, v)));
    if let Some(r) = &report {
        cmd.env("PAGELAB_SHIM_REPORT", &r.path);
    }
    if spec.capture_stdout {
        cmd.stdout(Stdio::piped());
    }
    let parent = std::process::id();
    let counter = exit_folio_counter(spec);
    // SAFETY: die_with_parent makes only async-signal-safe system calls (prctl, getppid, kill),
    // as code between fork and exec must; so do no_randomize (personality) and trace_me
    // (one ptrace call).
    unsafe {
        let no_randomize = spec.no_randomize;
        let traced = counter.is_some();
        cmd.pre_exec(move || {
            if no_randomize {
                pagelab_sys::process::no_randomize()?;
            }
            pagelab_sys::process::die_with_parent(parent)?;
            if traced {
                pagelab_sys::trace::trace_me()?;
            }
            Ok(())
        });
    }
    let hw = HwCounters::open();
    // Opened on this thread, which forks the program: its copy counts from its exec on.
    let exec_faults = crate::perf::ExecFaults::open();
    hw.enable();
    let start = Instant::now();
    let mut child = match cmd.spawn() {
        Ok(child) => child,
        Err(e) => {
            hw.disable();
            return Err(e).with_context(|| format!("cannot run {}", show(program)));
        }
    };
    let pid = child.id();
    let reader = child.stdout.take().map(|mut out| {
        std::thread::spawn(move || {
            let mut buf = Vec::new();
            let _ = out.read_to_end(&mut buf);
            buf
        })
    });
    let done = Arc::new(AtomicBool::new(false));
    let forwarder = forward_signals(pid, done.clone(), counters::PoolSampler::new(sysfs));
    // A failure to note the program must not leave it unwaited: wait first, then report.
    let noted = started(pid);
    let mut exit_folios = counter.as_ref().map(|_| Ok(ExitFolios::default()));
    let waited = match &counter {
        // Each process is read at its exit, on this thread (the tracer: it forked the
        // program); a failed reading leaves the whole count unknown, with its reason.
        Some(c) => pagelab_sys::trace::follow(pid, |p| {
            if let Some(Ok(total)) = &mut exit_folios {
                match c.by_mapping(p) {
                    Ok(maps) => {
                        for m in &maps {
                            total.folios.add(&m.folios);
                        }
                        total.processes += 1;
                        total.mappings.push((p, maps));
                    }
                    Err(e) => exit_folios = Some(Err(format!("process {p}: {e}"))),
                }
            }
        }),
        None => wait_with_usage(pid),
    };
    let wall = start.elapsed();
    hw.disable();
    done.store(true, Ordering::SeqCst);
    let (forwarded, pool_peaks) = forwarder.join().unwrap_or_default();
    let (ended, usage) = waited.with_context(|| format!("waiting for {}", show(program)))?;
    noted?;
    let stdout = reader
        .map(|r| r.join().unwrap_or_default())
        .unwrap_or_default();
    let shim = report.map(|r| {
        let rep = r.read();
        let peak = if rep.processes > 0 {
            rep.peak_rss_bytes
        } else {
            0
        };
        (peak, rep.metrics())
    });
    Ok(Execution {
        wall,
        usage,
        exec_faults: exec_faults.read(),
        exit_folios: match exit_folios {
            Some(Err(why)) => {
                eprintln!("pagelab: the folios mapped at exit are unknown: {why}");
                None
            }
            other => other.and_then(Result::ok),
        },
        exit: exit_info(ended),
        hw: hw.read(),
        pool_peaks,
        shim,
        stdout,
        interrupted: forwarded.or_else(session::interrupted),
    })
}

/// The reader of the folios at exit when `spec` asks for them and this is root; otherwise
/// `None`, said once on standard error when asked for.
fn exit_folio_counter(spec: &RunSpec) -> Option<crate::folios::FolioCounter> {
    if !spec.folios_at_exit {
        return None;
    }
    if !pagelab_sys::process::is_root() {
        eprintln!("pagelab: not root: the folios each process maps at exit are not counted (/proc/kpageflags and pagemap's frame numbers are root's)");
        return None;
    }
    match crate::folios::FolioCounter::open() {
        Ok(c) => Some(c),
        Err(e) => {
            eprintln!("pagelab: cannot read /proc/kpageflags ({e}): the folios each process maps at exit are not counted");
            None
        }
    }
}

/// What the watching thread saw: the signal it passed on, each pool's peak use.
type Watched = (Option<i32>, Vec<(String, u64)>);

/// Until `done`: passes the first signal the session catches on to the child, through a
/// pidfd (so a reaped child's reused pid can never be hit), and samples the hugetlb pools.
fn forward_signals(
    pid: u32,
    done: Arc<AtomicBool>,
    mut pools: counters::PoolSampler,
) -> std::thread::JoinHandle<Watched> {
    let pidfd = Pidfd::open(pid);
    std::thread::spawn(move || {
        let mut sent = None;
        while !done.load(Ordering::SeqCst) {
            if let (None, Some(sig)) = (sent, session::interrupted()) {
                // A failure means the child is already gone: nothing left to tell.
                let _ = match &pidfd {
                    Ok(fd) => fd.signal(sig),
                    Err(_) => pagelab_sys::process::kill(pid, sig),
                };
                sent = Some(sig);
            }
            pools.sample();
            std::thread::sleep(SIGNAL_POLL);
        }
        pools.sample();
        (sent, pools.peaks())
    })
}

fn exit_info(ended: Ended) -> ExitInfo {
    match ended {
        Ended::Exited(code) => ExitInfo {
            code: Some(code),
            signal: None,
        },
        Ended::Killed(sig) => ExitInfo {
            code: None,
            signal: Some(sig),
        },
    }
}

fn show(s: &OsStr) -> String {
    format!("`{}`", s.to_string_lossy())
}

/// Whether `pages` offers anything beyond the 4K base page.
fn has_large(pages: &[PageSize]) -> bool {
    pages.iter().any(|&p| p > PageSize::K4)
}

/// The environment that makes a program's heap use the configuration:
///
/// - `GLIBC_TUNABLES` gains `glibc.malloc.hugetlb=1` when sizes above 4K are enabled in
///   madvise mode (glibc's malloc then advises its heap), or `glibc.malloc.hugetlb=<bytes>`
///   for a hugetlb size (malloc maps with `MAP_HUGETLB` of that size); tunables already in
///   pagelab's environment are kept, except an earlier `glibc.malloc.hugetlb`;
/// - with `shim`, `LD_PRELOAD` gains the shim (after anything already preloaded), with
///   `PAGELAB_SHIM_ADVISE=1` and `PAGELAB_SHIM_MIN` (the smallest enabled size above 4K) in
///   madvise mode and `PAGELAB_SHIM_HUGETLB` for a hugetlb size. The 4K baseline preloads it
///   too (it then changes nothing), so every configuration pays the same for it.
pub fn config_env(
    pages: &[PageSize],
    mode: ThpMode,
    hugetlb: Option<PageSize>,
    shim: bool,
) -> Result<Vec<(OsString, OsString)>> {
    let advise = mode == ThpMode::Madvise && has_large(pages);
    let tunable = match hugetlb {
        Some(size) => Some(size.bytes().to_string()),
        None => advise.then(|| "1".to_string()),
    };
    let mut env = Vec::new();
    if let Some(value) = tunable {
        let existing = std::env::var("GLIBC_TUNABLES").unwrap_or_default();
        let merged = merge_tunables(&existing, &format!("glibc.malloc.hugetlb={value}"));
        env.push(("GLIBC_TUNABLES".into(), merged.into()));
    }
    if shim {
        let path = shim::shim_path()?;
        let mut preload = std::env::var_os("LD_PRELOAD").unwrap_or_default();
        if !preload.is_empty() {
            preload.push(":");
        }
        preload.push(path.as_os_str());
        env.push(("LD_PRELOAD".into(), preload));
        if advise {
            env.push(("PAGELAB_SHIM_ADVISE".into(), "1".into()));
            let min = pages.iter().copied().filter(|&p| p > PageSize::K4).min();
            if let Some(min) = min {
                env.push(("PAGELAB_SHIM_MIN".into(), min.bytes().to_string().into()));
            }
        }
        if let Some(size) = hugetlb {
            env.push((
                "PAGELAB_SHIM_HUGETLB".into(),
                size.bytes().to_string().into(),
            ));
        }
    }
    Ok(env)
}

/// `existing` (a `GLIBC_TUNABLES` value, `name=value` pairs joined by `:`) with `tunable`
/// added, replacing an earlier setting of the same name.
pub fn merge_tunables(existing: &str, tunable: &str) -> String {
    let name = tunable.split('=').next().unwrap_or(tunable);
    let mut parts: Vec<&str> = existing
        .split(':')
        .filter(|p| !p.is_empty() && p.split('=').next() != Some(name))
        .collect();
    parts.push(tunable);
    parts.join(":")
}

/// A configuration as people read it: `4K`, `64K`, `64K+2M`, `2M hugetlb`, `64K+2M hugetlb`.
pub fn config_label(pages: &[PageSize], hugetlb: Option<PageSize>) -> String {
    let large: Vec<String> = pages
        .iter()
        .filter(|&&p| p > PageSize::K4)
        .map(|p| p.to_string())
        .collect();
    match (large.is_empty(), hugetlb) {
        (true, None) => "4K".into(),
        (true, Some(h)) => format!("{h} hugetlb"),
        (false, None) => large.join("+"),
        (false, Some(h)) => format!("{} + {h} hugetlb", large.join("+")),
    }
}

/// Whether `config` is the 4K baseline: no size above 4K and no hugetlb pool.
pub fn is_baseline(config: &LabConfig) -> bool {
    !has_large(&config.pages) && config.hugetlb.is_empty()
}

/// Fills `summary` of each config from its runs and `speedup_vs_4k` across configs.
///
/// Summaries (median, min, max, spread; see [`Summary::of`]) are made of `wall_seconds`,
/// `user_seconds`, `system_seconds`, `faults`, `major_faults`, `peak_rss_bytes`,
/// `faults_by_size/<size>` and `fallbacks_by_size/<size>` (a run without the key counts 0),
/// `hw/<counter>` (only when every run has the counter) and `metrics/<name>`. The speed-up
/// is the 4K baseline's median wall time over the config's, for configs whose subject also
/// ran the baseline (the baseline's own is 1).
pub fn summarize(configs: &mut [LabConfig]) {
    for c in configs.iter_mut() {
        c.summary = summary_of(&c.runs);
    }
    let baselines: BTreeMap<String, f64> = configs
        .iter()
        .filter(|c| is_baseline(c))
        .filter_map(|c| Some((c.subject.clone(), c.summary.get("wall_seconds")?.median)))
        .collect();
    for c in configs.iter_mut() {
        let wall = c.summary.get("wall_seconds").map(|s| s.median);
        c.speedup_vs_4k = match (baselines.get(&c.subject), wall) {
            (Some(&base), Some(wall)) if wall > 0.0 => Some(base / wall),
            _ => None,
        };
    }
}

fn summary_of(runs: &[Measurement]) -> BTreeMap<String, Summary> {
    let mut out = BTreeMap::new();
    let mut add = |name: String, values: Vec<f64>| {
        if let Some(s) = Summary::of(&values) {
            out.insert(name, s);
        }
    };
    type Get = fn(&Measurement) -> f64;
    let plain: [(&str, Get); 6] = [
        ("wall_seconds", |m| m.wall_seconds),
        ("user_seconds", |m| m.user_seconds),
        ("system_seconds", |m| m.system_seconds),
        ("faults", |m| m.faults as f64),
        ("major_faults", |m| m.major_faults as f64),
        ("peak_rss_bytes", |m| m.peak_rss_bytes as f64),
    ];
    for (name, get) in plain {
        add(name.into(), runs.iter().map(get).collect());
    }
    let keys = |f: fn(&Measurement) -> Vec<String>| {
        let mut k: Vec<String> = runs.iter().flat_map(f).collect();
        k.sort();
        k.dedup();
        k
    };
    for size in keys(|m| m.faults_by_size.keys().cloned().collect()) {
        let v = runs
            .iter()
            .map(|m| m.faults_by_size.get(&size).copied().unwrap_or(0) as f64);
        add(format!("faults_by_size/{size}"), v.collect());
    }
    for size in keys(|m| m.fallbacks_by_size.keys().cloned().collect()) {
        let v = runs
            .iter()
            .map(|m| m.fallbacks_by_size.get(&size).copied().unwrap_or(0) as f64);
        add(format!("fallbacks_by_size/{size}"), v.collect());
    }
    for name in keys(|m| m.hw.keys().cloned().collect()) {
        let v: Option<Vec<f64>> = runs
            .iter()
            .map(|m| m.hw.get(&name).copied().flatten().map(|x| x as f64))
            .collect();
        if let Some(v) = v {
            add(format!("hw/{name}"), v);
        }
    }
    for name in keys(|m| m.metrics.keys().cloned().collect()) {
        let v: Vec<f64> = runs
            .iter()
            .filter_map(|m| m.metrics.get(&name).copied())
            .collect();
        add(format!("metrics/{name}"), v);
    }
    out
}
