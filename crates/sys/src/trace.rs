//! Following a program and the processes it forks to their exits with `ptrace`, so that each
//! can be looked at (its `/proc/PID/pagemap`, say) just before its address space goes.
//!
//! The program asks to be traced between `fork` and `exec` ([`trace_me`]); [`follow`] then
//! waits, on the thread that forked it, for every stop of the program and of the processes
//! it forks (`PTRACE_O_TRACEFORK`, `PTRACE_O_TRACEVFORK`: the tracing is inherited), and at
//! each process's `PTRACE_EVENT_EXIT` stop (in `do_exit`, before `exit_mm` releases the
//! address space) calls back with its pid. Threads are not traced (no `PTRACE_O_TRACECLONE`):
//! a process is one address space, looked at once, when its first thread (the one whose tid
//! is its pid) exits. Every other stop is resumed as it would have gone untraced: a signal is
//! delivered, a group stop is let go, the exec and fork stops are resumed.
//!
//! `ptrace` goes through `libc`: rustix (1.1.6, the version locked) has no wrapper for it.

use crate::process::{ended_and_usage, Ended, Usage};
use std::collections::HashSet;
use std::io;

/// For `CommandExt::pre_exec`: asks to be traced by the parent, so that the `exec` that
/// follows stops the program (a SIGTRAP) before its first instruction, for [`follow`].
/// Async-signal-safe (one system call).
pub fn trace_me() -> io::Result<()> {
    // SAFETY: PTRACE_TRACEME takes no address or data and changes only this process's
    // tracing state.
    let r = unsafe { libc::ptrace(libc::PTRACE_TRACEME, 0, 0usize, 0usize) };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// One `ptrace` request on a stopped tracee that takes a plain number as its data.
fn request(req: libc::c_uint, pid: i32, data: usize) -> io::Result<()> {
    // SAFETY: the requests made here (SETOPTIONS, CONT) read `data` as a number, never as a
    // pointer, and act only on a tracee of this thread; a pid that is no tracee fails (ESRCH).
    let r = unsafe { libc::ptrace(req, pid, 0usize, data) };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Whether the stopped tracee `pid` is in a signal-delivery stop (it has a signal to take),
/// rather than a group stop, which has no siginfo (`PTRACE_GETSIGINFO` fails with EINVAL).
fn has_siginfo(pid: i32) -> bool {
    // SAFETY: siginfo_t is plain data, for which all zeroes is a valid value.
    let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
    // SAFETY: PTRACE_GETSIGINFO writes one siginfo_t at `data`, which points at `info`, valid
    // for writes for the call's duration.
    let r = unsafe {
        libc::ptrace(
            libc::PTRACE_GETSIGINFO,
            pid,
            0usize,
            &mut info as *mut libc::siginfo_t,
        )
    };
    r == 0
}

/// Resumes a stopped tracee that is already gone (killed meanwhile): nothing to do.
fn resume(pid: i32, signal: i32) -> io::Result<()> {
    match request(libc::PTRACE_CONT, pid, signal as usize) {
        Err(e) if e.raw_os_error() == Some(libc::ESRCH) => Ok(()),
        other => other,
    }
}

/// Follows `pid`, a child of this thread that called [`trace_me`] before its `exec`, and
/// every process it forks, until all of them are gone; calls `at_exit` with each process's
/// pid at its exit, while its address space is still whole. Returns how `pid` ended and its
/// `wait4` usage (as [`crate::process::wait_with_usage`] does).
///
/// Must run on the thread that forked `pid` (ptrace requests come from the tracer thread).
/// It waits with `__WNOTHREAD`, so children other threads forked are left alone. A process
/// that the program leaves running is waited for too: it is part of the program's life.
/// If this thread dies, `PTRACE_O_EXITKILL` ends the traced processes.
pub fn follow(pid: u32, mut at_exit: impl FnMut(u32)) -> io::Result<(Ended, Usage)> {
    let main = i32::try_from(pid).map_err(|_| io::Error::from_raw_os_error(libc::ECHILD))?;
    let options = libc::PTRACE_O_TRACEFORK
        | libc::PTRACE_O_TRACEVFORK
        | libc::PTRACE_O_TRACEEXEC
        | libc::PTRACE_O_TRACEEXIT
        | libc::PTRACE_O_EXITKILL;
    let mut ended = None;
    // Traced processes whose first stop was seen (a new one starts with a SIGSTOP).
    let mut started: HashSet<i32> = HashSet::new();
    loop {
        let mut status = 0;
        // SAFETY: rusage is plain integers, for which all zeroes is a valid value.
        let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
        // SAFETY: `status` and `usage` are valid for writes for the call's duration.
        let got = unsafe {
            libc::wait4(
                -1,
                &mut status,
                libc::__WALL | libc::__WNOTHREAD,
                &mut usage,
            )
        };
        if got < 0 {
            let err = io::Error::last_os_error();
            match err.raw_os_error() {
                Some(libc::EINTR) => continue,
                // Nothing left to wait for: the program and all it forked are gone.
                Some(libc::ECHILD) => break,
                _ => return Err(err),
            }
        }
        if libc::WIFEXITED(status) || libc::WIFSIGNALED(status) {
            started.remove(&got);
            if got == main {
                ended = Some(ended_and_usage(status, &usage));
            }
            continue;
        }
        if !libc::WIFSTOPPED(status) {
            continue;
        }
        let signal = libc::WSTOPSIG(status);
        let event = status >> 16;
        if started.insert(got) {
            // The first stop: the program's exec (a SIGTRAP, as asked by trace_me), or a
            // forked process's initial SIGSTOP. Neither is the program's own signal.
            if got == main {
                request(libc::PTRACE_SETOPTIONS, got, options as usize)?;
            }
            if signal == libc::SIGTRAP || signal == libc::SIGSTOP {
                resume(got, 0)?;
                continue;
            }
        }
        if signal == libc::SIGTRAP && event == libc::PTRACE_EVENT_EXIT {
            at_exit(got as u32);
            resume(got, 0)?;
        } else if signal == libc::SIGTRAP && event != 0 {
            // The fork, vfork and exec stops.
            resume(got, 0)?;
        } else if has_siginfo(got) {
            resume(got, signal)?;
        } else {
            // A group stop (SIGSTOP and the like): let the process go on.
            resume(got, 0)?;
        }
    }
    ended.ok_or_else(|| {
        io::Error::other(format!(
            "process {pid} was never seen to end while it was traced"
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::process::CommandExt;

    // Reaped by follow's wait4, which std's Child cannot see.
    #[allow(clippy::zombie_processes)]
    #[test]
    fn every_forked_process_is_seen_at_its_exit() {
        let mut cmd = std::process::Command::new("sh");
        cmd.args(["-c", "/bin/true; /bin/true | /bin/true; exit 3"]);
        // SAFETY: trace_me makes one async-signal-safe system call.
        unsafe {
            cmd.pre_exec(trace_me);
        }
        let child = cmd.spawn().unwrap();
        let mut exits = Vec::new();
        let (ended, usage) = follow(child.id(), |p| exits.push(p)).unwrap();
        assert_eq!(ended, Ended::Exited(3));
        assert!(usage.minor_faults > 0);
        // The shell and at least its three children (a shell may fork a subshell more).
        assert!(exits.len() >= 4, "{exits:?}");
        assert_eq!(exits.last(), Some(&child.id()), "{exits:?}");
    }
}
