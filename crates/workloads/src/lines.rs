//! `lines`: the probe of `pagelab machines --measure`, as a workload, so that the model can
//! be held to the machine's own measurement of the same loads.
//!
//! `lines` 64-byte lines, line `i` in the `spacing`-byte slot `i` at a colour's offset
//! ([`line_offset`]), visited in one fixed pseudo-random order ([`visit_order`]) or in
//! address order (`visit=sequential`, [`Visit`]): each load
//! on the last (`order=dependent`, a pointer chase) or each from a counter
//! (`order=independent`). The lab's probe (`crates/lab/src/probe/overlap.rs`) takes its
//! offsets and its order from here, so the two visit the same lines in the same order.

use pagelab_trace::RecordSink;

use crate::code::{self, fetch, Generator, Insn, Memset};
use crate::spec::{fmt_size, param_map, ParamDoc, Params, WorkloadDoc};
use crate::WorkloadError;
use pagelab_core::{AccessKind, SourceInfo};

/// The catalog entry of `lines`.
pub(crate) const DOC: WorkloadDoc = WorkloadDoc {
    name: "lines",
    summary: "the probe of `machines --measure`: one 64-byte line in each `spacing`-byte slot at a colour's offset, visited in a fixed pseudo-random order or in address order, each load on the last or independent",
    params: &[
        ParamDoc { name: "lines", default: "16384", help: "number of lines, a power of two from 2" },
        ParamDoc { name: "spacing", default: "4K", help: "bytes from one line's slot to the next, a power of two from 64 (64: the lines packed)" },
        ParamDoc { name: "steps", default: "1000000", help: "loads; after `lines` of them the order repeats" },
        ParamDoc { name: "order", default: "dependent", help: "dependent (each load's address is the last load's value, a chase) or independent (the addresses from a counter, through the order's hash)" },
        ParamDoc { name: "visit", default: "random", help: "random (the order's hash, so that consecutive loads fall on unrelated pages) or sequential (line 0, 1, 2, ... in address order, as a stride over every slot)" },
        ParamDoc { name: "init", default: "true", help: code::INIT_HELP },
        ParamDoc { name: "align", default: "2M", help: code::ALIGN_HELP },
    ],
};

/// The byte offset of line `i` of lines `spacing` bytes apart: in its slot at the colour
/// `i / 32` (mod the slot's lines). 32 slots in a row share a colour, so that over
/// physically contiguous 4K slots the low five bits of the slot number (which an L2 of
/// 2048 sets indexes with) and 64 colours reach every one of 2048 sets, 8 lines a set for
/// 16384 lines; over scattered frames the lines spread at random. `spacing` is a power of
/// two of at least 64.
#[inline(always)]
pub fn line_offset(i: u64, spacing: u64) -> u64 {
    let colours = spacing / 64;
    i * spacing + ((i / 32) & (colours - 1)) * 64
}

/// How the lines are visited: in one fixed pseudo-random order, so that consecutive loads
/// fall on unrelated pages and lines, or in address order, line 0, 1, 2, ... (a stride over
/// every slot, which the machine's prefetchers can follow and whose page walks share the
/// lines of their page-table entries).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Visit {
    /// The order of [`visit_order`].
    #[default]
    Random,
    /// Line `i` `i`-th.
    Sequential,
}

impl Visit {
    /// The word a spec writes it with.
    pub fn name(self) -> &'static str {
        match self {
            Visit::Random => "random",
            Visit::Sequential => "sequential",
        }
    }
}

/// A visiting order of `count` lines (a power of two of at least 2) as a loop computes it:
/// multiply by an odd number, fold the high bits down, multiply again, all mod `count`. A
/// sequential visit multiplies by 1 and folds nothing, so that the lab's probe runs the same
/// instructions in either order ([`INDEPENDENT`]) and only the addresses differ.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Order {
    mul: [u64; 2],
    shift: u32,
    mask: u64,
}

impl Order {
    /// The order `visit` of `count` lines.
    pub fn new(visit: Visit, count: u64) -> Order {
        let mask = count - 1;
        match visit {
            Visit::Random => Order {
                mul: [0x9e37_79b9_7f4a_7c15, 0xbf58_476d_1ce4_e5b9],
                shift: count.trailing_zeros().div_ceil(2),
                mask,
            },
            // Below 2^63 a shift by 63 leaves nothing to fold.
            Visit::Sequential => Order {
                mul: [1, 1],
                shift: 63,
                mask,
            },
        }
    }

    /// Line `i`'s place in the order (`i` below the count).
    #[inline(always)]
    pub fn at(&self, i: u64) -> u64 {
        let mut h = i.wrapping_mul(self.mul[0]) & self.mask;
        h ^= h >> self.shift;
        h.wrapping_mul(self.mul[1]) & self.mask
    }
}

/// Line `i`'s place in the random visiting order of `count` lines (a power of two of at
/// least 2): a bijection on `0..count` ([`Order`]).
#[inline(always)]
pub fn visit_order(i: u64, count: u64) -> u64 {
    Order::new(Visit::Random, count).at(i)
}

