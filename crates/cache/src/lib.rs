//! What address translation costs in time: physically indexed data caches,
//! page-walk caches, and walks that read each page-table entry's line
//! through the same caches as the program's data.
//!
//! A machine file's `[caches]`, `[walk_caches]`, `[costs]` and `[nested]`
//! sections are read into a [`CostSpec`] (see [`config`]); [`Caches`] holds
//! the data caches of one run; a [`PageTable`] knows where its tables lie
//! in physical memory and walks through the caches.
//!
//! ```
//! use pagelab_cache::{Caches, CostSpec, PageTable, TableLayout};
//! let spec: CostSpec = toml::from_str(r#"
//!     [caches]
//!     l1d = { size = "8K", ways = 4, line = 64, latency = 2 }
//!     memory_latency = 200
//!     [costs]
//!     base_cpi = 1.0
//!     tlb_hit = [0]
//! "#).unwrap();
//! spec.check(4096, 1, 2).unwrap();
//! let mut caches = Caches::new(&spec);
//! // ia32: two levels of 1024 four-byte entries over 4K pages.
//! let mut pt = PageTable::new(TableLayout::uniform(12, &[10, 10], 1, 4), &[], 0);
//! let cold = pt.walk(0x1234_5000, &mut caches);
//! assert_eq!((cold.refs, cold.cycles), (2, 400)); // two lines from memory
//! let warm = pt.walk(0x1234_6000, &mut caches); // the same two lines
//! assert_eq!((warm.refs, warm.cycles), (2, 4));
//! ```

#![warn(missing_docs)]

pub mod blocks;
pub mod config;
mod frames;
mod hierarchy;
pub mod overlap;
mod reference;
mod set_assoc;
mod shared;
mod walk;

pub use blocks::{HostBlocks, LruSet, MAX_BLOCK_ENTRIES};
pub use config::{
    CacheSpec, CachesSpec, CostError, CostSpec, CostsSpec, FramePlacement, FramesSpec, NestedSpec,
    SetIndex, WalkCachesSpec, MAX_WALK_CYCLES,
};
pub use frames::{Frames, Placement, NEIGHBOURS_ONE};
pub use hierarchy::{CacheCounts, Caches, Line};
pub use overlap::{Overlap, OverlapSpec, WalkClock};
pub use reference::ReferenceCache;
pub use set_assoc::Cache;
pub use shared::{SharedFirst, SharedLine};
pub use walk::{Host, Lru, PageTable, TableLayout, WalkCaches, WalkCost, MAX_LEVELS};
