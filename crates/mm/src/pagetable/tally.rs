//! A running total of page-table memory over many page tables: a machine's
//! processes attach their tables to one [`TableTally`], which each table
//! updates where it allocates and frees a table node, so the machine's page
//! table bytes are known without summing over its processes (Bligh and Hansen
//! (OLS 2003) model thousands of them).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Page-table bytes in use by every table attached, in all and in level-1
/// tables (PTE pages). Atomic only so that a machine can move between
/// threads; one machine is updated by one thread at a time.
#[derive(Debug, Default)]
pub struct TableTally {
    bytes: AtomicU64,
    level1: AtomicU64,
}

impl TableTally {
    /// Page-table bytes of every attached table.
    pub fn bytes(&self) -> u64 {
        self.bytes.load(Ordering::Relaxed)
    }

    /// Bytes of the attached tables' level-1 tables (PTE pages).
    pub fn level1_bytes(&self) -> u64 {
        self.level1.load(Ordering::Relaxed)
    }

    /// Takes in `bytes` more of tables, `level1` of them at level 1.
    pub(super) fn add(&self, bytes: u64, level1: u64) {
        self.bytes.fetch_add(bytes, Ordering::Relaxed);
        self.level1.fetch_add(level1, Ordering::Relaxed);
    }

    /// Gives back `bytes` of tables, `level1` of them at level 1.
    pub(super) fn sub(&self, bytes: u64, level1: u64) {
        self.bytes.fetch_sub(bytes, Ordering::Relaxed);
        self.level1.fetch_sub(level1, Ordering::Relaxed);
    }
}

/// One table's share of a [`TableTally`]: the bytes it has added there, in
/// all and at level 1. It keeps the tally equal to the sum of its stakes by
/// construction: a clone opens a tally of its own holding the same bytes (a
/// copied table is not the original's process), and a dropped stake takes
/// its bytes back out.
#[derive(Debug)]
pub(super) struct TallyStake {
    tally: Arc<TableTally>,
    bytes: u64,
    level1: u64,
}

impl TallyStake {
    /// An empty stake in `tally`.
    pub(super) fn new(tally: &Arc<TableTally>) -> TallyStake {
        TallyStake {
            tally: Arc::clone(tally),
            bytes: 0,
            level1: 0,
        }
    }

    /// Bytes this stake holds.
    pub(super) fn bytes(&self) -> u64 {
        self.bytes
    }

    /// Adds `bytes` of tables, `level1` of them at level 1.
    pub(super) fn add(&mut self, bytes: u64, level1: u64) {
        self.bytes += bytes;
        self.level1 += level1;
        self.tally.add(bytes, level1);
    }

    /// Gives back `bytes` of tables, `level1` of them at level 1.
    pub(super) fn sub(&mut self, bytes: u64, level1: u64) {
        self.bytes -= bytes;
        self.level1 -= level1;
        self.tally.sub(bytes, level1);
    }

    /// Moves the stake's bytes to `tally`; nothing when it already is there.
    pub(super) fn move_to(&mut self, tally: &Arc<TableTally>) {
        if Arc::ptr_eq(&self.tally, tally) {
            return;
        }
        self.tally.sub(self.bytes, self.level1);
        tally.add(self.bytes, self.level1);
        self.tally = Arc::clone(tally);
    }
}

impl Clone for TallyStake {
    fn clone(&self) -> TallyStake {
        let tally = Arc::new(TableTally::default());
        tally.add(self.bytes, self.level1);
        TallyStake {
            tally,
            bytes: self.bytes,
            level1: self.level1,
        }
    }
}

impl Drop for TallyStake {
    fn drop(&mut self) {
        self.tally.sub(self.bytes, self.level1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pagetable::{Geometry, PageTable, PteFlags, RadixPageTable};
    use pagelab_core::{BasePfn, PageSize, VirtAddr};

    /// Tables attached to one tally sum into it; a clone counts in a tally
    /// of its own and leaves the original's alone, also when dropped; a
    /// dropped or moved table takes its bytes out.
    #[test]
    fn a_tally_is_the_sum_of_its_tables() {
        let geo = Geometry::x86_64();
        let shared = Arc::new(TableTally::default());
        let mut a = RadixPageTable::new_in(geo, &shared);
        let root = a.memory_bytes();
        assert_eq!(shared.bytes(), root);
        a.map(VirtAddr(0x4000_0000), BasePfn(7), PageSize::K4, PteFlags(1))
            .unwrap();
        // Three new tables below the root, one of them a PTE page.
        assert_eq!(a.memory_bytes(), 4 * 4096);
        assert_eq!((shared.bytes(), shared.level1_bytes()), (4 * 4096, 4096));
        let b = RadixPageTable::new_in(geo, &shared);
        assert_eq!(shared.bytes(), 5 * 4096);

        let copy = a.clone();
        assert_eq!(copy.memory_bytes(), 4 * 4096);
        assert_eq!(
            shared.bytes(),
            5 * 4096,
            "a clone adds nothing to the original's tally"
        );
        drop(copy);
        assert_eq!(
            shared.bytes(),
            5 * 4096,
            "nor takes anything out when dropped"
        );

        let other = Arc::new(TableTally::default());
        a.attach(&other);
        assert_eq!((shared.bytes(), other.bytes()), (4096, 4 * 4096));
        assert_eq!(other.level1_bytes(), 4096);
        a.unmap(VirtAddr(0x4000_0000), PageSize::K4).unwrap();
        drop(a);
        drop(b);
        assert_eq!(
            (shared.bytes(), other.bytes(), other.level1_bytes()),
            (0, 0, 0)
        );
    }
}
