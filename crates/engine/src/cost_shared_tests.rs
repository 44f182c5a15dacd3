//! The shared first cache level (`SharedFirst`) against a first level per
//! run: every figure of every run the same, on every preset with caches
//! whose first level can be shared, on inputs that walk often (so page-table
//! lines enter and leave the runs' own sets) and on the real gzip trace.

use super::{CostConfig, CostStudy};
use crate::CostMachine;
use pagelab_core::{Event, PageSize};

fn config(machine: &str, nested_host: Option<PageSize>) -> CostConfig {
    let m = pagelab_machine::preset(machine).unwrap();
    let tlb = m.tlb.clone().unwrap();
    CostConfig {
        machine: CostMachine::new(&m, &tlb).unwrap().unwrap(),
        nested_host,
    }
}

fn sizes(list: &str) -> Vec<PageSize> {
    pagelab_core::parse_page_sizes(list).unwrap()
}

fn events(spec: &str) -> Vec<Event> {
    let mut src = pagelab_workloads::open(spec).unwrap();
    let mut out = Vec::new();
    while src.fill(&mut out, 1 << 16).unwrap() {}
    out
}

/// The gzip trace's first 400,000 events.
fn gzip_events() -> Vec<Event> {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../tests/data/gzip-9.lackey.zst"
    );
    let mut src = pagelab_trace::open(path, None).unwrap();
    let mut out = Vec::new();
    while out.len() < 400_000 && src.fill(&mut out, 1 << 16).unwrap() {}
    out
}

/// Both studies over `events` in uneven batches; whether any run kept a set
/// of its own (a page-table line in a shared set) at some point.
fn agree(machine: &str, nested: Option<PageSize>, sizes: &[PageSize], events: &[Event]) -> bool {
    let c = config(machine, nested);
    let mut shared = CostStudy::build(sizes, &c, true).unwrap();
    let mut apart = CostStudy::build(sizes, &c, false).unwrap();
    let mut owned = false;
    for chunk in events.chunks(7919) {
        shared.feed(chunk);
        apart.feed(chunk);
        owned |= shared.runs.iter().any(|r| r.caches.owns_first_sets());
    }
    assert!(apart.shared.is_none());
    assert_eq!(shared.finish(), apart.finish(), "{machine} {nested:?}");
    assert_eq!(
        shared.dtlb_misses(),
        apart.dtlb_misses(),
        "{machine} {nested:?}"
    );
    owned
}

#[test]
fn a_shared_first_level_gives_every_run_what_its_own_would() {
    let gups = events("gups:table=64M,updates=20000");
    let stride = events("stride:heap=8M,every=4160,iters=2");
    let gzip = gzip_events();
    // The presets whose L1D sets span at most 4K (64 sets or fewer); the
    // others (POWER's 128-byte lines, Neoverse's 64K L1D, PKUnity's 128
    // sets) keep a first level per run.
    for (machine, list) in [
        ("zen4", "4K,64K,2M"),
        ("skylake", "4K,16K,2M"),
        ("pentium4", "4K,4M"),
    ] {
        let (c, sizes) = (config(machine, None), sizes(list));
        assert!(
            CostStudy::build(&sizes, &c, true).unwrap().shared.is_some(),
            "{machine}"
        );
        assert!(
            agree(machine, None, &sizes, &gups),
            "{machine}: no walk reached a shared set"
        );
        agree(machine, None, &sizes, &stride);
        agree(machine, None, &sizes, &gzip);
    }
    for host in [PageSize::K4, PageSize::M2] {
        assert!(agree("zen4", Some(host), &sizes("4K,2M"), &gups));
        agree("zen4", Some(host), &sizes("4K,64K"), &gzip);
    }
    // Tables of other reaches (ia32's 2M pages have none of their own): no sharing.
    let c = config("pentium4", None);
    assert!(CostStudy::build(&sizes("4K,2M"), &c, true)
        .unwrap()
        .shared
        .is_none());
}
