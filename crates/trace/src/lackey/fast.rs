//! The fast path of the Lackey parser: well-formed lines without loops over bytes.
//!
//! [`newline_mask`] finds the line ends of 64 bytes at a time, so the start of
//! the next line never waits on parsing this one and the CPU overlaps lines.
//! [`parse_well_formed`] reads a line of exactly the shape Valgrind prints
//! (`I  <hex>,<dec>\n` or ` L|S|M <hex>,<dec>\n`, 1 to 16 hex digits, 1 or 2
//! decimal digits) with a few wide loads; anything else returns `None` and
//! goes to the careful scalar parser, which alone decides what is an error.
//!
//! On x86_64 the byte classification uses SSE2 (part of every x86_64 target);
//! other targets use the same arithmetic on 64-bit words (SWAR). The tests
//! check that both agree with a byte-by-byte reference.

use super::line::parse_odd_line;
use crate::{PageBatch, PageFilter};
use pagelab_core::{AccessKind, Event, MemRef, VirtAddr};

/// Bytes that [`newline_mask`] and [`parse_well_formed`] may read past a position.
pub(super) const READ_AHEAD: usize = 64;

/// Where parsed references go: a vector of events, or a page filter.
///
/// The block loop calls [`Sink::begin_block`], then [`Sink::push`] at most 64
/// times (once per line of a 64-byte block), then [`Sink::end_block`].
pub(super) trait Sink {
    /// How many more events the sink takes before the caller's batch is full.
    fn room(&self) -> usize;
    /// Before the pushes of one block.
    #[inline(always)]
    fn begin_block(&mut self) {}
    /// One reference of the block (at most 64 per block).
    fn push(&mut self, r: MemRef);
    /// After the pushes of one block.
    #[inline(always)]
    fn end_block(&mut self) {}
    /// One reference outside the block loop.
    fn push_one(&mut self, r: MemRef);
    /// The sink's loop over whole windows of lines, with the contract of [`parse_blocks`],
    /// where the CPU has AVX-512 VBMI2 (`fast_pages`, `fast_events`).
    const WINDOWS: Option<Parse<Self>> = None;
    /// Parses whole lines of `buf[start..complete]` into the sink, as
    /// [`parse_blocks`] does (its contract): by its windows where it has them and
    /// the tier is on, else by the block loop.
    fn parse(&mut self, buf: &[u8], complete: usize, start: usize, line: u64) -> Parsed
    where
        Self: Sized,
    {
        match Self::WINDOWS {
            Some(windows) if pagelab_core::isa::vbmi2_active() => {
                windows(buf, complete, start, line, self)
            }
            _ => parse_blocks(buf, complete, start, line, self),
        }
    }
}

/// Where a parse stopped (a line start), the lines consumed in all, and the error of the
/// line at the stop.
pub(super) type Parsed = (usize, u64, Result<(), &'static str>);

/// A loop that parses whole lines of `buf[start..complete]` into a sink: `(buf, complete,
/// start, line, sink)`, with the contract of [`parse_blocks`].
pub(super) type Parse<S> = fn(&[u8], usize, usize, u64, &mut S) -> Parsed;

/// Events appended to a vector, up to `goal` in all.
pub(super) struct EventSink<'a> {
    out: &'a mut Vec<Event>,
    goal: usize,
    /// During a block: `out.len()` at its start, and references written after it.
    len: usize,
    n: usize,
}

impl<'a> EventSink<'a> {
    /// Appends to `out` until it holds `goal` events.
    pub(super) fn new(out: &'a mut Vec<Event>, goal: usize) -> Self {
        EventSink {
            out,
            goal,
            len: 0,
            n: 0,
        }
    }
}

impl Sink for EventSink<'_> {
    #[inline(always)]
    fn room(&self) -> usize {
        self.goal.saturating_sub(self.out.len())
    }

    #[inline(always)]
    fn begin_block(&mut self) {
        // At most 64 lines end in a block: their references go straight into
        // `out`'s spare room, which keeps `out`'s length out of the loop.
        self.out.reserve(64);
        self.len = self.out.len();
        self.n = 0;
    }

    #[inline(always)]
    fn push(&mut self, r: MemRef) {
        // `begin_block` reserved 64 slots after `len`, the vector's length, and a block
        // pushes at most 64 references (`& 63` keeps the index in range anyway); the
        // reference is written field by field (see `Event::write_ref`).
        Event::write_ref(&mut self.out.spare_capacity_mut()[self.n & 63], r);
        self.n += 1;
    }

    #[inline(always)]
    fn end_block(&mut self) {
        // SAFETY: slots `len..len + n` were written by `push` (`n <= 64`).
        unsafe { self.out.set_len(self.len + self.n.min(64)) };
    }

    fn push_one(&mut self, r: MemRef) {
        self.out.push(Event::Ref(r));
    }

    const WINDOWS: Option<Parse<Self>> = Some(super::fast_events::parse_events);
}

