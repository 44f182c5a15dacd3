//! Bitmaps for the buddy allocator: a plain one, and a hierarchical one that
//! finds its lowest set bit in O(log64 n).

/// A fixed-length bitmap. Out-of-range reads return `false`; out-of-range
/// writes are ignored (the allocator checks ranges before it writes).
#[derive(Clone, Debug)]
pub(crate) struct Bits {
    words: Vec<u64>,
    len: usize,
}

impl Bits {
    pub(crate) fn new(len: usize) -> Bits {
        Bits {
            words: vec![0; len.div_ceil(64)],
            len,
        }
    }

    #[inline]
    pub(crate) fn get(&self, i: usize) -> bool {
        i < self.len && self.words[i / 64] & (1 << (i % 64)) != 0
    }

    /// Sets bit `i`; returns whether its word was all zero before.
    #[inline]
    pub(crate) fn set(&mut self, i: usize) -> bool {
        if i >= self.len {
            return false;
        }
        let w = &mut self.words[i / 64];
        let was_empty = *w == 0;
        *w |= 1 << (i % 64);
        was_empty
    }

    /// Clears bit `i`; returns whether its word is all zero after.
    #[inline]
    pub(crate) fn clear(&mut self, i: usize) -> bool {
        if i >= self.len {
            return false;
        }
        let w = &mut self.words[i / 64];
        *w &= !(1 << (i % 64));
        *w == 0
    }

    /// Sets bits `lo..hi` a word at a time.
    pub(crate) fn set_range(&mut self, lo: usize, hi: usize) {
        let hi = hi.min(self.len);
        let mut i = lo;
        while i < hi {
            let bit = i % 64;
            let n = (64 - bit).min(hi - i);
            let mask = if n == 64 {
                u64::MAX
            } else {
                ((1u64 << n) - 1) << bit
            };
            self.words[i / 64] |= mask;
            i += n;
        }
    }

    pub(crate) fn count_ones(&self) -> u64 {
        self.words.iter().map(|w| u64::from(w.count_ones())).sum()
    }

    /// The indices of the set bits, ascending.
    pub(crate) fn iter_ones(&self) -> impl Iterator<Item = usize> + '_ {
        self.words.iter().enumerate().flat_map(|(wi, &w)| {
            let mut w = w;
            std::iter::from_fn(move || {
                (w != 0).then(|| {
                    let b = w.trailing_zeros() as usize;
                    w &= w - 1;
                    wi * 64 + b
                })
            })
        })
    }

    pub(crate) fn bytes(&self) -> usize {
        self.words.len() * 8
    }
}

/// A bitmap with summary levels: bit `j` of level `l + 1` says whether word
/// `j` of level `l` is non-zero, up to a single top word.
#[derive(Clone, Debug)]
pub(crate) struct TreeBits {
    /// `levels[0]` holds the bits themselves.
    levels: Vec<Bits>,
}

impl TreeBits {
    pub(crate) fn new(len: usize) -> TreeBits {
        let mut levels = vec![Bits::new(len.max(1))];
        while levels[levels.len() - 1].words.len() > 1 {
            let below = levels[levels.len() - 1].words.len();
            levels.push(Bits::new(below));
        }
        TreeBits { levels }
    }

    #[inline]
    pub(crate) fn get(&self, i: usize) -> bool {
        self.levels[0].get(i)
    }

    #[inline]
    pub(crate) fn set(&mut self, i: usize) {
        let mut i = i;
        for level in &mut self.levels {
            if !level.set(i) {
                break;
            }
            i /= 64;
        }
    }

    #[inline]
    pub(crate) fn clear(&mut self, i: usize) {
        let mut i = i;
        for level in &mut self.levels {
            if !level.clear(i) {
                break;
            }
            i /= 64;
        }
    }

    /// The lowest set bit, in one word read per level.
    #[inline]
    pub(crate) fn first_set(&self) -> Option<usize> {
        let mut idx = 0usize;
        for level in self.levels.iter().rev() {
            let w = *level.words.get(idx)?;
            if w == 0 {
                return None;
            }
            idx = idx * 64 + w.trailing_zeros() as usize;
        }
        Some(idx)
    }

    pub(crate) fn count_ones(&self) -> u64 {
        self.levels[0].count_ones()
    }

    pub(crate) fn iter_ones(&self) -> impl Iterator<Item = usize> + '_ {
        self.levels[0].iter_ones()
    }

    /// Whether every summary bit agrees with the words below it.
    pub(crate) fn summaries_agree(&self) -> bool {
        self.levels.windows(2).all(|pair| {
            pair[0]
                .words
                .iter()
                .enumerate()
                .all(|(j, &w)| (w != 0) == pair[1].get(j))
        })
    }

    pub(crate) fn bytes(&self) -> usize {
        self.levels.iter().map(Bits::bytes).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tree_finds_lowest_across_levels() {
        let mut t = TreeBits::new(300_000);
        assert_eq!(t.first_set(), None);
        t.set(299_999);
        t.set(70_000);
        assert_eq!(t.first_set(), Some(70_000));
        t.clear(70_000);
        assert_eq!(t.first_set(), Some(299_999));
        assert!(t.summaries_agree());
        t.clear(299_999);
        assert_eq!(t.first_set(), None);
        assert!(t.summaries_agree());
    }

    #[test]
    fn set_range_and_iter() {
        let mut b = Bits::new(200);
        b.set_range(60, 140);
        assert_eq!(b.count_ones(), 80);
        assert_eq!(b.iter_ones().next(), Some(60));
        assert_eq!(b.iter_ones().last(), Some(139));
        assert!(!b.get(1000));
    }
}
