//! Page tables: a radix table whose geometry follows the base page size, with
//! leaves at any level and contiguous runs of entries for the sizes between.
//!
//! The seam is [`PageTable`]; [`RadixPageTable`] is the model and
//! [`ReferencePageTable`] the simple map it is tested against. A [`Geometry`]
//! says how many levels there are, how many bits each level translates, which
//! levels may hold leaves (Winwood et al.'s (OLS 2002) huge leaves collapsed up the tree,
//! its Figure 3) and how long a contiguous run of entries may be (today's
//! multi-size THP: 16K..1M with 4K base pages, marked like arm64's contiguous
//! bit).
//!
//! ```
//! use pagelab_core::{BasePfn, PageSize, Pfn, VirtAddr};
//! use pagelab_mm::pagetable::{Geometry, PageTable, PteFlags, RadixPageTable};
//!
//! let mut pt = RadixPageTable::new(Geometry::x86_64());
//! pt.map(VirtAddr(0x20_0000), BasePfn(512), PageSize::M2, PteFlags::RW).unwrap();
//! let t = pt.walk(VirtAddr(0x20_1234)).unwrap();
//! assert_eq!((t.size, t.pfn, t.levels), (PageSize::M2, BasePfn(512), 3));
//! // the root, one upper directory and one middle directory: 3 pages of 4K
//! assert_eq!(pt.memory_bytes(), 3 * 4096);
//! ```
//!
//! Frame numbers ([`BasePfn`]) count frames of the geometry's base page size,
//! as a page-table entry holds them (the physical allocator's 4K
//! [`pagelab_core::Pfn`] converts with [`pagelab_core::Pfn::to_base`]), and a
//! page of `size` must start at a frame that is a multiple of `size / base`
//! (natural physical alignment, as hardware requires of huge leaves).

mod geometry;
mod radix;
mod reference;
mod tally;

pub use geometry::{Geometry, GeometryError, GeometrySpec, Placement, MAX_LEVELS};
pub use radix::{RadixPageTable, MAX_PFN};
pub use reference::ReferencePageTable;
pub use tally::TableTally;

use pagelab_core::{BasePfn, PageSize, Pfn, VirtAddr};
use serde::Serialize;
use std::collections::BTreeMap;

/// The permission and state bits of a leaf entry (read, write, execute, user
/// and three free bits), as one byte.
///
/// The low three bits mean the same as [`pagelab_core::Prot`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(transparent)]
pub struct PteFlags(pub u8);

impl PteFlags {
    /// Readable.
    pub const READ: PteFlags = PteFlags(1);
    /// Writable.
    pub const WRITE: PteFlags = PteFlags(2);
    /// Executable.
    pub const EXEC: PteFlags = PteFlags(4);
    /// Readable and writable.
    pub const RW: PteFlags = PteFlags(3);

    /// The flags for a protection given by a trace.
    pub fn from_prot(prot: pagelab_core::Prot) -> PteFlags {
        PteFlags(prot.0)
    }

    /// Whether every bit of `other` is set here.
    pub fn contains(self, other: PteFlags) -> bool {
        self.0 & other.0 == other.0
    }
}

/// One mapped page: where it starts, its size, its first frame and its flags.
///
/// A page table's mapping holds its frame as the entry does, a [`BasePfn`];
/// once taken out of the table (by the machine's unmap, for the policy to
/// free), the same page is a [`PhysMapping`], whose frame is the physical
/// allocator's 4K [`Pfn`]. [`Mapping::to_phys`] and [`Mapping::to_base`]
/// convert.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub struct Mapping<F = BasePfn> {
    /// First virtual byte of the page (aligned to `size`).
    pub start: VirtAddr,
    /// Page size.
    pub size: PageSize,
    /// First frame of the page: a [`BasePfn`] in a page table, a 4K [`Pfn`]
    /// in a [`PhysMapping`].
    pub pfn: F,
    /// Flags.
    pub flags: PteFlags,
}

/// A mapping whose frame is in the physical allocator's 4K units.
pub type PhysMapping = Mapping<Pfn>;

impl Mapping<BasePfn> {
    /// The same page with its frame in 4K units, given the table's base size.
    #[inline]
    pub fn to_phys(self, base: PageSize) -> PhysMapping {
        Mapping {
            start: self.start,
            size: self.size,
            pfn: self.pfn.to_pfn(base),
            flags: self.flags,
        }
    }
}

