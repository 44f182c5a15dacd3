//! The record codec: tags, varints and zigzag deltas (see `docs/trace-format.md`).

use super::window::WINDOW;
use crate::RecordSink;
use pagelab_core::{
    AccessKind, Advice, Backing, CloneFlags, Event, ExecImage, FileIdentity, MapEvent, MapRequest,
    MemRef, Prot, Sharing, ThreadId, VirtAddr,
};

/// Reference tags are `kind * REF_STRIDE + size code`, below [`TAG_SWITCH`].
pub(crate) const REF_STRIDE: u8 = 60;
/// The size code meaning "size follows as a varint"; codes below it are the size itself.
pub(crate) const SIZE_ESCAPE: u8 = 59;
pub(crate) const TAG_SWITCH: u8 = 0xf0;
pub(crate) const TAG_MAP: u8 = 0xf1;
pub(crate) const TAG_UNMAP: u8 = 0xf2;
pub(crate) const TAG_PROTECT: u8 = 0xf3;
pub(crate) const TAG_ADVISE: u8 = 0xf4;
pub(crate) const TAG_BRK: u8 = 0xf5;
pub(crate) const TAG_FORK: u8 = 0xf6;
pub(crate) const TAG_EXIT: u8 = 0xf7;
pub(crate) const TAG_EXEC: u8 = 0xf8;
pub(crate) const TAG_MAP_REQUEST: u8 = 0xf9;
pub(crate) const TAG_EXEC_IMAGE: u8 = 0xfa;
/// A fork with clone flags (version 4); a plain fork stays [`TAG_FORK`].
pub(crate) const TAG_CLONE: u8 = 0xfb;

/// Longest exec'd program path a record carries (Linux's `PATH_MAX`).
pub(crate) const MAX_EXEC_PATH: usize = 4096;

/// Longest encoding of any record but an exec'd program's (a file map
/// request: tag, 6 varints of 64 bits and one of 32, 2 bytes).
pub(crate) const MAX_RECORD_LEN: usize = 1 + 6 * 10 + 5 + 2;

/// Longest encoding of `e`: [`MAX_RECORD_LEN`], or more for an exec'd
/// program's record (its path).
#[inline]
pub(crate) fn max_len(e: &Event) -> usize {
    match e {
        Event::Exec(Some(img)) => 1 + 3 * 10 + img.path.len(),
        _ => MAX_RECORD_LEN,
    }
}

/// Map flags: bit 0 shared, bit 1 file-backed.
const MAP_SHARED: u8 = 1;
const MAP_FILE: u8 = 2;

/// Address prediction state: the previous instruction address (index 0) and
/// the previous data address (index 1).
#[derive(Clone, Copy, Default, Debug)]
pub(crate) struct Prev(pub(crate) [u64; 2]);

/// The access kind of each reference kind code.
pub(crate) const KINDS: [AccessKind; 4] = [
    AccessKind::Instr,
    AccessKind::Load,
    AccessKind::Store,
    AccessKind::Modify,
];

#[inline(always)]
fn zigzag(v: i64) -> u64 {
    ((v << 1) ^ (v >> 63)) as u64
}

#[inline(always)]
pub(crate) fn unzigzag(v: u64) -> i64 {
    ((v >> 1) as i64) ^ -((v & 1) as i64)
}

