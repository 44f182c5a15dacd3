//! Capturing real programs: their references, threads, processes and
//! address-space system calls, decoded on the fly into trace events.
//!
//! Two backends run the program and stream its trace back through a pipe:
//!
//! - **qemu** (the default): QEMU user-mode emulation with pagelab's TCG
//!   plugin (`capture/qemu/pagelab_plugin.c`, built by this crate's build
//!   script, once per plugin API version). It records instruction fetches,
//!   loads and stores, the process and thread of each, forks, exits, and the
//!   system calls that shape the address space (mmap, munmap, mremap,
//!   mprotect, madvise, brk) with their results. Its record stream
//!   (`docs/capture-format.md`) is decoded by [`PluginReader`].
//! - **valgrind**: Valgrind Lackey's text, parsed by
//!   [`pagelab_trace::LackeyReader`]: references only.
//!
//! [`Capture`] runs one and is itself a [`TraceSource`](pagelab_trace::TraceSource); [`Window`] cuts any
//! source to a range of references.
//!
//! ```no_run
//! use pagelab_capture::{Backend, Capture, CaptureCommand, StdoutTo};
//! use pagelab_trace::TraceSource;
//!
//! let cmd = CaptureCommand {
//!     backend: Backend::Qemu,
//!     program: "gzip".into(),
//!     args: vec!["-c".into(), "/etc/services".into()],
//!     stdout: StdoutTo::Stderr,
//! };
//! let mut capture = Capture::spawn(&cmd)?;
//! let mut events = Vec::new();
//! let mut refs = 0;
//! while capture.fill(&mut events, 65536)? {
//!     refs += events.iter().filter(|e| matches!(e, pagelab_core::Event::Ref(_))).count();
//!     events.clear();
//! }
//! println!("{refs} references; gzip exited with {:?}", capture.status());
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! Contract: see [`pagelab_trace::TraceSource`].

#![warn(missing_docs)]

pub mod arena;
mod decode;
pub mod elf;
pub mod format;
mod intervals;
pub mod layout;
mod placement;
pub mod relocate;
mod relocated;
mod script;
mod spawn;
pub mod syscalls;
mod tools;
mod valgrind;
mod window;

pub use decode::PluginReader;
pub use relocated::{Relocated, RelocationSetup};
pub use spawn::{exit_code, interrupted, Backend, Capture, CaptureCommand, StdoutTo};
pub use tools::{
    execprog_path, find_qemu, find_valgrind, layoutprog_path, parse_qemu_version, place_lib_path,
    placeprog_path, plugin_api_for, plugin_path, qemu_version, signalprog_path, testprog_path,
    which, CaptureError,
};
pub use window::Window;
