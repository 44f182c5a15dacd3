//! The `eager` and `explicit` policies on a real trace (gzip under Lackey),
//! each checked against a policy that must map exactly the same pages:
//! `eager` on gzip's inferred 2M regions maps 2M pages as `linux-thp` does
//! under `always`; `explicit` without requests is `base:4K`; `explicit` with a
//! 64K request on every region is `eager` restricted to 4K and 64K.

use crate::common;

use common::{real_prefix, Events};
use pagelab_core::{Advice, Backing, Bytes, Event, MapEvent, Prot, Sharing, VirtAddr};
use pagelab_engine::{run_policies, PolicyConfig};
use pagelab_mm::phys::PhysConfig;
use pagelab_report::RunStats;
use std::collections::BTreeSet;

fn run(events: &[Event], policies: &[&str]) -> Vec<RunStats> {
    let cfg = PolicyConfig {
        policies: policies.iter().map(|p| p.parse().unwrap()).collect(),
        tlb: pagelab_tlb::preset("weisberg").unwrap(),
        phys: PhysConfig::new(Bytes(1 << 30)),
        strict: true,
        cow: Default::default(),
        file_faults: Default::default(),
        platform: None,
        exit_mappings: false,
    };
    let events: Vec<Event> = events.to_vec();
    run_policies(&mut Events(events.into_iter()), &cfg, &mut ())
        .unwrap()
        .runs
}

/// What two policies mapping the same pages must agree on.
fn key(r: &RunStats) -> impl PartialEq + std::fmt::Debug {
    let mm = r.mm.as_ref().unwrap();
    (
        (
            r.itlb_accesses,
            r.itlb_misses,
            r.dtlb_accesses,
            r.dtlb_misses,
        ),
        (r.faults, mm.faults_by_size.clone(), mm.rss_bytes),
        (mm.page_table_bytes, mm.walk_refs, mm.zeroed_bytes),
    )
}

/// `events` preceded by a map of every run of 2M blocks the references
/// touch, each region asking for `2^shift` pages.
fn with_requests(events: &[Event], shift: u8, wait: bool) -> Vec<Event> {
    const BLOCK: u64 = 2 << 20;
    let mut blocks = BTreeSet::new();
    for e in events {
        if let Event::Ref(r) = e {
            blocks.extend(r.addr.0 / BLOCK..=r.last_byte().0 / BLOCK);
        }
    }
    let mut out = Vec::new();
    let mut blocks = blocks.into_iter().peekable();
    while let Some(first) = blocks.next() {
        let mut last = first;
        while blocks.peek() == Some(&(last + 1)) {
            last = blocks.next().unwrap();
        }
        let (start, len) = (first * BLOCK, (last + 1 - first) * BLOCK);
        out.push(Event::Map(Box::new(MapEvent {
            start: VirtAddr(start),
            len,
            prot: Prot(Prot::READ | Prot::WRITE | Prot::EXEC),
            backing: Backing::Anon,
            sharing: Sharing::Private,
        })));
        let advice = Advice::PageOrder { shift, wait };
        out.push(Event::Advise {
            start: VirtAddr(start),
            len,
            advice,
        });
    }
    out.extend_from_slice(events);
    out
}

#[test]
fn eager_maps_2m_pages_like_linux_thp_always_on_a_real_trace() {
    let events = real_prefix(1_000_000);
    let runs = run(
        &events,
        &["eager", "linux-thp:enabled=always", "eager:sizes=4K,64K"],
    );
    assert_eq!(key(&runs[0]), key(&runs[1]));
    let eager = runs[0].mm.as_ref().unwrap();
    assert_eq!(eager.faults_by_size.keys().collect::<Vec<_>>(), ["2M"]);
    assert_eq!(eager.policy_counters["alloc"]["2M"], runs[0].faults);
    let small = runs[2].mm.as_ref().unwrap();
    assert_eq!(small.faults_by_size.keys().collect::<Vec<_>>(), ["64K"]);
    assert!(runs[0].dtlb_misses < runs[2].dtlb_misses);
}

#[test]
fn explicit_without_requests_is_base_4k_on_a_real_trace() {
    let events = real_prefix(1_000_000);
    let runs = run(&events, &["explicit", "base:4K"]);
    assert_eq!(key(&runs[0]), key(&runs[1]));
    let mm = runs[0].mm.as_ref().unwrap();
    assert_eq!(mm.policy_counters["unrequested_faults"], runs[0].faults);
    assert_eq!(mm.policy_counters["requested_faults"], 0);
}

#[test]
fn explicit_grants_every_request_on_a_real_trace() {
    let events = real_prefix(1_000_000);
    // 64K, waiting: every fault maps 64K, as eager limited to 4K and 64K does.
    let waited = with_requests(&events, 16, true);
    let runs = run(&waited, &["explicit", "eager:sizes=4K,64K"]);
    assert_eq!(key(&runs[0]), key(&runs[1]));
    let c = &runs[0].mm.as_ref().unwrap().policy_counters;
    assert_eq!(c["granted"], runs[0].faults);
    assert_eq!(
        (c["stalls"].as_u64(), c["below_request"].as_u64()),
        (Some(0), Some(0))
    );
    // 2M, best effort: the regions are whole 2M blocks, so eager's choice.
    let best = with_requests(&events, 21, false);
    let runs = run(&best, &["explicit", "eager"]);
    assert_eq!(key(&runs[0]), key(&runs[1]));
    let mm = runs[0].mm.as_ref().unwrap();
    assert_eq!(mm.faults_by_size.keys().collect::<Vec<_>>(), ["2M"]);
    assert_eq!(mm.anomalies["refs_outside_vmas"], 0);
}
