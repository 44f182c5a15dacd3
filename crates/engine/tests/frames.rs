//! Where frames lie (`[frames] placement` in a machine file): the same
//! references with the same TLB counts, but scattered 4K frames cost nested
//! walks their host walks and spread the data over the cache sets, where
//! 2M pages (whole blocks either way) are unaffected.

use pagelab_cache::FramePlacement;
use pagelab_core::PageSize;
use pagelab_engine::{run_cost_study, CostConfig, CostMachine, StudyConfig};
use pagelab_report::CostStats;

fn costs(spec: &str, placement: FramePlacement) -> Vec<CostStats> {
    zen4_costs(spec, |c| c.frames.placement = placement)
}

/// The costs of `spec` on zen4 (nested over 2M host pages), its time sections changed by
/// `edit`.
fn zen4_costs(spec: &str, edit: impl FnOnce(&mut pagelab_cache::CostSpec)) -> Vec<CostStats> {
    let mut m = pagelab_machine::preset("zen4").unwrap();
    let tlb = m.tlb.clone().unwrap();
    edit(m.cost.as_mut().unwrap());
    let c = CostConfig {
        machine: CostMachine::new(&m, &tlb).unwrap().unwrap(),
        nested_host: Some(PageSize::M2),
    };
    let cfg = StudyConfig {
        page_sizes: pagelab_core::parse_page_sizes("4K,2M").unwrap(),
        tlb: tlb.clone(),
    };
    let mut src = pagelab_workloads::open(spec).unwrap();
    let r = run_cost_study(&mut *src, &cfg, &c, &mut ()).unwrap();
    r.runs.iter().map(|r| r.cost.clone().unwrap()).collect()
}

#[test]
fn scattered_4k_frames_cost_host_walks_and_2m_pages_barely_move() {
    let spec = "stride:heap=16M,every=1,iters=2,align=2M";
    let first = costs(spec, FramePlacement::FirstTouch);
    let scattered = costs(spec, FramePlacement::Scattered);
    // The TLB sees virtual addresses only: the same walks.
    assert_eq!(first[0].walks, scattered[0].walks);
    // 4K: a 16M heap's 4096 frames in 8 host 2M pages at first touch, in
    // thousands scattered, which the 64-entry nested TLB cannot hold.
    assert!(
        scattered[0].walk_refs > first[0].walk_refs + first[0].walks / 2,
        "walk references: {} first touch, {} scattered",
        first[0].walk_refs,
        scattered[0].walk_refs
    );
    assert!(scattered[0].walk_cycles > first[0].walk_cycles);
    // 2M pages are whole blocks either way, and only the few tables above
    // them (4K frames) move: the cycles stay within a percent.
    let (a, b) = (first[1].cycles as f64, scattered[1].cycles as f64);
    assert!(
        (b / a - 1.0).abs() < 0.01,
        "2M: {a} cycles first touch, {b} scattered"
    );
    assert!(scattered[0].cycles > first[0].cycles);
}

/// The costs of `spec` on zen4 (nested over 2M host pages) with `costs.walk = walk`.
fn with_walk(spec: &str, walk: u32) -> Vec<CostStats> {
    zen4_costs(spec, |c| c.costs.walk = walk)
}

#[test]
fn a_walks_own_cost_is_added_once_to_every_walk() {
    // Dependent loads (a chase) pay every cycle in order: the walks' cycles and the run's
    // grow by exactly 25 a walk, and nothing else moves.
    let spec = "chase:nodes=20000,node=4096,steps=30000,align=2M";
    let (plain, costly) = (with_walk(spec, 0), with_walk(spec, 25));
    // 20000 4K pages walk nearly every step; 40 2M pages once each.
    assert!(plain[0].walks > 20000 && plain[1].walks >= 40, "{plain:?}");
    for (a, b) in plain.iter().zip(&costly) {
        assert_eq!((a.walks, a.walk_refs), (b.walks, b.walk_refs));
        assert_eq!(b.walk_cycles, a.walk_cycles + 25 * a.walks);
        assert_eq!(b.cycles, a.cycles + 25 * a.walks);
    }
}

#[test]
fn a_span_beyond_the_memory_is_refused() {
    let mut m = pagelab_machine::preset("zen4").unwrap();
    let tlb = m.tlb.clone().unwrap();
    let frames = &mut m.cost.as_mut().unwrap().frames;
    frames.placement = FramePlacement::Scattered;
    frames.span = Some(32 << 30);
    let e = CostMachine::new(&m, &tlb).unwrap_err();
    assert!(
        e.contains("frames.span") && e.contains("32G") && e.contains("24G"),
        "{e}"
    );
}

/// The costs of `spec` on zen4 with frames placed by `placement` and the host's block
/// translations `(entries, miss, interval)` (`miss` `None`: none modelled).
fn with_blocks(
    spec: &str,
    placement: FramePlacement,
    (entries, miss, interval): (u32, Option<u32>, u32),
) -> Vec<CostStats> {
    zen4_costs(spec, |c| {
        c.frames.placement = placement;
        let n = c.nested.as_mut().unwrap();
        (n.block_entries, n.block_miss, n.block_interval) = (entries, miss, interval);
    })
}

