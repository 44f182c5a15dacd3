//! A machine's time: the page-table geometry, TLB and cost sections of a
//! machine file (`configs/machines/*.toml` with `[caches]` and `[costs]`),
//! and the table layout each page size of a study is walked with.

use pagelab_cache::{CostSpec, FramePlacement, NestedSpec, Placement, TableLayout};
use pagelab_core::PageSize;
use pagelab_machine::Machine;
use pagelab_mm::pagetable::Geometry;
use pagelab_tlb::TlbConfig;

/// A machine whose translation costs time: its page table, TLB and caches.
#[derive(Clone, Debug)]
pub struct CostMachine {
    /// Its name.
    pub name: String,
    /// One line about it.
    pub description: String,
    /// Where its figures come from.
    pub source: String,
    /// The page-table geometry.
    pub geometry: Geometry,
    /// The TLB.
    pub tlb: TlbConfig,
    /// Caches, walk caches, latencies.
    pub cost: CostSpec,
    /// Bytes of physical memory (`phys.memory`), over which a scattered
    /// placement spreads the frames.
    pub memory: u64,
}

impl CostMachine {
    /// The time of `m` with the TLB `tlb` (the machine's own, or one that
    /// replaces it): None when the machine file gives no caches and costs.
    /// A TLB with another number of levels than `costs.tlb_hit` has values
    /// is an error naming both.
    pub fn new(m: &Machine, tlb: &TlbConfig) -> Result<Option<CostMachine>, String> {
        let Some(cost) = &m.cost else {
            return Ok(None);
        };
        let levels = pagelab_machine::tlb_levels(tlb);
        if levels != cost.costs.tlb_hit.len() {
            return Err(format!(
                "TLB {} has {levels} level(s), but machine {} gives costs.tlb_hit for {}: give a TLB with as many levels, or a machine file whose tlb_hit matches",
                tlb.name,
                m.name,
                cost.costs.tlb_hit.len()
            ));
        }
        if let Some(span) = cost.frames.span.filter(|&s| s > m.phys.memory.0) {
            return Err(format!(
                "machine {}: field `frames.span`: {} is more than the machine's memory (phys.memory = {}): frames are scattered over part of memory, at most all of it",
                m.name,
                pagelab_core::Bytes(span),
                m.phys.memory
            ));
        }
        Ok(Some(CostMachine {
            name: m.name.clone(),
            description: m.description.clone(),
            source: m.source.clone(),
            geometry: m.geometry,
            tlb: tlb.clone(),
            cost: cost.clone(),
            memory: m.phys.memory.0,
        }))
    }

    /// Where a run's frames lie, as `[frames]` says.
    pub fn placement(&self) -> Placement {
        match self.cost.frames.placement {
            FramePlacement::FirstTouch => Placement::FirstTouch,
            FramePlacement::Scattered => Placement::Scattered {
                memory: self.cost.frames.span.unwrap_or(self.memory),
                neighbours: (self.cost.frames.neighbours.unwrap_or(0.0)
                    * f64::from(pagelab_cache::NEIGHBOURS_ONE))
                .round() as u32,
            },
        }
    }

    /// Where the host's frames lie under nested paging, as `[nested] host_frames` says:
    /// scattered over as much memory as the guest has, or in first-touch order.
    pub fn host_placement(&self) -> Placement {
        // A machine without a `[nested]` section places the host's frames as an empty one does.
        let frames = self
            .cost
            .nested
            .as_ref()
            .map_or_else(|| NestedSpec::default().host_frames, |n| n.host_frames);
        match frames {
            FramePlacement::Scattered => Placement::scattered(self.memory),
            FramePlacement::FirstTouch => Placement::FirstTouch,
        }
    }

    /// The table a run of fixed page size `size` walks: the machine's own
    /// when it can map `size` (leaves at the level that maps it, a contiguous
    /// run counting as its first entry's level), else the geometry Linux
    /// uses with `size` as its base page ([`Geometry::for_base`]).
    pub fn layout(&self, size: PageSize) -> TableLayout {
        let mut l = match self.geometry.placement(size) {
            Some(p) => layout_of(&self.geometry, p.level),
            None => layout_of(&Geometry::for_base(size), 1),
        };
        l.page_shift = size.shift();
        l
    }
}

/// The walk-relevant shape of `g` with leaves at `leaf`.
pub(crate) fn layout_of(g: &Geometry, leaf: u8) -> TableLayout {
    let bits: Vec<u32> = (1..=g.levels()).map(|l| g.bits(l) as u32).collect();
    TableLayout::uniform(g.base().shift(), &bits, leaf, g.entry_bytes() as u32)
}

/// The host's table under nested paging: x86-64, leaves of `host` (4K, 2M or 1G).
pub(crate) fn host_layout(host: PageSize) -> Result<TableLayout, String> {
    let g = Geometry::x86_64();
    match g.placement(host) {
        Some(p) if p.run_shift == 0 => Ok(layout_of(&g, p.level)),
        _ => Err(format!(
            "--virt nested:host={host}: the host page size must be 4K, 2M or 1G"
        )),
    }
}
