//! The `reservation` policy at its thresholds: promotion exactly at the last
//! base page of an aligned extent, incrementally from the smallest size up;
//! preemption of the least recently allocated reservation; release; passive
//! demotion; and random event streams under a small memory. `check()` (frame
//! accounting plus the policy's own bookkeeping) after every step.

use crate::common;

use common::{counter, ev, free_frames, map, mm_no_reclaim, per_size, translate, K, M, RW};
use pagelab_core::VirtAddr;
use pagelab_core::{Advice, Event, Prot, ThreadId};
use pagelab_mm::pagetable::{PageTable, PteFlags, Translation};
use pagelab_mm::phys::FrameAllocator;
use pagelab_mm::policy::PolicySpec;
use pagelab_mm::system::Mm;
use proptest::prelude::*;

const A: u64 = 0x4000_0000;

fn touch(m: &mut Mm, addr: u64) -> Translation {
    translate(m, addr, true)
}

/// The size of the page mapping `addr` now (0 if none).
fn size_at(m: &Mm, addr: u64) -> u64 {
    let p = m.machine().proc(m.pid()).unwrap();
    p.pt.walk(VirtAddr(addr)).map_or(0, |t| t.size.bytes())
}

#[test]
fn settings_parse_print_and_name_their_errors() {
    let d: PolicySpec = "reservation".parse().unwrap();
    assert_eq!(d.to_string(), "reservation");
    let one: PolicySpec = "reservation:max=1M".parse().unwrap();
    assert_eq!(one.to_string(), "reservation:max=1M");
    assert_eq!(
        "reservation:max=2M"
            .parse::<PolicySpec>()
            .unwrap()
            .to_string(),
        "reservation"
    );
    for bad in [
        "reservation:max=4K",
        "reservation:max=4M",
        "reservation:size=2M",
        "reservation:max",
    ] {
        let e = bad.parse::<PolicySpec>().unwrap_err().to_string();
        assert!(e.contains(bad), "{e}");
    }
    let e = "reservation:max=4M"
        .parse::<PolicySpec>()
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("`max`") && e.contains("2M") && e.contains("1G"),
        "{e}"
    );
}

#[test]
fn promotion_happens_at_the_last_base_page_of_each_extent_not_before() {
    let mut m = mm_no_reclaim("reservation", 64 * M);
    map(&mut m, A, 2 * M);
    for n in 1..=512u64 {
        let t = touch(&mut m, A + (n - 1) * 4 * K);
        // Pages [0, n) are populated: the page at 0 is the largest power of two <= n.
        let want = (4 * K) << (63 - n.leading_zeros());
        assert_eq!(size_at(&m, A), want, "after {n} pages");
        assert_eq!(m.machine().stats.faults, n);
        if n.is_power_of_two() {
            assert_eq!(
                t.size.bytes(),
                n * 4 * K,
                "the fault that completes {n} pages promotes"
            );
        }
    }
    // 16K after 4 pages, 64K after 16, 2M after 512 (checked above); 511 promotions in all.
    let s = &m.machine().stats;
    assert_eq!((s.promotions, s.rss_bytes), (511, 2 * M));
    assert_eq!(
        s.faults_by_size.iter().count(),
        1,
        "every fault maps one 4K page"
    );
    assert_eq!(
        counter(&m, "reservations"),
        0,
        "a whole promoted extent is an ordinary page"
    );
    assert_eq!(counter(&m, "held_bytes"), 0);
}

#[test]
fn out_of_order_population_promotes_only_at_the_last_page() {
    let mut m = mm_no_reclaim("reservation", 64 * M);
    map(&mut m, A, 2 * M);
    // The 16K extent [16K, 32K): pages 7, 5, 4, then 6 completes it.
    for p in [7, 5, 4] {
        touch(&mut m, A + p * 4 * K);
    }
    assert_eq!(size_at(&m, A + 16 * K), 8 * K); // pages 4 and 5
    assert_eq!(size_at(&m, A + 28 * K), 4 * K);
    assert_eq!(m.machine().stats.promotions, 1);
    touch(&mut m, A + 6 * 4 * K);
    assert_eq!(size_at(&m, A + 16 * K), 16 * K);
    assert_eq!(m.machine().stats.promotions, 3); // [4,6) then [6,8) then [4,8)
    assert_eq!(size_at(&m, A), 0);
}

