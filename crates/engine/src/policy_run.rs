//! Runs of the memory-management model: one per policy, all fed in one pass.
//! Each run steps a [`Mm`] (VMAs, page tables, physical memory, the policy)
//! and a TLB hierarchy holding entries of whatever size the page table maps.

use crate::asids::Asids;
use crate::driver::{EngineError, Progress, BATCH};
use pagelab_core::{Event, MemRef, PageSize, Pfn, SourceInfo, VirtAddr};
use pagelab_mm::phys::{FrameAllocator, PhysConfig};
use pagelab_mm::policy::PolicySpec;
use pagelab_mm::system::{Invalidate, Mm};
use pagelab_report::{PolicyStats, RefCounts, RunStats, SimResult, SIM_SCHEMA};
use pagelab_tlb::{Outcome, Side, TlbConfig, TlbHierarchy};
use pagelab_trace::{TraceSource, VforkOrder};
use rustc_hash::FxHashSet;
use std::time::Instant;

/// What the policy runs simulate.
#[derive(Clone, Debug)]
pub struct PolicyConfig {
    /// The policies, each a run of its own.
    pub policies: Vec<PolicySpec>,
    /// The TLB every run uses.
    pub tlb: TlbConfig,
    /// Physical memory.
    pub phys: PhysConfig,
    /// Reject the trace at its first contradictory event instead of counting it.
    pub strict: bool,
    /// How a write to a shared private superpage is copied.
    pub cow: pagelab_mm::fault::CowMode,
    /// Fault-around, read-around and a warm page cache for file faults (default: all off).
    pub file_faults: pagelab_mm::fault_around::FileFaults,
    /// The modelled machine's page-table geometry, kernel and nodes (`None`:
    /// today's default machine, the geometry following each policy's base page).
    pub platform: Option<pagelab_mm::platform::Platform>,
    /// Keep each process's mappings at its exit, with the pages and large folios each
    /// maps ([`pagelab_mm::exit_map`]), in the run's `exit_mappings` (`validate
    /// --per-mapping`).
    pub exit_mappings: bool,
}

/// One policy's run.
struct PolicyRun {
    mm: Mm,
    tlb: TlbHierarchy,
    /// The trace's references fed so far, instructions then data (every run sees them
    /// all: the trace's counts, taken here rather than in a pass of their own).
    refs: [u64; 2],
    accesses: [u64; 2],
    misses: [u64; 2],
    walk_refs: u64,
    /// Distinct base pages touched per side, for the footprints.
    pages: [FxHashSet<u64>; 2],
    frag_worst: f64,
    /// Per side, the 4K page of the last access and whether its page was
    /// writable: a repeat needs no translation and hits the side's most recent
    /// L1 entry. Forgotten at every event and tick (mappings may change).
    last: [u64; 2],
    last_writable: [bool; 2],
    /// Accesses answered that way, added to the L1 counters at the end.
    filtered: [u64; 2],
    /// Reclaim runs seen: a run clears referenced bits, so repeats must be
    /// translated again (setting them) after one.
    reclaims: u64,
    /// Per side, the 4K frame of the last translated access: a repeat is
    /// counted against its node on a NUMA machine.
    numa_last: [Pfn; 2],
    /// Tagged TLB entries kept across process switches (`--asids`).
    asids: Option<Asids>,
}

impl PolicyRun {
    fn new(spec: &PolicySpec, cfg: &PolicyConfig) -> Result<PolicyRun, EngineError> {
        let mut mm = Mm::on(spec, &cfg.phys, cfg.platform.as_ref())
            .map_err(|e| EngineError::Model(e.to_string()))?;
        mm.set_cow(cfg.cow);
        mm.set_file_faults(cfg.file_faults);
        if cfg.exit_mappings {
            mm.record_exit_mappings();
        }
        Ok(PolicyRun {
            asids: match cfg.tlb.asids {
                Some(n) => Some(
                    Asids::new(n, mm.machine().geometry().va_bits()).map_err(EngineError::Model)?,
                ),
                None => None,
            },
            tlb: TlbHierarchy::new(&cfg.tlb)?,
            refs: [0; 2],
            accesses: [0; 2],
            misses: [0; 2],
            walk_refs: 0,
            pages: [FxHashSet::default(), FxHashSet::default()],
            frag_worst: 0.0,
            last: [u64::MAX; 2],
            last_writable: [false; 2],
            filtered: [0; 2],
            reclaims: 0,
            numa_last: [Pfn(0); 2],
            mm,
        })
    }

