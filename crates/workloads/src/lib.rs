//! Built-in synthetic workloads, generated on the fly as trace sources.
//!
//! A workload is named by a spec, `NAME[:key=value,key=value...]`, and
//! [`open`] turns it into a [`TraceSource`] that generates its references
//! lazily, a batch per `fill`: a run of a billion references uses the same few
//! hundred bytes as a run of ten. Each workload is a small x86-64 program:
//! its inner loop sits at a code address (`0x401000`) with realistic
//! instruction lengths, every instruction is an `Instr`
//! reference of its length, and the loop's data references come in program
//! order between them. Data lives where a real process would put it (an mmap
//! chunk at `0x7f3a_1c5e_3010` for large mallocs, `.bss` at `0x405060` for
//! STREAM's static arrays), so it is not 2M-aligned unless `align=2M` asks.
//!
//! | workload | what it does |
//! |---|---|
//! | `stride` | the paper's micro-benchmark (seed 000, section 5.1): one word per page, offset advancing a cache line per page |
//! | `stream` | McCalpin's STREAM: copy, scale, add, triad over three arrays |
//! | `gups`   | HPCC RandomAccess: random 8-byte read-modify-writes over a table |
//! | `chase`  | a pointer chase around one random cycle through all nodes |
//! | `lines`  | the probe of `machines --measure`: lines one per slot at colours, dependent or independent |
//! | `shm-fanout` | many processes attach one shared segment and touch its pages (Bligh and Hansen, OLS 2003) |
//! | `forkexec` | an SDET-like churn of processes that fork, exec, map libraries and exit |
//! | `prefork` | a server that writes its heap and forks workers that do not exec (copy-on-write) |
//!
//! The last three are workloads of many processes: their events include
//! `Switch`, `Fork`, `Map`, `Advise` and `Exit`, and they are meant for
//! `pagelab sharing`; their references are data and instruction touches of
//! pages, with no loop instructions around them.
//!
//! ## Parameters and defaults
//!
//! Sizes are written like `64`, `4K`, `32M`; counts as whole numbers
//! (`1_000_000` is allowed); flags as `true`/`false`. Every workload takes
//! `init` (first write all its data with libc's memset loop, 32-byte stores)
//! and `align` (alignment of the data's first byte; `align=2M` starts it on a
//! huge page). [`catalog`] holds the same text, for `pagelab workloads`.
//!
//! - `stride`: `heap=4M` heap size, a multiple of `page` (the paper: 128K..32M);
//!   `page=4K` distance between touched pages; `line=64` in-page offset step,
//!   wrapping within the page; `every=1` touch every n-th page (the paper: 16);
//!   `iters=100` passes over the heap (the paper: 1000); `init=true`; `align=16`.
//!   Per touched page: 6 instructions and one 8-byte load.
//! - `stream`: `n=131072` elements per array (8 bytes each); `iters=10` runs
//!   of the four kernels; `init=true`; `align=32`. Per element: copy 7,
//!   scale 8, add 9, triad 10 references.
//! - `gups`: `table=8M` table size, a power of two; `updates=1000000`;
//!   `seed=1`; `init=true`; `align=16`. Per update: 9 instructions and one
//!   8-byte modify.
//! - `chase`: `nodes=131072` (any count); `node=64` bytes, a multiple of 8;
//!   `steps=1000000`; `seed=1`; `init=true`; `align=16`. Per step: 3
//!   instructions and one 8-byte load at the node's base. The cycle is
//!   [`Permutation`] applied to 0, 1, 2, ...: never stored.
//! - `lines`: `lines=16384`, a power of two; `spacing=4K` bytes from one
//!   line's slot to the next, a power of two from 64; `steps=1000000`;
//!   `order=dependent` or `independent`; `visit=random` or `sequential`;
//!   `init=true`; `align=2M`. Line `i` is at [`line_offset`], visited in the
//!   order of [`visit_order`] (or in address order, [`Visit`]), as the lab's
//!   probe visits them. Per step: 3 instructions and one load
//!   (dependent), or 20 instructions and one load (independent: the probe's
//!   loop as compiled).
//!
//! - `shm-fanout`: `procs=16` processes, forked by process 1, each attach a
//!   `segment=64M` shared segment at `addr=256M` and touch its first
//!   `touch=1` fraction `passes=1` times, one 8-byte reference per 4K page
//!   (stores with `write=true`, else `write=false` loads); `backing=shm`
//!   (4K pages), `thp` or `hugetlb` with `hpage=2M` pages; `exit=false`
//!   keeps them attached to the end.
//! - `forkexec`: a shell keeps `procs=16` children running until `jobs=64`
//!   have run; each maps `text=2M` of program text and `data=128K` of data,
//!   `libs=4` libraries of `lib=1M` text and `libdata=16K` data, a heap of
//!   `anon=1M`, touches `touch=0.5` of the text and all the rest in
//!   `slices=4` turns, and exits.
//! - `prefork`: a server maps `text=2M` of text and a `heap=64M` heap,
//!   fetches all its text and writes all its heap, then keeps `procs=16`
//!   workers (forked, no exec) running until `jobs=64` have run; each touches
//!   the first `touch=1` of the heap in `slices=4` turns, `write=0.01` of the
//!   touches stores spread evenly, and exits.
//!
//! [`catalog`] lists every workload with every parameter, its default and its
//! meaning; [`default_set`] is what `pagelab study` runs with no arguments.
//!
//! ```
//! use pagelab_core::{AccessKind, Event};
//! use pagelab_trace::TraceSource;
//!
//! let mut src = pagelab_workloads::open("stride:heap=16K,every=1,iters=2,init=false").unwrap();
//! assert_eq!(src.info().params["page"], "4K");
//! let mut events = Vec::new();
//! while src.fill(&mut events, 1000).unwrap() {}
//! let loads: Vec<u64> = events
//!     .iter()
//!     .filter_map(|e| match e {
//!         Event::Ref(r) if r.kind == AccessKind::Load => Some(r.addr.0),
//!         _ => None,
//!     })
//!     .collect();
//! // Four pages, the in-page offset advancing 64 bytes per page, twice.
//! let base = loads[0];
//! let offsets: Vec<u64> = loads.iter().map(|a| a - base).collect();
//! assert_eq!(offsets, [0, 0x1040, 0x2080, 0x30c0, 0, 0x1040, 0x2080, 0x30c0]);
//! assert_eq!(events.len(), 2 * 4 * 7); // six instructions and one load per page
//! ```

