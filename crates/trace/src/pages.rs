//! Page streams: references reduced to the 4K pages they touch, with the
//! repeats that cannot matter to any TLB dropped on the way.
//!
//! The page-size study only needs, per reference, its side (instruction or
//! data) and the 4K pages it touches; and most references repeat one of the
//! few pages their side touched last, which is a hit in every TLB's L1 at
//! every page size. A [`PageFilter`] turns references into [`PageBatch`]
//! words (one `u64` per reference it keeps) and drops those repeats; a
//! reader can run it inside its parsing loop
//! ([`TraceSource::fill_pages`](crate::TraceSource::fill_pages)), so that
//! no [`Event`] is ever stored for them.
//!
//! ```
//! use pagelab_core::{AccessKind, Event, MemRef, VirtAddr};
//! use pagelab_trace::{PageBatch, PageFilter};
//! let mut filter = PageFilter::new(4, false);
//! let mut batch = PageBatch::default();
//! for addr in [0x1000, 0x1008, 0x1010, 0x5000].map(VirtAddr) {
//!     filter.event(&Event::Ref(MemRef { addr, size: 8, kind: AccessKind::Load }), &mut batch);
//! }
//! assert_eq!(batch.refs, [0, 4]);
//! // Two words: page 1, then page 5; the two repeats of page 1 were dropped.
//! let pages: Vec<u64> = batch.words.iter().map(|w| w >> pagelab_trace::page_word::PAGE_SHIFT).collect();
//! assert_eq!(pages, [1, 5]);
//! ```
//!
//! Contract: a consumer that steps one LRU TLB hierarchy per page size over
//! the words (as `pagelab-engine`'s study does) ends in the state, with the
//! counts, of one that stepped over every reference, provided that every L1
//! array holds at least `depth` pages per set and that the consumer counts
//! one access per reference (plus one per extra page of a reference spanning
//! pages of its size). That holds across filters too: words of one filter
//! after [`PageFilter::flush`] followed by words of a fresh filter over the
//! references that come next are as good as one filter's words over all of
//! them, so independent pieces of a trace can be filtered in parallel.

use pagelab_core::{Event, MemRef, PageSize, VirtAddr};

/// The layout of a page-stream word.
///
/// Bits 12 and up hold the 4K page number (so `w & !0xfff` is the page's first
/// byte); the low bits are flags and the change distance.
pub mod page_word {
    /// Set for a data reference (loads, stores, modifies), clear for an instruction.
    pub const DATA: u64 = 1;
    /// A replay: a re-touch of a page the side touched recently, which puts the
    /// LRU order right after dropped repeats changed it. A sure L1 hit, and no
    /// access of its own.
    pub const REPLAY: u64 = 2;
    /// The reference spans more than one 4K page: the next word is the number
    /// of its last 4K page (a plain number, no flags).
    pub const STRADDLE: u64 = 4;
    /// Where the change distance starts: bits 3..10 hold the bit length of
    /// `page ^ previous page of the side` (64 when there was no previous page).
    /// A run of pages of `2^(12 + k)` bytes sees the side's most recent page again,
    /// a hit that changes nothing, when the distance is at most `k`.
    pub const CHANGE_SHIFT: u32 = 3;
    /// Mask of the change distance after shifting by [`CHANGE_SHIFT`].
    pub const CHANGE_MASK: u64 = 0x7f;
    /// Where the 4K page number starts.
    pub const PAGE_SHIFT: u32 = pagelab_core::Pfn::SHIFT;
}

use page_word::{CHANGE_SHIFT, DATA, PAGE_SHIFT, REPLAY, STRADDLE};

/// The most recent distinct 4K pages per side a filter can remember.
pub const MAX_FILTER_DEPTH: usize = 4;
// `PageFilter::page` moves a page to the front of four slots by hand.
const _: () = assert!(MAX_FILTER_DEPTH == 4);

/// No page: an empty slot of the recent list, or no previous page.
pub(crate) const NONE: u64 = u64::MAX;

/// A batch of page-stream words and the counts of what they came from.
#[derive(Clone, Debug, Default)]
pub struct PageBatch {
    /// The words (see [`page_word`]).
    pub words: Vec<u64>,
    /// References per side (instructions, data), kept or dropped.
    pub refs: [u64; 2],
    /// Events that were not references.
    pub other_events: u64,
    /// Events read but not filtered yet (see [`PageFilter::take_events`]).
    pub events: Vec<Event>,
}

