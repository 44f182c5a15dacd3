//! The window step of the native decoder straight into the page filter, eight
//! references at a time in AVX-512 lanes (VBMI and VBMI2), where the CPU has them.
//!
//! [`Cursor::window`] finds a window's record starts at once but then decodes and filters
//! its references one at a time: a tag, a varint squeezed by `pext`, the side's address,
//! the filter's test of the side's most recent page, some 45 instructions a reference.
//! Most references end there: of python3's instruction fetches 94% repeat the side's most
//! recent 4K page, of its data references about half. Here a window's references are
//! decoded in lanes:
//!
//! 1. the record starts, compressed into bytes (VBMI2), give each record's tag and the
//!    eight bytes after it, gathered into one 64-bit lane per record (VBMI);
//! 2. each lane's varint is cut at its first byte below 0x80, squeezed and unzigzagged;
//! 3. each side's references are packed into lanes of their own (VBMI2 again), and its
//!    addresses are a prefix sum of its deltas, carried from chunk to chunk;
//! 4. each reference's first and last 4K page are compared with the last page of the
//!    side's reference before it (the lanes shifted by one).
//!
//! A reference within one 4K page that is its side's previous reference's last page is the
//! side's most recent page in the filter ([`PageFilter::page`] leaves the last page of
//! every reference at the front of its side's list, or forgets the list after a spanning
//! reference where arrays cache fragments), so it is a hit that changes nothing, and is
//! dropped here. Every other reference is gathered onto a pending list in the window's
//! order (each one's index into the window's pages, compressed), which goes to the filter
//! every few windows, each reference within one page as a depth-1 filter's word
//! ([`PageFilter::begin_recent`]), one spanning pages through [`PageFilter::page`]. One
//! loop over a window's few references, whose end nothing predicts, cost a mispredicted
//! branch a window and kept the next window's vector work from overlapping with it
//! (session 60: 0.93x the CPU of the native python3 and cc1 studies, 0.97x on xz).

use super::codec::{Cursor, Prev, REF_STRIDE, SIZE_ESCAPE, TAG_SWITCH};
use super::window::{starts, READ, WINDOW};
use crate::pages::page_word::DATA;
use crate::pages::{word_after, NONE};
use crate::{PageBatch, PageFilter};
use pagelab_core::Pfn;
use std::arch::x86_64::*;

/// References per chunk: one 64-bit lane each.
const LANES: usize = 8;

/// The most references a window holds (each at least a tag and one byte), a multiple of
/// [`LANES`].
const MAX_REFS: usize = WINDOW / 2;
const _: () = assert!(MAX_REFS.is_multiple_of(LANES));
// `Pending::take` takes the side from an index by a shift, and looks up 64 first pages.
const _: () = assert!(MAX_REFS == 32);

/// The bytes of `i` from 0 to 63.
const IOTA: [u8; 64] = {
    let mut t = [0u8; 64];
    let mut i = 0;
    while i < 64 {
        t[i] = i as u8;
        i += 1;
    }
    t
};

/// For a gather of eight bytes per lane: byte `8j + b` is `j` (the lane's record), to
/// pick each record's start from the compressed starts.
const LANE_OF_BYTE: [u8; 64] = {
    let mut t = [0u8; 64];
    let mut i = 0;
    while i < 64 {
        t[i] = (i / 8) as u8;
        i += 1;
    }
    t
};

/// Byte `8j + b` is `b + 1`: the offset of the lane's varint byte `b` from its tag.
const BYTE_IN_LANE: [u8; 64] = {
    let mut t = [0u8; 64];
    let mut i = 0;
    while i < 64 {
        t[i] = (i % 8) as u8 + 1;
        i += 1;
    }
    t
};

/// A vector of the 64 bytes of `t`.
#[target_feature(enable = "avx512f")]
#[inline]
fn bytes(t: &[u8; 64]) -> __m512i {
    // SAFETY: `t` is 64 readable bytes; the load has no alignment need.
    unsafe { _mm512_loadu_si512(t.as_ptr().cast()) }
}

/// The inclusive prefix sums of the eight lanes of `v` (wrapping).
#[target_feature(enable = "avx512f")]
#[inline]
fn prefix_sums(v: __m512i) -> __m512i {
    let zero = _mm512_setzero_si512();
    // `alignr(v, zero, 8 - k)`: the lanes of `v` moved up `k`, zeros below.
    let v = _mm512_add_epi64(v, _mm512_alignr_epi64::<7>(v, zero));
    let v = _mm512_add_epi64(v, _mm512_alignr_epi64::<6>(v, zero));
    _mm512_add_epi64(v, _mm512_alignr_epi64::<4>(v, zero))
}

