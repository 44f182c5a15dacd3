//! Processes that run in another's address space: a child made with
//! `CLONE_VM` (vfork's child) until its exec or exit.
//!
//! The kernel's rules (kernel/fork.c):
//!
//! - `copy_mm` with `CLONE_VM` makes no new mm: the child takes a reference
//!   on the parent's (`mmget`) and uses it as its own, so nothing is copied
//!   and no entry is write-protected; the parent's TLB keeps its entries.
//! - The child's faults are faults in that mm: the pages it maps are the
//!   parent's too, and the parent does not fault on them again. They count
//!   as the child's (per task), as every fault counts for the task that
//!   takes it.
//! - The child leaves the mm at its exec or exit: `exec_mm_release` and
//!   `exit_mm_release` call `mm_release`, which completes `vfork_done` and
//!   wakes the parent (with `CLONE_VFORK` it waited in
//!   `wait_for_vfork_done`; that ordering is the trace's, see
//!   `pagelab_trace::VforkOrder`); then `mmput` drops its reference, which
//!   frees nothing while the parent holds its own.
//! - An mm is freed when its last user leaves (`mmput`): if the parent exits
//!   first (only a non-vfork `CLONE_VM` child lets it), its address space
//!   lives on until the child leaves.
//!
//! The model keys an address space by the pid of the process that made it:
//! a task that runs in another's (its *owner*'s) is mapped to that pid.

use super::Mm;
use crate::machine::MmError;
use crate::system::Invalidate;
use pagelab_core::{CloneFlags, Event, VirtAddr};
use rustc_hash::{FxHashMap, FxHashSet};

/// Which tasks run in whose address space.
#[derive(Clone, Debug, Default)]
pub(super) struct Borrowed {
    /// Per task running in another's address space, the owner's pid.
    owner: FxHashMap<u32, u32>,
    /// Owners that exited while a task still ran in their address space:
    /// it goes when the last one leaves.
    exited: FxHashSet<u32>,
}

impl Borrowed {
    /// The pid whose address space `task` runs in.
    pub(super) fn mm_of(&self, task: u32) -> u32 {
        self.owner.get(&task).copied().unwrap_or(task)
    }

    fn users(&self, owner: u32) -> usize {
        self.owner.values().filter(|&&o| o == owner).count()
    }
}

impl Mm {
    /// The running task made `child` with `flags`: Some when it shares the
    /// address space (no copy), None for a copy (the caller forks).
    pub(super) fn share_mm(&mut self, child: u32, flags: CloneFlags) -> Option<Invalidate> {
        if !flags.shares_mm() {
            return None;
        }
        // A child of a task that borrows runs in the same space: its owner's.
        self.borrowed.owner.insert(child, self.pid);
        Some(Invalidate::Nothing)
    }

    /// Whether `pid` is a process or a task of the model's, or owns an
    /// address space others still run in (a fork naming it contradicts the
    /// trace).
    pub(super) fn task_exists(&self, pid: u32) -> bool {
        self.machine.proc(pid).is_some()
            || self.borrowed.owner.contains_key(&pid)
            || self.borrowed.users(pid) > 0
    }

    /// The running task's exec or exit (`ev`), when it runs in another's
    /// address space or others run in its own; None otherwise (the address
    /// space goes with the task).
    pub(super) fn leave_mm(&mut self, ev: &Event) -> Option<Result<Invalidate, MmError>> {
        let (task, owner) = (self.task, self.pid);
        if task != owner {
            // mm_release: the task leaves the owner's space, which stays. At its exit
            // the kernel's exit stop still sees that space as the task's.
            if matches!(ev, Event::Exit { .. }) {
                self.exiting(owner);
            }
            self.borrowed.owner.remove(&task);
            self.pid = task;
            let freed = if self.borrowed.exited.contains(&owner) && self.borrowed.users(owner) == 0
            {
                self.borrowed.exited.remove(&owner);
                self.drop_space(owner)
            } else {
                Ok(())
            };
            return Some(freed.map(|()| Invalidate::All));
        }
        if self.borrowed.users(owner) == 0 {
            return None;
        }
        Some(match ev {
            Event::Exit { .. } => {
                // Its users hold the space (mmput frees it when the last goes).
                self.exiting(owner);
                self.borrowed.exited.insert(owner);
                Ok(Invalidate::All)
            }
            _ => Err(MmError::Policy(format!(
                "process {owner} execs while another runs in its address space (CLONE_VM): \
                 the kernel gives it a new one and leaves the old to the other, which the \
                 model (one address space per pid) does not represent"
            ))),
        })
    }

    /// Process `pid`'s address space goes: its pages unmapped, its frames
    /// freed (or kept by others' references), its swap entries dropped.
    pub(super) fn drop_space(&mut self, pid: u32) -> Result<(), MmError> {
        let ranges: Vec<(VirtAddr, VirtAddr)> = match self.machine.proc(pid) {
            Some(p) => p.aspace.iter().map(|v| (v.start, v.end)).collect(),
            None => Vec::new(),
        };
        self.drop_ranges(pid, &ranges)?;
        self.machine.remove_proc(pid);
        self.swap.remove_pid(pid);
        Ok(())
    }
}
