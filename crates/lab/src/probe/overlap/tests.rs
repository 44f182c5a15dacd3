use super::*;

#[test]
fn the_order_is_a_bijection_and_the_colours_spread_the_lines() {
    for count in [2u64, 8, 1024, 1 << 15] {
        let mut seen = vec![false; count as usize];
        for i in 0..count {
            let o = Order::new(Visit::Random, count).at(i);
            assert!(
                !std::mem::replace(&mut seen[o as usize], true),
                "{count}: {i}"
            );
        }
    }
    let l = Lines {
        count: WALK_PAGES,
        spacing: 4096,
        visit: Visit::Random,
    };
    assert!(
        (0..l.count).all(|i| l.offset(i) / 4096 == i as usize),
        "one line a page"
    );
    // Physically contiguous, the set of a 2048-set cache is bits 6-16 of the offset
    // itself: every set takes 8 of the 16384 lines.
    let mut per_set = vec![0u32; 2048];
    for i in 0..l.count {
        per_set[(l.offset(i) >> 6) & 2047] += 1;
    }
    assert!(per_set.iter().all(|&n| n == 8), "8 lines in every set");
    let packed = Lines {
        count: WALK_PAGES,
        spacing: 64,
        visit: Visit::Random,
    };
    assert!((0..packed.count).all(|i| packed.offset(i) == i as usize * 64));
}

#[test]
fn the_walk_measurement_takes_half_the_l2() {
    // Emerald Rapids' 2M L2 and anything larger or unknown: 16384 lines (1M); Zen 4's
    // 1M L2: 8192 (512K), the 16384 would fill it; never fewer than 4096 pages, more
    // than a 3K-entry L2 TLB; a size that is no power of two rounds down.
    assert_eq!(walk_pages(Some(2 << 20)), 16384);
    assert_eq!(walk_pages(Some(32 << 20)), 16384);
    assert_eq!(walk_pages(None), 16384);
    assert_eq!(walk_pages(Some(1 << 20)), 8192);
    assert_eq!(walk_pages(Some(1280 << 10)), 8192);
    assert_eq!(walk_pages(Some(256 << 10)), 4096);
    assert_eq!(walk_pages(Some(0)), 4096);
}

#[test]
fn walks_in_flight_and_their_interval_come_from_the_packed_baseline() {
    // This guest under load (session 32): 4K walks of 70.4 ns adding 8.46 ns, splintered
    // walks of 12.4 ns adding 2.6 ns, more than their share of 8.3 walkers (1.5 ns).
    let p = OverlapProbe {
        memory_bytes: 256 << 20,
        memory: (144.2, 15.32),
        memory_huge: true,
        walk_pages: WALK_PAGES,
        walk_base: (77.7, 10.13),
        walk_pool: Ok(64 << 20),
        walk_frames: None,
        frames: None,
        host: HostPageProbe {
            spread: (19.7, 4.27),
            packed: (7.3, 1.67),
            huge_ok: true,
        },
        sequential: [(7.65, 3.86), (4.76, 2.18)],
        rounds: Vec::new(),
    };
    let w = p.walks_in_flight().unwrap();
    assert!((w - 70.4 / 8.46).abs() < 1e-9, "{w}");
    let i = p.walk_interval_ns().unwrap();
    assert!((i - 2.6).abs() < 1e-9, "{i}");
    // Short walks that take only their share of the walkers: no interval.
    let mut q = p.clone();
    q.host.spread.1 = 1.67 + 12.4 / w * 0.9;
    assert_eq!(q.walk_interval_ns(), None);
    // Nor those that take a little more, within the margin: the Emerald Rapids guest
    // idle (session 41), 4.3 splintered walks in flight against 4.6 long ones.
    q.host.spread.1 = 1.67 + 12.4 / w * 1.2;
    assert_eq!(q.walk_interval_ns(), None);
    q.host.spread.1 = 1.67 + 12.4 / w * 1.3;
    assert!(q.walk_interval_ns().is_some());
    // 2M host pages: no short walks, no interval; the walkers stay measured.
    q.host.spread = (7.6, 1.7);
    assert_eq!(
        (q.walk_interval_ns(), q.walks_in_flight().is_some()),
        (None, true)
    );
    // The packed lines without a 2M page: nothing to measure against.
    q.host.huge_ok = false;
    assert_eq!(q.walks_in_flight(), None);
}

