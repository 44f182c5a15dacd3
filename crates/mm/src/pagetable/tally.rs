//! A running total of page-table memory over many page tables: a machine's
//! processes attach their tables to one [`TableTally`], which each table
//! updates where it allocates and frees a table node, so the machine's page
//! table bytes are known without summing over its processes (Bligh and Hansen
//! (OLS 2003) model thousands of them).

use std::sync::atomic::{AtomicU64, Ordering};

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
