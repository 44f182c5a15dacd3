//! `prefork`: a server that forks workers without exec, like Apache's
//! prefork MPM, PostgreSQL's postmaster starting backends, or Redis forking
//! to save. The server (process 1) maps its text (file-backed, private) and
//! a heap of anonymous memory, fetches every text page and writes every heap
//! page; then it keeps a pool of workers running until every job has run.
//! Each worker inherits the server's address space, touches the first part
//! of the heap in slices interleaved with the other workers (a fraction of
//! the touches are stores, spread evenly: copy-on-write), and exits. This is
//! where sharing PTE pages at fork pays: large, aligned private mappings
//! inherited whole (Bligh and Hansen: "reduces the overhead of fork+exec for
//! large processes").

use pagelab_trace::RecordSink;

use crate::code::{self, Generator};
use crate::shm::fraction;
use crate::spec::{fmt_size, param_map, ParamDoc, Params, WorkloadDoc};
use crate::WorkloadError;
use pagelab_core::{
    AccessKind, Backing, Event, MapEvent, MemRef, PageSize, Prot, Sharing, SourceInfo, ThreadId,
    VirtAddr,
};

/// The catalog entry of `prefork`.
pub(crate) const DOC: WorkloadDoc = WorkloadDoc {
    name: "prefork",
    summary: "a server writes its heap, then forks workers that do not exec (Apache prefork, a database's backends): each reads the first part of the inherited heap, writes a fraction of what it reads (copy-on-write) in interleaved slices, and exits, job after job",
    params: &[
        ParamDoc { name: "procs", default: "16", help: "workers running at once, 1 to 4096" },
        ParamDoc { name: "jobs", default: "64", help: "workers run in all (pids 2, 3, ...)" },
        ParamDoc { name: "heap", default: "64M", help: "the server's heap (anonymous, private, every page written before the first fork), a multiple of 4K up to 2G" },
        ParamDoc { name: "text", default: "2M", help: "the server's text (file-backed, private), a multiple of 4K up to 256M" },
        ParamDoc { name: "touch", default: "1", help: "fraction of the heap, from its start, each worker touches, 0 to 1" },
        ParamDoc { name: "write", default: "0.01", help: "fraction of a worker's touches that are stores, spread evenly, 0 to 1" },
        ParamDoc { name: "slices", default: "4", help: "slices each worker's touches are cut into; the pool's workers take turns slice by slice" },
    ],
};

/// The base page: the unit of every size here.
const BASE: u64 = PageSize::MIN.bytes();
/// 32-bit layout: text at 128M, heap at 512M (both 2M- and 4M-aligned).
const TEXT: u64 = 0x0800_0000;
const HEAP: u64 = 0x2000_0000;
const TEXT_FILE: u64 = 20;
/// References one step appends at most.
const REFS_PER_STEP: u64 = 48;

/// The effective parameters.
#[derive(Clone, Debug)]
pub(crate) struct Config {
    procs: u64,
    jobs: u64,
    heap: u64,
    text: u64,
    touch_pages: u64,
    touch_raw: String,
    write: f64,
    write_raw: String,
    slices: u64,
}

impl Config {
    pub(crate) fn parse(p: &Params) -> Result<Config, WorkloadError> {
        let page = |key: &str, max: u64| -> Result<u64, WorkloadError> {
            let v = p.size(key, BASE, max)?;
            if v % BASE != 0 {
                return Err(p.bad(
                    key,
                    format!("write a multiple of 4K up to {}", fmt_size(max)),
                ));
            }
            Ok(v)
        };
        let heap = page("heap", 2 << 30)?;
        let pages = heap / BASE;
        let touch = fraction(p, "touch")?;
        Ok(Config {
            procs: p.count("procs", 1, 4096)?,
            jobs: p.count("jobs", 0, 100_000_000)?,
            heap,
            text: page("text", 256 << 20)?,
            touch_pages: ((pages as f64 * touch).ceil() as u64).min(pages),
            touch_raw: p.raw_value("touch").to_string(),
            write: fraction(p, "write")?,
            write_raw: p.raw_value("write").to_string(),
            slices: p.count("slices", 1, 1024)?,
        })
    }

    /// References the whole run emits.
    pub(crate) fn total_refs(&self) -> u64 {
        let server = (self.text + self.heap) / BASE;
        server.saturating_add(self.jobs.saturating_mul(self.touch_pages))
    }

    /// Whether a worker's touch of heap page `i` is a store: `write` of the
    /// touches, spread evenly.
    fn store(&self, i: u64) -> bool {
        ((i + 1) as f64 * self.write).floor() > (i as f64 * self.write).floor()
    }

