//! `relocation`: base pages at every fault; a periodic scanner collapses a
//! naturally aligned extent into one superpage once enough of it is
//! populated, copying the populated pages into a fresh block (Romer et al.
//! 1995, online promotion by copying; Talluri et al. 1992 relocate when half
//! the base pages are in use; Weisberg and Wiseman (IRI 2009), 2.3). Linux's khugepaged does the
//! same for 2M pages, with `max_ptes_none` as its threshold.
//!
//! Parameters (`relocation:size=2M,max_ptes_none=511,scan=1,budget=64`):
//! - `size`: the extent collapsed, any size above 4K the x86-64 geometry maps
//!   (16K..1M as contiguous runs, 2M and 1G leaves); default 2M.
//! - `max_ptes_none=N`: collapse when at most N base pages of the extent are
//!   empty (Linux's knob; default the extent's pages minus one, 511 for 2M,
//!   so one populated page suffices, as on a fresh kernel); or
//!   `threshold=P%`: collapse when at least P percent of them are populated
//!   (Talluri's half: `threshold=50%`). Not both.
//! - `scan=N`: scan every N ticks (the engine ticks after every batch of
//!   64K events); default 1.
//! - `budget=N`: examine at most N candidate extents per scan, the rest wait
//!   for the next scan (khugepaged's `pages_to_scan`); default every candidate.
//!
//! The scanner is cheap: a fault in an anonymous VMA records its extent as a
//! candidate of its process, and a scan examines only the candidates, not the
//! whole address space. An extent examined and not collapsed (too empty, not
//! inside one anonymous VMA with uniform protection, MADV_NOHUGEPAGE, or no
//! free block) is dropped until its next fault; population only grows by
//! faults, so nothing is missed but a block freed since a failed allocation.
//! A collapse allocates the block first (a failure leaves the extent as it
//! was), counts the populated pages as `copied_bytes` and the empty ones as
//! `zeroed_bytes`, unmaps and frees the base pages and maps the superpage;
//! [`Policy::take_remapped`] hands the collapsed ranges to the TLB.

use super::Policy;
use crate::machine::{Machine, MmError};
use crate::pagetable::{Geometry, PageTable, PteFlags};
use crate::vma::{ThpAdvice, Vma};
use pagelab_core::{Backing, PageSize, Pfn, VirtAddr};
use rustc_hash::FxHashMap;
use serde::Serialize;
use std::collections::BTreeSet;
use std::fmt;

/// When an extent is populated enough to collapse.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Threshold {
    /// Linux's `max_ptes_none`: at most this many base pages empty.
    MaxPtesNone(u64),
    /// At least this percentage (1..=100) of the base pages populated.
    Percent(u8),
}

/// The parameters of the `relocation` policy.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RelocationSettings {
    /// The extent collapsed into one superpage.
    pub size: PageSize,
    /// When to collapse; `None` is the default, `max_ptes_none` = pages - 1.
    pub threshold: Option<Threshold>,
    /// Scan every this many ticks (at least 1).
    pub scan_every: u64,
    /// Candidate extents examined per scan; `None` examines all.
    pub budget: Option<u64>,
}

impl Default for RelocationSettings {
    fn default() -> Self {
        RelocationSettings {
            size: PageSize::M2,
            threshold: None,
            scan_every: 1,
            budget: None,
        }
    }
}

impl RelocationSettings {
    /// Base (4K) pages in one extent.
    pub fn pages(&self) -> u64 {
        self.size.frames()
    }

    /// The fewest populated base pages that make an extent collapse (at least 1).
    pub fn min_populated(&self) -> u64 {
        let pages = self.pages();
        let need = match self.threshold {
            None => 1,
            Some(Threshold::MaxPtesNone(n)) => pages.saturating_sub(n),
            Some(Threshold::Percent(p)) => (pages * u64::from(p)).div_ceil(100),
        };
        need.max(1)
    }
}

