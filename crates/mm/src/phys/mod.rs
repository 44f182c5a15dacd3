//! Physical memory: a binary buddy allocator per zone, zones with a fallback
//! order and an optional large-page zone reserved at boot, a fragmentation
//! figure, and per-zone active/inactive LRU lists for reclaim.
//!
//! Frames are counted in units of the smallest page (4K): a [`Pfn`] names one
//! 4K frame and an [`Order`] `n` names a naturally aligned block of `2^n` frames.
//!
//! - [`FrameAllocator`]: the seam; [`BuddyAllocator`] (one range of frames) and
//!   [`PhysMem`] (zones, each its own buddy allocator) implement it.
//! - [`PhysConfig`]: memory size, largest order, zones and fallback, read from TOML.
//! - [`Lru`]: active/inactive lists per zone; [`PhysMem`] holds one.
//! - [`unusable_index`]: the fragmentation figure.
//!
//! ```
//! use pagelab_core::{Bytes, Order, PageSize};
//! use pagelab_mm::phys::{FrameAllocator, LargeZoneConfig, PhysConfig, PhysMem, ZoneKind, ZonePref};
//!
//! // As TOML: memory = "64M", large = { size = "16M", page = "2M" }
//! let mut cfg = PhysConfig::new(Bytes(64 << 20));
//! cfg.large = Some(LargeZoneConfig { size: Bytes(16 << 20), page: PageSize::M2, exclusive: true });
//! let mut mem = PhysMem::new(&cfg).unwrap();
//! let big = mem.alloc(Order(9), ZonePref::Any).unwrap(); // 2M, from the large zone
//! let small = mem.alloc(Order(0), ZonePref::Any).unwrap(); // 4K, never from the large zone
//! assert_eq!(big.0 % 512, 0);
//! assert_eq!(mem.zone_of(big), mem.zone_id(ZoneKind::Large));
//! mem.free(small, Order(0)).unwrap();
//! assert!(mem.free(small, Order(0)).is_err()); // double free is an error, not a panic
//! mem.check().unwrap();
//! println!("{:?}", mem.stats().fragmentation); // unusable free space index at 2M
//! ```

mod bitset;
mod buddy;
mod config;
mod lru;
pub mod nodes;
pub mod numa;
mod pcp;
mod stats;
pub mod watermarks;
mod zone;

pub use buddy::BuddyAllocator;
pub use config::{ConfigError, LargeZoneConfig, PhysConfig, ZoneKind};
pub use lru::{Lru, LruList, LruZoneStats};
pub use pcp::{ListMarks, PageTemp, PcpConfig, PcpStats, MAX_PCP_PAGES};
pub use stats::{unusable_index, BuddyStats, Fragmentation, PhysStats, ZoneStats};
pub use watermarks::{SuperpageReclaim, WatermarkConfig, Watermarks};
pub use zone::{PhysMem, Zone};

use pagelab_core::{Order, Pfn};

/// The largest order any allocator accepts: 18, a 1G block of 4K frames.
pub const MAX_ORDER_LIMIT: u8 = 18;

/// An allocated unit of memory as the model maps it: a head frame and an order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub struct Page {
    /// The first frame of the block.
    pub pfn: Pfn,
    /// The block holds `2^order` frames.
    pub order: Order,
}

/// The index of a zone within a [`PhysMem`], in ascending physical order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ZoneId(pub usize);

/// Which zones an allocation may use.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ZonePref {
    /// The configured fallback order; the large zone only for large orders
    /// unless configured otherwise.
    Any,
    /// Only this zone (the large zone included, whatever the order).
    Only(ZoneKind),
}

