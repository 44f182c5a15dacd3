//! The simplest possible model of the study's semantics, shared by the engine's
//! tests: a linear-scan, move-to-front LRU list per side and HashSet
//! footprints, written from the wording and sharing no code with the engine.

#![allow(dead_code, unused_imports)]

use pagelab_core::{AccessKind, Event, PageSize, VirtAddr};
use std::collections::HashSet;

/// The eight figures of one run: iTLB accesses, iTLB misses, dTLB accesses,
/// dTLB misses, code, data and total footprint bytes, faults.
pub type Figures = (u64, u64, u64, u64, u64, u64, u64, u64);

/// Those figures of a run of the engine's study.
pub fn flat(r: &pagelab_report::RunStats) -> Figures {
    (
        r.itlb_accesses,
        r.itlb_misses,
        r.dtlb_accesses,
        r.dtlb_misses,
        r.code_footprint_bytes,
        r.data_footprint_bytes,
        r.footprint_bytes,
        r.faults,
    )
}

/// Every page size of the default set, and 1G.
pub fn all_sizes() -> Vec<PageSize> {
    pagelab_core::parse_page_sizes("4K,8K,16K,32K,64K,128K,256K,2M,1G").unwrap()
}

/// One page size of Weisberg and Wiseman's (IRI 2009) study: 64 I + 64 D entries, fully associative, LRU.
struct RefRun {
    shift: u32,
    entries: usize,
    lru: [Vec<u64>; 2],
    accesses: [u64; 2],
    misses: [u64; 2],
    pages: [HashSet<u64>; 2],
}

impl RefRun {
    fn access(&mut self, side: usize, page: u64) {
        self.accesses[side] += 1;
        let lru = &mut self.lru[side];
        if let Some(i) = lru.iter().position(|&p| p == page) {
            lru.remove(i);
        } else {
            self.misses[side] += 1;
            if lru.len() == self.entries {
                lru.pop();
            }
        }
        lru.insert(0, page);
        self.pages[side].insert(page);
    }

    fn stats(&self) -> Figures {
        let b = 1u64 << self.shift;
        let all: HashSet<u64> = self.pages[0].union(&self.pages[1]).copied().collect();
        (
            self.accesses[0],
            self.misses[0],
            self.accesses[1],
            self.misses[1],
            self.pages[0].len() as u64 * b,
            self.pages[1].len() as u64 * b,
            all.len() as u64 * b,
            all.len() as u64,
        )
    }
}

pub fn reference(events: &[Event], sizes: &[PageSize], entries: usize) -> Vec<Figures> {
    let mut runs: Vec<RefRun> = sizes
        .iter()
        .map(|s| RefRun {
            shift: s.shift(),
            entries,
            lru: [Vec::new(), Vec::new()],
            accesses: [0; 2],
            misses: [0; 2],
            pages: [HashSet::new(), HashSet::new()],
        })
        .collect();
    for ev in events {
        if let Event::Ref(r) = ev {
            let side = if r.kind == AccessKind::Instr { 0 } else { 1 };
            // A reference running past the top of the address space is clipped there.
            let (addr, end) = (r.addr.0, r.last_byte().0);
            for run in &mut runs {
                for page in (addr >> run.shift)..=(end >> run.shift) {
                    run.access(side, page);
                }
            }
        }
    }
    runs.iter().map(RefRun::stats).collect()
}

/// Parses Lackey text the plain way (split on spaces and commas), independent of pagelab-trace.
pub fn parse_lackey_simply(text: &str) -> Vec<Event> {
    use pagelab_core::MemRef;
    let mut out = Vec::new();
    for line in text.lines() {
        if line.starts_with("==") || line.trim().is_empty() {
            continue;
        }
        let mut parts = line.split_whitespace();
        let kind = match parts.next() {
            Some("I") => AccessKind::Instr,
            Some("L") => AccessKind::Load,
            Some("S") => AccessKind::Store,
            Some("M") => AccessKind::Modify,
            other => panic!("unexpected Lackey line {line:?} ({other:?})"),
        };
        let (addr, size) = parts
            .next()
            .and_then(|f| f.split_once(','))
            .expect("addr,size");
        out.push(Event::Ref(MemRef {
            addr: VirtAddr(u64::from_str_radix(addr, 16).unwrap()),
            size: size.parse().unwrap(),
            kind,
        }));
    }
    out
}

/// The same study for any TLB preset, on the tlb crate's linear-scan oracle
/// hierarchy: each page a reference touches, in ascending order, looked up at
/// its first byte inside the reference (the reference's own address for the first).
pub fn reference_hierarchy(
    events: &[Event],
    sizes: &[PageSize],
    tlb: &pagelab_tlb::TlbConfig,
) -> Vec<Figures> {
    reference_hierarchy_levels(events, sizes, tlb)
        .into_iter()
        .map(|(f, _)| f)
        .collect()
}

/// One level's counters: name, accesses, hits, misses.
pub type LevelFigures = (String, u64, u64, u64);

/// [`reference_hierarchy`] with each level's counters, as `(level, accesses, hits, misses)`.
pub fn reference_hierarchy_levels(
    events: &[Event],
    sizes: &[PageSize],
    tlb: &pagelab_tlb::TlbConfig,
) -> Vec<(Figures, Vec<LevelFigures>)> {
    use pagelab_tlb::{reference::RefHierarchy, Outcome, Side};
    sizes
        .iter()
        .map(|&size| {
            let mut h = RefHierarchy::new(tlb);
            let shift = size.shift();
            let (mut acc, mut miss) = ([0u64; 2], [0u64; 2]);
            let mut pages: [HashSet<u64>; 2] = [HashSet::new(), HashSet::new()];
            for ev in events {
                let Event::Ref(r) = ev else { continue };
                let side = if r.kind == AccessKind::Instr { 0 } else { 1 };
                let (first, end) = (r.addr.0, r.last_byte().0);
                for page in (first >> shift)..=(end >> shift) {
                    let addr = first.max(page << shift);
                    acc[side] += 1;
                    let s = if side == 0 { Side::Instr } else { Side::Data };
                    if h.access_addr(s, VirtAddr(addr), size) == Outcome::Miss {
                        miss[side] += 1;
                    }
                    pages[side].insert(page);
                }
            }
            let b = size.bytes();
            let all = pages[0].union(&pages[1]).count() as u64;
            let t = h.stats();
            let levels = [
                ("l1i", Some(t.l1i)),
                ("l1d", Some(t.l1d)),
                ("l2", t.l2),
                ("l2i", t.l2i),
                ("l2d", t.l2d),
            ]
            .into_iter()
            .filter_map(|(n, l)| l.map(|l| (n.to_string(), l.accesses, l.hits, l.misses)))
            .collect();
            (
                (
                    acc[0],
                    miss[0],
                    acc[1],
                    miss[1],
                    pages[0].len() as u64 * b,
                    pages[1].len() as u64 * b,
                    all * b,
                    all,
                ),
                levels,
            )
        })
        .collect()
}

/// The real trace of `tests/data` (gzip -9 under Lackey), parsed the plain way.
pub fn real_events() -> Vec<Event> {
    let path =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/data/gzip-9.lackey.zst");
    let text = zstd::decode_all(&std::fs::read(path).unwrap()[..]).unwrap();
    parse_lackey_simply(std::str::from_utf8(&text).unwrap())
}

/// Its first `n` references.
pub fn real_prefix(n: usize) -> Vec<Event> {
    real_events().into_iter().take(n).collect()
}

/// A trace source over events held in memory.
pub use pagelab_trace::Events;