impl std::str::FromStr for RelocationSettings {
    type Err = String;
    /// `size=64K,threshold=50%,scan=4,budget=16` (any subset, in any order).
    fn from_str(s: &str) -> Result<Self, String> {
        let mut t = RelocationSettings::default();
        for kv in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (k, v) = kv.split_once('=').ok_or_else(|| {
                format!(
                    "`{kv}` is not key=value (keys: size, max_ptes_none, threshold, scan, budget)"
                )
            })?;
            let count = |what: &str| {
                v.parse::<u64>()
                    .map_err(|_| format!("`{k}={v}`: {what} is a whole number"))
            };
            match k {
                "size" => {
                    let size: PageSize = v.parse().map_err(|e| format!("`size={v}`: {e}"))?;
                    let sizes = Geometry::for_base(PageSize::K4).sizes();
                    if size == PageSize::K4 || !sizes.contains(&size) {
                        let names: Vec<String> =
                            sizes[1..].iter().map(|s| s.to_string()).collect();
                        return Err(format!(
                            "`size={v}`: the extent is a size the page table maps above 4K: {}",
                            names.join(", ")
                        ));
                    }
                    t.size = size;
                }
                "max_ptes_none" | "threshold" if t.threshold.is_some() => {
                    return Err(format!(
                        "`{kv}`: give one threshold, max_ptes_none=N or threshold=P%"
                    ));
                }
                "max_ptes_none" => t.threshold = Some(Threshold::MaxPtesNone(count("it")?)),
                "threshold" => {
                    let p = v
                        .strip_suffix('%')
                        .and_then(|p| p.parse::<u8>().ok())
                        .filter(|p| (1..=100).contains(p))
                        .ok_or_else(|| {
                            format!("`threshold={v}`: a percentage from 1% to 100%, like 50%")
                        })?;
                    t.threshold = Some(Threshold::Percent(p));
                }
                "scan" => {
                    t.scan_every = count("the ticks between scans")?;
                    if t.scan_every == 0 {
                        return Err("`scan=0`: scan every 1 or more ticks".into());
                    }
                }
                "budget" => {
                    let b = count("the extents per scan")?;
                    if b == 0 {
                        return Err("`budget=0`: examine 1 or more extents per scan".into());
                    }
                    t.budget = Some(b);
                }
                _ => {
                    return Err(format!(
                        "`{k}` is not a relocation parameter: use size, max_ptes_none, threshold, scan or budget"
                    ))
                }
            }
        }
        if let Some(Threshold::MaxPtesNone(n)) = t.threshold {
            if n >= t.pages() {
                return Err(format!(
                    "`max_ptes_none={n}`: a {} extent has {} base pages, so at most {}",
                    t.size,
                    t.pages(),
                    t.pages() - 1
                ));
            }
        }
        Ok(t)
    }
}

impl fmt::Display for RelocationSettings {
    /// Only what differs from the defaults, so a spec prints back as given.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let d = RelocationSettings::default();
        let mut parts = Vec::new();
        if self.size != d.size {
            parts.push(format!("size={}", self.size));
        }
        match self.threshold {
            None => {}
            Some(Threshold::MaxPtesNone(n)) => parts.push(format!("max_ptes_none={n}")),
            Some(Threshold::Percent(p)) => parts.push(format!("threshold={p}%")),
        }
        if self.scan_every != d.scan_every {
            parts.push(format!("scan={}", self.scan_every));
        }
        if let Some(b) = self.budget {
            parts.push(format!("budget={b}"));
        }
        f.write_str(&parts.join(","))
    }
}

/// What the scanner did, by outcome.
#[derive(Clone, Debug, Default, Serialize)]
pub struct RelocationCounters {
    /// Scans run.
    pub scans: u64,
    /// Candidate extents examined.
    pub extents_scanned: u64,
    /// Extents collapsed into a superpage (khugepaged's `pages_collapsed`).
    pub pages_collapsed: u64,
    /// Extents with fewer populated pages than the threshold.
    pub below_threshold: u64,
    /// Extents not inside one anonymous VMA with uniform protection, or in a
    /// VMA given MADV_NOHUGEPAGE, or already one page.
    pub not_eligible: u64,
    /// Extents skipped because no free block of the size was found.
    pub alloc_failed: u64,
}

/// The policy: base pages at fault, a scanner collapsing candidate extents.
#[derive(Clone, Debug)]
pub struct RelocationPolicy {
    settings: RelocationSettings,
    /// Per process, the first byte of every extent faulted in since its last examination.
    candidates: FxHashMap<u32, BTreeSet<VirtAddr>>,
    ticks: u64,
    /// The process the next scan starts with, so a budget serves all in turn.
    next_pid: u32,
    /// Extents collapsed since the last `take_remapped`, for the TLB.
    remapped: Vec<(u32, VirtAddr, VirtAddr)>,
    counters: RelocationCounters,
}

impl RelocationPolicy {
    /// The policy with these settings; the machine's base page must be 4K.
    pub fn new(settings: RelocationSettings) -> Self {
        RelocationPolicy {
            settings,
            candidates: FxHashMap::default(),
            ticks: 0,
            next_pid: 0,
            remapped: Vec::new(),
            counters: RelocationCounters::default(),
        }
    }

    /// The scanner's counters.
    pub fn stats(&self) -> &RelocationCounters {
        &self.counters
    }

    /// Candidate extents waiting for a scan, over every process.
    pub fn pending(&self) -> usize {
        self.candidates.values().map(BTreeSet::len).sum()
    }

