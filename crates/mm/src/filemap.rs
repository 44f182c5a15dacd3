//! File-backed faults through the page cache, with large folios.
//!
//! A file page is read once into the page cache and mapped by every process
//! that maps the file; a write to a private writable mapping gets a private
//! anonymous copy of the base page (`copied_bytes`).
//!
//! The policy says which folio sizes above the base page it wants for a VMA
//! ([`FilePages`]). At a page-cache miss the largest of them is read whose
//! naturally aligned extent could be mapped whole here: the extent is aligned
//! in file space (it starts at a multiple of its size in the file), the
//! VMA holds the aligned virtual range, and the virtual address and the file
//! offset agree modulo the size; no page of the extent may be cached
//! already. Its frames are one naturally aligned block (aligned in physical
//! space). With none of those, or when no block can be allocated, the base
//! page is read alone. A large folio is read whole at once (`read_whole`,
//! Linux's readahead into large folios) or page by page into its block
//! (GISP's page-cache reservation).
//!
//! A fault maps the whole folio as one page when it is fully read and the
//! rules above hold, replacing this process's base pages of it in the range
//! (a promotion, reported for TLB invalidation); else it maps the base page.
//! A misaligned file offset therefore always gets base pages.

use crate::cache::Folio;
use crate::machine::{Machine, MmError};
use crate::pagetable::{PageTable, PteFlags};
use crate::policy::FilePages;
use crate::reclaim::Owner;
use crate::vma::Vma;
use pagelab_core::{Backing, PageSize, Pfn, Prot, Sharing, VirtAddr};

/// Whether a `size` page of the file at `file_off` can be mapped whole at
/// `va` in `vma`: the aligned range lies inside the VMA and the virtual
/// address and file offset are congruent modulo the size.
pub fn mappable_whole(vma: &Vma, va: VirtAddr, file_off: u64, size: PageSize) -> bool {
    vma.holds_aligned(va, size) && va.page_offset(size) == file_off & (size.bytes() - 1)
}

/// Maps the page of a file mapping holding `addr`, reading it into the page
/// cache first if needed. Returns the range whose translations changed
/// beyond the new page (base pages replaced by the whole folio), if any.
pub fn file_fault(
    m: &mut Machine,
    pid: u32,
    vma: &Vma,
    addr: VirtAddr,
    write: bool,
    fp: &FilePages,
) -> Result<Option<(VirtAddr, VirtAddr)>, MmError> {
    let Backing::File { file_id, offset } = vma.backing else {
        return Err(MmError::Policy("file_fault on an anonymous VMA".into()));
    };
    let base = m.base();
    let bb = base.bytes();
    let va = addr.align_down(base);
    // File offset of the page's first byte (a page may start before the VMA with large base pages).
    let file_off =
        (offset + (va.max(vma.start) - vma.start)).saturating_sub(vma.start - vma.start.min(va));
    let index = file_off / bb;
    let (start, fpfn, fsize, read_in) = match m.cache().find(file_id, index) {
        Some((s, f)) => (s, f.pfn, f.size, false),
        None => {
            let (s, pfn, size) = read_folio(m, vma, file_id, index, va, file_off, fp, addr)?;
            (s, pfn, size, true)
        }
    };
    let pages = m.cache().pages(fsize);
    let i = index - start;
    let folio = m
        .cache_mut()
        .get_mut(file_id, start)
        .ok_or_else(|| MmError::Policy(format!("page cache lost file {file_id} page {start}")))?;
    let newly = !folio.is_read(i);
    let complete = folio.set_read(i, pages);
    if read_in {
        crate::fault_around::read_around(m, file_id, index);
    }
    if (read_in || newly) && !m.file_faults.warm {
        m.stats.major_faults += 1;
        m.stats.file_read_bytes += if read_in && !newly { fsize.bytes() } else { bb };
    }
    let flags = PteFlags::from_prot(vma.prot);
    if write && vma.sharing == Sharing::Private && vma.prot.0 & Prot::WRITE != 0 {
        // do_cow_fault: a private copy of the file page, never cached.
        let pfn = m
            .alloc_frames(base)
            .ok_or(MmError::OutOfMemory { addr, size: base })?;
        m.map(pid, va, pfn, base, flags, false)?;
        m.stats.copied_bytes += bb;
        m.count_fault(base);
        return Ok(None);
    }
    let flags = if vma.sharing == Sharing::Private {
        PteFlags(flags.0 & !PteFlags::WRITE.0)
    } else {
        flags
    };
    if fsize > base && complete && mappable_whole(vma, va, file_off, fsize) {
        let vs = va.align_down(fsize);
        if let Some(pieces) = own_pieces(m, pid, vs, fsize, fpfn, flags) {
            if pieces {
                let freed = m.unmap_range(pid, vs, vs + fsize.bytes())?;
                if !freed.is_empty() {
                    return Err(MmError::Policy(format!(
                        "promoting file {file_id} at {vs:#x} freed frames the page cache holds"
                    )));
                }
                m.stats.promotions += 1;
            }
            m.map_file(pid, vs, fpfn, fsize, flags)?;
            m.count_fault(fsize);
            m.stats.file_superpage_faults += 1;
            return Ok(pieces.then_some((vs, vs + fsize.bytes())));
        }
    }
    m.map_file(pid, va, fpfn + i * Pfn::count_in(bb), base, flags)?;
    m.count_fault(base);
    if !write {
        crate::fault_around::fault_around(m, pid, vma, va, flags)?;
    }
    Ok(None)
}

