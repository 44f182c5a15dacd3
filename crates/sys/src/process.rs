//! Processes: signalling through pidfds, dying with the parent, waiting with resource usage.

use rustix::fd::{OwnedFd, RawFd};
use rustix::process::{Pid, PidfdFlags, Signal};
use std::io;
use std::time::Duration;

/// Whether this process runs with effective user id 0.
pub fn is_root() -> bool {
    rustix::process::geteuid().is_root()
}

fn pid_of(pid: u32) -> io::Result<Pid> {
    i32::try_from(pid)
        .ok()
        .and_then(Pid::from_raw)
        .ok_or_else(|| io::Error::from_raw_os_error(libc::ESRCH))
}

fn signal_of(sig: i32) -> io::Result<Signal> {
    Signal::from_named_raw(sig).ok_or_else(|| io::Error::from_raw_os_error(libc::EINVAL))
}

/// Sends signal `sig` (a number, e.g. `libc::SIGKILL`) to process `pid`.
pub fn kill(pid: u32, sig: i32) -> io::Result<()> {
    Ok(rustix::process::kill_process(
        pid_of(pid)?,
        signal_of(sig)?,
    )?)
}

/// Sends signal `sig` to every process of group `pgid`.
pub fn kill_group(pgid: u32, sig: i32) -> io::Result<()> {
    Ok(rustix::process::kill_process_group(
        pid_of(pgid)?,
        signal_of(sig)?,
    )?)
}

/// Whether a process with this pid exists (one we may not signal counts).
pub fn exists(pid: u32) -> bool {
    let Ok(p) = pid_of(pid) else {
        return false;
    };
    match rustix::process::test_kill_process(p) {
        Ok(()) => true,
        Err(e) => e == rustix::io::Errno::PERM,
    }
}

/// A process held by a pidfd: signals sent through it can never reach another process that
/// reused the pid after this one was reaped.
#[derive(Debug)]
pub struct Pidfd(OwnedFd);

impl Pidfd {
    /// Opens a pidfd for `pid` (Linux 5.3 and later).
    pub fn open(pid: u32) -> io::Result<Pidfd> {
        Ok(Pidfd(rustix::process::pidfd_open(
            pid_of(pid)?,
            PidfdFlags::empty(),
        )?))
    }

    /// Sends signal `sig` to the process.
    pub fn signal(&self, sig: i32) -> io::Result<()> {
        Ok(rustix::process::pidfd_send_signal(
            &self.0,
            signal_of(sig)?,
        )?)
    }
}

/// For `CommandExt::pre_exec`: asks the kernel to SIGKILL this (child) process when the thread
/// that forked it ends, so a program pagelab measures never outlives a pagelab killed with
/// SIGKILL. `parent` is the pid of the forking process, read before the fork: if it is already
/// gone (it died between fork and this call), the child ends itself at once. Only
/// async-signal-safe system calls, as `pre_exec` requires.
pub fn die_with_parent(parent: u32) -> io::Result<()> {
    rustix::process::set_parent_process_death_signal(Some(Signal::KILL))?;
    if rustix::process::getppid().map(Pid::as_raw_nonzero)
        != pid_of(parent).ok().map(Pid::as_raw_nonzero)
    {
        let _ = rustix::process::kill_process(rustix::process::getpid(), Signal::KILL);
    }
    Ok(())
}