    /// Examines candidates now, at most the budget, processes in turn from `next_pid`.
    pub fn scan(&mut self, m: &mut Machine) -> Result<(), MmError> {
        self.counters.scans += 1;
        let mut left = self.settings.budget.unwrap_or(u64::MAX);
        let mut pids: Vec<u32> = self.candidates.keys().copied().collect();
        pids.sort_unstable();
        let first = pids.partition_point(|&p| p < self.next_pid);
        pids.rotate_left(first);
        for pid in pids {
            if left == 0 {
                self.next_pid = pid;
                return Ok(());
            }
            let set = self.candidates.get_mut(&pid).expect("listed");
            let take: Vec<VirtAddr> = set.iter().copied().take(left as usize).collect();
            for lo in &take {
                set.remove(lo);
            }
            if set.is_empty() {
                self.candidates.remove(&pid);
            }
            left -= take.len() as u64;
            if m.proc(pid).is_none() {
                continue; // the process exited
            }
            for lo in take {
                self.counters.extents_scanned += 1;
                self.collapse(m, pid, lo)?;
            }
        }
        self.next_pid = 0;
        Ok(())
    }

    /// Collapses the extent at `lo` of `pid` if it qualifies.
    fn collapse(&mut self, m: &mut Machine, pid: u32, lo: VirtAddr) -> Result<(), MmError> {
        let size = self.settings.size;
        let Some(p) = m.proc(pid) else {
            return Ok(());
        };
        let Some(vma) = p.aspace.find(lo).filter(|v| self.eligible(v, lo)) else {
            self.counters.not_eligible += 1;
            return Ok(());
        };
        let flags = PteFlags::from_prot(vma.prot);
        let maps = p.pt.mappings_in(lo, size.bytes());
        // Same protection bits throughout (the free bits may carry other state).
        let prot_bits = |f: PteFlags| f.0 & 0b111;
        if maps
            .iter()
            .any(|mp| mp.size >= size || prot_bits(mp.flags) != prot_bits(flags))
        {
            self.counters.not_eligible += 1;
            return Ok(());
        }
        let populated: u64 = maps.iter().map(|mp| mp.size.frames()).sum();
        if populated < self.settings.min_populated() {
            self.counters.below_threshold += 1;
            return Ok(());
        }
        // The block first, as khugepaged does: a failure leaves the extent as it was.
        let Some(pfn) = m.alloc_frames(size) else {
            self.counters.alloc_failed += 1;
            return Ok(());
        };
        for r in m.unmap_range(pid, lo, lo + size.bytes())? {
            m.free_frames(r.pfn, r.size)?;
        }
        m.map(pid, lo, pfn, size, flags, false)?;
        m.stats.copied_bytes += populated << Pfn::SHIFT;
        m.stats.zeroed_bytes += (self.settings.pages() - populated) << Pfn::SHIFT;
        m.stats.promotions += 1;
        self.counters.pages_collapsed += 1;
        self.remapped.push((pid, lo, lo + size.bytes()));
        Ok(())
    }

    /// Whether an extent at `lo` may become one page of `vma`.
    fn eligible(&self, vma: &Vma, lo: VirtAddr) -> bool {
        vma.backing == Backing::Anon
            && vma.thp != ThpAdvice::NoHuge
            && vma.holds_aligned(lo, self.settings.size)
    }
}

impl Policy for RelocationPolicy {
    fn fault(
        &mut self,
        m: &mut Machine,
        pid: u32,
        vma: &Vma,
        addr: VirtAddr,
        _write: bool,
    ) -> Result<(), MmError> {
        let base = m.base();
        m.fault_in(pid, addr, base, PteFlags::from_prot(vma.prot))?;
        let lo = addr.align_down(self.settings.size);
        if self.eligible(vma, lo) {
            self.candidates.entry(pid).or_default().insert(lo);
        }
        Ok(())
    }

    fn tick(&mut self, m: &mut Machine) -> Result<(), MmError> {
        self.ticks += 1;
        if self.ticks.is_multiple_of(self.settings.scan_every) && !self.candidates.is_empty() {
            self.scan(m)?;
        }
        Ok(())
    }

    fn take_remapped(&mut self) -> Vec<(u32, VirtAddr, VirtAddr)> {
        std::mem::take(&mut self.remapped)
    }

    fn counters(&self) -> serde_json::Value {
        let mut v = serde_json::to_value(&self.counters).unwrap_or_default();
        v["settings"] = serde_json::Value::String(format!(
            "size={},min_populated={},scan={},budget={}",
            self.settings.size,
            self.settings.min_populated(),
            self.settings.scan_every,
            self.settings
                .budget
                .map_or_else(|| "all".to_string(), |b| b.to_string())
        ));
        v["pending"] = serde_json::Value::from(self.pending() as u64);
        v
    }
}