#[test]
fn promotion_is_incremental_from_the_smallest_size_up() {
    let mut m = mm_no_reclaim("reservation", 64 * M);
    map(&mut m, A, 2 * M);
    // Every page but the first, last to first: nothing above 1M can complete.
    for p in (1..512).rev() {
        touch(&mut m, A + p * 4 * K);
    }
    assert_eq!(size_at(&m, A + M), M);
    assert_eq!(size_at(&m, A + 512 * K), 512 * K);
    assert_eq!(size_at(&m, A + 4 * K), 4 * K);
    let before = m.machine().stats.promotions;
    let sizes = [
        "8K", "16K", "32K", "64K", "128K", "256K", "512K", "1M", "2M",
    ];
    let counts: Vec<u64> = sizes.iter().map(|s| per_size(&m, "promoted", s)).collect();
    // The first page completes one extent of every size at once: 8K, 16K, ... 2M.
    let t = touch(&mut m, A);
    assert_eq!(t.size.bytes(), 2 * M);
    assert_eq!(m.machine().stats.promotions - before, 9);
    for (s, c) in sizes.iter().zip(counts) {
        assert_eq!(per_size(&m, "promoted", s), c + 1, "{s}");
    }
    // Over the whole extent: 256 of 8K, 128 of 16K, ... 1 of 2M.
    for (i, s) in sizes.iter().enumerate() {
        assert_eq!(per_size(&m, "promoted", s), 256 >> i, "{s}");
    }
}

#[test]
fn the_reservation_is_the_largest_aligned_extent_inside_the_vma() {
    let mut m = mm_no_reclaim("reservation:max=1M", 64 * M);
    // [A + 64K, A + 64K + 192K): 64K extents fit at +64K, +128K, +192K; 128K at +128K.
    map(&mut m, A + 64 * K, 192 * K);
    touch(&mut m, A + 64 * K);
    assert_eq!(per_size(&m, "reserved", "64K"), 1);
    touch(&mut m, A + 128 * K);
    assert_eq!(per_size(&m, "reserved", "128K"), 1);
    assert_eq!(counter(&m, "held_bytes"), (64 + 128 - 8) * K);
    // max=1M caps a 2M-aligned VMA at 1M.
    map(&mut m, A + 2 * M, 2 * M);
    touch(&mut m, A + 2 * M);
    assert_eq!(per_size(&m, "reserved", "1M"), 1);
    assert_eq!(per_size(&m, "reserved", "2M"), 0);
    // MADV_NOHUGEPAGE: base pages, no reservation.
    ev(
        &mut m,
        Event::Advise {
            start: VirtAddr(A + 3 * M),
            len: M,
            advice: Advice::NoHugePage,
        },
    );
    touch(&mut m, A + 3 * M);
    assert_eq!(counter(&m, "base_pages_outside"), 1);
}

#[test]
fn preemption_takes_the_least_recently_allocated_reservation_first() {
    // 8M: four 2M reservations fill memory.
    let mut m = mm_no_reclaim("reservation", 8 * M);
    let region = |i: u64| A + i * 4 * M;
    let mut first = Vec::new();
    for i in 0..4 {
        map(&mut m, region(i), 2 * M);
        first.push(touch(&mut m, region(i)).pfn.0);
    }
    assert_eq!(free_frames(&m), 0);
    touch(&mut m, region(0) + 4 * K); // region 0 allocated most recently now
                                      // Order of last allocation: 1, 2, 3, 0. No reservation can give back 2M
                                      // (each has a page in use), so new regions get 1M, each from the oldest.
    for (n, victim) in [1usize, 2, 3, 0].into_iter().enumerate() {
        let r = region(4 + n as u64);
        map(&mut m, r, 2 * M);
        let t = touch(&mut m, r);
        assert_eq!(m.machine().stats.preemptions, n as u64 + 1);
        assert!(
            (first[victim]..first[victim] + 512).contains(&t.pfn.0),
            "region {} took frames of region {victim}",
            4 + n
        );
        // The victim's populated page stays mapped, now outside any reservation.
        assert!(size_at(&m, region(victim as u64)) >= 4 * K);
    }
    assert_eq!(per_size(&m, "fallbacks", "2M"), 4);
    assert_eq!(per_size(&m, "reserved", "1M"), 4);
    assert_eq!(counter(&m, "reservations"), 4);
}

