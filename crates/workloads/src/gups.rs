//! `gups`: HPCC RandomAccess (giga-updates per second): read-modify-write of
//! random 8-byte words of a table, indices from the benchmark's own LFSR.

use pagelab_trace::RecordSink;

use crate::code::{self, fetch, Generator, Insn, Memset};
use crate::spec::{fmt_size, param_map, ParamDoc, Params, WorkloadDoc};
use crate::WorkloadError;
use pagelab_core::{AccessKind, SourceInfo};

/// The catalog entry of `gups`.
pub(crate) const DOC: WorkloadDoc = WorkloadDoc {
    name: "gups",
    summary: "HPCC RandomAccess (GUPS): random 8-byte read-modify-writes (Lackey `M`) over a table, indices from the benchmark's LFSR",
    params: &[
        ParamDoc { name: "table", default: "8M", help: "table size, a power of two from 8 to 256G" },
        ParamDoc { name: "updates", default: "1000000", help: "number of read-modify-write updates" },
        ParamDoc { name: "seed", default: "1", help: "seeds the LFSR's starting value; the same seed gives the same trace" },
        ParamDoc { name: "init", default: "true", help: code::INIT_HELP },
        ParamDoc { name: "align", default: "16", help: code::ALIGN_HELP },
    ],
};

/// HPCC's `ran = (ran << 1) ^ (ran < 0 ? POLY : 0); Table[ran & mask] ^= ran; n--`:
/// `lea rcx,[rax+rax]; sar rax,63; and eax,7; xor rax,rcx; mov rcx,rax;
/// and rcx,r8; xor [rdi+rcx*8],rax; sub rdx,1; jne`.
const LOOP: [Insn; 9] = code::layout(code::TEXT_BASE, [4, 4, 3, 3, 3, 3, 4, 4, 2]);
/// The index of the instruction that does the read-modify-write.
const RMW: usize = 6;
/// HPCC's LFSR polynomial.
const POLY: u64 = 7;
/// References per update: nine instruction fetches and one modify.
pub(crate) const REFS_PER_UPDATE: u64 = 10;

/// The effective parameters of a `gups` run.
#[derive(Clone, Debug)]
pub(crate) struct Config {
    table: u64,
    updates: u64,
    seed: u64,
    init: bool,
    align: u64,
}

impl Config {
    pub(crate) fn parse(p: &Params) -> Result<Config, WorkloadError> {
        Ok(Config {
            table: p.pow2_size("table", 8, code::MAX_FOOTPRINT)?,
            updates: p.count("updates", 0, u64::MAX)?,
            seed: p.count("seed", 0, u64::MAX)?,
            init: p.flag("init")?,
            align: p.pow2_size("align", 8, 1 << 30)?,
        })
    }

    /// References the whole run emits.
    pub(crate) fn total_refs(&self) -> u64 {
        let init = if self.init {
            Memset::refs(self.table)
        } else {
            0
        };
        init.saturating_add(self.updates.saturating_mul(REFS_PER_UPDATE))
    }

    fn params(&self) -> std::collections::BTreeMap<String, String> {
        param_map([
            ("table", fmt_size(self.table)),
            ("updates", self.updates.to_string()),
            ("seed", self.seed.to_string()),
            ("init", self.init.to_string()),
            ("align", fmt_size(self.align)),
        ])
    }
}

/// The running benchmark.
pub(crate) struct Gups {
    cfg: Config,
    base: u64,
    /// Table size in words, minus one.
    mask: u64,
    init: Memset,
    ran: u64,
    left: u64,
}

impl Gups {
    pub(crate) fn new(cfg: Config) -> Gups {
        let base = code::align_up(code::MMAP_BASE, cfg.align);
        // The LFSR must not start at zero, where it would stay.
        let ran = code::splitmix64(cfg.seed).max(1);
        Gups {
            base,
            mask: cfg.table / 8 - 1,
            init: Memset::new(base, cfg.table, cfg.init),
            ran,
            left: cfg.updates,
            cfg,
        }
    }
}

impl Generator for Gups {
    const MAX_STEP: usize = 10;

    #[inline]
    fn step(&mut self, out: &mut impl RecordSink) -> bool {
        if self.init.step(out) {
            return true;
        }
        if self.left == 0 {
            return false;
        }
        self.left -= 1;
        self.ran = (self.ran << 1) ^ if (self.ran as i64) < 0 { POLY } else { 0 };
        let addr = self.base + (self.ran & self.mask) * 8;
        for &insn in &LOOP[..=RMW] {
            fetch(out, insn);
        }
        code::data(out, addr, 8, AccessKind::Modify);
        for &insn in &LOOP[RMW + 1..] {
            fetch(out, insn);
        }
        true
    }

    fn info(&self) -> SourceInfo {
        code::workload_info(DOC.name, self.cfg.params())
    }
}