/// For `CommandExt::pre_exec`: turns address-space randomisation off for the program about
/// to be executed, as `setarch -R` does (the personality flag `ADDR_NO_RANDOMIZE`, kept with
/// the others), so the kernel places its mappings where a model of Linux's layout without
/// randomisation does. `personality` is async-signal-safe.
///
/// Through libc, not rustix like the other raw calls: rustix (1.1.6, the version locked)
/// has no wrapper for `personality(2)` (its only "personality" is io_uring's credentials
/// id), and a raw `syscall` would be no safer than libc's own wrapper.
pub fn no_randomize() -> io::Result<()> {
    // SAFETY: personality only reads and sets an integer of this process; 0xffffffff queries.
    let current = unsafe { libc::personality(0xffff_ffff) };
    if current < 0 {
        return Err(io::Error::last_os_error());
    }
    let flags = current as libc::c_ulong | libc::ADDR_NO_RANDOMIZE as libc::c_ulong;
    // SAFETY: as above.
    if unsafe { libc::personality(flags) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// For `CommandExt::pre_exec`: makes descriptor number `target` a copy of open descriptor
/// `fd`, without close-on-exec, so the program about to be executed inherits it at that
/// number. `dup2` itself, since rustix's wants the target as an owned, open descriptor, which
/// a number chosen for the program is not.
pub fn dup_to(fd: RawFd, target: RawFd) -> io::Result<()> {
    // SAFETY: dup2 only reads two integers; an `fd` that is not open fails with EBADF and
    // `target` is closed first if open, which is the point (it is the program's, not ours).
    if unsafe { libc::dup2(fd, target) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Whose page faults [`minor_faults`] counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Who {
    /// The calling thread only (`RUSAGE_THREAD`): other threads, such as parallel tests,
    /// do not count.
    Thread,
    /// The whole process (`RUSAGE_SELF`).
    Process,
}

/// Minor page faults so far of the calling thread or process (`getrusage`, which rustix does
/// not wrap).
pub fn minor_faults(who: Who) -> u64 {
    let who = match who {
        Who::Thread => libc::RUSAGE_THREAD,
        Who::Process => libc::RUSAGE_SELF,
    };
    // SAFETY: rusage is plain integers, for which all zeroes is a valid value, and getrusage
    // only writes the struct it is given (it cannot fail for these `who`).
    unsafe {
        let mut ru: libc::rusage = std::mem::zeroed();
        libc::getrusage(who, &mut ru);
        ru.ru_minflt as u64
    }
}

/// What a waited-for child used, from `wait4`.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Usage {
    /// CPU time in user mode.
    pub user: Duration,
    /// CPU time in the kernel.
    pub system: Duration,
    /// Page faults served without I/O.
    pub minor_faults: u64,
    /// Page faults that needed I/O.
    pub major_faults: u64,
    /// Peak resident memory, in bytes.
    pub max_rss_bytes: u64,
}

/// How a child ended: its exit code, or the signal that killed it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ended {
    /// It called `exit` with this code.
    Exited(i32),
    /// A signal (its number) killed it.
    Killed(i32),
}

/// Waits for child `pid` (retrying when a caught signal interrupts the wait) and returns how it
/// ended and what it used. `wait4` is the one call that gives one child's own usage; rustix
/// does not wrap it.
pub fn wait_with_usage(pid: u32) -> io::Result<(Ended, Usage)> {
    let raw = i32::try_from(pid).map_err(|_| io::Error::from_raw_os_error(libc::ECHILD))?;
    let mut status = 0;
    // SAFETY: rusage is plain integers, for which all zeroes is a valid value.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    loop {
        // SAFETY: `status` and `usage` are valid for writes for the call's duration; waiting
        // for a pid that is not our child fails with ECHILD and touches nothing.
        let r = unsafe { libc::wait4(raw, &mut status, 0, &mut usage) };
        if r == raw {
            break;
        }
        let err = io::Error::last_os_error();
        if err.kind() != io::ErrorKind::Interrupted {
            return Err(err);
        }
    }
    Ok(ended_and_usage(status, &usage))
}

/// How a child ended and what it used, from `wait4`'s status and usage.
pub(crate) fn ended_and_usage(status: i32, usage: &libc::rusage) -> (Ended, Usage) {
    let ended = if libc::WIFEXITED(status) {
        Ended::Exited(libc::WEXITSTATUS(status))
    } else {
        Ended::Killed(libc::WTERMSIG(status))
    };
    let time = |t: libc::timeval| {
        Duration::from_secs(t.tv_sec as u64) + Duration::from_micros(t.tv_usec as u64)
    };
    (
        ended,
        Usage {
            user: time(usage.ru_utime),
            system: time(usage.ru_stime),
            minor_faults: usage.ru_minflt as u64,
            major_faults: usage.ru_majflt as u64,
            max_rss_bytes: usage.ru_maxrss as u64 * 1024,
        },
    )
}

/// The calling thread pinned to the CPU it runs on; dropping it restores the thread's
/// former CPU set (on every exit path of the scope that holds it, unwinding included).
pub struct Pinned {
    old: libc::cpu_set_t,
}

impl Pinned {
    /// Pins the calling thread to the CPU it is on now, so that a timing is not split
    /// between cores.
    ///
    /// # Errors
    /// When the kernel refuses to read or set the thread's CPU set.
    pub fn here() -> io::Result<Pinned> {
        let size = std::mem::size_of::<libc::cpu_set_t>();
        // SAFETY: cpu_set_t is plain data; all zeros is the empty set.
        let mut old: libc::cpu_set_t = unsafe { std::mem::zeroed() };
        // SAFETY: `old` is a valid cpu_set_t of `size` bytes; 0 names the calling thread.
        if unsafe { libc::sched_getaffinity(0, size, &mut old) } != 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: sched_getcpu has no preconditions.
        let cpu = unsafe { libc::sched_getcpu() };
        if cpu < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: as above: an empty set, then one CPU added to it.
        let mut one: libc::cpu_set_t = unsafe { std::mem::zeroed() };
        // SAFETY: `cpu` is a CPU number the kernel just gave, below CPU_SETSIZE.
        unsafe { libc::CPU_SET(cpu as usize, &mut one) };
        // SAFETY: `one` is a valid cpu_set_t of `size` bytes.
        if unsafe { libc::sched_setaffinity(0, size, &one) } != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(Pinned { old })
    }
}

impl Drop for Pinned {
    fn drop(&mut self) {
        // SAFETY: `old` is the set the kernel gave for this thread; restoring it cannot
        // fail for a set the thread held before (an error would leave it pinned, harmless).
        unsafe {
            libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &self.old);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::process::CommandExt;

    // Waited for with wait4, which std's Child cannot see.
    #[allow(clippy::zombie_processes)]
    #[test]
    fn a_waited_child_reports_its_code_signal_and_usage() {
        let c = std::process::Command::new("sh")
            .args(["-c", "exit 7"])
            .spawn()
            .unwrap();
        let (ended, usage) = wait_with_usage(c.id()).unwrap();
        assert_eq!(ended, Ended::Exited(7));
        assert!(
            usage.minor_faults > 0 && usage.max_rss_bytes > 0,
            "{usage:?}"
        );
        let c = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let fd = Pidfd::open(c.id()).unwrap();
        fd.signal(libc::SIGTERM).unwrap();
        assert_eq!(
            wait_with_usage(c.id()).unwrap().0,
            Ended::Killed(libc::SIGTERM)
        );
        assert!(wait_with_usage(c.id()).is_err(), "already reaped");
        assert!(!exists(c.id()) || c.id() == std::process::id());
        assert!(exists(std::process::id()));
    }

    /// A child started from a thread that then ends gets the parent-death signal.
    #[test]
    fn a_child_dies_with_the_thread_that_started_it() {
        let me = std::process::id();
        let pid = std::thread::spawn(move || {
            let mut cmd = std::process::Command::new("sleep");
            cmd.arg("30");
            // SAFETY: die_with_parent makes only async-signal-safe system calls.
            unsafe { cmd.pre_exec(move || die_with_parent(me)) };
            let child = cmd.spawn().unwrap();
            let pid = child.id();
            std::mem::forget(child);
            pid
        })
        .join()
        .unwrap();
        let (ended, _) = wait_with_usage(pid).unwrap();
        assert_eq!(ended, Ended::Killed(libc::SIGKILL));
    }
}
