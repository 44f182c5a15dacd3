//! The pagelab engine: it owns the loop. Events come in from a
//! [`TraceSource`](pagelab_trace::TraceSource) in batches, every model is
//! stepped over each batch, and the result comes out in the versioned schema
//! of `pagelab-report`.
//!
//! ```
//! use pagelab_core::{AccessKind, Event, MemRef, PageSize, VirtAddr};
//! use pagelab_engine::{Study, StudyConfig};
//! let cfg = StudyConfig { page_sizes: vec![PageSize::K4], tlb: pagelab_tlb::preset("weisberg").unwrap() };
//! let mut study = Study::new(&cfg).unwrap();
//! let refs: Vec<Event> = (0..3u64)
//!     .map(|i| Event::Ref(MemRef { addr: VirtAddr(i * 4096), size: 4, kind: AccessKind::Store }))
//!     .collect();
//! study.feed(&refs);
//! assert_eq!(study.finish(Default::default()).runs[0].faults, 3);
//! ```

mod asids;
mod cost;
mod driver;
mod machine_cost;
mod pieces;
mod policy_run;
mod study;
mod threads;

pub use cost::{independent_refs, CostConfig, CostParts, CostStudy};
pub use driver::{run_cost_study, run_study, EngineError, Progress, BATCH};
pub use machine_cost::CostMachine;
pub use policy_run::{run_policies, PolicyConfig};
pub use study::{page_filter_params, Study, StudyConfig};
pub use threads::with_threads;
