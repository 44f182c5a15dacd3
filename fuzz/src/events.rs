//! Events made from fuzz bytes, biased towards what breaks models: a few
//! regions (low memory, the heap, the stack near 2^47, the edges of the
//! address space), ranges that cross one another, references of any kind.

use arbitrary::{Result, Unstructured};
use pagelab_core::{
    AccessKind, Advice, Backing, Event, ExecImage, FileIdentity, MapEvent, MapRequest, MemRef,
    Prot, Sharing, ThreadId, VirtAddr,
};

/// Where addresses come from: each a base the fuzzer picks, plus an offset.
const BASES: [u64; 10] = [
    0,
    0x40_0000,
    0x7f3a_1c5e_3000,
    0x7fff_ffff_f000,
    1 << 47,
    (1 << 48) - 0x20_0000,
    1 << 48,
    1 << 57,
    1 << 63,
    u64::MAX - 0x1f_ffff,
];

/// An address near one of [`BASES`] (or any 64-bit value, rarely).
pub fn addr(u: &mut Unstructured<'_>) -> Result<u64> {
    let pick = u.int_in_range(0..=BASES.len())?;
    if pick == BASES.len() {
        return u.arbitrary();
    }
    let off: u32 = u.int_in_range(0..=0x40_0000)?;
    Ok(BASES[pick].wrapping_add(u64::from(off)))
}

/// [`addr`] as a virtual address, for events.
fn vaddr(u: &mut Unstructured<'_>) -> Result<VirtAddr> {
    addr(u).map(VirtAddr)
}

/// A length for a range: pages, huge pages, sometimes anything.
fn len(u: &mut Unstructured<'_>) -> Result<u64> {
    Ok(match u.int_in_range(0..=4u8)? {
        0 => 0,
        1 => u64::from(u.int_in_range(1..=64u32)?) << 12,
        2 => u64::from(u.int_in_range(1..=8u32)?) << 21,
        3 => u.int_in_range(1..=0x10_0000u64)?,
        _ => u.arbitrary()?,
    })
}

fn kind(u: &mut Unstructured<'_>) -> Result<AccessKind> {
    Ok(*u.choose(&[
        AccessKind::Instr,
        AccessKind::Load,
        AccessKind::Store,
        AccessKind::Modify,
    ])?)
}

/// A reference of up to 64K bytes (a real tracer's are a few hundred at most).
pub fn mem_ref(u: &mut Unstructured<'_>) -> Result<MemRef> {
    let size = match u.int_in_range(0..=3u8)? {
        0 => 0,
        1 | 2 => *u.choose(&[1u32, 2, 4, 8, 16, 32, 64])?,
        _ => u.int_in_range(0..=0x1_0000)?,
    };
    Ok(MemRef {
        addr: vaddr(u)?,
        size,
        kind: kind(u)?,
    })
}

/// One event of any variant.
pub fn event(u: &mut Unstructured<'_>) -> Result<Event> {
    Ok(match u.int_in_range(0..=21u8)? {
        0..=9 => Event::Ref(mem_ref(u)?),
        10 => Event::Switch(ThreadId {
            pid: u.int_in_range(0..=3)?,
            tid: u.int_in_range(0..=3)?,
        }),
        11 | 12 => Event::Map(Box::new(MapEvent {
            start: vaddr(u)?,
            len: len(u)?,
            prot: Prot(u.int_in_range(0..=7)?),
            backing: if u.arbitrary()? {
                Backing::Anon
            } else {
                Backing::File {
                    file_id: u.int_in_range(0..=3)?,
                    offset: u64::from(u.int_in_range(0..=64u32)?) << 12,
                }
            },
            sharing: if u.arbitrary()? {
                Sharing::Private
            } else {
                Sharing::Shared
            },
        })),
        13 => Event::Unmap {
            start: vaddr(u)?,
            len: len(u)?,
        },
        14 => Event::Protect {
            start: vaddr(u)?,
            len: len(u)?,
            prot: Prot(u.int_in_range(0..=7)?),
        },
        15 => Event::Advise {
            start: vaddr(u)?,
            len: len(u)?,
            advice: match u.int_in_range(0..=4u8)? {
                0 => Advice::HugePage,
                1 => Advice::NoHugePage,
                2 => Advice::DontNeed,
                3 => Advice::PageOrder {
                    shift: u.int_in_range(0..=40)?,
                    wait: u.arbitrary()?,
                },
                _ => Advice::Other(u.arbitrary()?),
            },
        },
        16 => Event::Brk { end: vaddr(u)? },
        17 => Event::Fork {
            child: u.int_in_range(0..=3)?,
            flags: pagelab_core::CloneFlags(u.arbitrary()?),
        },
        18 => Event::Exit {
            status: u.arbitrary()?,
        },
        19 => Event::Exec(if u.arbitrary()? {
            Some(Box::new(ExecImage {
                path: u.arbitrary()?,
                strings: u.arbitrary()?,
                capture_id: u.arbitrary()?,
            }))
        } else {
            None
        }),
        20 => Event::MapRequest(Box::new(MapRequest {
            hint: VirtAddr(addr(u)?),
            len: len(u)?,
            prot: Prot(u.arbitrary()?),
            flags: u.arbitrary()?,
            file: if u.arbitrary()? {
                Some(FileIdentity {
                    dev: u.arbitrary()?,
                    ino: u.arbitrary()?,
                })
            } else {
                None
            },
            offset: u.arbitrary()?,
        })),
        // Up to 1 MiB: a reference is stepped page by page, and the bound
        // on what a trace may claim is the readers' business, not the models'.
        _ => Event::Ref(MemRef {
            addr: vaddr(u)?,
            size: u.int_in_range(0..=1 << 20)?,
            kind: kind(u)?,
        }),
    })
}