/// Appends `v` as an unsigned LEB128 varint.
#[inline(always)]
pub(crate) fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push(v as u8 | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// Appends the encoding of `e` to `out`, updating `prev`.
#[inline]
pub(crate) fn encode(out: &mut Vec<u8>, prev: &mut Prev, e: &Event) {
    match e {
        Event::Ref(r) => {
            let code = if r.size < SIZE_ESCAPE as u32 {
                r.size as u8
            } else {
                SIZE_ESCAPE
            };
            out.push(r.kind as u8 * REF_STRIDE + code);
            let last = &mut prev.0[!r.kind.is_instr() as usize];
            put_varint(out, zigzag(r.addr.0.wrapping_sub(*last) as i64));
            *last = r.addr.0;
            if code == SIZE_ESCAPE {
                put_varint(out, r.size as u64);
            }
        }
        Event::Switch(t) => {
            out.push(TAG_SWITCH);
            put_varint(out, t.pid as u64);
            put_varint(out, t.tid as u64);
        }
        Event::Map(m) => {
            out.push(TAG_MAP);
            put_varint(out, m.start.0);
            put_varint(out, m.len);
            out.push(m.prot.0);
            let shared = if m.sharing == Sharing::Shared {
                MAP_SHARED
            } else {
                0
            };
            match m.backing {
                Backing::Anon => out.push(shared),
                Backing::File { file_id, offset } => {
                    out.push(shared | MAP_FILE);
                    put_varint(out, file_id);
                    put_varint(out, offset);
                }
            }
        }
        Event::Unmap { start, len } => range(out, TAG_UNMAP, *start, *len),
        Event::Protect { start, len, prot } => {
            range(out, TAG_PROTECT, *start, *len);
            out.push(prot.0);
        }
        Event::Advise { start, len, advice } => {
            range(out, TAG_ADVISE, *start, *len);
            match advice {
                Advice::HugePage => out.push(0),
                Advice::NoHugePage => out.push(1),
                Advice::DontNeed => out.push(2),
                Advice::PageOrder { shift, wait } => {
                    out.extend_from_slice(&[3, *shift, *wait as u8])
                }
                Advice::Other(v) => {
                    out.push(4);
                    put_varint(out, *v as u64);
                }
            }
        }
        Event::Brk { end } => {
            out.push(TAG_BRK);
            put_varint(out, end.0);
        }
        Event::Fork { child, flags } if *flags == CloneFlags::FORK => {
            out.push(TAG_FORK);
            put_varint(out, *child as u64);
        }
        Event::Fork { child, flags } => {
            out.push(TAG_CLONE);
            put_varint(out, *child as u64);
            put_varint(out, flags.0);
        }
        Event::Exit { status } => {
            out.push(TAG_EXIT);
            put_varint(out, zigzag(*status as i64));
        }
        Event::Exec(None) => out.push(TAG_EXEC),
        Event::Exec(Some(img)) => {
            out.push(TAG_EXEC_IMAGE);
            put_varint(out, img.strings);
            put_varint(out, img.capture_id);
            put_varint(out, img.path.len() as u64);
            out.extend_from_slice(&img.path);
        }
        Event::MapRequest(r) => {
            out.push(TAG_MAP_REQUEST);
            put_varint(out, r.hint.0);
            put_varint(out, r.len);
            out.push(r.prot.0);
            put_varint(out, r.flags as u64);
            match r.file {
                None => out.push(0),
                Some(f) => {
                    out.push(1);
                    put_varint(out, f.dev);
                    put_varint(out, f.ino);
                }
            }
            put_varint(out, r.offset);
        }
    }
}

fn range(out: &mut Vec<u8>, tag: u8, start: VirtAddr, len: u64) {
    out.push(tag);
    put_varint(out, start.0);
    put_varint(out, len);
}

/// Why a record could not be decoded.
pub(crate) type DecodeError = &'static str;

const PAST_END: DecodeError = "record runs past the end of the block";

/// Zero bytes the reader appends after a block's raw bytes, so that the
/// reference fast path can read a whole record and one 8-byte word past it
/// without bounds checks against the block's end (it checks once, after).
pub(crate) const PADDING: usize = 32;

/// The varint at `buf[pos]` and its length, if at most 8 bytes long.
///
/// `buf` must hold at least 8 bytes from `pos` (the padding guarantees it);
/// the varint may run past the block's end, which the caller checks.
#[inline(always)]
fn varint_at(buf: &[u8], pos: usize) -> Option<(u64, usize)> {
    varint_at_with::<false>(buf, pos)
}

/// [`varint_at`], its continuation bits squeezed out by one `pext` when
/// `PEXT` (only inlined into code compiled for BMI2, on a CPU that has it).
#[inline(always)]
fn varint_at_with<const PEXT: bool>(buf: &[u8], pos: usize) -> Option<(u64, usize)> {
    // No shortcut for one-byte varints: in a mixed trace their branch would
    // mispredict often, and the word path costs a few cycles at most.
    let w = u64::from_le_bytes(buf[pos..pos + 8].try_into().unwrap());
    let stops = !w & 0x8080_8080_8080_8080;
    if stops == 0 {
        return None;
    }
    let bits = stops.trailing_zeros() + 1; // 8 * length in bytes
    Some((squeeze::<PEXT>(w, bits), bits as usize / 8))
}

/// The value of the varint in the low `bits` bits of `w` (8 to 64, a
/// multiple of 8), its continuation bits squeezed out: by one `pext` when
/// `PEXT` (only inlined into code compiled for BMI2, on a CPU that has it).
#[inline(always)]
pub(crate) fn squeeze<const PEXT: bool>(w: u64, bits: u32) -> u64 {
    #[cfg(target_arch = "x86_64")]
    if PEXT {
        use std::arch::x86_64::{_bzhi_u64, _pext_u64};
        // SAFETY: `PEXT` is true only where the CPU has BMI2: in
        // `Cursor::decode_into_avx2` and `decode_into_avx512` (called under the
        // tiers, which have it) and in a test that checks the CPU first.
        return unsafe { _pext_u64(w, _bzhi_u64(0x7f7f_7f7f_7f7f_7f7f, bits)) };
    }
    let mut x = if bits == 64 {
        w
    } else {
        w & ((1u64 << bits) - 1)
    };
    // Squeeze out the continuation bits: 8 x 7 bits -> 56 bits.
    x &= 0x7f7f_7f7f_7f7f_7f7f;
    x = (x & 0x007f_007f_007f_007f) | ((x & 0x7f00_7f00_7f00_7f00) >> 1);
    x = (x & 0x0000_3fff_0000_3fff) | ((x & 0x3fff_0000_3fff_0000) >> 2);
    x = (x & 0x0000_0000_0fff_ffff) | ((x & 0x0fff_ffff_0000_0000) >> 4);
    x
}

/// A cursor over one block's raw bytes, followed by [`PADDING`] zero bytes.
pub(crate) struct Cursor<'a> {
    /// The raw bytes and the padding.
    pub(crate) buf: &'a [u8],
    /// End of the raw bytes.
    pub(crate) end: usize,
    pub(crate) pos: usize,
}

