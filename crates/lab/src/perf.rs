//! Hardware counters (cycles, instructions, dTLB and iTLB misses) through `perf_event_open`.
//!
//! [`HwCounters::open`] opens each counter on this process, disabled, with `inherit` set, so
//! every child and thread started afterwards is counted too; the counts of exited children are
//! added to this process's counter by the kernel. The runner enables them just before it
//! starts the program and disables them once it has waited for it, so what is read is the
//! program's (plus the little the waiting parent does meanwhile).
//!
//! When the CPU or hypervisor exposes no hardware counters (this is usual in VMs), the open
//! fails and each counter is reported unavailable (`None`) with the reason: never 0.

use perf_event_open_sys::bindings::{
    perf_event_attr, PERF_COUNT_HW_CACHE_DTLB, PERF_COUNT_HW_CACHE_ITLB,
    PERF_COUNT_HW_CACHE_OP_READ, PERF_COUNT_HW_CACHE_RESULT_MISS, PERF_COUNT_HW_CPU_CYCLES,
    PERF_COUNT_HW_INSTRUCTIONS, PERF_COUNT_SW_PAGE_FAULTS_MAJ, PERF_COUNT_SW_PAGE_FAULTS_MIN,
    PERF_FLAG_FD_CLOEXEC, PERF_FORMAT_TOTAL_TIME_ENABLED, PERF_FORMAT_TOTAL_TIME_RUNNING,
    PERF_TYPE_HARDWARE, PERF_TYPE_HW_CACHE, PERF_TYPE_SOFTWARE,
};
use perf_event_open_sys::ioctls;
use std::collections::BTreeMap;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

/// The counters pagelab asks for, by the name results use.
pub const HW_COUNTERS: [&str; 4] = ["cycles", "instructions", "dtlb_misses", "itlb_misses"];

/// The (type, config) of a counter named in [`HW_COUNTERS`].
fn event_of(name: &str) -> (u32, u64) {
    let cache_miss = |cache: u32| {
        u64::from(cache)
            | (u64::from(PERF_COUNT_HW_CACHE_OP_READ) << 8)
            | (u64::from(PERF_COUNT_HW_CACHE_RESULT_MISS) << 16)
    };
    match name {
        "cycles" => (PERF_TYPE_HARDWARE, PERF_COUNT_HW_CPU_CYCLES.into()),
        "instructions" => (PERF_TYPE_HARDWARE, PERF_COUNT_HW_INSTRUCTIONS.into()),
        "dtlb_misses" => (PERF_TYPE_HW_CACHE, cache_miss(PERF_COUNT_HW_CACHE_DTLB)),
        "itlb_misses" => (PERF_TYPE_HW_CACHE, cache_miss(PERF_COUNT_HW_CACHE_ITLB)),
        other => unreachable!("unknown hardware counter {other}"),
    }
}

/// Opens one counter on this process (all CPUs), disabled, inherited by later children.
fn open_counter(name: &str) -> io::Result<OwnedFd> {
    let (type_, config) = event_of(name);
    open_event(type_, config)
}

/// Opens the event (`type_`, `config`) on this process, disabled, inherited by later children.
fn open_event(type_: u32, config: u64) -> io::Result<OwnedFd> {
    open_event_with(type_, config, false)
}

