//! Reclaim inside a policy run: the TLB forgets what reclaim unmapped or
//! split, so the next reference to it misses (and faults again if it was
//! swapped out); the run's figures carry the reclaim counters.

use crate::common;

use common::Events;
use pagelab_core::{AccessKind, Bytes, Event, MemRef, VirtAddr};
use pagelab_engine::{run_policies, PolicyConfig};
use pagelab_mm::phys::{PhysConfig, SuperpageReclaim, WatermarkConfig};
use pagelab_report::RunStats;

const M: u64 = 1 << 20;
const A: u64 = 0x4000_0000;

fn write(addr: u64) -> Event {
    Event::Ref(MemRef {
        addr: VirtAddr(addr),
        size: 8,
        kind: AccessKind::Store,
    })
}

/// Eight 2M pages fill 16M (the eighth wakes reclaim, which takes the
/// first), then the first is referenced again.
fn run(mode: SuperpageReclaim) -> RunStats {
    let mut events: Vec<Event> = (0..8).map(|i| write(A + i * 2 * M)).collect();
    events.push(write(A + 64));
    let mut phys = PhysConfig::new(Bytes(16 * M));
    phys.watermarks = Some(WatermarkConfig {
        low: Bytes(M),
        high: Bytes(3 * M / 2),
    });
    phys.reclaim_superpages = mode;
    let cfg = PolicyConfig {
        policies: vec!["linux-thp:enabled=always".parse().unwrap()],
        tlb: pagelab_tlb::preset("skylake").unwrap(),
        phys,
        strict: false,
        cow: Default::default(),
        file_faults: Default::default(),
        platform: None,
        exit_mappings: false,
    };
    let mut r = run_policies(&mut Events(events.into_iter()), &cfg, &mut ()).unwrap();
    r.runs.remove(0)
}

#[test]
fn a_swapped_superpage_misses_in_the_tlb_and_faults_again() {
    let r = run(SuperpageReclaim::Whole);
    let mm = r.mm.as_ref().unwrap();
    // The eighth page and the refault each take the last free 2M: two runs.
    assert_eq!((mm.kswapd_runs, mm.swapped_out_bytes), (2, 4 * M));
    assert_eq!((mm.major_faults, mm.swapped_in_bytes), (1, 2 * M));
    assert_eq!(r.faults, 9);
    // Without the invalidation the ninth reference would hit the stale 2M entry.
    assert_eq!((r.dtlb_accesses, r.dtlb_misses), (9, 9));
}

#[test]
fn a_split_superpage_misses_in_the_tlb_without_a_fault() {
    let r = run(SuperpageReclaim::Split);
    let mm = r.mm.as_ref().unwrap();
    assert_eq!(mm.reclaim_splits, 1);
    assert_eq!(mm.swapped_out_bytes, 384 * 4096);
    // The first 4K of the split page is still mapped: a TLB miss, no fault.
    assert_eq!((r.faults, mm.major_faults), (8, 0));
    assert_eq!((r.dtlb_accesses, r.dtlb_misses), (9, 9));
}
