//! `forkexec`: an SDET-like churn of processes, like a parallel kernel build.
//! A shell (process 1) keeps a pool of children running; each child forks
//! from the shell, execs (its address space is replaced), maps a program and
//! its shared libraries from files and some anonymous memory, touches them in
//! slices interleaved with the other children, and exits; the shell starts
//! the next, until every job has run. Most of what is shared is file-backed
//! (program and library text through the page cache); anonymous memory is
//! private to each child, shared only between the shell and a child between
//! fork and exec.

use pagelab_trace::RecordSink;

use crate::code::{self, Generator};
use crate::shm::fraction;
use crate::spec::{fmt_size, param_map, ParamDoc, Params, WorkloadDoc};
use crate::WorkloadError;
use pagelab_core::{
    AccessKind, Backing, Event, MapEvent, MemRef, PageSize, Prot, Sharing, SourceInfo, ThreadId,
    VirtAddr,
};

/// The catalog entry of `forkexec`.
pub(crate) const DOC: WorkloadDoc = WorkloadDoc {
    name: "forkexec",
    summary: "an SDET-like churn: a shell keeps a pool of children that fork, exec, map a program, shared libraries and anonymous memory, touch them in interleaved slices and exit, job after job (mostly file-backed sharing, like make -j)",
    params: &[
        ParamDoc { name: "procs", default: "16", help: "children running at once, 1 to 4096" },
        ParamDoc { name: "jobs", default: "64", help: "children run in all (pids 2, 3, ...)" },
        ParamDoc { name: "text", default: "2M", help: "the program's text (file-backed, shared through the page cache), a multiple of 4K" },
        ParamDoc { name: "data", default: "128K", help: "the program's data (file-backed, private: every page written, so copied)" },
        ParamDoc { name: "libs", default: "4", help: "shared libraries each child maps, 0 to 16" },
        ParamDoc { name: "lib", default: "1M", help: "each library's text (file-backed, shared)" },
        ParamDoc { name: "libdata", default: "16K", help: "each library's data (private, written)" },
        ParamDoc { name: "anon", default: "1M", help: "heap: anonymous memory each child writes" },
        ParamDoc { name: "touch", default: "0.5", help: "fraction of program and library text a child touches (instruction fetches), 0 to 1" },
        ParamDoc { name: "slices", default: "4", help: "slices each child's touches are cut into; the pool's children take turns slice by slice" },
    ],
};

/// 32-bit process layout: program text, heap, libraries, stack.
/// The base page: what a process touches and the unit of every size here.
const BASE: u64 = PageSize::MIN.bytes();
const TEXT: u64 = 0x0804_8000;
const HEAP: u64 = 0x0900_0000;
const LIBS: u64 = 0x4000_0000;
const LIB_STRIDE: u64 = 0x0100_0000;
const STACK: u64 = 0xbf00_0000;
const STACK_LEN: u64 = 128 << 10;
/// Exec drops everything below this (a 32-bit kernel's user space).
const USER_TOP: u64 = 0xc000_0000;
/// File ids: the shell's text, its libc, the program, the libraries.
const SHELL_FILE: u64 = 1;
const PROGRAM_FILE: u64 = 10;
const LIB_FILE: u64 = 11;

/// The effective parameters.
#[derive(Clone, Debug)]
pub(crate) struct Config {
    procs: u64,
    jobs: u64,
    text: u64,
    data: u64,
    libs: u64,
    lib: u64,
    libdata: u64,
    anon: u64,
    touch: f64,
    touch_raw: String,
    slices: u64,
}

impl Config {
    pub(crate) fn parse(p: &Params) -> Result<Config, WorkloadError> {
        let page = |key: &str| -> Result<u64, WorkloadError> {
            let v = p.size(key, 0, LIB_STRIDE - (64 << 10))?;
            if v % BASE != 0 {
                return Err(p.bad(key, "write a multiple of 4K below 16M"));
            }
            Ok(v)
        };
        Ok(Config {
            procs: p.count("procs", 1, 4096)?,
            jobs: p.count("jobs", 0, 100_000_000)?,
            text: page("text")?,
            data: page("data")?,
            libs: p.count("libs", 0, 16)?,
            lib: page("lib")?,
            libdata: page("libdata")?,
            anon: page("anon")?,
            touch: fraction(p, "touch")?,
            touch_raw: p.raw_value("touch").to_string(),
            slices: p.count("slices", 1, 1024)?,
        })
    }

