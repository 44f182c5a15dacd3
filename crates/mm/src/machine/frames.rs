//! Frames mapped more than once: the reference counts that copy-on-write
//! after fork and shared file pages keep (`share`, `unshare`, `exclusive`,
//! `refs`), and the shared zero pages a read fault on never-written
//! anonymous memory maps.

use super::{frames_order, Machine, MmError};
use crate::pagetable::{PhysMapping, PteFlags};
use crate::phys::{FrameAllocator, ZonePref};
use pagelab_core::{PageSize, Pfn, VirtAddr};

impl Machine {
    /// Adds one reference to every frame of the `size` page at `pfn` (4K units).
    pub fn share(&mut self, pfn: Pfn, size: PageSize) {
        for f in pfn.0..pfn.0 + size.frames() {
            *self.shared.entry(f).or_insert(1) += 1;
        }
    }

    /// Drops one reference to every frame of page `m` (frames in 4K units) and
    /// returns what lost its last reference, for the policy to free: the whole
    /// page, nothing, or (when the page was partly copied on write elsewhere)
    /// the 4K pieces no one else holds, their block split first.
    pub fn unshare(&mut self, m: PhysMapping) -> Result<Vec<PhysMapping>, MmError> {
        let mut orphans = Vec::new();
        for f in m.pfn.0..m.pfn.0 + m.size.frames() {
            match self.shared.get_mut(&f) {
                Some(c) => {
                    *c -= 1;
                    if *c == 1 {
                        self.shared.remove(&f);
                    }
                }
                None => orphans.push(f),
            }
        }
        // A piece of a folio kept whole stays on the LRU with its folio until the folio
        // goes, and the pieces of a kept folio no one holds any more become its holes
        // (`free_frames`): neither the folio nor its LRU page is split.
        let kept = self.kept_folio_of(m.pfn);
        let inside = kept.is_some_and(|(_, s)| s > m.size);
        if orphans.len() as u64 == m.size.frames() {
            if !inside {
                self.res.forget(&mut self.phys, m.pfn, m.size.frames());
            }
            return Ok(vec![m]);
        }
        if kept.is_none() {
            for &f in &orphans {
                self.res.forget(&mut self.phys, Pfn(f), 1);
            }
            if !orphans.is_empty() {
                self.split_frames(m.pfn, m.size)?;
            }
        }
        Ok(orphans
            .into_iter()
            .map(|f| PhysMapping {
                start: m.start + (f - m.pfn.0) * PageSize::MIN.bytes(),
                size: PageSize::MIN,
                pfn: Pfn(f),
                flags: m.flags,
            })
            .collect())
    }

    /// Whether no frame of the `size` page at `pfn` is referenced elsewhere.
    pub fn exclusive(&self, pfn: Pfn, size: PageSize) -> bool {
        self.shared.is_empty()
            || (pfn.0..pfn.0 + size.frames()).all(|f| !self.shared.contains_key(&f))
    }

    /// References to the frame `pfn` (4K units): 1 unless shared.
    pub fn refs(&self, pfn: Pfn) -> u32 {
        self.shared.get(&pfn.0).copied().unwrap_or(1)
    }

    /// The shared zero page of `size` (4K, or the PMD size for the huge zero
    /// page), frames in 4K units: allocated at first use and held by the
    /// machine for good, like the kernel's `ZERO_PAGE` and huge zero folio.
    pub fn zero_page(&mut self, size: PageSize) -> Result<Pfn, MmError> {
        let slot = usize::from(size != PageSize::K4);
        if let Some(p) = self.zero[slot] {
            return Ok(p);
        }
        let pfn =
            self.phys
                .alloc(frames_order(size), ZonePref::Any)
                .ok_or(MmError::OutOfMemory {
                    addr: VirtAddr(0),
                    size,
                })?;
        self.zero[slot] = Some(pfn);
        Ok(pfn)
    }

    /// Maps the zero page of `size` read-only at `va` in `pid` (a read fault
    /// on never-written anonymous memory), adding the mapping's reference.
    pub fn map_zero(
        &mut self,
        pid: u32,
        va: VirtAddr,
        size: PageSize,
        flags: PteFlags,
    ) -> Result<(), MmError> {
        let pfn = self.zero_page(size)?;
        let ro = PteFlags(flags.0 & !PteFlags::WRITE.0);
        self.map_pte(pid, va, pfn, size, ro, false)?;
        self.share(pfn, size);
        Ok(())
    }

    /// Whether the frame `pfn` (4K units) belongs to a zero page.
    pub fn is_zero(&self, pfn: Pfn) -> bool {
        self.zero_pages()
            .any(|(z, size)| (z.0..z.0 + size.frames()).contains(&pfn.0))
    }

    /// The zero pages allocated so far (head frame in 4K units, size).
    pub fn zero_pages(&self) -> impl Iterator<Item = (Pfn, PageSize)> + '_ {
        let pmd = self.geometry.base().bytes() << 9;
        self.zero.iter().enumerate().filter_map(move |(i, z)| {
            let size = if i == 0 {
                PageSize::K4
            } else {
                PageSize::from_bytes(pmd).unwrap_or(PageSize::M2)
            };
            z.map(|p| (p, size))
        })
    }
}
