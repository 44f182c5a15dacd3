//! The `relocation` policy at its thresholds: collapse exactly when enough
//! base pages are populated and not one page before, bytes copied and zeroed
//! exact, VMA edges and protection respected, allocation failure skipped,
//! the superpage freed whole when unmapped. `check()` after every step.

use crate::common;

use common::{counter, ev, free_frames, map, touch, K, M, RW};
use pagelab_core::{Advice, Backing, Bytes, Event, MapEvent, PageSize, Prot, Sharing, VirtAddr};
use pagelab_mm::phys::PhysConfig;
use pagelab_mm::policy::{PolicySpec, RelocationSettings};
use pagelab_mm::system::Mm;

fn mm(params: &str, memory: u64) -> Mm {
    common::mm(&format!("relocation:{params}"), memory)
}

/// Touches the first `n` base pages from `start`.
fn touch_pages(m: &mut Mm, start: u64, n: u64) {
    for i in 0..n {
        assert_eq!(touch(m, start + i * 4 * K), 4 * K);
    }
}

fn tick(m: &mut Mm) {
    m.tick().unwrap();
    m.check().unwrap();
}

fn free_bytes(m: &Mm) -> u64 {
    free_frames(m) * 4 * K
}

#[test]
fn settings_parse_print_back_and_name_the_field_in_errors() {
    let d = RelocationSettings::default();
    assert_eq!((d.size, d.min_populated()), (PageSize::M2, 1));
    assert_eq!(
        "relocation".parse::<PolicySpec>().unwrap().to_string(),
        "relocation"
    );
    for s in [
        "relocation:size=64K",
        "relocation:max_ptes_none=256",
        "relocation:size=64K,threshold=50%,scan=4,budget=16",
    ] {
        assert_eq!(s.parse::<PolicySpec>().unwrap().to_string(), s);
    }
    let t: RelocationSettings = "threshold=50%".parse().unwrap();
    assert_eq!(t.min_populated(), 256);
    let t: RelocationSettings = "size=64K,threshold=33%".parse().unwrap();
    assert_eq!(t.min_populated(), 6); // ceil(16 x 0.33)
    let t: RelocationSettings = "size=1G".parse().unwrap();
    assert_eq!(t.min_populated(), 1);
    for (bad, says) in [
        ("size=4K", "above 4K"),
        ("size=3M", "size=3M"),
        ("max_ptes_none=512", "at most 511"),
        ("size=64K,max_ptes_none=16", "at most 15"),
        ("threshold=0%", "1% to 100%"),
        ("threshold=50", "1% to 100%"),
        ("max_ptes_none=1,threshold=50%", "one threshold"),
        ("scan=0", "scan=0"),
        ("budget=x", "budget=x"),
        ("sizes=2M", "not a relocation parameter"),
        ("2M", "key=value"),
    ] {
        let e = bad.parse::<RelocationSettings>().unwrap_err();
        assert!(e.contains(says), "{bad}: {e}");
    }
    let e = "relocation:size=4K"
        .parse::<PolicySpec>()
        .unwrap_err()
        .to_string();
    assert!(e.contains("relocation:size=4K") && e.contains("2M"), "{e}");
}

#[test]
fn collapses_exactly_at_the_threshold_not_one_page_before() {
    let mut m = mm("threshold=50%", 64 * M);
    map(&mut m, 0x4000_0000, 4 * M);
    touch_pages(&mut m, 0x4000_0000, 255);
    tick(&mut m);
    assert_eq!(counter(&m, "below_threshold"), 1);
    assert_eq!(m.machine().stats.promotions, 0);
    assert_eq!(touch(&mut m, 0x4000_0000), 4 * K);
    // The 256th page: the extent is a candidate again and now qualifies.
    touch_pages(&mut m, 0x4010_0000, 1);
    tick(&mut m);
    let s = &m.machine().stats;
    assert_eq!(s.promotions, 1);
    assert_eq!(s.copied_bytes, 256 * 4 * K);
    // 256 pages zeroed at their faults, 256 more by the collapse.
    assert_eq!(s.zeroed_bytes, 512 * 4 * K);
    assert_eq!((s.faults, s.rss_bytes), (256, 2 * M));
    assert_eq!(counter(&m, "pages_collapsed"), 1);
    assert_eq!(touch(&mut m, 0x401f_f000), 2 * M); // an empty page, now mapped: no fault
    assert_eq!(m.machine().stats.faults, 256);
    assert_eq!(free_bytes(&m), 62 * M);
}

