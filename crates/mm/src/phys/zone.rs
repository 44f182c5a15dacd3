//! Zones: physical memory split into ranges, each its own buddy allocator,
//! with a fallback order and an optional large-page zone reserved at boot.

use super::config::{Layout, FRAME_BYTES};
use super::nodes::{MemPolicy, NumaState};
use super::numa::NumaConfig;
use super::pcp::{PageTemp, Pcp, PcpConfig, PcpStats};
use super::stats::{unusable_index, Fragmentation, PhysStats, ZoneStats};
use super::{
    BuddyAllocator, ConfigError, FrameAllocator, Lru, PhysConfig, PhysError, SuperpageReclaim,
    Watermarks, ZoneId, ZoneKind, ZonePref,
};
use pagelab_core::{Order, Pfn};

/// One zone: its kind and its allocator.
#[derive(Clone, Debug)]
pub struct Zone {
    /// `dma32`, `normal` or `large`.
    pub kind: ZoneKind,
    /// The zone's frames.
    pub buddy: BuddyAllocator,
    /// The NUMA node the zone lies on (0 on a machine of one node).
    pub node: usize,
}

/// Physical memory: zones in ascending physical order, a fallback order, and
/// the LRU lists of every zone.
#[derive(Clone, Debug)]
pub struct PhysMem {
    zones: Vec<Zone>,
    /// Zone indices tried by `ZonePref::Any`.
    fallback: Vec<usize>,
    max_order: u8,
    large_order: Option<u8>,
    large_exclusive: bool,
    report_order: u8,
    fallbacks: u64,
    failures: Vec<u64>,
    lru: Lru,
    watermarks: Vec<Watermarks>,
    reclaim: bool,
    superpages: SuperpageReclaim,
    /// Nodes, on a NUMA machine.
    numa: Option<NumaState>,
    /// Per-CPU hot and cold page lists, when modelled.
    pcp: Option<Pcp>,
}

impl PhysMem {
    /// Physical memory laid out as `cfg` says, all free.
    pub fn new(cfg: &PhysConfig) -> Result<PhysMem, ConfigError> {
        Self::build(cfg, cfg.layout()?, None)
    }

    /// Physical memory laid out as `cfg` says, with every zone split at the
    /// boundaries of `numa`'s nodes (node 0 lowest), allocating under
    /// `policy`. `numa` must hold exactly `cfg`'s memory.
    pub fn with_numa(
        cfg: &PhysConfig,
        numa: &NumaConfig,
        policy: MemPolicy,
    ) -> Result<PhysMem, ConfigError> {
        numa.validate(cfg.memory)?;
        policy
            .check(numa.nodes.len())
            .map_err(|message| ConfigError {
                field: "numa",
                message: format!("memory policy {policy}: {message}"),
            })?;
        let mut layout = cfg.layout()?;
        let mut ends = Vec::new();
        let mut end = 0;
        for n in &numa.nodes {
            end += n.memory.0 / FRAME_BYTES;
            ends.push(end);
        }
        let mut zones = Vec::new();
        let mut nodes = Vec::new();
        for &(kind, start, frames) in &layout.zones {
            let mut at = start;
            while at < start + frames {
                let node = ends.partition_point(|&e| e <= at);
                let stop = ends[node].min(start + frames);
                zones.push((kind, at, stop - at));
                nodes.push(node);
                at = stop;
            }
        }
        if zones.len() > 63 {
            return Err(ConfigError {
                field: "numa.nodes",
                message: format!(
                    "{} zones over the nodes: at most 63 (nodes x zones per node)",
                    zones.len()
                ),
            });
        }
        let frames: Vec<u64> = zones.iter().map(|z| z.2).collect();
        layout.watermarks =
            super::watermarks::per_zone(cfg.watermarks.as_ref(), cfg.memory.0, &frames);
        layout.zones = zones;
        let ranks: Vec<(usize, usize)> = layout
            .zones
            .iter()
            .zip(&nodes)
            .map(|(z, &node)| {
                let rank = layout.fallback.iter().position(|&k| k == z.0);
                (node, rank.unwrap_or(usize::MAX))
            })
            .collect();
        let state = NumaState::new(numa, &ranks, policy);
        let mut mem = Self::build(cfg, layout, Some(nodes))?;
        mem.numa = Some(state);
        Ok(mem)
    }

