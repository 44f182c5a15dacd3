//! The fast study against the simplest possible model of the same semantics
//! (`common/mod.rs`), on hand-computed and random traces.

use crate::common;

use common::{all_sizes, flat, reference, reference_hierarchy};
use pagelab_core::{AccessKind, Event, MemRef, PageSize, VirtAddr};
use pagelab_engine::{Study, StudyConfig};
use pagelab_report::RunStats;
use proptest::prelude::*;

fn fast(events: &[Event], sizes: &[PageSize]) -> Vec<RunStats> {
    fast_with(events, sizes, "weisberg")
}

fn fast_with(events: &[Event], sizes: &[PageSize], preset: &str) -> Vec<RunStats> {
    let cfg = StudyConfig {
        page_sizes: sizes.to_vec(),
        tlb: pagelab_tlb::preset(preset).unwrap(),
    };
    let mut study = Study::new(&cfg).unwrap();
    for chunk in events.chunks(1000) {
        study.feed(chunk);
    }
    study.finish(Default::default()).runs
}

fn r(kind: AccessKind, addr: u64, size: u32) -> Event {
    Event::Ref(MemRef {
        addr: VirtAddr(addr),
        size,
        kind,
    })
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
    (kind, addr, size).prop_map(|(kind, addr, size)| {
        Event::Ref(MemRef {
            addr: VirtAddr(addr),
            size,
            kind,
        })
    })
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

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]
    /// Every preset (set-associative arrays, split and unified L2s, fragmenting
    /// arrays) against the tlb crate's linear-scan oracle hierarchy.
    #[test]
    fn random_traces_match_oracle_hierarchy_for_every_preset(ev in proptest::collection::vec(arb_event(), 0..2000)) {
        let sizes = pagelab_core::parse_page_sizes("4K,16K,2M,1G").unwrap();
        for name in pagelab_tlb::preset_names() {
            let tlb = pagelab_tlb::preset(name).unwrap();
            let got: Vec<_> = fast_with(&ev, &sizes, name).iter().map(flat).collect();
            prop_assert_eq!(got, reference_hierarchy(&ev, &sizes, &tlb), "preset {}", name);
        }
    }
}

#[test]
fn built_in_workloads_match_reference() {
    use pagelab_trace::TraceSource;
    let sizes = all_sizes();
    for spec in [
        "stride:heap=2M,every=16,iters=20",
        "stride:heap=512K,iters=3,align=4096",
        "stream:n=20000,iters=1",
        "gups:table=1M,updates=20000",
        "chase:nodes=5000,steps=20000",
    ] {
        let mut src = pagelab_workloads::open(spec).unwrap();
        let mut events = Vec::new();
        while src.fill(&mut events, 1 << 16).unwrap() {}
        let got: Vec<_> = fast(&events, &sizes).iter().map(flat).collect();
        assert_eq!(got, reference(&events, &sizes, 64), "{spec}");
    }
}