/// Lane `i` of `v` in every lane.
#[target_feature(enable = "avx512f")]
#[inline]
fn broadcast_lane(v: __m512i, i: usize) -> __m512i {
    _mm512_permutexvar_epi64(_mm512_set1_epi64(i as i64), v)
}

/// The low 64-bit lane of `v`.
#[target_feature(enable = "avx512f")]
#[inline]
fn lane0(v: __m512i) -> u64 {
    _mm_cvtsi128_si64(_mm512_castsi512_si128(v)) as u64
}

/// What the windows of one call of [`Cursor::window_pages`] share.
struct Windows {
    /// Per side, the filter's most recent page once the pending references reach it.
    most_recent: [u64; 2],
    /// Whether the filter's arrays cache fragments.
    fragments: bool,
    /// A window's first pages, then its last pages, each per side (instructions, data):
    /// `MAX_REFS` each. Zeros where not written, so that every index reads a page.
    pages: [u64; 4 * MAX_REFS],
    /// The references that are not sure hits, for the filter.
    pending: Pending,
}

/// References that are not sure hits, in the trace's order, waiting for the filter: they go
/// to it in one loop every few windows, whose end the branch predictor then misses once
/// for those windows rather than once a window.
struct Pending {
    /// Room for `LANES` more past `PENDING`: a window's last lanes are written whole.
    first: [u64; PENDING + LANES],
    last: [u64; PENDING + LANES],
    side: [u8; PENDING + LANES],
    len: usize,
}

/// The pending list's room; a window adds at most `MAX_REFS`, rounded up to `LANES`.
const PENDING: usize = 256;

impl Pending {
    /// Adds `count` references of a window, the `count` first bytes of `order`: each an
    /// index into `pages` (`MAX_REFS` times the side, plus the reference's place on its
    /// side), below `2 * MAX_REFS`. The caller leaves room for `MAX_REFS` more (`len +
    /// MAX_REFS <= PENDING`).
    ///
    /// Eight at a time, past `count` too (those slots are written again or never read):
    /// each eight's first and last pages looked up in `pages` held in registers (four
    /// two-table permutes and three blends for each), and stored whole. Copied one at a
    /// time they took a quarter of the window's time on AMD Zen 4, and gathered from
    /// memory no less (session 61).
    #[target_feature(enable = "avx512f,avx512bw")]
    #[inline]
    fn take(&mut self, mut order: __m512i, count: usize, pages: &[u64; 4 * MAX_REFS]) {
        debug_assert!(self.len + count <= PENDING);
        // `pages` as sixteen vectors: the first pages' eight, then the last pages'.
        let p: [__m512i; 4 * MAX_REFS / LANES] = std::array::from_fn(|k| {
            let v: &[u64; LANES] = pages[LANES * k..LANES * (k + 1)].try_into().unwrap();
            // SAFETY: `v` is `LANES` u64, the load's 64 bytes; no alignment need.
            unsafe { _mm512_loadu_si512(v.as_ptr().cast()) }
        });
        // The u64 at index `i` (below 64) of the eight vectors from `p[from]`: the low four
        // bits pick one of two vectors' sixteen lanes, bits 4 and 5 the pair.
        let lookup = |i: __m512i, from: usize| {
            let pair =
                |k: usize| _mm512_permutex2var_epi64(p[from + 2 * k], i, p[from + 2 * k + 1]);
            let (b4, b5) = (
                _mm512_test_epi64_mask(i, _mm512_set1_epi64(16)),
                _mm512_test_epi64_mask(i, _mm512_set1_epi64(32)),
            );
            let low = _mm512_mask_blend_epi64(b4, pair(0), pair(1));
            let high = _mm512_mask_blend_epi64(b4, pair(2), pair(3));
            _mm512_mask_blend_epi64(b5, low, high)
        };
        let mut c = 0;
        while c < count {
            // Masked below `2 * MAX_REFS`, so that its side is 0 or 1 (every index is below
            // it anyway).
            let i = _mm512_and_si512(
                _mm512_cvtepu8_epi64(_mm512_castsi512_si128(order)),
                _mm512_set1_epi64(2 * MAX_REFS as i64 - 1),
            );
            let at = self.len + c;
            let (first, last, side) = (
                &mut self.first[at..at + LANES],
                &mut self.last[at..at + LANES],
                &mut self.side[at..at + LANES],
            );
            // SAFETY: the stores write the `LANES` u64 (and bytes) of the slices taken just
            // above (kept in bounds by `at + LANES <= PENDING + LANES`: `c < count <=
            // MAX_REFS`, and the caller's room); no alignment need.
            unsafe {
                _mm512_storeu_si512(first.as_mut_ptr().cast(), lookup(i, 0));
                _mm512_storeu_si512(last.as_mut_ptr().cast(), lookup(i, 2 * MAX_REFS / LANES));
                // The side: the index over `MAX_REFS`.
                let s = _mm512_cvtepi64_epi8(_mm512_srli_epi64::<{ MAX_REFS.trailing_zeros() }>(i));
                _mm_storel_epi64(side.as_mut_ptr().cast(), s);
            }
            order = _mm512_alignr_epi64::<1>(_mm512_setzero_si512(), order);
            c += LANES;
        }
        self.len += count;
    }

