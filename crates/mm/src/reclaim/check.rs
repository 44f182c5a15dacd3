//! Reclaim's invariants against the machine, for `Mm::check`.

use super::{Owner, Swap};
use crate::machine::Machine;
use crate::pagetable::PageTable;
use crate::phys::{FrameAllocator, ZoneId};
use pagelab_core::VirtAddr;

/// Checks that the LRU lists and their owners agree with the machine: every
/// listed page has an owner and every owner a listed page; an anonymous page
/// is mapped at its address on its frames; a file page is a cached folio;
/// when reclaim is on, every mapped page (but the zero pages) and every
/// cached folio lies in a listed page; swapped ranges hold no mapping (a
/// swapped page holds no frames).
pub fn check(m: &Machine, swap: &Swap) -> Result<(), String> {
    let lru = m.phys.lru();
    let listed: u64 = (0..m.phys.zones().len())
        .map(|z| {
            let s = lru.zone_stats(ZoneId(z));
            s.active_pages + s.inactive_pages
        })
        .sum();
    let res = m.residency();
    if listed != res.len() as u64 {
        return Err(format!(
            "{listed} pages on the LRU lists but {} owners",
            res.len()
        ));
    }
    let base = m.base();
    for (pfn, owner) in res.iter() {
        if lru.list_of(pfn).is_none() {
            return Err(format!(
                "page at frame {:#x} has an owner but is on no list",
                pfn.0
            ));
        }
        match owner {
            // A folio kept whole may have its first page unmapped (machine/folios.rs).
            Owner::Anon { .. } if m.partly_mapped(pfn) => {}
            Owner::Anon { va } => {
                let mapped = m.pids().into_iter().any(|pid| {
                    m.proc(pid)
                        .and_then(|p| p.pt.walk(va))
                        .is_some_and(|t| t.frame_of(va, base) == pfn)
                });
                if !mapped {
                    return Err(format!(
                        "anonymous LRU page at frame {:#x} is not mapped at {va:#x}",
                        pfn.0
                    ));
                }
            }
            Owner::File { file, start } => {
                if m.cache().get(file, start).map(|f| f.pfn) != Some(pfn) {
                    return Err(format!(
                        "LRU page at frame {:#x} is not the cached folio of file {file} page {start}",
                        pfn.0
                    ));
                }
            }
        }
    }
    if res.enabled() {
        let max = m.phys.max_order();
        for pid in m.pids() {
            let p = m.proc(pid).expect("listed");
            for mp in p.pt.mappings_in(VirtAddr(0), m.va_end() - VirtAddr(0)) {
                let f = mp.pfn.to_pfn(base);
                // Zero pages belong to the machine, never to reclaim.
                if lru.page_holding(f, max).is_none() && !m.is_zero(f) {
                    return Err(format!(
                        "page at {} of pid {pid} (frame {f:#x}) is on no LRU list",
                        mp.start
                    ));
                }
            }
            for (s, e) in swap.ranges(pid) {
                if let Some(mp) = p.pt.mappings_in(s, e - s).first() {
                    return Err(format!(
                        "pid {pid}: {} is mapped but lies in swapped range {s:#x}..{e:#x}",
                        mp.start
                    ));
                }
            }
        }
        for (_, folio) in m.cache().iter() {
            if lru.list_of(folio.pfn).is_none() {
                return Err(format!(
                    "cached folio at frame {:#x} is on no LRU list",
                    folio.pfn.0
                ));
            }
        }
    }
    Ok(())
}
