//! What a machine file says about time: its data caches, memory latency,
//! page-walk caches and the cycles of TLB hits and instructions.
//!
//! Three TOML sections, each read with `deny_unknown_fields`:
//!
//! ```toml
//! [caches]
//! l1d = { size = "8K", ways = 4, line = 64, latency = 2 }
//! l2 = { size = "256K", ways = 8, line = 64, latency = 7 }
//! memory_latency = 290
//!
//! [walk_caches]
//! entries = [0]          # per level above the leaves' (level 2 first)
//!
//! [costs]
//! base_cpi = 1.0         # cycles per instruction, memory aside
//! tlb_hit = [0]          # cycles of a hit in each TLB level
//! ```

use pagelab_core::PageSize;
use serde::{Deserialize, Deserializer, Serialize};

mod nested;
pub use nested::NestedSpec;

/// One level of data cache.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CacheSpec {
    /// Capacity in bytes (written `8K`, `1M` in TOML).
    #[serde(deserialize_with = "bytes")]
    pub size: u64,
    /// Lines per set (associativity).
    pub ways: u32,
    /// Line size in bytes, a power of two.
    pub line: u32,
    /// Cycles from the load to its data when the line is found here.
    pub latency: u32,
    /// How a line's set is chosen (written `index = "hashed"`; absent: by address).
    #[serde(default, skip_serializing_if = "SetIndex::is_address")]
    pub index: SetIndex,
}

/// How a cache chooses a line's set.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SetIndex {
    /// The line number modulo the sets: the address bits above the line's when the sets
    /// are a power of two, as a core's own caches index them. Lines a page apart share
    /// sets, so a stride can reach only part of the cache.
    #[default]
    Address,
    /// A hash of the whole line number, spread evenly over the sets whatever their count:
    /// a last level whose slices a hash of the address chooses (Intel's and AMD's), or the
    /// share of one that a core was measured to get, which holds for any pattern of
    /// addresses. Not for an L1D, which its page offset indexes.
    Hashed,
}

impl SetIndex {
    /// True for [`SetIndex::Address`], the default.
    pub fn is_address(&self) -> bool {
        *self == SetIndex::Address
    }
}

/// The set of `line` among `sets` in a [`SetIndex::Hashed`] cache: the line number mixed
/// by two multiplications by odd constants with an xor of its high bits into its low ones
/// between them (each step a bijection of 64-bit numbers), then scaled to the sets by the
/// mix's high bits, which every bit of the line number reaches; lines a page apart, or at
/// any other stride, spread over all the sets.
#[inline(always)]
pub fn hashed_set(line: u64, sets: u64) -> u64 {
    let mixed = line.wrapping_mul(0x9e37_79b9_7f4a_7c15);
    let mixed = mixed ^ (mixed >> 29);
    ((u128::from(mixed.wrapping_mul(0xbf58_476d_1ce4_e5b9)) * u128::from(sets)) >> 64) as u64
}

impl CacheSpec {
    /// Number of sets (size / (ways × line)); meaningful once checked.
    pub fn sets(&self) -> u64 {
        self.size / (self.ways.max(1) as u64 * self.line.max(1) as u64)
    }
}

/// The `[caches]` section: the data caches, nearest first, and memory.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CachesSpec {
    /// The first-level data cache.
    pub l1d: CacheSpec,
    /// The second level, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub l2: Option<CacheSpec>,
    /// The third level, if any (only with `l2`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub l3: Option<CacheSpec>,
    /// Cycles from a load to its data when it misses every cache.
    pub memory_latency: u32,
}

/// The `[walk_caches]` section: Intel's paging-structure caches, AMD's page
/// walk cache.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WalkCachesSpec {
    /// Entries of the cache of each level's entries, from level 2 (the
    /// entries that point at the leaf tables: Intel's PDE cache) up to the
    /// root. A hit for level `l` lets the walk start at level `l - 1`.
    /// Missing levels have none.
    #[serde(default)]
    pub entries: Vec<u32>,
}

/// The `[costs]` section.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CostsSpec {
    /// Cycles of every instruction apart from its data and translation.
    pub base_cpi: f64,
    /// Cycles of a hit in each TLB level, first level first (a miss pays
    /// the last level's, then the walk).
    pub tlb_hit: Vec<u32>,
    /// Cycles every page walk costs beyond the latencies of its reads (0, the default):
    /// the walker's own work, from the TLB miss to the translation's use. A walk of
    /// entries that all hit the L1D still takes this long. `pagelab machines --measure`
    /// measures it from its probe's walking loads (docs/cost.md).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub walk: u32,
}

pub(crate) fn is_zero(n: &u32) -> bool {
    *n == 0
}

/// The most cycles [`CostsSpec::walk`] may give.
pub const MAX_WALK_CYCLES: u32 = 10_000;