impl Mapping<Pfn> {
    /// The same page with its frame in base-page units of `base`.
    #[inline]
    pub fn to_base(self, base: PageSize) -> Mapping {
        Mapping {
            start: self.start,
            size: self.size,
            pfn: self.pfn.to_base(base),
            flags: self.flags,
        }
    }
}

/// The result of a successful walk: the leaf found and what finding it cost.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub struct Translation {
    /// First virtual byte of the page that holds the address.
    pub start: VirtAddr,
    /// Page size (of the whole contiguous run, for a run).
    pub size: PageSize,
    /// First frame of the page, in base-page frames.
    pub pfn: BasePfn,
    /// Flags.
    pub flags: PteFlags,
    /// Table levels touched, the root included: the walk cost in memory
    /// references (4 for a 4K page on x86-64, 3 for 2M, 2 for 1G).
    pub levels: u8,
}

impl Translation {
    /// The 4K frame that holds byte `va` of this page (which must hold it),
    /// given the table's base page size.
    #[inline]
    pub fn frame_of(&self, va: VirtAddr, base: PageSize) -> Pfn {
        self.pfn.to_pfn(base) + Pfn::count_in(va - self.start)
    }

    /// The mapping this translation found.
    pub fn mapping(&self) -> Mapping {
        Mapping {
            start: self.start,
            size: self.size,
            pfn: self.pfn,
            flags: self.flags,
        }
    }
}

/// One leaf split into smaller leaves (a demotion).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub struct Split {
    /// First virtual byte of the page that was split.
    pub start: VirtAddr,
    /// Its size before.
    pub from: PageSize,
    /// The size of each piece after.
    pub to: PageSize,
    /// The number of pieces (`from / to`).
    pub pieces: u64,
}

/// What a [`PageTable::protect`] did.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct ProtectReport {
    /// Mappings whose flags were set (after splitting), each counted once.
    pub updated: u64,
    /// Leaves split because the change covered only part of them, in address
    /// order, a split before the splits of its pieces.
    pub splits: Vec<Split>,
}

/// A page table's own counters.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct PageTableStats {
    /// Table pages in use per level; index 0 is level 1 (the leaf tables).
    pub tables_per_level: Vec<u64>,
    /// Mapped pages per size (a contiguous run counts once, at its size).
    pub leaves_per_size: BTreeMap<PageSize, u64>,
    /// Bytes of table pages in use.
    pub memory_bytes: u64,
    /// Highest `memory_bytes` seen.
    pub peak_memory_bytes: u64,
    /// Table pages allocated so far (the root included).
    pub tables_allocated: u64,
    /// Table pages freed so far because they became empty.
    pub tables_freed: u64,
    /// Leaves split so far (by `protect` and `split`).
    pub splits: u64,
}

/// Why a page-table operation was refused. The table is unchanged after an error.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PtError {
    /// The geometry has no leaf level or contiguous run for this size.
    #[error("a page table with {base} base pages cannot map a {size} page: use one of its leaf sizes or contiguous-run sizes (Geometry::sizes)")]
    UnsupportedSize {
        /// The size asked for.
        size: PageSize,
        /// The geometry's base page size.
        base: PageSize,
    },
    /// The virtual address is not a multiple of the page size.
    #[error("address {va} is not aligned to the {size} page size: a page starts at a multiple of its size")]
    Misaligned {
        /// The address given.
        va: VirtAddr,
        /// The size it had to be aligned to.
        size: PageSize,
    },
    /// The page would reach beyond the virtual address space of the geometry.
    #[error("address {va} with a {size} page is outside the {va_bits}-bit virtual address space")]
    OutOfRange {
        /// The address given.
        va: VirtAddr,
        /// The page size.
        size: PageSize,
        /// Bits of virtual address the geometry translates.
        va_bits: u32,
    },
    /// The frame number is not naturally aligned for the size, or too large.
    #[error("frame {pfn:?} cannot hold a {size} page: it must be a multiple of size/base and below 2^48")]
    BadPfn {
        /// The frame given.
        pfn: BasePfn,
        /// The page size.
        size: PageSize,
    },
    /// Part of the range is already mapped.
    #[error("cannot map {size} at {va}: part of it is already mapped (unmap it first)")]
    Overlap {
        /// The address given.
        va: VirtAddr,
        /// The size asked for.
        size: PageSize,
    },
    /// No page is mapped at the address.
    #[error("nothing is mapped at {va}")]
    NotMapped {
        /// The address given.
        va: VirtAddr,
    },
    /// A page is mapped at the address, but it does not start there or has another size.
    #[error("cannot unmap {size} at {va}: the page there is {found:?}")]
    SizeMismatch {
        /// The address given.
        va: VirtAddr,
        /// The size asked for.
        size: PageSize,
        /// The page actually mapped there.
        found: Mapping,
    },
    /// A range is not made of whole base pages inside the address space.
    #[error(
        "range {va}+{len:#x} must start and end on base-page boundaries inside the address space"
    )]
    BadRange {
        /// Start of the range.
        va: VirtAddr,
        /// Length in bytes.
        len: u64,
    },
    /// The page at the address is a base page: there is nothing smaller to split into.
    #[error("the page at {va} is a base page and cannot be split")]
    CannotSplit {
        /// The address given.
        va: VirtAddr,
    },
}

