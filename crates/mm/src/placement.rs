//! Which CPU each process runs on, and so which NUMA node is local to it.
//!
//! Processes are placed on CPUs round-robin in the order they first run (the
//! first process of a trace, pid 0 or the first `Switch`, on the first CPU),
//! over the machine's CPUs or the list they are bound to by `--bind` (like
//! `taskset`);
//! a process stays on its CPU (no migration is modelled). Every machine has
//! CPUs: one without a `[numa]` section has one node holding all of them
//! (one CPU unless it says otherwise).

use crate::phys::numa::NumaConfig;
use rustc_hash::FxHashMap;

/// Where processes run and what a run on a NUMA machine asks for.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Placement {
    /// The memory policy of every process (`--mempolicy`).
    pub policy: crate::phys::nodes::MemPolicy,
    /// The CPUs processes are bound to and placed on round-robin (`--bind`);
    /// `None`: all.
    pub cpus: Option<Vec<u32>>,
}

impl Placement {
    /// Checks the CPUs and the policy's nodes against the machine; the
    /// message names the flag and what the machine has.
    pub fn check(&self, numa: &NumaConfig) -> Result<(), String> {
        if let Some(cpus) = &self.cpus {
            if cpus.is_empty() {
                return Err("--bind: give at least one CPU".into());
            }
            if let Some(c) = cpus.iter().find(|&&c| c >= numa.cpus) {
                return Err(format!(
                    "--bind: CPU {c} does not exist: the machine has {} CPUs (0..={})",
                    numa.cpus,
                    numa.cpus - 1
                ));
            }
        }
        self.policy
            .check(numa.nodes.len())
            .map_err(|e| format!("--mempolicy {}: {e}", self.policy))
    }
}

/// Round-robin placement of processes on CPUs, remembered per process.
#[derive(Clone, Debug)]
pub(crate) struct Cpus {
    cpus: Vec<u32>,
    next: usize,
    of: FxHashMap<u32, u32>,
    node_of_cpu: Vec<usize>,
}

impl Cpus {
    pub(crate) fn new(numa: &NumaConfig, placement: &Placement) -> Cpus {
        Cpus {
            cpus: placement
                .cpus
                .clone()
                .unwrap_or_else(|| (0..numa.cpus).collect()),
            next: 0,
            of: FxHashMap::default(),
            node_of_cpu: (0..numa.cpus).map(|c| numa.node_of_cpu(c)).collect(),
        }
    }

    /// The CPU `pid` runs on, its node, and whether it was just placed.
    pub(crate) fn place(&mut self, pid: u32) -> (u32, usize, bool) {
        let mut new = false;
        let cpu = *self.of.entry(pid).or_insert_with(|| {
            new = true;
            let c = self.cpus[self.next % self.cpus.len()];
            self.next += 1;
            c
        });
        (cpu, self.node_of_cpu[cpu as usize], new)
    }
}
