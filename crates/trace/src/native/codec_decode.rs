//! The decoding half of the record codec (`codec.rs`): a cursor over a block's raw bytes,
//! its varints and records, and the block's loop that hands references to a sink.

use super::*;

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
pub(super) fn varint_at_with<const PEXT: bool>(buf: &[u8], pos: usize) -> Option<(u64, usize)> {
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
        self.decode_with::<S, false, false, false>(prev, out, n)
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
        self.decode_with::<S, true, false, false>(prev, out, n)
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
        self.decode_with::<S, true, true, false>(prev, out, n)
    }

    /// [`Cursor::decode_into_avx512`] where the CPU also has VBMI and VBMI2: into a page
    /// filter's sink, a window's references are decoded and filtered eight at a time
    /// ([`Cursor::window_pages`]); into any other sink, the same as the `avx512` build.
    ///
    /// # Safety
    /// The CPU must have the `avx512` tier's features, VBMI and VBMI2.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(
        enable = "avx2,bmi1,bmi2,lzcnt,popcnt,avx512f,avx512bw,avx512vbmi,avx512vbmi2"
    )]
    #[inline(never)]
    pub(crate) unsafe fn decode_into_vbmi2<S: RecordSink>(
        &mut self,
        prev: &mut Prev,
        out: &mut S,
        n: usize,
    ) -> (usize, Result<(), DecodeError>) {
        self.decode_with::<S, true, true, true>(prev, out, n)
    }

    /// The decoding loop; `PEXT` where it is compiled for the `avx2` tier's features or
    /// more, `AVX512` for the `avx512` tier's, `VBMI2` for that tier's with VBMI and VBMI2.
    #[inline(always)]
    fn decode_with<S: RecordSink, const PEXT: bool, const AVX512: bool, const VBMI2: bool>(
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
                let k = match out.page_parts() {
                    #[cfg(target_arch = "x86_64")]
                    // SAFETY: `VBMI2` is true only in `Cursor::decode_into_vbmi2`, taken
                    // where the CPU has the features `window_pages` needs; the window
                    // ends at or before the block's end (tested above).
                    Some((filter, batch)) if VBMI2 => unsafe {
                        self.window_pages(prev, filter, batch, n - done)
                    },
                    _ => self.window::<S, PEXT, AVX512>(prev, out, n - done),
                };
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