/// [`open_event`], and with `on_exec` enabled in each task (a child) only once it execs.
fn open_event_with(type_: u32, config: u64, on_exec: bool) -> io::Result<OwnedFd> {
    let mut attr = perf_event_attr {
        type_,
        size: std::mem::size_of::<perf_event_attr>() as u32,
        config,
        read_format: u64::from(PERF_FORMAT_TOTAL_TIME_ENABLED | PERF_FORMAT_TOTAL_TIME_RUNNING),
        ..Default::default()
    };
    attr.set_disabled(1);
    attr.set_inherit(1);
    attr.set_exclude_hv(1);
    attr.set_enable_on_exec(on_exec.into());
    // SAFETY: attr is a fully initialised perf_event_attr of the size it declares (the
    // bindings' own struct, zeroed where not set); pid 0 / cpu -1 is "this process on any
    // CPU", asking only for counts; the kernel returns a new descriptor or -1.
    let fd = unsafe {
        perf_event_open_sys::perf_event_open(&mut attr, 0, -1, -1, PERF_FLAG_FD_CLOEXEC.into())
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: fd is a descriptor the kernel just gave us and nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// What an open failure means, for people: the error, its errno, and what that means here.
fn explain(err: &io::Error) -> String {
    let errno = err.raw_os_error().unwrap_or(0);
    let meaning = match errno {
        libc::ENOENT | libc::EOPNOTSUPP | libc::ENODEV | libc::EINVAL => {
            "the CPU or hypervisor exposes no hardware counters"
        }
        libc::EACCES | libc::EPERM => {
            "not permitted: run as root or lower /proc/sys/kernel/perf_event_paranoid"
        }
        libc::ENOSYS => "this kernel has no perf events (CONFIG_PERF_EVENTS)",
        libc::EMFILE | libc::ENFILE => "no file descriptors left",
        _ => "the kernel refused the counter",
    };
    format!("{err}: {meaning}")
}

/// Hardware counters opened on this process: some available, some not (with why).
#[derive(Debug)]
pub struct HwCounters {
    counters: Vec<(&'static str, Result<OwnedFd, String>)>,
}

/// What [`HwCounters::read`] gives: each counter's count, or `None` with the reason.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct HwReading {
    /// Each counter of [`HW_COUNTERS`]: its count, or `None` when unavailable.
    pub values: BTreeMap<String, Option<u64>>,
    /// Why some counters are unavailable (every distinct reason, joined by `; `).
    pub unavailable: Option<String>,
}

impl HwCounters {
    /// Opens every counter of [`HW_COUNTERS`], disabled. Never fails: a counter the machine
    /// lacks is kept with the reason it could not be opened.
    pub fn open() -> HwCounters {
        let counters = HW_COUNTERS
            .iter()
            .map(|&name| (name, open_counter(name).map_err(|e| explain(&e))))
            .collect();
        HwCounters { counters }
    }

    /// Whether at least one counter is available.
    pub fn any_available(&self) -> bool {
        self.counters.iter().any(|(_, c)| c.is_ok())
    }

    /// Zeroes and starts every available counter (and its inherited copies).
    pub fn enable(&self) {
        // SAFETY: an ioctl on an open perf event descriptor we own, with the integer argument
        // 0 this request takes ("this event only"); nothing is written to our memory.
        self.ioctl_all(|fd| unsafe { ioctls::RESET(fd, 0) });
        // SAFETY: as for RESET.
        self.ioctl_all(|fd| unsafe { ioctls::ENABLE(fd, 0) });
    }

    /// Stops every available counter.
    pub fn disable(&self) {
        // SAFETY: as for RESET in `enable`.
        self.ioctl_all(|fd| unsafe { ioctls::DISABLE(fd, 0) });
    }

    /// Applies `request` to every open counter; a failing one is seen when read.
    fn ioctl_all(&self, request: impl Fn(i32) -> i32) {
        for fd in self.counters.iter().filter_map(|(_, c)| c.as_ref().ok()) {
            request(fd.as_raw_fd());
        }
    }

    /// Every counter's count (scaled up when the PMU was shared and the counter ran only part
    /// of the time it was enabled), or `None` with the reason.
    pub fn read(&self) -> HwReading {
        let mut reading = HwReading::default();
        // Each distinct reason with the counters it applies to, in counter order.
        let mut reasons: Vec<(String, Vec<&str>)> = Vec::new();
        for (name, counter) in &self.counters {
            let value = match counter {
                Ok(fd) => read_scaled(fd).map_err(|e| format!("reading failed: {e}")),
                Err(reason) => Err(format!("perf_event_open failed: {reason}")),
            };
            reading
                .values
                .insert(name.to_string(), value.as_ref().ok().copied());
            if let Err(reason) = value {
                match reasons.iter_mut().find(|(r, _)| *r == reason) {
                    Some((_, names)) => names.push(name),
                    None => reasons.push((reason, vec![name])),
                }
            }
        }
        if !reasons.is_empty() {
            let parts: Vec<String> = reasons
                .iter()
                .map(|(reason, names)| format!("{}: {reason}", names.join(", ")))
                .collect();
            reading.unavailable = Some(parts.join("; "));
        }
        reading
    }
}

/// The program's own page faults, minor and major, counted from its `exec` on: the kernel's
/// software events `page-faults-min`/`-maj` opened on this process disabled, inherited, and
/// enabled on exec. This process never execs, so only the started program's copy (and its
/// children's, once they exit) counts; the faults its child takes between `fork` and `exec`
/// (in a copy of pagelab's own address space) do not, where `wait4`'s counts include them
/// (about 25 on this machine: `ls /` faults 127 times by `wait4`, 100 by `perf stat`). As
/// with `wait4`, faults the kernel takes for the program through `get_user_pages` (execve's
/// copy of the arguments onto the new stack) are not the program's own and are not counted.
#[derive(Debug)]
pub struct ExecFaults {
    minor: io::Result<OwnedFd>,
    major: io::Result<OwnedFd>,
}

impl ExecFaults {
    /// Opens both counters; call it on the thread that starts the program, just before.
    pub fn open() -> ExecFaults {
        let open = |config: u32| open_event_with(PERF_TYPE_SOFTWARE, config.into(), true);
        ExecFaults {
            minor: open(PERF_COUNT_SW_PAGE_FAULTS_MIN),
            major: open(PERF_COUNT_SW_PAGE_FAULTS_MAJ),
        }
    }

    /// (minor, major) faults since the program's exec, once it was waited for; `None` when the
    /// kernel gave no counter (no perf events, or not permitted), or one could not be read.
    pub fn read(&self) -> Option<(u64, u64)> {
        let read = |c: &io::Result<OwnedFd>| read_scaled(c.as_ref().ok()?).ok();
        Some((read(&self.minor)?, read(&self.major)?))
    }
}

/// Reads `value, time_enabled, time_running` and scales the value to the enabled time.
fn read_scaled(fd: &OwnedFd) -> Result<u64, String> {
    let mut bytes = [0u8; 24];
    let n = rustix::io::read(fd, &mut bytes).map_err(|e| format!("{}", io::Error::from(e)))?;
    if n != bytes.len() {
        return Err(format!("short read ({n} bytes of 24)"));
    }
    let word = |i: usize| u64::from_ne_bytes(bytes[i * 8..i * 8 + 8].try_into().expect("8 bytes"));
    let [value, enabled, running] = [word(0), word(1), word(2)];
    if running == 0 {
        return if enabled == 0 {
            Ok(0)
        } else {
            Err("the counter never got a hardware slot while enabled".into())
        };
    }
    Ok((value as f64 * enabled as f64 / running as f64).round() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attr_is_at_least_the_size_pagelab_needs() {
        // PERF_ATTR_SIZE_VER8, the first with every field pagelab sets.
        assert!(std::mem::size_of::<perf_event_attr>() >= 136);
    }

    #[test]
    fn unavailable_counters_say_why_and_are_never_zero() {
        let c = HwCounters::open();
        c.enable();
        let child = std::process::Command::new("sh")
            .args(["-c", "i=0; while [ $i -lt 20000 ]; do i=$((i+1)); done"])
            .status()
            .unwrap();
        assert!(child.success());
        c.disable();
        let r = c.read();
        assert_eq!(
            r.values.keys().map(String::as_str).collect::<Vec<_>>(),
            ["cycles", "dtlb_misses", "instructions", "itlb_misses"]
        );
        if c.any_available() {
            // A busy child's cycles are inherited into ours.
            if let Some(cycles) = r.values["cycles"] {
                assert!(cycles > 1_000_000, "cycles {cycles}");
            }
        } else {
            eprintln!("hardware counters unavailable here: {:?}", r.unavailable);
            assert!(r.values.values().all(Option::is_none), "{r:?}");
            let why = r.unavailable.expect("a reason");
            assert!(
                why.starts_with(
                    "cycles, instructions, dtlb_misses, itlb_misses: perf_event_open failed"
                ),
                "{why}"
            );
        }
    }

    #[test]
    fn reasons_name_the_errno() {
        let e = io::Error::from_raw_os_error(libc::ENOENT);
        let text = explain(&e);
        assert!(
            text.contains("os error 2") && text.contains("exposes no hardware counters"),
            "{text}"
        );
        let e = io::Error::from_raw_os_error(libc::EACCES);
        assert!(explain(&e).contains("perf_event_paranoid"));
    }

    /// The same open, enable, inherit and read path with a software event every kernel has:
    /// the page faults of a child started after the open reach this process's counter.
    #[test]
    fn inherited_counts_of_children_are_read() {
        use perf_event_open_sys::bindings::{PERF_COUNT_SW_PAGE_FAULTS_MIN, PERF_TYPE_SOFTWARE};
        let fd = match open_event(PERF_TYPE_SOFTWARE, PERF_COUNT_SW_PAGE_FAULTS_MIN.into()) {
            Ok(fd) => fd,
            Err(e) => {
                eprintln!("skipped: software perf events unavailable: {}", explain(&e));
                return;
            }
        };
        let c = HwCounters {
            counters: vec![("minor_faults", Ok(fd))],
        };
        c.enable();
        // dd mallocs its 8M block and touches it: about 2048 minor faults.
        let st = std::process::Command::new("dd")
            .args([
                "if=/dev/zero",
                "of=/dev/null",
                "bs=8M",
                "count=1",
                "status=none",
            ])
            .status()
            .unwrap();
        assert!(st.success());
        c.disable();
        let r = c.read();
        let faults = r.values["minor_faults"].expect("a count");
        assert!(faults >= 2000, "minor faults {faults}");
        assert!(r.unavailable.is_none());
    }

    // Waited for with wait4, which std's Child cannot see.
    #[allow(clippy::zombie_processes)]
    #[test]
    fn exec_faults_count_from_the_exec_on() {
        // A child that faults on 2000 fresh pages of pagelab's (the test's) copied address
        // space before it execs `true`: none of them may count, where wait4's do.
        let faults = ExecFaults::open();
        if faults.minor.is_err() {
            eprintln!("skipped: no software perf events here: {:?}", faults.minor);
            return;
        }
        let mut pages = vec![0u8; 2000 * 4096];
        let mut cmd = std::process::Command::new("true");
        // SAFETY: the closure only writes to memory it owns (no allocation, no lock), as code
        // between fork and exec must.
        unsafe {
            std::os::unix::process::CommandExt::pre_exec(&mut cmd, move || {
                for p in pages.chunks_mut(4096) {
                    std::ptr::write_volatile(&mut p[0], 1);
                }
                Ok(())
            });
        }
        let child = cmd.spawn().unwrap();
        let (_, usage) = pagelab_sys::process::wait_with_usage(child.id()).unwrap();
        let (minor, major) = faults.read().expect("opened above");
        assert!(usage.minor_faults >= 2000, "{usage:?}");
        assert!(minor > 0 && minor < 500, "{minor} minor faults after exec");
        assert!(minor + major < usage.minor_faults + usage.major_faults);
    }
}