impl Cursor<'_> {
    #[inline(always)]
    fn byte(&mut self) -> Result<u8, DecodeError> {
        if self.pos >= self.end {
            return Err(PAST_END);
        }
        let b = self.buf[self.pos];
        self.pos += 1;
        Ok(b)
    }

    /// A varint that may run into the padding; the caller checks `pos <= end` afterwards.
    #[inline(always)]
    fn varint_padded(&mut self) -> Result<u64, DecodeError> {
        match varint_at(self.buf, self.pos) {
            Some((v, len)) => {
                self.pos += len;
                Ok(v)
            }
            None => self.varint_slow(),
        }
    }

    #[inline(always)]
    fn varint(&mut self) -> Result<u64, DecodeError> {
        let v = self.varint_padded()?;
        if self.pos > self.end {
            return Err(PAST_END);
        }
        Ok(v)
    }

    #[inline(never)]
    fn varint_slow(&mut self) -> Result<u64, DecodeError> {
        let mut v = 0u64;
        let mut shift = 0;
        loop {
            let b = self.byte()?;
            if shift == 63 && b > 1 {
                return Err("varint longer than 64 bits");
            }
            v |= ((b & 0x7f) as u64) << shift;
            if b < 0x80 {
                return Ok(v);
            }
            shift += 7;
        }
    }

    fn varint_u32(&mut self, what: DecodeError) -> Result<u32, DecodeError> {
        u32::try_from(self.varint()?).map_err(|_| what)
    }

    /// Decodes up to `n` records into `out`; returns how many, and the error
    /// that stopped it early.
    ///
    /// The same as calling [`Cursor::record`] `n` times, with references
    /// decoded in place: this loop is most of the reader's time.
    #[inline(never)]
    pub(crate) fn decode_into<S: RecordSink>(
        &mut self,
        prev: &mut Prev,
        out: &mut S,
        n: usize,
    ) -> (usize, Result<(), DecodeError>) {
        self.decode_with::<S, false, false>(prev, out, n)
    }

    /// [`Cursor::decode_into`] compiled for the `avx2` tier (AVX2, BMI1, BMI2, POPCNT,
    /// LZCNT): each varint squeezed by one `pext`, a window's records counted by
    /// `popcnt` (the baseline target has neither: about 20 instructions each), its
    /// stops found by two compares.
    ///
    /// # Safety
    /// The CPU must have the `avx2` tier's features.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2,bmi1,bmi2,lzcnt,popcnt")]
    #[inline(never)]
    pub(crate) unsafe fn decode_into_avx2<S: RecordSink>(
        &mut self,
        prev: &mut Prev,
        out: &mut S,
        n: usize,
    ) -> (usize, Result<(), DecodeError>) {
        self.decode_with::<S, true, false>(prev, out, n)
    }

    /// [`Cursor::decode_into`] compiled for the `avx512` tier: as
    /// [`Cursor::decode_into_avx2`], a window's stops found by one compare.
    ///
    /// # Safety
    /// The CPU must have BMI1, BMI2, AVX-512F and AVX-512BW (the `avx512`
    /// tier has them).
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2,bmi1,bmi2,lzcnt,popcnt,avx512f,avx512bw")]
    #[inline(never)]
    pub(crate) unsafe fn decode_into_avx512<S: RecordSink>(
        &mut self,
        prev: &mut Prev,
        out: &mut S,
        n: usize,
    ) -> (usize, Result<(), DecodeError>) {
        self.decode_with::<S, true, true>(prev, out, n)
    }

    /// The decoding loop; `PEXT` where it is compiled for the `avx2` tier's features or
    /// more, `AVX512` for the `avx512` tier's.
    #[inline(always)]
    fn decode_with<S: RecordSink, const PEXT: bool, const AVX512: bool>(
        &mut self,
        prev: &mut Prev,
        out: &mut S,
        n: usize,
    ) -> (usize, Result<(), DecodeError>) {
        let mut done = 0;
        while done < n {
            // Windows while a whole one lies before the block's end; a
            // record at a time after, and where a window cannot start.
            if self.pos + WINDOW <= self.end {
                let k = self.window::<S, PEXT, AVX512>(prev, out, n - done);
                if k > 0 {
                    done += k;
                    continue;
                }
            }
            let pos = self.pos;
            let tag = self.buf[pos];
            // A reference with its size in the tag is the tag and one varint.
            let fast = if pos < self.end && tag < TAG_SWITCH && tag % REF_STRIDE != SIZE_ESCAPE {
                varint_at_with::<PEXT>(self.buf, pos + 1)
                    .filter(|&(_, len)| pos + 1 + len <= self.end)
            } else {
                None
            };
            if let Some((value, len)) = fast {
                self.pos = pos + 1 + len;
                let last = &mut prev.0[(tag >= REF_STRIDE) as usize];
                let addr = last.wrapping_add(unzigzag(value) as u64);
                *last = addr;
                let kind = KINDS[(tag / REF_STRIDE) as usize];
                let size = (tag % REF_STRIDE) as u32;
                out.reference(MemRef {
                    addr: VirtAddr(addr),
                    size,
                    kind,
                });
            } else {
                match self.record(prev) {
                    Ok(e) => out.event(e),
                    Err(e) => return (done, Err(e)),
                }
            }
            done += 1;
        }
        (done, Ok(()))
    }

    /// Decodes the record at the cursor.
    #[inline(always)]
    pub(crate) fn record(&mut self, prev: &mut Prev) -> Result<Event, DecodeError> {
        let tag = self.byte()?;
        debug_assert!(self.buf.len() >= self.end + PADDING);
        if tag < TAG_SWITCH {
            let (kind, code) = (KINDS[(tag / REF_STRIDE) as usize], tag % REF_STRIDE);
            let last = &mut prev.0[(tag >= REF_STRIDE) as usize];
            let addr = last.wrapping_add(unzigzag(self.varint_padded()?) as u64);
            let size = if code == SIZE_ESCAPE {
                let size = self.varint_u32("reference size does not fit in 32 bits")?;
                if size > crate::max_ref_size() {
                    return Err(crate::REF_TOO_LARGE);
                }
                size
            } else {
                code as u32
            };
            if self.pos > self.end {
                return Err(PAST_END);
            }
            *last = addr;
            return Ok(Event::Ref(MemRef {
                addr: VirtAddr(addr),
                size,
                kind,
            }));
        }
        self.other(tag)
    }

    #[inline(never)]
    fn other(&mut self, tag: u8) -> Result<Event, DecodeError> {
        Ok(match tag {
            TAG_SWITCH => {
                let pid = self.varint_u32("pid does not fit in 32 bits")?;
                let tid = self.varint_u32("tid does not fit in 32 bits")?;
                Event::Switch(ThreadId { pid, tid })
            }
            TAG_MAP => {
                let (start, len) = (self.varint()?, self.varint()?);
                let prot = Prot(self.byte()?);
                let flags = self.byte()?;
                if flags & !(MAP_SHARED | MAP_FILE) != 0 {
                    return Err("map record has unknown flag bits");
                }
                let sharing = if flags & MAP_SHARED != 0 {
                    Sharing::Shared
                } else {
                    Sharing::Private
                };
                let backing = if flags & MAP_FILE != 0 {
                    Backing::File {
                        file_id: self.varint()?,
                        offset: self.varint()?,
                    }
                } else {
                    Backing::Anon
                };
                Event::Map(Box::new(MapEvent {
                    start: VirtAddr(start),
                    len,
                    prot,
                    backing,
                    sharing,
                }))
            }
            TAG_UNMAP => Event::Unmap {
                start: VirtAddr(self.varint()?),
                len: self.varint()?,
            },
            TAG_PROTECT => {
                let (start, len) = (self.varint()?, self.varint()?);
                Event::Protect {
                    start: VirtAddr(start),
                    len,
                    prot: Prot(self.byte()?),
                }
            }
            TAG_ADVISE => {
                let (start, len) = (self.varint()?, self.varint()?);
                let advice = match self.byte()? {
                    0 => Advice::HugePage,
                    1 => Advice::NoHugePage,
                    2 => Advice::DontNeed,
                    3 => {
                        let shift = self.byte()?;
                        let wait = match self.byte()? {
                            0 => false,
                            1 => true,
                            _ => return Err("page-order advice has a wait flag other than 0 or 1"),
                        };
                        Advice::PageOrder { shift, wait }
                    }
                    4 => Advice::Other(
                        u16::try_from(self.varint()?)
                            .map_err(|_| "advice value does not fit in 16 bits")?,
                    ),
                    _ => return Err("unknown advice code"),
                };
                Event::Advise {
                    start: VirtAddr(start),
                    len,
                    advice,
                }
            }
            TAG_BRK => Event::Brk {
                end: VirtAddr(self.varint()?),
            },
            TAG_FORK => Event::fork(self.varint_u32("child pid does not fit in 32 bits")?),
            TAG_CLONE => Event::Fork {
                child: self.varint_u32("child pid does not fit in 32 bits")?,
                flags: CloneFlags(self.varint()?),
            },
            TAG_EXIT => {
                let status = unzigzag(self.varint()?);
                Event::Exit {
                    status: i32::try_from(status)
                        .map_err(|_| "exit status does not fit in 32 bits")?,
                }
            }
            TAG_EXEC => Event::Exec(None),
            TAG_EXEC_IMAGE => {
                let strings = self.varint()?;
                let capture_id = self.varint()?;
                let len = self.varint()?;
                if len > MAX_EXEC_PATH as u64 {
                    return Err("exec record's path is longer than 4096 bytes");
                }
                let end = self.pos + len as usize;
                if end > self.end {
                    return Err(PAST_END);
                }
                let path = self.buf[self.pos..end].to_vec();
                self.pos = end;
                Event::Exec(Some(Box::new(ExecImage {
                    path,
                    strings,
                    capture_id,
                })))
            }
            TAG_MAP_REQUEST => {
                let hint = VirtAddr(self.varint()?);
                let len = self.varint()?;
                let prot = Prot(self.byte()?);
                let flags = self.varint_u32("map request flags do not fit in 32 bits")?;
                let file = match self.byte()? {
                    0 => None,
                    1 => Some(FileIdentity {
                        dev: self.varint()?,
                        ino: self.varint()?,
                    }),
                    _ => return Err("map request has a file flag other than 0 or 1"),
                };
                Event::MapRequest(Box::new(MapRequest {
                    hint,
                    len,
                    prot,
                    flags,
                    file,
                    offset: self.varint()?,
                }))
            }
            _ => return Err("reserved record tag (written by a newer pagelab?)"),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The `pext` squeeze gives the value and length of the portable one,
    /// for every length from 1 to 8 bytes (and none for 9 or more).
    #[test]
    fn pext_varints_are_the_portable_ones() {
        if !std::arch::is_x86_feature_detected!("bmi2") {
            eprintln!("skipped: this CPU lacks BMI2, which the pext squeeze needs");
            return;
        }
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        for i in 0..4000u32 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            // Values of every bit length from 0 to 63.
            let v = x >> (i % 64);
            let mut buf = Vec::new();
            put_varint(&mut buf, v);
            buf.extend_from_slice(&[0xff; 16]);
            let portable = varint_at_with::<false>(&buf, 0);
            assert_eq!(varint_at_with::<true>(&buf, 0), portable, "{v:#x}");
            let len = buf.len() - 16;
            assert_eq!(portable, (len <= 8).then_some((v, len)), "{v:#x}");
        }
    }
}
