//! The events of the trace that are not references (map, unmap, protect, advise,
//! brk, fork, exec, switch, exit), carried out on the model, and what each makes
//! the TLB model forget.

use super::{Invalidate, Mm};
use crate::fault;
use crate::machine::MmError;
use crate::pagetable::{PageTable, PteFlags};
use crate::policy::Policy;
use pagelab_core::{Advice, Event, VirtAddr};

impl Mm {
    /// Carries out one non-reference event.
    pub fn event(&mut self, ev: &Event) -> Result<Invalidate, MmError> {
        // Page tables grow only at faults and shrink only at events and
        // ticks: measured before each, the kernel's peak is never missed.
        self.account_kernel()?;
        let pid = self.pid;
        match ev {
            // The request matters to placement only; its result follows as a Map.
            Event::Ref(_) | Event::MapRequest(_) => Ok(Invalidate::Nothing),
            Event::Switch(t) => {
                // Tasks that share an address space switch without a flush.
                let mm = self.borrowed.mm_of(t.pid);
                let changed = mm != self.pid;
                let placed = t.pid != self.task;
                (self.pid, self.task) = (mm, t.pid);
                if placed {
                    self.place();
                }
                Ok(if changed {
                    Invalidate::All
                } else {
                    Invalidate::Nothing
                })
            }
            Event::Map(m) => {
                self.seen_map_events = true;
                self.inside(m.start, m.len)?;
                match self.machine.proc_mut(pid).aspace.map(m) {
                    Ok(removed) => self.drop_ranges(pid, &removed),
                    Err(_) => self.on_nothing(),
                }
            }
            Event::Unmap { start, len } => {
                match self.machine.proc_mut(pid).aspace.unmap(*start, *len) {
                    Ok(removed) => self.drop_ranges(pid, &removed),
                    Err(_) => self.on_nothing(),
                }
            }
            Event::Brk { end } => {
                self.inside(*end, 0)?;
                let removed = self
                    .machine
                    .proc_mut(pid)
                    .aspace
                    .brk(*end)
                    .unwrap_or_default();
                self.drop_ranges(pid, &removed)
            }
            Event::Protect { start, len, prot } => {
                match self
                    .machine
                    .proc_mut(pid)
                    .aspace
                    .protect(*start, *len, *prot)
                {
                    Ok(changed) => {
                        let mut inv = Invalidate::Nothing;
                        let base = self.machine.base();
                        for (s, e) in changed {
                            // With base pages above 4K a range may cover part of
                            // one: the whole base page takes the new protection.
                            let (s, e) = (s.align_down(base), e.align_up(base));
                            let report = self.machine.proc_mut(pid).pt.protect(
                                s,
                                e - s,
                                PteFlags::from_prot(*prot),
                            )?;
                            // Passive demotion: a page only partly re-protected was split.
                            self.machine.stats.demotions += report.splits.len() as u64;
                            for split in &report.splits {
                                let t =
                                    self.machine.proc_mut(pid).pt.walk(split.start).ok_or_else(
                                        || {
                                            MmError::Policy(format!(
                                                "page at {} vanished while being split",
                                                split.start
                                            ))
                                        },
                                    )?;
                                self.machine.note_split(
                                    t.pfn.to_pfn(base),
                                    split.from,
                                    split.to,
                                )?;
                            }
                            inv = widen(inv, s, e);
                        }
                        Ok(inv)
                    }
                    Err(_) => self.on_nothing(),
                }
            }
            Event::Advise { start, len, advice } => {
                match self
                    .machine
                    .proc_mut(pid)
                    .aspace
                    .advise(*start, *len, *advice)
                {
                    Ok(ranges) if *advice == Advice::DontNeed => self.drop_ranges(pid, &ranges),
                    Ok(_) => Ok(Invalidate::Nothing),
                    Err(_) => self.on_nothing(),
                }
            }
            // An exec ends the old program's address space as an exit does;
            // the process is made anew by its next record.
            Event::Exit { .. } | Event::Exec(_) => {
                if let Some(done) = self.leave_mm(ev) {
                    return done;
                }
                // What the process maps at its exit is counted as the kernel's exit stop
                // sees it; an exec is no exit (the lab reads a process at its exit only).
                if matches!(ev, Event::Exit { .. }) {
                    self.exiting(pid);
                }
                self.drop_space(pid)?;
                Ok(Invalidate::All)
            }
            Event::Fork { child, flags } => {
                if self.task_exists(*child) {
                    // A pid still in use: the trace contradicts itself.
                    return self.on_nothing();
                }
                if let Some(inv) = self.share_mm(*child, *flags) {
                    return Ok(inv);
                }
                fault::fork(&mut self.machine, pid, *child)?;
                self.swap.fork(pid, *child);
                Ok(Invalidate::All)
            }
        }
    }

    /// A range that a VMA would cover must lie inside the virtual address
    /// space: no page of the geometry could map the rest, so such a trace
    /// is refused rather than modelled.
    fn inside(&self, start: VirtAddr, len: u64) -> Result<(), MmError> {
        let va_end = self.machine.va_end();
        match start.checked_add(len) {
            Some(end) if end <= va_end => Ok(()),
            _ => Err(MmError::OutsideAddressSpace {
                addr: start.max(va_end),
                va_bits: self.machine.geometry().va_bits(),
            }),
        }
    }

    fn on_nothing(&mut self) -> Result<Invalidate, MmError> {
        self.machine.stats.events_on_nothing += 1;
        Ok(Invalidate::Nothing)
    }

    /// Unmaps the pages of `ranges` and hands their frames to the policy.
    pub(super) fn drop_ranges(
        &mut self,
        pid: u32,
        ranges: &[(VirtAddr, VirtAddr)],
    ) -> Result<Invalidate, MmError> {
        let mut inv = Invalidate::Nothing;
        for &(s, e) in ranges {
            // Unmapping frees the range's swap entries too.
            self.swap.remove(pid, s, e);
            let removed = self.machine.unmap_range(pid, s, e)?;
            self.policy.release(&mut self.machine, pid, &removed)?;
            inv = widen(inv, s, e);
        }
        Ok(inv)
    }
}

fn widen(inv: Invalidate, s: VirtAddr, e: VirtAddr) -> Invalidate {
    match inv {
        Invalidate::Nothing => Invalidate::Range(s, e),
        Invalidate::Range(a, b) => Invalidate::Range(a.min(s), b.max(e)),
        Invalidate::All => Invalidate::All,
    }
}