/// References filtered into a page batch as they are parsed, up to `goal`
/// events taken in (kept or dropped).
pub(super) struct PageSink<'a> {
    pub(super) filter: &'a mut PageFilter,
    pub(super) out: &'a mut PageBatch,
    pub(super) goal: u64,
}

impl Sink for PageSink<'_> {
    #[inline(always)]
    fn room(&self) -> usize {
        self.goal.saturating_sub(self.out.events()) as usize
    }

    #[inline(always)]
    fn push(&mut self, r: MemRef) {
        self.filter.reference(&r, self.out);
    }

    fn push_one(&mut self, r: MemRef) {
        self.filter.reference(&r, self.out);
    }

    const WINDOWS: Option<Parse<Self>> = Some(super::fast_pages::parse_pages);
}

/// The first three bytes of a well-formed line with this second byte, as a
/// little-endian `u32` (`u32::MAX`, never a three-byte value, if none).
static HEAD: [u32; 256] = {
    let mut t = [u32::MAX; 256];
    t[b' ' as usize] = u32::from_le_bytes([b'I', b' ', b' ', 0]);
    t[b'L' as usize] = u32::from_le_bytes([b' ', b'L', b' ', 0]);
    t[b'S' as usize] = u32::from_le_bytes([b' ', b'S', b' ', 0]);
    t[b'M' as usize] = u32::from_le_bytes([b' ', b'M', b' ', 0]);
    t
};

/// The kind of a well-formed line by its second byte.
pub(super) static KIND: [AccessKind; 256] = {
    let mut t = [AccessKind::Instr; 256];
    t[b'L' as usize] = AccessKind::Load;
    t[b'S' as usize] = AccessKind::Store;
    t[b'M' as usize] = AccessKind::Modify;
    t
};

fn word(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().unwrap())
}

/// Bit `i` is set when `block[i]` is a newline.
#[inline(always)]
fn newline_mask<const AVX2: bool>(block: &[u8; 64]) -> u64 {
    #[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
    if AVX2 {
        avx2::newline_mask(block)
    } else {
        // SAFETY: the function only needs SSE2, which this build enables (the
        // cfg checks; it is part of every x86_64 target).
        unsafe { sse2::newline_mask(block) }
    }
    #[cfg(not(all(target_arch = "x86_64", target_feature = "sse2")))]
    swar::newline_mask(block)
}

/// The number of leading hexadecimal digits of `chunk` (0..=16), and the
/// value of the first 16 bytes read as hexadecimal digits (only meaningful for
/// the leading digits: callers shift the rest out).
#[inline(always)]
fn hex16<const AVX2: bool>(chunk: &[u8; 16]) -> (u32, u64) {
    #[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
    if AVX2 {
        avx2::hex16(chunk)
    } else {
        // SAFETY: as in `newline_mask`.
        unsafe { sse2::hex16(chunk) }
    }
    #[cfg(not(all(target_arch = "x86_64", target_feature = "sse2")))]
    swar::hex16(chunk)
}

/// Parses whole lines of `buf[start..complete]` 64 bytes at a time while
/// `out` has room for 64 more before `goal`; returns where it stopped (a line
/// start), the lines consumed in all, and the error of the line at the stop.
///
/// `buf` has `READ_AHEAD` bytes after `complete`, and `buf[complete - 1]` is
/// a newline. Each block's newlines are found at once, so where a line starts
/// never waits on parsing the line before it. Lines of the shape Valgrind
/// prints take [`parse_well_formed`]; any other goes to the careful parser,
/// which decides what it is (and every error) exactly as if it were alone.
pub(super) fn parse_blocks<S: Sink>(
    buf: &[u8],
    complete: usize,
    start: usize,
    line: u64,
    out: &mut S,
) -> (usize, u64, Result<(), &'static str>) {
    #[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
    if pagelab_core::isa::active() >= pagelab_core::isa::Isa::Avx2 {
        // SAFETY: the active tier is one the CPU has (`isa::active` checks), and
        // the AVX2 tier's features are those `avx2::parse_blocks` is compiled for.
        return unsafe { avx2::parse_blocks(buf, complete, start, line, out) };
    }
    parse_blocks_with::<false, S>(buf, complete, start, line, out)
}

