//! `shm-fanout`: many processes attach one shared segment and touch its pages,
//! like the backends of a database attaching its buffer pool (Bligh and Hansen's (OLS 2003)
//! 5000 processes sharing a 2G segment).

use pagelab_trace::RecordSink;

use crate::code::{self, Generator};
use crate::spec::{fmt_size, param_map, ParamDoc, Params, WorkloadDoc};
use crate::WorkloadError;
use pagelab_core::{
    AccessKind, Advice, Backing, Event, MapEvent, MemRef, PageSize, Prot, Sharing, SourceInfo,
    ThreadId, VirtAddr,
};

/// The catalog entry of `shm-fanout`.
pub(crate) const DOC: WorkloadDoc = WorkloadDoc {
    name: "shm-fanout",
    summary: "N processes, forked one by one from process 1, each attach one shared segment (MAP_SHARED) and touch its pages, one 8-byte reference per 4K page and no instruction fetches",
    params: &[
        ParamDoc { name: "procs", default: "16", help: "processes attaching the segment, 1 to 1000000 (pids 2, 3, ...; process 1 forks them)" },
        ParamDoc { name: "segment", default: "64M", help: "segment size, a multiple of 4K (and of hpage with hugetlb) from 4K to 1T" },
        ParamDoc { name: "touch", default: "1", help: "fraction of the segment each process touches, from its start (the hot part of a buffer pool), 0 to 1" },
        ParamDoc { name: "backing", default: "shm", help: "shm (4K pages), thp (shmem with huge pages where aligned; an Advise PageOrder without wait) or hugetlb (SHM_HUGETLB: from the boot-time pool; an Advise PageOrder with wait)" },
        ParamDoc { name: "hpage", default: "2M", help: "the huge page size for thp and hugetlb (2M, 1G, or another leaf size of the machine)" },
        ParamDoc { name: "addr", default: "256M", help: "where every process attaches the segment, a multiple of 4K (and of hpage with hugetlb); 256M leaves a 2G segment under a 32-bit kernel's 3G" },
        ParamDoc { name: "write", default: "false", help: "touch with stores instead of loads" },
        ParamDoc { name: "passes", default: "1", help: "times each process touches its pages" },
        ParamDoc { name: "exit", default: "false", help: "the processes exit at the end, in the order they started" },
    ],
};

/// The shared segment's file id in the trace.
pub(crate) const SEGMENT_FILE: u64 = 0x5348_4d00;
/// The base page, the unit of an shm segment.
const BASE: u64 = PageSize::MIN.bytes();

/// The effective parameters.
#[derive(Clone, Debug)]
pub(crate) struct Config {
    procs: u64,
    segment: u64,
    touch_pages: u64,
    touch: String,
    backing: &'static str,
    hpage: u64,
    addr: u64,
    write: bool,
    passes: u64,
    exit: bool,
}

/// A fraction from 0 to 1, written like `0.25` or `1`.
pub(crate) fn fraction(p: &Params, key: &str) -> Result<f64, WorkloadError> {
    let raw = p.raw_value(key);
    match raw.parse::<f64>() {
        Ok(f) if (0.0..=1.0).contains(&f) => Ok(f),
        _ => Err(p.bad(key, "write a fraction from 0 to 1, like 0.25 or 1")),
    }
}

impl Config {
    pub(crate) fn parse(p: &Params) -> Result<Config, WorkloadError> {
        let backing = match p.raw_value("backing") {
            "shm" => "shm",
            "thp" => "thp",
            "hugetlb" => "hugetlb",
            _ => return Err(p.bad("backing", "write shm, thp or hugetlb")),
        };
        let hpage = p.pow2_size("hpage", 8 << 10, 1 << 30)?;
        let unit = if backing == "hugetlb" { hpage } else { BASE };
        let segment = p.size("segment", BASE, 1 << 40)?;
        if segment % unit != 0 {
            return Err(p.bad("segment", format!("write a multiple of {}", fmt_size(unit))));
        }
        let addr = p.size("addr", 0, 1 << 46)?;
        if addr % unit != 0 {
            return Err(p.bad("addr", format!("write a multiple of {}", fmt_size(unit))));
        }
        let touch = fraction(p, "touch")?;
        let pages = segment / BASE;
        Ok(Config {
            procs: p.count("procs", 1, 1_000_000)?,
            segment,
            touch_pages: ((pages as f64 * touch).ceil() as u64).min(pages),
            touch: p.raw_value("touch").to_string(),
            backing,
            hpage,
            addr,
            write: p.flag("write")?,
            passes: p.count("passes", 1, 1_000_000)?,
            exit: p.flag("exit")?,
        })
    }

