//! The fast study against the simplest possible model of the same semantics:
//! a linear-scan, move-to-front LRU list per side and HashSet footprints,
//! written here from the wording and sharing no code with the engine.

use pagelab_core::{AccessKind, Event, MemRef, PageSize};
use pagelab_engine::{Study, StudyConfig};
use pagelab_report::RunStats;
use proptest::prelude::*;
use std::collections::HashSet;

/// The eight figures of one run: iTLB accesses, iTLB misses, dTLB accesses,
/// dTLB misses, code, data and total footprint bytes, faults.
type Figures = (u64, u64, u64, u64, u64, u64, u64, u64);

/// One page size of the 003 paper's study: 64 I + 64 D entries, fully associative, LRU.
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

fn reference(events: &[Event], sizes: &[PageSize], entries: usize) -> Vec<Figures> {
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
            let end = r.addr.saturating_add(u64::from(r.size.max(1)) - 1);
            for run in &mut runs {
                for page in (r.addr >> run.shift)..=(end >> run.shift) {
                    run.access(side, page);
                }
            }
        }
    }
    runs.iter().map(RefRun::stats).collect()
}

fn fast(events: &[Event], sizes: &[PageSize]) -> Vec<RunStats> {
    let cfg = StudyConfig {
        page_sizes: sizes.to_vec(),
        tlb: pagelab_tlb::preset("weisberg").unwrap(),
    };
    let mut study = Study::new(&cfg).unwrap();
    for chunk in events.chunks(1000) {
        study.feed(chunk);
    }
    study.finish(Default::default()).runs
}

fn flat(r: &RunStats) -> Figures {
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

fn all_sizes() -> Vec<PageSize> {
    pagelab_core::parse_page_sizes("4K,8K,16K,32K,64K,128K,256K,2M,1G").unwrap()
}

fn r(kind: AccessKind, addr: u64, size: u32) -> Event {
    Event::Ref(MemRef { addr, size, kind })
}

#[test]
fn hand_computed_tiny_trace() {
    use AccessKind::*;
    // Instruction at 0x1000 (4 bytes), a load spanning 0x1ffc..0x2003 (two 4K pages),
    // a store back on page 0x1000, a modify on 0x5000.
    let ev = vec![
        r(Instr, 0x1000, 4),
        r(Load, 0x1ffc, 8),
        r(Store, 0x1008, 8),
        r(Modify, 0x5000, 8),
        r(Instr, 0x1004, 2),
    ];
    let sizes = pagelab_core::parse_page_sizes("4K,8K,64K").unwrap();
    let got = fast(&ev, &sizes);
    // 4K: I: two accesses to page 1, one miss. D: pages 1,2 (load), 1 (store), 5 (modify):
    // 4 accesses, misses on 1, 2, 5 = 3. Code pages {1}, data pages {1,2,5}, all {1,2,5}.
    assert_eq!(flat(&got[0]), (2, 1, 4, 3, 4096, 3 * 4096, 3 * 4096, 3));
    // 8K: the load covers 8K pages 0 and 1; store on page 0, modify on page 2:
    // D accesses 4, misses 3 (0, 1, 2). Code {0}; data {0,1,2}; all {0,1,2}.
    assert_eq!(flat(&got[1]), (2, 1, 4, 3, 8192, 3 * 8192, 3 * 8192, 3));
    // 64K: everything in page 0.
    assert_eq!(flat(&got[2]), (2, 1, 3, 1, 65536, 65536, 65536, 1));
    assert_eq!(
        got.iter().map(flat).collect::<Vec<_>>(),
        reference(&ev, &sizes, 64)
    );
}

#[test]
fn lru_evicts_the_least_recent_of_64() {
    // 65 distinct pages, then the first again: a miss (evicted); then the 65th: a hit.
    let mut ev: Vec<Event> = (0..65u64)
        .map(|p| r(AccessKind::Load, p << 12, 8))
        .collect();
    ev.push(r(AccessKind::Load, 0, 8));
    ev.push(r(AccessKind::Load, 64 << 12, 8));
    let got = fast(&ev, &[PageSize::K4]);
    assert_eq!(got[0].dtlb_accesses, 67);
    assert_eq!(got[0].dtlb_misses, 66);
    // At 64 entries minus one: 64 distinct pages then the first again is a hit.
    let mut ev: Vec<Event> = (0..64u64)
        .map(|p| r(AccessKind::Load, p << 12, 8))
        .collect();
    ev.push(r(AccessKind::Load, 0, 8));
    assert_eq!(fast(&ev, &[PageSize::K4])[0].dtlb_misses, 64);
}

#[test]
fn zero_size_and_top_of_address_space() {
    let ev = vec![
        r(AccessKind::Load, u64::MAX - 3, 4),
        r(AccessKind::Store, 0, 0),
        r(AccessKind::Instr, u64::MAX, 0),
    ];
    let sizes = all_sizes();
    assert_eq!(
        fast(&ev, &sizes).iter().map(flat).collect::<Vec<_>>(),
        reference(&ev, &sizes, 64)
    );
}

fn arb_event() -> impl Strategy<Value = Event> {
    let kind = prop_oneof![
        Just(AccessKind::Instr),
        Just(AccessKind::Load),
        Just(AccessKind::Store),
        Just(AccessKind::Modify)
    ];
    // Addresses over a few hundred 4K pages in two distant regions so that
    // TLBs both hit and thrash; sizes up to two pages so references straddle.
    let addr = prop_oneof![
        0u64..(300 << 12),
        (1u64 << 40)..((1u64 << 40) + (300 << 12))
    ];
    let size = prop_oneof![Just(0u32), 1u32..=16, Just(4096u32), Just(8192u32)];
    (kind, addr, size).prop_map(|(kind, addr, size)| Event::Ref(MemRef { addr, size, kind }))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]
    #[test]
    fn random_traces_match_reference(ev in proptest::collection::vec(arb_event(), 0..3000)) {
        let sizes = all_sizes();
        let got: Vec<_> = fast(&ev, &sizes).iter().map(flat).collect();
        prop_assert_eq!(got, reference(&ev, &sizes, 64));
    }
}
