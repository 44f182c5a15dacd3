//! The decoding loop's window step: the record starts of a 64-byte span
//! found at once, then its references decoded with no load in the chain
//! from one record's start to the next.
//!
//! A reference whose size is in its tag is two fields: the tag byte and one
//! varint, whose bytes have the high bit set but the last. Reading a record
//! at a time, each start waits for the load of the record before it and a
//! count of its trailing zeros (about 10 cycles a record, most of the
//! loop's time on gzip). Here the starts come from the mask of the span's
//! bytes below 0x80 ("stops": every varint's last byte, and the tags below
//! 0x80) in a few word operations (see [`starts`]); the records between
//! two starts are then independent of each other but for the two previous
//! addresses.

use super::codec::{squeeze, unzigzag, Cursor, Prev, KINDS, REF_STRIDE, SIZE_ESCAPE, TAG_SWITCH};
use crate::RecordSink;
use pagelab_core::{MemRef, VirtAddr};

/// Bytes in a window.
pub(crate) const WINDOW: usize = 64;

/// Bytes a window reads: its span, and each record's 8-byte varint word
/// (a record may start at the span's last byte).
pub(crate) const READ: usize = WINDOW + 16;

/// Per tag byte: the size of a reference with its size in the tag, or
/// [`NOT_FAST`] for any other record (one load instead of a compare and a
/// division by 60 on every record).
const SIZE_OF_TAG: [u8; 256] = {
    let mut t = [NOT_FAST; 256];
    let mut tag = 0;
    while tag < TAG_SWITCH as usize {
        let code = (tag % REF_STRIDE as usize) as u8;
        if code != SIZE_ESCAPE {
            t[tag] = code;
        }
        tag += 1;
    }
    t
};
const NOT_FAST: u8 = 0xff;
const _: () = assert!(KINDS.len() == 4 && TAG_SWITCH as usize <= 4 * REF_STRIDE as usize);

/// Per tag byte of [`SIZE_OF_TAG`]'s fast references: the offset of the
/// reference's last byte from its first (the size less one; a reference of
/// size 0 is its first byte alone, as `MemRef::last_byte` has it).
const LAST_OF_TAG: [u8; 256] = {
    let mut t = [0; 256];
    let mut tag = 0;
    while tag < 256 {
        if SIZE_OF_TAG[tag] != NOT_FAST {
            t[tag] = SIZE_OF_TAG[tag].saturating_sub(1);
        }
        tag += 1;
    }
    t
};

/// Bit `i` set where `span[i]` is below 0x80, in plain word operations.
#[inline(always)]
pub(crate) fn stops_portable(span: &[u8; WINDOW]) -> u64 {
    let mut m = 0;
    for (i, w) in span.chunks_exact(8).enumerate() {
        let w = u64::from_le_bytes(w.try_into().unwrap());
        // Byte j's flag at bit 8j, then moved to bit 56 + j by a multiply
        // whose partial products never overlap.
        let flags = (!w & 0x8080_8080_8080_8080) >> 7;
        m |= (flags.wrapping_mul(0x0102_0408_1020_4080) >> 56) << (8 * i);
    }
    m
}

/// [`stops_portable`] by one AVX-512BW compare.
///
/// # Safety
/// The CPU must have AVX-512F and AVX-512BW.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw")]
#[inline]
pub(crate) unsafe fn stops_avx512(span: &[u8; WINDOW]) -> u64 {
    use std::arch::x86_64::{_mm512_loadu_si512, _mm512_movepi8_mask};
    // SAFETY: `span` is 64 readable bytes; the load has no alignment need.
    let v = unsafe { _mm512_loadu_si512(span.as_ptr().cast()) };
    !_mm512_movepi8_mask(v)
}

/// [`stops_portable`] by two AVX2 compares.
///
/// # Safety
/// The CPU must have AVX2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
#[inline]
pub(crate) unsafe fn stops_avx2(span: &[u8; WINDOW]) -> u64 {
    use std::arch::x86_64::{_mm256_loadu_si256, _mm256_movemask_epi8};
    // SAFETY: `span` is 64 readable bytes, read as two halves of 32; the loads have no
    // alignment need.
    let (lo, hi) = unsafe {
        (
            _mm256_loadu_si256(span.as_ptr().cast()),
            _mm256_loadu_si256(span.as_ptr().add(32).cast()),
        )
    };
    let high = |v| u64::from(_mm256_movemask_epi8(v) as u32);
    !(high(lo) | high(hi) << 32)
}

