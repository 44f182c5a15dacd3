//! The whole model stepped event by event: a [`Machine`] and a [`Policy`],
//! with the event semantics of the trace (map, unmap, protect, advise, brk,
//! switch, exit) and the translation of every reference (faulting as needed).

use crate::fault::{self, CowMode};
use crate::machine::{Machine, MachineConfig, MmError};
use crate::pagetable::{PageTable, PteFlags, Translation};
use crate::phys::{FrameAllocator, PhysConfig};
use crate::policy::{Policy, PolicyImpl, PolicySpec};
use crate::reclaim::{Reclaimer, Swap};
use crate::vma::Vma;
use pagelab_core::{Backing, PageSize, VirtAddr};

mod events;
mod platform;
mod vfork;

/// Inferred VMAs cover naturally aligned blocks of this size.
pub const INFER_GRANULE: PageSize = PageSize::M2;

/// What the TLB model must forget after an event.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Invalidate {
    /// Nothing changed that a TLB may hold.
    Nothing,
    /// Translations in `[start, end)` changed.
    Range(VirtAddr, VirtAddr),
    /// Everything (another process runs now: no ASIDs are modelled).
    All,
}

/// One run of the model under one policy.
pub struct Mm {
    machine: Machine,
    policy: PolicyImpl,
    spec: PolicySpec,
    /// The address space the running task uses: its owner's pid (the task's
    /// own, but for a task running in another's, see `vfork.rs`).
    pid: u32,
    /// The running task's pid (the trace's last switch).
    task: u32,
    borrowed: vfork::Borrowed,
    seen_map_events: bool,
    cow: CowMode,
    invalidations: Vec<(VirtAddr, VirtAddr)>,
    swap: Swap,
    /// The base page size, whose frames the page table holds.
    base: PageSize,
    /// The kernel's memory, on a machine given by a platform.
    kernel: Option<crate::kmem::KernelStats>,
    /// Which CPU each process runs on.
    cpus: crate::placement::Cpus,
    /// Faults each task took (by pid), as the kernel counts a task's `min_flt`
    /// and `maj_flt`: a vfork child's in the address space it borrows are its own.
    faults_by_task: std::collections::BTreeMap<u32, u64>,
    /// Each process's mappings at its exit, in exit order, once asked for
    /// ([`Mm::record_exit_mappings`]).
    exit_mappings: Option<Vec<crate::exit_map::ExitProcess>>,
}

impl Mm {
    /// A model of `phys` under `spec`, on today's default machine.
    pub fn new(spec: &PolicySpec, phys: &PhysConfig) -> Result<Mm, MmError> {
        Mm::on(spec, phys, None)
    }

    /// A model of `phys` under `spec` on `platform` (its page-table geometry,
    /// kernel and nodes), or on today's default machine when `None`.
    pub fn on(
        spec: &PolicySpec,
        phys: &PhysConfig,
        platform: Option<&crate::platform::Platform>,
    ) -> Result<Mm, MmError> {
        let mut machine = Machine::new(&MachineConfig {
            phys: phys.clone(),
            base: spec.base(),
            geometry: platform.map(|p| p.geometry),
        })
        .map_err(|e| match e {
            MmError::Policy(m) => MmError::Policy(format!("policy `{spec}`: {m}")),
            e => e,
        })?;
        // Linux splits a mapping without its folio (machine/folios.rs); the other
        // policies' systems split both.
        machine.set_keep_folios(matches!(spec, PolicySpec::LinuxThp(_)));
        let uniform;
        let (numa, placement) = match platform {
            Some(p) => (&p.numa, p.placement.clone()),
            None => {
                uniform = crate::phys::numa::NumaConfig::uniform(phys.memory, 1);
                (&uniform, Default::default())
            }
        };
        if numa.nodes.len() > 1 {
            placement.check(numa).map_err(MmError::Policy)?;
            let policy = placement.policy.clone().resolve_all(numa.nodes.len());
            machine.phys = crate::phys::PhysMem::with_numa(phys, numa, policy)?;
        }
        if let Some(cfg) = platform.and_then(|p| p.pcp) {
            machine.phys.set_pcp(cfg, numa.cpus);
        }
        // Processes are placed when they first run; until then the first CPU allocates.
        let cpus = crate::placement::Cpus::new(numa, &placement);
        Ok(Mm {
            cpus,
            machine,
            policy: spec.build(),
            spec: spec.clone(),
            pid: 0,
            task: 0,
            borrowed: vfork::Borrowed::default(),
            seen_map_events: false,
            cow: CowMode::Whole,
            invalidations: Vec::new(),
            swap: Swap::default(),
            base: spec.base(),
            kernel: crate::kmem::KernelStats::on(platform, phys, spec.base())?,
            faults_by_task: Default::default(),
            exit_mappings: None,
        })
    }

