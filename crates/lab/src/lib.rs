//! The lab: the page-size questions asked of the real Linux machine.
//!
//! - [`LabError`]: the typed error at the lab's edge (an interrupt exits 128 + signal),
//! - [`sysfs`]: where the kernel's THP, mTHP and hugetlb knobs live and what they hold,
//! - [`session`]: changing knobs for a run and restoring every one on every exit path
//!   (a lock against concurrent runs, a journal that the next pagelab replays after SIGKILL),
//! - [`hugetlb`]: growing hugetlb pools and saying exactly what the kernel gave,
//! - [`counters`]: snapshots of the kernel's own counters and their deltas,
//! - [`perf`]: hardware counters through perf_event_open, reported unavailable when absent,
//! - [`probe`]: a chase at growing footprints, the hierarchy `pagelab machines --measure` writes,
//! - [`measure`]: the [`measure::Measurer`] seam (rusage, kernel counters, perf) and its fake,
//! - [`bench`]: `pagelab bench`'s loop over configurations, kernels and repetitions,
//! - [`run`]: `pagelab run`'s plan, checks and loop over configurations and repetitions,
//! - [`runner`]: running a program under a configuration and measuring it,
//! - [`shim`]: the LD_PRELOAD shim that advises or hugetlb-maps a program's own mappings,
//! - [`native`]: native microbenchmarks matching the model's built-in workloads.
//! - [`validate`]: the kernel as the referee of the model: native replays vs the `linux-thp` policy.

#![warn(missing_docs)]

mod error;
pub use error::LabError;

pub mod hugetlb;
pub mod session;
pub mod sysfs;

pub mod bench;
pub mod counters;
pub mod folios;
pub mod measure;
pub mod perf;
pub mod probe;
pub mod run;
pub mod runner;
pub mod shim;

pub mod native;

pub mod validate;
