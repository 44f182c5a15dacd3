//! `chase`: a pointer chase (`p = *p`) around one random cycle through all nodes.

use pagelab_trace::RecordSink;

use crate::code::{self, fetch, Generator, Insn, Memset};
use crate::perm::Permutation;
use crate::spec::{fmt_size, param_map, ParamDoc, Params, WorkloadDoc};
use crate::WorkloadError;
use pagelab_core::{AccessKind, SourceInfo};

/// The catalog entry of `chase`.
pub(crate) const DOC: WorkloadDoc = WorkloadDoc {
    name: "chase",
    summary: "a dependent pointer chase (p = *p) around one random cycle through every node; one 8-byte load per step at the node's base",
    params: &[
        ParamDoc { name: "nodes", default: "131072", help: "number of nodes in the cycle (any count, not only powers of two)" },
        ParamDoc { name: "node", default: "64", help: "node size, a multiple of 8 from 8 to 1G (nodes x node at most 256G)" },
        ParamDoc { name: "steps", default: "1000000", help: "pointer dereferences; after `nodes` steps the cycle repeats" },
        ParamDoc { name: "seed", default: "1", help: "chooses the cycle; the same seed gives the same trace" },
        ParamDoc { name: "init", default: "true", help: code::INIT_HELP },
        ParamDoc { name: "align", default: "16", help: code::ALIGN_HELP },
    ],
};

/// `mov rax,[rax]; sub rcx,1; jne`.
const LOOP: [Insn; 3] = code::layout(code::TEXT_BASE, [3, 4, 2]);
/// References per step: three instruction fetches and one load.
pub(crate) const REFS_PER_STEP: u64 = 4;

/// The effective parameters of a `chase` run.
#[derive(Clone, Debug)]
pub(crate) struct Config {
    nodes: u64,
    node: u64,
    steps: u64,
    seed: u64,
    init: bool,
    align: u64,
}

impl Config {
    pub(crate) fn parse(p: &Params) -> Result<Config, WorkloadError> {
        let node = p.size("node", 8, 1 << 30)?;
        if !node.is_multiple_of(8) {
            return Err(p.bad(
                "node",
                "the node size must be a multiple of 8 (it holds a pointer)",
            ));
        }
        let max_nodes = code::MAX_FOOTPRINT / node;
        let nodes = p.count("nodes", 1, max_nodes).map_err(|_| {
            p.bad(
                "nodes",
                format!("write a whole number from 1 to {max_nodes} (nodes x node at most 256G)"),
            )
        })?;
        Ok(Config {
            nodes,
            node,
            steps: p.count("steps", 0, u64::MAX)?,
            seed: p.count("seed", 0, u64::MAX)?,
            init: p.flag("init")?,
            align: p.pow2_size("align", 8, 1 << 30)?,
        })
    }

    /// References the whole run emits.
    pub(crate) fn total_refs(&self) -> u64 {
        let init = if self.init {
            Memset::refs(self.nodes * self.node)
        } else {
            0
        };
        init.saturating_add(self.steps.saturating_mul(REFS_PER_STEP))
    }

    fn params(&self) -> std::collections::BTreeMap<String, String> {
        param_map([
            ("nodes", self.nodes.to_string()),
            ("node", fmt_size(self.node)),
            ("steps", self.steps.to_string()),
            ("seed", self.seed.to_string()),
            ("init", self.init.to_string()),
            ("align", fmt_size(self.align)),
        ])
    }
}

/// The running chase. Holds the permutation's keys, never the permutation.
pub(crate) struct Chase {
    cfg: Config,
    base: u64,
    perm: Permutation,
    init: Memset,
    /// Position in the cycle: the next step visits `perm.apply(pos)`.
    pos: u64,
    left: u64,
}

impl Chase {
    pub(crate) fn new(cfg: Config) -> Chase {
        let base = code::align_up(code::MMAP_BASE, cfg.align);
        Chase {
            base,
            perm: Permutation::new(cfg.nodes, cfg.seed),
            init: Memset::new(base, cfg.nodes * cfg.node, cfg.init),
            pos: 0,
            left: cfg.steps,
            cfg,
        }
    }
}

impl Generator for Chase {
    // A memset step (5 events) is the longest.
    const MAX_STEP: usize = 5;

    #[inline]
    fn step(&mut self, out: &mut impl RecordSink) -> bool {
        if self.init.step(out) {
            return true;
        }
        if self.left == 0 {
            return false;
        }
        self.left -= 1;
        let addr = self.base + self.perm.apply(self.pos) * self.cfg.node;
        self.pos += 1;
        if self.pos == self.cfg.nodes {
            self.pos = 0;
        }
        fetch(out, LOOP[0]);
        code::data(out, addr, 8, AccessKind::Load);
        fetch(out, LOOP[1]);
        fetch(out, LOOP[2]);
        true
    }

    fn info(&self) -> SourceInfo {
        code::workload_info(DOC.name, self.cfg.params())
    }
}
