//! Memory references and the address-space events that surround them.

use crate::VirtAddr;
use serde::{Deserialize, Serialize};

/// What a memory reference does.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[repr(u8)]
pub enum AccessKind {
    /// An instruction fetch (Lackey `I`).
    Instr = 0,
    /// A data load (Lackey `L`).
    Load = 1,
    /// A data store (Lackey `S`).
    Store = 2,
    /// A data modify: a load and a store of the same bytes, counted once (Lackey `M`).
    Modify = 3,
}

impl AccessKind {
    /// Whether this reference goes to the instruction side of a split TLB.
    #[inline]
    pub fn is_instr(self) -> bool {
        matches!(self, AccessKind::Instr)
    }

    /// Whether this reference writes memory.
    #[inline]
    pub fn is_write(self) -> bool {
        matches!(self, AccessKind::Store | AccessKind::Modify)
    }

    /// The Lackey letter for this kind.
    pub fn lackey_letter(self) -> char {
        match self {
            AccessKind::Instr => 'I',
            AccessKind::Load => 'L',
            AccessKind::Store => 'S',
            AccessKind::Modify => 'M',
        }
    }
}

/// One memory reference covering bytes `[addr, addr + size)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct MemRef {
    /// First byte referenced.
    pub addr: VirtAddr,
    /// Number of bytes referenced; Lackey allows 0, which still touches the page of `addr`.
    pub size: u32,
    /// Instruction fetch, load, store or modify.
    pub kind: AccessKind,
}

impl MemRef {
    /// The last byte the reference covers (equal to `addr` for a zero-size reference).
    #[inline]
    pub fn last_byte(&self) -> VirtAddr {
        self.addr.last_byte_of(self.size)
    }
}

/// Page protection bits.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
pub struct Prot(pub u8);

impl Prot {
    /// Readable.
    pub const READ: u8 = 1;
    /// Writable.
    pub const WRITE: u8 = 2;
    /// Executable.
    pub const EXEC: u8 = 4;
}

/// Whether a mapping is private (copy-on-write) or shared.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Sharing {
    /// MAP_PRIVATE.
    Private,
    /// MAP_SHARED.
    Shared,
}

/// What backs a mapping.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Backing {
    /// Anonymous zero-filled memory.
    Anon,
    /// A file, named by a trace-local id, mapped from byte `offset`.
    File {
        /// Identifies the file within the trace.
        file_id: u64,
        /// Byte offset in the file of the mapping's first byte.
        offset: u64,
    },
}

/// A new mapping (mmap).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct MapEvent {
    /// First byte of the mapping.
    pub start: VirtAddr,
    /// Length in bytes.
    pub len: u64,
    /// Protection.
    pub prot: Prot,
    /// Anonymous or file-backed.
    pub backing: Backing,
    /// Private or shared.
    pub sharing: Sharing,
}

/// A file as the kernel knows it: the device and inode number of its `stat`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct FileIdentity {
    /// `st_dev`.
    pub dev: u64,
    /// `st_ino`.
    pub ino: u64,
}

/// An mmap request as the program made it, before the kernel placed it;
/// the [`Event::Map`] that follows is its result (a failed request is not
/// recorded).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct MapRequest {
    /// The address argument: a hint, or the place itself under `MAP_FIXED`.
    pub hint: VirtAddr,
    /// The length argument in bytes, as given (the kernel rounds it up to pages).
    pub len: u64,
    /// The protection argument (its read, write and execute bits).
    pub prot: Prot,
    /// The flags argument: Linux's `MAP_*` bits, as given (see the constants).
    pub flags: u32,
    /// The file the descriptor argument named, for a file mapping.
    pub file: Option<FileIdentity>,
    /// The offset argument in bytes.
    pub offset: u64,
}

impl MapRequest {
    /// `MAP_SHARED`.
    pub const SHARED: u32 = 0x01;
    /// `MAP_PRIVATE`.
    pub const PRIVATE: u32 = 0x02;
    /// `MAP_FIXED`: the hint is the place, whatever is there is replaced.
    pub const FIXED: u32 = 0x10;
    /// `MAP_ANONYMOUS`.
    pub const ANONYMOUS: u32 = 0x20;
    /// `MAP_GROWSDOWN`: a stack that grows down.
    pub const GROWSDOWN: u32 = 0x100;
    /// `MAP_NORESERVE`.
    pub const NORESERVE: u32 = 0x4000;
    /// `MAP_POPULATE`: fault the pages in now.
    pub const POPULATE: u32 = 0x8000;
    /// `MAP_STACK`.
    pub const STACK: u32 = 0x2_0000;
    /// `MAP_HUGETLB`.
    pub const HUGETLB: u32 = 0x4_0000;
    /// `MAP_FIXED_NOREPLACE`: the hint is the place, or the call fails.
    pub const FIXED_NOREPLACE: u32 = 0x10_0000;
}

