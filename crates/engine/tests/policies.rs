//! Runs of the memory-management model against the fixed-size study: with no
//! map events and `base:SIZE`, the model must count exactly what the study
//! counts at SIZE (same TLB accesses and misses, faults = pages touched).

use crate::common;

use common::{flat, real_prefix, Events};
use pagelab_core::{Bytes, Event, PageSize, VirtAddr};
use pagelab_engine::{run_policies, PolicyConfig, Study, StudyConfig};
use pagelab_mm::phys::PhysConfig;

#[test]
fn base_policies_equal_the_fixed_size_study_on_a_real_trace() {
    let events = real_prefix(1_000_000);
    let sizes = pagelab_core::parse_page_sizes("4K,16K,64K,256K").unwrap();
    for preset in ["weisberg", "skylake"] {
        let tlb = pagelab_tlb::preset(preset).unwrap();
        let mut study = Study::new(&StudyConfig {
            page_sizes: sizes.clone(),
            tlb: tlb.clone(),
        })
        .unwrap();
        study.feed(&events);
        let want = study.finish(Default::default());
        let cfg = PolicyConfig {
            policies: sizes
                .iter()
                .map(|s| format!("base:{s}").parse().unwrap())
                .collect(),
            tlb,
            phys: PhysConfig::new(Bytes(1 << 30)),
            strict: false,
            cow: Default::default(),
            file_faults: Default::default(),
            platform: None,
            exit_mappings: false,
        };
        let got = run_policies(&mut Events(events.clone().into_iter()), &cfg, &mut ()).unwrap();
        for (g, w) in got.runs.iter().zip(&want.runs) {
            assert_eq!(flat(g), flat(w), "{preset} at {}", w.page_size);
            assert_eq!(
                g.tlb_levels, w.tlb_levels,
                "{preset} at {}: per-level counters",
                w.page_size
            );
            let mm = g.mm.as_ref().unwrap();
            assert_eq!(
                mm.rss_bytes, w.footprint_bytes,
                "rss = pages touched x size"
            );
            assert_eq!(
                mm.faults_by_size.get(&w.page_size.to_string()),
                Some(&w.faults)
            );
        }
    }
}

#[test]
fn linux_thp_on_a_real_trace_uses_2m_pages_when_always() {
    let events = real_prefix(1_000_000);
    let cfg = PolicyConfig {
        policies: vec![
            "linux-thp:enabled=always".parse().unwrap(),
            "linux-thp:enabled=never".parse().unwrap(),
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
    let (always, never) = (
        got.runs[0].mm.as_ref().unwrap(),
        got.runs[1].mm.as_ref().unwrap(),
    );
    // Inferred VMAs are whole 2M blocks: under `always` every fault maps a 2M page.
    assert_eq!(always.faults_by_size.keys().collect::<Vec<_>>(), ["2M"]);
    assert_eq!(always.rss_bytes, got.runs[0].faults * PageSize::M2.bytes());
    assert_eq!(
        always.policy_counters["anon_fault_alloc"]["2M"],
        got.runs[0].faults
    );
    assert_eq!(never.faults_by_size.keys().collect::<Vec<_>>(), ["4K"]);
    assert!(got.runs[0].dtlb_misses < got.runs[1].dtlb_misses);
}

#[test]
fn strict_mode_rejects_contradictions_with_their_position() {
    let events = vec![
        Event::Ref(pagelab_core::MemRef {
            addr: VirtAddr(0x1000),
            size: 4,
            kind: pagelab_core::AccessKind::Load,
        }),
        Event::Unmap {
            start: VirtAddr(0x4000_0000),
            len: 4096,
        },
    ];
    let mut cfg = PolicyConfig {
        policies: vec!["base:4K".parse().unwrap()],
        tlb: pagelab_tlb::preset("weisberg").unwrap(),
        phys: PhysConfig::new(Bytes(1 << 30)),
        strict: false,
        cow: Default::default(),
        file_faults: Default::default(),
        platform: None,
        exit_mappings: false,
    };
    let lenient = run_policies(&mut Events(events.clone().into_iter()), &cfg, &mut ()).unwrap();
    assert_eq!(
        lenient.runs[0].mm.as_ref().unwrap().anomalies["events_on_nothing"],
        1
    );
    cfg.strict = true;
    let e = run_policies(&mut Events(events.into_iter()), &cfg, &mut ())
        .unwrap_err()
        .to_string();
    assert!(e.contains("record 1") && e.contains("--strict"), "{e}");
}
