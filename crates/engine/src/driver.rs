//! The loop: pull batches from a source, step the study, report progress.

use crate::{Study, StudyConfig};
use pagelab_report::SimResult;
use pagelab_trace::{TraceError, TraceSource};

/// Why a run stopped.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    /// The trace could not be read.
    #[error(transparent)]
    Trace(#[from] TraceError),
    /// The TLB configuration cannot be built.
    #[error(transparent)]
    Tlb(#[from] pagelab_tlb::TlbError),
}
use std::time::Instant;

/// Events per batch: large enough to amortise the source's call, small enough to stay in cache.
pub const BATCH: usize = 4096;

/// Receives progress while a long trace runs.
pub trait Progress {
    /// Called about every million references with the count so far and the time since start.
    fn update(&mut self, refs: u64, elapsed: std::time::Duration);
    /// Called once at the end.
    fn done(&mut self) {}
}

impl Progress for () {
    fn update(&mut self, _refs: u64, _elapsed: std::time::Duration) {}
}

/// Runs a whole study over `src`, in constant memory whatever the trace length.
pub fn run_study(
    src: &mut dyn TraceSource,
    cfg: &StudyConfig,
    progress: &mut dyn Progress,
) -> Result<SimResult, EngineError> {
    let start = Instant::now();
    let mut study = Study::new(cfg)?;
    let mut batch = Vec::with_capacity(BATCH);
    let mut next_report = 1u64 << 20;
    loop {
        batch.clear();
        if !src.fill(&mut batch, BATCH)? {
            break;
        }
        study.feed(&batch);
        if study.refs() >= next_report {
            progress.update(study.refs(), start.elapsed());
            next_report = study.refs() + (1 << 20);
        }
    }
    progress.done();
    let mut result = study.finish(src.info());
    result.elapsed_seconds = Some(start.elapsed().as_secs_f64());
    Ok(result)
}
