//! The loop: pull batches from a source, step the study, report progress.

use crate::{Study, StudyConfig};
use pagelab_core::Event;
use pagelab_report::SimResult;
use pagelab_trace::{PageBatch, TraceError, TraceSource};
use std::sync::{mpsc, Arc};

/// Why a run stopped.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    /// The trace could not be read.
    #[error(transparent)]
    Trace(#[from] TraceError),
    /// The TLB configuration cannot be built.
    #[error(transparent)]
    Tlb(#[from] pagelab_tlb::TlbError),
    /// The memory-management model refused the configuration or the trace.
    #[error("{0}")]
    Model(String),
}
use std::time::Instant;

/// Events per batch: large enough that stepping the runs in parallel pays off.
pub const BATCH: usize = 64 * 1024;

/// Batches in flight between the reading thread and the stepping thread.
const IN_FLIGHT: usize = 4;

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
///
/// Reading (parsing, decompressing, generating) runs on its own thread, a few
/// batches ahead of the study, so the two overlap on a machine with two cores;
/// a source that can be read in pieces (a plain Lackey file) is parsed on
/// every core instead (see `pieces.rs`).
pub fn run_study(
    src: &mut (dyn TraceSource + Send),
    cfg: &StudyConfig,
    progress: &mut dyn Progress,
) -> Result<SimResult, EngineError> {
    let start = Instant::now();
    let mut study = Study::new(cfg)?;
    let info = src.info();
    if let Some(pieces) = src.pieces() {
        crate::pieces::run_pieces(&pieces, &mut study, progress, start)?;
        progress.done();
        let mut result = study.finish(info);
        result.elapsed_seconds = Some(start.elapsed().as_secs_f64());
        return Ok(result);
    }
    // The filter goes where it costs least: into the parser, or on this
    // thread, beside the study, when the reader only hands out events.
    let parses = src.parses_to_pages();
    let (mut read_filter, mut filter) = (study.page_filter(), study.page_filter());
    let mut next_report = 1u64 << 20;
    let outcome = read_ahead(
        src,
        |src, batch: &mut PageBatch| {
            batch.clear();
            if parses {
                src.fill_pages(&mut read_filter, batch, BATCH)
            } else {
                src.fill(&mut batch.events, BATCH)
            }
        },
        |batch| {
            filter.take_events(batch);
            study.feed_pages(batch);
            report(progress, study.refs(), &mut next_report, start);
        },
    );
    progress.done();
    outcome?;
    let mut result = study.finish(info);
    result.elapsed_seconds = Some(start.elapsed().as_secs_f64());
    Ok(result)
}

/// The study's step beside the cost model's, in runs of the cost model: in profiles of
/// the cc1 and python3 traces on zen4 and emeraldrapids, the study took 12-18% of the
/// time and the eight runs 54-68%, so about two runs' worth.
const STUDY_AS_RUNS: usize = 2;

/// A study with time: every page size's TLB counts as [`run_study`] gives
/// them, and each run's `cost` from its caches and walks ([`crate::CostStudy`]).
/// The cost model needs every reference, so the trace is read as events
/// (on its own thread) and the model is stepped over each batch. Its runs make
/// the study's TLB lookups as they go, and keep its counts too where the study's
/// TLB is theirs and there is no nested paging; else a study is stepped beside
/// them over the same batches. Where the
/// run may use more than one thread ([`crate::with_threads`]), the cost model's
/// runs are dealt out to as many parts ([`crate::CostParts`]): this thread steps
/// any study and the first (then fewer runs: `STUDY_AS_RUNS`), a thread of its own
/// each of the others, every one over the same batches in order (each a few
/// batches at most behind this one); the results are the same.
pub fn run_cost_study(
    src: &mut (dyn TraceSource + Send),
    cfg: &StudyConfig,
    cost: &crate::CostConfig,
    progress: &mut dyn Progress,
) -> Result<SimResult, EngineError> {
    let start = Instant::now();
    // Where the cost model's runs make the study's lookups (its TLB, whole pages in every
    // L1, no nested paging), they keep the study's counts too (`CostStudy::count_pages`),
    // and no study makes the same lookups again; else one steps beside the first part.
    let counted =
        cost.machine.tlb == cfg.tlb && crate::CostStudy::could_count_pages(&cfg.page_sizes, cost);
    let mut timed = crate::CostParts::new(
        &cfg.page_sizes,
        cost,
        crate::threads::threads(),
        if counted { 0 } else { STUDY_AS_RUNS },
    )
    .map_err(EngineError::Model)?;
    let mut study = None;
    if !(counted && timed.count_pages()) {
        study = Some(Study::new(cfg)?);
    }
    let info = src.info();
    timed.set_independent(crate::cost::independent_refs(&info));
    let mut next_report = 1u64 << 20;
    let Some((first, others)) = timed.parts_mut().split_first_mut() else {
        return Err(EngineError::Model(
            "a study with time of no page size".into(),
        ));
    };
    let outcome = std::thread::scope(|scope| {
        let (mut to_others, mut others_done) = (vec![], vec![]);
        for part in others {
            let (tx, rx) = mpsc::sync_channel::<Arc<Vec<Event>>>(IN_FLIGHT);
            to_others.push(tx);
            others_done.push(scope.spawn(move || {
                for batch in rx {
                    part.feed(&batch);
                }
            }));
        }
        let outcome = read_ahead(
            src,
            |src, batch: &mut Arc<Vec<Event>>| {
                // A batch another part still reads is left to it (so `make_mut` never
                // copies one).
                if Arc::get_mut(batch).is_none() {
                    *batch = Arc::default();
                }
                let events = Arc::make_mut(batch);
                events.clear();
                src.fill(events, BATCH)
            },
            |batch| {
                for tx in &to_others {
                    // A part that stopped has panicked: its join below says so.
                    let _ = tx.send(Arc::clone(batch));
                }
                if let Some(study) = &mut study {
                    study.feed(batch);
                }
                first.feed(batch);
                let refs = study.as_ref().map_or_else(|| first.refs(), Study::refs);
                report(progress, refs, &mut next_report, start);
            },
        );
        drop(to_others);
        for part in others_done {
            if let Err(panic) = part.join() {
                std::panic::resume_unwind(panic);
            }
        }
        outcome
    });
    progress.done();
    outcome?;
    let mut result = match &study {
        Some(study) => study.finish(info),
        None => {
            let (refs, runs) = timed.study_runs().ok_or_else(|| {
                EngineError::Model("the cost model's runs kept no study counts".into())
            })?;
            crate::study::sim_result(info, crate::study::tlb_json(&cfg.tlb), refs, runs)
        }
    };
    for (run, c) in result.runs.iter_mut().zip(timed.finish()) {
        run.cost = Some(c);
    }
    let m = &cost.machine;
    result.machine = Some(match cost.nested_host {
        Some(h) => format!("{} (nested:host={h})", m.name),
        None => m.name.clone(),
    });
    result.elapsed_seconds = Some(start.elapsed().as_secs_f64());
    Ok(result)
}

/// Calls `progress` about every million references.
fn report(progress: &mut dyn Progress, refs: u64, next: &mut u64, start: Instant) {
    if refs >= *next {
        progress.update(refs, start.elapsed());
        *next = refs + (1 << 20);
    }
}

/// Reads `src` on its own thread, a few batches ahead, with `fill` (which
/// says whether there may be more), and hands each batch in order to `step`
/// on this thread (both on this thread, in turn, where the run may use one
/// thread only: [`crate::with_threads`]). Ends when the source is exhausted or fails; a panic of
/// the reader is resumed here.
fn read_ahead<B: Default + Send>(
    src: &mut (dyn TraceSource + Send),
    mut fill: impl FnMut(&mut (dyn TraceSource + Send), &mut B) -> Result<bool, TraceError> + Send,
    mut step: impl FnMut(&mut B),
) -> Result<(), TraceError> {
    if crate::threads::threads() == 1 {
        // One thread: read and step in turn, with no hand-offs.
        let mut batch = B::default();
        while fill(src, &mut batch)? {
            step(&mut batch);
        }
        return Ok(());
    }
    let (full_tx, full_rx) = mpsc::sync_channel::<B>(IN_FLIGHT);
    let (empty_tx, empty_rx) = mpsc::sync_channel::<B>(IN_FLIGHT + 1);
    for _ in 0..=IN_FLIGHT {
        let _ = empty_tx.send(B::default());
    }
    let outcome = std::thread::scope(|scope| {
        let reader = scope.spawn(move || -> Result<(), TraceError> {
            // Ends when the source is exhausted or fails, or when the stepping side hung up.
            while let Ok(mut batch) = empty_rx.recv() {
                if !fill(src, &mut batch)? || full_tx.send(batch).is_err() {
                    return Ok(());
                }
            }
            Ok(())
        });
        for mut batch in full_rx.iter() {
            step(&mut batch);
            let _ = empty_tx.send(batch);
        }
        reader.join()
    });
    match outcome {
        Ok(r) => r,
        Err(panic) => std::panic::resume_unwind(panic),
    }
}
