//! Allocation on a NUMA machine: which node's zones an allocation tries, in
//! which order, under the memory policy of the running process (004 paper,
//! section 9; Linux's `numactl --membind/--interleave/--preferred`), and the
//! count of local and remote allocations.
//!
//! Physical memory is split into nodes (consecutive ranges, node 0 first) and
//! every zone into one zone per node it spans, as Linux keeps a `pgdat` per
//! node with its own zones. The local node is the node of the CPU the
//! process runs on. Under the default policy an allocation takes from the
//! local node's zones first, then from the other nodes', nearest first
//! (round-robin by node number upward from the local node when the machine
//! gives no distances).

use super::config::FRAME_BYTES;
use super::numa::NumaConfig;
use pagelab_core::Pfn;
use rustc_hash::FxHashMap;
use serde::Serialize;
use std::fmt;
use std::str::FromStr;

/// A process's memory policy (`--mempolicy`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum MemPolicy {
    /// The local node first, then the others (Linux's default, `MPOL_LOCAL`).
    #[default]
    Local,
    /// Only these nodes, tried in the local node's order (`numactl --membind`).
    Bind(Vec<usize>),
    /// Each allocation on the next of these nodes in turn, per process
    /// (`numactl --interleave`); a full node falls back as under `local`.
    Interleave(Vec<usize>),
    /// This node first, then the others as if it were local (`numactl --preferred`).
    Preferred(usize),
}

impl MemPolicy {
    /// The nodes the policy names (none for `local`).
    pub fn nodes(&self) -> Vec<usize> {
        match self {
            MemPolicy::Local => Vec::new(),
            MemPolicy::Bind(n) | MemPolicy::Interleave(n) => n.clone(),
            MemPolicy::Preferred(n) => vec![*n],
        }
    }

    /// Checks the nodes against a machine of `nodes` nodes; the message names
    /// the missing node and the nodes there are.
    pub fn check(&self, nodes: usize) -> Result<(), String> {
        match self.nodes().into_iter().find(|&n| n >= nodes) {
            Some(n) => Err(format!(
                "node {n} does not exist: the machine has {nodes} node{} (0..={})",
                if nodes == 1 { "" } else { "s" },
                nodes - 1
            )),
            None => Ok(()),
        }
    }
}

/// Parses a node list: `0,2`, `0-3`, `all` (`None`: every node).
fn parse_nodes(s: &str) -> Result<Option<Vec<usize>>, String> {
    if s == "all" {
        return Ok(None);
    }
    let mut out = Vec::new();
    for part in s.split(',') {
        let num = |t: &str| {
            t.trim()
                .parse::<usize>()
                .map_err(|_| format!("`{t}` is not a node number"))
        };
        match part.split_once('-') {
            Some((a, b)) => {
                let (a, b) = (num(a)?, num(b)?);
                if a > b {
                    return Err(format!("`{part}` is an empty range: write LOW-HIGH"));
                }
                out.extend(a..=b);
            }
            None => out.push(num(part)?),
        }
    }
    out.sort_unstable();
    out.dedup();
    Ok(Some(out))
}

/// `local`, `membind:NODES`, `interleave:NODES`, `preferred:NODE`; NODES is
/// `0,2`, `0-3` or `all`. `all` is resolved by [`MemPolicy::resolve_all`].
impl FromStr for MemPolicy {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        const HELP: &str = "write local, membind:NODES, interleave:NODES or preferred:NODE (NODES like 0,2 or 0-3 or all)";
        if s == "local" {
            return Ok(MemPolicy::Local);
        }
        let Some((kind, list)) = s.split_once(':') else {
            return Err(format!("`{s}` is not a memory policy: {HELP}"));
        };
        let nodes = parse_nodes(list).map_err(|e| format!("`{s}`: {e}; {HELP}"))?;
        // `all` is kept as an empty list until the machine's nodes are known.
        let nodes = nodes.unwrap_or_default();
        match kind {
            "membind" | "bind" => Ok(MemPolicy::Bind(nodes)),
            "interleave" => Ok(MemPolicy::Interleave(nodes)),
            "preferred" => match nodes.as_slice() {
                [n] => Ok(MemPolicy::Preferred(*n)),
                _ => Err(format!("`{s}`: preferred takes one node")),
            },
            _ => Err(format!("`{s}` is not a memory policy: {HELP}")),
        }
    }
}

impl MemPolicy {
    /// `membind:all` and `interleave:all` on a machine of `nodes` nodes.
    pub fn resolve_all(self, nodes: usize) -> MemPolicy {
        match self {
            MemPolicy::Bind(n) if n.is_empty() => MemPolicy::Bind((0..nodes).collect()),
            MemPolicy::Interleave(n) if n.is_empty() => MemPolicy::Interleave((0..nodes).collect()),
            p => p,
        }
    }
}

impl fmt::Display for MemPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let list = |n: &[usize]| {
            n.iter()
                .map(|x| x.to_string())
                .collect::<Vec<_>>()
                .join(",")
        };
        match self {
            MemPolicy::Local => write!(f, "local"),
            MemPolicy::Bind(n) => write!(f, "membind:{}", list(n)),
            MemPolicy::Interleave(n) => write!(f, "interleave:{}", list(n)),
            MemPolicy::Preferred(n) => write!(f, "preferred:{n}"),
        }
    }
}