/// Advice given for a range (madvise and pagelab's own per-region page order).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Advice {
    /// MADV_HUGEPAGE.
    HugePage,
    /// MADV_NOHUGEPAGE.
    NoHugePage,
    /// MADV_DONTNEED: drop the pages, keep the mapping.
    DontNeed,
    /// The `setregionorder` of Winwood et al. (OLS 2002): map this range with pages of this log2 size.
    /// `wait` asks to wait for the large page instead of falling back.
    PageOrder {
        /// log2 of the requested page size in bytes.
        shift: u8,
        /// Wait for the page rather than fall back to a smaller one.
        wait: bool,
    },
    /// Any other madvise value, kept by number (Linux's values all fit in 16 bits).
    Other(u16),
}

/// The flags of a call that made a process, as Linux's `clone` takes them
/// (`CLONE_*`, without the exit signal in the low byte): what the program
/// asked for, before any emulator rewrote it. `fork` is no flag; `vfork` is
/// [`CloneFlags::VFORK_CALL`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
pub struct CloneFlags(pub u64);

impl CloneFlags {
    /// A plain fork: the child gets a copy of the address space.
    pub const FORK: CloneFlags = CloneFlags(0);
    /// What `vfork()` asks for: `CLONE_VM | CLONE_VFORK`.
    pub const VFORK_CALL: CloneFlags = CloneFlags(Self::VM | Self::VFORK);
    /// `CLONE_VM`: the child runs in the caller's address space.
    pub const VM: u64 = 0x100;
    /// `CLONE_VFORK`: the calling thread waits until the child execs or exits.
    pub const VFORK: u64 = 0x4000;
    /// `CSIGNAL`: clone's low byte, the signal sent at the child's exit, no flag.
    pub const SIGNAL_MASK: u64 = 0xff;

    /// The flags of clone's first argument (its exit signal dropped).
    pub fn from_clone_arg(arg: u64) -> CloneFlags {
        CloneFlags(arg & !Self::SIGNAL_MASK)
    }

    /// Whether the child shares the caller's address space (`CLONE_VM`).
    pub fn shares_mm(self) -> bool {
        self.0 & Self::VM != 0
    }

    /// Whether the calling thread is suspended until the child execs or
    /// exits (`CLONE_VFORK`).
    pub fn suspends_parent(self) -> bool {
        self.0 & Self::VFORK != 0
    }
}

/// A process and thread identifier pair.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
pub struct ThreadId {
    /// Process id.
    pub pid: u32,
    /// Thread id.
    pub tid: u32,
}

/// One record of a trace.
///
/// References dominate every trace, so the enum is kept to 24 bytes: the rare
/// map event is boxed. Process and thread ids are not repeated on every
/// reference: a [`Event::Switch`] sets them for the records that follow.
///
/// A range is its first byte (a [`VirtAddr`]) and a length in bytes, as the
/// system calls and every trace format carry it, not a `Range<VirtAddr>`:
/// a length that runs past the top of the address space stays what the
/// trace said, for the model to refuse with the address, rather than each
/// reader having to cut or refuse an end it cannot represent.
///
/// The layout is the primitive representation (`repr(u8)`): a tag byte, then each
/// variant's fields as a `repr(C)` struct after it, so that [`Event::write_ref`] can write
/// a reference's fields straight into a slot. (A variant's small fields come first, where
/// they fill the bytes after the tag: the enum stays 24 bytes.)
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[repr(u8)]
pub enum Event {
    /// A memory reference.
    Ref(MemRef) = REF_TAG,
    /// The following records belong to this process and thread.
    Switch(ThreadId),
    /// mmap: where the kernel placed a mapping.
    Map(Box<MapEvent>),
    /// mmap as requested; the [`Event::Map`] that follows is its result.
    MapRequest(Box<MapRequest>),
    /// munmap of `[start, start + len)`.
    Unmap {
        /// First byte.
        start: VirtAddr,
        /// Length in bytes.
        len: u64,
    },
    /// mprotect.
    Protect {
        /// New protection.
        prot: Prot,
        /// First byte.
        start: VirtAddr,
        /// Length in bytes.
        len: u64,
    },
    /// madvise or a page-order request.
    Advise {
        /// The advice.
        advice: Advice,
        /// First byte.
        start: VirtAddr,
        /// Length in bytes.
        len: u64,
    },
    /// brk: the program break moved to `end`.
    Brk {
        /// New end of the heap.
        end: VirtAddr,
    },
    /// The current process forked a child with this pid (fork, vfork, or a
    /// clone that makes a process).
    Fork {
        /// The child's process id.
        child: u32,
        /// The clone flags the call asked for ([`CloneFlags::FORK`] for a
        /// plain fork, and in traces that did not record them).
        #[serde(default)]
        flags: CloneFlags,
    },
    /// The current process exited with this status.
    Exit {
        /// Exit status.
        status: i32,
    },
    /// The current process replaced its program (execve): its address space,
    /// program break included, is gone, and the records that follow run in a
    /// new, empty one under the same process id. The new program, when the
    /// capture recorded it (traces written before it did read as `None`).
    Exec(Option<Box<ExecImage>>),
}