/// The page table seam: map, unmap, walk, protect and split pages of mixed
/// sizes, and report the table's own memory.
///
/// Contract:
/// - `map(va, pfn, size, flags)` maps one page of `size` at `va`. It refuses,
///   checking in this order, a size the geometry cannot map
///   ([`PtError::UnsupportedSize`]), a `va` not aligned to `size`
///   ([`PtError::Misaligned`]), a page reaching beyond the address space
///   ([`PtError::OutOfRange`]), a frame not aligned to `size / base` or
///   `>= 2^48` ([`PtError::BadPfn`]), and any overlap with an existing
///   mapping ([`PtError::Overlap`]). On error nothing changes.
/// - `unmap(va, size)` removes exactly the page that starts at `va` and has
///   `size`, and returns it; the same argument checks as `map` come first,
///   then [`PtError::NotMapped`] or [`PtError::SizeMismatch`]. Tables left
///   empty are freed (never the root).
/// - `walk(va)` returns the leaf holding `va` with the number of table levels
///   touched; a contiguous run is reported at its whole size with the pfn of
///   its first frame. Addresses outside the address space are unmapped.
/// - `protect(va, len, flags)` sets the flags of every page in the range; a
///   page only partly inside is first split (a run into its entries, a huge
///   leaf into the leaves of the next lower leaf level), again until every
///   piece is inside or outside, and each split is reported. `va` and `len`
///   must be multiples of the base page ([`PtError::BadRange`]).
/// - `split(va)` demotes the page holding `va` one step in the same way.
/// - `memory_bytes()` is the sum over table pages in use of their size; the
///   root always exists. Tables are allocated when a mapping first needs them.
pub trait PageTable {
    /// The geometry this table was built with.
    fn geometry(&self) -> &Geometry;
    /// Maps one page; see the contract.
    fn map(
        &mut self,
        va: VirtAddr,
        pfn: BasePfn,
        size: PageSize,
        flags: PteFlags,
    ) -> Result<(), PtError>;
    /// Unmaps the page of `size` starting at `va`; see the contract.
    fn unmap(&mut self, va: VirtAddr, size: PageSize) -> Result<Mapping, PtError>;
    /// The leaf holding `va`, if any.
    fn walk(&self, va: VirtAddr) -> Option<Translation>;
    /// Table levels a walk for `va` reads before it finds a leaf or an empty
    /// entry: the cost of the walk that precedes a fault. Equals
    /// `walk(va).levels` when `va` is mapped; 0 outside the address space.
    fn walk_levels(&self, va: VirtAddr) -> u8;
    /// Sets flags on a range, splitting pages partly inside it.
    fn protect(
        &mut self,
        va: VirtAddr,
        len: u64,
        flags: PteFlags,
    ) -> Result<ProtectReport, PtError>;
    /// Splits the page holding `va` one step down.
    fn split(&mut self, va: VirtAddr) -> Result<Split, PtError>;
    /// Every mapping that intersects `[va, va + len)`, in address order (the
    /// range is clipped to the address space; never an error).
    fn mappings_in(&self, va: VirtAddr, len: u64) -> Vec<Mapping>;
    /// Whether no mapping intersects `[va, va + len)`.
    fn is_unmapped(&self, va: VirtAddr, len: u64) -> bool {
        self.mappings_in(va, len).is_empty()
    }
    /// Bytes of table pages in use.
    fn memory_bytes(&self) -> u64;
    /// Counters.
    fn stats(&self) -> PageTableStats;
}

/// The mapping of `size` that holds `va`.
pub(crate) fn mapping_of(va: VirtAddr, size: PageSize, pfn: BasePfn, flags: PteFlags) -> Mapping {
    Mapping {
        start: va.align_down(size),
        size,
        pfn,
        flags,
    }
}
