//! TLB models for pagelab: fully and set-associative LRU arrays, split and
//! two-level hierarchies holding pages of several sizes, and TOML presets.
//!
//! Overview:
//! - [`Tlb`] is the array seam; [`SmallFullyAssoc`] (keys in recency order, up to
//!   128 entries), [`FullyAssoc`] (O(1) LRU for any size) and [`SetAssoc`] (LRU
//!   per set) implement it, chosen by the closed enum [`TlbArray`].
//!   Entries are keyed by (page number, page size), so sizes coexist; page
//!   numbers are [`pagelab_core::Vpn`]s and addresses [`pagelab_core::VirtAddr`]s.
//! - [`TlbHierarchy`] is a split L1 (instruction and data) with an optional L2,
//!   unified or per side; each level is one or more arrays, each for some page
//!   sizes. [`TlbHierarchy::access`] returns an [`Outcome`] and keeps counters
//!   ([`TlbStats`], serializable).
//! - [`TlbConfig`] is read from TOML ([`load`], [`resolve`]) or taken from the
//!   built-in [`presets`] (`weisberg`, the default, `pentium4`, `pkunity`,
//!   `power5plus`, `skylake`, `zen4`).
//! - [`mod@reference`] is the slow, obviously-correct oracle the tests compare against.
//!
//! ```
//! use pagelab_core::{PageSize, Vpn};
//! use pagelab_tlb::{preset, Outcome, Side, TlbHierarchy};
//!
//! let cfg = preset("weisberg").unwrap();
//! let mut tlb = TlbHierarchy::new(&cfg).unwrap();
//! let size: PageSize = "16K".parse().unwrap();
//! assert_eq!(tlb.access(Side::Data, Vpn(7), size), Outcome::Miss);
//! assert_eq!(tlb.access(Side::Data, Vpn(7), size), Outcome::L1Hit);
//! assert_eq!(tlb.access(Side::Instr, Vpn(7), size), Outcome::Miss); // split L1
//! let stats = tlb.stats();
//! assert_eq!((stats.data.accesses, stats.data.misses), (2, 1));
//! println!("{}", cfg.describe());
//! ```

mod array;
mod config;
mod error;
mod front;
mod fully_assoc;
mod hierarchy;
mod presets;
pub mod reference;
mod set_assoc;
mod small_assoc;
mod whole;

pub use array::{Tlb, TlbArray};
pub use config::{
    load, ArrayConfig, LevelConfig, OtherSizes, Replacement, SetIndex, TlbConfig, MAX_ENTRIES,
};
pub use error::TlbError;
pub use front::{FrontMiss, Fronts, AVX512_RANKS, FRONT_LANES, PORTABLE_RANKS};
pub use fully_assoc::FullyAssoc;
pub use hierarchy::{LevelStats, Outcome, Side, SideStats, TlbHierarchy, TlbStats};
pub use presets::{preset, preset_names, preset_text, presets, resolve, DEFAULT_PRESET};
pub use set_assoc::SetAssoc;
pub use small_assoc::SmallFullyAssoc;
pub use whole::WholeL1;
