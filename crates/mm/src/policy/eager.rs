//! `eager`: at the first touch of an address, allocate and zero the largest
//! page that fits (Shimizu's transparent superpages for Linux, the design the
//! Qu et al. (GISP, ASAP 2007) calls LISP; Solaris, IRIX and HP-UX work this way).
//!
//! At a fault in a private anonymous VMA the sizes are tried largest first; a
//! size fits when its naturally aligned block holding the fault address lies
//! inside the VMA and no page is mapped in it. The first size that fits and
//! whose allocation succeeds is mapped, zeroed whole; an allocation that fails
//! counts `fallback` for that size and the next smaller size that fits is
//! tried, down to one base page. Shared and file-backed mappings get base
//! pages (Shimizu's patch supports private anonymous mappings only).
//!
//! The sizes are every size the page-table geometry maps up to 2M (on x86-64
//! with 4K base pages: 4K, 8K, 16K, ..., 1M as contiguous runs, and 2M), or
//! those given as `eager:sizes=4K,64K,2M` (any size the geometry maps, 1G
//! included; the base size is always added, as the last resort).

use super::Policy;
use crate::machine::{Machine, MmError, PerSize};
use crate::pagetable::{Geometry, PageTable, PteFlags};
use crate::vma::Vma;
use pagelab_core::{Backing, PageSize, Sharing, VirtAddr};
use std::fmt;

/// The largest size `eager` uses by default.
pub const EAGER_DEFAULT_MAX: PageSize = PageSize::M2;

/// The sizes `eager` may use.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct EagerSettings {
    /// The sizes given with `sizes=`, smallest first, base included; `None`
    /// for the default (every size the geometry maps up to 2M).
    pub sizes: Option<Vec<PageSize>>,
}

impl EagerSettings {
    /// The sizes used with `geometry`, largest first, the base size last.
    pub fn sizes_for(&self, geometry: &Geometry) -> Vec<PageSize> {
        let mut v: Vec<PageSize> = match &self.sizes {
            Some(s) => s.clone(),
            None => geometry
                .sizes()
                .into_iter()
                .filter(|&s| s <= EAGER_DEFAULT_MAX)
                .collect(),
        };
        v.push(geometry.base());
        v.sort_unstable();
        v.dedup();
        v.reverse();
        v
    }
}

impl std::str::FromStr for EagerSettings {
    type Err = String;
    /// `` (the default) or `sizes=4K,64K,2M`: sizes the x86-64 4K page table maps.
    fn from_str(s: &str) -> Result<Self, String> {
        let s = s.trim();
        if s.is_empty() {
            return Ok(EagerSettings::default());
        }
        let list = s.strip_prefix("sizes=").ok_or_else(|| {
            format!("`{s}`: eager takes one parameter, sizes=LIST (like sizes=4K,64K,2M)")
        })?;
        let geometry = Geometry::for_base(PageSize::K4);
        let allowed = geometry.sizes();
        let mut sizes = Vec::new();
        for part in list.split(',').map(str::trim) {
            let size: PageSize = part.parse().map_err(|e| format!("sizes: {e}"))?;
            if !allowed.contains(&size) {
                let names: Vec<String> = allowed.iter().map(|s| s.to_string()).collect();
                return Err(format!(
                    "sizes: the 4K page table cannot map {size} pages; it maps {}",
                    names.join(", ")
                ));
            }
            sizes.push(size);
        }
        sizes.push(geometry.base());
        sizes.sort_unstable();
        sizes.dedup();
        Ok(EagerSettings { sizes: Some(sizes) })
    }
}

impl fmt::Display for EagerSettings {
    /// Empty for the default, else `sizes=4K,64K,2M`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.sizes {
            None => Ok(()),
            Some(s) => {
                let names: Vec<String> = s.iter().map(|s| s.to_string()).collect();
                write!(f, "sizes={}", names.join(","))
            }
        }
    }
}

/// The policy, with allocations and fallbacks per size.
#[derive(Clone, Debug)]
pub struct EagerPolicy {
    settings: EagerSettings,
    /// Largest first; filled at the first fault, from the machine's geometry.
    sizes: Vec<PageSize>,
    alloc: PerSize,
    fallback: PerSize,
    base_only_faults: u64,
}

impl EagerPolicy {
    /// The policy with these settings.
    pub fn new(settings: EagerSettings) -> Self {
        EagerPolicy {
            settings,
            sizes: Vec::new(),
            alloc: PerSize::default(),
            fallback: PerSize::default(),
            base_only_faults: 0,
        }
    }

    /// Pages allocated at faults, per size.
    pub fn alloc(&self) -> &PerSize {
        &self.alloc
    }

    /// Allocations that failed, per size (the fault then tried a smaller size).
    pub fn fallback(&self) -> &PerSize {
        &self.fallback
    }
}

impl Policy for EagerPolicy {
    fn fault(
        &mut self,
        m: &mut Machine,
        pid: u32,
        vma: &Vma,
        addr: VirtAddr,
        _write: bool,
    ) -> Result<(), MmError> {
        if self.sizes.is_empty() {
            self.sizes = self.settings.sizes_for(m.geometry());
        }
        let eligible = vma.backing == Backing::Anon && vma.sharing == Sharing::Private;
        let sizes: &[PageSize] = if eligible {
            &self.sizes
        } else {
            self.base_only_faults += 1;
            &self.sizes[self.sizes.len() - 1..]
        };
        map_largest(
            m,
            pid,
            vma,
            addr,
            sizes,
            &mut self.alloc,
            &mut self.fallback,
        )
        .map(|_| ())
    }

    fn counters(&self) -> serde_json::Value {
        let names: Vec<String> = self.sizes.iter().rev().map(|s| s.to_string()).collect();
        serde_json::json!({
            "sizes": names.join(","),
            "alloc": serde_json::to_value(&self.alloc).unwrap_or_default(),
            "fallback": serde_json::to_value(&self.fallback).unwrap_or_default(),
            "base_only_faults": self.base_only_faults,
        })
    }
}

/// Whether the naturally aligned `size` block holding `addr` lies in `vma`
/// with no page of `pid` mapped in it.
pub(super) fn fits(m: &mut Machine, pid: u32, vma: &Vma, addr: VirtAddr, size: PageSize) -> bool {
    vma.holds_aligned(addr, size)
        && m.proc_mut(pid)
            .pt
            .is_unmapped(addr.align_down(size), size.bytes())
}

/// Maps, zeroed, the first of `sizes` (largest first, ending with the base
/// size) that [`fits`] and can be allocated, counting each allocation and each
/// failed one per size. Returns the size mapped; out of memory when not even
/// the last size could be allocated.
pub(super) fn map_largest(
    m: &mut Machine,
    pid: u32,
    vma: &Vma,
    addr: VirtAddr,
    sizes: &[PageSize],
    alloc: &mut PerSize,
    fallback: &mut PerSize,
) -> Result<PageSize, MmError> {
    let flags = PteFlags::from_prot(vma.prot);
    let mut last = m.base();
    for &size in sizes {
        if !fits(m, pid, vma, addr, size) {
            continue;
        }
        last = size;
        match m.alloc_frames(size) {
            Some(pfn) => {
                m.map(pid, addr.align_down(size), pfn, size, flags, true)?;
                m.count_fault(size);
                alloc.add(size, 1);
                return Ok(size);
            }
            None => fallback.add(size, 1),
        }
    }
    Err(MmError::OutOfMemory { addr, size: last })
}