/// The dependent loop: `mov rax,[rax]; sub rcx,1; jne`.
const CHASE: [Insn; 3] = code::layout(code::TEXT_BASE, [3, 4, 2]);
/// The independent loop as the release build of the lab's probe compiles it (x86-64,
/// `objdump` of `Lines::time`; the same in either [`Visit`], whose constants are in
/// registers since session 35): the hash (`lea`, `and`, `imul`, `and`, `mov`, `mov`, `shr`,
/// `xor`, `imul`, `and`), the offset (`mov`, `imul`, `shr`, `and`, `shl`, `add`), the
/// load added to a sum, and the counter (`inc`, `cmp`, `jne`): 20 instructions, the load
/// the 17th.
const INDEPENDENT: [Insn; 20] = code::layout(
    code::TEXT_BASE,
    [4, 3, 4, 3, 3, 3, 3, 3, 4, 3, 3, 4, 4, 3, 4, 3, 4, 3, 3, 2],
);
/// Where the load is in [`INDEPENDENT`].
const INDEPENDENT_LOAD: usize = 16;

/// The effective parameters of a `lines` run.
#[derive(Clone, Debug)]
pub(crate) struct Config {
    lines: u64,
    spacing: u64,
    steps: u64,
    independent: bool,
    visit: Visit,
    init: bool,
    align: u64,
}

impl Config {
    pub(crate) fn parse(p: &Params) -> Result<Config, WorkloadError> {
        let spacing = p.pow2_size("spacing", 64, 1 << 30)?;
        let max_lines = (code::MAX_FOOTPRINT / spacing).min(1 << 32);
        let lines = p.count("lines", 2, max_lines)?;
        if !lines.is_power_of_two() {
            return Err(p.bad(
                "lines",
                format!("write a power of two from 2 to {max_lines} (the order's hash is a bijection on a power of two)"),
            ));
        }
        let independent = match p.raw_value("order").to_ascii_lowercase().as_str() {
            "dependent" => false,
            "independent" => true,
            _ => return Err(p.bad("order", "write dependent or independent")),
        };
        let visit = match p.raw_value("visit").to_ascii_lowercase().as_str() {
            "random" => Visit::Random,
            "sequential" => Visit::Sequential,
            _ => return Err(p.bad("visit", "write random or sequential")),
        };
        Ok(Config {
            lines,
            spacing,
            steps: p.count("steps", 0, u64::MAX)?,
            independent,
            visit,
            init: p.flag("init")?,
            align: p.pow2_size("align", 8, 1 << 30)?,
        })
    }

    /// References the whole run emits.
    pub(crate) fn total_refs(&self) -> u64 {
        let init = if self.init {
            Memset::refs(self.lines * self.spacing)
        } else {
            0
        };
        let per_step = if self.independent {
            INDEPENDENT.len() as u64 + 1
        } else {
            CHASE.len() as u64 + 1
        };
        init.saturating_add(self.steps.saturating_mul(per_step))
    }

    fn params(&self) -> std::collections::BTreeMap<String, String> {
        param_map([
            ("lines", self.lines.to_string()),
            ("spacing", fmt_size(self.spacing)),
            ("steps", self.steps.to_string()),
            (
                "order",
                if self.independent {
                    "independent"
                } else {
                    "dependent"
                }
                .to_string(),
            ),
            ("visit", self.visit.name().to_string()),
            ("init", self.init.to_string()),
            ("align", fmt_size(self.align)),
        ])
    }
}

/// The running probe.
pub(crate) struct Lines {
    cfg: Config,
    base: u64,
    init: Memset,
    order: Order,
    /// The next step's place in the order.
    pos: u64,
    left: u64,
}

impl Lines {
    pub(crate) fn new(cfg: Config) -> Lines {
        let base = code::align_up(code::MMAP_BASE, cfg.align);
        Lines {
            base,
            init: Memset::new(base, cfg.lines * cfg.spacing, cfg.init),
            order: Order::new(cfg.visit, cfg.lines),
            pos: 0,
            left: cfg.steps,
            cfg,
        }
    }
}

impl Generator for Lines {
    // A memset step (5 events) is the longest but for the independent loop's 21.
    const MAX_STEP: usize = INDEPENDENT.len() + 1;

    #[inline]
    fn step(&mut self, out: &mut impl RecordSink) -> bool {
        if self.init.step(out) {
            return true;
        }
        if self.left == 0 {
            return false;
        }
        self.left -= 1;
        let line = self.order.at(self.pos & (self.cfg.lines - 1));
        let addr = self.base + line_offset(line, self.cfg.spacing);
        self.pos += 1;
        let loop_ = if self.cfg.independent {
            &INDEPENDENT[..]
        } else {
            &CHASE[..]
        };
        let load = if self.cfg.independent {
            INDEPENDENT_LOAD
        } else {
            0
        };
        for (k, &insn) in loop_.iter().enumerate() {
            fetch(out, insn);
            if k == load {
                code::data(out, addr, 8, AccessKind::Load);
            }
        }
        true
    }

    fn info(&self) -> SourceInfo {
        code::workload_info(DOC.name, self.cfg.params())
    }
}
