//! `linux-thp`: today's Linux anonymous transparent huge pages with multi-size
//! THP (mm/memory.c `alloc_anon_folio`, mm/huge_memory.c), settings in the
//! kernel's own sysfs words.
//!
//! At a fault in an anonymous VMA: the sizes allowed are those whose setting
//! is `always`, or `madvise` in a VMA given MADV_HUGEPAGE, or `inherit` with
//! the top-level setting saying so; none in a VMA given MADV_NOHUGEPAGE. A
//! size is suitable when its naturally aligned range lies inside the VMA.
//! 2M (the PMD size) is tried first when its whole range is unmapped; then
//! the highest smaller size whose range has no page mapped; an allocation
//! that fails counts `anon_fault_fallback` for that size and the next lower
//! suitable size is tried, down to one 4K page. A read fault maps the zero
//! page instead and allocates nothing: the huge zero page where a 2M page
//! could go and `use_zero_page` is on, else the 4K one; a write to it then
//! gets a 2M page (as a write fault in the emptied range) or one 4K page.
//! (Not in VMAs inferred for a trace without map events.)
//!
//! File mappings: in a VMA given MADV_HUGEPAGE where 2M is not `never`, the
//! page cache reads PMD-sized folios whole (Linux's PMD-order readahead,
//! which only a VM_HUGEPAGE VMA gets) and the fault maps them with one 2M
//! entry where virtual, physical and file offsets are aligned alike (as
//! `do_set_pmd` does for a PMD-sized page-cache folio); otherwise 4K pages.
//! Not modelled: khugepaged's later collapses.

use super::{FilePages, Policy};
use crate::machine::{Machine, MmError, PerSize};
use crate::pagetable::{PageTable, PteFlags};
use crate::vma::{ThpAdvice, Vma};
use pagelab_core::{Backing, PageSize, VirtAddr};
use serde::Serialize;
use std::collections::BTreeMap;
use std::fmt;

/// The anonymous sizes x86-64 Linux offers beside 4K: 16K to 1M (mTHP) and 2M (PMD).
pub fn thp_sizes() -> Vec<PageSize> {
    (14..=21)
        .map(|s| PageSize::from_shift(s).expect("16K..2M"))
        .collect()
}

/// One sysfs setting (`enabled` files).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ThpSetting {
    /// `always`.
    Always,
    /// `madvise`: only in VMAs given MADV_HUGEPAGE.
    Madvise,
    /// `never`.
    Never,
    /// `inherit`: follow the top-level setting (per-size files only).
    Inherit,
}

impl std::str::FromStr for ThpSetting {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "always" => Ok(ThpSetting::Always),
            "madvise" => Ok(ThpSetting::Madvise),
            "never" => Ok(ThpSetting::Never),
            "inherit" => Ok(ThpSetting::Inherit),
            _ => Err(format!(
                "`{s}` is not a THP setting: use always, madvise, never or inherit"
            )),
        }
    }
}

impl fmt::Display for ThpSetting {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ThpSetting::Always => "always",
            ThpSetting::Madvise => "madvise",
            ThpSetting::Never => "never",
            ThpSetting::Inherit => "inherit",
        })
    }
}

/// The top-level `enabled`, every `hugepages-<size>kB/enabled`, and `use_zero_page`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ThpSettings {
    /// `/sys/kernel/mm/transparent_hugepage/enabled` (never `inherit`).
    pub enabled: ThpSetting,
    /// Per-size settings, 16K..2M.
    pub per_size: BTreeMap<PageSize, ThpSetting>,
    /// `/sys/kernel/mm/transparent_hugepage/use_zero_page`: a read fault where a
    /// PMD page could go maps the huge zero page (default on).
    pub use_zero_page: bool,
}

impl Default for ThpSettings {
    /// A fresh kernel's defaults: top-level `madvise`, 2M `inherit`, the mTHP sizes `never`.
    fn default() -> Self {
        let per_size = thp_sizes()
            .into_iter()
            .map(|s| {
                (
                    s,
                    if s == PageSize::M2 {
                        ThpSetting::Inherit
                    } else {
                        ThpSetting::Never
                    },
                )
            })
            .collect();
        ThpSettings {
            enabled: ThpSetting::Madvise,
            per_size,
            use_zero_page: true,
        }
    }
}

