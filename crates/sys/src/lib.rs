//! The system calls pagelab makes about processes and signals, in one place.
//!
//! Both the lab (which changes kernel knobs and must restore them whatever signal comes) and
//! capture (which runs a program under a tracer and must pass the user's Ctrl-C on to it)
//! hold the terminating signals while they work and act on them later; this crate is where
//! that is done, once, below both of them in the dependency graph:
//!
//! - [`signals`]: catching SIGINT, SIGTERM, SIGHUP and SIGQUIT while something must be
//!   restored, recording the first, and optionally passing them on to a process group;
//! - [`process`]: signalling a process through a pidfd, a parent-death signal for a child
//!   about to `exec`, a descriptor at a chosen number for it, waiting for a child with its
//!   resource usage, telling root from others;
//! - [`trace`]: following a program and the processes it forks to their exits (`ptrace`).
//!
//! System calls go through [`rustix`]. `ptrace` (in [`trace`]) and four more have no fitting rustix wrapper and use `libc`
//! here, each in one function with its safety argument: `sigaction` with a handler (rustix
//! leaves signal handlers to runtimes), `wait4` (its resource usage is the child's own, which
//! `getrusage(RUSAGE_CHILDREN)` cannot give once two children have been waited for),
//! `getrusage` itself, and `dup2` onto a descriptor number that is not open yet (rustix's
//! takes an owned target).
//!
//! ```
//! let held = pagelab_sys::signals::hold();
//! // ... change something that must be put back ...
//! if let Some(sig) = pagelab_sys::signals::received() {
//!     eprintln!("stopping on signal {sig}");
//! }
//! drop(held); // the signals' previous handlers are back
//! ```

#![warn(missing_docs)]

pub mod private;
pub mod process;
pub mod signals;
pub mod trace;