#[test]
fn max_ptes_none_on_64k_extents_copies_and_zeroes_exactly() {
    // 16 pages per extent, at most 3 empty: 13 populated collapse, 12 do not.
    let mut m = mm("size=64K,max_ptes_none=3", 64 * M);
    map(&mut m, 0x4000_0000, 2 * M);
    touch_pages(&mut m, 0x4000_0000, 12);
    touch_pages(&mut m, 0x4001_0000, 13);
    tick(&mut m);
    assert_eq!(touch(&mut m, 0x4000_0000), 4 * K);
    assert_eq!(touch(&mut m, 0x4001_0000), 64 * K);
    let s = &m.machine().stats;
    assert_eq!((s.promotions, s.copied_bytes), (1, 13 * 4 * K));
    assert_eq!(s.zeroed_bytes, (25 + 3) * 4 * K);
    assert_eq!(s.rss_bytes, (12 + 16) * 4 * K);
    assert_eq!(counter(&m, "below_threshold"), 1);
}

#[test]
fn the_linux_default_collapses_a_single_page() {
    let mut m = mm("", 64 * M);
    map(&mut m, 0x4000_0000, 2 * M);
    touch_pages(&mut m, 0x4000_5000, 1);
    tick(&mut m);
    let s = &m.machine().stats;
    assert_eq!((s.promotions, s.copied_bytes), (1, 4 * K));
    assert_eq!(s.zeroed_bytes, 2 * M); // 4K at the fault, 2M - 4K by the collapse
}

#[test]
fn extents_crossing_a_vma_edge_are_not_collapsed() {
    // VMA [1G + 4K, 1G + 4M): the first 2M extent starts below it.
    let mut m = mm("", 64 * M);
    map(&mut m, 0x4000_1000, 4 * M - 4 * K);
    touch_pages(&mut m, 0x4000_1000, 511);
    touch_pages(&mut m, 0x4020_0000, 1);
    tick(&mut m);
    assert_eq!(touch(&mut m, 0x4000_1000), 4 * K);
    assert_eq!(touch(&mut m, 0x4020_0000), 2 * M);
    assert_eq!(m.machine().stats.promotions, 1);
}

#[test]
fn mixed_protection_keeps_base_pages() {
    let mut m = mm("", 64 * M);
    map(&mut m, 0x4000_0000, 4 * M);
    touch_pages(&mut m, 0x4000_0000, 4);
    touch_pages(&mut m, 0x4020_0000, 4);
    // Part of the first extent read-only: the VMA splits, the extent spans two.
    ev(
        &mut m,
        Event::Protect {
            start: VirtAddr(0x4000_2000),
            len: 4 * K,
            prot: Prot(Prot::READ),
        },
    );
    tick(&mut m);
    assert_eq!(touch(&mut m, 0x4000_0000), 4 * K);
    assert_eq!(touch(&mut m, 0x4020_0000), 2 * M);
    assert_eq!(counter(&m, "not_eligible"), 1);
    assert_eq!(m.machine().stats.promotions, 1);
}

#[test]
fn madv_nohugepage_and_file_mappings_are_left_alone() {
    let mut m = mm("", 64 * M);
    map(&mut m, 0x4000_0000, 2 * M);
    ev(
        &mut m,
        Event::Advise {
            start: VirtAddr(0x4000_0000),
            len: 2 * M,
            advice: Advice::NoHugePage,
        },
    );
    touch_pages(&mut m, 0x4000_0000, 8);
    let e = MapEvent {
        start: VirtAddr(0x8000_0000),
        len: 2 * M,
        prot: Prot(Prot::READ),
        backing: Backing::File {
            file_id: 1,
            offset: 0,
        },
        sharing: Sharing::Private,
    };
    ev(&mut m, Event::Map(Box::new(e)));
    touch_pages(&mut m, 0x8000_0000, 8);
    tick(&mut m);
    assert_eq!(m.machine().stats.promotions, 0);
    assert_eq!(counter(&m, "extents_scanned"), 0);
}