    fn build(
        cfg: &PhysConfig,
        layout: Layout,
        nodes: Option<Vec<usize>>,
    ) -> Result<PhysMem, ConfigError> {
        let mut zones = Vec::new();
        for (i, &(kind, start, frames)) in layout.zones.iter().enumerate() {
            let buddy =
                BuddyAllocator::new(Pfn(start), frames, Order(layout.max_order)).map_err(|e| {
                    ConfigError {
                        field: "memory",
                        message: e.to_string(),
                    }
                })?;
            let node = nodes.as_ref().map_or(0, |n| n[i]);
            zones.push(Zone { kind, buddy, node });
        }
        let index = |k: ZoneKind| zones.iter().position(|z| z.kind == k);
        let fallback = layout.fallback.iter().filter_map(|&k| index(k)).collect();
        Ok(PhysMem {
            lru: Lru::new(zones.len()),
            zones,
            fallback,
            max_order: layout.max_order,
            large_order: layout.large_order,
            large_exclusive: layout.large_exclusive,
            report_order: layout.report_order,
            fallbacks: 0,
            failures: vec![0; layout.max_order as usize + 1],
            watermarks: layout.watermarks,
            reclaim: cfg.reclaim,
            superpages: cfg.reclaim_superpages,
            numa: None,
            pcp: None,
        })
    }

    /// Puts order-0 allocations and frees through per-CPU hot and cold lists
    /// of every zone for `cpus` CPUs (see [`PcpConfig`]), all empty.
    pub fn set_pcp(&mut self, cfg: PcpConfig, cpus: u32) {
        self.pcp = Some(Pcp::new(cfg, cpus, self.zones.len()));
    }

    /// The CPU that allocates and frees from now on (its per-CPU lists).
    pub fn set_cpu(&mut self, cpu: u32) {
        if let Some(p) = &mut self.pcp {
            p.set_cpu(cpu);
        }
    }

    /// What the per-CPU lists counted, when they are modelled.
    pub fn pcp_stats(&self) -> Option<PcpStats> {
        self.pcp.as_ref().map(Pcp::stats)
    }

    /// Free frames on the per-CPU lists of zone `id` (the buddy allocator
    /// counts them as allocated, as Linux's `NR_FREE_PAGES` leaves them out).
    pub fn zone_pcp_pages(&self, id: ZoneId) -> u64 {
        self.pcp.as_ref().map_or(0, |p| p.zone_pages(id.0))
    }

    /// One allocation attempt on zone `z`: through its per-CPU lists when
    /// modelled, else from its buddy allocator.
    fn take(&mut self, z: usize, order: Order, temp: PageTemp) -> Option<Pfn> {
        match &mut self.pcp {
            Some(p) => p.alloc(&mut self.zones[z], z, order, temp),
            None => self.zones[z].buddy.alloc(order),
        }
    }

    /// Allocates as [`FrameAllocator::alloc`] does, an order-0 page from the
    /// `temp` list (the trait's `alloc` takes a hot page). When no allowed
    /// zone has a page, the per-CPU lists are emptied into their zones and
    /// the allocation tried once more.
    pub fn alloc_temp(&mut self, order: Order, pref: ZonePref, temp: PageTemp) -> Option<Pfn> {
        let mut got = self.alloc_once(order, pref, temp);
        if got.is_none() {
            let zones = &mut self.zones;
            // A drain fails only on broken bookkeeping, which `check` reports.
            let drained = self.pcp.as_mut().map(|p| p.drain_all(zones));
            if let Some(Ok(true)) = drained {
                got = self.alloc_once(order, pref, temp);
            }
        }
        if got.is_none() {
            self.record_failure(order.0);
        }
        got
    }

    /// Frees as [`FrameAllocator::free`] does, an order-0 page onto the
    /// `temp` list (the trait's `free` gives it to the hot list).
    pub fn free_temp(&mut self, pfn: Pfn, order: Order, temp: PageTemp) -> Result<(), PhysError> {
        let z = self.zone_index(pfn, order)?;
        match &mut self.pcp {
            Some(p) => p.free(&mut self.zones[z], z, pfn, order, temp),
            None => self.zones[z].buddy.free(pfn, order),
        }
    }

