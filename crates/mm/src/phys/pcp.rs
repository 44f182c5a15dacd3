//! Per-CPU hot and cold page lists (004 paper, section 6; Linux 2.6's
//! `struct per_cpu_pages` in mm/page_alloc.c).
//!
//! Every CPU has, for every zone, two lists of free order-0 pages: a hot one
//! (pages likely in that CPU's cache) and a cold one. The buddy allocator
//! sees the pages on a list as allocated; only the lists' own refills and
//! drains take its lock, `batch` pages at a time. As Linux 2.6.0 does it:
//!
//! - an order-0 allocation from a list (`buffered_rmqueue`) first refills
//!   the list with `batch` pages from the zone's buddy allocator when it
//!   holds `low` pages or fewer (`rmqueue_bulk`, one lock), then takes the
//!   page at the list's head; when the list is still empty it takes one page
//!   from the buddy allocator directly (another lock);
//! - an order-0 free (`free_hot_cold_page`) first gives the `batch` pages at
//!   the list's tail (the oldest) back to the buddy allocator when the list
//!   holds `high` pages or more (`free_pages_bulk`, one lock), then puts the
//!   page at the head: the hot list is a LIFO stack;
//! - larger orders bypass the lists: one lock per allocation or free.
//!
//! Allocations are hot unless the caller asks for a cold page (`__GFP_COLD`:
//! page-cache pages, which the device fills before a CPU reads them). Frees
//! are hot (a page a process just used) except those of reclaim
//! (`shrink_list` and the `pagevec` releases free to the cold list).
//! The defaults are the paper's and 2.6.0's for zones of 256M or more: a
//! batch of 16, hot lists 32 to 96 pages, cold lists 0 to 32.
//!
//! Without lists every allocation attempt on a zone and every free take the
//! buddy allocator's lock once; the counters give both, so what the lists
//! save is a number.

use super::{PhysError, Zone};
use pagelab_core::{Order, Pfn};
use rustc_hash::FxHashSet;
use serde::{Deserialize, Serialize};
use std::collections::VecDeque;

/// The largest `batch` or `high` a configuration may give, in pages.
pub const MAX_PCP_PAGES: u32 = 1 << 16;

/// Which list a page comes from or goes to.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum PageTemp {
    /// Likely in the CPU's cache: anonymous memory, page tables, frees of pages just used.
    #[default]
    Hot,
    /// Not touched by the CPU first: page-cache reads; reclaim's frees.
    Cold,
}

/// One list's watermarks, in pages.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ListMarks {
    /// At or below this many pages an allocation refills the list first.
    pub low: u32,
    /// At or above this many pages a free drains `batch` pages first.
    pub high: u32,
}

/// The lists' sizes (`[pcp]` of a machine file; `--pcp`). Every field is
/// optional in the file and defaults to the paper's value.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "PcpFile")]
pub struct PcpConfig {
    /// Pages moved between a list and the buddy allocator under one lock (16).
    pub batch: u32,
    /// The hot lists' watermarks (32 to 96).
    pub hot: ListMarks,
    /// The cold lists' watermarks (0 to 32).
    pub cold: ListMarks,
}

/// `[pcp]` as written, before its checks.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PcpFile {
    #[serde(default = "default_batch")]
    batch: u32,
    #[serde(default = "default_hot")]
    hot: ListMarks,
    #[serde(default = "default_cold")]
    cold: ListMarks,
}

fn default_batch() -> u32 {
    PcpConfig::PAPER.batch
}
fn default_hot() -> ListMarks {
    PcpConfig::PAPER.hot
}
fn default_cold() -> ListMarks {
    PcpConfig::PAPER.cold
}

impl TryFrom<PcpFile> for PcpConfig {
    type Error = String;

    fn try_from(f: PcpFile) -> Result<PcpConfig, String> {
        let c = PcpConfig {
            batch: f.batch,
            hot: f.hot,
            cold: f.cold,
        };
        c.validate()
            .map_err(|e| format!("field `{}`: {}", e.0, e.1))?;
        Ok(c)
    }
}

