//! What the sharing model reports, the reclaim pass, and its invariants.

use super::model::Sharing;
use super::process::{Process, NO_OBJECT};
use super::rmap::{Method, MethodStats, RmapCosts};
use super::PageTables;
use rustc_hash::FxHashMap;
use serde::Serialize;
use std::collections::BTreeMap;

/// Page-table memory.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct PageTableStats {
    /// The sharing mode.
    pub mode: PageTables,
    /// Bytes of every table now (own and shared).
    pub page_table_bytes: u64,
    /// The most bytes at any moment.
    pub page_table_bytes_peak: u64,
    /// Tables now by level, level 1 (PTE pages) first.
    pub pages_by_level: Vec<u64>,
    /// Tables by level at the moment of the peak.
    pub pages_by_level_at_peak: Vec<u64>,
    /// Of `pages_by_level`, the shared ones.
    pub shared_pages_by_level: Vec<u64>,
    /// Bytes of level-1 tables (PTE pages) at the peak.
    pub pte_bytes_at_peak: u64,
    /// The most bytes one process's own tables took.
    pub per_process_bytes_max: u64,
    /// The mean bytes of a live process's own tables now.
    pub per_process_bytes_mean: u64,
}

/// The sharing model's event counters.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct SharingCounts {
    /// Events seen.
    pub events: u64,
    /// References seen.
    pub refs: u64,
    /// References that found no leaf and made one.
    pub faults: u64,
    /// References that found their leaf present.
    pub hits: u64,
    /// Writes that copied a page (copy-on-write).
    pub cow_copies: u64,
    /// Shared tables a process had to copy (protect, partial unmap).
    pub unshares: u64,
    /// PTE pages shared at fork instead of copied (`--page-tables shared`;
    /// left out of the JSON when none).
    #[serde(skip_serializing_if = "is_zero")]
    pub fork_shared_tables: u64,
    /// PTE pages shared at fork that a process copied before a write, a
    /// fault, an mprotect or a partial unmap while others still used them.
    #[serde(skip_serializing_if = "is_zero")]
    pub fork_unshares: u64,
    /// PTE pages shared at fork that their last user took as its own,
    /// without a copy.
    #[serde(skip_serializing_if = "is_zero")]
    pub fork_takeovers: u64,
    /// References outside every VMA.
    pub refs_outside_vmas: u64,
    /// Events that changed nothing (a fork to a live pid, an empty map).
    pub events_on_nothing: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// Everything one run of the sharing model counted.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct SharingStats {
    /// The event counters (flattened: their fields come first in the JSON).
    #[serde(flatten)]
    pub counts: SharingCounts,
    /// Processes alive now.
    pub processes: u64,
    /// Most processes alive at once.
    pub processes_peak: u64,
    /// Page-table memory.
    pub page_tables: PageTableStats,
    /// Each reverse-map method's costs.
    pub rmap: BTreeMap<Method, MethodStats>,
    /// PTE pointers per grouped chain node (see `RmapSizes::per_line`).
    pub rmap_entries_per_line: u64,
    /// Distinct reverse-map chains stored now (the model's own memory).
    pub distinct_chains: u64,
    /// Free pages left in each hugetlb pool, `(page size, free)`.
    pub hugetlb_free: Vec<(u64, u64)>,
}

impl Sharing {
    fn all_procs(&self) -> impl Iterator<Item = (u32, &Process)> {
        let cur = self.cur_ref().map(|p| (self.pid, p));
        self.procs.iter().map(|(&k, p)| (k, &**p)).chain(cur)
    }

    /// The counters so far, with a reclaim pass over every page mapped now.
    pub fn stats(&mut self) -> SharingStats {
        self.flush();
        self.rmap.settle();
        let mut r = self.rmap.clone();
        self.reclaim_pass(&mut r);
        let g = self.cfg.geometry;
        let levels = g.levels() as usize;
        let live = self.all_procs().count() as u64;
        let own: u64 = self.all_procs().map(|(_, p)| p.bytes).sum();
        let pt = &self.pt;
        SharingStats {
            counts: self.n.clone(),
            processes: live,
            processes_peak: self.processes_peak,
            page_tables: PageTableStats {
                mode: self.cfg.page_tables,
                page_table_bytes: pt.bytes,
                page_table_bytes_peak: pt.bytes_peak,
                pages_by_level: pt.tables[..levels].to_vec(),
                pages_by_level_at_peak: pt.tables_at_peak[..levels].to_vec(),
                shared_pages_by_level: pt.shared[..levels].to_vec(),
                pte_bytes_at_peak: pt.tables_at_peak[0] * g.table_bytes(1),
                per_process_bytes_max: pt.process_max,
                per_process_bytes_mean: own.checked_div(live).unwrap_or(0),
            },
            rmap: r.report(),
            rmap_entries_per_line: self.cfg.rmap.per_line(),
            distinct_chains: self.chains.live() as u64,
            hugetlb_free: self
                .cfg
                .hugetlb
                .iter()
                .zip(&self.pool_free)
                .map(|(p, &f)| (p.size.bytes(), f))
                .collect(),
        }
    }