    /// The policy this run models.
    pub fn spec(&self) -> &PolicySpec {
        &self.spec
    }

    /// The machine, for its counters.
    pub fn machine(&self) -> &Machine {
        &self.machine
    }

    /// The faults each task took, by pid.
    pub fn faults_by_task(&self) -> &std::collections::BTreeMap<u32, u64> {
        &self.faults_by_task
    }

    /// The policy's own counters.
    pub fn policy_counters(&self) -> serde_json::Value {
        self.policy.counters()
    }

    /// From now on keep each exiting process's mappings, with the pages and large folios
    /// each maps ([`crate::exit_map`]), for [`Mm::exit_mappings`].
    pub fn record_exit_mappings(&mut self) {
        self.exit_mappings.get_or_insert_with(Vec::new);
    }

    /// The mappings of each process at its exit, in exit order, when recorded.
    pub fn exit_mappings(&self) -> Option<&[crate::exit_map::ExitProcess]> {
        self.exit_mappings.as_deref()
    }

    /// Process `pid` exits, its address space whole: the policy counts what it maps, and
    /// its mappings are kept when asked for.
    fn exiting(&mut self, pid: u32) {
        self.policy.exit(&self.machine, pid);
        if let Some(list) = &mut self.exit_mappings {
            list.push(crate::exit_map::ExitProcess::of(&self.machine, pid));
        }
    }

    /// Times reclaim has run (kswapd and direct); each run may clear
    /// referenced bits and unmap pages of any process.
    pub fn reclaim_runs(&self) -> u64 {
        self.machine.stats.kswapd_runs + self.machine.stats.direct_reclaims
    }

    /// Swapped-out memory.
    pub fn swap(&self) -> &Swap {
        &self.swap
    }

    /// Periodic policy work, then reclaim if it took memory below a low watermark.
    pub fn tick(&mut self) -> Result<(), MmError> {
        self.account_kernel()?;
        self.policy.tick(&mut self.machine)?;
        self.collect_remapped();
        self.kswapd()
    }

