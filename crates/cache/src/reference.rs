//! The simple model every fast cache is tested against: one list of lines
//! per set, most recent first, searched and reordered the obvious way.

use std::collections::VecDeque;

/// A set-associative LRU cache as a list per set.
#[derive(Clone, Debug)]
pub struct ReferenceCache {
    ways: usize,
    line_bytes: u64,
    sets: Vec<VecDeque<u64>>,
    hashed: bool,
}

impl ReferenceCache {
    /// `size` bytes in lines of `line_bytes`, `ways` lines per set.
    pub fn new(size: u64, ways: u32, line_bytes: u32) -> ReferenceCache {
        let sets = size / (ways as u64 * line_bytes as u64);
        ReferenceCache {
            ways: ways as usize,
            line_bytes: line_bytes as u64,
            sets: vec![VecDeque::new(); sets as usize],
            hashed: false,
        }
    }

    /// [`ReferenceCache::new`] with its sets chosen as `index` says.
    pub fn indexed(
        size: u64,
        ways: u32,
        line_bytes: u32,
        index: crate::SetIndex,
    ) -> ReferenceCache {
        ReferenceCache {
            hashed: index == crate::SetIndex::Hashed,
            ..ReferenceCache::new(size, ways, line_bytes)
        }
    }

    /// Looks up the line of `paddr`; true on a hit. The line becomes the most
    /// recent of its set; a miss evicts the least recent of a full set.
    pub fn access(&mut self, paddr: u64) -> bool {
        let line = paddr / self.line_bytes;
        let n = self.sets.len() as u64;
        let set = if self.hashed {
            crate::config::hashed_set(line, n)
        } else {
            line % n
        };
        let set = &mut self.sets[set as usize];
        let hit = match set.iter().position(|&l| l == line) {
            Some(p) => {
                set.remove(p);
                true
            }
            None => {
                if set.len() == self.ways {
                    set.pop_back();
                }
                false
            }
        };
        set.push_front(line);
        hit
    }

    /// The lines of set `set`, most recent first.
    pub fn set_lines(&self, set: usize) -> Vec<u64> {
        self.sets[set].iter().copied().collect()
    }
}