    fn feed(
        &mut self,
        events: &[Event],
        first_index: u64,
        strict: bool,
    ) -> Result<(), EngineError> {
        let spec = self.mm.spec().to_string();
        // The record's index in the trace (0-based, every event counted, as
        // `--strict` reports it), so that a model error can be found again.
        let at = |i: usize| {
            let spec = &spec;
            move |e: pagelab_mm::machine::MmError| {
                EngineError::Model(format!(
                    "record {} (under {spec}): {e}",
                    first_index + i as u64
                ))
            }
        };
        for (i, ev) in events.iter().enumerate() {
            match ev {
                Event::Ref(r) => {
                    self.refs[usize::from(!r.kind.is_instr())] += 1;
                    self.reference(r).map_err(at(i))?;
                }
                other => {
                    self.last = [u64::MAX; 2];
                    let before = self.anomalies();
                    let pid = self.mm.pid();
                    let inv = self.mm.event(other).map_err(at(i))?;
                    self.invalidate(other, pid, inv);
                    if strict && self.anomalies() > before {
                        return Err(EngineError::Model(format!(
                            "record {}: {other:?} contradicts the trace so far (--strict)",
                            first_index + i as u64
                        )));
                    }
                    self.debug_check(first_index + i as u64)?;
                }
            }
        }
        self.mm.tick().map_err(|e| {
            EngineError::Model(format!(
                "after record {} (under {spec}): {e}",
                (first_index + events.len() as u64).saturating_sub(1)
            ))
        })?;
        self.invalidate_remapped();
        self.debug_check(first_index + events.len() as u64)?;
        self.last = [u64::MAX; 2];
        let frag = self.mm.machine().phys.stats().fragmentation.unusable_index;
        self.frag_worst = self.frag_worst.max(frag);
        Ok(())
    }

    /// In debug builds, every invariant of the model after each event and each
    /// batch of references (frames, reference counts, VMAs, the policy's own).
    fn debug_check(&self, record: u64) -> Result<(), EngineError> {
        if cfg!(debug_assertions) {
            self.mm.check().map_err(|e| {
                EngineError::Model(format!(
                    "invariant broken under {} after record {record}: {e}",
                    self.mm.spec()
                ))
            })?;
        }
        Ok(())
    }

    /// Forgets the translations event `ev` of address space `pid` changed. With
    /// ASIDs a switch keeps every process's entries, an exit or exec leaves
    /// them for the slot's next owner, and the rest touch `pid`'s only.
    fn invalidate(&mut self, ev: &Event, pid: u32, inv: Invalidate) {
        let tlb = &mut self.tlb;
        match (&mut self.asids, inv) {
            (_, Invalidate::Nothing) => {}
            (None, Invalidate::Range(s, e)) => tlb.invalidate_range(s, e - s),
            (None, Invalidate::All) => tlb.flush(),
            (Some(a), Invalidate::Range(s, e)) => a.invalidate(s, e, tlb),
            // Tags are per address space, as Linux's ASIDs are per mm: a task
            // running in another's (a vfork child) uses that one's.
            (Some(a), Invalidate::All) => match ev {
                Event::Switch(_) => {
                    a.switch(self.mm.pid(), tlb);
                }
                // A task that ran in another's space leaves it to its owner.
                Event::Exit { .. } | Event::Exec(_) if self.mm.pid() != pid => a.leave(),
                Event::Exit { .. } | Event::Exec(_) => a.drop_space(pid),
                _ => a.flush_current(tlb),
            },
        }
    }

    /// Forgets translations a policy changed on its own (promotion, collapse),
    /// in every address space.
    fn invalidate_remapped(&mut self) {
        for (s, e) in self.mm.take_invalidations() {
            match &self.asids {
                Some(a) => self
                    .tlb
                    .invalidate_range_masked(s, e - s, a.untagged_mask()),
                None => self.tlb.invalidate_range(s, e - s),
            }
            self.last = [u64::MAX; 2];
        }
    }

    fn anomalies(&self) -> u64 {
        let s = &self.mm.machine().stats;
        s.refs_outside_vmas + s.events_on_nothing
    }

