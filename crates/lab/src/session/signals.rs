//! Keeping SIGINT, SIGTERM, SIGHUP and SIGQUIT from killing pagelab while knobs are changed.
//!
//! While at least one [`super::KnobSession`] is open, these signals are caught and recorded
//! instead of ending the process, so the session can restore the knobs; the caller asks
//! [`interrupted`] and stops. Caught (not ignored) signals return to their default action in
//! programs pagelab starts, since `exec` resets caught handlers.

use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::Mutex;

/// The signals that would otherwise end pagelab with knobs changed.
pub(crate) const HELD: [libc::c_int; 4] =
    [libc::SIGINT, libc::SIGTERM, libc::SIGHUP, libc::SIGQUIT];

/// The first held signal received, 0 when none.
static RECEIVED: AtomicI32 = AtomicI32::new(0);

/// Open sessions and the handlers that were in place before the first one.
static INSTALLED: Mutex<(usize, Vec<(libc::c_int, libc::sigaction)>)> = Mutex::new((0, Vec::new()));

extern "C" fn on_signal(sig: libc::c_int) {
    // Only an atomic store: async-signal-safe.
    let _ = RECEIVED.compare_exchange(0, sig, Ordering::SeqCst, Ordering::SeqCst);
}

/// The signal (number) received while a session was open, if any. It stays recorded for the
/// rest of the process, so a command that was interrupted stops instead of opening a new session.
pub fn interrupted() -> Option<i32> {
    match RECEIVED.load(Ordering::SeqCst) {
        0 => None,
        sig => Some(sig),
    }
}

/// Catches the held signals (first open session installs the handlers).
pub(crate) fn hold() {
    let mut installed = INSTALLED.lock().unwrap_or_else(|p| p.into_inner());
    if installed.0 == 0 {
        installed.1.clear();
        for sig in HELD {
            // SAFETY: a zeroed sigaction is a valid "no flags, empty mask" value; the handler
            // only performs an atomic store.
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
}

/// Gives the held signals back their previous handlers when the last session closes.
pub(crate) fn release() {
    let mut installed = INSTALLED.lock().unwrap_or_else(|p| p.into_inner());
    installed.0 = installed.0.saturating_sub(1);
    if installed.0 == 0 {
        for (sig, old) in installed.1.drain(..) {
            // SAFETY: restoring the action the kernel gave us for this signal.
            unsafe {
                libc::sigaction(sig, &old, std::ptr::null_mut());
            }
        }
    }
}
