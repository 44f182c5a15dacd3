//! What the `pagelab` command and the Python package (`python/`) share: the
//! names a user writes turned into the engine's inputs, with the command
//! line's error messages, so that both give the same numbers and the same
//! errors for the same words.
//!
//! - [`builtin`]: the built-in workloads, the bundled real trace among them;
//! - [`provenance`]: what made a result, recorded in it;
//! - [`model`]: page sizes and a TLB into a study's configuration, policies
//!   and physical memory into the memory-management model's;
//! - [`param_sweep`]: `FROM..TO/STEP` in a workload parameter, one workload per value.
//!
//! ```
//! let cfg = pagelab::model::study_config("4K,2M", "weisberg").unwrap();
//! assert_eq!(cfg.page_sizes.len(), 2);
//! let err = pagelab::model::study_config("3K", "weisberg").unwrap_err();
//! assert!(format!("{err:#}").starts_with("--page-sizes 3K"));
//! ```

#![warn(missing_docs)]

pub mod builtin;
pub mod model;
pub mod param_sweep;
pub mod provenance;
