//! `stream`: McCalpin's STREAM kernels (copy, scale, add, triad) over three
//! arrays of doubles, as compiled scalar x86-64 code.

use pagelab_trace::RecordSink;

use crate::code::{self, fetch, Generator, Insn, Memset};
use crate::spec::{fmt_size, param_map, ParamDoc, Params, WorkloadDoc};
use crate::WorkloadError;
use pagelab_core::{AccessKind, SourceInfo};

/// The catalog entry of `stream`.
pub(crate) const DOC: WorkloadDoc = WorkloadDoc {
    name: "stream",
    summary: "McCalpin's STREAM: copy c=a, scale b=s*c, add c=a+b, triad a=b+s*c over three arrays of 8-byte doubles",
    params: &[
        ParamDoc { name: "n", default: "131072", help: "elements per array (8 bytes each; the default makes three 1M arrays, 3M in all)" },
        ParamDoc { name: "iters", default: "10", help: "times the four kernels run (STREAM's NTIMES)" },
        ParamDoc { name: "init", default: "true", help: code::INIT_HELP },
        ParamDoc { name: "align", default: "32", help: code::ALIGN_HELP },
    ],
};

const LOAD: AccessKind = AccessKind::Load;
const STORE: AccessKind = AccessKind::Store;
/// `movsd xmm0,[a+j]; movsd [c+j],xmm0; add rax,1; cmp rax,rcx; jne`.
const COPY: [Insn; 5] = code::layout(code::TEXT_BASE, [5, 5, 4, 3, 2]);
/// `movsd xmm0,[c+j]; mulsd xmm0,xmm1; movsd [b+j],xmm0; add; cmp; jne`.
const SCALE: [Insn; 6] = code::layout(code::TEXT_BASE + 0x20, [5, 4, 5, 4, 3, 2]);
/// `movsd xmm0,[a+j]; addsd xmm0,[b+j]; movsd [c+j],xmm0; add; cmp; jne`.
const ADD: [Insn; 6] = code::layout(code::TEXT_BASE + 0x40, [5, 5, 5, 4, 3, 2]);
/// `movsd xmm0,[c+j]; mulsd xmm0,xmm1; addsd xmm0,[b+j]; movsd [a+j],xmm0; add; cmp; jne`.
const TRIAD: [Insn; 7] = code::layout(code::TEXT_BASE + 0x60, [5, 4, 5, 5, 4, 3, 2]);

/// References per element per iteration: copy 7, scale 8, add 9, triad 10.
pub(crate) const REFS_PER_ELEMENT: u64 = 34;

/// The effective parameters of a `stream` run.
#[derive(Clone, Debug)]
pub(crate) struct Config {
    n: u64,
    iters: u64,
    init: bool,
    align: u64,
}

impl Config {
    pub(crate) fn parse(p: &Params) -> Result<Config, WorkloadError> {
        Ok(Config {
            n: p.count("n", 1, code::MAX_FOOTPRINT / 24)?,
            iters: p.count("iters", 0, u64::MAX)?,
            init: p.flag("init")?,
            align: p.pow2_size("align", 8, 1 << 30)?,
        })
    }

    /// References the whole run emits.
    pub(crate) fn total_refs(&self) -> u64 {
        let init = if self.init {
            Memset::refs(24 * self.n)
        } else {
            0
        };
        init.saturating_add(self.iters.saturating_mul(self.n * REFS_PER_ELEMENT))
    }

    fn params(&self) -> std::collections::BTreeMap<String, String> {
        param_map([
            ("n", self.n.to_string()),
            ("iters", self.iters.to_string()),
            ("init", self.init.to_string()),
            ("align", fmt_size(self.align)),
        ])
    }
}

/// The running benchmark.
pub(crate) struct Stream {
    cfg: Config,
    /// Addresses of a, b and c: contiguous static arrays in .bss.
    a: u64,
    b: u64,
    c: u64,
    init: Memset,
    iters_left: u64,
    /// 0 copy, 1 scale, 2 add, 3 triad.
    kernel: u8,
    /// Byte offset of the current element.
    j: u64,
}

impl Stream {
    pub(crate) fn new(cfg: Config) -> Stream {
        let a = code::align_up(code::BSS_BASE, cfg.align);
        let bytes = cfg.n * 8;
        Stream {
            a,
            b: a + bytes,
            c: a + 2 * bytes,
            init: Memset::new(a, 3 * bytes, cfg.init),
            iters_left: cfg.iters,
            kernel: 0,
            j: 0,
            cfg,
        }
    }

    fn advance(&mut self) {
        self.j += 8;
        if self.j == self.cfg.n * 8 {
            self.j = 0;
            self.kernel += 1;
            if self.kernel == 4 {
                self.kernel = 0;
                self.iters_left -= 1;
            }
        }
    }
}

impl Generator for Stream {
    const MAX_STEP: usize = 10;

    #[inline]
    fn step(&mut self, out: &mut impl RecordSink) -> bool {
        if self.init.step(out) {
            return true;
        }
        if self.iters_left == 0 {
            return false;
        }
        let j = self.j;
        let (a, b, c) = (self.a + j, self.b + j, self.c + j);
        match self.kernel {
            0 => {
                fetch(out, COPY[0]);
                code::data(out, a, 8, LOAD);
                fetch(out, COPY[1]);
                code::data(out, c, 8, STORE);
                tail(out, &COPY[2..]);
            }
            1 => {
                fetch(out, SCALE[0]);
                code::data(out, c, 8, LOAD);
                fetch(out, SCALE[1]);
                fetch(out, SCALE[2]);
                code::data(out, b, 8, STORE);
                tail(out, &SCALE[3..]);
            }
            2 => {
                fetch(out, ADD[0]);
                code::data(out, a, 8, LOAD);
                fetch(out, ADD[1]);
                code::data(out, b, 8, LOAD);
                fetch(out, ADD[2]);
                code::data(out, c, 8, STORE);
                tail(out, &ADD[3..]);
            }
            _ => {
                fetch(out, TRIAD[0]);
                code::data(out, c, 8, LOAD);
                fetch(out, TRIAD[1]);
                fetch(out, TRIAD[2]);
                code::data(out, b, 8, LOAD);
                fetch(out, TRIAD[3]);
                code::data(out, a, 8, STORE);
                tail(out, &TRIAD[4..]);
            }
        }
        self.advance();
        true
    }

    fn info(&self) -> SourceInfo {
        code::workload_info(DOC.name, self.cfg.params())
    }
}

/// The fetches of a kernel's last instructions.
#[inline(always)]
fn tail(out: &mut impl RecordSink, code: &[Insn]) {
    code.iter().for_each(|&i| fetch(out, i));
}