#[test]
fn allocation_failure_skips_the_extent_until_its_next_fault() {
    // 4M: two 2M blocks. The base pages split one; the first collapse takes
    // the other; the second finds no free 2M block.
    let mut m = mm("", 4 * M);
    map(&mut m, 0x4000_0000, 4 * M);
    touch_pages(&mut m, 0x4000_0000, 1);
    touch_pages(&mut m, 0x4020_0000, 1);
    tick(&mut m);
    assert_eq!(counter(&m, "pages_collapsed"), 1);
    assert_eq!(counter(&m, "alloc_failed"), 1);
    assert_eq!(counter(&m, "pending"), 0);
    assert_eq!(touch(&mut m, 0x4000_0000), 2 * M);
    assert_eq!(touch(&mut m, 0x4020_0000), 4 * K);
    assert_eq!(m.machine().stats.copied_bytes, 4 * K);
    // Free the superpage; the next fault in the skipped extent brings it back.
    ev(
        &mut m,
        Event::Unmap {
            start: VirtAddr(0x4000_0000),
            len: 2 * M,
        },
    );
    touch_pages(&mut m, 0x4020_1000, 1);
    tick(&mut m);
    assert_eq!(touch(&mut m, 0x4020_0000), 2 * M);
    assert_eq!(m.machine().stats.promotions, 2);
}

#[test]
fn unmapping_after_a_collapse_frees_the_superpage() {
    let mut m = mm("", 64 * M);
    map(&mut m, 0x4000_0000, 4 * M);
    touch_pages(&mut m, 0x4000_0000, 3);
    tick(&mut m);
    assert_eq!(free_bytes(&m), 62 * M);
    // Part of it: the superpage is split (a demotion) and exactly one page freed.
    ev(
        &mut m,
        Event::Unmap {
            start: VirtAddr(0x4000_3000),
            len: 4 * K,
        },
    );
    assert_eq!(m.machine().stats.demotions, 1);
    assert_eq!(free_bytes(&m), 62 * M + 4 * K);
    ev(
        &mut m,
        Event::Unmap {
            start: VirtAddr(0x4000_0000),
            len: 4 * M,
        },
    );
    assert_eq!(free_bytes(&m), 64 * M);
    assert_eq!(m.machine().stats.rss_bytes, 0);
    // A whole superpage unmapped goes back as one block.
    map(&mut m, 0x4000_0000, 2 * M);
    touch_pages(&mut m, 0x4000_0000, 1);
    tick(&mut m);
    ev(
        &mut m,
        Event::Unmap {
            start: VirtAddr(0x4000_0000),
            len: 2 * M,
        },
    );
    assert_eq!(m.machine().stats.demotions, 1);
    assert_eq!(free_bytes(&m), 64 * M);
}

#[test]
fn scan_interval_and_budget_pace_the_scanner() {
    let mut m = mm("scan=2,budget=1", 64 * M);
    map(&mut m, 0x4000_0000, 6 * M);
    for e in 0..3 {
        touch_pages(&mut m, 0x4000_0000 + e * 2 * M, 1);
    }
    tick(&mut m);
    assert_eq!(m.machine().stats.promotions, 0);
    tick(&mut m);
    assert_eq!(m.machine().stats.promotions, 1);
    assert_eq!(counter(&m, "pending"), 2);
    tick(&mut m);
    tick(&mut m);
    tick(&mut m);
    tick(&mut m);
    assert_eq!(m.machine().stats.promotions, 3);
    assert_eq!(counter(&m, "scans"), 3);
}

#[test]
fn candidates_of_an_exited_process_are_dropped() {
    let mut m = mm("", 64 * M);
    ev(
        &mut m,
        Event::Switch(pagelab_core::ThreadId { pid: 7, tid: 7 }),
    );
    map(&mut m, 0x4000_0000, 2 * M);
    touch_pages(&mut m, 0x4000_0000, 1);
    ev(&mut m, Event::Exit { status: 0 });
    tick(&mut m);
    assert_eq!(counter(&m, "pending"), 0);
    assert_eq!(counter(&m, "extents_scanned"), 0);
    assert_eq!(free_bytes(&m), 64 * M);
}

