//! A consumer of page-stream words as the [`PageFilter`](crate::PageFilter)'s contract
//! describes one, for checking readers and filters (the tests and the fuzz targets use
//! it): two ways of making words are as good as each other when this consumer ends in
//! the same state, with the same misses, over both; and a word stream keeps the
//! contract when it ends as the consumer stepped over every reference does.
//!
//! ```
//! use pagelab_core::{AccessKind, Event, MemRef, VirtAddr};
//! use pagelab_trace::consumer::{of_words, Lru};
//! use pagelab_trace::{PageBatch, PageFilter};
//! let refs = [0x1000, 0x5000, 0x1008, 0x5010, 0x9000].map(|a| MemRef {
//!     addr: VirtAddr(a),
//!     size: 8,
//!     kind: AccessKind::Load,
//! });
//! let (mut filter, mut batch, mut every) = (PageFilter::new(4, false), PageBatch::default(), Lru::default());
//! for r in &refs {
//!     filter.event(&Event::Ref(*r), &mut batch);
//!     every.reference(r);
//! }
//! filter.flush(&mut batch);
//! assert_eq!(of_words(&batch.words), every);
//! ```

use crate::pages::page_word::{CHANGE_MASK, CHANGE_SHIFT, DATA, PAGE_SHIFT, REPLAY, STRADDLE};
use crate::pages::NONE;
use pagelab_core::{MemRef, PageSize};

/// The page shifts (over 4K) of the consumer's TLBs: 4K, 16K and 2M pages.
const SHIFTS: [u32; 3] = [0, 2, 9];

/// A consumer as the filter's contract describes one: per page size and side, a fully
/// associative LRU TLB of four entries (the filter's depth), counting its misses. It
/// checks each word's change distance against the side's last 4K page it touched: a
/// distance may be larger than theirs (as after a fresh filter), never smaller.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Lru {
    entries: [[Vec<u64>; 2]; 3],
    misses: [[u64; 2]; 3],
    /// Per side, the last 4K page touched (`NONE` before any, as in the filter).
    last: [u64; 2],
}

impl Default for Lru {
    fn default() -> Lru {
        Lru {
            entries: Default::default(),
            misses: [[0; 2]; 3],
            last: [NONE; 2],
        }
    }
}

impl Lru {
    /// Looks up page `p` (of the size at `at`) on `side`; a replay must hit.
    fn lookup(&mut self, at: usize, side: usize, p: u64, replay: bool) {
        let list = &mut self.entries[at][side];
        match list.iter().position(|&x| x == p) {
            Some(i) => {
                list.remove(i);
            }
            None => {
                assert!(!replay, "a replay of page {p:#x} missed");
                self.misses[at][side] += 1;
                list.truncate(3);
            }
        }
        list.insert(0, p);
    }

    /// Looks up 4K page `page` of `side` at every size.
    fn touch(&mut self, side: usize, page: u64, replay: bool) {
        for (at, shift) in SHIFTS.iter().enumerate() {
            self.lookup(at, side, page >> shift, replay);
        }
    }

    /// Every 4K page of a reference.
    pub fn reference(&mut self, r: &MemRef) {
        let side = usize::from(!r.kind.is_instr());
        let (first, last) = (
            r.addr.vpn(PageSize::MIN).0,
            r.last_byte().vpn(PageSize::MIN).0,
        );
        self.pages(side, first, last);
    }

    /// 4K pages `first..=last` of `side`: each size's pages once.
    fn pages(&mut self, side: usize, first: u64, last: u64) {
        for (at, shift) in SHIFTS.iter().enumerate() {
            let (lo, hi) = (first >> shift, last >> shift);
            if hi - lo < 8 {
                (lo..=hi).for_each(|p| self.lookup(at, side, p, false));
                continue;
            }
            // A long run: after its first four pages the list holds only pages of the run,
            // so every later page misses; the last four are the list at the end.
            (lo..lo + 4).for_each(|p| self.lookup(at, side, p, false));
            self.misses[at][side] += hi - lo + 1 - 8;
            (hi - 3..=hi).for_each(|p| self.lookup(at, side, p, false));
        }
        self.last[side] = last;
    }

    /// The words of a filter (see [`crate::page_word`]).
    ///
    /// # Panics
    /// On a word that breaks the contract as far as the consumer can tell: a replay
    /// that misses, or a change distance smaller than the page's from the side's last.
    pub fn words(&mut self, words: &[u64]) {
        let mut i = 0;
        while i < words.len() {
            let w = words[i];
            let (side, page) = ((w & DATA) as usize, w >> PAGE_SHIFT);
            let change = (w >> CHANGE_SHIFT) & CHANGE_MASK;
            let exact = 64 - u64::from((page ^ self.last[side]).leading_zeros());
            assert!(
                (exact..=64).contains(&change),
                "word {i} ({w:#x}): change distance {change}, where its page is {exact} from the side's last"
            );
            if w & STRADDLE != 0 {
                self.pages(side, page, words[i + 1]);
                i += 2;
                continue;
            }
            self.touch(side, page, w & REPLAY != 0);
            self.last[side] = page;
            i += 1;
        }
    }
}

/// The consumer after `words`.
pub fn of_words(words: &[u64]) -> Lru {
    let mut lru = Lru::default();
    lru.words(words);
    lru
}
