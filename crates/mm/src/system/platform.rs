//! What a run on a machine given by a platform adds to the model: the
//! kernel's own memory and, on a machine of several NUMA nodes, where each
//! process runs and whether what it allocates and references is local.

use super::Mm;
use crate::machine::MmError;
use pagelab_core::Pfn;

impl Mm {
    /// Puts the running process on its CPU (placing it round-robin the
    /// first time it runs): its per-CPU page lists are used, and on a NUMA
    /// machine that CPU's node is local.
    pub(super) fn place(&mut self) {
        // The running task is placed (a vfork child runs on a CPU of its own).
        let (cpu, node, new) = self.cpus.place(self.task);
        self.machine.phys.set_cpu(cpu);
        if let Some(n) = self.machine.phys.numa_mut() {
            n.set_task(self.task, node, new);
        }
    }

    /// Whether the machine has several NUMA nodes (and the run counts local
    /// and remote allocations and references).
    pub fn is_numa(&self) -> bool {
        self.machine.phys.numa().is_some()
    }

    /// What the per-CPU hot and cold page lists counted, when modelled.
    pub fn pcp_stats(&self) -> Option<crate::phys::PcpStats> {
        self.machine.phys.pcp_stats()
    }

    /// Counts `n` references by the running process to 4K frame `pfn`, local
    /// or remote to its CPU (on a NUMA machine; nothing otherwise).
    pub fn count_refs(&mut self, pfn: Pfn, n: u64) {
        if let Some(numa) = self.machine.phys.numa_mut() {
            numa.count_refs(pfn, n);
        }
    }

    /// What the run counted on a NUMA machine.
    pub fn numa_stats(&self) -> Option<&crate::phys::nodes::NumaStats> {
        self.machine.phys.numa().map(|n| n.stats())
    }

    /// The kernel's memory over the run (with a platform).
    pub fn kernel_stats(&self) -> Option<&crate::kmem::KernelStats> {
        self.kernel.as_ref()
    }

    pub(super) fn account_kernel(&mut self) -> Result<(), MmError> {
        if let Some(k) = &mut self.kernel {
            let m = &self.machine;
            let level1 = if k.highpte { m.level1_table_bytes() } else { 0 };
            k.record(m.page_table_bytes(), level1)?;
        }
        Ok(())
    }
}