/// How a run's frames lie in physical memory (`[frames] placement`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum FramePlacement {
    /// One after the other in the order of first touches, as a freshly
    /// booted machine hands them out.
    #[default]
    FirstTouch,
    /// Small frames scattered over the machine's memory (`phys.memory`), or over
    /// `[frames] span` of it, as Linux hands them out after a while
    /// ([`crate::Placement`]).
    Scattered,
}

impl FramePlacement {
    /// `Scattered`: the default of `[nested] host_frames`, where `[frames] placement`'s
    /// is `FirstTouch`.
    pub fn scattered() -> Self {
        FramePlacement::Scattered
    }
}

/// The `[frames]` section.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FramesSpec {
    /// Where frames lie (default: `first-touch`).
    #[serde(default)]
    pub placement: FramePlacement,
    /// Bytes of memory a `scattered` placement spreads small frames over (default: all of
    /// `phys.memory`). A machine that has run for a while hands a process its 4K frames
    /// from a few gigabytes of free lists, not from the whole of memory:
    /// `pagelab machines --measure` reads the span from `/proc/self/pagemap`.
    #[serde(
        default,
        deserialize_with = "some_bytes",
        skip_serializing_if = "Option::is_none"
    )]
    pub span: Option<u64>,
    /// The share of a `scattered` placement's small frames that lie right above the one
    /// placed before (default 0): the share of a process's consecutive 4K pages on
    /// neighbouring frames, which `pagelab machines --measure` reads from
    /// `/proc/self/pagemap`. Linux's per-CPU free lists hand out runs of neighbouring
    /// frames between their jumps.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub neighbours: Option<f64>,
}

fn some_bytes<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    bytes(d).map(Some)
}

/// Everything about time a machine file gives.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CostSpec {
    /// Data caches and memory.
    pub caches: CachesSpec,
    /// Page-walk caches.
    #[serde(default)]
    pub walk_caches: WalkCachesSpec,
    /// Cycles of instructions and TLB hits.
    pub costs: CostsSpec,
    /// Nested paging, if the machine can run guests.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nested: Option<NestedSpec>,
    /// The core's misses in flight, if the machine overlaps independent misses
    /// ([`crate::overlap`]); without it every latency is paid in full.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub overlap: Option<crate::OverlapSpec>,
    /// Where the run's frames lie in physical memory.
    #[serde(default)]
    pub frames: FramesSpec,
}

/// A field of a cost specification that cannot be.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("field `{field}`: {why}")]
pub struct CostError {
    /// The field, as a TOML path (`caches.l1d.ways`).
    pub field: String,
    /// What is wrong and what is allowed.
    pub why: String,
}

fn bad<T>(field: impl Into<String>, why: impl Into<String>) -> Result<T, CostError> {
    Err(CostError {
        field: field.into(),
        why: why.into(),
    })
}

fn bytes<'de, D: Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Raw {
        Number(u64),
        Text(String),
    }
    match Raw::deserialize(d)? {
        Raw::Number(n) => Ok(n),
        Raw::Text(t) => pagelab_core::parse_bytes(&t).map_err(serde::de::Error::custom),
    }
}

impl CacheSpec {
    /// Checks that this geometry can exist with pages of at least
    /// `smallest_page` bytes; `field` names it in errors.
    pub fn check(&self, field: &str, smallest_page: u64) -> Result<(), CostError> {
        let f = |name: &str| format!("{field}.{name}");
        if !self.line.is_power_of_two() || self.line < 8 {
            return bad(
                f("line"),
                format!(
                    "{} bytes: a line is a power of two of at least 8 bytes",
                    self.line
                ),
            );
        }
        if self.line as u64 > smallest_page {
            return bad(f("line"), format!("{} bytes: a line may not be larger than the smallest page ({smallest_page} bytes)", self.line));
        }
        if self.ways == 0 {
            return bad(f("ways"), "at least 1 way");
        }
        let lines = self.size / self.line as u64;
        if self.size == 0 || !self.size.is_multiple_of(self.line as u64) {
            return bad(
                f("size"),
                format!(
                    "{} bytes: a cache holds a whole number (at least one) of {}-byte lines",
                    self.size, self.line
                ),
            );
        }
        if !lines.is_multiple_of(self.ways as u64) {
            return bad(f("ways"), format!("{} ways do not divide the {lines} lines of a {}-byte cache: the ways must divide the lines", self.ways, self.size));
        }
        if self.latency == 0 || self.latency > 100_000 {
            return bad(
                f("latency"),
                format!("{} cycles: allowed 1 to 100000", self.latency),
            );
        }
        Ok(())
    }
}