    fn params(&self) -> std::collections::BTreeMap<String, String> {
        param_map([
            ("procs", self.procs.to_string()),
            ("jobs", self.jobs.to_string()),
            ("heap", fmt_size(self.heap)),
            ("text", fmt_size(self.text)),
            ("touch", self.touch_raw.clone()),
            ("write", self.write_raw.clone()),
            ("slices", self.slices.to_string()),
        ])
    }
}

/// A worker: its pid, its slice (0: not yet forked; past `slices`: exits),
/// and the next page of its slice.
#[derive(Clone, Copy, Debug)]
struct Worker {
    pid: u32,
    phase: u64,
    page: u64,
}

/// The running workload.
pub(crate) struct Prefork {
    cfg: Config,
    /// The server's next page to touch: text pages, then heap pages.
    setup: Option<u64>,
    pool: Vec<Worker>,
    turn: usize,
    started: u64,
    /// The pid whose events come now.
    current: u32,
}

impl Prefork {
    pub(crate) fn new(cfg: Config) -> Prefork {
        Prefork {
            cfg,
            setup: None,
            pool: Vec::new(),
            turn: 0,
            started: 0,
            current: 0,
        }
    }

    fn switch(&mut self, out: &mut impl RecordSink, pid: u32) {
        if self.current != pid {
            out.event(Event::Switch(ThreadId { pid, tid: pid }));
            self.current = pid;
        }
    }

    fn touch(out: &mut impl RecordSink, addr: u64, kind: AccessKind) {
        out.reference(MemRef {
            addr: VirtAddr(addr),
            size: 4,
            kind,
        });
    }

    /// The server maps and touches its text and heap; false once done.
    fn setup_step(&mut self, out: &mut impl RecordSink) -> bool {
        let text = self.cfg.text / BASE;
        let all = text + self.cfg.heap / BASE;
        let at = match self.setup {
            None => {
                self.switch(out, 1);
                let map = |start, len, prot, backing| {
                    Event::Map(Box::new(MapEvent {
                        start: VirtAddr(start),
                        len,
                        prot: Prot(prot),
                        backing,
                        sharing: Sharing::Private,
                    }))
                };
                let (rx, rw) = (Prot::READ | Prot::EXEC, Prot::READ | Prot::WRITE);
                let file = Backing::File {
                    file_id: TEXT_FILE,
                    offset: 0,
                };
                out.event(map(TEXT, self.cfg.text, rx, file));
                out.event(map(HEAP, self.cfg.heap, rw, Backing::Anon));
                self.setup = Some(0);
                return true;
            }
            Some(at) if at >= all => return false,
            Some(at) => at,
        };
        let end = (at + REFS_PER_STEP).min(all);
        for i in at..end {
            if i < text {
                Self::touch(out, TEXT + i * BASE, AccessKind::Instr);
            } else {
                Self::touch(out, HEAP + (i - text) * BASE, AccessKind::Store);
            }
        }
        self.setup = Some(end);
        true
    }

    fn worker_step(&mut self, i: usize, out: &mut impl RecordSink) {
        let mut w = self.pool[i];
        let n = self.cfg.slices;
        if w.phase == 0 {
            self.switch(out, 1);
            out.event(Event::fork(w.pid));
            w.phase = 1;
        } else if w.phase > n {
            self.switch(out, w.pid);
            out.event(Event::Exit { status: 0 });
            self.pool.remove(i);
            self.turn = if self.pool.is_empty() {
                0
            } else {
                i % self.pool.len()
            };
            return;
        } else {
            self.switch(out, w.pid);
            let t = self.cfg.touch_pages;
            let hi = t * w.phase / n;
            let from = w.page.max(t * (w.phase - 1) / n);
            let to = hi.min(from + REFS_PER_STEP);
            for p in from..to {
                let kind = if self.cfg.store(p) {
                    AccessKind::Store
                } else {
                    AccessKind::Load
                };
                Self::touch(out, HEAP + p * BASE, kind);
            }
            w.page = to;
            if to < hi {
                self.pool[i] = w;
                return;
            }
            // The slice is done: the next worker takes its turn.
            w.phase += 1;
        }
        self.pool[i] = w;
        self.turn = (i + 1) % self.pool.len();
    }
}

impl Generator for Prefork {
    const MAX_STEP: usize = 64;

    fn step(&mut self, out: &mut impl RecordSink) -> bool {
        if self.setup_step(out) {
            return true;
        }
        while (self.pool.len() as u64) < self.cfg.procs && self.started < self.cfg.jobs {
            self.pool.push(Worker {
                pid: self.started as u32 + 2,
                phase: 0,
                page: 0,
            });
            self.started += 1;
        }
        if self.pool.is_empty() {
            return false;
        }
        let i = self.turn.min(self.pool.len() - 1);
        self.worker_step(i, out);
        true
    }

    fn info(&self) -> SourceInfo {
        code::workload_info(DOC.name, self.cfg.params())
    }
}
