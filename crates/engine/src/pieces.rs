//! The study over a trace read as pieces on every core (a mapped Lackey file).
//!
//! Each thread takes the next piece, parses and filters it into a batch of
//! page words, and leaves the batch for the study; whichever thread finds the
//! batch the study needs next steps the study over it and over any that
//! follow it. Parsing, the bulk of the work, thus runs on all cores, and the
//! study, which must see the pieces in order, on one at a time.

use crate::driver::Progress;
use crate::Study;
use pagelab_trace::{PageBatch, PageFilter, PieceError, Pieces, TraceError};
use std::collections::BTreeMap;
use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::Instant;

/// Pieces parsed ahead of the one the study needs next, at most: memory
/// stays bounded whatever the trace length.
const AHEAD: usize = 8;

/// Threads at most: parsing scales, the study (one thread at a time) does not.
const MAX_THREADS: usize = 4;

/// What the threads share, under one lock.
#[derive(Default)]
struct Shared {
    /// The next piece to parse.
    next: usize,
    /// The pieces the study has stepped over, and their lines and references.
    stepped: usize,
    lines: u64,
    refs: u64,
    /// Parsed pieces waiting for the study, by index.
    parsed: BTreeMap<usize, (PageBatch, Result<u64, PieceError>)>,
    /// Batches to reuse.
    spare: Vec<PageBatch>,
    /// Whether a thread is stepping the study.
    stepping: bool,
    /// The first error in trace order; it stops everyone.
    error: Option<TraceError>,
    /// A thread panicked: everyone stops (the scope then passes the panic on).
    panicked: bool,
}

impl Shared {
    /// Whether the threads should stop taking pieces.
    fn stop(&self) -> bool {
        self.error.is_some() || self.panicked
    }
}

/// The context every thread works in.
struct Work<'a> {
    pieces: &'a Pieces,
    filter: PageFilter,
    shared: Mutex<Shared>,
    /// Signalled whenever the study steps over a piece.
    stepped: Condvar,
    study: Mutex<&'a mut Study>,
}

/// Steps `study` over every piece, in order, parsing on up to [`MAX_THREADS`] threads.
pub(crate) fn run_pieces(
    pieces: &Pieces,
    study: &mut Study,
    progress: &mut dyn Progress,
    start: Instant,
) -> Result<(), TraceError> {
    let threads = crate::threads::threads().min(MAX_THREADS);
    let work = Work {
        pieces,
        filter: study.page_filter(),
        shared: Mutex::new(Shared::default()),
        stepped: Condvar::new(),
        study: Mutex::new(study),
    };
    std::thread::scope(|scope| {
        for _ in 1..threads {
            scope.spawn(|| work.run(None));
        }
        work.run(Some((progress, start)));
    });
    let shared = work.shared.into_inner().unwrap_or_else(|e| e.into_inner());
    shared.error.map_or(Ok(()), Err)
}

/// Held by each thread while it works: if the thread panics, it tells the
/// others to stop, rather than leave them waiting for it for ever.
struct StopOnPanic<'a, 'w>(&'a Work<'w>);

impl Drop for StopOnPanic<'_, '_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.0.lock().panicked = true;
            self.0.stepped.notify_all();
        }
    }
}

impl Work<'_> {
    /// The shared state; a panicked thread's poison is no reason to stop
    /// (its `StopOnPanic` says so).
    fn lock(&self) -> MutexGuard<'_, Shared> {
        self.shared.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// One thread's loop: parse the next piece, step the study if it is its turn.
    fn run(&self, mut progress: Option<(&mut dyn Progress, Instant)>) {
        let _stop = StopOnPanic(self);
        let mut next_report = 1u64 << 20;
        let mut shared = self.lock();
        loop {
            while !shared.stop()
                && shared.next < self.pieces.len()
                && shared.next >= shared.stepped + AHEAD
            {
                shared = self.stepped.wait(shared).unwrap_or_else(|e| e.into_inner());
            }
            if shared.stop() || shared.next >= self.pieces.len() {
                break;
            }
            let i = shared.next;
            shared.next += 1;
            let mut batch = shared.spare.pop().unwrap_or_default();
            drop(shared);
            batch.clear();
            let lines = self.pieces.read(i, &mut self.filter.clone(), &mut batch);
            shared = self.lock();
            shared.parsed.insert(i, (batch, lines));
            if !shared.stepping {
                shared = self.step(shared);
            }
            if let Some((p, start)) = &mut progress {
                if shared.refs >= next_report {
                    let refs = shared.refs;
                    next_report = refs + (1 << 20);
                    drop(shared);
                    p.update(refs, start.elapsed());
                    shared = self.lock();
                }
            }
        }
        // Whoever waits can now see the end or the error.
        self.stepped.notify_all();
    }

    /// Steps the study over every parsed piece it needs next, in order.
    fn step<'g>(&'g self, mut shared: MutexGuard<'g, Shared>) -> MutexGuard<'g, Shared> {
        shared.stepping = true;
        while !shared.stop() {
            let at = shared.stepped;
            let Some((batch, lines)) = shared.parsed.remove(&at) else {
                break;
            };
            drop(shared);
            if lines.is_ok() {
                let mut study = self.study.lock().unwrap_or_else(|e| e.into_inner());
                study.feed_pages(&batch);
            }
            shared = self.lock();
            match lines {
                Ok(n) => shared.lines += n,
                Err(e) => shared.error = Some(e.at_line(shared.lines)),
            }
            shared.refs += batch.refs[0] + batch.refs[1];
            shared.stepped += 1;
            shared.spare.push(batch);
            self.stepped.notify_all();
        }
        shared.stepping = false;
        shared
    }
}
