//! Address-space IDs: TLB entries tagged with the process that made them, so
//! that a process switch keeps them instead of emptying the TLB
//! (`--asids N`, [`pagelab_tlb::TlbConfig::asids`]).
//!
//! The allocation is Linux's on x86 (`choose_new_asid` in
//! `arch/x86/mm/tlb.c`): a process that still holds one of the N slots gets
//! it back with its entries; any other takes the next slot round-robin, and
//! the entries left there by the slot's last owner are flushed. An exit or
//! an exec leaves the old address space's entries in the TLB until its slot
//! is reused (no flush at exit): the process's next reference (the new
//! program's, or a new process's under the same pid) takes a new slot. A
//! fork write-protects the parent, so the parent's entries are flushed.
//!
//! The tag is put in the address bits above the machine's virtual address
//! space, which every reference lies below (the model refuses the rest): set
//! indexes are unchanged, and entries of different processes never match.

use pagelab_core::VirtAddr;
use pagelab_tlb::TlbHierarchy;
use rustc_hash::FxHashMap;

/// The slots and which process holds each.
#[derive(Clone, Debug)]
pub(crate) struct Asids {
    /// The bit where the tag starts: the machine's virtual address bits.
    shift: u32,
    /// Per slot, the process holding it.
    owner: Vec<Option<u32>>,
    /// Per process, its slot.
    slot: FxHashMap<u32, u32>,
    /// The slot the next process without one takes.
    next: u32,
    /// The slot of the running process (`None` after it left its address
    /// space: its next reference takes one).
    current: Option<u32>,
}

impl Asids {
    /// `n` slots on a machine of `va_bits`-bit virtual addresses, the first
    /// process to run taking slot 0; an error when the bits above the address
    /// space cannot tell `n` tags apart.
    pub(crate) fn new(n: u32, va_bits: u32) -> Result<Asids, String> {
        let room = 64 - va_bits.min(64);
        if room < 32 && u64::from(n) > 1u64 << room {
            return Err(format!(
                "--asids {n}: at most {} on a machine of {va_bits}-bit virtual addresses (the tag is kept in the {room} bits above them)",
                1u64 << room
            ));
        }
        Ok(Asids {
            shift: va_bits,
            owner: vec![None; n as usize],
            slot: FxHashMap::default(),
            next: 0,
            current: None,
        })
    }

    /// `addr` as the TLB sees it when process `pid` (the running one)
    /// references it, giving the process a slot if it has none.
    #[inline]
    pub(crate) fn tag(&mut self, pid: u32, addr: VirtAddr, tlb: &mut TlbHierarchy) -> VirtAddr {
        let s = match self.current {
            Some(s) => s,
            None => self.switch(pid, tlb),
        };
        VirtAddr(addr.0 | (u64::from(s) << self.shift))
    }

    /// Keeps the address bits of an entry, without its tag.
    pub(crate) fn untagged_mask(&self) -> u64 {
        (1u64 << self.shift) - 1
    }

    /// Process `pid` runs now: its slot if it still holds one (nothing
    /// flushed), else the next slot, whose old entries are flushed.
    pub(crate) fn switch(&mut self, pid: u32, tlb: &mut TlbHierarchy) -> u32 {
        let s = match self.slot.get(&pid) {
            Some(&s) => s,
            None => {
                let s = self.next;
                self.next = (self.next + 1) % self.owner.len() as u32;
                if let Some(old) = self.owner[s as usize].replace(pid) {
                    self.slot.remove(&old);
                }
                self.slot.insert(pid, s);
                Self::flush_slot(self.shift, s, tlb);
                s
            }
        };
        self.current = Some(s);
        s
    }

    /// The running process `pid` leaves its address space (exit, exec): its
    /// entries stay until the slot is reused.
    pub(crate) fn drop_space(&mut self, pid: u32) {
        if let Some(s) = self.slot.remove(&pid) {
            self.owner[s as usize] = None;
        }
        self.current = None;
    }

    /// The running task leaves an address space others keep (a vfork
    /// child's exec): the slot stays theirs, the task's next reference
    /// takes one of its own.
    pub(crate) fn leave(&mut self) {
        self.current = None;
    }

    /// Empties the running process's entries (a fork write-protects them).
    pub(crate) fn flush_current(&self, tlb: &mut TlbHierarchy) {
        if let Some(s) = self.current {
            Self::flush_slot(self.shift, s, tlb);
        }
    }

    /// Bytes `[start, end)` of the running process changed: its entries there go.
    pub(crate) fn invalidate(&self, start: VirtAddr, end: VirtAddr, tlb: &mut TlbHierarchy) {
        if let Some(s) = self.current {
            let tag = u64::from(s) << self.shift;
            tlb.invalidate_range(VirtAddr(start.0 | tag), end.0 - start.0);
        }
    }

    fn flush_slot(shift: u32, s: u32, tlb: &mut TlbHierarchy) {
        tlb.invalidate_range(VirtAddr(u64::from(s) << shift), 1u64 << shift);
    }
}