    fn reclaimer(&mut self) -> Reclaimer<'_> {
        Reclaimer {
            m: &mut self.machine,
            policy: &mut self.policy,
            swap: &mut self.swap,
            inval: &mut self.invalidations,
            pid: self.pid,
        }
    }

    /// Reclaims the zones an allocation took below their low watermark, up to high.
    fn kswapd(&mut self) -> Result<(), MmError> {
        let zones = self.machine.take_wake();
        if zones != 0 {
            self.machine.stats.kswapd_runs += 1;
            self.reclaimer().run(zones)?;
        }
        Ok(())
    }

    /// Ranges of the current process whose translations a policy changed
    /// behind the trace's back (a promotion, a collapse) since the last call:
    /// the caller invalidates them in its TLB, as the kernel flushes them.
    pub fn take_invalidations(&mut self) -> Vec<(VirtAddr, VirtAddr)> {
        std::mem::take(&mut self.invalidations)
    }

    fn collect_remapped(&mut self) {
        for (pid, s, e) in self.policy.take_remapped() {
            // A collapse over swapped-out pages reads them back (khugepaged swaps in).
            self.machine.stats.swapped_in_bytes += self.swap.remove(pid, s, e);
            // Other processes' entries are gone anyway: a switch flushes the TLB.
            if pid == self.pid {
                self.invalidations.push((s, e));
            }
        }
    }

    /// The translation of `addr` for the current process, faulting the page in
    /// if needed. A reference outside every VMA creates an inferred VMA (the
    /// rule for traces without map events, see [`crate::vma::AddressSpace::infer`]);
    /// in a trace that has map events it is also counted as a contradiction.
    /// Every translation sets the page's referenced bit (and dirty bit for a
    /// write) for reclaim.
    pub fn translate(
        &mut self,
        addr: VirtAddr,
        instr: bool,
        write: bool,
    ) -> Result<Translation, MmError> {
        let pid = self.pid;
        if let Some(t) = self.machine.proc_mut(pid).pt.walk(addr) {
            self.machine.res.touch(t.pfn.to_pfn(self.base), write);
            if !write || t.flags.contains(PteFlags::WRITE) {
                return Ok(t);
            }
            let Some(vma) = self.machine.proc_mut(pid).aspace.find(addr).copied() else {
                return Ok(t);
            };
            if !fault::is_cow(&vma, &t) {
                // A write the protection forbids: the program would get SIGSEGV.
                self.machine.stats.writes_to_readonly += 1;
                return Ok(t);
            }
        }
        let before = self.machine.stats.faults;
        let t = self.fault(addr, instr, write);
        let taken = self.machine.stats.faults - before;
        if taken > 0 {
            *self.faults_by_task.entry(self.task).or_default() += taken;
        }
        t
    }

    /// The slow path of [`Mm::translate`]: a fault (with direct reclaim and
    /// a retry when memory runs out), swap-in accounting, then kswapd.
    fn fault(&mut self, addr: VirtAddr, instr: bool, write: bool) -> Result<Translation, MmError> {
        let pid = self.pid;
        self.place();
        // Checked before any policy sees the address: an inferred VMA cannot
        // reach past the last byte, and policies would call the failure to
        // map it a shortage of memory.
        if addr >= self.machine.va_end() {
            return Err(MmError::OutsideAddressSpace {
                addr,
                va_bits: self.machine.geometry().va_bits(),
            });
        }
        // Reclaim after the fault may take the page just mapped in a tiny
        // memory; then it is faulted again, and the last time kswapd waits
        // for the next fault (its zones stay woken): in a memory that the
        // page and what cannot be reclaimed fill (a huge zero page, say),
        // kswapd would otherwise take the page every time.
        for attempt in 0..3 {
            self.fault_reclaiming(addr, instr, write)?;
            let t = self.walk_after_fault(addr)?;
            self.machine.res.touch(t.pfn.to_pfn(self.base), write);
            // The new page reads back whatever of its range was swapped out
            // (a policy may map more than the page faulted on).
            let end = t.start.saturating_add(t.size.bytes());
            let bytes = self.swap.remove(pid, t.start, end);
            if bytes > 0 {
                let s = &mut self.machine.stats;
                s.major_faults += 1;
                s.swap_in_faults += 1;
                s.swapped_in_bytes += bytes;
            }
            if attempt < 2 {
                self.kswapd()?;
            }
            if let Some(t) = self.machine.proc_mut(pid).pt.walk(addr) {
                if !write || t.flags.contains(PteFlags::WRITE) || !self.is_cow_at(addr, &t) {
                    return Ok(t);
                }
            }
        }
        Err(MmError::Policy(format!(
            "reclaim took the page at {addr:#x} again and again right after its fault"
        )))
    }

    fn is_cow_at(&mut self, addr: VirtAddr, t: &Translation) -> bool {
        let pid = self.pid;
        self.machine
            .proc_mut(pid)
            .aspace
            .find(addr)
            .is_some_and(|v| fault::is_cow(v, t))
    }

    /// One fault, retried after direct reclaim while memory runs out and
    /// reclaim frees something.
    fn fault_reclaiming(
        &mut self,
        addr: VirtAddr,
        instr: bool,
        write: bool,
    ) -> Result<(), MmError> {
        loop {
            match self.fault_once(addr, instr, write) {
                Err(e @ MmError::OutOfMemory { .. }) if self.machine.res.enabled() => {
                    let before = self.machine.phys.free_frames();
                    self.machine.stats.direct_reclaims += 1;
                    let all = (1u64 << self.machine.phys.zones().len().min(63)) - 1;
                    self.reclaimer().run(all)?;
                    if self.machine.phys.free_frames() <= before {
                        return Err(e);
                    }
                }
                other => return other,
            }
        }
    }

    /// A write to a zero-page mapping. A 4K zero page gets one new zeroed
    /// base page (the kernel's `wp_page_copy`, never a larger folio); the huge
    /// zero page is replaced by whatever the policy maps for a write fault in
    /// the emptied range, a PMD page when it can (`do_huge_zero_wp_pmd`).
    fn zero_write_fault(
        &mut self,
        vma: &Vma,
        t: &Translation,
        addr: VirtAddr,
    ) -> Result<(), MmError> {
        let pid = self.pid;
        let (start, end) = (t.start, t.start + t.size.bytes());
        let removed = self.machine.unmap_range(pid, start, end)?;
        self.policy.release(&mut self.machine, pid, &removed)?;
        self.invalidations.push((start, end));
        if t.size == PageSize::K4 {
            let flags = PteFlags::from_prot(vma.prot);
            self.machine.fault_in(pid, addr, PageSize::K4, flags)
        } else {
            self.policy.fault(&mut self.machine, pid, vma, addr, true)
        }
    }

    /// One attempt at the fault for `addr`: copy-on-write of a present page,
    /// or a new page from the page cache or the policy.
    fn fault_once(&mut self, addr: VirtAddr, instr: bool, write: bool) -> Result<(), MmError> {
        let pid = self.pid;
        if let Some(t) = self.machine.proc_mut(pid).pt.walk(addr) {
            if !write || t.flags.contains(PteFlags::WRITE) {
                return Ok(());
            }
            let Some(vma) = self.machine.proc_mut(pid).aspace.find(addr).copied() else {
                return Ok(());
            };
            if !fault::is_cow(&vma, &t) {
                return Ok(());
            }
            if self.machine.is_zero(t.pfn.to_pfn(self.base)) {
                return self.zero_write_fault(&vma, &t, addr);
            }
            let freed = fault::cow_fault(&mut self.machine, pid, &vma, &t, addr, self.cow)?;
            return self.policy.release(&mut self.machine, pid, &freed);
        }
        let p = self.machine.proc_mut(pid);
        let vma = match p.aspace.find(addr) {
            Some(v) => *v,
            None => {
                p.aspace.infer(addr, INFER_GRANULE, instr);
                let v = *p.aspace.find(addr).expect("just inferred");
                self.machine.stats.inferred_vmas += 1;
                if self.seen_map_events {
                    self.machine.stats.refs_outside_vmas += 1;
                }
                v
            }
        };
        if matches!(vma.backing, Backing::File { .. }) {
            let fp = self.policy.file_pages(&vma);
            let remapped =
                crate::filemap::file_fault(&mut self.machine, pid, &vma, addr, write, &fp)?;
            self.invalidations.extend(remapped);
            Ok(())
        } else {
            self.policy.fault(&mut self.machine, pid, &vma, addr, write)
        }
    }

    fn walk_after_fault(&mut self, addr: VirtAddr) -> Result<Translation, MmError> {
        let pid = self.pid;
        self.machine.proc_mut(pid).pt.walk(addr).ok_or_else(|| {
            MmError::Policy(format!(
                "policy {} left {addr:#x} unmapped after a fault",
                self.spec
            ))
        })
    }

    /// How writes to shared private superpages are copied (default: the whole page).
    pub fn set_cow(&mut self, mode: CowMode) {
        self.cow = mode;
    }

    /// Fault-around, read-around and the page cache's start for file faults (default: off).
    pub fn set_file_faults(&mut self, f: crate::fault_around::FileFaults) {
        self.machine.file_faults = f;
    }

    /// The process whose address space the next references use: the
    /// running task's, or for a task running in another's (a vfork child
    /// before its exec), that one's.
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// The process whose references come next (the trace's last switch).
    pub fn task(&self) -> u32 {
        self.task
    }

    /// Checks every invariant: VMAs well formed; every frame in use mapped,
    /// cached or held by the policy, with the right reference count; rss equal
    /// to the bytes mapped; the allocator's own invariants.
    pub fn check(&self) -> Result<(), String> {
        for pid in self.machine.pids() {
            self.machine.proc(pid).expect("listed").aspace.check()?;
        }
        self.machine.check_page_tables()?;
        fault::check_frames(&self.machine, self.policy.held_frames())?;
        crate::reclaim::check(&self.machine, &self.swap)?;
        self.policy.check(&self.machine)?;
        self.machine.phys.check().map_err(|e| e.to_string())
    }
}