#[test]
fn the_counts_and_the_interval_are_read_round_by_round() {
    // Session 32's figures (the test above) as one round.
    let one = OverlapRound {
        memory: (144.2, 15.32),
        walk_base: (77.7, 10.13),
        spread: (19.7, 4.27),
        packed: (7.3, 1.67),
    };
    let scaled = |r: OverlapRound, k: f64| OverlapRound {
        memory: (r.memory.0 * k, r.memory.1 * k),
        walk_base: (r.walk_base.0 * k, r.walk_base.1 * k),
        spread: (r.spread.0 * k, r.spread.1 * k),
        packed: (r.packed.0 * k, r.packed.1 * k),
    };
    // A round where the whole machine ran 40% slower gives the same counts, and slow
    // stretches under single figures (the 4K lines' independent loads 2 ns more, the spread
    // lines' dependent ones 20) are outvoted by the other two rounds.
    let mut odd = one;
    odd.walk_base.1 += 2.0;
    odd.spread.0 += 20.0;
    let mut p = OverlapProbe {
        memory_bytes: 256 << 20,
        memory: (144.2, 15.32),
        memory_huge: true,
        walk_pages: WALK_PAGES,
        walk_base: (77.7, 12.13),
        walk_pool: Ok(64 << 20),
        walk_frames: None,
        frames: None,
        host: HostPageProbe {
            spread: (19.7, 9.27),
            packed: (7.3, 1.67),
            huge_ok: true,
        },
        sequential: [(7.65, 3.86), (4.76, 2.18)],
        rounds: vec![one, scaled(one, 1.4), odd],
    };
    let close = |a: f64, b: f64| (a - b).abs() < 1e-9;
    let long = (77.7 - 7.3) / (10.13 - 1.67);
    let short = (19.7 - 7.3) / (4.27 - 1.67);
    assert!(close(p.walks_in_flight().unwrap(), long));
    assert!(close(p.short_walks_in_flight().unwrap(), short));
    assert!(close(p.misses_in_flight(), 144.2 / 15.32));
    // The interval: shown in two rounds of three (not the odd one, whose splintered walks
    // look many), their median (2.6 ns and 1.4 times it).
    assert!(close(p.walk_interval_ns().unwrap(), 2.6 * 1.2));
    // Shown in one round of three: none.
    p.rounds[1].spread.1 = 1.4 * (1.67 + 12.4 / long * 0.9);
    assert_eq!(p.walk_interval_ns(), None);
    // Two rounds of four do not make most: none; three do, and their median counts.
    p.rounds = vec![one, one, odd, odd];
    p.rounds[2].spread.1 = 1.67 + 12.4 / long * 0.9;
    p.rounds[3].spread.1 = 1.67 + 12.4 / long * 0.9;
    assert_eq!(p.walk_interval_ns(), None);
    p.rounds[3] = scaled(one, 2.0);
    assert!(close(p.walk_interval_ns().unwrap(), 2.6));
    // Walks in most rounds hidden (an independent load no slower than the packed ones):
    // no count of walks in flight, and no interval read from them.
    let mut hidden = one;
    hidden.walk_base.1 = hidden.packed.1;
    p.rounds = vec![one, hidden, hidden];
    assert_eq!((p.walks_in_flight(), p.walk_interval_ns()), (None, None));
    // Without rounds, the figures over all of them count as one.
    p.rounds.clear();
    assert!(close(
        p.walks_in_flight().unwrap(),
        (77.7 - 7.3) / (12.13 - 1.67)
    ));
}

#[test]
fn bad_lines_are_errors() {
    let bad = Lines {
        count: 3,
        spacing: 64,
        visit: Visit::Random,
    };
    assert!(bad
        .time(Advice::None, None, 10, 1, true)
        .unwrap_err()
        .to_string()
        .contains("power of two"));
    let bad = Lines {
        count: 4,
        spacing: 100,
        visit: Visit::Random,
    };
    assert!(bad
        .time(Advice::None, None, 10, 1, false)
        .unwrap_err()
        .to_string()
        .contains("power of two, at least 64"));
}

#[test]
fn lines_in_order_chase_through_every_line_in_address_order() {
    // A dependent chase in address order visits every line once a cycle, so it runs
    // (and would fault on a bad pointer) whatever the machine; over 4K pages each load
    // is on the next page.
    let l = Lines {
        count: 1024,
        spacing: 4096,
        visit: Visit::Sequential,
    };
    for independent in [false, true] {
        let (ns, faults, _) = l
            .time(Advice::NoHugePage, None, 20_000, 2, independent)
            .unwrap();
        assert_eq!(ns.len(), 2);
        assert!(ns.iter().all(|&t| t > 0.0 && t.is_finite()), "{ns:?}");
        assert!(faults >= 1.0, "{faults}");
    }
    let order = Order::new(Visit::Sequential, l.count);
    assert!((0..l.count).all(|i| l.offset(order.at(i)) / 4096 == i as usize));
}

#[test]
fn independent_loads_are_not_slower_than_dependent_ones_beyond_the_caches() {
    // 64M of lines: on any machine past its caches, where independent loads overlap.
    let l = Lines {
        count: 1 << 20,
        spacing: 64,
        visit: Visit::Random,
    };
    let mut rounds = Rounds::default();
    let at = add_pair(&mut rounds, l, (Advice::HugePage, None), 200_000, None);
    let times = rounds.run(1, &mut |_, _| {}).unwrap();
    let ((dep, ind), _) = pair_of(&times, at, l);
    assert!(dep > 0.0 && ind > 0.0);
    assert!(ind < dep, "independent {ind} ns, dependent {dep} ns");
}

#[test]
fn the_walk_measurements_pages_are_drawn_from_its_own_blocks() {
    assert_eq!(walk_pool(WALK_PAGES), 64 << 20);
    assert_eq!(walk_pool(MIN_WALK_PAGES), 16 << 20);
    assert_eq!(walk_pool(100), 2 << 20);
    let l = Lines {
        count: 1024,
        spacing: 4096,
        visit: Visit::Random,
    };
    let pool = walk_pool(l.count);
    if let Err(e) = crate::native::pool::pooled(l.count * 4096, pool, POOL_SEED) {
        eprintln!("skipped: no pool can be drawn here ({e:#})");
        return;
    }
    let (ns, _, frames) = l
        .time(Advice::NoHugePage, Some(pool), 20_000, 2, false)
        .unwrap();
    assert_eq!(ns.len(), 2);
    let f = frames.expect("a pool is drawn only where pagemap shows frames");
    assert!(f.blocks <= pool / (2 << 20), "{f:?}");
    // The same draw every run.
    let (_, _, again) = l
        .time(Advice::NoHugePage, Some(pool), 20_000, 2, true)
        .unwrap();
    assert_eq!(again.unwrap().neighbours, f.neighbours);
}