    /// Every page the reference touches, as the page table maps it.
    fn reference(&mut self, r: &MemRef) -> Result<(), pagelab_mm::machine::MmError> {
        let side = usize::from(!r.kind.is_instr());
        let s = if side == 0 { Side::Instr } else { Side::Data };
        let last = r.last_byte();
        let small = r.addr.vpn(PageSize::MIN).0;
        let one_page = small == last.vpn(PageSize::MIN).0;
        let write = r.kind.is_write();
        if one_page && small == self.last[side] && (!write || self.last_writable[side]) {
            self.accesses[side] += 1;
            self.filtered[side] += 1;
            if self.mm.is_numa() {
                self.mm.count_refs(self.numa_last[side], 1);
            }
            return Ok(());
        }
        self.last[side] = if one_page { small } else { u64::MAX };
        let mut addr = r.addr;
        loop {
            let t = self.mm.translate(addr, side == 0, write)?;
            self.invalidate_remapped();
            if self.mm.reclaim_runs() != self.reclaims {
                self.reclaims = self.mm.reclaim_runs();
                self.last = [u64::MAX; 2];
            }
            self.last_writable[side] = t.flags.contains(pagelab_mm::pagetable::PteFlags::WRITE);
            self.accesses[side] += 1;
            if self.mm.is_numa() {
                let pfn = t.frame_of(addr, self.mm.machine().base());
                self.numa_last[side] = pfn;
                self.mm.count_refs(pfn, 1);
            }
            let tagged = match &mut self.asids {
                Some(a) => a.tag(self.mm.pid(), addr, &mut self.tlb),
                None => addr,
            };
            let outcome = self.tlb.access_addr(s, tagged, t.size);
            if outcome == Outcome::Miss {
                self.misses[side] += 1;
                self.walk_refs += u64::from(t.levels);
            }
            let base = self.mm.machine().base();
            let page_end = t.start.saturating_add(t.size.bytes());
            // A hit in the side's own L1 on an entry of one base page: the lookup that put
            // the entry there (only this function fills the TLB) put its page in the set,
            // which only grows; so the page is there.
            if outcome != Outcome::L1Hit || t.size != base {
                for b in addr.vpn(base).0..=last.min(page_end.saturating_sub(1)).vpn(base).0 {
                    self.pages[side].insert(b);
                }
            }
            if page_end > last || page_end == VirtAddr(0) {
                return Ok(());
            }
            addr = page_end;
        }
    }

