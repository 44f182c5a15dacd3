//! The parts of the fault path every policy shares: copy-on-write and fork
//! (file-backed pages are in [`crate::filemap`]).
//!
//! - Fork gives the child the mappings of the parent's VMAs that hold
//!   anonymous pages (Linux leaves the rest to be faulted in again); private
//!   writable pages become read-only in both, with their frames shared.
//! - A write to a shared private page copies it: the whole superpage
//!   ([`CowMode::Whole`], Linux) or only the base page written, the writer's
//!   mapping split while the other keeps its superpage ([`CowMode::Base`],
//!   the COW link list of Qu et al. (GISP, ASAP 2007)). A page nobody else references is
//!   made writable in place.

use crate::machine::{Machine, MmError};
use crate::pagetable::{Mapping, PageTable, PteFlags, Translation};
use crate::vma::Vma;
use pagelab_core::{Backing, PageSize, Pfn, Prot, Sharing, VirtAddr};

/// How a write to a shared private superpage is resolved.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum CowMode {
    /// Copy the whole page, whatever its size (Linux).
    #[default]
    Whole,
    /// Split the writer's mapping and copy only the base page written (GISP).
    Base,
}

impl std::str::FromStr for CowMode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "whole" => Ok(CowMode::Whole),
            "base" => Ok(CowMode::Base),
            _ => Err(format!("`{s}` is not a copy-on-write mode: use whole (copy the whole superpage) or base (copy the base page written)")),
        }
    }
}

fn head_pfn(m: &Machine, t: &Translation) -> Pfn {
    t.pfn.to_pfn(m.base())
}

/// Resolves a write to the present read-only page `t` of a private writable
/// VMA. Returns the pages (frames in 4K units) that lost their last reference,
/// for the policy to free.
pub fn cow_fault(
    m: &mut Machine,
    pid: u32,
    vma: &Vma,
    t: &Translation,
    addr: VirtAddr,
    mode: CowMode,
) -> Result<Vec<crate::pagetable::PhysMapping>, MmError> {
    let flags = PteFlags::from_prot(vma.prot);
    let base = m.base();
    if mode == CowMode::Whole && m.keeps_folios() && t.size > base && pte_mapped(t.size, base) {
        // Linux maps a large folio below the PMD size with one PTE per base page, and a
        // write-protect fault on one of them is resolved for that PTE alone: `do_wp_page`
        // copies the base page into an order-0 folio (`wp_page_copy`) while another
        // process maps the folio, and otherwise makes only the faulting PTE writable
        // (`__wp_can_reuse_large_anon_folio`, Linux 6.15 on, then `wp_page_reuse`), so
        // each further base page written takes a fault of its own. The folio stays whole
        // (`Machine::set_keep_folios`). Found on `bash -c` after its fork: the parent's
        // 16K..64K folios written after the child's exec.
        return split_and_retry(m, pid, vma, t, addr, mode);
    }
    let head = head_pfn(m, t);
    if m.exclusive(head, t.size) {
        // Nobody else holds it: write in place (wp_page_reuse). Still a fault: the
        // kernel counts every write-protect fault it resolves, reuse or copy
        // (`do_user_addr_fault`'s perf event and `mm_account_fault`'s `min_flt`).
        m.proc_mut(pid).pt.protect(t.start, t.size.bytes(), flags)?;
        m.count_fault(t.size);
        return Ok(Vec::new());
    }
    if mode == CowMode::Base && t.size > base {
        return split_and_retry(m, pid, vma, t, addr, mode);
    }
    let size = t.size;
    let Some(pfn) = m.alloc_frames(size) else {
        if size > base {
            // No block for a whole copy: split and copy the base page.
            return split_and_retry(m, pid, vma, t, addr, mode);
        }
        return Err(MmError::OutOfMemory { addr, size });
    };
    let old = m.proc_mut(pid).pt.unmap(t.start, size)?.to_phys(base);
    debug_assert_eq!(old.pfn, head);
    m.stats.rss_bytes -= size.bytes();
    let freed = m.unshare(old)?;
    m.map(pid, t.start, pfn, size, flags, false)?;
    m.stats.copied_bytes += size.bytes();
    m.count_fault(size);
    Ok(freed)
}

/// Splits the page `t` one step down and resolves the write on the piece that holds `addr`.
fn split_and_retry(
    m: &mut Machine,
    pid: u32,
    vma: &Vma,
    t: &Translation,
    addr: VirtAddr,
    mode: CowMode,
) -> Result<Vec<crate::pagetable::PhysMapping>, MmError> {
    m.split_page(pid, t.start)?;
    let piece = m
        .proc_mut(pid)
        .pt
        .walk(addr)
        .ok_or(MmError::Policy("split lost a page".into()))?;
    cow_fault(m, pid, vma, &piece, addr, mode)
}

/// Whether Linux maps a `size` page with PTEs: below what one PMD entry maps (2M with 4K
/// base pages, a page table's 512 entries).
fn pte_mapped(size: PageSize, base: PageSize) -> bool {
    size.bytes() < base.bytes() << 9
}