impl PageBatch {
    /// Empties the batch (keeping its storage).
    pub fn clear(&mut self) {
        self.words.clear();
        self.events.clear();
        self.refs = [0; 2];
        self.other_events = 0;
    }

    /// Events taken in: references and other events.
    pub fn events(&self) -> u64 {
        self.refs[0] + self.refs[1] + self.other_events
    }
}

/// How many of `recent`'s first pages must be touched again (last to first)
/// for a consumer whose order is `seen` to have the order `recent` (both of
/// `depth` pages, one a reordering of the other, [`NONE`]s last in both).
///
/// Touching `recent[..j]` leaves them on top of `seen` without them, so `j`
/// is the smallest for which `recent[j..]` comes in `seen` in that order:
/// where the longest run at the end of `recent` whose places in `seen` rise
/// begins.
#[inline]
fn replays_needed(
    recent: &[u64; MAX_FILTER_DEPTH],
    seen: &[u64; MAX_FILTER_DEPTH],
    depth: usize,
) -> usize {
    // The place in `seen` of each of `recent`'s pages (a NONE: its own).
    let place = |i: usize| {
        let p = recent[i];
        if p == NONE {
            return i;
        }
        (0..MAX_FILTER_DEPTH).fold(0, |at, k| if seen[k] == p { k } else { at })
    };
    let mut j = depth - 1;
    let mut next = place(j);
    while j > 0 {
        let here = place(j - 1);
        if here > next {
            break;
        }
        (j, next) = (j - 1, here);
    }
    j
}

/// The word for `page` with `flags`, its change distance from `prev`, the side's page
/// before ([`NONE`] when there is none).
#[inline(always)]
pub(crate) fn word_after(page: u64, prev: u64, flags: u64) -> u64 {
    let change = 64 - u64::from((page ^ prev).leading_zeros());
    page << PAGE_SHIFT | change << CHANGE_SHIFT | flags
}

/// Turns references into page-stream words, dropping repeats (see the module docs).
///
/// Per side it remembers the `depth` most recent distinct 4K pages. A
/// reference within one 4K page that is the most recent is dropped; one that
/// is among the others is dropped too, and its move to the front is
/// deferred: before the side's next word, the filter emits the fewest
/// replays that put the consumer's order right.
#[derive(Clone, Debug)]
pub struct PageFilter {
    /// Per side, the most recent distinct 4K pages, most recent first ([`NONE`] when empty).
    recent: [[u64; MAX_FILTER_DEPTH]; 2],
    /// Per side, that order as the consumer last saw it (while `dirty`).
    seen: [[u64; MAX_FILTER_DEPTH]; 2],
    /// Whether dropped references reordered `recent` since the consumer saw it.
    dirty: [bool; 2],
    /// Per side, the 4K page of the consumer's last touch ([`NONE`] if unknown).
    prev: [u64; 2],
    depth: usize,
    /// Whether some TLB array caches fragments of larger pages.
    fragments: bool,
}

impl PageFilter {
    /// A filter remembering `depth` pages per side (clamped to 1..=[`MAX_FILTER_DEPTH`];
    /// at most the associativity of every L1 array). `fragments`: some array
    /// caches fragments of larger pages, where a reference spanning pages
    /// may leave a fragment other than its own most recent.
    pub fn new(depth: usize, fragments: bool) -> PageFilter {
        PageFilter {
            recent: [[NONE; MAX_FILTER_DEPTH]; 2],
            seen: [[NONE; MAX_FILTER_DEPTH]; 2],
            dirty: [false; 2],
            prev: [NONE; 2],
            depth: depth.clamp(1, MAX_FILTER_DEPTH),
            fragments,
        }
    }

    /// Per side, the most recent 4K page ([`NONE`] when there is none): the last page of
    /// the side's last reference, or none after a spanning one where some array caches
    /// fragments (the native decoder's vector window drops the references within it).
    #[inline(always)]
    pub(crate) fn most_recent(&self) -> [u64; 2] {
        [self.recent[0][0], self.recent[1][0]]
    }

