//! How many threads one run may use.
//!
//! A run uses more than its calling thread in three places: the trace is read
//! a few batches ahead on a thread of its own ([`crate::run_study`],
//! [`crate::run_cost_study`]), a mapped Lackey file is parsed in pieces on
//! every core, and the policy runs are stepped in parallel
//! ([`crate::run_policies`]). That is right for one run on an idle machine,
//! and wrong where the caller already runs one task per core (a sweep's
//! workers): each task's extra threads then compete with the other tasks for
//! the same cores, and the reading thread's hand-offs cost CPU that a single
//! thread, which reads and steps in turn, does not spend.
//!
//! [`with_threads`] bounds the threads of every run started on the calling
//! thread while its closure runs; the bound is the calling thread's own, so
//! two callers on two threads each keep theirs. Without it a run uses what
//! the machine offers. Results do not depend on the bound: only where the
//! work runs does.

use std::cell::Cell;
use std::num::NonZeroUsize;

thread_local! {
    /// The bound `with_threads` set on this thread, if any.
    static LIMIT: Cell<Option<NonZeroUsize>> = const { Cell::new(None) };
}

/// Runs `f` with every run it starts on this thread using at most `threads`
/// threads (the calling one included); `None` leaves the bound as it was.
/// The previous bound is restored afterwards, also when `f` panics.
pub fn with_threads<R>(threads: Option<NonZeroUsize>, f: impl FnOnce() -> R) -> R {
    struct Restore(Option<NonZeroUsize>);
    impl Drop for Restore {
        fn drop(&mut self) {
            LIMIT.with(|l| l.set(self.0));
        }
    }
    let Some(n) = threads else { return f() };
    let _restore = Restore(LIMIT.with(|l| l.replace(Some(n))));
    f()
}

/// The threads a run started on this thread may use: the bound
/// [`with_threads`] set, else the machine's available parallelism.
pub(crate) fn threads() -> usize {
    LIMIT
        .with(Cell::get)
        .or_else(|| std::thread::available_parallelism().ok())
        .map_or(1, NonZeroUsize::get)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bound_is_the_callers_and_is_restored() {
        let one = NonZeroUsize::new(1);
        let three = NonZeroUsize::new(3);
        let outside = threads();
        with_threads(three, || {
            assert_eq!(threads(), 3);
            with_threads(one, || assert_eq!(threads(), 1));
            assert_eq!(threads(), 3);
            // Another thread keeps its own.
            std::thread::scope(|s| {
                s.spawn(|| assert_eq!(threads(), outside));
            });
            with_threads(None, || assert_eq!(threads(), 3));
        });
        assert_eq!(threads(), outside);
        let caught = std::panic::catch_unwind(|| with_threads(one, || panic!("inside")));
        assert!(caught.is_err());
        assert_eq!(threads(), outside);
    }
}
