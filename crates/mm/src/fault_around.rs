//! What Linux does around a file-backed fault besides mapping the page: fault-around
//! (`do_fault_around`, which maps the page cache's pages near a read fault without further
//! faults), read-around (`do_sync_mmap_readahead`, which reads the pages around a page-cache
//! miss), and a page cache that holds the files before the run (warm).
//!
//! All are off by default ([`FileFaults::default`]): each file fault then maps its own page
//! only, reading it at its first touch, as the model always did.

use crate::cache::Folio;
use crate::machine::{Machine, MmError};
use crate::pagetable::{PageTable, PteFlags};
use crate::reclaim::Owner;
use crate::vma::Vma;
use pagelab_core::{Backing, Pfn, VirtAddr};

/// How file-backed faults fill the page cache and map pages beyond the faulting one.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FileFaults {
    /// Linux's `fault_around_bytes`: a read fault on a file page also maps every page of the
    /// naturally aligned window of this many bytes around it that the page cache holds and
    /// nothing maps yet, within the VMA and the faulting page's page table. At most the base
    /// page (or 0): no fault-around.
    pub fault_around_bytes: u64,
    /// Every file page is in the page cache before the run: no fault reads, none is major.
    pub warm: bool,
    /// With a cold cache, a miss also reads the uncached pages of the window of this many
    /// pages centred on it (readahead's read-around of `ra_pages`); 0: the page alone.
    pub readaround_pages: u64,
}

impl FileFaults {
    /// Linux's: fault-around of `fault_around_bytes`, read-around of `readaround_pages` (the
    /// file's device's `read_ahead_kb` in pages; 32 by default), the page cache warm or cold.
    pub fn linux(fault_around_bytes: u64, readaround_pages: u64, warm: bool) -> FileFaults {
        FileFaults {
            fault_around_bytes,
            warm,
            readaround_pages,
        }
    }
}

/// The frames of page `index` of `file` when the page cache holds it read; with `fill`, a
/// page not cached is put there first (a warm cache, or a read-around). `None` when it is
/// not cached (or not yet read) and not filled, or memory is out.
fn cached_page(m: &mut Machine, file: u64, index: u64, fill: bool) -> Option<Pfn> {
    let base = m.base();
    if let Some((start, f)) = m.cache().find(file, index) {
        let i = index - start;
        return f
            .is_read(i)
            .then(|| f.pfn + i * Pfn::count_in(base.bytes()));
    }
    if !fill {
        return None;
    }
    let pfn = m.alloc_cache_frames(base)?;
    m.cache_mut()
        .insert(file, index, Folio::new(pfn, base, 1, true));
    m.res
        .add(&mut m.phys, pfn, base, Owner::File { file, start: index });
    Some(pfn)
}

/// After a page-cache miss at `index` of `file` with a cold cache: reads the pages of the
/// read-around window that are not cached, counting the bytes read (not faults).
pub(crate) fn read_around(m: &mut Machine, file: u64, index: u64) {
    let n = m.file_faults.readaround_pages;
    if n == 0 || m.file_faults.warm {
        return;
    }
    let start = index.saturating_sub(n / 2);
    for i in start..start + n {
        if i == index || m.cache().find(file, i).is_some() {
            continue;
        }
        if cached_page(m, file, i, true).is_none() {
            return;
        }
        m.stats.file_read_bytes += m.base().bytes();
    }
}

/// After a read fault mapped the base page at `va` of the file mapping `vma` in `pid`: maps,
/// with `flags`, every other page of the fault-around window that the cache holds (all, when
/// warm) and `pid` does not map. No fault is counted for them.
pub(crate) fn fault_around(
    m: &mut Machine,
    pid: u32,
    vma: &Vma,
    va: VirtAddr,
    flags: PteFlags,
) -> Result<(), MmError> {
    let window = m.file_faults.fault_around_bytes;
    let bb = m.base().bytes();
    let Backing::File { file_id, offset } = vma.backing else {
        return Ok(());
    };
    if window <= bb || !window.is_power_of_two() {
        return Ok(());
    }
    let table = 1u64 << m.geometry().table_shift(1);
    let (w, t) = (va.0 & !(window - 1), va.0 & !(table - 1));
    let lo = w.max(t).max(vma.start.0);
    let hi = (w + window).min(t + table).min(vma.end.0);
    let warm = m.file_faults.warm;
    for p in (lo..hi).step_by(bb as usize).map(VirtAddr) {
        let mapped = m.proc(pid).is_some_and(|pr| pr.pt.walk(p).is_some());
        if p == va || mapped {
            continue;
        }
        let index = (offset + (p - vma.start)) / bb;
        if let Some(pfn) = cached_page(m, file_id, index, warm) {
            m.map_file(pid, p, pfn, m.base(), flags)?;
        }
    }
    Ok(())
}
