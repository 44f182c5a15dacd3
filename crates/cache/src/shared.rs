//! One first cache level for several runs that differ only in where their
//! pages lie in physical memory (the runs of a study, one per page size).
//!
//! When the first level's sets span at most the smallest page (a set index
//! made of page-offset bits, as in every virtually indexed, physically
//! tagged L1), a data line falls in the same set in every run. Each run
//! gives each virtual page a frame of its own, so two data lines share a
//! physical line exactly when they share a virtual one; a run's set that
//! has only ever held data lines therefore holds the same lines, in the same
//! order, as a cache of virtual lines fed the same references. Only the
//! page-table lines of a run's walks make its sets differ, and they are
//! rare (a few thousand in tens of millions of references).
//!
//! So [`SharedFirst`] keeps that cache of virtual lines once for all runs,
//! and each run ([`crate::Caches::share_first`]) keeps a set of its own only
//! while the set holds one of its page-table lines: a walk that reads a
//! line into a shared set first copies the shared set, and the run's set
//! is shared again once its last page-table line is evicted. Then all of
//! its lines are more recent than that evicted line, and every data line
//! more recent than it is still there (LRU evicts the oldest first): the
//! set holds the most recent data lines of its set, as the shared one does.
//! The answers are those of a separate first level per run, exactly (the
//! tests compare them, and `crates/engine/tests/cost.rs` whole runs).

use crate::hierarchy::Caches;
use crate::set_assoc::Cache;
use std::cell::{Cell, RefCell};
use std::rc::Rc;

/// The tag bit of a page-table line in a run's own first-level set: data
/// lines there are tagged by virtual line (plus one, below 2^62), page-table
/// lines by physical line with this bit, so the two never compare equal
/// (a run's tables and pages are distinct frames).
pub(crate) const TABLE_TAG: u64 = 1 << 63;

/// A first cache level of virtual lines, shared by the runs of a study.
#[derive(Clone, Debug)]
pub struct SharedFirst {
    pub(crate) cache: Rc<RefCell<Cache>>,
    /// Per set, how many runs hold it themselves (kept by [`Caches`]: a set's count
    /// goes up when a run's walk makes it the run's own, down when it is shared again).
    pub(crate) owners: Rc<[Cell<u16>; 64]>,
    va_mask: u64,
    set_mask: u64,
    line_shift: u32,
}

/// A data line's lookup in a [`SharedFirst`]: its set, its tag, whether
/// the shared level held it (the shared level is already updated) and whether
/// any run held that set itself.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SharedLine {
    pub(crate) set: usize,
    pub(crate) tag: u64,
    pub(crate) hit: bool,
    pub(crate) owned: bool,
}

impl SharedLine {
    /// Whether the line is a first-level hit in every run that shares the level, where
    /// [`Caches::access_shared`] would change nothing but the run's counts: the shared
    /// level held it and no run holds its set itself. A caller that knows it can count
    /// such a line once for all runs ([`Caches::counts`]'s first level then lacks it).
    #[inline]
    pub fn hit_everywhere(&self) -> bool {
        self.hit && !self.owned
    }
}

impl SharedFirst {
    /// The shared first level for runs built like `caches` (still empty)
    /// whose pages are at least `page_bytes` and aligned to it, whose
    /// translation ignores the address bits outside `va_mask`; `None` when
    /// the level cannot be shared: its sets span more than `page_bytes`, or
    /// it has more than 64 sets (a run marks its own sets in one word).
    pub fn new(caches: &Caches, page_bytes: u64, va_mask: u64) -> Option<SharedFirst> {
        let l1 = caches.levels().first()?;
        let sets = l1.sets();
        let span = sets.checked_shl(l1.line_shift())?;
        if !sets.is_power_of_two() || sets > 64 || span > page_bytes {
            return None;
        }
        Some(SharedFirst {
            cache: Rc::new(RefCell::new(l1.clone())),
            owners: Rc::new(std::array::from_fn(|_| Cell::new(0))),
            va_mask,
            set_mask: sets - 1,
            line_shift: l1.line_shift(),
        })
    }

    /// Reads the line of virtual address `va`; pass the answer to every
    /// run's [`Caches::access_shared`] (after the runs' walks for it).
    #[inline]
    pub fn access(&self, va: u64) -> SharedLine {
        let line = (va & self.va_mask) >> self.line_shift;
        let set = (line & self.set_mask) as usize;
        let tag = line + 1;
        let hit = self.cache.borrow_mut().access_tag(set, tag);
        let owned = self.owners[set].get() != 0;
        SharedLine {
            set,
            tag,
            hit,
            owned,
        }
    }
}
