//! The reclaim loop: preempt the policy's held frames first, then age the
//! LRU lists with second chance and reclaim the inactive list's coldest
//! unreferenced pages, until a zone's free frames reach its high watermark.

use super::{Owner, Swap};
use crate::cache::Folio;
use crate::machine::{frames_order, Machine, MmError};
use crate::pagetable::PageTable;
use crate::phys::{LruList, Page, PageTemp, SuperpageReclaim, ZoneId};
use crate::policy::{Policy, PolicyImpl};
use pagelab_core::{Backing, PageSize, Pfn, VirtAddr};

/// Everything reclaim acts on, borrowed from the running model.
pub(crate) struct Reclaimer<'a> {
    /// The machine.
    pub m: &'a mut Machine,
    /// The policy (it frees or keeps the frames of swapped pages).
    pub policy: &'a mut PolicyImpl,
    /// Swapped-out ranges.
    pub swap: &'a mut Swap,
    /// Ranges of the running process to invalidate in its TLB.
    pub inval: &'a mut Vec<(VirtAddr, VirtAddr)>,
    /// The running process.
    pub pid: u32,
}

fn frames(size: PageSize) -> u64 {
    size.frames()
}

impl Reclaimer<'_> {
    /// Reclaims every zone in the bit mask `zones` up to its high watermark.
    /// What it frees goes to the per-CPU cold lists (`shrink_list` frees
    /// through a cold `pagevec`).
    pub(crate) fn run(&mut self, zones: u64) -> Result<(), MmError> {
        let was = std::mem::replace(&mut self.m.free_temp, PageTemp::Cold);
        let done = self.zones(zones);
        self.m.free_temp = was;
        done
    }

    fn zones(&mut self, zones: u64) -> Result<(), MmError> {
        for z in 0..self.m.phys.zones().len().min(64) {
            if zones & (1 << z) != 0 {
                self.zone(ZoneId(z))?;
            }
        }
        Ok(())
    }

    /// Reclaims zone `z` until its free frames reach its high watermark, or
    /// nothing more can be taken.
    fn zone(&mut self, z: ZoneId) -> Result<(), MmError> {
        let high = self.m.phys.watermarks(z).high;
        let lists = self.m.phys.lru().zone_stats(z);
        // Each page is looked at a bounded number of times: at most twice on
        // each list before it is reclaimed or found busy.
        let mut budget = 4 * (lists.active_pages + lists.inactive_pages) + 8;
        let mut partial_done = false;
        while self.m.phys.zone_free(z) < high && budget > 0 {
            if self.policy.shrink(self.m, z)? {
                self.m.stats.reclaim_preemptions += 1;
                continue;
            }
            if !partial_done {
                partial_done = true;
                // The deferred-split shrinker first: partly unmapped folios give back
                // their unmapped pages without any I/O.
                let split = self.m.split_deferred(Some(z))?;
                if self.preempt_partial_folios(z)? || split > 0 {
                    continue;
                }
            }
            budget -= 1;
            let l = self.m.phys.lru().zone_stats(z);
            if l.active_pages > 0 && (l.inactive_pages == 0 || l.inactive_frames < l.active_frames)
            {
                self.age_active(z)?;
                continue;
            }
            let Some(page) = self.m.phys.lru().coldest(z, LruList::Inactive) else {
                break;
            };
            self.m.stats.reclaim_scanned += 1;
            if self.m.res.take_referenced(page.pfn, 1 << page.order.0) {
                self.m
                    .phys
                    .lru_mut()
                    .move_to_head_of(page.pfn, LruList::Active)?;
                continue;
            }
            budget += self.reclaim(page)?;
        }
        Ok(())
    }

    /// Second chance on the active list: its coldest page goes to the
    /// inactive list unless referenced since the last look.
    fn age_active(&mut self, z: ZoneId) -> Result<(), MmError> {
        let Some(page) = self.m.phys.lru().coldest(z, LruList::Active) else {
            return Ok(());
        };
        self.m.stats.reclaim_scanned += 1;
        let list = if self.m.res.take_referenced(page.pfn, 1 << page.order.0) {
            LruList::Active
        } else {
            LruList::Inactive
        };
        Ok(self.m.phys.lru_mut().move_to_head_of(page.pfn, list)?)
    }

    /// Reclaims (or, when superpages are split first, splits) `page`.
    /// Returns the pages a split added to the lists.
    fn reclaim(&mut self, page: Page) -> Result<u64, MmError> {
        let owner = self.m.res.owner(page.pfn).ok_or_else(|| {
            MmError::Policy(format!(
                "reclaim: LRU page at frame {:#x} has no owner",
                page.pfn.0
            ))
        })?;
        let size = PageSize::of_order(page.order).ok_or_else(|| {
            MmError::Policy(format!("reclaim: LRU page of order {}", page.order.0))
        })?;
        let split = self.m.phys.superpage_reclaim() == SuperpageReclaim::Split;
        let base = self.m.base();
        if self.m.partly_mapped(page.pfn) {
            // A folio partly unmapped since the deferred-split shrinker ran: split now,
            // its unmapped pages freed without I/O (shrink_folio_list).
            self.m.split_kept(page.pfn, size)?;
            return Ok(frames(size) / frames(base));
        }
        match owner {
            Owner::Anon { va } if split && size > base => {
                self.split_anon(page.pfn, va, size)?;
                Ok(frames(size) / frames(base))
            }
            Owner::Anon { va } => self.swap_out(page.pfn, va, size).map(|()| 0),
            Owner::File { file, start } if split && size > base => {
                self.split_folio(file, start)?;
                self.m.stats.reclaim_splits += 1;
                Ok(frames(size) / frames(base))
            }
            Owner::File { file, start } => self.drop_folio(file, start).map(|()| 0),
        }
    }

    /// Every mapping, in every process, of any part of the anonymous `size` folio at
    /// `va` on frames `pfn`, as `(pid, start, size)`. Every part, as try_to_unmap finds
    /// every PTE of a folio: after a fork, one process may have split and partly
    /// unmapped its copy (its head page gone) while another maps it whole.
    fn anon_mappers(
        &self,
        pfn: Pfn,
        va: VirtAddr,
        size: PageSize,
    ) -> Vec<(u32, VirtAddr, PageSize)> {
        let base = self.m.base();
        let folio = pfn.0..pfn.0 + frames(size);
        let mut out = Vec::new();
        for pid in self.m.pids() {
            let Some(p) = self.m.proc(pid) else { continue };
            for m in p.pt.mappings_in(va, size.bytes()) {
                let first = m.pfn.to_pfn(base).0;
                if first < folio.end && folio.start < first + frames(m.size) {
                    out.push((pid, m.start, m.size));
                }
            }
        }
        out
    }

    /// Splits every mapping holding `va` down to pages of `size` or smaller.
    fn split_mappings_to(&mut self, va: VirtAddr, pfn: Pfn, size: PageSize) -> Result<(), MmError> {
        loop {
            let big = self
                .anon_mappers(pfn, va, size)
                .into_iter()
                .find(|&(_, _, s)| s > size);
            let Some((pid, start, _)) = big else {
                return Ok(());
            };
            self.m.split_page(pid, start)?;
            if pid == self.pid {
                self.inval.push((start, start + size.bytes().max(1)));
            }
        }
    }

    /// Demotes an anonymous superpage to base pages in every process, its
    /// frames and LRU entry split, so that reclaim takes only what it needs.
    fn split_anon(&mut self, pfn: Pfn, va: VirtAddr, size: PageSize) -> Result<(), MmError> {
        let base = self.m.base();
        self.split_mappings_to(va, pfn, base)?;
        // Mappings may have been split already (COW); the LRU page still is one.
        self.m.res.split_anon(&mut self.m.phys, pfn, base);
        self.m.split_frames(pfn, size)?;
        self.m.stats.reclaim_splits += 1;
        self.inval.push((va, va + size.bytes()));
        Ok(())
    }

    /// Swaps out the anonymous `size` page at `va` on frames `pfn`.
    fn swap_out(&mut self, pfn: Pfn, va: VirtAddr, size: PageSize) -> Result<(), MmError> {
        self.split_mappings_to(va, pfn, size)?;
        let mut mappers: Vec<u32> = self
            .anon_mappers(pfn, va, size)
            .iter()
            .map(|m| m.0)
            .collect();
        mappers.dedup();
        if mappers.is_empty() {
            return Err(MmError::Policy(format!(
                "reclaim: anonymous page at {va:#x} (frame {:#x}) is on the LRU but mapped nowhere",
                pfn.0
            )));
        }
        let end = va + size.bytes();
        for pid in mappers {
            let removed = self.m.unmap_range(pid, va, end)?;
            self.policy.release(self.m, pid, &removed)?;
            self.swap.add(pid, va, end);
            if pid == self.pid {
                self.inval.push((va, end));
            }
        }
        // Off the LRU even if some frame is still shared in an odd way.
        self.m.res.forget(&mut self.m.phys, pfn, frames(size));
        self.m.res.take_dirty(pfn, frames(size));
        self.m.stats.swapped_out_bytes += size.bytes();
        self.m.stats.reclaimed_bytes += size.bytes();
        Ok(())
    }

    /// The mappings of folio `(file, start)` in every process, as `(pid, va, size)`.
    fn file_mappers(&self, file: u64, start: u64, folio: &Folio) -> Vec<(u32, VirtAddr, PageSize)> {
        let base_size = self.m.base();
        let base = base_size.bytes();
        let (fs, fe) = (start * base, start * base + folio.size.bytes());
        let (lo, hi) = (folio.pfn.0, folio.pfn.0 + frames(folio.size));
        let mut out = Vec::new();
        for pid in self.m.pids() {
            let p = self.m.proc(pid).expect("listed");
            for v in p.aspace.iter() {
                let Backing::File { file_id, offset } = v.backing else {
                    continue;
                };
                // Where the folio's bytes lie in this VMA, widened by a base page on
                // each side: a base page may start before the VMA (a 4K-granular
                // mapping under larger base pages), and its folio is then not the one
                // the file offsets alone name. The frames decide what is the folio's.
                let (vs, off, bb) = (i128::from(v.start.0), i128::from(offset), i128::from(base));
                let from = (vs + i128::from(fs) - off - bb).max(vs - bb).max(0);
                let to = (vs + i128::from(fe) - off + bb).min(i128::from(v.end.0) + bb);
                if file_id != file || from >= to {
                    continue;
                }
                for mp in p.pt.mappings_in(VirtAddr(from as u64), (to - from) as u64) {
                    let f = mp.pfn.to_pfn(base_size).0;
                    if f >= lo && f < hi {
                        out.push((pid, mp.start, mp.size));
                    }
                }
            }
        }
        out.sort_unstable_by_key(|&(pid, va, _)| (pid, va));
        out.dedup();
        out
    }

    /// Drops the page-cache folio `(file, start)`: unmapped everywhere,
    /// written back if dirty, its frames freed.
    fn drop_folio(&mut self, file: u64, start: u64) -> Result<(), MmError> {
        let folio = self.m.cache().get(file, start).cloned().ok_or_else(|| {
            MmError::Policy(format!(
                "reclaim: file {file} page {start} is on the LRU but not in the page cache"
            ))
        })?;
        for (pid, va, size) in self.file_mappers(file, start, &folio) {
            let end = va + size.bytes();
            let orphans = self.m.unmap_range(pid, va, end)?;
            if !orphans.is_empty() {
                return Err(MmError::Policy(format!(
                    "reclaim: unmapping file {file} at {va:#x} freed frames the page cache holds"
                )));
            }
            if pid == self.pid {
                self.inval.push((va, end));
            }
        }
        let n = frames(folio.size);
        if self.m.res.take_dirty(folio.pfn, n) {
            self.m.stats.written_back_bytes += folio.read_pages() * self.m.base().bytes();
        }
        self.m.cache_mut().remove(file, start);
        self.m.res.forget(&mut self.m.phys, folio.pfn, n);
        self.m.free_frames(folio.pfn, folio.size)?;
        self.m.stats.cache_dropped_bytes += folio.size.bytes();
        self.m.stats.reclaimed_bytes += folio.size.bytes();
        Ok(())
    }

    /// Splits the page-cache folio `(file, start)` into base folios: whole
    /// mappings of it demoted, its unread pages freed.
    fn split_folio(&mut self, file: u64, start: u64) -> Result<(), MmError> {
        let folio = self.m.cache().get(file, start).cloned().ok_or_else(|| {
            MmError::Policy(format!(
                "reclaim: file {file} page {start} is on the LRU but not in the page cache"
            ))
        })?;
        let base = self.m.base();
        for (pid, va, size) in self.file_mappers(file, start, &folio) {
            if size > base {
                self.m.split_page(pid, va)?;
                if pid == self.pid {
                    self.inval.push((va, va + size.bytes()));
                }
            }
        }
        self.m.split_frames(folio.pfn, folio.size)?;
        self.m.cache_mut().remove(file, start);
        let per = frames(base);
        self.m
            .res
            .split(&mut self.m.phys, folio.pfn, base, |i| Owner::File {
                file,
                start: start + i,
            });
        let pages = frames(folio.size) / per;
        for i in 0..pages {
            let pfn = Pfn(folio.pfn.0 + i * per);
            if folio.is_read(i) {
                let piece = Folio::new(pfn, base, 1, true);
                self.m.cache_mut().insert(file, start + i, piece);
            } else {
                self.m.res.forget(&mut self.m.phys, pfn, per);
                for f in pfn.0..pfn.0 + per {
                    self.m
                        .phys
                        .free_temp(Pfn(f), frames_order(PageSize::K4), PageTemp::Cold)?;
                }
            }
        }
        Ok(())
    }

    /// Frees the unread pages of the partly read page-cache folios in zone
    /// `z` (page-cache reservations, GISP), each split into base folios;
    /// whether there was any. Their read pages stay cached.
    fn preempt_partial_folios(&mut self, z: ZoneId) -> Result<bool, MmError> {
        let partial: Vec<(u64, u64)> = self
            .m
            .cache()
            .iter()
            .filter(|(_, f)| !f.fully_read() && self.m.phys.zone_of(f.pfn) == Some(z))
            .map(|(&key, _)| key)
            .collect();
        for &(file, start) in &partial {
            self.split_folio(file, start)?;
            self.m.stats.reclaim_preemptions += 1;
        }
        Ok(!partial.is_empty())
    }
}
