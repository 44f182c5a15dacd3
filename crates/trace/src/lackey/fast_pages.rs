//! The study's path through Lackey text on CPUs with AVX-512 (VBMI and VBMI2):
//! whole windows of lines straight into a page filter.
//!
//! [`parse_pages`] does what [`parse_blocks`] does for a [`PageSink`], with
//! far less work per line. It reads 64 bytes from where a line starts (a
//! window) and takes every line that ends in it (at most [`MAX_LINES`]) at
//! once, with no branch per line:
//!
//! - the commas, and the lower-case hexadecimal digits with their values
//!   (one `vpermt2b` lookup of each byte's low seven bits), and the
//!   newlines, as 64-bit masks;
//! - where each line ends, compressed into one byte per line (`vpcompressb`
//!   over 0..64); it starts after the line before ends, and its comma is 2 or
//!   3 bytes before its end;
//! - the shape of every line checked: its head (`I  ` or ` L|S|M `) and its
//!   size digits gathered line by line (`vpermb`) and compared, and on the
//!   masks and positions 1 to 16 hexadecimal digits, the comma, the newline,
//!   and nothing else;
//! - the addresses gathered two digits at a time into eight 64-bit lanes
//!   (`vpermb` from the comma backwards), and the sizes likewise.
//!
//! The references wait in a buffer of [`PENDING`], which a pass eight at a
//! time turns into a depth-1 filter's words (a one-page reference to its side's
//! most recent page is dropped, every other is a word; about a fifth are kept),
//! with the caller's filter handing over and taking back each side's most
//! recent page. A window with any other kind of
//! line (Valgrind's own, an error, upper-case digits, a line longer than the
//! window) sends its first line alone through [`fields`] or the careful
//! parser, exactly as [`parse_blocks`] would; the next window starts after
//! it. So the two give the same words, counts, lines and errors (tested
//! against each other on every CPU that has the instructions).

#[cfg(target_arch = "x86_64")]
use super::fast::{fields, parse_blocks};
use super::fast::{PageSink, Parsed};
#[cfg(target_arch = "x86_64")]
use super::line::parse_odd_line;
#[cfg(target_arch = "x86_64")]
use crate::pages::page_word::{CHANGE_SHIFT, DATA, PAGE_SHIFT};
#[cfg(target_arch = "x86_64")]
use pagelab_core::VirtAddr;

/// The most lines one window takes (eight 64-bit lanes).
#[cfg(target_arch = "x86_64")]
pub(super) const MAX_LINES: usize = 8;

/// References parsed ahead of the filter.
#[cfg(target_arch = "x86_64")]
const PENDING: usize = 256;

/// Whether this CPU can run [`parse_pages`] (whatever `PAGELAB_ISA` says;
/// the reader asks [`pagelab_core::isa::vbmi2_active`]).
pub(super) fn available() -> bool {
    pagelab_core::isa::vbmi2_supported()
}

/// Parses whole lines of `buf[start..complete]` into `out`'s filter, with the
/// contract of [`parse_blocks`]. Only when [`available`].
pub(super) fn parse_pages(
    buf: &[u8],
    complete: usize,
    start: usize,
    line: u64,
    out: &mut PageSink<'_>,
) -> Parsed {
    assert!(available(), "parse_pages needs AVX-512 VBMI2");
    #[cfg(target_arch = "x86_64")]
    // SAFETY: the CPU has every feature `avx512::parse_pages` is compiled for (asserted above).
    return unsafe { avx512::parse_pages(buf, complete, start, line, out) };
    #[cfg(not(target_arch = "x86_64"))]
    unreachable!("{buf:?}{complete}{start}{line}{}", out.goal)
}

#[cfg(target_arch = "x86_64")]
pub(super) mod avx512 {
    use super::*;
    use std::arch::x86_64::*;

    /// A table of 64 bytes, byte `i` being `$f` of `i`.
    macro_rules! table {
        (|$i:ident| $f:expr) => {{
            let mut t = [0u8; 64];
            let mut $i = 0;
            while $i < 64 {
                t[$i] = $f as u8;
                $i += 1;
            }
            t
        }};
    }