impl Default for PcpConfig {
    fn default() -> Self {
        PcpConfig::PAPER
    }
}

impl PcpConfig {
    /// The paper's values: "Default batch size for allocations is 16 pages at
    /// a time; watermarks are 32–96 pages for the hotlists, and 0–32 pages
    /// for the cold lists" (Linux 2.6.0: low 2 x batch, high 6 x batch hot;
    /// 0 and 2 x batch cold).
    pub const PAPER: PcpConfig = PcpConfig {
        batch: 16,
        hot: ListMarks { low: 32, high: 96 },
        cold: ListMarks { low: 0, high: 32 },
    };

    /// Checks the values: as (field, message) naming the field as written
    /// (`pcp.hot`) and what is allowed.
    pub fn validate(&self) -> Result<(), (&'static str, String)> {
        if !(1..=MAX_PCP_PAGES).contains(&self.batch) {
            return Err((
                "pcp.batch",
                format!("{} is not allowed: 1 to {MAX_PCP_PAGES} pages", self.batch),
            ));
        }
        for (field, m) in [("pcp.hot", self.hot), ("pcp.cold", self.cold)] {
            if m.low >= m.high || m.high > MAX_PCP_PAGES {
                return Err((
                    field,
                    format!(
                        "low {} and high {} are not allowed: low must be below high, and high at most {MAX_PCP_PAGES} pages",
                        m.low, m.high
                    ),
                ));
            }
        }
        Ok(())
    }

    /// `batch=N,hot=LOW-HIGH,cold=LOW-HIGH` (any of them) applied to `self`.
    pub fn with_overrides(mut self, text: &str) -> Result<PcpConfig, String> {
        const HELP: &str = "write on, off, or any of batch=N,hot=LOW-HIGH,cold=LOW-HIGH";
        for part in text.split(',') {
            let Some((key, value)) = part.split_once('=') else {
                return Err(format!("`{part}` is not KEY=VALUE: {HELP}"));
            };
            let num = |t: &str| {
                t.trim()
                    .parse::<u32>()
                    .map_err(|_| format!("{key}: `{t}` is not a number of pages"))
            };
            let marks = || -> Result<ListMarks, String> {
                let (l, h) = value
                    .split_once('-')
                    .ok_or_else(|| format!("{key}: `{value}` is not LOW-HIGH, like 32-96"))?;
                Ok(ListMarks {
                    low: num(l)?,
                    high: num(h)?,
                })
            };
            match key.trim() {
                "batch" => self.batch = num(value)?,
                "hot" => self.hot = marks()?,
                "cold" => self.cold = marks()?,
                other => return Err(format!("`{other}` is not a setting of the lists: {HELP}")),
            }
        }
        self.validate().map_err(|(f, m)| format!("{f}: {m}"))?;
        Ok(self)
    }

    fn marks(&self, t: PageTemp) -> ListMarks {
        match t {
            PageTemp::Hot => self.hot,
            PageTemp::Cold => self.cold,
        }
    }
}

/// What the lists counted (`mm.pcp` in the JSON). Totals over every CPU and zone.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PcpStats {
    /// The lists' sizes.
    #[serde(flatten)]
    pub config: PcpConfig,
    /// CPUs, each with a hot and a cold list per zone.
    pub cpus: u32,
    /// Order-0 allocations served from a hot list.
    pub pcp_allocs_hot: u64,
    /// Order-0 allocations served from a cold list.
    pub pcp_allocs_cold: u64,
    /// Allocations the buddy allocator served directly: every larger order,
    /// and order-0 ones whose list was empty even after its refill.
    pub buddy_allocs: u64,
    /// Order-0 frees onto a hot list.
    pub pcp_frees_hot: u64,
    /// Order-0 frees onto a cold list.
    pub pcp_frees_cold: u64,
    /// Frees of larger orders, straight to the buddy allocator.
    pub buddy_frees: u64,
    /// Refills of a list at or below its low watermark (`rmqueue_bulk`).
    pub refills: u64,
    /// Drains of `batch` pages from a list at its high watermark (`free_pages_bulk`).
    pub drains: u64,
    /// Times every list was emptied because no zone had a free block (as
    /// Linux's `drain_all_pages` before it gives up an allocation).
    pub drain_all: u64,
    /// Times the buddy allocator's lock was taken.
    pub buddy_lock_acquisitions: u64,
    /// Times it would have been taken without the lists: once per
    /// allocation attempt on a zone and once per free.
    pub buddy_lock_acquisitions_without_lists: u64,
    /// The difference: what the lists saved (negative if they cost more).
    pub buddy_lock_acquisitions_saved: i64,
    /// Pages on the lists at the end.
    pub pages_on_lists: u64,
}

