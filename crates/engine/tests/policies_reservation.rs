//! The `reservation` policy on a real trace (gzip under Lackey): every fault
//! maps one base page, exactly the pages `base:4K` maps; frames are either
//! mapped or held by a reservation; populated extents are promoted and the
//! dTLB misses do not exceed those of 4K base pages. The whole trace: it is small.

use crate::common;

use common::{real_prefix, Events};
use pagelab_core::{Bytes, PageSize};
use pagelab_engine::{run_policies, PolicyConfig};
use pagelab_mm::phys::PhysConfig;

/// Bytes reserved over the run: the sum over sizes of reservations x size.
fn reserved_bytes(counters: &serde_json::Value) -> u64 {
    counters["reserved"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(s, n)| s.parse::<PageSize>().unwrap().bytes() * n.as_u64().unwrap())
        .sum()
}

#[test]
fn reservation_on_a_real_trace_populates_base_pages_and_promotes() {
    let events = real_prefix(usize::MAX);
    let cfg = PolicyConfig {
        policies: vec![
            "base:4K".parse().unwrap(),
            "reservation".parse().unwrap(),
            "reservation:max=64K".parse().unwrap(),
        ],
        tlb: pagelab_tlb::preset("weisberg").unwrap(),
        phys: PhysConfig::new(Bytes(1 << 30)),
        strict: false,
        cow: Default::default(),
        file_faults: Default::default(),
        platform: None,
        exit_mappings: false,
    };
    let got = run_policies(&mut Events(events.into_iter()), &cfg, &mut ()).unwrap();
    let mm = |i: usize| got.runs[i].mm.clone().unwrap();
    let (base, res, small) = (mm(0), mm(1), mm(2));
    for (i, r) in [(1, &res), (2, &small)] {
        // Faults: one per base page touched, as under base:4K.
        assert_eq!(r.faults_by_size.keys().collect::<Vec<_>>(), ["4K"]);
        assert_eq!(got.runs[i].faults, got.runs[0].faults);
        assert_eq!(
            (r.rss_bytes, r.zeroed_bytes),
            (base.rss_bytes, base.rss_bytes)
        );
        // Nothing is unmapped: every reserved frame is mapped or still held.
        let c = &r.policy_counters;
        let outside = c["base_pages_outside"].as_u64().unwrap() * 4096;
        assert_eq!(
            r.rss_bytes + c["held_bytes"].as_u64().unwrap(),
            reserved_bytes(c) + outside
        );
        assert!(r.promotions > 0);
        assert_eq!((r.preemptions, r.copied_bytes), (0, 0));
        // gzip touches few pages and most misses are cold; promotions flush
        // the small entries they replace, so the gain is small, never a loss.
        assert!(got.runs[i].dtlb_misses <= got.runs[0].dtlb_misses);
    }
    // Inferred regions are whole 2M blocks: every reservation is 2M (or 64K).
    assert_eq!(
        res.policy_counters["reserved"]
            .as_object()
            .unwrap()
            .keys()
            .collect::<Vec<_>>(),
        ["2M"]
    );
    // gzip fills no aligned extent above 32K, so extents above 64K never
    // promote and both runs end with the same page table: same promotions,
    // same dTLB misses.
    let sizes = |r: &pagelab_report::PolicyStats| -> Vec<PageSize> {
        let m = r.policy_counters["promoted"].as_object().unwrap();
        m.keys().map(|k| k.parse().unwrap()).collect()
    };
    assert!(sizes(&res)
        .iter()
        .all(|&s| s <= PageSize::from_shift(16).unwrap()));
    assert_eq!(
        res.policy_counters["promoted"],
        small.policy_counters["promoted"]
    );
    assert_eq!(res.promotions, small.promotions);
    assert_eq!(got.runs[1].dtlb_misses, got.runs[2].dtlb_misses);
}