#[test]
fn collapsed_ranges_are_handed_over_for_the_tlb_once() {
    use pagelab_mm::machine::{Machine, MachineConfig};
    use pagelab_mm::policy::{Policy, RelocationPolicy};
    let mut m = Machine::new(&MachineConfig {
        phys: PhysConfig::new(Bytes(64 * M)),
        base: PageSize::K4,
        geometry: None,
    })
    .unwrap();
    let ev = MapEvent {
        start: VirtAddr(0x4000_0000),
        len: 4 * M,
        prot: RW,
        backing: Backing::Anon,
        sharing: Sharing::Private,
    };
    m.proc_mut(3).aspace.map(&ev).unwrap();
    let mut p = RelocationPolicy::new("size=64K,max_ptes_none=0".parse().unwrap());
    for i in 0..16 {
        let vma = *m
            .proc(3)
            .unwrap()
            .aspace
            .find(VirtAddr(0x4020_0000))
            .unwrap();
        p.fault(&mut m, 3, &vma, VirtAddr(0x4020_0000 + i * 4 * K), true)
            .unwrap();
    }
    assert!(p.take_remapped().is_empty());
    p.tick(&mut m).unwrap();
    assert_eq!(
        p.take_remapped(),
        [(3, VirtAddr(0x4020_0000), VirtAddr(0x4021_0000))]
    );
    assert!(p.take_remapped().is_empty());
    assert_eq!(p.stats().pages_collapsed, 1);
}

#[derive(Clone, Debug)]
enum Op {
    Touch(u64),
    Tick,
    Unmap(u64, u64),
    Protect(u64, u64, bool),
    Map(u64, u64),
}

fn op() -> impl proptest::strategy::Strategy<Value = Op> {
    use proptest::prelude::*;
    // Pages of an 8M window, so 2M and 64K extents, edges and splits all occur.
    let page = 0..2048u64;
    prop_oneof![
        6 => page.clone().prop_map(Op::Touch),
        2 => Just(Op::Tick),
        1 => (page.clone(), 1..600u64).prop_map(|(p, n)| Op::Unmap(p, n)),
        1 => (page.clone(), 1..600u64, any::<bool>()).prop_map(|(p, n, w)| Op::Protect(p, n, w)),
        1 => (page, 1..1100u64).prop_map(|(p, n)| Op::Map(p, n)),
    ]
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(64))]
    /// Random events under little memory: every invariant holds after every
    /// step, and unmapping everything frees every frame.
    #[test]
    fn random_events_keep_every_invariant(
        params in proptest::sample::select(vec!["", "threshold=50%", "size=64K,max_ptes_none=8", "budget=1"]),
        ops in proptest::collection::vec(op(), 1..300),
    ) {
        const BASE_VA: u64 = 0x4000_0000;
        let mut m = mm(params, 6 * M);
        map(&mut m, BASE_VA, 8 * M);
        for o in ops {
            let at = |p: u64| BASE_VA + p * 4 * K;
            match o {
                Op::Touch(p) => match m.translate(VirtAddr(at(p)), false, true) {
                    Ok(_) | Err(pagelab_mm::machine::MmError::OutOfMemory { .. }) => {}
                    Err(e) => panic!("{e}"),
                },
                Op::Tick => m.tick().unwrap(),
                Op::Unmap(p, n) => {
                    m.event(&Event::Unmap { start: VirtAddr(at(p)), len: n * 4 * K }).unwrap();
                }
                Op::Protect(p, n, w) => {
                    let prot = Prot(Prot::READ | if w { Prot::WRITE } else { 0 });
                    m.event(&Event::Protect { start: VirtAddr(at(p)), len: n * 4 * K, prot }).unwrap();
                }
                Op::Map(p, n) => map(&mut m, at(p), n * 4 * K),
            }
            m.check().unwrap();
        }
        m.event(&Event::Unmap { start: VirtAddr(0), len: 1 << 47 }).unwrap();
        m.check().unwrap();
        proptest::prop_assert_eq!(free_bytes(&m), 6 * M);
    }
}