    /// 0, 1, ..., 63: positions, to compress.
    static IOTA: [u8; 64] = table!(|i| i);
    /// Byte `b` is `b / 8`: spreads byte `i` over lane `i`.
    static LANES: [u8; 64] = table!(|i| i / 8);
    /// Byte `b` is `b - 1`: the byte before (byte 0's own, unused).
    static BEFORE: [u8; 64] = table!(|i| if i == 0 { 0 } else { i - 1 });
    /// Byte `b` is `2 * (b % 8)`: the digits before pair `b % 8` of a lane.
    static TWICE: [u8; 64] = table!(|i| 2 * (i % 8));
    /// How far back from the comma pair `b % 8` of a lane ends.
    static PAIR_BACK: [u8; 64] = table!(|i| 1 + 2 * (i % 8));
    /// A byte's class: set for a lower-case hexadecimal digit, whose value is the low half.
    const HEX: u8 = 0x40;
    /// The class of byte `b` (0..0x80): [`HEX`] plus the value for a digit, else 0.
    const fn class(b: usize) -> u8 {
        match b as u8 {
            d @ b'0'..=b'9' => HEX | (d - b'0'),
            d @ b'a'..=b'f' => HEX | (d - b'a' + 10),
            _ => 0,
        }
    }
    /// [`class`] of bytes 0..64 and 64..128, for `vpermt2b`.
    static CLASS_LO: [u8; 64] = table!(|i| class(i));
    static CLASS_HI: [u8; 64] = table!(|i| class(i + 64));

    /// Entry `m` (bit `j` set: lane `j` is a data reference), byte `i`: the nearest lane
    /// before lane `i` of its side, or 8 plus its side (to take the side's page from a
    /// second register, as `vpermt2q` numbers its lanes) where there is none.
    static BEFORE_SAME: [[u8; 8]; 256] = {
        let mut t = [[0u8; 8]; 256];
        let mut m = 0;
        while m < 256 {
            let mut i = 0;
            while i < 8 {
                let side = (m >> i) & 1;
                let mut at = 8 + side as u8;
                let mut j = 0;
                while j < i {
                    if (m >> j) & 1 == side {
                        at = j as u8;
                    }
                    j += 1;
                }
                t[m][i] = at;
                i += 1;
            }
            m += 1;
        }
        t
    };

    /// Entry `m` (as [`BEFORE_SAME`]'s), bytes 0 and 1: the last lane of each side (0 for
    /// instructions, 1 for data), or 8 and 9 where a side has none (its page as it was).
    static LAST_OF_SIDE: [[u8; 8]; 256] = {
        let mut t = [[0u8; 8]; 256];
        let mut m = 0;
        while m < 256 {
            let mut k = 0;
            while k < 8 {
                t[m][k] = 8 + k as u8;
                k += 1;
            }
            let mut i = 0;
            while i < 8 {
                t[m][(m >> i) & 1] = i as u8;
                i += 1;
            }
            m += 1;
        }
        t
    };

    /// References parsed but not yet filtered, in order.
    struct Pending {
        /// Addresses; room for one window's full lanes past `PENDING`.
        addr: [u64; PENDING + MAX_LINES],
        /// Size (0..=99) plus 0x80 for a data reference.
        meta: [u8; PENDING + MAX_LINES],
        n: usize,
    }

    impl Pending {
        fn new() -> Pending {
            Pending {
                addr: [0; PENDING + MAX_LINES],
                meta: [0; PENDING + MAX_LINES],
                n: 0,
            }
        }

        /// Hands pending reference `i` to the filter alone.
        #[inline]
        fn one(&self, i: usize, out: &mut PageSink<'_>) {
            let (addr, meta) = (self.addr[i], self.meta[i]);
            out.filter.bytes(
                usize::from(meta >> 7),
                VirtAddr(addr),
                u32::from(meta & 0x7f),
                out.out,
            );
        }

