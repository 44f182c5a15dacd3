//! The operating-system model of pagelab: the memory-management system the
//! papers describe, built from passive components that the engine steps.
//!
//! - [`phys`]: physical memory, a buddy allocator with zones (seam: `FrameAllocator`).
//! - [`pagetable`]: a radix page table with leaves at any level (seam: `PageTable`).
//! - [`vma`]: address spaces: VMAs with protection, backing and page-size wishes.

pub mod pagetable;
pub mod phys;
pub mod vma;