    /// Whether some TLB array caches fragments of larger pages.
    #[inline(always)]
    pub(crate) fn fragments(&self) -> bool {
        self.fragments
    }

    /// How many recent pages per side this filter remembers.
    pub(crate) fn depth(&self) -> usize {
        self.depth
    }

    /// Forgets every page, as a fresh filter of the same depth and fragments: call
    /// after the consumer took words another filter made since this one's last
    /// [`PageFilter::flush`].
    pub(crate) fn reset(&mut self) {
        *self = PageFilter::new(self.depth, self.fragments);
    }

    /// Takes in one event: a reference is filtered, anything else counted.
    #[inline]
    pub fn event(&mut self, e: &Event, out: &mut PageBatch) {
        match e {
            Event::Ref(r) => self.reference(r, out),
            _ => out.other_events += 1,
        }
    }

    /// Takes in every event of `out.events`, leaving that empty.
    pub fn take_events(&mut self, out: &mut PageBatch) {
        let events = std::mem::take(&mut out.events);
        for e in &events {
            self.event(e, out);
        }
        out.events = events;
        out.events.clear();
    }

    /// Takes in one reference.
    #[inline(always)]
    pub fn reference(&mut self, r: &MemRef, out: &mut PageBatch) {
        let side = usize::from(!r.kind.is_instr());
        out.refs[side] += 1;
        self.bytes(side, r.addr, r.size, out);
    }

    /// Takes in one reference of `side` (0: instruction, 1: data) of `size` bytes from
    /// `addr`, already counted in `out.refs`.
    #[inline(always)]
    pub(crate) fn bytes(&mut self, side: usize, addr: VirtAddr, size: u32, out: &mut PageBatch) {
        self.page(
            side,
            addr.vpn(PageSize::MIN).0,
            addr.last_byte_of(size).vpn(PageSize::MIN).0,
            out,
        );
    }

    /// Takes in one reference of `side` (0: instruction, 1: data) to the 4K
    /// pages `first..=last`, already counted in `out.refs`.
    #[inline(always)]
    pub(crate) fn page(&mut self, side: usize, first: u64, last: u64, out: &mut PageBatch) {
        if first == last {
            let recent = &mut self.recent[side];
            if recent[0] == first {
                // The side's most recent page at every size: a hit that changes nothing.
                return;
            }
            // Slots from `depth` on are always empty, so all four can be searched.
            let r = *recent;
            let (at1, at2, at3) = (r[1] == first, r[2] == first, r[3] == first);
            if at1 | at2 | at3 {
                // Among the most recent pages: a sure L1 hit at every size.
                if !self.dirty[side] {
                    self.seen[side] = r;
                    self.dirty[side] = true;
                }
                // To the front; the pages before it move back one.
                *recent = [
                    first,
                    r[0],
                    if at1 { r[2] } else { r[1] },
                    if at3 { r[2] } else { r[3] },
                ];
                return;
            }
        }
        self.keep(side, first, last, out);
    }

    /// Emits the word(s) of a reference the filter cannot drop.
    #[inline(never)]
    fn keep(&mut self, side: usize, first: u64, last: u64, out: &mut PageBatch) {
        if self.dirty[side] {
            self.replay(side, out);
        }
        let flags = side as u64 * DATA;
        if first == last {
            out.words.push(self.word(side, first, flags));
        } else {
            out.words.push(self.word(side, first, flags | STRADDLE));
            out.words.push(last);
        }
        self.prev[side] = last;
        let recent = &mut self.recent[side];
        if first != last && self.fragments {
            // A fragmenting array holds the fragment of the address looked up,
            // which for a spanning reference differs by size: forget everything.
            *recent = [NONE; MAX_FILTER_DEPTH];
            self.prev[side] = NONE;
            return;
        }
        // The 4K pages the reference touched, oldest first, go to the front.
        let depth = self.depth;
        for page in last.saturating_sub(depth as u64 - 1).max(first)..=last {
            let at = recent[..depth]
                .iter()
                .position(|&p| p == page)
                .unwrap_or(depth - 1);
            // The pages before `at` move back one, by selects on the whole
            // array (a `copy_within` of a varying length is a call to
            // `memmove` on every kept word).
            let r = *recent;
            for (i, p) in recent.iter_mut().enumerate().skip(1) {
                if i <= at {
                    *p = r[i - 1];
                }
            }
            recent[0] = page;
        }
    }

