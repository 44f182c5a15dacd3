//! The `reservation` policy's own invariants against the machine.

use super::{frames, ReservationPolicy};
use crate::machine::Machine;
use crate::pagetable::PageTable;
use pagelab_core::{Pfn, VirtAddr};
use rustc_hash::FxHashMap;

impl ReservationPolicy {
    /// The policy's own invariants against the machine: population maps
    /// agree with the frames mapped, indexes and lists agree with the
    /// reservations, `held` is the sum of free frames, and every page of the
    /// owner on reservation frames sits at its own place in the block.
    pub(super) fn check_state(&self, m: &Machine) -> Result<(), String> {
        let mut mapped: FxHashMap<u64, (u32, VirtAddr)> = FxHashMap::default();
        for pid in m.pids() {
            let pt = &m.proc(pid).expect("listed").pt;
            for mp in pt.mappings_in(VirtAddr(0), m.va_end() - VirtAddr(0)) {
                for j in 0..frames(mp.size) {
                    mapped.insert(
                        mp.pfn.to_pfn(super::BASE).0 + j,
                        (pid, mp.start + (j << Pfn::SHIFT)),
                    );
                }
            }
        }
        let mut held = 0;
        let mut listed = 0;
        for (&id, r) in &self.res {
            r.pop.check()?;
            held += r.pop.frames() - r.pop.populated();
            if self.by_pfn.get(&r.block.0) != Some(&id)
                || self.by_va.get(&r.owner).and_then(|v| v.get(&r.va)) != Some(&id)
            {
                return Err(format!(
                    "reservation {id} at {:#x} missing from an index",
                    r.va
                ));
            }
            if r.pop.largest_free().is_some() {
                listed += 1;
            }
            for i in 0..r.pop.frames() {
                let f = r.block.0 + i;
                match (r.pop.is_set(i), mapped.get(&f)) {
                    (true, None) => {
                        return Err(format!(
                            "reservation at {:#x}: frame {f:#x} populated but not mapped",
                            r.va
                        ))
                    }
                    (false, Some(_)) => {
                        return Err(format!(
                            "reservation at {:#x}: frame {f:#x} mapped but free",
                            r.va
                        ))
                    }
                    (_, Some(&(pid, va))) if pid == r.owner && va != r.va + (i << Pfn::SHIFT) => {
                        return Err(format!(
                            "reservation at {:#x}: {va:#x} maps frame {f:#x} of another place",
                            r.va
                        ))
                    }
                    _ => {}
                }
            }
        }
        if held != self.held {
            return Err(format!(
                "reservations hold {held} free frames, {} counted",
                self.held
            ));
        }
        let entries: Vec<_> = self.lists.iter().collect();
        if entries.len() != listed
            || entries.iter().any(|&(k, t, id)| {
                self.res
                    .get(&id)
                    .is_none_or(|r| r.pop.largest_free() != Some(k) || r.time != t)
            })
        {
            return Err("reservation lists disagree with the reservations".into());
        }
        Ok(())
    }
}