impl CostSpec {
    /// Checks every field, for a machine whose smallest page is
    /// `smallest_page` bytes, whose TLB has `tlb_levels` levels and whose
    /// page table `pt_levels` levels.
    pub fn check(
        &self,
        smallest_page: u64,
        tlb_levels: usize,
        pt_levels: usize,
    ) -> Result<(), CostError> {
        let c = &self.caches;
        if c.l3.is_some() && c.l2.is_none() {
            return bad("caches.l3", "an L3 needs an L2");
        }
        if c.l1d.index == SetIndex::Hashed {
            return bad(
                "caches.l1d.index",
                "\"hashed\" is for an L2 or L3 (a last level's slices); an L1D is indexed by \
                 its address (\"address\", the default)",
            );
        }
        let mut last = 0;
        for (name, spec) in self.levels() {
            spec.check(&format!("caches.{name}"), smallest_page)?;
            if spec.latency < last {
                return bad(format!("caches.{name}.latency"), format!("{} cycles is less than the level before's {last}: latencies grow with the level", spec.latency));
            }
            last = spec.latency;
        }
        if c.memory_latency < last || c.memory_latency > 100_000 {
            return bad(
                "caches.memory_latency",
                format!(
                    "{} cycles: allowed from the last cache's latency ({last}) to 100000",
                    c.memory_latency
                ),
            );
        }
        let walkable = pt_levels.saturating_sub(1);
        if self.walk_caches.entries.len() > walkable {
            return bad("walk_caches.entries", format!("{} levels given: this page table has {walkable} levels above the leaves (level 2 first)", self.walk_caches.entries.len()));
        }
        let k = &self.costs;
        if !(k.base_cpi.is_finite() && (0.0..=1000.0).contains(&k.base_cpi)) {
            return bad(
                "costs.base_cpi",
                format!("{}: allowed 0 to 1000 cycles", k.base_cpi),
            );
        }
        if k.tlb_hit.len() != tlb_levels {
            return bad(
                "costs.tlb_hit",
                format!(
                    "{} values given: give one per TLB level ({tlb_levels})",
                    k.tlb_hit.len()
                ),
            );
        }
        if k.walk > MAX_WALK_CYCLES {
            return bad(
                "costs.walk",
                format!(
                    "{} cycles: allowed 0 (a walk costs its reads alone) to {MAX_WALK_CYCLES}",
                    k.walk
                ),
            );
        }
        if let Some(span) = self.frames.span {
            if span == 0 || !span.is_multiple_of(crate::frames::LARGE) {
                return bad(
                    "frames.span",
                    format!("{span} bytes: a whole number (at least one) of 2M blocks"),
                );
            }
            if self.frames.placement != FramePlacement::Scattered {
                return bad(
                    "frames.span",
                    "a span is where a scattered placement spreads frames: give it with placement = \"scattered\"",
                );
            }
        }
        if let Some(n) = self.frames.neighbours {
            if !(0.0..=1.0).contains(&n) {
                return bad("frames.neighbours", format!("{n}: a share, from 0 to 1"));
            }
            if self.frames.placement != FramePlacement::Scattered {
                return bad(
                    "frames.neighbours",
                    "the share of frames placed next to the last is a scattered placement's: give it with placement = \"scattered\"",
                );
            }
        }
        if let Some(o) = &self.overlap {
            let max = crate::overlap::MAX_IN_FLIGHT;
            for (name, v) in [("miss_buffers", o.miss_buffers), ("walkers", o.walkers)] {
                if !(1..=max).contains(&v) {
                    return bad(
                        format!("overlap.{name}"),
                        format!("{v}: allowed 1 to {max} in flight (1: no overlap)"),
                    );
                }
            }
            let most = crate::overlap::MAX_WALK_INTERVAL;
            if o.walk_interval > most {
                return bad(
                    "overlap.walk_interval",
                    format!(
                        "{} cycles: allowed 0 (walks start as walkers come free) to {most}",
                        o.walk_interval
                    ),
                );
            }
        }
        if let Some(n) = &self.nested {
            if n.walk_cache_entries.len() > 4 {
                return bad(
                    "nested.walk_cache_entries",
                    "at most 4 levels (the host's levels above the leaves)",
                );
            }
            if let Err((field, why)) = n.check_blocks() {
                return bad(format!("nested.{field}"), why);
            }
            if let Some(page) = n.host_page {
                if ![PageSize::K4, PageSize::M2, PageSize::G1].contains(&page) {
                    return bad(
                        "nested.host_page",
                        format!("{page}: an x86-64 host maps guests with 4K, 2M or 1G pages; write one of those"),
                    );
                }
            }
        }
        Ok(())
    }

    /// The caches present, nearest first, with their names (`l1d`, `l2`, `l3`).
    pub fn levels(&self) -> Vec<(&'static str, &CacheSpec)> {
        let c = &self.caches;
        let mut v = vec![("l1d", &c.l1d)];
        v.extend(c.l2.as_ref().map(|s| ("l2", s)));
        v.extend(c.l3.as_ref().map(|s| ("l3", s)));
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_empty_nested_section_is_the_default_with_scattered_host_frames() {
        let empty: NestedSpec = toml::from_str("").unwrap();
        assert_eq!(empty, NestedSpec::default());
        assert_eq!(empty.host_frames, FramePlacement::Scattered);
        // The guest's own `[frames] placement` keeps first touch as its default.
        let frames: FramesSpec = toml::from_str("").unwrap();
        assert_eq!(frames.placement, FramePlacement::FirstTouch);
    }
}