    fn alloc_once(&mut self, order: Order, pref: ZonePref, temp: PageTemp) -> Option<Pfn> {
        match pref {
            ZonePref::Only(kind) => {
                let id = self.zone_id(kind)?;
                self.take(id.0, order, temp)
            }
            ZonePref::Any if self.numa.is_some() => self.alloc_numa(order, temp),
            ZonePref::Any => {
                let mut tried = 0;
                let mut got = None;
                for i in 0..self.fallback.len() {
                    let z = self.fallback[i];
                    if !self.allowed(z, order.0) {
                        continue;
                    }
                    tried += 1;
                    got = self.take(z, order, temp);
                    if got.is_some() {
                        break;
                    }
                }
                if got.is_some() && tried > 1 {
                    self.fallbacks += 1;
                }
                got
            }
        }
    }

    /// The NUMA state, on a machine of several nodes.
    pub fn numa(&self) -> Option<&NumaState> {
        self.numa.as_ref()
    }

    /// The NUMA state, to set the running process and count references.
    pub fn numa_mut(&mut self) -> Option<&mut NumaState> {
        self.numa.as_mut()
    }

    /// The zones, in ascending physical order.
    pub fn zones(&self) -> &[Zone] {
        &self.zones
    }

    /// A zone by index.
    pub fn zone(&self, id: ZoneId) -> Option<&Zone> {
        self.zones.get(id.0)
    }

    /// The index of the zone of `kind`, if it exists.
    pub fn zone_id(&self, kind: ZoneKind) -> Option<ZoneId> {
        self.zones.iter().position(|z| z.kind == kind).map(ZoneId)
    }

    /// The zone holding `pfn`. O(zones).
    pub fn zone_of(&self, pfn: Pfn) -> Option<ZoneId> {
        self.zones
            .iter()
            .position(|z| z.buddy.contains(pfn))
            .map(ZoneId)
    }

    /// The order reported as the fragmentation figure.
    pub fn report_order(&self) -> Order {
        Order(self.report_order)
    }

    /// Bytes per frame (4K).
    pub fn frame_bytes(&self) -> u64 {
        FRAME_BYTES
    }

    /// Zone `id`'s watermarks, in frames.
    pub fn watermarks(&self, id: ZoneId) -> Watermarks {
        self.watermarks.get(id.0).copied().unwrap_or_default()
    }

    /// Whether memory is reclaimed when it runs low.
    pub fn reclaim_enabled(&self) -> bool {
        self.reclaim
    }

    /// How reclaim treats superpages.
    pub fn superpage_reclaim(&self) -> SuperpageReclaim {
        self.superpages
    }

    /// Free frames in zone `id` (0 for an unknown zone).
    pub fn zone_free(&self, id: ZoneId) -> u64 {
        self.zones.get(id.0).map_or(0, |z| z.buddy.free_frames())
    }

    /// The LRU lists.
    pub fn lru(&self) -> &Lru {
        &self.lru
    }

    /// The LRU lists, to add, touch, remove and pick victims.
    pub fn lru_mut(&mut self) -> &mut Lru {
        &mut self.lru
    }

    /// The index of the zone a block must belong to, or an error naming the range.
    fn zone_index(&self, pfn: Pfn, order: Order) -> Result<usize, PhysError> {
        let end = self.zones.last().map_or(Pfn(0), |z| z.buddy.end());
        self.zone_of(pfn)
            .map(|id| id.0)
            .ok_or(PhysError::OutOfRange {
                pfn,
                order: order.0,
                start: Pfn(0),
                end,
            })
    }

    /// Whether `ZonePref::Any` may take `order` from zone `z`.
    fn allowed(&self, z: usize, order: u8) -> bool {
        self.zones[z].kind != ZoneKind::Large
            || !self.large_exclusive
            || self.large_order.is_some_and(|l| order >= l)
    }

    /// `ZonePref::Any` on a NUMA machine: the zones of the policy's node
    /// order (only the bound nodes' under `membind`). With reclaim on, a
    /// first pass passes over zones an allocation would take below their low
    /// watermark, as Linux's fast path does, so that a full local node falls
    /// back to the next node before kswapd is woken; a second pass takes any
    /// free block.
    fn alloc_numa(&mut self, order: Order, temp: PageTemp) -> Option<Pfn> {
        let numa = self.numa.as_mut().expect("NUMA machine");
        let (list, mask) = numa.zonelist();
        let list: Vec<usize> = list
            .iter()
            .copied()
            .filter(|&z| mask.is_none_or(|m| m.contains(&self.zones[z].node)))
            .collect();
        let need = 1u64 << order.0;
        let passes: &[bool] = if self.reclaim {
            &[true, false]
        } else {
            &[false]
        };
        for &watch in passes {
            for (i, &z) in list.iter().enumerate() {
                if !self.allowed(z, order.0) {
                    continue;
                }
                let free = self.zones[z].buddy.free_frames();
                if watch && free < need + self.watermarks[z].low {
                    continue;
                }
                if let Some(pfn) = self.take(z, order, temp) {
                    if i > 0 {
                        self.fallbacks += 1;
                    }
                    if let Some(n) = self.numa.as_mut() {
                        n.count_alloc(z, need);
                    }
                    return Some(pfn);
                }
            }
        }
        None
    }