    /// Unmapping every mapped page once, as reclaim would, costed by method.
    fn reclaim_pass(&mut self, r: &mut RmapCosts) {
        // The object page ranges each VMA maps.
        let mut cover: Vec<Vec<(u64, u64)>> = vec![Vec::new(); self.objects.len()];
        for (_, p) in self.all_procs() {
            for v in &p.vmas {
                if v.obj != NO_OBJECT {
                    cover[v.obj as usize].push((v.pgoff, v.pgoff + (v.end - v.start)));
                }
                for (o, _) in &v.layers {
                    cover[*o as usize].push((v.start, v.end));
                }
            }
        }
        for (o, ranges) in cover.iter().enumerate() {
            let obj = &self.objects[o];
            let mut starts: Vec<u64> = ranges.iter().map(|r| r.0).collect();
            let mut ends: Vec<u64> = ranges.iter().map(|r| r.1).collect();
            starts.sort_unstable();
            ends.sort_unstable();
            let all = ranges.len() as u64;
            let mut batch: Option<(u64, u64, u64)> = None;
            obj.each_mapped(|idx, chain| {
                let len = self.chains.len(chain) as u64;
                let c = (starts.partition_point(|&s| s <= idx)
                    - ends.partition_point(|&e| e <= idx)) as u64;
                match &mut batch {
                    Some((l, cc, n)) if *l == len && *cc == c => *n += 1,
                    _ => {
                        if let Some((l, cc, n)) = batch {
                            r.reclaim(obj.kind, l, all, cc, n);
                        }
                        batch = Some((len, c, 1));
                    }
                }
            });
            if let Some((l, cc, n)) = batch {
                r.reclaim(obj.kind, l, all, cc, n);
            }
        }
    }

    /// Checks every invariant; the message says which failed.
    pub fn check(&mut self) -> Result<(), String> {
        self.flush();
        let g = self.cfg.geometry;
        let levels = g.levels();
        let mut tables = [0u64; crate::pagetable::MAX_LEVELS];
        let mut users: FxHashMap<u32, u32> = FxHashMap::default();
        let mut leaves = 0u64;
        for (pid, p) in self.all_procs() {
            let what = |m: String| format!("process {pid}: {m}");
            for w in p.vmas.windows(2) {
                if w[0].end > w[1].start {
                    return Err(what("VMAs overlap".into()));
                }
            }
            for (l, set) in p.pop.iter().enumerate() {
                set.check().map_err(what)?;
                leaves += set.pages();
                let sh = if l < levels as usize {
                    g.entry_shift(l as u8 + 1) - g.base().shift()
                } else {
                    0
                };
                for &(s, e) in set.runs() {
                    let (s, e) = (s << sh, e << sh);
                    let inside = p.vmas.iter().any(|v| v.start <= s && e <= v.end)
                        || p.vmas
                            .iter()
                            .filter(|v| v.start < e && s < v.end)
                            .map(|v| v.end.min(e) - v.start.max(s))
                            .sum::<u64>()
                            == e - s;
                    if !inside {
                        return Err(what(format!("leaves {s:#x}..{e:#x} outside every VMA")));
                    }
                }
            }
            let expect = self.expected_entries(p);
            for l in 2..levels {
                let have: BTreeMap<u64, u32> = p.entries[l as usize - 1]
                    .iter()
                    .map(|(&k, &v)| (k, v))
                    .collect();
                if have != expect[l as usize - 1] {
                    return Err(what(format!(
                        "level-{l} entries {have:?}, expected {:?}",
                        expect[l as usize - 1]
                    )));
                }
            }
            let blocks = distinct_blocks(&p.pop[0], g.bits(1) as u32);
            let mut own = [0u64; crate::pagetable::MAX_LEVELS];
            own[0] = blocks;
            for l in 2..levels {
                own[l as usize - 1] = expect[l as usize - 1].len() as u64;
            }
            own[levels as usize - 1] = 1;
            if own != p.tables {
                return Err(what(format!("own tables {:?}, expected {own:?}", p.tables)));
            }
            let bytes: u64 = (1..=levels)
                .map(|l| own[l as usize - 1] * g.table_bytes(l))
                .sum();
            if bytes != p.bytes {
                return Err(what(format!("own bytes {}, expected {bytes}", p.bytes)));
            }
            for l in 0..levels as usize {
                tables[l] += own[l];
            }
            for (span, t) in p.attached.all() {
                *users.entry(t).or_insert(0) += 1;
                let tab = &self.tables[t as usize];
                let ssh = g.table_shift(tab.level) - g.base().shift();
                let lsh = g.entry_shift(tab.level) - g.base().shift();
                if p.pop[tab.level as usize - 1]
                    .any_in((span << ssh) >> lsh, ((span + 1) << ssh) >> lsh)
                {
                    return Err(what(format!("span {span} is both shared and own")));
                }
            }
        }
        for (t, tab) in self.tables.iter().enumerate() {
            if !tab.live {
                continue;
            }
            tab.pop.check()?;
            leaves += tab.pop.pages();
            tables[tab.level as usize - 1] += 1;
            if users.get(&(t as u32)).copied().unwrap_or(0) != tab.users || tab.users == 0 {
                return Err(format!(
                    "shared table {t}: {} users recorded, {:?} attached",
                    tab.users,
                    users.get(&(t as u32))
                ));
            }
            if tab.label.is_none() && self.keyed.get(&tab.key) != Some(&(t as u32)) {
                return Err(format!("shared table {t} is not found by its key"));
            }
        }
        if tables != self.pt.tables {
            return Err(format!(
                "tables by level {:?}, expected {tables:?}",
                self.pt.tables
            ));
        }
        let bytes: u64 = (1..=levels)
            .map(|l| tables[l as usize - 1] * g.table_bytes(l))
            .sum();
        if bytes != self.pt.bytes || self.pt.bytes > self.pt.bytes_peak {
            return Err(format!(
                "table bytes {} (peak {}), expected {bytes}",
                self.pt.bytes, self.pt.bytes_peak
            ));
        }
        let mut mapped = 0u64;
        for o in &self.objects {
            o.each_mapped(|_, c| mapped += self.chains.len(c) as u64);
        }
        if mapped != leaves {
            return Err(format!("{mapped} reverse-map entries for {leaves} leaves"));
        }
        let plain = self.rmap.get(Method::PteChains);
        if plain.bytes != mapped * 2 * self.cfg.rmap.pointer_bytes {
            return Err(format!(
                "pte-chains holds {} bytes for {mapped} entries",
                plain.bytes
            ));
        }
        Ok(())
    }