#[test]
fn a_base_page_or_scattered_free_memory_preempts_too() {
    // Memory short: a base page with no free frame breaks the oldest reservation.
    let mut m = mm_no_reclaim("reservation", 4 * M);
    map(&mut m, A, 2 * M);
    map(&mut m, A + 4 * M, 2 * M);
    let x = touch(&mut m, A).pfn.0;
    touch(&mut m, A + 4 * M);
    touch(&mut m, A + 4 * K); // the first reservation is the most recent now
    let y = x ^ 512;
    map(&mut m, A + 8 * M, 4 * K);
    ev(
        &mut m,
        Event::Advise {
            start: VirtAddr(A + 8 * M),
            len: 4 * K,
            advice: Advice::NoHugePage,
        },
    );
    let t = touch(&mut m, A + 8 * M);
    assert!((y..y + 512).contains(&t.pfn.0));
    assert_eq!(counter(&m, "preempted_for_memory"), 1);
    assert_eq!(counter(&m, "reservations"), 1);

    // Contiguity missing: 1M free in scattered frames, a reservation holding a free 1M.
    let mut m = mm_no_reclaim("reservation", 4 * M);
    map(&mut m, A, 2 * M);
    let x = touch(&mut m, A).pfn.0;
    map(&mut m, A + 4 * M, 2 * M);
    ev(
        &mut m,
        Event::Advise {
            start: VirtAddr(A + 4 * M),
            len: 2 * M,
            advice: Advice::NoHugePage,
        },
    );
    for p in 0..512 {
        touch(&mut m, A + 4 * M + p * 4 * K);
    }
    for p in (0..512).step_by(2) {
        ev(
            &mut m,
            Event::Unmap {
                start: VirtAddr(A + 4 * M + p * 4 * K),
                len: 4 * K,
            },
        );
    }
    assert_eq!(free_frames(&m), 256);
    map(&mut m, A + 8 * M, 2 * M);
    let t = touch(&mut m, A + 8 * M);
    assert_eq!(
        t.pfn.0,
        x + 256,
        "the free half of the preempted reservation"
    );
    assert_eq!(counter(&m, "preempted_for_contiguity"), 1);
    assert_eq!(per_size(&m, "reserved", "1M"), 1);
}

#[test]
fn release_frees_every_frame_and_reservation() {
    let mut m = mm_no_reclaim("reservation", 64 * M);
    let total = free_frames(&m);
    map(&mut m, A, 4 * M);
    for p in (0..16).chain([100, 300, 512, 513, 1000]) {
        touch(&mut m, A + p * 4 * K);
    }
    assert_eq!(size_at(&m, A), 64 * K);
    assert_eq!(counter(&m, "reservations"), 2);
    // Unmapping part of a reservation returns its frames to the reservation.
    ev(
        &mut m,
        Event::Unmap {
            start: VirtAddr(A),
            len: 32 * K,
        },
    );
    assert_eq!(m.machine().stats.demotions, 1); // the 64K page split at the edge
    assert_eq!(counter(&m, "reservations"), 2);
    // Mapped again and touched, the same frame comes back.
    map(&mut m, A, 32 * K);
    let t = touch(&mut m, A + 4 * K);
    assert_eq!(t.pfn.0 % 512, 1);
    ev(
        &mut m,
        Event::Unmap {
            start: VirtAddr(A),
            len: 4 * M,
        },
    );
    assert_eq!(counter(&m, "reservations"), 0);
    assert_eq!((m.machine().stats.rss_bytes, free_frames(&m)), (0, total));
    // Exit frees as munmap does.
    map(&mut m, A, 4 * M);
    for p in [0, 1, 2, 600] {
        touch(&mut m, A + p * 4 * K);
    }
    ev(&mut m, Event::Exit { status: 0 });
    assert_eq!(counter(&m, "reservations"), 0);
    assert_eq!(free_frames(&m), total);
}