    fn record_failure(&mut self, order: u8) {
        let i = order as usize;
        if i >= self.failures.len() {
            self.failures.resize(i + 1, 0);
        }
        self.failures[i] += 1;
    }

    /// Free blocks per order summed over zones.
    pub fn free_blocks(&self) -> Vec<u64> {
        let mut sum = vec![0; self.max_order as usize + 1];
        for z in &self.zones {
            for (s, &n) in sum.iter_mut().zip(z.buddy.free_blocks()) {
                *s += n;
            }
        }
        sum
    }

    /// Verifies every zone's allocator and the LRU lists; see [`BuddyAllocator::check`].
    pub fn check(&self) -> Result<(), PhysError> {
        for (i, z) in self.zones.iter().enumerate() {
            z.buddy
                .check()
                .map_err(|e| PhysError::Invariant(format!("zone {}: {e}", z.kind.name())))?;
            if i > 0 && self.zones[i - 1].buddy.end() != z.buddy.start() {
                return Err(PhysError::Invariant(format!(
                    "zone {} does not follow the zone before it",
                    z.kind.name()
                )));
            }
        }
        if let Some(p) = &self.pcp {
            p.check(&self.zones)?;
        }
        self.lru.check()
    }
}

impl FrameAllocator for PhysMem {
    fn alloc(&mut self, order: Order, pref: ZonePref) -> Option<Pfn> {
        self.alloc_temp(order, pref, PageTemp::Hot)
    }

    fn free(&mut self, pfn: Pfn, order: Order) -> Result<(), PhysError> {
        self.free_temp(pfn, order, PageTemp::Hot)
    }

    fn split(&mut self, pfn: Pfn, order: Order) -> Result<(), PhysError> {
        let z = self.zone_index(pfn, order)?;
        self.zones[z].buddy.split(pfn, order)
    }

    fn free_count(&self, order: Order) -> u64 {
        self.zones.iter().map(|z| z.buddy.free_count(order)).sum()
    }

    fn free_frames(&self) -> u64 {
        let listed = self.pcp.as_ref().map_or(0, Pcp::pages);
        self.zones
            .iter()
            .map(|z| z.buddy.free_frames())
            .sum::<u64>()
            + listed
    }

    fn total_frames(&self) -> u64 {
        self.zones.iter().map(|z| z.buddy.total_frames()).sum()
    }

    fn max_order(&self) -> Order {
        Order(self.max_order)
    }

    fn unusable_index(&self, order: Order) -> f64 {
        unusable_index(&self.free_blocks(), order.0)
    }

    fn stats(&self) -> PhysStats {
        let zones: Vec<ZoneStats> = self
            .zones
            .iter()
            .enumerate()
            .map(|(i, z)| ZoneStats {
                name: match self.numa {
                    Some(_) => format!("node{}/{}", z.node, z.kind.name()),
                    None => z.kind.name().into(),
                },
                buddy: z.buddy.buddy_stats(),
                lru: self.lru.zone_stats(ZoneId(i)),
            })
            .collect();
        let free_blocks = self.free_blocks();
        let index: Vec<f64> = (0..=self.max_order)
            .map(|k| unusable_index(&free_blocks, k))
            .collect();
        let (total, free) = (self.total_frames(), self.free_frames());
        PhysStats {
            total_frames: total,
            free_frames: free,
            used_frames: total - free,
            allocs: zones.iter().map(|z| z.buddy.allocs).sum(),
            frees: zones.iter().map(|z| z.buddy.frees).sum(),
            fallbacks: self.fallbacks,
            failures_by_order: self.failures.clone(),
            fragmentation: Fragmentation {
                order: self.report_order,
                unusable_index: index[self.report_order as usize],
            },
            unusable_index: index,
            free_blocks,
            zones,
        }
    }
}

#[cfg(test)]
#[path = "zone_tests.rs"]
mod tests;