/// What the physical allocator refuses, and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PhysError {
    /// The order is above the allocator's largest order.
    #[error("order {order} is above the largest order {max} of this allocator")]
    OrderTooLarge {
        /// The order asked for.
        order: u8,
        /// The largest order configured.
        max: u8,
    },
    /// The block does not lie inside the allocator's frames.
    #[error("pfn {pfn:#x} (order {order}) lies outside the frames [{start:#x}, {end:#x})")]
    OutOfRange {
        /// The head frame given.
        pfn: Pfn,
        /// The order given.
        order: u8,
        /// First frame of the allocator.
        start: Pfn,
        /// One past the last frame of the allocator.
        end: Pfn,
    },
    /// The head frame is not a multiple of `2^order`.
    #[error("pfn {pfn:#x} is not aligned to order {order}: a block of order n starts at a multiple of 2^n frames")]
    Misaligned {
        /// The head frame given.
        pfn: Pfn,
        /// The order given.
        order: u8,
    },
    /// The frame is already free.
    #[error("double free: pfn {pfn:#x} (order {order}) is already free")]
    DoubleFree {
        /// The head frame given.
        pfn: Pfn,
        /// The order given.
        order: u8,
    },
    /// The block was allocated at another order.
    #[error("pfn {pfn:#x} was allocated at order {actual}, not order {order}")]
    WrongOrder {
        /// The head frame given.
        pfn: Pfn,
        /// The order given.
        order: u8,
        /// The order it was allocated at.
        actual: u8,
    },
    /// The frame is allocated, but not as the head of a block of this order.
    #[error("pfn {pfn:#x} (order {order}) is not the head of an allocated block")]
    NotAllocated {
        /// The head frame given.
        pfn: Pfn,
        /// The order given.
        order: u8,
    },
    /// The page is not on any LRU list.
    #[error("pfn {pfn:#x} is not on an LRU list")]
    NotOnLru {
        /// The head frame given.
        pfn: Pfn,
    },
    /// The page is already on an LRU list.
    #[error("pfn {pfn:#x} is already on an LRU list")]
    AlreadyOnLru {
        /// The head frame given.
        pfn: Pfn,
    },
    /// No zone has this index.
    #[error("there is no zone {zone}")]
    NoSuchZone {
        /// The index given.
        zone: usize,
    },
    /// An allocator cannot be built over this range.
    #[error("cannot manage {frames} frames from pfn {start:#x}: need at least one frame and an end below 2^63")]
    BadRange {
        /// First frame asked for.
        start: Pfn,
        /// Number of frames asked for.
        frames: u64,
    },
    /// `check()` found broken bookkeeping (a bug in the model, not bad input).
    #[error("invariant broken: {0}")]
    Invariant(String),
}

/// Physical frame allocation by order, with free counts and a fragmentation figure.
///
/// Contract: frames are 4K units ([`Pfn`]); a block of order `n` is `2^n`
/// frames starting at a multiple of `2^n` (naturally aligned).
/// `alloc(order, pref)` returns the head of a free block or `None` when no
/// allowed zone has one (an order above `max_order()` also gives `None`);
/// it never blocks and never reclaims — reclaim is the caller's job (see
/// [`Lru`]). `free(pfn, order)` returns exactly a block that `alloc` (or
/// `split`) handed out, coalescing it with its free buddies; anything else
/// (double free, wrong order, a frame that was never allocated, out of range,
/// misaligned) is an `Err`, leaves the allocator unchanged, and never panics.
/// `split(pfn, order)` turns an allocated block into `2^order` allocated
/// order-0 blocks, each then freed on its own. `free_count(order)` is the
/// number of free blocks of exactly that order (the `/proc/buddyinfo` row);
/// `free_frames()` + used frames == `total_frames()` at all times.
/// `unusable_index(order)` is the fraction of free memory that cannot serve
/// an allocation of that order (0 = none, 1 = all or no free memory).
/// Every operation is deterministic: the same calls give the same frames.
pub trait FrameAllocator {
    /// Allocates a naturally aligned block of `2^order` frames.
    fn alloc(&mut self, order: Order, pref: ZonePref) -> Option<Pfn>;
    /// Frees a block previously allocated with the same order.
    fn free(&mut self, pfn: Pfn, order: Order) -> Result<(), PhysError>;
    /// Turns an allocated block of `order` into `2^order` allocated order-0 blocks.
    fn split(&mut self, pfn: Pfn, order: Order) -> Result<(), PhysError>;
    /// Free blocks of exactly `order` (0 above the largest order).
    fn free_count(&self, order: Order) -> u64;
    /// Free frames in all orders.
    fn free_frames(&self) -> u64;
    /// Frames managed.
    fn total_frames(&self) -> u64;
    /// The largest order this allocator can hand out.
    fn max_order(&self) -> Order;
    /// The unusable free space index for `order`; see [`unusable_index`].
    fn unusable_index(&self, order: Order) -> f64;
    /// Counters, free blocks per order and fragmentation, ready to serialize.
    fn stats(&self) -> PhysStats;
}