#![warn(missing_docs)]

mod chase;
mod code;
mod error;
mod forkexec;
mod gups;
mod lines;
mod perm;
mod prefork;
mod shm;
mod spec;
mod stream;
mod stride;

pub use error::WorkloadError;
pub use lines::{line_offset, visit_order, Order, Visit};
pub use perm::Permutation;
pub use spec::{fmt_size, ParamDoc, WorkloadDoc};

use code::Driver;
use pagelab_trace::TraceSource;
use spec::Params;

/// Every workload's documentation, in catalog order.
const DOCS: [&WorkloadDoc; 8] = [
    &stride::DOC,
    &stream::DOC,
    &gups::DOC,
    &chase::DOC,
    &lines::DOC,
    &shm::DOC,
    &forkexec::DOC,
    &prefork::DOC,
];

/// The effective configuration of one spec.
enum Config {
    Stride(stride::Config),
    Stream(stream::Config),
    Gups(gups::Config),
    Chase(chase::Config),
    Lines(lines::Config),
    ShmFanout(shm::Config),
    ForkExec(forkexec::Config),
    Prefork(prefork::Config),
}

fn parse(spec: &str) -> Result<Config, WorkloadError> {
    let (name, pairs) = spec::split(spec)?;
    let doc = DOCS
        .iter()
        .find(|d| d.name.eq_ignore_ascii_case(name))
        .ok_or_else(|| WorkloadError::UnknownWorkload {
            name: name.to_string(),
            valid: DOCS.iter().map(|d| d.name).collect::<Vec<_>>().join(", "),
        })?;
    let params = Params::new(doc, &pairs)?;
    Ok(match doc.name {
        "stride" => Config::Stride(stride::Config::parse(&params)?),
        "stream" => Config::Stream(stream::Config::parse(&params)?),
        "gups" => Config::Gups(gups::Config::parse(&params)?),
        "lines" => Config::Lines(lines::Config::parse(&params)?),
        "shm-fanout" => Config::ShmFanout(shm::Config::parse(&params)?),
        "forkexec" => Config::ForkExec(forkexec::Config::parse(&params)?),
        "prefork" => Config::Prefork(prefork::Config::parse(&params)?),
        _ => Config::Chase(chase::Config::parse(&params)?),
    })
}