#[test]
fn partial_mprotect_demotes_and_the_population_map_stays_consistent() {
    let mut m = mm_no_reclaim("reservation", 64 * M);
    map(&mut m, A, 2 * M);
    for p in 0..16 {
        touch(&mut m, A + p * 4 * K);
    }
    assert_eq!(size_at(&m, A), 64 * K);
    let promotions = m.machine().stats.promotions;
    ev(
        &mut m,
        Event::Protect {
            start: VirtAddr(A + 8 * K),
            len: 4 * K,
            prot: Prot(Prot::READ),
        },
    );
    assert!(m.machine().stats.demotions >= 1);
    assert_eq!(size_at(&m, A + 8 * K), 4 * K);
    assert_eq!(size_at(&m, A + 32 * K), 4 * K); // the 64K run split into its entries
                                                // Populate the rest: extents that hold the read-only page span three VMAs
                                                // now and stay as they are; the others promote as before.
    for p in 16..512 {
        touch(&mut m, A + p * 4 * K);
    }
    assert_eq!(size_at(&m, A + M), M);
    assert_eq!(size_at(&m, A + 8 * K), 4 * K);
    assert!(m.machine().stats.promotions > promotions);
    assert_eq!(counter(&m, "held_bytes"), 0);
    assert_eq!(counter(&m, "reservations"), 1, "full, but never one page");
    let p = m.machine().proc(0).unwrap();
    let ro = p.pt.walk(VirtAddr(A + 8 * K)).unwrap();
    assert_eq!(ro.flags, PteFlags::READ);
    ev(
        &mut m,
        Event::Unmap {
            start: VirtAddr(A),
            len: 2 * M,
        },
    );
    assert_eq!(counter(&m, "reservations"), 0);
    assert_eq!(m.machine().stats.rss_bytes, 0);
}

#[test]
fn frames_shared_at_fork_find_their_reservation_when_released() {
    let mut m = mm_no_reclaim("reservation", 64 * M);
    map(&mut m, A, 2 * M);
    for p in 0..4 {
        touch(&mut m, A + p * 4 * K);
    }
    ev(&mut m, Event::fork(1));
    // The parent writes: copy-on-write gives it a copy; the child keeps the frames.
    let copy = touch(&mut m, A);
    assert_eq!(copy.size.bytes(), 16 * K);
    // The parent goes on populating; shared frames block promotion.
    for p in 4..8 {
        touch(&mut m, A + p * 4 * K);
    }
    assert_eq!(size_at(&m, A + 16 * K), 16 * K);
    assert_eq!(size_at(&m, A), 16 * K);
    assert_eq!(
        per_size(&m, "promoted", "32K"),
        0,
        "the copy is not the reservation's frames"
    );
    ev(&mut m, Event::Exit { status: 0 });
    ev(&mut m, Event::Switch(ThreadId { pid: 1, tid: 1 }));
    assert_eq!(counter(&m, "reservations"), 1);
    ev(&mut m, Event::Exit { status: 0 });
    assert_eq!(counter(&m, "reservations"), 0);
    assert_eq!(m.machine().stats.rss_bytes, 0);
}

#[derive(Clone, Debug)]
enum Op {
    Map(u64, u64),
    Unmap(u64, u64),
    Protect(u64, u64, bool),
    Touch(u64),
    TouchRun(u64, u64),
    Switch(u32),
    Exit,
}