    fn stats(&self) -> RunStats {
        let m = self.mm.machine();
        let base = m.base();
        let s = &m.stats;
        let all = self.pages[0].union(&self.pages[1]).count() as u64;
        let tlb_levels = crate::study::level_stats(&self.tlb, self.filtered, [0; 2]);
        let anomalies = [
            ("refs_outside_vmas", s.refs_outside_vmas),
            ("events_on_nothing", s.events_on_nothing),
            ("unsupported_events", s.unsupported_events),
            ("writes_to_readonly", s.writes_to_readonly),
            ("inferred_vmas", s.inferred_vmas),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect();
        RunStats {
            page_size: base,
            itlb_accesses: self.accesses[0],
            itlb_misses: self.misses[0],
            dtlb_accesses: self.accesses[1],
            dtlb_misses: self.misses[1],
            code_footprint_bytes: self.pages[0].len() as u64 * base.bytes(),
            data_footprint_bytes: self.pages[1].len() as u64 * base.bytes(),
            footprint_bytes: all * base.bytes(),
            faults: s.faults,
            tlb_levels,
            mm: Some(PolicyStats {
                policy: self.mm.spec().to_string(),
                faults_by_size: s
                    .faults_by_size
                    .iter()
                    .map(|(k, n)| (k.to_string(), n))
                    .collect(),
                rss_bytes: s.rss_bytes,
                peak_rss_bytes: s.peak_rss_bytes,
                page_table_bytes: m.page_table_bytes(),
                walk_refs: self.walk_refs,
                promotions: s.promotions,
                demotions: s.demotions,
                preemptions: s.preemptions,
                copied_bytes: s.copied_bytes,
                zeroed_bytes: s.zeroed_bytes,
                fragmentation: m.phys.stats().fragmentation.unusable_index,
                fragmentation_worst: self.frag_worst,
                anomalies,
                reclaimed_bytes: s.reclaimed_bytes,
                swapped_out_bytes: s.swapped_out_bytes,
                swapped_in_bytes: s.swapped_in_bytes,
                swap_bytes: self.mm.swap().bytes(),
                major_faults: s.major_faults,
                swap_in_faults: s.swap_in_faults,
                cache_dropped_bytes: s.cache_dropped_bytes,
                written_back_bytes: s.written_back_bytes,
                file_read_bytes: s.file_read_bytes,
                file_superpage_faults: s.file_superpage_faults,
                kswapd_runs: s.kswapd_runs,
                direct_reclaims: s.direct_reclaims,
                reclaim_scanned: s.reclaim_scanned,
                reclaim_splits: s.reclaim_splits,
                reclaim_preemptions: s.reclaim_preemptions,
                faults_by_pid: self.mm.faults_by_task().clone(),
                policy_counters: self.mm.policy_counters(),
                exit_mappings: self
                    .mm
                    .exit_mappings()
                    .and_then(|x| serde_json::to_value(x).ok()),
                kernel: self
                    .mm
                    .kernel_stats()
                    .and_then(|k| serde_json::to_value(k).ok()),
                numa: self
                    .mm
                    .numa_stats()
                    .and_then(|n| serde_json::to_value(n).ok()),
                pcp: self
                    .mm
                    .pcp_stats()
                    .and_then(|p| serde_json::to_value(p).ok()),
            }),
            cost: None,
        }
    }
}

/// Runs every policy of `cfg` over `src` in one pass, in constant memory
/// whatever the trace length (the model's state grows with the pages touched).
///
/// The trace is read in the kernel's order of a vfork ([`VforkOrder`]): a
/// thread that vforked runs again only once its child has exec'd or exited,
/// whatever order the capture recorded (QEMU runs vfork as fork). Record
/// numbers in errors count in that order.
pub fn run_policies(
    src: &mut (dyn TraceSource + Send),
    cfg: &PolicyConfig,
    progress: &mut dyn Progress,
) -> Result<SimResult, EngineError> {
    let mut src = VforkOrder::new(src);
    let start = Instant::now();
    let mut runs = cfg
        .policies
        .iter()
        .map(|p| PolicyRun::new(p, cfg))
        .collect::<Result<Vec<_>, _>>()?;
    let info: SourceInfo = src.info();
    // The runs are stepped on a pool of the threads the run may use
    // (`with_threads`), or on this thread alone.
    let threads = crate::threads::threads().min(runs.len());
    let pool = if threads > 1 {
        Some(
            rayon::ThreadPoolBuilder::new()
                .num_threads(threads)
                .build()
                .map_err(|e| EngineError::Model(format!("cannot start the policy threads: {e}")))?,
        )
    } else {
        None
    };
    let mut batch = Vec::with_capacity(BATCH);
    let (mut refs, mut index, mut next_report) = ([0u64; 2], 0u64, 1u64 << 20);
    loop {
        batch.clear();
        if !src.fill(&mut batch, BATCH)? {
            break;
        }
        if runs.is_empty() {
            for ev in &batch {
                if let Event::Ref(r) = ev {
                    refs[usize::from(!r.kind.is_instr())] += 1;
                }
            }
        }
        match &pool {
            Some(pool) => pool.install(|| {
                use rayon::prelude::*;
                runs.par_iter_mut()
                    .try_for_each(|r| r.feed(&batch, index, cfg.strict))
            })?,
            None => runs
                .iter_mut()
                .try_for_each(|r| r.feed(&batch, index, cfg.strict))?,
        }
        index += batch.len() as u64;
        if let Some(r) = runs.first() {
            refs = r.refs;
        }
        if refs[0] + refs[1] >= next_report {
            progress.update(refs[0] + refs[1], start.elapsed());
            next_report += 1 << 20;
        }
    }
    progress.done();
    if cfg!(debug_assertions) {
        for r in &runs {
            r.mm.check().map_err(|e| {
                EngineError::Model(format!("invariant broken under {}: {e}", r.mm.spec()))
            })?;
        }
    }
    Ok(SimResult {
        schema: SIM_SCHEMA.to_string(),
        source: info,
        tlb: serde_json::to_value(&cfg.tlb).unwrap_or_default(),
        refs: RefCounts {
            instr: refs[0],
            data: refs[1],
        },
        runs: runs.iter().map(PolicyRun::stats).collect(),
        elapsed_seconds: Some(start.elapsed().as_secs_f64()),
        provenance: None,
        machine: None,
    })
}
