//! Keeping SIGINT, SIGTERM, SIGHUP and SIGQUIT from ending pagelab while something must be put
//! back, and passing them on to a program pagelab runs.
//!
//! While at least one [`Held`] guard lives, the four signals are caught: the first one received
//! is recorded ([`received`]) and the process goes on, so its owner can restore what it changed
//! and then stop. Where nothing needs restoring, only a step that a person would rather see
//! end tidily (the guards of [`hold_soft`] alone), a second signal ends the process as the
//! signal's default action would, so a step that takes long still stops on a second Ctrl-C
//! (such a step runs no program of its own: the group below is not signalled then).
//!
//! With a process group registered by [`forward_to_group`], the handler also passes each
//! signal on to that group (as the terminal would have, had the program run alone); a second
//! signal kills the group, for a program that ignores the first.
//!
//! Caught (not ignored) signals return to their default action in programs pagelab starts,
//! since `exec` resets caught handlers: the program sees Ctrl-C as it would without pagelab.
//! When the last guard drops, the handlers that were in place before the first come back.

use std::sync::atomic::{AtomicBool, AtomicI32, AtomicUsize, Ordering};
use std::sync::Mutex;

/// The signals that would otherwise end pagelab with something left changed.
pub const HELD: [i32; 4] = [libc::SIGINT, libc::SIGTERM, libc::SIGHUP, libc::SIGQUIT];

/// The first held signal received, 0 when none.
static RECEIVED: AtomicI32 = AtomicI32::new(0);

/// The process group the handler passes signals on to, 0 when none.
static GROUP: AtomicI32 = AtomicI32::new(0);

/// Whether a signal was already passed on to the current group.
static FORWARDED: AtomicBool = AtomicBool::new(false);

/// Live guards of [`hold`] (not [`hold_soft`]): while any lives, a second signal is caught too.
static FIRM: AtomicUsize = AtomicUsize::new(0);

/// Live guards and the actions that were in place before the first.
static INSTALLED: Mutex<(usize, Vec<(i32, libc::sigaction)>)> = Mutex::new((0, Vec::new()));

extern "C" fn on_signal(sig: libc::c_int) {
    // Atomics, sigaction(2), getpid(2) and kill(2) only: all are async-signal-safe.
    let first = RECEIVED.compare_exchange(0, sig, Ordering::SeqCst, Ordering::SeqCst);
    if first.is_err() && FIRM.load(Ordering::SeqCst) == 0 {
        // A second signal with nothing to restore: the signal's own default action.
        // SAFETY: a zeroed sigaction is SIG_DFL with no flags and an empty mask; the
        // signal is blocked while its handler runs, so it is delivered, with the default
        // action, when the handler returns.
        unsafe {
            let action: libc::sigaction = std::mem::zeroed();
            libc::sigaction(sig, &action, std::ptr::null_mut());
            libc::kill(libc::getpid(), sig);
        }
        return;
    }
    let group = GROUP.load(Ordering::SeqCst);
    if group > 0 {
        let again = FORWARDED.swap(true, Ordering::SeqCst);
        let pass = if again { libc::SIGKILL } else { sig };
        if let (Some(pid), Some(sig)) = (
            rustix::process::Pid::from_raw(group),
            rustix::process::Signal::from_named_raw(pass),
        ) {
            let _ = rustix::process::kill_process_group(pid, sig);
        }
    }
}

/// The held signal (its number) received while a [`Held`] guard lived, if any. It stays
/// recorded for the rest of the process, so a command that was interrupted stops instead of
/// starting its next step.
pub fn received() -> Option<i32> {
    match RECEIVED.load(Ordering::SeqCst) {
        0 => None,
        sig => Some(sig),
    }
}

/// While alive, the held signals are caught and recorded instead of ending the process.
#[derive(Debug)]
#[must_use = "the signals are held only while the guard lives"]
pub struct Held {
    /// Whether [`hold`] made it (not [`hold_soft`]).
    firm: bool,
}

/// Catches the held signals until the returned guard (and every other live one) drops.
pub fn hold() -> Held {
    FIRM.fetch_add(1, Ordering::SeqCst);
    install(true)
}

/// As [`hold`], for a step with nothing to restore: the first signal is recorded so that
/// the step can stop tidily, and a second one ends the process (unless a guard of [`hold`]
/// lives too).
pub fn hold_soft() -> Held {
    install(false)
}

fn install(firm: bool) -> Held {
    let mut installed = INSTALLED.lock().unwrap_or_else(|p| p.into_inner());
    if installed.0 == 0 {
        installed.1.clear();
        for sig in HELD {
            // SAFETY: a zeroed sigaction is a valid "no flags, empty mask, SIG_DFL" value that
            // we then fill in; the handler only touches atomics and calls kill(2), both
            // async-signal-safe; `old` is a valid place for the kernel to store the action.
            unsafe {
                let mut action: libc::sigaction = std::mem::zeroed();
                action.sa_sigaction = on_signal as extern "C" fn(libc::c_int) as usize;
                action.sa_flags = libc::SA_RESTART;
                libc::sigemptyset(&mut action.sa_mask);
                let mut old: libc::sigaction = std::mem::zeroed();
                if libc::sigaction(sig, &action, &mut old) == 0 {
                    installed.1.push((sig, old));
                }
            }
        }
    }
    installed.0 += 1;
    Held { firm }
}