#[test]
fn the_hosts_blocks_cost_scattered_frames_and_not_compact_ones() {
    // A chase pays each miss in full: 80M of 4K pages scattered over 24G miss 64 blocks
    // on nearly every walk; at first touch they are 40 blocks, held after the first pass.
    let spec = "chase:nodes=20000,node=4096,steps=30000,align=2M";
    for placement in [FramePlacement::Scattered, FramePlacement::FirstTouch] {
        let plain = with_blocks(spec, placement, (0, None, 0));
        let blocks = with_blocks(spec, placement, (64, Some(40), 10));
        for (a, b) in plain.iter().zip(&blocks) {
            assert_eq!((a.walks, a.walk_refs), (b.walks, b.walk_refs));
            assert_eq!(a.host_block_misses, 0);
            assert_eq!(b.walk_cycles, a.walk_cycles + 40 * b.host_block_misses);
            assert_eq!(b.cycles, a.cycles + 40 * b.host_block_misses);
        }
        let (misses, walks) = (blocks[0].host_block_misses, blocks[0].walks);
        match placement {
            FramePlacement::Scattered => assert!(misses > walks * 9 / 10, "{misses} of {walks}"),
            FramePlacement::FirstTouch => assert!(misses <= 64, "{misses} of {walks}"),
        }
        // 2M pages are whole blocks: 40 of them, held.
        assert!(blocks[1].host_block_misses <= 64, "{blocks:?}");
    }
    // Independent loads (a stride) overlap a walk's wait like its reads; besides, the
    // walks' misses take the host's block translations one at a time for the interval
    // each, which binds only a loop faster than that: one of 2 cycles a miss changes
    // nothing; one of 40 (the most, the miss's own) holds up the stride where its walks
    // come closer than that, by less than 40 a miss (`overlap`'s tests have the exact
    // figures). Nothing of it is charged to the walks.
    let spec = "stride:heap=16M,every=1,iters=16,align=2M";
    let stride = |interval: u32| {
        zen4_costs(spec, |c| {
            c.frames.placement = FramePlacement::Scattered;
            c.overlap.as_mut().unwrap().walks = pagelab_cache::WalkClock::Additive;
            let n = c.nested.as_mut().unwrap();
            (n.block_entries, n.block_miss, n.block_interval) = (64, Some(40), interval);
        })
    };
    let (free, quick, slow) = (stride(0), stride(2), stride(40));
    let misses = slow[0].host_block_misses;
    assert!(misses > slow[0].walks / 2, "{slow:?}");
    assert_eq!(misses, free[0].host_block_misses);
    assert_eq!(quick[0].cycles, free[0].cycles);
    let added = slow[0].cycles - free[0].cycles;
    assert!(
        added > misses && added < 40 * misses,
        "{added} cycles more for {misses} misses"
    );
    assert_eq!(slow[0].walk_cycles, free[0].walk_cycles);
}

#[test]
fn the_hosts_blocks_held_in_the_tlb_push_the_guests_pages_out() {
    // Held in the guest's TLB (`block_entries = 0`), the blocks a chase misses are paid in
    // full, each: what the TLB holds does not depend on the cycles, so 80 a miss costs 40 a
    // miss more than 40 does.
    let spec = "chase:nodes=20000,node=4096,steps=30000,align=2M";
    let scattered = FramePlacement::Scattered;
    let (a, b) = (
        with_blocks(spec, scattered, (0, Some(40), 0)),
        with_blocks(spec, scattered, (0, Some(80), 0)),
    );
    for (a, b) in a.iter().zip(&b) {
        assert_eq!(
            (a.walks, a.host_block_misses),
            (b.walks, b.host_block_misses)
        );
        assert_eq!(b.cycles, a.cycles + 40 * a.host_block_misses);
    }
    assert!(a[0].host_block_misses > a[0].walks / 2, "{a:?}");
    // A stride over 11M of 4K pages (2816: 22 a set of the L2 D-TLB's 24 ways) fits the
    // TLB, and once warm walks little, whatever its frames, where the blocks are held
    // apart. Held in the TLB, each walk over frames scattered over 24G brings its data's
    // block into the same sets, which pushes the guest's pages out: it walks far more.
    // Over frames in few blocks (first touch) those stay, and it walks as before.
    let spec = "stride:heap=11M,every=1,iters=16,align=2M";
    let walks = |placement, blocks| with_blocks(spec, placement, blocks)[0].walks;
    let plain = walks(scattered, (0, None, 0));
    assert_eq!(walks(scattered, (64, Some(40), 0)), plain);
    let compact = walks(FramePlacement::FirstTouch, (0, Some(40), 0));
    assert!(compact < plain + plain / 10, "{compact} against {plain}");
    let pushed = walks(scattered, (0, Some(40), 0));
    assert!(pushed > 3 * plain, "{pushed} against {plain}");
    // At no cycles of their own (`block_miss = 0`, session 54) they take the same entries.
    let free = with_blocks(spec, scattered, (0, Some(0), 0));
    assert_eq!(free[0].walks, pushed);
    let paid = with_blocks(spec, scattered, (0, Some(40), 0));
    assert!(free[0].host_block_misses > 0, "{free:?}");
    assert_eq!(
        free[0].walk_cycles + 40 * free[0].host_block_misses,
        paid[0].walk_cycles,
        "{free:?} {paid:?}"
    );
}
