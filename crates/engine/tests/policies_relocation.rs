//! The `relocation` policy on a real trace: the scanner, run between batches,
//! collapses gzip's inferred 2M regions into superpages, and the dTLB misses
//! fall below those of 4K base pages.

use crate::common;

use common::{real_prefix, Events};
use pagelab_core::{Bytes, PageSize};
use pagelab_engine::{run_policies, PolicyConfig};
use pagelab_mm::phys::PhysConfig;

#[test]
fn relocation_on_a_real_trace_collapses_and_misses_less_than_4k() {
    let events = real_prefix(1_000_000);
    let cfg = PolicyConfig {
        policies: vec![
            "base:4K".parse().unwrap(),
            "relocation".parse().unwrap(),
            "relocation:size=64K,threshold=50%".parse().unwrap(),
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
    let (base, deflt, half) = (&got.runs[0], &got.runs[1], &got.runs[2]);
    let mm = |r: &pagelab_report::RunStats| r.mm.clone().unwrap();
    let (b, e, h) = (mm(base), mm(deflt), mm(half));

    // Every fault maps a base page; pages a collapse mapped fault no more.
    assert_eq!(e.faults_by_size.keys().collect::<Vec<_>>(), ["4K"]);
    assert!(deflt.faults < base.faults);
    // The Linux default collapses every touched 2M region.
    assert!(e.promotions > 0);
    assert_eq!(e.promotions, e.policy_counters["pages_collapsed"]);
    assert_eq!(
        e.copied_bytes + e.zeroed_bytes,
        e.promotions * PageSize::M2.bytes() + deflt.faults * 4096,
        "each collapse copies or zeroes the whole 2M"
    );
    assert_eq!(e.rss_bytes, e.promotions * PageSize::M2.bytes());
    assert!(e.rss_bytes > b.rss_bytes);
    assert!(
        deflt.dtlb_misses < base.dtlb_misses,
        "relocation {} vs 4K {}",
        deflt.dtlb_misses,
        base.dtlb_misses
    );
    // 64K extents at least half populated: some collapse, for less memory
    // than 2M extents and no more misses than 4K.
    assert!(h.promotions > 0);
    assert!(h.copied_bytes >= h.promotions * 8 * 4096);
    assert!(b.rss_bytes < h.rss_bytes && h.rss_bytes < e.rss_bytes);
    assert!(half.dtlb_misses <= base.dtlb_misses);
}