/// Addresses in a 4M window: 1024 pages, in up to three processes. Fork is
/// left out: `Machine::unshare` frees the frames of a partly shared page
/// itself, behind the policy's back (see the fork test above for what works).
fn op() -> impl Strategy<Value = Op> {
    let page = 0..1024u64;
    let len = prop_oneof![1..4u64, 1..64u64, 1..600u64];
    prop_oneof![
        2 => (page.clone(), len.clone()).prop_map(|(p, l)| Op::Map(p, l)),
        1 => (page.clone(), len.clone()).prop_map(|(p, l)| Op::Unmap(p, l)),
        1 => (page.clone(), len.clone(), any::<bool>()).prop_map(|(p, l, w)| Op::Protect(p, l, w)),
        6 => page.clone().prop_map(Op::Touch),
        3 => (page, 1..300u64).prop_map(|(p, l)| Op::TouchRun(p, l)),
        1 => (0..3u32).prop_map(Op::Switch),
        1 => Just(Op::Exit),
    ]
}

fn clip(p: u64, l: u64) -> (u64, u64) {
    (A + p * 4 * K, l.min(1024 - p) * 4 * K)
}

/// Every page larger than 4K lies inside one VMA with its protection, and
/// every base page under it translates into its own frame of the page.
fn check_promoted(m: &Mm) {
    for pid in m.machine().pids() {
        let p = m.machine().proc(pid).unwrap();
        for mp in p.pt.mappings_in(VirtAddr(0), 1 << 47) {
            if mp.size.bytes() == 4 * K {
                continue;
            }
            let vma = p.aspace.find(mp.start).expect("mapped page in a VMA");
            assert!(
                mp.start + mp.size.bytes() <= vma.end,
                "{mp:?} crosses {vma:?}"
            );
            for j in 0..mp.size.bytes() / (4 * K) {
                let t = p.pt.walk(VirtAddr(mp.start.0 + j * 4 * K)).unwrap();
                assert_eq!((t.start, t.pfn), (mp.start, mp.pfn));
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    #[test]
    fn random_events_under_a_small_memory_keep_every_invariant(
        ops in prop::collection::vec(op(), 1..60),
        max in prop_oneof![Just("64K"), Just("1M"), Just("2M")],
    ) {
        // 6M for a 4M window, per process: reservations must be preempted.
        let mut m = mm_no_reclaim(&format!("reservation:max={max}"), 6 * M);
        for op in ops {
            match op {
                Op::Map(p, l) => { let (s, l) = clip(p, l); map(&mut m, s, l) }
                Op::Unmap(p, l) => { let (s, l) = clip(p, l); ev(&mut m, Event::Unmap { start: VirtAddr(s), len: l }) }
                Op::Protect(p, l, w) => {
                    let (s, l) = clip(p, l);
                    let prot = if w { RW } else { Prot(Prot::READ) };
                    ev(&mut m, Event::Protect { start: VirtAddr(s), len: l, prot })
                }
                Op::Touch(p) => { touch_ok(&mut m, A + p * 4 * K) }
                Op::TouchRun(p, l) => {
                    for q in p..(p + l).min(1024) {
                        touch_ok(&mut m, A + q * 4 * K);
                    }
                }
                Op::Switch(pid) => ev(&mut m, Event::Switch(ThreadId { pid, tid: pid })),
                Op::Exit => ev(&mut m, Event::Exit { status: 0 }),
            }
            check_promoted(&m);
        }
        for pid in m.machine().pids() {
            ev(&mut m, Event::Switch(ThreadId { pid, tid: pid }));
            ev(&mut m, Event::Exit { status: 0 });
        }
        prop_assert_eq!(counter(&m, "reservations"), 0);
        prop_assert_eq!(free_frames(&m), m.machine().phys.total_frames());
    }
}

/// Touches `addr`; running out of memory is allowed (three processes may map
/// more than 6M), any other error is not.
fn touch_ok(m: &mut Mm, addr: u64) {
    match m.translate(pagelab_core::VirtAddr(addr), false, true) {
        Ok(_) => {}
        Err(pagelab_mm::machine::MmError::OutOfMemory { .. }) => {}
        Err(e) => panic!("{e}"),
    }
    m.check().unwrap();
}