    /// The regions a child maps: (start, bytes, backing, private written, pages touched).
    fn regions(&self) -> Vec<Region> {
        let rx = Prot(Prot::READ | Prot::EXEC);
        let rw = Prot(Prot::READ | Prot::WRITE);
        let file = |file_id, offset| Backing::File { file_id, offset };
        let part = |bytes: u64| ((bytes / BASE) as f64 * self.touch).ceil() as u64;
        let mut r = vec![
            Region::new(TEXT, self.text, rx, file(PROGRAM_FILE, 0), part(self.text)),
            Region::new(
                TEXT + self.text,
                self.data,
                rw,
                file(PROGRAM_FILE, self.text),
                self.data / BASE,
            ),
            Region::new(HEAP, self.anon, rw, Backing::Anon, self.anon / BASE),
        ];
        for i in 0..self.libs {
            let base = LIBS + i * LIB_STRIDE;
            let f = LIB_FILE + i;
            r.push(Region::new(base, self.lib, rx, file(f, 0), part(self.lib)));
            r.push(Region::new(
                base + self.lib,
                self.libdata,
                rw,
                file(f, self.lib),
                self.libdata / BASE,
            ));
        }
        r.push(Region::new(
            STACK,
            STACK_LEN,
            rw,
            Backing::Anon,
            STACK_LEN / BASE,
        ));
        r.retain(|x| x.len > 0);
        r
    }

    /// The shell's own regions: its text, libc's text and data, its heap.
    fn shell(&self) -> Vec<Region> {
        let rx = Prot(Prot::READ | Prot::EXEC);
        let rw = Prot(Prot::READ | Prot::WRITE);
        let libc = LIB_FILE;
        vec![
            Region::new(
                TEXT,
                1 << 20,
                rx,
                Backing::File {
                    file_id: SHELL_FILE,
                    offset: 0,
                },
                64,
            ),
            Region::new(
                LIBS,
                self.lib.max(BASE),
                rx,
                Backing::File {
                    file_id: libc,
                    offset: 0,
                },
                32,
            ),
            Region::new(HEAP, 256 << 10, rw, Backing::Anon, 64),
        ]
    }

    /// References the whole run emits.
    pub(crate) fn total_refs(&self) -> u64 {
        let per: u64 = self.regions().iter().map(|r| r.touched).sum();
        let shell: u64 = self.shell().iter().map(|r| r.touched).sum();
        shell.saturating_add(self.jobs.saturating_mul(per))
    }

    fn params(&self) -> std::collections::BTreeMap<String, String> {
        param_map([
            ("procs", self.procs.to_string()),
            ("jobs", self.jobs.to_string()),
            ("text", fmt_size(self.text)),
            ("data", fmt_size(self.data)),
            ("libs", self.libs.to_string()),
            ("lib", fmt_size(self.lib)),
            ("libdata", fmt_size(self.libdata)),
            ("anon", fmt_size(self.anon)),
            ("touch", self.touch_raw.clone()),
            ("slices", self.slices.to_string()),
        ])
    }
}

/// One mapping of a process and how many of its first pages it touches.
#[derive(Clone, Copy, Debug)]
struct Region {
    start: u64,
    len: u64,
    prot: Prot,
    backing: Backing,
    touched: u64,
}

impl Region {
    fn new(start: u64, len: u64, prot: Prot, backing: Backing, touched: u64) -> Region {
        Region {
            start,
            len,
            prot,
            backing,
            touched: touched.min(len / BASE),
        }
    }

    fn map(&self) -> Event {
        Event::Map(Box::new(MapEvent {
            start: VirtAddr(self.start),
            len: self.len,
            prot: self.prot,
            backing: self.backing,
            sharing: Sharing::Private,
        }))
    }

    fn kind(&self) -> AccessKind {
        if self.prot.0 & Prot::EXEC != 0 {
            AccessKind::Instr
        } else {
            AccessKind::Store
        }
    }
}

/// A child of the pool: its pid and how far it has come.
#[derive(Clone, Copy, Debug)]
struct Child {
    pid: u32,
    /// 0: not yet forked; 1..=slices: touching that slice; then exit.
    phase: u64,
    /// Within the slice: region and page.
    region: usize,
    page: u64,
    switched: bool,
}

/// The running workload.
pub(crate) struct ForkExec {
    cfg: Config,
    regions: Vec<Region>,
    shell: Vec<Region>,
    /// The shell's setup: 0 not yet, then region being touched + 1, done past the end.
    shell_at: usize,
    shell_page: u64,
    pool: Vec<Child>,
    turn: usize,
    started: u64,
}