/// What a run counted on a NUMA machine (`mm.numa` in the JSON).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct NumaStats {
    /// The memory policy (`--mempolicy`).
    pub policy: String,
    /// Allocations from the node of the CPU the process ran on.
    pub local_allocs: u64,
    /// Allocations from another node.
    pub remote_allocs: u64,
    /// Bytes of the local allocations.
    pub local_alloc_bytes: u64,
    /// Bytes of the remote allocations.
    pub remote_alloc_bytes: u64,
    /// References to memory on the node of the CPU that made them.
    pub local_refs: u64,
    /// References to memory on another node.
    pub remote_refs: u64,
    /// Per node, in node order.
    pub nodes: Vec<NodeStats>,
}

/// One node's counts.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct NodeStats {
    /// The node's memory.
    pub memory_bytes: u64,
    /// Processes placed on the node's CPUs.
    pub processes: u64,
    /// Allocations from the node.
    pub allocs: u64,
    /// Bytes allocated from the node (frees not subtracted).
    pub alloc_bytes: u64,
    /// References made to the node's memory.
    pub refs: u64,
}

/// The NUMA side of physical memory: node ranges, the zones of each node's
/// fallback order, the running process's policy and node, and the counts.
#[derive(Clone, Debug)]
pub struct NumaState {
    /// The first 4K frame of each node, then one past the last frame.
    bounds: Vec<u64>,
    /// Per local node: the zone indexes `ZonePref::Any` tries, in order.
    zonelists: Vec<Vec<usize>>,
    /// The zone index's node.
    zone_node: Vec<usize>,
    policy: MemPolicy,
    /// The node of the CPU that runs now.
    local: usize,
    pid: u32,
    /// Per process, the next interleave slot.
    interleave: FxHashMap<u32, usize>,
    stats: NumaStats,
}

impl NumaState {
    /// The state for `numa`'s nodes; `zones` is each zone's (node, index in
    /// the fallback order of kinds): zones of each node are tried in the
    /// order of kinds, nodes in [`NumaConfig::fallback_order`].
    pub(crate) fn new(numa: &NumaConfig, zones: &[(usize, usize)], policy: MemPolicy) -> Self {
        let mut bounds = vec![0u64];
        for n in &numa.nodes {
            let last = *bounds.last().expect("starts with 0");
            bounds.push(last + n.memory.0 / FRAME_BYTES);
        }
        let zonelists = (0..numa.nodes.len())
            .map(|local| {
                let mut list = Vec::new();
                for node in numa.fallback_order(local) {
                    let mut own: Vec<(usize, usize)> = zones
                        .iter()
                        .enumerate()
                        .filter(|(_, z)| z.0 == node && z.1 != usize::MAX)
                        .map(|(i, z)| (z.1, i))
                        .collect();
                    own.sort_unstable();
                    list.extend(own.into_iter().map(|(_, i)| i));
                }
                list
            })
            .collect();
        let nodes = numa
            .nodes
            .iter()
            .map(|n| NodeStats {
                memory_bytes: n.memory.0,
                ..NodeStats::default()
            })
            .collect();
        NumaState {
            bounds,
            zonelists,
            zone_node: zones.iter().map(|z| z.0).collect(),
            stats: NumaStats {
                policy: policy.to_string(),
                nodes,
                ..NumaStats::default()
            },
            policy,
            local: 0,
            pid: 0,
            interleave: FxHashMap::default(),
        }
    }

    /// The node holding 4K frame `pfn`.
    pub fn node_of_frame(&self, pfn: Pfn) -> usize {
        self.bounds[1..].partition_point(|&end| end <= pfn.0)
    }

    /// Process `pid` runs now, on a CPU of `node`; `new` when it was just
    /// placed there.
    pub fn set_task(&mut self, pid: u32, node: usize, new: bool) {
        self.pid = pid;
        self.local = node;
        if new {
            self.stats.nodes[node].processes += 1;
        }
    }

    /// The node of the CPU that runs now.
    pub fn local(&self) -> usize {
        self.local
    }

    /// The zones the next allocation tries, in order, and whether it may use
    /// a zone of `node` (the policy's mask).
    pub(crate) fn zonelist(&mut self) -> (&[usize], Option<&[usize]>) {
        let start = match &self.policy {
            MemPolicy::Local | MemPolicy::Bind(_) => self.local,
            MemPolicy::Preferred(n) => *n,
            MemPolicy::Interleave(nodes) => {
                let slot = self.interleave.entry(self.pid).or_insert(0);
                let n = nodes[*slot % nodes.len()];
                *slot = (*slot + 1) % nodes.len();
                n
            }
        };
        let mask = match &self.policy {
            MemPolicy::Bind(n) => Some(n.as_slice()),
            _ => None,
        };
        (&self.zonelists[start], mask)
    }

    /// Counts an allocation of `frames` 4K frames from zone `z`.
    pub(crate) fn count_alloc(&mut self, z: usize, frames: u64) {
        let node = self.zone_node[z];
        let bytes = frames * FRAME_BYTES;
        let s = &mut self.stats;
        if node == self.local {
            s.local_allocs += 1;
            s.local_alloc_bytes += bytes;
        } else {
            s.remote_allocs += 1;
            s.remote_alloc_bytes += bytes;
        }
        s.nodes[node].allocs += 1;
        s.nodes[node].alloc_bytes += bytes;
    }

    /// Counts `n` references by the running CPU to 4K frame `pfn`.
    pub fn count_refs(&mut self, pfn: Pfn, n: u64) {
        let node = self.node_of_frame(pfn);
        if node == self.local {
            self.stats.local_refs += n;
        } else {
            self.stats.remote_refs += n;
        }
        self.stats.nodes[node].refs += n;
    }

    /// The counts so far.
    pub fn stats(&self) -> &NumaStats {
        &self.stats
    }
}