    /// References the whole run emits.
    pub(crate) fn total_refs(&self) -> u64 {
        self.procs
            .saturating_mul(self.touch_pages)
            .saturating_mul(self.passes)
    }

    fn params(&self) -> std::collections::BTreeMap<String, String> {
        param_map([
            ("procs", self.procs.to_string()),
            ("segment", fmt_size(self.segment)),
            ("touch", self.touch.clone()),
            ("backing", self.backing.to_string()),
            ("hpage", fmt_size(self.hpage)),
            ("addr", fmt_size(self.addr)),
            ("write", self.write.to_string()),
            ("passes", self.passes.to_string()),
            ("exit", self.exit.to_string()),
        ])
    }
}

/// The running workload.
pub(crate) struct ShmFanout {
    cfg: Config,
    /// The process now touching (0-based), `procs` once all have.
    proc: u64,
    /// Whether the current process has attached.
    attached: bool,
    /// Next page to touch, and passes left, for the current process.
    page: u64,
    pass: u64,
    /// Processes that have exited, at the end.
    exited: u64,
    kind: AccessKind,
}

impl ShmFanout {
    pub(crate) fn new(cfg: Config) -> ShmFanout {
        let kind = if cfg.write {
            AccessKind::Store
        } else {
            AccessKind::Load
        };
        ShmFanout {
            cfg,
            proc: 0,
            attached: false,
            page: 0,
            pass: 0,
            exited: 0,
            kind,
        }
    }

    fn switch(out: &mut impl RecordSink, pid: u32) {
        out.event(Event::Switch(ThreadId { pid, tid: pid }));
    }

    fn attach(&mut self, out: &mut impl RecordSink) {
        let child = self.proc as u32 + 2;
        Self::switch(out, 1);
        out.event(Event::fork(child));
        Self::switch(out, child);
        out.event(Event::Map(Box::new(MapEvent {
            start: VirtAddr(self.cfg.addr),
            len: self.cfg.segment,
            prot: Prot(Prot::READ | Prot::WRITE),
            backing: Backing::File {
                file_id: SEGMENT_FILE,
                offset: 0,
            },
            sharing: Sharing::Shared,
        })));
        if self.cfg.backing != "shm" {
            out.event(Event::Advise {
                start: VirtAddr(self.cfg.addr),
                len: self.cfg.segment,
                advice: Advice::PageOrder {
                    shift: self.cfg.hpage.trailing_zeros() as u8,
                    wait: self.cfg.backing == "hugetlb",
                },
            });
        }
        self.attached = true;
        self.page = 0;
        self.pass = 0;
    }
}

/// References one step appends at most.
const REFS_PER_STEP: u64 = 64;

impl Generator for ShmFanout {
    const MAX_STEP: usize = REFS_PER_STEP as usize;

    #[inline]
    fn step(&mut self, out: &mut impl RecordSink) -> bool {
        if self.proc >= self.cfg.procs {
            if !self.cfg.exit || self.exited >= self.cfg.procs {
                return false;
            }
            Self::switch(out, self.exited as u32 + 2);
            out.event(Event::Exit { status: 0 });
            self.exited += 1;
            return true;
        }
        if !self.attached {
            self.attach(out);
            return true;
        }
        let end = (self.page + REFS_PER_STEP).min(self.cfg.touch_pages);
        for page in self.page..end {
            out.reference(MemRef {
                addr: VirtAddr(self.cfg.addr) + page * PageSize::MIN.bytes(),
                size: 8,
                kind: self.kind,
            });
        }
        self.page = end;
        if self.page >= self.cfg.touch_pages {
            self.pass += 1;
            self.page = 0;
            if self.pass >= self.cfg.passes {
                self.proc += 1;
                self.attached = false;
            }
        }
        true
    }

    fn info(&self) -> SourceInfo {
        code::workload_info(DOC.name, self.cfg.params())
    }
}