/// The tag byte of [`Event::Ref`].
const REF_TAG: u8 = 0;

/// [`Event::Ref`] as its primitive representation lays it out: the tag, then the field.
#[repr(C)]
struct RefVariant {
    tag: u8,
    r: MemRef,
}

impl Event {
    /// Writes `Event::Ref(r)` into `slot`: the tag byte and the reference's fields, each
    /// stored straight from where it is.
    ///
    /// The same as `slot.write(Event::Ref(r))`, which the compiler builds on the stack
    /// and copies in as 23 bytes after the tag: loads of fields just stored a few bytes
    /// at a time, which the core cannot forward from the stores (a stall of some
    /// 15 cycles on every reference of the decoders into a vector of events, session 60).
    #[inline(always)]
    pub fn write_ref(slot: &mut std::mem::MaybeUninit<Event>, r: MemRef) {
        // SAFETY: `Event` is `repr(u8)`, so `Event::Ref` is laid out as the `repr(C)`
        // struct of its tag byte (`REF_TAG`, its explicit discriminant) and its field,
        // which is `RefVariant`; the slot is a whole `Event`, so large enough and aligned
        // for it, and the write leaves a valid `Event::Ref(r)` there.
        unsafe {
            slot.as_mut_ptr()
                .cast::<RefVariant>()
                .write(RefVariant { tag: REF_TAG, r });
        }
    }

    /// A plain fork of a child with this pid (no clone flags).
    pub fn fork(child: u32) -> Event {
        Event::Fork {
            child,
            flags: CloneFlags::FORK,
        }
    }
}

/// The program an `execve` started, as a capture recorded it: what the
/// model needs to lay its address space out as the kernel does.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExecImage {
    /// The ELF file that runs (a `#!` script's interpreter, resolved as
    /// `binfmt_script` does), an absolute path as bytes.
    pub path: Vec<u8>,
    /// The bytes of the strings `execve` copied to the new stack: the file
    /// name, the arguments and the environment, each with its NUL.
    pub strings: u64,
    /// The capture's number of this exec (1, 2, ...), which names what the
    /// capture kept of it besides the trace (QEMU's page log of the new
    /// image); 0 when none.
    pub capture_id: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reference_written_field_by_field_is_the_reference_for_miri() {
        for (addr, size, kind) in [
            (0u64, 0u32, AccessKind::Instr),
            (0x1122_3344_5566_7788, 0xaabb_ccdd, AccessKind::Store),
            (u64::MAX, u32::MAX, AccessKind::Modify),
            (0x7fff_f000, 8, AccessKind::Load),
        ] {
            let r = MemRef {
                addr: VirtAddr(addr),
                size,
                kind,
            };
            let mut slot = std::mem::MaybeUninit::<Event>::uninit();
            Event::write_ref(&mut slot, r);
            // SAFETY: `write_ref` wrote a whole `Event` there.
            let e = unsafe { slot.assume_init() };
            assert_eq!(e, Event::Ref(r));
            // Over a slot that held another event.
            let mut slot = std::mem::MaybeUninit::new(Event::Unmap {
                start: VirtAddr(u64::MAX),
                len: u64::MAX,
            });
            Event::write_ref(&mut slot, r);
            // SAFETY: as above.
            assert_eq!(unsafe { slot.assume_init() }, Event::Ref(r));
        }
    }

    #[test]
    fn event_stays_small() {
        assert!(
            std::mem::size_of::<Event>() <= 24,
            "{}",
            std::mem::size_of::<Event>()
        );
    }

    #[test]
    fn last_byte_of_zero_size_ref_is_its_address() {
        let r = MemRef {
            addr: VirtAddr(10),
            size: 0,
            kind: AccessKind::Load,
        };
        assert_eq!(r.last_byte(), VirtAddr(10));
        let r = MemRef {
            addr: VirtAddr(10),
            size: 8,
            kind: AccessKind::Load,
        };
        assert_eq!(r.last_byte(), VirtAddr(17));
    }
}