    /// The entries each upper level of `p`'s tables must have, from its leaves.
    fn expected_entries(&self, p: &Process) -> Vec<BTreeMap<u64, u32>> {
        let g = self.cfg.geometry;
        let levels = g.levels();
        let mut e: Vec<BTreeMap<u64, u32>> = vec![BTreeMap::new(); levels as usize];
        let sh1 = g.bits(1) as u32;
        let mut last = None;
        for &(s, t) in p.pop[0].runs() {
            for b in (s >> sh1)..=((t - 1) >> sh1) {
                if last != Some(b) {
                    *e[1].entry(b).or_insert(0) += 1;
                    last = Some(b);
                }
            }
        }
        for l in 2..=levels {
            for &(s, t) in p.pop[l as usize - 1].runs() {
                for li in s..t {
                    *e[l as usize - 1].entry(li).or_insert(0) += 1;
                }
            }
        }
        for (span, t) in p.attached.all() {
            let level = self.tables[t as usize].level;
            *e[level as usize].entry(span).or_insert(0) += 1;
        }
        if self.cfg.prealloc_below_root && levels >= 2 {
            let below = levels - 1;
            for i in 0..self.cfg.user_top.div_ceil(1u64 << g.table_shift(below)) {
                *e[below as usize - 1].entry(i << g.bits(below)).or_insert(0) += 1;
            }
        }
        // Entries are keyed by entry index; turn them into per-table counts
        // level by level, each table adding an entry above.
        let mut out: Vec<BTreeMap<u64, u32>> = vec![BTreeMap::new(); levels as usize];
        for l in 2..levels {
            let entries = std::mem::take(&mut e[l as usize - 1]);
            for (idx, n) in entries {
                let table = idx >> g.bits(l);
                *out[l as usize - 1].entry(table).or_insert(0) += n;
            }
            let tabs: Vec<u64> = out[l as usize - 1].keys().copied().collect();
            for t in tabs {
                *e[l as usize].entry(t).or_insert(0) += 1;
            }
        }
        out
    }
}

fn distinct_blocks(set: &super::ivset::IntervalSet, sh: u32) -> u64 {
    let mut n = 0;
    let mut last = None;
    for &(s, e) in set.runs() {
        let (a, b) = (s >> sh, (e - 1) >> sh);
        let a = if last == Some(a) { a + 1 } else { a };
        if b >= a {
            n += b - a + 1;
        }
        last = Some(b);
    }
    n
}
