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

#[path = "codec_decode.rs"]
mod decode;
pub(crate) use decode::{squeeze, Cursor, PADDING};

#[cfg(test)]
mod tests {
    use super::decode::varint_at_with;
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