    /// A word for `page` on `side`, with its change distance from the side's previous page.
    #[inline(always)]
    fn word(&self, side: usize, page: u64, flags: u64) -> u64 {
        word_after(page, self.prev[side], flags)
    }

    /// Emits the replays that turn the consumer's order (`seen`) into `recent`:
    /// the fewest most recent pages, re-touched oldest first.
    #[cold]
    fn replay(&mut self, side: usize, out: &mut PageBatch) {
        let recent = self.recent[side];
        let j = replays_needed(&recent, &self.seen[side], self.depth);
        for &page in recent[..j].iter().rev() {
            if page != NONE {
                out.words
                    .push(self.word(side, page, (side as u64 * DATA) | REPLAY));
                self.prev[side] = page;
            }
        }
        self.dirty[side] = false;
    }

    /// For a reader's vector path that keeps every reference but the repeats of its
    /// side's most recent page, each as one word (as a filter of depth 1 would):
    /// emits the replays still pending, then gives each side's most recent page
    /// ([`NONE`] when there is none), which is then also the consumer's last touch and
    /// the change distance's base; `None` where the two differ (the path cannot take
    /// over from here).
    #[inline]
    pub(crate) fn begin_recent(&mut self, out: &mut PageBatch) -> Option<[u64; 2]> {
        self.flush(out);
        let recent = self.most_recent();
        (self.prev == recent).then_some(recent)
    }

    /// After such a path, whose words left `recent` as each side's most recent page
    /// (the page of its last word, or as [`PageFilter::begin_recent`] gave it where it
    /// kept none): the filter knows only those pages, each its side's last touch.
    /// (Knowing fewer pages is always right; keeping the others would not be after a
    /// side's words came back to the page it began with.)
    #[inline]
    pub(crate) fn end_recent(&mut self, recent: [u64; 2]) {
        for (side, &page) in recent.iter().enumerate() {
            self.recent[side] = [page, NONE, NONE, NONE];
            self.prev[side] = page;
        }
    }

    /// Emits any replays still pending, so that the consumer's order is the
    /// true one; call at the end of a piece of trace before another filter goes on.
    pub fn flush(&mut self, out: &mut PageBatch) {
        for side in 0..2 {
            if self.dirty[side] {
                self.replay(side, out);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The definition: the smallest `j` for which `seen` without
    /// `recent[..j]` is `recent[j..]`.
    fn by_definition(
        recent: &[u64; MAX_FILTER_DEPTH],
        seen: &[u64; MAX_FILTER_DEPTH],
        depth: usize,
    ) -> usize {
        (0..depth)
            .find(|&j| {
                let rest = seen[..depth].iter().filter(|p| !recent[..j].contains(p));
                rest.eq(recent[j..depth].iter())
            })
            .unwrap_or(depth)
    }

    fn permutations(items: &[u64]) -> Vec<Vec<u64>> {
        if items.is_empty() {
            return vec![vec![]];
        }
        let mut all = Vec::new();
        for i in 0..items.len() {
            let mut rest = items.to_vec();
            let first = rest.remove(i);
            for mut p in permutations(&rest) {
                p.insert(0, first);
                all.push(p);
            }
        }
        all
    }

    /// Every reordering of every depth and count of pages (NONEs last).
    #[test]
    fn replays_needed_is_the_definition() {
        let mut cases = 0;
        for depth in 1..=MAX_FILTER_DEPTH {
            for pages in 0..=depth {
                let real: Vec<u64> = (10..10 + pages as u64).collect();
                for seen_order in permutations(&real) {
                    for recent_order in permutations(&real) {
                        let fill = |order: &[u64]| {
                            let mut a = [NONE; MAX_FILTER_DEPTH];
                            a[..order.len()].copy_from_slice(order);
                            a
                        };
                        let (recent, seen) = (fill(&recent_order), fill(&seen_order));
                        assert_eq!(
                            replays_needed(&recent, &seen, depth),
                            by_definition(&recent, &seen, depth),
                            "recent {recent:?}, seen {seen:?}, depth {depth}"
                        );
                        cases += 1;
                    }
                }
            }
        }
        assert!(cases > 600, "{cases}");
    }
}