/// The lists of every CPU and zone, and their counters.
#[derive(Clone, Debug)]
pub(crate) struct Pcp {
    cfg: PcpConfig,
    zones: usize,
    cpus: u32,
    cpu: u32,
    /// Index `(cpu * zones + zone) * 2 + temp`; the back is the list's head.
    lists: Vec<VecDeque<u64>>,
    /// Every frame on a list, to refuse a second free.
    on_list: FxHashSet<u64>,
    stats: PcpStats,
}

impl Pcp {
    pub(crate) fn new(cfg: PcpConfig, cpus: u32, zones: usize) -> Pcp {
        Pcp {
            cfg,
            zones,
            cpus: cpus.max(1),
            cpu: 0,
            lists: vec![VecDeque::new(); cpus.max(1) as usize * zones * 2],
            on_list: FxHashSet::default(),
            stats: PcpStats {
                config: cfg,
                cpus: cpus.max(1),
                ..PcpStats::default()
            },
        }
    }

    /// The CPU that allocates and frees from now on.
    pub(crate) fn set_cpu(&mut self, cpu: u32) {
        self.cpu = cpu % self.cpus;
    }

    fn slot(&self, cpu: u32, z: usize, t: PageTemp) -> usize {
        (cpu as usize * self.zones + z) * 2 + usize::from(t == PageTemp::Cold)
    }

    /// Frames on every list.
    pub(crate) fn pages(&self) -> u64 {
        self.on_list.len() as u64
    }

    /// An allocation of `order` from zone `z`'s buddy allocator, through the
    /// running CPU's `t` list for order 0.
    pub(crate) fn alloc(
        &mut self,
        zone: &mut Zone,
        z: usize,
        order: Order,
        t: PageTemp,
    ) -> Option<Pfn> {
        self.stats.buddy_lock_acquisitions_without_lists += 1;
        if order.0 == 0 {
            let i = self.slot(self.cpu, z, t);
            if self.lists[i].len() as u64 <= u64::from(self.cfg.marks(t).low) {
                self.stats.refills += 1;
                self.stats.buddy_lock_acquisitions += 1;
                for _ in 0..self.cfg.batch {
                    let Some(p) = zone.buddy.alloc(Order(0)) else {
                        break;
                    };
                    self.lists[i].push_front(p.0);
                    self.on_list.insert(p.0);
                }
            }
            if let Some(p) = self.lists[i].pop_back() {
                self.on_list.remove(&p);
                match t {
                    PageTemp::Hot => self.stats.pcp_allocs_hot += 1,
                    PageTemp::Cold => self.stats.pcp_allocs_cold += 1,
                }
                return Some(Pfn(p));
            }
        }
        self.stats.buddy_lock_acquisitions += 1;
        let got = zone.buddy.alloc(order);
        if got.is_some() {
            self.stats.buddy_allocs += 1;
        }
        got
    }