    /// Hands the pending references to the filter, in order, as a filter of depth 1
    /// would take them ([`PageFilter::begin_recent`]): none of them repeats its side's
    /// most recent page, so each within one page is a word of its own, with its change
    /// distance from the side's page before; one spanning pages goes through the filter
    /// (its forgetting where arrays cache fragments stays its own). Through the filter
    /// of depth 4 one at a time, its branches on which of four recent pages a page is
    /// cost about a quarter of the Lackey windows' python3 study (session 64).
    #[inline(always)]
    fn flush(&mut self, filter: &mut PageFilter, out: &mut PageBatch) {
        let mut i = 0;
        while i < self.len {
            let Some(mut recent) = filter.begin_recent(out) else {
                break;
            };
            out.words.reserve(self.len - i);
            while i < self.len && self.first[i] == self.last[i] {
                let (side, page) = (usize::from(self.side[i]), self.first[i]);
                out.words
                    .push(word_after(page, recent[side], side as u64 * DATA));
                recent[side] = page;
                i += 1;
            }
            filter.end_recent(recent);
            if i < self.len {
                filter.page(usize::from(self.side[i]), self.first[i], self.last[i], out);
                i += 1;
            }
        }
        for j in i..self.len {
            filter.page(usize::from(self.side[j]), self.first[j], self.last[j], out);
        }
        self.len = 0;
    }
}