/// Opens the workload named by `spec`, `NAME[:key=value,key=value...]`.
///
/// Keys not given take their defaults (see [`catalog`]); sizes are written
/// like `4K` or `32M`. The source's `info()` has kind `workload`, the name,
/// and every parameter with its effective value.
///
/// # Errors
/// An unknown workload (the message lists the valid ones), an unknown key
/// (lists the workload's keys), a value that is not allowed (says what is),
/// or a spec that is not `NAME[:key=value,...]`.
pub fn open(spec: &str) -> Result<Box<dyn TraceSource + Send>, WorkloadError> {
    Ok(match parse(spec)? {
        Config::Stride(c) => Box::new(Driver::new(stride::Stride::new(c))),
        Config::Stream(c) => Box::new(Driver::new(stream::Stream::new(c))),
        Config::Gups(c) => Box::new(Driver::new(gups::Gups::new(c))),
        Config::Chase(c) => Box::new(Driver::new(chase::Chase::new(c))),
        Config::Lines(c) => Box::new(Driver::new(lines::Lines::new(c))),
        Config::ShmFanout(c) => Box::new(Driver::new(shm::ShmFanout::new(c))),
        Config::ForkExec(c) => Box::new(Driver::new(forkexec::ForkExec::new(c))),
        Config::Prefork(c) => Box::new(Driver::new(prefork::Prefork::new(c))),
    })
}

/// The exact number of references the workload named by `spec` emits
/// (instruction fetches, the initialisation pass and data references),
/// computed from its parameters without generating it; saturates at `u64::MAX`.
///
/// # Errors
/// As [`open`].
pub fn total_refs(spec: &str) -> Result<u64, WorkloadError> {
    Ok(match parse(spec)? {
        Config::Stride(c) => c.total_refs(),
        Config::Stream(c) => c.total_refs(),
        Config::Gups(c) => c.total_refs(),
        Config::Chase(c) => c.total_refs(),
        Config::Lines(c) => c.total_refs(),
        Config::ShmFanout(c) => c.total_refs(),
        Config::ForkExec(c) => c.total_refs(),
        Config::Prefork(c) => c.total_refs(),
    })
}

/// Every built-in workload with its one-line description and each parameter's
/// default and meaning, for `pagelab workloads` and the README.
pub fn catalog() -> Vec<WorkloadDoc> {
    DOCS.iter().map(|d| **d).collect()
}

/// The specs `pagelab study` runs with no arguments: one per workload, about
/// 23.2 M references in all (4.0 M, 9.4 M, 5.3 M, 4.5 M), with data
/// footprints of 3M to 8M. With a 64-entry LRU data TLB, `gups` and `chase`
/// miss less at each larger size (4K > 64K > 2M), `stride` (every 16th page,
/// so touched pages are 64K apart) thrashes up to 64K and fits from 128K,
/// and `stream` misses about once per page whatever the size.
pub fn default_set() -> Vec<&'static str> {
    vec![
        "stride:heap=8M,every=16,iters=3000",
        "stream:n=131072,iters=2",
        "gups:table=8M,updates=400000",
        "chase:nodes=131072,steps=800000",
    ]
}

#[cfg(test)]
mod tests;
