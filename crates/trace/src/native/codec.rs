//! The record codec: tags, varints and zigzag deltas (see `docs/trace-format.md`).

use pagelab_core::{AccessKind, Advice, Backing, Event, MapEvent, MemRef, Prot, Sharing, ThreadId};

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

/// Longest encoding of any record (a file-backed map: tag, 4 varints, 2 bytes).
pub(crate) const MAX_RECORD_LEN: usize = 1 + 4 * 10 + 2;

/// Map flags: bit 0 shared, bit 1 file-backed.
const MAP_SHARED: u8 = 1;
const MAP_FILE: u8 = 2;

/// Address prediction state: the previous instruction and data addresses.
#[derive(Clone, Copy, Default, Debug)]
pub(crate) struct Prev {
    pub(crate) instr: u64,
    pub(crate) data: u64,
}

#[inline(always)]
fn zigzag(v: i64) -> u64 {
    ((v << 1) ^ (v >> 63)) as u64
}

#[inline(always)]
fn unzigzag(v: u64) -> i64 {
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
            let last = if r.kind.is_instr() {
                &mut prev.instr
            } else {
                &mut prev.data
            };
            put_varint(out, zigzag(r.addr.wrapping_sub(*last) as i64));
            *last = r.addr;
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
            put_varint(out, m.start);
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
            put_varint(out, *end);
        }
        Event::Fork { child } => {
            out.push(TAG_FORK);
            put_varint(out, *child as u64);
        }
        Event::Exit { status } => {
            out.push(TAG_EXIT);
            put_varint(out, zigzag(*status as i64));
        }
    }
}

fn range(out: &mut Vec<u8>, tag: u8, start: u64, len: u64) {
    out.push(tag);
    put_varint(out, start);
    put_varint(out, len);
}

/// Why a record could not be decoded.
pub(crate) type DecodeError = &'static str;

const PAST_END: DecodeError = "record runs past the end of the block";

/// A cursor over one block's raw bytes.
pub(crate) struct Cursor<'a> {
    pub(crate) buf: &'a [u8],
    pub(crate) pos: usize,
}

impl Cursor<'_> {
    #[inline(always)]
    fn byte(&mut self) -> Result<u8, DecodeError> {
        let b = *self.buf.get(self.pos).ok_or(PAST_END)?;
        self.pos += 1;
        Ok(b)
    }

    #[inline(always)]
    fn varint(&mut self) -> Result<u64, DecodeError> {
        let b = self.byte()?;
        if b < 0x80 {
            return Ok(b as u64);
        }
        self.varint_slow(b)
    }

    #[inline(never)]
    fn varint_slow(&mut self, first: u8) -> Result<u64, DecodeError> {
        let mut v = (first & 0x7f) as u64;
        let mut shift = 7;
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

    /// Decodes the record at the cursor.
    #[inline(always)]
    pub(crate) fn record(&mut self, prev: &mut Prev) -> Result<Event, DecodeError> {
        let tag = self.byte()?;
        if tag < TAG_SWITCH {
            let (kind, code) = (tag / REF_STRIDE, tag % REF_STRIDE);
            let kind = match kind {
                0 => AccessKind::Instr,
                1 => AccessKind::Load,
                2 => AccessKind::Store,
                _ => AccessKind::Modify,
            };
            let last = if kind.is_instr() {
                &mut prev.instr
            } else {
                &mut prev.data
            };
            let addr = last.wrapping_add(unzigzag(self.varint()?) as u64);
            *last = addr;
            let size = if code == SIZE_ESCAPE {
                self.varint_u32("reference size does not fit in 32 bits")?
            } else {
                code as u32
            };
            return Ok(Event::Ref(MemRef { addr, size, kind }));
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
                    start,
                    len,
                    prot,
                    backing,
                    sharing,
                }))
            }
            TAG_UNMAP => Event::Unmap {
                start: self.varint()?,
                len: self.varint()?,
            },
            TAG_PROTECT => {
                let (start, len) = (self.varint()?, self.varint()?);
                Event::Protect {
                    start,
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
                Event::Advise { start, len, advice }
            }
            TAG_BRK => Event::Brk {
                end: self.varint()?,
            },
            TAG_FORK => Event::Fork {
                child: self.varint_u32("child pid does not fit in 32 bits")?,
            },
            TAG_EXIT => {
                let status = unzigzag(self.varint()?);
                Event::Exit {
                    status: i32::try_from(status)
                        .map_err(|_| "exit status does not fit in 32 bits")?,
                }
            }
            _ => return Err("reserved record tag (written by a newer pagelab?)"),
        })
    }
}