impl Cursor<'_> {
    /// [`Cursor::window`] for a page filter's sink, window after window: decodes up to `n`
    /// references into `filter` and `out`, the same words and counts as
    /// [`Cursor::window`] through a [`crate::PageSink`] gives, while a whole window lies
    /// before the block's end, up to the first record that is not a reference with its
    /// size in the tag and a varint of at most 8 bytes. Returns how many references (0
    /// when the first record is not one).
    ///
    /// # Safety
    /// The CPU must have AVX-512F, BW, VBMI and VBMI2, and BMI2 (the `avx512` tier with
    /// VBMI2). The caller checks that the window ends at or before the block's end.
    #[target_feature(
        enable = "avx2,bmi1,bmi2,lzcnt,popcnt,avx512f,avx512bw,avx512vbmi,avx512vbmi2"
    )]
    #[inline]
    pub(crate) unsafe fn window_pages(
        &mut self,
        prev: &mut Prev,
        filter: &mut PageFilter,
        out: &mut PageBatch,
        n: usize,
    ) -> usize {
        let mut state = Windows {
            most_recent: filter.most_recent(),
            fragments: filter.fragments(),
            pages: [0; 4 * MAX_REFS],
            pending: Pending {
                first: [0; PENDING + LANES],
                last: [0; PENDING + LANES],
                side: [0; PENDING + LANES],
                len: 0,
            },
        };
        let mut done = 0;
        while self.pos + WINDOW <= self.end && done < n {
            if state.pending.len + MAX_REFS > PENDING {
                state.pending.flush(filter, out);
            }
            let (k, whole) = self.one_window(prev, &mut state, &mut out.refs, n - done);
            done += k;
            if !whole {
                break;
            }
        }
        state.pending.flush(filter, out);
        debug_assert_eq!(filter.most_recent(), state.most_recent);
        done
    }

    /// One window of [`Cursor::window_pages`]: its references' counts into `refs`, the
    /// ones that are not sure hits onto `state.pending`. Returns how many references, and
    /// whether they were all the window's (else the caller stops).
    #[target_feature(
        enable = "avx2,bmi1,bmi2,lzcnt,popcnt,avx512f,avx512bw,avx512vbmi,avx512vbmi2"
    )]
    #[inline]
    fn one_window(
        &mut self,
        prev: &mut Prev,
        state: &mut Windows,
        refs: &mut [u64; 2],
        n: usize,
    ) -> (usize, bool) {
        let base = self.pos;
        debug_assert!(base + WINDOW <= self.end);
        // The padding after the block's end covers `READ` past `base`.
        let win: &[u8; READ] = self.buf[base..base + READ].try_into().unwrap();
        // SAFETY: `win` is `READ` (80) readable bytes: 64 loaded whole, the next 16 under
        // a mask (masked-off bytes are not read).
        let (lo, hi) = unsafe {
            (
                _mm512_loadu_si512(win.as_ptr().cast()),
                _mm512_maskz_loadu_epi8(0xffff, win.as_ptr().add(WINDOW).cast()),
            )
        };
        let stops = !_mm512_movepi8_mask(lo);
        // Bit i: a record ends before byte i, the next starts there.
        let ends = starts(stops) & !1;
        let total = ends.count_ones() as usize;
        let (iota, lane_of_byte, byte_in_lane) =
            (bytes(&IOTA), bytes(&LANE_OF_BYTE), bytes(&BYTE_IN_LANE));
        // Byte j: where record j starts; its tag.
        let at = _mm512_maskz_compress_epi8(ends | 1, iota);
        let tags = _mm512_permutexvar_epi8(at, lo);
        // The size code of each tag (`tag % REF_STRIDE`), and its side.
        let stride = _mm512_set1_epi8(REF_STRIDE as i8);
        let mut code = tags;
        for _ in 0..3 {
            let over = _mm512_cmpge_epu8_mask(code, stride);
            code = _mm512_mask_sub_epi8(code, over, code, stride);
        }
        let data_side = _mm512_cmpge_epu8_mask(tags, stride);
        // Fast: a reference with its size in the tag and a varint of at most 8 bytes (the
        // varint ends at the next start).
        let after = _mm512_maskz_compress_epi8(ends, iota);
        let len = _mm512_sub_epi8(_mm512_sub_epi8(after, at), _mm512_set1_epi8(1));
        let fast = _mm512_cmplt_epu8_mask(tags, _mm512_set1_epi8(TAG_SWITCH as i8))
            & _mm512_cmpneq_epi8_mask(code, _mm512_set1_epi8(SIZE_ESCAPE as i8))
            & _mm512_cmple_epu8_mask(len, _mm512_set1_epi8(8));
        // A record is at least two bytes, so `total` is at most 32.
        let whole = (1u64 << total) - 1;
        let (k, next) = if whole & !fast == 0 && total <= n && total > 0 {
            // Every record of the window (nearly always): the next window starts after
            // the last, found from the stops alone, so that the next window's loads need
            // not wait for the tags.
            (total, 64 - ends.leading_zeros() as usize - 1)
        } else {
            let k = total.min(n).min((!fast).trailing_zeros() as usize);
            if k == 0 {
                return (0, false);
            }
            // Where record k starts: the k-th set bit of the starts after the first.
            (k, _pdep_u64(1 << (k - 1), ends).trailing_zeros() as usize)
        };
        let taken = (1u64 << k) - 1;
        let data_refs = u64::from((data_side & taken).count_ones());
        refs[0] += k as u64 - data_refs;
        refs[1] += data_refs;
        // Each reference's last byte's offset from its first: the size less one.
        let last_of = _mm512_subs_epu8(code, _mm512_set1_epi8(1));
        let fragments = state.fragments;
        // Per side, in the side's order: each reference's first and last 4K page (in
        // `state.pages`, at `pages_at`), and those that are not sure hits (bit p of
        // `others`: the side's p-th reference).
        let base_of_pages: *mut u64 = state.pages.as_mut_ptr();
        let pages_at = |side: usize, which: usize, at: usize| {
            base_of_pages.wrapping_add((which * 2 + side) * MAX_REFS + at)
        };
        let mut others = [0u64; 2];
        let sevens = _mm512_set1_epi64(0x7f7f_7f7f_7f7f_7f7f);
        let none = _mm512_set1_epi64(NONE as i64);
        for (side, others) in others.iter_mut().enumerate() {
            let on_side = if side == 1 { data_side } else { !data_side } & taken;
            let count = on_side.count_ones() as usize;
            if count == 0 {
                continue;
            }
            // The side's references packed into the low bytes: where each starts, the
            // offset of its last byte.
            let mut at = _mm512_maskz_compress_epi8(on_side, at);
            let mut last_of = _mm512_maskz_compress_epi8(on_side, last_of);
            let mut addr_carry = _mm512_set1_epi64(prev.0[side] as i64);
            let mut page_carry = _mm512_set1_epi64(state.most_recent[side] as i64);
            let mut chunk = 0;
            while chunk < count {
                let lanes = (count - chunk).min(LANES);
                // Each lane: the eight bytes after its record's tag (up to byte 71).
                let idx = _mm512_add_epi8(_mm512_permutexvar_epi8(lane_of_byte, at), byte_in_lane);
                let word = _mm512_permutex2var_epi8(lo, idx, hi);
                // Cut after the first byte below 0x80 (its stop bit and every bit below).
                let stop =
                    _mm512_andnot_si512(word, _mm512_set1_epi64(0x8080_8080_8080_8080u64 as i64));
                let keep = _mm512_xor_si512(stop, _mm512_sub_epi64(stop, _mm512_set1_epi64(1)));
                // word & keep & 0x7f..: 7 bits a byte, then squeezed together.
                let mut x = _mm512_ternarylogic_epi64::<0x80>(word, keep, sevens);
                x = squeeze_step::<1>(x, 0x007f_007f_007f_007f);
                x = squeeze_step::<2>(x, 0x0000_3fff_0000_3fff);
                x = squeeze_step::<4>(x, 0x0000_0000_0fff_ffff);
                let delta = _mm512_xor_si512(
                    _mm512_srli_epi64::<1>(x),
                    _mm512_srai_epi64::<63>(_mm512_slli_epi64::<63>(x)),
                );
                // The side's addresses: its deltas summed onto its previous address (the
                // lanes past `lanes` are never read).
                let addr = _mm512_add_epi64(prefix_sums(delta), addr_carry);
                addr_carry = broadcast_lane(addr, lanes - 1);
                // The last byte, saturating as `MemRef::last_byte` does.
                let end =
                    _mm512_add_epi64(addr, _mm512_cvtepu8_epi64(_mm512_castsi512_si128(last_of)));
                let end = _mm512_mask_mov_epi64(end, _mm512_cmplt_epu64_mask(end, addr), none);
                let first = _mm512_srli_epi64::<{ Pfn::SHIFT }>(addr);
                let last = _mm512_srli_epi64::<{ Pfn::SHIFT }>(end);
                let single = _mm512_cmpeq_epu64_mask(first, last);
                // What each reference leaves as its side's most recent page, and the page
                // each one finds there.
                let left = if fragments {
                    _mm512_mask_mov_epi64(none, single, last)
                } else {
                    last
                };
                let before = _mm512_alignr_epi64::<7>(left, page_carry);
                page_carry = broadcast_lane(left, lanes - 1);
                let hit = single & _mm512_cmpeq_epu64_mask(first, before);
                let valid = ((1u32 << lanes) - 1) as __mmask8;
                *others |= u64::from(valid & !hit) << chunk;
                // SAFETY: a side has at most `MAX_REFS` references and `chunk` is a
                // multiple of `LANES` below its count, so the eight lanes from `chunk` lie
                // in the side's `MAX_REFS` of `state.pages`; the stores have no alignment
                // need.
                unsafe {
                    _mm512_storeu_si512(pages_at(side, 0, chunk).cast(), first);
                    _mm512_storeu_si512(pages_at(side, 1, chunk).cast(), last);
                }
                // The next chunk's references to the low bytes.
                at = _mm512_alignr_epi64::<1>(_mm512_setzero_si512(), at);
                last_of = _mm512_alignr_epi64::<1>(_mm512_setzero_si512(), last_of);
                chunk += LANES;
            }
            prev.0[side] = lane0(addr_carry);
            state.most_recent[side] = lane0(page_carry);
        }
        // The references that are not sure hits, in the window's order, onto the pending
        // list: each one's index in `state.pages` (the side's offset and its place among
        // the side's references), gathered in the window's order by one compress.
        let on_data = data_side & taken;
        let rest = _pdep_u64(others[0], !on_data & taken) | _pdep_u64(others[1], on_data);
        let place = _mm512_mask_add_epi8(
            _mm512_maskz_expand_epi8(!on_data & taken, iota),
            on_data,
            _mm512_maskz_expand_epi8(on_data, iota),
            _mm512_set1_epi8(MAX_REFS as i8),
        );
        let order = _mm512_maskz_compress_epi8(rest, place);
        state
            .pending
            .take(order, rest.count_ones() as usize, &state.pages);
        self.pos = base + next;
        (k, k == total)
    }
}

/// One step of squeezing 7-bit groups: the bits of `x` under `keep` stay, the bits above
/// each group of `keep` move down `SHIFT`.
#[target_feature(enable = "avx512f")]
#[inline]
fn squeeze_step<const SHIFT: u32>(x: __m512i, keep: u64) -> __m512i {
    let keep = _mm512_set1_epi64(keep as i64);
    _mm512_or_si512(
        _mm512_and_si512(x, keep),
        _mm512_srli_epi64::<SHIFT>(_mm512_andnot_si512(keep, x)),
    )
}