/// Fork: the child `child` gets a copy of `parent`'s VMAs, and of the
/// mappings of each VMA Linux copies ([`copies_at_fork`]); private writable
/// pages turn read-only in both and their frames are shared.
pub fn fork(m: &mut Machine, parent: u32, child: u32) -> Result<(), MmError> {
    let va_end = m.va_end();
    let p = m.proc_mut(parent);
    let aspace = p.aspace.clone();
    let mappings = p.pt.mappings_in(VirtAddr(0), va_end - VirtAddr(0));
    let copied: rustc_hash::FxHashSet<VirtAddr> = aspace
        .iter()
        .filter(|v| copies_at_fork(m, v, &mappings))
        .map(|v| v.start)
        .collect();
    let mut pt = m.new_page_table();
    let base = m.base();
    for mp in mappings {
        let vma = aspace.find(mp.start);
        if vma.is_some_and(|v| !copied.contains(&v.start)) {
            continue;
        }
        let private = vma.is_some_and(|v| v.sharing == Sharing::Private);
        let mut flags = mp.flags;
        if private && flags.contains(PteFlags::WRITE) {
            flags = PteFlags(flags.0 & !PteFlags::WRITE.0);
            m.proc_mut(parent)
                .pt
                .protect(mp.start, mp.size.bytes(), flags)?;
        }
        pt.map(mp.start, mp.pfn, mp.size, flags)?;
        m.share(mp.pfn.to_pfn(base), mp.size);
        m.stats.rss_bytes += mp.size.bytes();
    }
    m.stats.peak_rss_bytes = m.stats.peak_rss_bytes.max(m.stats.rss_bytes);
    m.insert_proc(child, crate::machine::Proc { aspace, pt });
    Ok(())
}

/// Whether fork copies the page-table entries of `vma` (whose mappings are
/// among `maps`) to the child. Linux copies them only for a VMA with an
/// `anon_vma` (`vma_needs_copy` in mm/memory.c): one that holds anonymous
/// pages. The rest (a program's text and read-only data, a shared file
/// mapping) the child faults in again from the page cache, with
/// fault-around, as the kernel's "fork becomes much lighter". The model
/// takes "holds an anonymous page now" for having an `anon_vma`: a page of
/// an anonymous VMA other than the zero page, or a page of a file VMA that
/// is not the page cache's (a private copy).
fn copies_at_fork(m: &Machine, vma: &Vma, maps: &[Mapping]) -> bool {
    let base = m.base();
    let lo = maps.partition_point(|mp| mp.start < vma.start);
    let hi = maps.partition_point(|mp| mp.start < vma.end);
    maps[lo..hi].iter().any(|mp| {
        let pfn = mp.pfn.to_pfn(base);
        match vma.backing {
            Backing::Anon => !m.is_zero(pfn),
            Backing::File { file_id, offset } => {
                let index = (offset + (mp.start - vma.start)) / base.bytes();
                m.cache().find(file_id, index).is_none_or(|(start, f)| {
                    f.pfn + (index - start) * Pfn::count_in(base.bytes()) != pfn
                })
            }
        }
    })
}

/// Whether a write to `t` in `vma` is a copy-on-write fault.
pub fn is_cow(vma: &Vma, t: &Translation) -> bool {
    vma.sharing == Sharing::Private
        && vma.prot.0 & Prot::WRITE != 0
        && !t.flags.contains(PteFlags::WRITE)
}

/// Checks the frame accounting: every 4K frame in use is mapped somewhere, in
/// the page cache, or held by the policy (`held` frames), and its reference
/// count matches the mappers plus the cache.
pub fn check_frames(m: &Machine, held: u64) -> Result<(), String> {
    use crate::phys::FrameAllocator;
    use std::collections::HashMap;
    let mut refs: HashMap<u64, u32> = HashMap::new();
    let base = m.base();
    let mut mapped_bytes = 0;
    for pid in m.pids() {
        let p = m.proc(pid).expect("listed");
        for mp in p.pt.mappings_in(VirtAddr(0), m.va_end() - VirtAddr(0)) {
            mapped_bytes += mp.size.bytes();
            let head = mp.pfn.to_pfn(base).0;
            for f in head..head + mp.size.frames() {
                *refs.entry(f).or_insert(0) += 1;
            }
        }
    }
    for (_, folio) in m.cache().iter() {
        for f in folio.pfn.0..folio.pfn.0 + folio.size.frames() {
            *refs.entry(f).or_insert(0) += 1;
        }
    }
    // The machine's own reference to its zero pages.
    for (z, size) in m.zero_pages() {
        for f in z.0..z.0 + size.frames() {
            *refs.entry(f).or_insert(0) += 1;
        }
    }
    for (&f, &n) in &refs {
        if m.refs(Pfn(f)) != n {
            return Err(format!(
                "frame {f:#x} has {n} references but is counted {}",
                m.refs(Pfn(f))
            ));
        }
    }
    // Frames of partly unmapped folios kept whole: allocated, mapped nowhere.
    let holes = m.kept_hole_frames();
    for (head, f) in m.kept_folios() {
        if let Some(&h) = f.holes.iter().find(|h| refs.contains_key(h)) {
            return Err(format!(
                "frame {h:#x} of the folio at {:#x} is mapped but counted unmapped",
                head.0
            ));
        }
    }
    let used = m.phys.total_frames() - m.phys.free_frames();
    if used != refs.len() as u64 + held + holes {
        return Err(format!(
            "{used} frames in use, {} referenced, {held} held by the policy, {holes} unmapped in folios kept whole",
            refs.len()
        ));
    }
    if mapped_bytes != m.stats.rss_bytes {
        return Err(format!(
            "mapped {mapped_bytes} B but rss is {} B",
            m.stats.rss_bytes
        ));
    }
    Ok(())
}