        /// Filters the pending references (already counted in the caller's totals):
        /// all of them if `all`, else whole eights, the rest left pending.
        ///
        /// Eight at a time, as a filter of depth 1 would
        /// ([`PageFilter::begin_recent`]): a reference within one page that is its
        /// side's most recent is a hit that changes nothing and is dropped, every
        /// other becomes one word. The side's most recent page for each lane is the
        /// page of the nearest lane before it of its side, or the page carried from
        /// before (one two-table permute, its indices looked up by the lanes' sides),
        /// and the change distance its leading zeros; the carried pages are taken the
        /// same way. About a fifth of python3's references are kept. Eight references
        /// of which one spans pages, and the last few of an `all` drain, go through
        /// the filter one at a time (its replays and forgetting stay its own).
        #[target_feature(
            enable = "avx512f,avx512bw,avx512vl,avx512cd,avx512vbmi,avx512vbmi2,avx2,bmi1,bmi2,popcnt,lzcnt"
        )]
        #[inline]
        fn drain(&mut self, out: &mut PageSink<'_>, all: bool) {
            // Fewer than `PENDING + MAX_LINES`: drained on reaching `PENDING`.
            let n = self.n.min(PENDING + MAX_LINES);
            let whole = n / 8 * 8;
            let q = _mm512_set1_epi64;
            let carried = |recent: [u64; 2]| {
                _mm512_castsi128_si512(_mm_set_epi64x(recent[1] as i64, recent[0] as i64))
            };
            let recent_of = |carry: __m512i| {
                let mut lanes = [0u64; 8];
                // SAFETY: eight lanes.
                unsafe { _mm512_storeu_si512(lanes.as_mut_ptr().cast(), carry) };
                [lanes[0], lanes[1]]
            };
            let mut carry = out.filter.begin_recent(out.out).map(carried);
            let mut at = 0;
            while at < whole {
                let Some(mut c) = carry else { break };
                // Room for every word of these eights and one store of eight lanes past them.
                let words = &mut out.out.words;
                words.reserve(whole - at + MAX_LINES);
                let mut len = words.len();
                let base = words.as_mut_ptr();
                while at < whole {
                    // SAFETY: `at + 8 <= PENDING + MAX_LINES`, the arrays' length.
                    let (addr, meta) = unsafe {
                        (
                            _mm512_loadu_si512(self.addr.as_ptr().add(at).cast()),
                            _mm_loadl_epi64(self.meta.as_ptr().add(at).cast()),
                        )
                    };
                    let data = _mm_movepi8_mask(meta) as u8;
                    let size = _mm512_cvtepu8_epi64(_mm_and_si128(meta, _mm_set1_epi8(0x7f)));
                    // As `MemRef::last_byte`: the address plus the size less one, at most
                    // the last address.
                    let end = _mm512_add_epi64(
                        addr,
                        _mm512_sub_epi64(_mm512_max_epu64(size, q(1)), q(1)),
                    );
                    let end = _mm512_mask_mov_epi64(end, _mm512_cmplt_epu64_mask(end, addr), q(-1));
                    let first = _mm512_srli_epi64::<PAGE_SHIFT>(addr);
                    let last = _mm512_srli_epi64::<PAGE_SHIFT>(end);
                    if _mm512_cmpneq_epu64_mask(first, last) != 0 {
                        break;
                    }
                    let (before, then) = (
                        &BEFORE_SAME[usize::from(data)],
                        &LAST_OF_SIDE[usize::from(data)],
                    );
                    // SAFETY: eight bytes of each table's entry.
                    let (before, then) = unsafe {
                        (
                            _mm512_cvtepu8_epi64(_mm_loadl_epi64(before.as_ptr().cast())),
                            _mm512_cvtepu8_epi64(_mm_loadl_epi64(then.as_ptr().cast())),
                        )
                    };
                    let recent = _mm512_permutex2var_epi64(first, before, c);
                    let keep = _mm512_cmpneq_epu64_mask(first, recent);
                    let change = _mm512_sub_epi64(
                        q(64),
                        _mm512_lzcnt_epi64(_mm512_xor_si512(first, recent)),
                    );
                    let word = _mm512_ternarylogic_epi64::<0xfe>(
                        _mm512_slli_epi64::<PAGE_SHIFT>(first),
                        _mm512_slli_epi64::<CHANGE_SHIFT>(change),
                        _mm512_maskz_mov_epi64(data, q(DATA as i64)),
                    );
                    // SAFETY: reserved above: room for a word of every reference left
                    // in whole eights and eight lanes more.
                    unsafe {
                        _mm512_storeu_si512(
                            base.add(len).cast(),
                            _mm512_maskz_compress_epi64(keep, word),
                        )
                    };
                    len += keep.count_ones() as usize;
                    // Each side's page is now its last lane's (kept or a repeat of it).
                    c = _mm512_permutex2var_epi64(first, then, c);
                    at += 8;
                }
                // SAFETY: the first `len` words are initialized (stored above or before).
                unsafe { out.out.words.set_len(len) };
                carry = Some(c);
                if at < whole {
                    // Eight of which one spans pages.
                    out.filter.end_recent(recent_of(c));
                    (at..at + 8).for_each(|i| self.one(i, out));
                    at += 8;
                    carry = out.filter.begin_recent(out.out).map(carried);
                }
            }
            if let Some(c) = carry {
                out.filter.end_recent(recent_of(c));
            }
            let rest = if all || carry.is_none() { n } else { whole };
            (at..rest).for_each(|i| self.one(i, out));
            // The last few wait for the next windows'.
            self.addr.copy_within(rest..n, 0);
            self.meta.copy_within(rest..n, 0);
            self.n = n - rest;
        }
    }

    /// Counts and pages of the lines of one window.
    pub(in crate::lackey) struct Window {
        /// Whether every line ending in the window is well formed (else nothing else counts).
        pub ok: bool,
        /// Lines (1..=MAX_LINES when `ok`).
        pub lines: u32,
        /// Bit `i`: line `i` is a data reference.
        pub data: u64,
        /// Byte `i`: line `i`'s second byte (`b' '` for an instruction, else `L`, `S`
        /// or `M`).
        pub kinds: u64,
        /// Where the last line ends (its newline), from the window's start.
        pub end: u32,
    }

    #[target_feature(
        enable = "avx512f,avx512bw,avx512vl,avx512cd,avx512vbmi,avx512vbmi2,avx2,bmi1,bmi2,popcnt,lzcnt"
    )]
    pub(super) fn parse_pages(
        buf: &[u8],
        complete: usize,
        start: usize,
        mut line: u64,
        out: &mut PageSink<'_>,
    ) -> Parsed {
        let mut pending = Pending::new();
        // References this call may still take, and those taken but not yet in `out.out.refs`.
        let mut budget = out.goal.saturating_sub(out.out.events());
        let (mut refs, mut data) = (0u64, 0u64);
        let mut s = start;
        let mut failed = Ok(());
        // Lines the windows took (each a reference, counted in `budget` and `line` at the end).
        let mut taken = 0u64;
        while s < complete && budget.saturating_sub(taken) >= MAX_LINES as u64 {
            let (w, nl) = load_window(buf, complete, s);
            // Below `PENDING` while windows are read (drained on reaching it).
            let at = pending.n.min(PENDING);
            let (addr, meta) = (
                &mut pending.addr[at..at + MAX_LINES],
                &mut pending.meta[at..at + MAX_LINES],
            );
            let win = window(w, nl, addr.try_into().unwrap(), meta.try_into().unwrap());
            if win.ok {
                let n = win.lines as usize;
                pending.n += n;
                taken += n as u64;
                data += u64::from(win.data.count_ones());
                s += win.end as usize + 1;
                if pending.n >= PENDING {
                    pending.drain(out, false);
                }
                continue;
            }
            // The first line alone, after every reference before it.
            (refs, budget, line, taken) = (refs + taken, budget - taken, line + taken, 0);
            pending.drain(out, true);
            let e = line_end(buf, complete, s, nl);
            let f = fields::<true>(buf, s, e);
            if f.ok {
                let side = usize::from(f.kind != b' ');
                refs += 1;
                data += side as u64;
                out.filter.bytes(side, VirtAddr(f.addr), f.size, out.out);
            } else {
                match parse_odd_line(&buf[..complete], s, e) {
                    Ok(Some(r)) => out.filter.reference(&r, out.out),
                    Ok(None) => {}
                    Err(reason) => {
                        failed = Err(reason);
                        break;
                    }
                }
            }
            budget = budget.saturating_sub(1);
            line += 1;
            s = e + 1;
        }
        (refs, line) = (refs + taken, line + taken);
        pending.drain(out, true);
        out.out.refs[0] += refs - data;
        out.out.refs[1] += data;
        if failed.is_ok() && s < complete {
            // Too little room left for a window: the block loop stops where it must.
            return parse_blocks(buf, complete, s, line, out);
        }
        (s, line, failed)
    }

    /// The window of 64 bytes from `buf[s]` (`s < complete`) and its newlines, none from
    /// `complete` on.
    #[target_feature(enable = "avx512f,avx512bw")]
    #[inline]
    pub(in crate::lackey) fn load_window(buf: &[u8], complete: usize, s: usize) -> (__m512i, u64) {
        assert!(s + 64 <= buf.len(), "a window reads 64 bytes");
        // SAFETY: in bounds (asserted); the CPU has the features (the caller's).
        let w = unsafe { _mm512_loadu_si512(buf.as_ptr().add(s).cast()) };
        let nl = _mm512_cmpeq_epi8_mask(w, _mm512_set1_epi8(b'\n' as i8));
        let nl = if complete - s < 64 {
            nl & ((1u64 << (complete - s)) - 1)
        } else {
            nl
        };
        (w, nl)
    }

    /// Where the line from `buf[s]` ends (its newline), `nl` being the newlines of its
    /// window ([`load_window`]).
    #[inline]
    pub(in crate::lackey) fn line_end(buf: &[u8], complete: usize, s: usize, nl: u64) -> usize {
        if nl != 0 {
            s + nl.trailing_zeros() as usize
        } else {
            s + memchr::memchr(b'\n', &buf[s..complete]).expect("`complete` ends a line")
        }
    }

    /// Reads the lines that end in the window `w` (`nl`: its newlines): line `i`'s
    /// address into `addr[i]` and its size (plus 0x80 for data) into `meta[i]`. The
    /// slots after the last line and every slot of a window that is not `ok` hold
    /// garbage.
    #[target_feature(
        enable = "avx512f,avx512bw,avx512vl,avx512vbmi,avx512vbmi2,avx2,bmi1,bmi2,popcnt,lzcnt"
    )]
    #[inline]
    pub(in crate::lackey) fn window(
        w: __m512i,
        nl: u64,
        addr_out: &mut [u64; MAX_LINES],
        meta_out: &mut [u8; MAX_LINES],
    ) -> Window {
        let splat = |b: u8| _mm512_set1_epi8(b as i8);
        let load = |t: &[u8; 64]| {
            // SAFETY: 64 bytes.
            unsafe { _mm512_loadu_si512(t.as_ptr().cast()) }
        };
        let lines = nl.count_ones();
        let last_nl = 63u32.wrapping_sub(nl.leading_zeros());
        // Bits 0..=last_nl: the bytes of whole lines.
        let whole = (u64::MAX >> (63 - last_nl.min(63))) & 0u64.wrapping_sub(u64::from(nl != 0));
        let starts = ((nl << 1) | 1) & whole;
        let commas = _mm512_cmpeq_epi8_mask(w, splat(b',')) & whole;

        // Every byte's class and value in one lookup of its low seven bits
        // (a byte from 0x80 on is none of them).
        let class = _mm512_permutex2var_epi8(load(&CLASS_LO), w, load(&CLASS_HI));
        let hex = _mm512_test_epi8_mask(class, splat(HEX)) & !_mm512_movepi8_mask(w);

        // Where each line starts, has its comma, ends: byte `i` for line `i`.
        let iota = load(&IOTA);
        let e8 = _mm512_castsi512_si128(_mm512_maskz_compress_epi8(nl, iota));
        let small = |b: u8| _mm_set1_epi8(b as i8);
        // Each line starts after the one before ends; the first at 0.
        let s8 = _mm_bslli_si128::<1>(_mm_add_epi8(e8, small(1)));
        // Its comma is 2 or 3 bytes before its end (checked below): bit `i` of
        // `two` says 3, a size of two digits.
        let two = _pext_u64(commas << 3, nl) as u16;
        let c8 = _mm_sub_epi8(
            _mm_sub_epi8(e8, small(2)),
            _mm_maskz_mov_epi8(two, small(1)),
        );
        // Per line: 1..=16 digits (wraps when out of order).
        let digits = _mm_sub_epi8(c8, _mm_add_epi8(s8, small(3)));
        let shaped = _mm_cmplt_epu8_mask(_mm_sub_epi8(digits, small(1)), small(16));
        let line_bits = (1u64 << lines.min(63)) - 1;

        // Each line's head, its first three bytes: bytes `i`, `8 + i` and `16 + i`
        // of `heads` for line `i`; `I  ` or ` L `, ` S `, ` M `.
        let at = _mm256_set_m128i(
            _mm_add_epi8(s8, small(2)),
            _mm_unpacklo_epi64(s8, _mm_add_epi8(s8, small(1))),
        );
        let heads = _mm512_castsi512_si256(_mm512_permutexvar_epi8(_mm512_castsi256_si512(at), w));
        let space = _mm256_cmpeq_epi8_mask(heads, _mm256_set1_epi8(b' ' as i8));
        let instr = _mm256_cmpeq_epi8_mask(heads, _mm256_set1_epi8(b'I' as i8));
        let lsm = _mm256_cmpeq_epi8_mask(
            _mm256_or_si256(heads, _mm256_set1_epi8(1)),
            _mm256_set1_epi8(b'M' as i8),
        ) | _mm256_cmpeq_epi8_mask(heads, _mm256_set1_epi8(b'S' as i8));
        let data = u64::from(space as u8) & line_bits;
        let head = ((instr & space >> 8) | (space & lsm >> 8)) & space >> 16;

        // The sizes: one or two decimal digits after the comma, in one 16-bit
        // lane per line (the second byte is the newline for one digit).
        let at = _mm_unpacklo_epi8(_mm_add_epi8(c8, small(1)), _mm_add_epi8(c8, small(2)));
        let digits2 = _mm512_permutexvar_epi8(_mm512_castsi128_si512(at), w);
        let digits2 = _mm_sub_epi8(_mm512_castsi512_si128(digits2), small(b'0'));
        let decimal = u64::from(_mm_cmplt_epu8_mask(digits2, small(10)));
        let firsts = _pdep_u64(line_bits, 0x5555);
        let seconds = _pdep_u64(u64::from(two), 0x5555) << 1 & firsts << 1;

        // With each line's start < comma < newline, the subtraction below
        // gives exactly the runs of digits between them.
        let ok = (lines.wrapping_sub(1) < MAX_LINES as u32)
            & (commas.count_ones() == lines)
            & ((commas << 2 | commas << 3) & nl == nl)
            & (u64::from(shaped) & line_bits == line_bits)
            & (u64::from(head) & line_bits == line_bits)
            & ((firsts | seconds) & !decimal == 0)
            & (commas.wrapping_sub(starts << 3) & !hex == 0);

        // The addresses. Byte `i` of `pairs` holds the digits at `i - 1` and
        // `i`; lane `k`'s byte `j` takes the pair ending `2j + 1` bytes before
        // line `k`'s comma while `2j` is below its digits. An odd count's first
        // digit pairs with the space before it, whose value is zero.
        let before = _mm512_permutexvar_epi8(load(&BEFORE), class);
        // The low half of each byte: the digit's value; the high half: the
        // value of the byte before (the 16-bit shift's spill masked off).
        let pairs =
            _mm512_ternarylogic_epi32::<0xac>(splat(0xf0), class, _mm512_slli_epi16::<4>(before));
        let lanes = load(&LANES);
        let comma_b = _mm512_permutexvar_epi8(lanes, _mm512_castsi128_si512(c8));
        let digits_b = _mm512_permutexvar_epi8(lanes, _mm512_castsi128_si512(digits));
        let in_number = _mm512_cmplt_epu8_mask(load(&TWICE), digits_b);
        let at = _mm512_sub_epi8(comma_b, load(&PAIR_BACK));
        let addr = _mm512_maskz_permutexvar_epi8(in_number, at, pairs);

        // 10 * d0 + d1 for two digits, d0 alone for one; 0x80 (added to a
        // size below 100) marks data.
        let tens = _mm_maddubs_epi16(digits2, _mm_set1_epi16(0x010a));
        let ones = _mm_and_si128(digits2, _mm_set1_epi16(0xff));
        let size = _mm_mask_blend_epi16(two as u8, ones, tens);
        let size = _mm_packus_epi16(size, size);
        let meta = _mm_mask_add_epi8(size, data as u16, size, small(0x80));

        // SAFETY: the arrays hold eight lanes (64 and 8 bytes).
        unsafe {
            _mm512_storeu_si512(addr_out.as_mut_ptr().cast(), addr);
            _mm_storel_epi64(meta_out.as_mut_ptr().cast(), meta);
        }
        Window {
            ok,
            lines,
            data,
            // Bytes 8..16 of `heads`: each line's second byte.
            kinds: _mm256_extract_epi64::<1>(heads) as u64,
            end: last_nl,
        }
    }
}

#[cfg(test)]
#[path = "fast_pages_tests.rs"]
mod tests;