impl Drop for Held {
    /// Gives the held signals back their previous handlers when the last guard drops.
    fn drop(&mut self) {
        if self.firm {
            FIRM.fetch_sub(1, Ordering::SeqCst);
        }
        let mut installed = INSTALLED.lock().unwrap_or_else(|p| p.into_inner());
        installed.0 = installed.0.saturating_sub(1);
        if installed.0 == 0 {
            for (sig, old) in installed.1.drain(..) {
                // SAFETY: `old` is the action the kernel gave us for this very signal, so
                // putting it back restores a state the process was already in.
                unsafe {
                    libc::sigaction(sig, &old, std::ptr::null_mut());
                }
            }
        }
    }
}

/// Passes every held signal received from now on to process group `pgid` (a second one as
/// SIGKILL), until [`stop_forwarding`]. Only has an effect while a [`Held`] guard lives.
pub fn forward_to_group(pgid: u32) {
    FORWARDED.store(false, Ordering::SeqCst);
    GROUP.store(i32::try_from(pgid).unwrap_or(0), Ordering::SeqCst);
}

/// Stops passing signals on (the group has been waited for: its id may be reused).
pub fn stop_forwarding() {
    GROUP.store(0, Ordering::SeqCst);
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::process::CommandExt as _;

    /// One test for the whole process-global state, so test threads cannot interleave.
    #[test]
    fn a_held_signal_is_recorded_passed_on_and_released() {
        let action = |sig| {
            // SAFETY: reading the current action into a zeroed (valid) sigaction.
            unsafe {
                let mut now: libc::sigaction = std::mem::zeroed();
                libc::sigaction(sig, std::ptr::null(), &mut now);
                now.sa_sigaction
            }
        };
        // Usually SIG_DFL; SIG_IGN when the tests run in a shell's background job.
        let before = action(libc::SIGINT);
        assert_eq!(received(), None);
        let held = hold();
        assert_eq!(
            action(libc::SIGINT),
            on_signal as extern "C" fn(libc::c_int) as usize
        );
        let inner = hold();
        // A child in a group of its own, which the handler passes SIGTERM on to.
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .process_group(0)
            .spawn()
            .unwrap();
        forward_to_group(child.id());
        // SAFETY: raise(3) sends a signal to this thread, which the handler catches.
        assert_eq!(unsafe { libc::raise(libc::SIGTERM) }, 0);
        assert_eq!(received(), Some(libc::SIGTERM));
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(child.wait().unwrap().signal(), Some(libc::SIGTERM));
        stop_forwarding();
        drop(inner);
        // Still held by `held`: a second signal is caught and the first stays recorded.
        // SAFETY: as above.
        assert_eq!(unsafe { libc::raise(libc::SIGHUP) }, 0);
        assert_eq!(received(), Some(libc::SIGTERM));
        drop(held);
        assert_eq!(action(libc::SIGINT), before, "the earlier action is back");
    }

    /// Run in a child process by [`a_second_signal_ends_only_a_soft_hold`]: holds the
    /// signals as `PAGELAB_SIGNAL_CHILD` says (`soft`, `firm`, or both), raises SIGINT twice,
    /// and exits 0 if still alive.
    #[test]
    #[ignore = "a child process of a_second_signal_ends_only_a_soft_hold"]
    fn second_signal_child() {
        let Ok(mode) = std::env::var("PAGELAB_SIGNAL_CHILD") else {
            return;
        };
        let _soft = hold_soft();
        let _firm = (mode != "soft").then(hold);
        // SAFETY: raise(3) sends a signal to this thread, which the handler catches.
        assert_eq!(unsafe { libc::raise(libc::SIGINT) }, 0);
        assert_eq!(received(), Some(libc::SIGINT));
        // SAFETY: as above.
        assert_eq!(unsafe { libc::raise(libc::SIGINT) }, 0);
        std::process::exit(0);
    }

    /// Under soft guards alone a second signal ends the process by the signal; a firm guard
    /// beside them catches it too.
    #[test]
    fn a_second_signal_ends_only_a_soft_hold() {
        use std::os::unix::process::ExitStatusExt;
        for (mode, signal) in [("soft", Some(libc::SIGINT)), ("both", None)] {
            let out = std::process::Command::new(std::env::current_exe().unwrap())
                .args([
                    "--exact",
                    "signals::tests::second_signal_child",
                    "--ignored",
                ])
                .env("PAGELAB_SIGNAL_CHILD", mode)
                .output()
                .unwrap();
            assert_eq!(out.status.signal(), signal, "{mode}: {out:?}");
            if signal.is_none() {
                assert!(out.status.success(), "{mode}: {out:?}");
            }
        }
    }
}