#[inline(always)]
fn parse_blocks_with<const AVX2: bool, S: Sink>(
    buf: &[u8],
    complete: usize,
    start: usize,
    mut line: u64,
    out: &mut S,
) -> (usize, u64, Result<(), &'static str>) {
    let mut s = start;
    let mut block = s;
    let mut result = Ok(());
    while block < complete && out.room() >= 64 {
        let mut ends = newline_mask::<AVX2>(buf[block..block + 64].try_into().unwrap());
        if complete - block < 64 {
            ends &= (1 << (complete - block)) - 1;
        }
        out.begin_block();
        line += ends.count_ones() as u64;
        while ends != 0 {
            let e = block + ends.trailing_zeros() as usize;
            ends &= ends - 1;
            if let Some(r) = parse_well_formed::<AVX2>(buf, s, e) {
                out.push(r);
            } else {
                match parse_odd_line(&buf[..complete], s, e) {
                    Ok(Some(r)) => out.push(r),
                    Ok(None) => {}
                    Err(reason) => {
                        // Lines from this one on were counted but not consumed.
                        line -= ends.count_ones() as u64 + 1;
                        result = Err(reason);
                        break;
                    }
                }
            }
            s = e + 1;
        }
        out.end_block();
        if result.is_err() {
            break;
        }
        block += 64;
    }
    (s, line, result)
}

/// Parses the line `buf[s..=e]`, where `buf[e]` is its newline and
/// `buf.len() >= s + READ_AHEAD`, if it has the exact shape Valgrind prints.
///
/// `None` means "ask the careful parser", not "invalid": a line it returns is
/// parsed exactly as the careful parser would parse it.
#[inline(always)]
pub(super) fn parse_well_formed<const AVX2: bool>(
    buf: &[u8],
    s: usize,
    e: usize,
) -> Option<MemRef> {
    let f = fields::<AVX2>(buf, s, e);
    if f.ok {
        Some(MemRef {
            addr: VirtAddr(f.addr),
            size: f.size,
            kind: KIND[f.kind as usize],
        })
    } else {
        None
    }
}

/// The fields of a line as [`parse_well_formed`] reads them.
pub(super) struct Fields {
    /// Whether the line has the exact shape Valgrind prints (else the rest is meaningless).
    pub ok: bool,
    /// The line's second byte: `b' '` for an instruction, else `L`, `S` or `M`.
    pub kind: u8,
    pub addr: u64,
    pub size: u32,
}

/// Reads the line `buf[s..=e]` (see [`parse_well_formed`]) without branches.
#[inline(always)]
pub(super) fn fields<const AVX2: bool>(buf: &[u8], s: usize, e: usize) -> Fields {
    let line: &[u8; 32] = buf[s..s + 32].try_into().unwrap();
    let kind = line[1];
    let head = u32::from_le_bytes([line[0], kind, line[2], 0]);
    let head_ok = head == HEAD[kind as usize];

    let (n, digits) = hex16::<AVX2>(line[3..19].try_into().unwrap());
    let addr = digits.checked_shr(64 - 4 * n).unwrap_or(0);
    let comma = 3 + n as usize; // <= 19
    let comma_ok = (n != 0) & (line[comma] == b',');

    // The size: one or two decimal digits between the comma and the newline.
    let k = e.wrapping_sub(s + comma + 1);
    let d0 = line[comma + 1].wrapping_sub(b'0');
    let d1 = line[comma + 2].wrapping_sub(b'0');
    let two = k == 2;
    let size_ok = (k.wrapping_sub(1) < 2) & (d0 <= 9) & (!two | (d1 <= 9));
    let size = if two {
        d0 as u32 * 10 + d1 as u32
    } else {
        d0 as u32
    };
    Fields {
        ok: head_ok & comma_ok & size_ok,
        kind,
        addr,
        size,
    }
}

#[cfg_attr(all(target_arch = "x86_64", target_feature = "sse2"), allow(dead_code))]
#[path = "fast_swar.rs"]
pub(super) mod swar;

#[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
#[path = "fast_sse2.rs"]
mod sse2;

#[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
#[path = "fast_avx2.rs"]
mod avx2;

#[cfg(test)]
#[path = "fast_tests.rs"]
mod tests;
