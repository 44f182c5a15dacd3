//! Promotion: at the fault that populates the last base page of an aligned extent, that
//! extent's pages unmapped and its frames mapped as one page, smallest size first.

use super::{ReservationPolicy, BASE};
use crate::machine::{Machine, MmError};
use crate::pagetable::{PageTable, PteFlags};
use crate::vma::Vma;
use pagelab_core::{PageSize, Pfn, VirtAddr};

impl ReservationPolicy {
    /// Promotes, smallest size first, every extent holding `va` that the
    /// fault just completed.
    pub(super) fn promote(
        &mut self,
        m: &mut Machine,
        pid: u32,
        id: u64,
        vma: &Vma,
        va: VirtAddr,
    ) -> Result<(), MmError> {
        let flags = PteFlags::from_prot(vma.prot);
        let (rva, size, block) = {
            let r = &self.res[&id];
            (r.va, r.size, r.block)
        };
        let i = BASE.pages_in(va - rva);
        let mut top = None;
        for &s in self.sizes.iter().filter(|&&s| s <= size) {
            let k = s.frame_order().0;
            let start = va.align_down(s);
            let pfn = block.0 + Pfn::count_in(start - rva);
            if !self.res[&id].pop.full(k, i)
                || !vma.holds_aligned(va, s)
                || !promotable(m, pid, start, s, pfn, flags)
            {
                break;
            }
            m.unmap_range(pid, start, start + s.bytes())?;
            m.map(pid, start, Pfn(pfn), s, flags, false)?;
            m.stats.promotions += 1;
            self.counters.promoted.add(s, 1);
            top = Some(s);
        }
        if let Some(s) = top {
            // The largest extent promoted holds every smaller one.
            let start = va.align_down(s);
            self.remapped.push((pid, start, start + s.bytes()));
        }
        if top == Some(size) {
            // The whole extent is one page now: an ordinary superpage.
            self.forget(id);
        }
        Ok(())
    }
}

/// Whether the aligned extent `[start, +s)` of `pid` is mapped entirely by
/// pages on frames `pfn..` in order, with `flags`, none shared.
fn promotable(
    m: &Machine,
    pid: u32,
    start: VirtAddr,
    s: PageSize,
    pfn: u64,
    flags: PteFlags,
) -> bool {
    let Some(p) = m.proc(pid) else {
        return false;
    };
    let mut covered = 0;
    for mp in p.pt.mappings_in(start, s.bytes()) {
        if mp.start < start {
            return false;
        }
        let off = mp.start - start;
        if off + mp.size.bytes() > s.bytes()
            || mp.pfn.to_pfn(BASE).0 != pfn + Pfn::count_in(off)
            || mp.flags != flags
        {
            return false;
        }
        covered += mp.size.bytes();
    }
    covered == s.bytes() && m.exclusive(Pfn(pfn), s)
}