/// References one step appends at most (a fork and exec appends 4 + maps).
const REFS_PER_STEP: u64 = 48;

impl ForkExec {
    pub(crate) fn new(cfg: Config) -> ForkExec {
        ForkExec {
            regions: cfg.regions(),
            shell: cfg.shell(),
            shell_at: 0,
            shell_page: 0,
            pool: Vec::new(),
            turn: 0,
            started: 0,
            cfg,
        }
    }

    fn switch(out: &mut impl RecordSink, pid: u32) {
        out.event(Event::Switch(ThreadId { pid, tid: pid }));
    }

    fn shell_step(&mut self, out: &mut impl RecordSink) {
        if self.shell_at == 0 {
            Self::switch(out, 1);
            self.shell.iter().for_each(|r| out.event(r.map()));
            self.shell_at = 1;
            return;
        }
        let r = self.shell[self.shell_at - 1];
        let end = (self.shell_page + REFS_PER_STEP).min(r.touched);
        for page in self.shell_page..end {
            out.reference(MemRef {
                addr: VirtAddr(r.start) + page * PageSize::MIN.bytes(),
                size: 4,
                kind: r.kind(),
            });
        }
        self.shell_page = end;
        if end >= r.touched {
            self.shell_at += 1;
            self.shell_page = 0;
        }
    }

    /// The pages of region `r` in slice `s`.
    fn slice(&self, r: &Region, s: u64) -> (u64, u64) {
        let n = self.cfg.slices;
        (r.touched * (s - 1) / n, r.touched * s / n)
    }

    fn child_step(&mut self, i: usize, out: &mut impl RecordSink) {
        let mut c = self.pool[i];
        if c.phase == 0 {
            Self::switch(out, 1);
            out.event(Event::fork(c.pid));
            Self::switch(out, c.pid);
            out.event(Event::Unmap {
                start: VirtAddr(0),
                len: USER_TOP,
            });
            self.regions.iter().for_each(|r| out.event(r.map()));
            c.phase = 1;
            c.switched = true;
            self.pool[i] = c;
            return;
        }
        if c.phase > self.cfg.slices {
            Self::switch(out, c.pid);
            out.event(Event::Exit { status: 0 });
            self.next_job(i);
            return;
        }
        if !c.switched {
            Self::switch(out, c.pid);
            c.switched = true;
        }
        let mut budget = REFS_PER_STEP;
        while budget > 0 && c.region < self.regions.len() {
            let r = self.regions[c.region];
            let (lo, hi) = self.slice(&r, c.phase);
            let from = c.page.max(lo);
            let to = hi.min(from + budget);
            for page in from..to {
                out.reference(MemRef {
                    addr: VirtAddr(r.start) + page * PageSize::MIN.bytes(),
                    size: 4,
                    kind: r.kind(),
                });
            }
            budget -= to - from;
            if to >= hi {
                c.region += 1;
                c.page = 0;
            } else {
                c.page = to;
            }
        }
        if c.region >= self.regions.len() {
            // The slice is done: the next child takes its turn.
            c.phase += 1;
            c.region = 0;
            c.page = 0;
            c.switched = false;
            self.turn = (i + 1) % self.pool.len().max(1);
        }
        self.pool[i] = c;
    }

    fn next_job(&mut self, i: usize) {
        if self.started < self.cfg.jobs {
            self.pool[i] = Child {
                pid: self.started as u32 + 2,
                phase: 0,
                region: 0,
                page: 0,
                switched: false,
            };
            self.started += 1;
            self.turn = (i + 1) % self.pool.len();
        } else {
            self.pool.remove(i);
            self.turn = if self.pool.is_empty() {
                0
            } else {
                i % self.pool.len()
            };
        }
    }
}

impl Generator for ForkExec {
    const MAX_STEP: usize = 64;

    fn step(&mut self, out: &mut impl RecordSink) -> bool {
        if self.shell_at <= self.shell.len() {
            self.shell_step(out);
            return true;
        }
        while (self.pool.len() as u64) < self.cfg.procs && self.started < self.cfg.jobs {
            self.pool.push(Child {
                pid: self.started as u32 + 2,
                phase: 0,
                region: 0,
                page: 0,
                switched: false,
            });
            self.started += 1;
        }
        if self.pool.is_empty() {
            return false;
        }
        let i = self.turn.min(self.pool.len() - 1);
        self.child_step(i, out);
        true
    }

    fn info(&self) -> SourceInfo {
        code::workload_info(DOC.name, self.cfg.params())
    }
}
