//! One level of data cache: physically indexed and tagged, set associative,
//! least-recently-used replacement.

use crate::config::{hashed_set, CacheSpec, SetIndex};

/// The tag of an empty way. A line's tag is its number plus one (line
/// numbers are physical addresses shifted right by at least 3 bits, so this
/// never overflows), which lets a new cache's tags be all zeros: memory the
/// system hands out zeroed and maps only where a set is first touched, so a
/// large last level that a run touches sparsely costs little to set up.
const EMPTY: u64 = 0;

/// One set-associative LRU cache of physical lines.
///
/// Each set keeps its tags most recently used first, so a hit at way `p`
/// moves the first `p + 1` tags by one and a miss moves the whole set (the
/// last tag falls out). With the few ways of real caches this is faster than
/// keeping ages.
#[derive(Clone, Debug)]
pub struct Cache {
    ways: usize,
    line_shift: u32,
    sets: u64,
    /// `sets - 1` when the set count is a power of two and the set is chosen by address
    /// (a mask), else 0.
    set_mask: u64,
    /// The set is a hash of the line number ([`SetIndex::Hashed`]).
    hashed: bool,
    tags: Vec<u64>,
}

impl Cache {
    /// An empty cache of the given (already checked) geometry.
    pub fn new(spec: &CacheSpec) -> Cache {
        let ways = spec.ways as usize;
        let sets = spec.sets();
        Cache {
            ways,
            line_shift: spec.line.trailing_zeros(),
            sets,
            set_mask: match spec.index {
                SetIndex::Address if sets.is_power_of_two() => sets - 1,
                _ => 0,
            },
            hashed: spec.index == SetIndex::Hashed,
            tags: vec![EMPTY; sets as usize * ways],
        }
    }

    /// log2 of the line size.
    pub fn line_shift(&self) -> u32 {
        self.line_shift
    }

    #[inline(always)]
    pub(crate) fn set_of(&self, line: u64) -> usize {
        if self.set_mask != 0 || self.sets == 1 {
            (line & self.set_mask) as usize
        } else if self.hashed {
            hashed_set(line, self.sets) as usize
        } else {
            (line % self.sets) as usize
        }
    }

    /// Looks up the line holding physical byte `paddr`, makes it the most
    /// recently used of its set, and says whether it was there. A miss fills
    /// the line, evicting the set's least recently used one.
    #[inline]
    pub fn access(&mut self, paddr: u64) -> bool {
        let line = paddr >> self.line_shift;
        self.access_tag(self.set_of(line), line + 1)
    }

    /// Looks up `tag` (not the empty way's 0) in set `set`, makes it the most recent
    /// there, and says whether it was there; a miss fills it, evicting the
    /// set's least recently used tag.
    #[inline]
    pub(crate) fn access_tag(&mut self, set: usize, tag: u64) -> bool {
        let start = set * self.ways;
        let set = &mut self.tags[start..start + self.ways];
        if set[0] == tag {
            return true;
        }
        let mut prev = set[0];
        for slot in set.iter_mut().skip(1) {
            let cur = *slot;
            *slot = prev;
            if cur == tag {
                set[0] = tag;
                return true;
            }
            prev = cur;
        }
        set[0] = tag;
        false
    }

    /// The tags of set `set`, most recent first (empty ways are 0).
    pub(crate) fn set_tags(&self, set: usize) -> &[u64] {
        &self.tags[set * self.ways..(set + 1) * self.ways]
    }

    /// Set `set`'s tags made a copy of `from`'s (of the same geometry).
    pub(crate) fn copy_set(&mut self, set: usize, from: &Cache) {
        let r = set * self.ways..(set + 1) * self.ways;
        self.tags[r.clone()].copy_from_slice(&from.tags[r]);
    }

    /// Whether the line of `paddr` is cached (changes nothing).
    pub fn contains(&self, paddr: u64) -> bool {
        let line = paddr >> self.line_shift;
        let start = self.set_of(line) * self.ways;
        self.tags[start..start + self.ways].contains(&(line + 1))
    }

    /// The lines of set `set`, most recently used first (for tests).
    pub fn set_lines(&self, set: usize) -> Vec<u64> {
        self.tags[set * self.ways..(set + 1) * self.ways]
            .iter()
            .copied()
            .filter(|&t| t != EMPTY)
            .map(|t| t - 1)
            .collect()
    }

    /// Number of sets.
    pub fn sets(&self) -> u64 {
        self.sets
    }

    /// Forgets every line.
    pub fn clear(&mut self) {
        self.tags.fill(EMPTY);
    }
}
