//! `stride`: the micro-benchmark of section 5.1 of the multiple-page-size paper
//! (seed 000): one word per page, the in-page offset advancing by a cache line.

use pagelab_trace::RecordSink;

use crate::code::{self, fetch, Generator, Insn, Memset};
use crate::spec::{fmt_size, param_map, ParamDoc, Params, WorkloadDoc};
use crate::WorkloadError;
use pagelab_core::{AccessKind, SourceInfo};

/// The catalog entry of `stride`.
pub(crate) const DOC: WorkloadDoc = WorkloadDoc {
    name: "stride",
    summary: "the paper's micro-benchmark: each iteration reads one word per page of a heap, the in-page offset advancing a cache line per page",
    params: &[
        ParamDoc { name: "heap", default: "4M", help: "heap size; a multiple of `page` (the paper varies it from 128K to 32M)" },
        ParamDoc { name: "page", default: "4K", help: "the stride between touched pages, a power of two from 64 to 1G" },
        ParamDoc { name: "line", default: "64", help: "how far the in-page offset advances per touched page (wrapping within the page), a power of two from 8 to `page`" },
        ParamDoc { name: "every", default: "1", help: "touch only every n-th page (the paper used 16: one PTE per 64-byte cache line)" },
        ParamDoc { name: "iters", default: "100", help: "iterations over the heap (the paper ran 1000)" },
        ParamDoc { name: "init", default: "true", help: code::INIT_HELP },
        ParamDoc { name: "align", default: "16", help: code::ALIGN_HELP },
    ],
};

/// The inner loop: `add rax,[rdi+rcx]; add rcx,r8; and rcx,r9; add rdi,r10; cmp rdi,r11; jb`.
const LOOP: [Insn; 6] = code::layout(code::TEXT_BASE, [4, 3, 3, 3, 3, 2]);
/// References per touched page: six instruction fetches and one 8-byte load.
pub(crate) const REFS_PER_TOUCH: u64 = 7;

/// The effective parameters of a `stride` run.
#[derive(Clone, Debug)]
pub(crate) struct Config {
    heap: u64,
    page: u64,
    line: u64,
    every: u64,
    iters: u64,
    init: bool,
    align: u64,
}

impl Config {
    pub(crate) fn parse(p: &Params) -> Result<Config, WorkloadError> {
        let page = p.pow2_size("page", 64, 1 << 30)?;
        let heap = p.size("heap", page, code::MAX_FOOTPRINT)?;
        if !heap.is_multiple_of(page) {
            return Err(p.bad(
                "heap",
                format!("the heap must be a multiple of page={}", fmt_size(page)),
            ));
        }
        let line = p.pow2_size("line", 8, page)?;
        Ok(Config {
            heap,
            page,
            line,
            every: p.count("every", 1, u32::MAX as u64)?,
            iters: p.count("iters", 0, u64::MAX)?,
            init: p.flag("init")?,
            align: p.pow2_size("align", 8, 1 << 30)?,
        })
    }

    /// Pages touched per iteration.
    fn touches(&self) -> u64 {
        (self.heap / self.page).div_ceil(self.every)
    }

    /// References the whole run emits.
    pub(crate) fn total_refs(&self) -> u64 {
        let init = if self.init {
            Memset::refs(self.heap)
        } else {
            0
        };
        init.saturating_add(self.iters.saturating_mul(self.touches() * REFS_PER_TOUCH))
    }

    fn params(&self) -> std::collections::BTreeMap<String, String> {
        param_map([
            ("heap", fmt_size(self.heap)),
            ("page", fmt_size(self.page)),
            ("line", fmt_size(self.line)),
            ("every", self.every.to_string()),
            ("iters", self.iters.to_string()),
            ("init", self.init.to_string()),
            ("align", fmt_size(self.align)),
        ])
    }
}

/// The running benchmark.
pub(crate) struct Stride {
    cfg: Config,
    base: u64,
    init: Memset,
    /// Iterations left, counting the current one.
    iters_left: u64,
    /// Offset from `base` of the current page.
    page_off: u64,
    /// Offset within the current page.
    in_page: u64,
}

impl Stride {
    pub(crate) fn new(cfg: Config) -> Stride {
        let base = code::align_up(code::MMAP_BASE, cfg.align);
        Stride {
            init: Memset::new(base, cfg.heap, cfg.init),
            iters_left: cfg.iters,
            page_off: 0,
            in_page: 0,
            base,
            cfg,
        }
    }
}

impl Generator for Stride {
    const MAX_STEP: usize = 7;

    #[inline]
    fn step(&mut self, out: &mut impl RecordSink) -> bool {
        if self.init.step(out) {
            return true;
        }
        if self.iters_left == 0 {
            return false;
        }
        fetch(out, LOOP[0]);
        code::data(
            out,
            self.base + self.page_off + self.in_page,
            8,
            AccessKind::Load,
        );
        for &insn in &LOOP[1..] {
            fetch(out, insn);
        }
        self.page_off += self.every_bytes();
        self.in_page = (self.in_page + self.cfg.line) & (self.cfg.page - 1);
        if self.page_off >= self.cfg.heap {
            self.page_off = 0;
            self.in_page = 0;
            self.iters_left -= 1;
        }
        true
    }

    fn info(&self) -> SourceInfo {
        code::workload_info(DOC.name, self.cfg.params())
    }
}

impl Stride {
    #[inline(always)]
    fn every_bytes(&self) -> u64 {
        self.cfg.every * self.cfg.page
    }
}
