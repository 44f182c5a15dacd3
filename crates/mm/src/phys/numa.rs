//! NUMA nodes as a machine file gives them: each node's memory (consecutive
//! physical ranges, node 0 first) and the CPUs on it.

use super::config::de_bytes;
use super::ConfigError;
use pagelab_core::{Bytes, PageSize};
use serde::{Deserialize, Serialize};

/// The largest CPU count a machine may have.
pub const MAX_CPUS: u32 = 4096;

/// CPUs and NUMA nodes (`[numa]` of a machine file).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NumaConfig {
    /// CPUs in the machine, numbered from 0.
    pub cpus: u32,
    /// The nodes, in physical order: node 0 holds the lowest memory.
    pub nodes: Vec<NodeConfig>,
}

/// One NUMA node.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NodeConfig {
    /// Memory on the node; a multiple of 4K.
    #[serde(deserialize_with = "de_bytes")]
    pub memory: Bytes,
    /// The CPUs on the node (numbers below `cpus`).
    pub cpus: Vec<u32>,
    /// The node's distance to every node, itself included, as the ACPI SLIT
    /// gives them (10 to itself, 11 to 254 to others; Linux's
    /// `/sys/devices/system/node/nodeN/distance`). Absent on every node: all
    /// remote nodes are equally far, and an allocation falls back round-robin
    /// by node number upward from the local node (004 paper, section 9).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub distances: Option<Vec<u32>>,
}

impl NumaConfig {
    /// One node holding all of `memory` and `cpus` CPUs: a machine without NUMA.
    pub fn uniform(memory: Bytes, cpus: u32) -> NumaConfig {
        NumaConfig {
            cpus,
            nodes: vec![NodeConfig {
                memory,
                cpus: (0..cpus).collect(),
                distances: None,
            }],
        }
    }

    /// Checks the nodes against the machine's `memory`: every node has
    /// memory, they add up to `memory`, and every CPU below `cpus` is on
    /// exactly one node.
    pub fn validate(&self, memory: Bytes) -> Result<(), ConfigError> {
        let bad = |field, message| Err(ConfigError { field, message });
        if !(1..=MAX_CPUS).contains(&self.cpus) {
            return bad(
                "numa.cpus",
                format!("{} is not allowed: 1 to {MAX_CPUS} CPUs", self.cpus),
            );
        }
        if self.nodes.is_empty() || self.nodes.len() > 64 {
            return bad("numa.nodes", "give 1 to 64 nodes".into());
        }
        let mut owner = vec![None; self.cpus as usize];
        let mut total = 0u64;
        for (i, n) in self.nodes.iter().enumerate() {
            if n.memory.0 == 0 || !n.memory.0.is_multiple_of(PageSize::MIN.bytes()) {
                return bad(
                    "numa.nodes.memory",
                    format!(
                        "node {i}: {} is not allowed: a non-zero multiple of {}",
                        n.memory,
                        PageSize::MIN
                    ),
                );
            }
            total = total.saturating_add(n.memory.0);
            for &c in &n.cpus {
                let Some(slot) = owner.get_mut(c as usize) else {
                    return bad(
                        "numa.nodes.cpus",
                        format!(
                            "node {i} names CPU {c}, but the machine has {} CPUs (0..={})",
                            self.cpus,
                            self.cpus - 1
                        ),
                    );
                };
                if let Some(other) = slot.replace(i) {
                    return bad(
                        "numa.nodes.cpus",
                        format!("CPU {c} is on node {other} and on node {i}: a CPU is on one node"),
                    );
                }
            }
        }
        self.validate_distances()?;
        if total != memory.0 {
            return bad(
                "numa.nodes.memory",
                format!("the nodes hold {} in all, but the machine's memory is {memory}: they must add up to it", Bytes(total)),
            );
        }
        if let Some(c) = owner.iter().position(|o| o.is_none()) {
            return bad(
                "numa.nodes.cpus",
                format!(
                    "CPU {c} is on no node: list each of the {} CPUs on one node",
                    self.cpus
                ),
            );
        }
        Ok(())
    }

    /// Distances: on every node or on none, one per node, 10 to itself and
    /// 11 to 254 to the others.
    fn validate_distances(&self) -> Result<(), ConfigError> {
        let bad = |message| {
            Err(ConfigError {
                field: "numa.nodes.distances",
                message,
            })
        };
        let given = self.nodes.iter().filter(|n| n.distances.is_some()).count();
        if given == 0 {
            return Ok(());
        }
        let n = self.nodes.len();
        for (i, node) in self.nodes.iter().enumerate() {
            let Some(d) = &node.distances else {
                return bad(format!(
                    "node {i} has no distances, but other nodes do: give them on every node or on none"
                ));
            };
            if d.len() != n {
                return bad(format!(
                    "node {i} lists {} distances: give one per node ({n}), itself included",
                    d.len()
                ));
            }
            for (j, &x) in d.iter().enumerate() {
                let ok = if i == j {
                    x == 10
                } else {
                    (11..=254).contains(&x)
                };
                if !ok {
                    return bad(format!(
                        "node {i} to node {j}: {x} is not allowed: a node is 10 from itself and 11 to 254 from the others (ACPI SLIT)"
                    ));
                }
            }
        }
        Ok(())
    }

    /// The nodes an allocation on `local` tries, in order: `local` first,
    /// then the others nearest first, ties (and machines without distances)
    /// round-robin by node number upward from `local`.
    pub fn fallback_order(&self, local: usize) -> Vec<usize> {
        let n = self.nodes.len();
        let mut order: Vec<usize> = (0..n).map(|k| (local + k) % n).collect();
        if let Some(d) = self.nodes.get(local).and_then(|x| x.distances.as_ref()) {
            // A stable sort keeps the round-robin order among equal distances.
            order.sort_by_key(|&j| if j == local { 0 } else { d[j] });
        }
        order
    }

    /// The node of `cpu` (node 0 for a CPU not listed).
    pub fn node_of_cpu(&self, cpu: u32) -> usize {
        self.nodes
            .iter()
            .position(|n| n.cpus.contains(&cpu))
            .unwrap_or(0)
    }
}