impl std::str::FromStr for ThpSettings {
    type Err = String;
    /// `enabled=always,64K=always,2M=never,use_zero_page=0` (any subset; the rest keep the defaults).
    fn from_str(s: &str) -> Result<Self, String> {
        let mut t = ThpSettings::default();
        for kv in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (k, v) = kv.split_once('=').ok_or_else(|| {
                format!("`{kv}` is not key=value (like enabled=always or 64K=inherit)")
            })?;
            if k == "use_zero_page" {
                t.use_zero_page = match v {
                    "1" => true,
                    "0" => false,
                    _ => return Err(format!("use_zero_page={v}: use 1 or 0, as the sysfs file")),
                };
                continue;
            }
            let setting: ThpSetting = v.parse()?;
            if k == "enabled" {
                if setting == ThpSetting::Inherit {
                    return Err("the top-level `enabled` is always, madvise or never (inherit is for sizes)".into());
                }
                t.enabled = setting;
                continue;
            }
            let size: PageSize = k.parse().map_err(|e| format!("`{k}`: {e}"))?;
            if !t.per_size.contains_key(&size) {
                return Err(format!("`{k}`: anonymous THP sizes on x86-64 are 16K, 32K, 64K, 128K, 256K, 512K, 1M and 2M"));
            }
            t.per_size.insert(size, setting);
        }
        Ok(t)
    }
}

impl fmt::Display for ThpSettings {
    /// Only what differs from a fresh kernel's defaults, so `linux-thp:64K=always`
    /// prints back as given; [`ThpSettings::full`] spells out every setting.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let d = ThpSettings::default();
        let mut parts = Vec::new();
        if self.enabled != d.enabled {
            parts.push(format!("enabled={}", self.enabled));
        }
        for (s, v) in &self.per_size {
            if d.per_size.get(s) != Some(v) {
                parts.push(format!("{s}={v}"));
            }
        }
        if !self.use_zero_page {
            parts.push("use_zero_page=0".into());
        }
        f.write_str(&parts.join(","))
    }
}

impl ThpSettings {
    /// Every setting, top-level first: `enabled=madvise,16K=never,...,2M=inherit`.
    pub fn full(&self) -> String {
        let mut out = format!("enabled={}", self.enabled);
        for (s, v) in &self.per_size {
            out.push_str(&format!(",{s}={v}"));
        }
        out.push_str(&format!(",use_zero_page={}", u8::from(self.use_zero_page)));
        out
    }
}

impl ThpSettings {
    /// Whether `size` may be used in `vma`.
    pub fn allows(&self, size: PageSize, vma: &Vma) -> bool {
        if vma.thp == ThpAdvice::NoHuge {
            return false;
        }
        let setting = match self.per_size.get(&size) {
            Some(ThpSetting::Inherit) => self.enabled,
            Some(s) => *s,
            None => ThpSetting::Never,
        };
        match setting {
            ThpSetting::Always => true,
            ThpSetting::Madvise => vma.thp == ThpAdvice::Huge,
            ThpSetting::Never | ThpSetting::Inherit => false,
        }
    }
}

/// The policy, with the kernel's per-size counters.
#[derive(Clone, Debug)]
pub struct LinuxThpPolicy {
    settings: ThpSettings,
    anon_fault_alloc: PerSize,
    anon_fault_fallback: PerSize,
    exit_anon_folios: PerSize,
    exit_file_folios: PerSize,
}

impl LinuxThpPolicy {
    /// The policy with these settings.
    pub fn new(settings: ThpSettings) -> Self {
        LinuxThpPolicy {
            settings,
            anon_fault_alloc: PerSize::default(),
            anon_fault_fallback: PerSize::default(),
            exit_anon_folios: PerSize::default(),
            exit_file_folios: PerSize::default(),
        }
    }

    /// `hugepages-<size>/stats/anon_fault_alloc`.
    pub fn anon_fault_alloc(&self) -> &PerSize {
        &self.anon_fault_alloc
    }

    /// `hugepages-<size>/stats/anon_fault_fallback`.
    pub fn anon_fault_fallback(&self) -> &PerSize {
        &self.anon_fault_fallback
    }

    /// The large anonymous pages (folios) each process had mapped at its exit, summed over
    /// the processes: what the lab reads from `/proc/PID/pagemap` and `/proc/kpageflags` at
    /// each process's exit (`pagelab_lab::folios`). A page a parent and its forked child
    /// both map counts in each, as it does there. Zero pages are no allocation and are left
    /// out.
    pub fn exit_anon_folios(&self) -> &PerSize {
        &self.exit_anon_folios
    }

    /// As [`LinuxThpPolicy::exit_anon_folios`], of large page-cache pages.
    pub fn exit_file_folios(&self) -> &PerSize {
        &self.exit_file_folios
    }