/// Whether `[vs, vs + size)` of `pid` holds nothing but base pages of the
/// folio on frames `fpfn` at their own place with `flags`: `Some(true)` when
/// it holds some, `Some(false)` when empty, `None` when anything else is
/// mapped there (a private copy, another file).
fn own_pieces(
    m: &Machine,
    pid: u32,
    vs: VirtAddr,
    size: PageSize,
    fpfn: Pfn,
    flags: PteFlags,
) -> Option<bool> {
    let base = m.base();
    let maps = m.proc(pid)?.pt.mappings_in(vs, size.bytes());
    let ok = maps.iter().all(|mp| {
        mp.start >= vs
            && mp.flags == flags
            && mp.pfn.to_pfn(base) == fpfn + Pfn::count_in(mp.start - vs)
    });
    ok.then_some(!maps.is_empty())
}

/// Reads the folio for page `index` of `file` into the cache: the largest
/// size of `fp` the alignment rules allow and memory gives, else the base
/// page. Returns its first page index, frames and size.
#[allow(clippy::too_many_arguments)]
fn read_folio(
    m: &mut Machine,
    vma: &Vma,
    file: u64,
    index: u64,
    va: VirtAddr,
    file_off: u64,
    fp: &FilePages,
    addr: VirtAddr,
) -> Result<(u64, Pfn, PageSize), MmError> {
    let base = m.base();
    for &s in fp.sizes.iter().filter(|&&s| s > base) {
        let n = m.cache().pages(s);
        let start = index & !(n - 1);
        if !mappable_whole(vma, va, file_off, s) || !m.cache().range_empty(file, start, n) {
            continue;
        }
        match m.alloc_cache_frames(s) {
            Some(pfn) => {
                // The page this fault needs is marked read by the caller.
                let folio = Folio::new(pfn, s, n, fp.read_whole);
                m.cache_mut().insert(file, start, folio);
                m.res.add(&mut m.phys, pfn, s, Owner::File { file, start });
                return Ok((start, pfn, s));
            }
            None => m.stats.file_folio_fallbacks += 1,
        }
    }
    let pfn = m
        .alloc_cache_frames(base)
        .ok_or(MmError::OutOfMemory { addr, size: base })?;
    m.cache_mut()
        .insert(file, index, Folio::new(pfn, base, 1, false));
    m.res
        .add(&mut m.phys, pfn, base, Owner::File { file, start: index });
    Ok((index, pfn, base))
}