/// The record starts of a span that begins with a record, given its stops,
/// if every record in it is a tag and one varint.
///
/// Scanning with two states (expecting a tag, inside a varint), a byte of
/// 0x80 or more always leaves the scan inside a varint (it is a tag or a
/// varint's byte), and a stop flips the state. So a byte is a tag exactly
/// when an even number of bytes lies between it and the last byte of 0x80
/// or more before it: in each run of stops, the bytes at odd distances
/// from the run's first, and the byte after the run when the run is odd.
/// Adding a run's first bit to the mask carries through the run to the byte
/// after it, so `(stops + firsts) ^ stops` is every run and its next byte;
/// the runs that begin at even and at odd bytes are taken apart to keep
/// the tags at the parity opposite their run's first. The span begins as
/// if after a varint's last byte (a run starting at byte -1).
///
/// Bits past a record that is not a tag and one varint are meaningless;
/// the caller stops there.
#[inline(always)]
pub(crate) fn starts(stops: u64) -> u64 {
    const EVEN: u64 = 0x5555_5555_5555_5555;
    let firsts = stops & !(stops << 1);
    let odd = (firsts & !EVEN) | (stops & 1);
    let even = firsts & EVEN & !1;
    let from_even = stops.wrapping_add(even) ^ stops;
    let from_odd = stops.wrapping_add(odd) ^ stops;
    (from_even & !EVEN) | (from_odd & EVEN) | 1
}

/// `bits` with all but its `n` lowest set bits cleared (`n` below their count).
#[inline(always)]
fn first_bits(bits: u64, n: usize) -> u64 {
    // Taken only where a fill's goal ends inside a window, so a loop.
    let mut rest = bits;
    for _ in 0..n {
        rest &= rest - 1;
    }
    bits & !rest
}

impl Cursor<'_> {
    /// Decodes up to `n` references of the window at the cursor: those
    /// whose record lies wholly in it, up to the first record that is not
    /// a reference with its size in the tag and a varint of at most 8
    /// bytes. Returns how many (0 when the first is not one).
    ///
    /// The caller checks that the window ends at or before the block's end.
    #[inline(always)]
    pub(crate) fn window<S: RecordSink, const PEXT: bool, const AVX512: bool>(
        &mut self,
        prev: &mut Prev,
        out: &mut S,
        n: usize,
    ) -> usize {
        let base = self.pos;
        debug_assert!(base + WINDOW <= self.end);
        // The padding after the block's end covers `READ` past `base`.
        let win: &[u8; READ] = self.buf[base..base + READ].try_into().unwrap();
        let span: &[u8; WINDOW] = win[..WINDOW].try_into().unwrap();
        #[cfg(target_arch = "x86_64")]
        let stops = if AVX512 {
            // SAFETY: `AVX512` is true only in `Cursor::decode_into_avx512`,
            // taken under the `avx512` tier, which has AVX-512F and BW.
            unsafe { stops_avx512(span) }
        } else if PEXT {
            // SAFETY: `PEXT` is true only in `Cursor::decode_into_avx2` and
            // `decode_into_avx512`, taken under tiers that have AVX2.
            unsafe { stops_avx2(span) }
        } else {
            stops_portable(span)
        };
        #[cfg(not(target_arch = "x86_64"))]
        let stops = stops_portable(span);
        // The records are those with a start after them in the span, at
        // most `n` of them: the bits of `rest` past the n-th cleared, so
        // that the loop counts nothing.
        let mut rest = starts(stops) & !1;
        if rest.count_ones() as usize > n {
            rest = first_bits(rest, n);
        }
        let records = rest.count_ones();
        let [mut instr, mut data] = prev.0;
        // The window's data references, counted in a register and handed
        // to the sink once (with the rest, the instructions) at the end.
        let mut data_refs = 0u64;
        let mut at = 0usize;
        while rest != 0 {
            let next = rest.trailing_zeros() as usize;
            let tag = win[at];
            let len = next - at - 1;
            let size = SIZE_OF_TAG[tag as usize];
            if size == NOT_FAST || len > 8 {
                break;
            }
            rest &= rest - 1;
            let word = u64::from_le_bytes(win[at + 1..at + 9].try_into().unwrap());
            let delta = unzigzag(squeeze::<PEXT>(word, 8 * len as u32)) as u64;
            // Both previous addresses in registers, each a chain of one add.
            let is_data = tag >= REF_STRIDE;
            data_refs += u64::from(is_data);
            let addr = if is_data { data } else { instr }.wrapping_add(delta);
            if is_data {
                data = addr;
            } else {
                instr = addr;
            }
            // The last byte as `MemRef::last_byte` has it, from a table.
            let last = addr.saturating_add(u64::from(LAST_OF_TAG[tag as usize]));
            let r = MemRef {
                addr: VirtAddr(addr),
                size: size as u32,
                // A fast tag is below `TAG_SWITCH`, so `& 3` changes no
                // index; it lets the compiler drop the bounds check (a
                // compare and a branch on every record).
                kind: KINDS[(tag / REF_STRIDE) as usize & 3],
            };
            out.window_reference(r, usize::from(is_data), VirtAddr(last));
            at = next;
        }
        prev.0 = [instr, data];
        self.pos = base + at;
        let done = u64::from(records - rest.count_ones());
        out.window_counts([done - data_refs, data_refs]);
        done as usize
    }
}
