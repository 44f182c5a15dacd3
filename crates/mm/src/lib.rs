//! The operating-system model of pagelab: the memory-management system the
//! papers describe, built from passive components that the engine steps.
//!
//! - [`phys`]: physical memory, a buddy allocator with zones (seam: `FrameAllocator`).
//! - [`pagetable`]: a radix page table with leaves at any level (seam: `PageTable`).
//! - [`vma`]: address spaces: VMAs with protection, backing and page-size wishes.
//! - [`machine`]: physical memory plus every process's VMAs and page table, with
//!   [`counters`].
//! - [`fault`]: the shared fault path: copy-on-write, fork.
//! - [`cache`] and [`filemap`]: the page cache of large folios and file faults.
//! - [`reclaim`]: LRU lists, watermarks, swap-out and page-cache drop.
//! - [`policy`]: superpage policies (seam: `Policy`), one file each.
//! - [`system`]: the model stepped event by event under one policy.
//! - [`platform`] and [`kmem`]: the modelled machine's geometry, kernel and
//!   NUMA nodes (read from a machine file by `pagelab-machine`); [`placement`]:
//!   which CPU, and so which node, each process runs on.
//! - [`sharing`]: many processes sharing memory: page tables and reverse maps.

pub mod cache;
pub mod counters;
pub mod exit_map;
pub mod fault;
pub mod fault_around;
pub mod filemap;
pub mod kmem;
pub mod machine;
pub mod pagetable;
pub mod phys;
pub mod placement;
pub mod platform;
pub mod policy;
pub mod reclaim;
pub mod sharing;
pub mod system;
pub mod vma;