    /// Tries to allocate and map a `size` page at the aligned `va`; counts the outcome.
    fn try_size(
        &mut self,
        m: &mut Machine,
        pid: u32,
        va: VirtAddr,
        size: PageSize,
        flags: PteFlags,
    ) -> Result<bool, MmError> {
        match m.alloc_frames(size) {
            Some(pfn) => {
                m.map(pid, va, pfn, size, flags, true)?;
                m.count_fault(size);
                self.anon_fault_alloc.add(size, 1);
                Ok(true)
            }
            None => {
                self.anon_fault_fallback.add(size, 1);
                Ok(false)
            }
        }
    }
}

impl Policy for LinuxThpPolicy {
    fn fault(
        &mut self,
        m: &mut Machine,
        pid: u32,
        vma: &Vma,
        addr: VirtAddr,
        write: bool,
    ) -> Result<(), MmError> {
        let flags = PteFlags::from_prot(vma.prot);
        let anon = vma.backing == Backing::Anon;
        let suitable: Vec<PageSize> = if anon {
            thp_sizes()
                .into_iter()
                .filter(|&s| self.settings.allows(s, vma) && vma.holds_aligned(addr, s))
                .collect()
        } else {
            Vec::new()
        };
        let aligned = |s: PageSize| addr.align_down(s);
        let unmapped =
            |m: &mut Machine, s: PageSize| m.proc_mut(pid).pt.is_unmapped(aligned(s), s.bytes());
        if anon && !write && !vma.inferred {
            // A read of never-written anonymous memory maps a zero page and
            // allocates nothing (do_huge_pmd_anonymous_page with use_zero_page,
            // else do_anonymous_page); a later write replaces it. Not in VMAs
            // inferred from a trace without map events: what such a region is
            // (code, data read from a file) is unknown, so its first read is
            // not taken to be of never-written memory.
            // No memory for the huge zero page: the 4K one (the kernel's
            // fallback when mm_get_huge_zero_folio fails).
            let huge = self.settings.use_zero_page
                && self.settings.allows(PageSize::M2, vma)
                && vma.holds_aligned(addr, PageSize::M2)
                && unmapped(m, PageSize::M2)
                && m.zero_page(PageSize::M2).is_ok();
            let size = if huge { PageSize::M2 } else { PageSize::K4 };
            m.map_zero(pid, aligned(size), size, flags)?;
            m.count_fault(size);
            return Ok(());
        }
        // The PMD-sized page first, when its whole range is empty.
        if suitable.contains(&PageSize::M2)
            && unmapped(m, PageSize::M2)
            && self.try_size(m, pid, aligned(PageSize::M2), PageSize::M2, flags)?
        {
            return Ok(());
        }
        // Then the highest smaller size whose range is empty, falling back down on failure.
        let mut rest: Vec<PageSize> = suitable
            .into_iter()
            .filter(|&s| s < PageSize::M2)
            .rev()
            .collect();
        while let Some(&s) = rest.first() {
            if unmapped(m, s) {
                break;
            }
            rest.remove(0);
        }
        for s in rest {
            if self.try_size(m, pid, aligned(s), s, flags)? {
                return Ok(());
            }
        }
        m.fault_in(pid, addr, PageSize::K4, flags)
    }

    fn exit(&mut self, m: &Machine, pid: u32) {
        // Each folio once, in the first VMA mapping it (crate::exit_map).
        for v in crate::exit_map::vma_folios(m, pid) {
            let by = if v.backing == Backing::Anon {
                &mut self.exit_anon_folios
            } else {
                &mut self.exit_file_folios
            };
            for (size, n) in v.folios {
                by.add(size, n);
            }
        }
    }

    fn file_pages(&self, vma: &Vma) -> FilePages {
        // PMD-order readahead happens in VM_HUGEPAGE VMAs only (do_sync_mmap_readahead).
        let pmd = vma.thp == ThpAdvice::Huge && self.settings.allows(PageSize::M2, vma);
        FilePages {
            sizes: if pmd { vec![PageSize::M2] } else { Vec::new() },
            read_whole: true,
        }
    }

    fn counters(&self) -> serde_json::Value {
        let mut out = serde_json::json!({
            "settings": self.settings.full(),
            "anon_fault_alloc": serde_json::to_value(&self.anon_fault_alloc).unwrap_or_default(),
            "anon_fault_fallback": serde_json::to_value(&self.anon_fault_fallback).unwrap_or_default(),
        });
        // Only where a process exited mapping a large page, so that earlier results stay
        // as they were.
        for (name, by) in [
            ("exit_anon_folios", &self.exit_anon_folios),
            ("exit_file_folios", &self.exit_file_folios),
        ] {
            let v = serde_json::to_value(by).unwrap_or_default();
            if v.as_object().is_some_and(|o| !o.is_empty()) {
                out[name] = v;
            }
        }
        out
    }
}
