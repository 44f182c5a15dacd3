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

use std::collections::BTreeMap;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

/// The counters pagelab asks for, by the name results use.
pub const HW_COUNTERS: [&str; 4] = ["cycles", "instructions", "dtlb_misses", "itlb_misses"];

const PERF_TYPE_HARDWARE: u32 = 0;
const PERF_TYPE_HW_CACHE: u32 = 3;
const PERF_COUNT_HW_CPU_CYCLES: u64 = 0;
const PERF_COUNT_HW_INSTRUCTIONS: u64 = 1;
const PERF_COUNT_HW_CACHE_DTLB: u64 = 3;
const PERF_COUNT_HW_CACHE_ITLB: u64 = 4;
const PERF_COUNT_HW_CACHE_OP_READ: u64 = 0;
const PERF_COUNT_HW_CACHE_RESULT_MISS: u64 = 1;
const PERF_FORMAT_TOTAL_TIME_ENABLED: u64 = 1;
const PERF_FORMAT_TOTAL_TIME_RUNNING: u64 = 2;
const FLAG_DISABLED: u64 = 1 << 0;
const FLAG_INHERIT: u64 = 1 << 1;
const FLAG_EXCLUDE_HV: u64 = 1 << 6;
const PERF_FLAG_FD_CLOEXEC: libc::c_ulong = 1 << 3;
const PERF_EVENT_IOC_ENABLE: libc::c_ulong = 0x2400;
const PERF_EVENT_IOC_DISABLE: libc::c_ulong = 0x2401;
const PERF_EVENT_IOC_RESET: libc::c_ulong = 0x2403;

/// `struct perf_event_attr` as of `PERF_ATTR_SIZE_VER8` (136 bytes); the bit fields are `flags`.
#[repr(C)]
#[derive(Default)]
struct PerfEventAttr {
    type_: u32,
    size: u32,
    config: u64,
    sample_period: u64,
    sample_type: u64,
    read_format: u64,
    flags: u64,
    wakeup_events: u32,
    bp_type: u32,
    config1: u64,
    config2: u64,
    branch_sample_type: u64,
    sample_regs_user: u64,
    sample_stack_user: u32,
    clockid: i32,
    sample_regs_intr: u64,
    aux_watermark: u32,
    sample_max_stack: u16,
    reserved_2: u16,
    aux_sample_size: u32,
    reserved_3: u32,
    sig_data: u64,
    config3: u64,
}

/// The (type, config) of a counter named in [`HW_COUNTERS`].
fn event_of(name: &str) -> (u32, u64) {
    let cache_miss = |cache: u64| {
        cache | (PERF_COUNT_HW_CACHE_OP_READ << 8) | (PERF_COUNT_HW_CACHE_RESULT_MISS << 16)
    };
    match name {
        "cycles" => (PERF_TYPE_HARDWARE, PERF_COUNT_HW_CPU_CYCLES),
        "instructions" => (PERF_TYPE_HARDWARE, PERF_COUNT_HW_INSTRUCTIONS),
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
    let attr = PerfEventAttr {
        type_,
        size: std::mem::size_of::<PerfEventAttr>() as u32,
        config,
        read_format: PERF_FORMAT_TOTAL_TIME_ENABLED | PERF_FORMAT_TOTAL_TIME_RUNNING,
        flags: FLAG_DISABLED | FLAG_INHERIT | FLAG_EXCLUDE_HV,
        ..Default::default()
    };
    // SAFETY: attr is a valid perf_event_attr of the size it declares; pid 0 / cpu -1 is
    // "this process on any CPU"; the kernel returns a new descriptor or -1.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_perf_event_open,
            &attr as *const PerfEventAttr,
            0 as libc::pid_t,
            -1 as libc::c_int,
            -1 as libc::c_int,
            PERF_FLAG_FD_CLOEXEC,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: fd is a descriptor the kernel just gave us and nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as i32) })
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
        self.ioctl_all(PERF_EVENT_IOC_RESET);
        self.ioctl_all(PERF_EVENT_IOC_ENABLE);
    }

    /// Stops every available counter.
    pub fn disable(&self) {
        self.ioctl_all(PERF_EVENT_IOC_DISABLE);
    }

    fn ioctl_all(&self, request: libc::c_ulong) {
        for fd in self.counters.iter().filter_map(|(_, c)| c.as_ref().ok()) {
            // SAFETY: fd is an open perf event; these requests take no argument.
            unsafe {
                libc::ioctl(fd.as_raw_fd(), request as _, 0);
            }
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

/// Reads `value, time_enabled, time_running` and scales the value to the enabled time.
fn read_scaled(fd: &OwnedFd) -> Result<u64, String> {
    let mut buf = [0u64; 3];
    // SAFETY: buf is 24 writable bytes, the size of this read_format's record.
    let n = unsafe { libc::read(fd.as_raw_fd(), buf.as_mut_ptr().cast(), 24) };
    if n != 24 {
        return Err(format!(
            "short read ({n} bytes): {}",
            io::Error::last_os_error()
        ));
    }
    let [value, enabled, running] = buf;
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
    fn attr_has_the_kernel_size() {
        assert_eq!(std::mem::size_of::<PerfEventAttr>(), 136);
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
        const PERF_TYPE_SOFTWARE: u32 = 1;
        const PERF_COUNT_SW_PAGE_FAULTS_MIN: u64 = 5;
        let fd = match open_event(PERF_TYPE_SOFTWARE, PERF_COUNT_SW_PAGE_FAULTS_MIN) {
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
}