    /// Frees `pfn` of `order` in zone `z`: onto the running CPU's `t` list
    /// for an order-0 page, else to the buddy allocator.
    pub(crate) fn free(
        &mut self,
        zone: &mut Zone,
        z: usize,
        pfn: Pfn,
        order: Order,
        t: PageTemp,
    ) -> Result<(), PhysError> {
        if order.0 > 0 || zone.buddy.allocated_order(pfn) != Some(Order(0)) {
            // Either a larger block or a bad free, which the buddy allocator refuses.
            zone.buddy.free(pfn, order)?;
            self.stats.buddy_frees += 1;
            self.stats.buddy_lock_acquisitions += 1;
            self.stats.buddy_lock_acquisitions_without_lists += 1;
            return Ok(());
        }
        if self.on_list.contains(&pfn.0) {
            return Err(PhysError::DoubleFree { pfn, order: 0 });
        }
        self.stats.buddy_lock_acquisitions_without_lists += 1;
        let i = self.slot(self.cpu, z, t);
        if self.lists[i].len() as u64 >= u64::from(self.cfg.marks(t).high) {
            self.stats.drains += 1;
            self.give_back(zone, i, self.cfg.batch as usize)?;
        }
        self.lists[i].push_back(pfn.0);
        self.on_list.insert(pfn.0);
        match t {
            PageTemp::Hot => self.stats.pcp_frees_hot += 1,
            PageTemp::Cold => self.stats.pcp_frees_cold += 1,
        }
        Ok(())
    }

    /// Gives up to `n` pages from the tail of list `i` back to the buddy
    /// allocator of its zone, under one lock.
    fn give_back(&mut self, zone: &mut Zone, i: usize, n: usize) -> Result<(), PhysError> {
        self.stats.buddy_lock_acquisitions += 1;
        for _ in 0..n {
            let Some(p) = self.lists[i].pop_front() else {
                break;
            };
            self.on_list.remove(&p);
            zone.buddy
                .free(Pfn(p), Order(0))
                .map_err(|e| PhysError::Invariant(format!("a page on a per-CPU list: {e}")))?;
        }
        Ok(())
    }

    /// Empties every list into its zone; whether any page moved.
    pub(crate) fn drain_all(&mut self, zones: &mut [Zone]) -> Result<bool, PhysError> {
        if self.on_list.is_empty() {
            return Ok(false);
        }
        self.stats.drain_all += 1;
        for i in 0..self.lists.len() {
            if !self.lists[i].is_empty() {
                let z = (i / 2) % self.zones;
                let n = self.lists[i].len();
                self.give_back(&mut zones[z], i, n)?;
            }
        }
        Ok(true)
    }

    /// Free frames on the lists of zone `z`.
    pub(crate) fn zone_pages(&self, z: usize) -> u64 {
        (0..self.cpus)
            .flat_map(|c| [PageTemp::Hot, PageTemp::Cold].map(|t| self.slot(c, z, t)))
            .map(|i| self.lists[i].len() as u64)
            .sum()
    }

    /// Every page on a list is an allocated order-0 block of the list's zone,
    /// listed once.
    pub(crate) fn check(&self, zones: &[Zone]) -> Result<(), PhysError> {
        let bad = |m: String| Err(PhysError::Invariant(format!("per-CPU lists: {m}")));
        let mut n = 0;
        for (i, list) in self.lists.iter().enumerate() {
            let zone = &zones[(i / 2) % self.zones];
            for &p in list {
                n += 1;
                if !self.on_list.contains(&p) {
                    return bad(format!("pfn {p:#x} is on a list but not in the set"));
                }
                if zone.buddy.allocated_order(Pfn(p)) != Some(Order(0)) {
                    return bad(format!(
                        "pfn {p:#x} is on a list of zone {} but not an allocated order-0 block there",
                        zone.kind.name()
                    ));
                }
            }
        }
        if n != self.on_list.len() {
            return bad(format!(
                "{n} pages on the lists, {} in the set",
                self.on_list.len()
            ));
        }
        Ok(())
    }

    /// The counters so far.
    pub(crate) fn stats(&self) -> PcpStats {
        let s = &self.stats;
        PcpStats {
            buddy_lock_acquisitions_saved: s.buddy_lock_acquisitions_without_lists as i64
                - s.buddy_lock_acquisitions as i64,
            pages_on_lists: self.pages(),
            ..s.clone()
        }
    }
}
