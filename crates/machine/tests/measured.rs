//! `pagelab machines --measure`'s analysis: a chase's curve into a machine's caches.

use pagelab_cache::overlap::{OverlapSpec, WalkClock, MAX_IN_FLIGHT, MAX_WALK_INTERVAL};
use pagelab_core::PageSize;
use pagelab_machine::measured::{
    analyse, exact_size, machine_toml, overlap_spec, segment, Found, LatencyPoint, NominalCache,
};
use pagelab_machine::Machine;

const K: u64 = 1 << 10;
const M: u64 = 1 << 20;

fn emr_caches() -> Vec<NominalCache> {
    vec![
        NominalCache {
            level: 1,
            size: 48 * K,
            ways: 12,
            line: 64,
        },
        NominalCache {
            level: 2,
            size: 2 * M,
            ways: 16,
            line: 64,
        },
        NominalCache {
            level: 3,
            size: 300 * M,
            ways: 20,
            line: 64,
        },
    ]
}

/// Footprints from 8K to 512M, four a doubling.
fn footprints() -> Vec<u64> {
    let mut v = Vec::new();
    let mut b = 8.0 * K as f64;
    while b <= 512.0 * M as f64 {
        v.push((b as u64).next_multiple_of(4096));
        b *= 2f64.powf(0.25);
    }
    v.dedup();
    v
}

/// The time of a chase over `bytes` on an ideal LRU hierarchy: a level holds the whole
/// cycle up to its size, then nothing; a small deterministic jitter stands in for noise.
fn ideal(levels: &[(u64, f64)], memory: f64) -> Vec<LatencyPoint> {
    footprints()
        .into_iter()
        .enumerate()
        .map(|(i, bytes)| {
            let ns = levels.iter().find(|l| bytes <= l.0).map_or(memory, |l| l.1);
            let jitter = 1.0 + 0.03 * (((i * 7919) % 11) as f64 / 10.0 - 0.5);
            LatencyPoint {
                bytes,
                ns: ns * jitter,
            }
        })
        .collect()
}

#[test]
fn segment_finds_the_steps_of_a_step_function() {
    let ys = [
        1.0, 1.0, 1.1, 5.0, 5.0, 4.9, 5.1, 9.0, 9.0, 20.0, 20.0, 20.5,
    ];
    assert_eq!(segment(&ys, 4), vec![0, 3, 7, 9]);
    assert_eq!(segment(&ys, 1), vec![0]);
    assert_eq!(segment(&[], 3), Vec::<usize>::new());
    // More stretches than points: one point each.
    assert_eq!(segment(&[1.0, 2.0], 5), vec![0, 1]);
}

#[test]
fn a_guest_with_a_part_of_the_l3_gets_that_part_and_the_private_levels_keep_their_size() {
    // As this project's Emerald Rapids guest measured (docs/cost.md): L3 ends near 3.5M.
    let pts = ideal(&[(48 * K, 2.4), (2 * M, 8.0), (3584 * K, 42.0)], 156.0);
    let h = analyse(&pts, &emr_caches()).unwrap();
    assert_eq!(h.levels[0].size, 48 * K);
    assert_eq!(h.levels[1].size, 2 * M);
    let l3 = h.levels[2].size as f64;
    assert!((3.0 * M as f64..4.3 * M as f64).contains(&l3), "L3 {l3}");
    assert_eq!(
        h.levels[2].size % (20 * 64),
        0,
        "whole sets of the nominal ways"
    );
    for (got, want) in [
        (h.levels[0].ns, 2.4),
        (h.levels[1].ns, 8.0),
        (h.levels[2].ns, 42.0),
        (h.memory_ns, 156.0),
    ] {
        assert!((got / want - 1.0).abs() < 0.03, "{got} against {want}");
    }
}

#[test]
fn a_core_with_the_whole_l3_keeps_its_nominal_size() {
    let caches = vec![
        NominalCache {
            level: 1,
            size: 32 * K,
            ways: 8,
            line: 64,
        },
        NominalCache {
            level: 2,
            size: M,
            ways: 8,
            line: 64,
        },
        NominalCache {
            level: 3,
            size: 32 * M,
            ways: 16,
            line: 64,
        },
    ];
    let pts = ideal(&[(32 * K, 1.0), (M, 3.5), (30 * M, 12.0)], 80.0);
    let h = analyse(&pts, &caches).unwrap();
    let sizes: Vec<u64> = h.levels.iter().map(|l| l.size).collect();
    assert_eq!(sizes, vec![32 * K, M, 32 * M]);
}

#[test]
fn the_machine_file_keeps_the_base_and_takes_the_measured_caches_at_the_l1s_clock() {
    let pts = ideal(&[(48 * K, 2.5), (2 * M, 8.0), (3584 * K, 42.0)], 150.0);
    let h = analyse(&pts, &emr_caches()).unwrap();
    let base = pagelab_machine::preset_text("emeraldrapids").unwrap();
    let text = machine_toml(
        "emeraldrapids",
        base,
        &h,
        5,
        Found {
            frames: Some(pagelab_cache::FramesSpec {
                placement: pagelab_cache::FramePlacement::Scattered,
                span: Some(20 << 30),
                neighbours: Some(0.48219),
            }),
            walk: Some(28),
            overlap: Some(&OverlapSpec {
                miss_buffers: 13,
                walkers: 3,
                walk_interval: 7,
                walks: WalkClock::Additive,
            }),
            host_page: Some(PageSize::K4),
            blocks: Some(pagelab_machine::blocks::BlocksFit {
                miss: 40,
                interval: 24,
                extra: 30.0,
                misses: 0.7,
                chase_miss: None,
            }),
        },
        &["measured on a test".into()],
    )
    .unwrap();
    assert!(text.starts_with("# measured on a test\n"));
    let m = Machine::from_toml_str(&text, "measured").unwrap();
    let b = pagelab_machine::preset("emeraldrapids").unwrap();
    assert_eq!(m.name, "emeraldrapids-measured");
    assert_eq!(m.tlb, b.tlb);
    let c = &m.cost.as_ref().unwrap().caches;
    // 5 cycles in 2.5 ns: 2 GHz (the curve's 3% jitter moves each by a cycle or two).
    assert_eq!(c.l1d.latency, 5);
    let near =
        |got: u32, want: u32| assert!(got.abs_diff(want) <= want / 25 + 1, "{got} against {want}");
    near(c.l2.as_ref().unwrap().latency, 16);
    near(c.l3.as_ref().unwrap().latency, 84);
    near(c.memory_latency, 300);
    assert_eq!(c.l3.as_ref().unwrap().size, h.levels[2].size);
    assert_eq!(c.l3.as_ref().unwrap().ways, 20);
    // The L3's share is hashed over its sets; the core's own levels stay by address.
    let index = |l: &Option<pagelab_cache::CacheSpec>| l.as_ref().unwrap().index;
    assert_eq!(index(&c.l3), pagelab_cache::SetIndex::Hashed);
    assert_eq!(index(&c.l2), pagelab_cache::SetIndex::Address);
    assert_eq!(c.l1d.index, pagelab_cache::SetIndex::Address);
    let bc = &b.cost.as_ref().unwrap();
    let mc = m.cost.as_ref().unwrap();
    assert_eq!(mc.walk_caches, bc.walk_caches);
    // The nested TLB and walk caches are the base's; the host page is the one found.
    let (mn, bn) = (mc.nested.as_ref().unwrap(), bc.nested.as_ref().unwrap());
    assert_eq!(
        (mn.ntlb_entries, &mn.walk_cache_entries),
        (bn.ntlb_entries, &bn.walk_cache_entries)
    );
    assert_eq!((mn.host_page, bn.host_page), (Some(PageSize::K4), None));
    // The block translations fitted, held in the TLB, where the base had none.
    assert_eq!(
        (mn.block_entries, mn.block_miss, mn.block_interval),
        (0, Some(40), 24)
    );
    assert_eq!(bn.block_miss, None);
    assert_eq!(format!("{:?}", mc.frames.placement), "Scattered");
    // The span written as a size, the share to three places, the walk into `[costs]`.
    assert!(text.contains("span = \"20G\""), "{text}");
    assert_eq!(
        (mc.frames.span, mc.frames.neighbours),
        (Some(20 << 30), Some(0.482))
    );
    assert_eq!((mc.costs.walk, bc.costs.walk), (28, 0));
    let o = mc.overlap.as_ref().unwrap();
    assert_eq!((o.miss_buffers, o.walkers, o.walk_interval), (13, 3, 7));
    assert_eq!(o.walks, WalkClock::Additive);
    assert!(text.contains("walks = \"additive\""), "{text}");
    // Without a measured overlap the base's stays.
    let kept = machine_toml("emeraldrapids", base, &h, 5, Found::default(), &[]).unwrap();
    let kept = Machine::from_toml_str(&kept, "kept").unwrap();
    let kc = kept.cost.unwrap();
    assert_eq!(
        (kc.overlap, kc.nested, kc.frames, kc.costs.walk),
        (
            bc.overlap.clone(),
            bc.nested.clone(),
            bc.frames,
            bc.costs.walk
        )
    );
}

#[test]
fn the_overlap_is_the_measured_figures_rounded_within_the_pools_bounds() {
    let base = OverlapSpec {
        miss_buffers: 16,
        walkers: 4,
        walk_interval: 0,
        walks: WalkClock::Pooled,
    };
    let o = overlap_spec(12.6, Some(2.4), Some(7.26), Some(&base)).unwrap();
    assert_eq!((o.miss_buffers, o.walkers, o.walk_interval), (13, 2, 7));
    // Measured walkers are what a walk adds to a load: the clock adds their share.
    assert_eq!(o.walks, WalkClock::Additive);
    // Walks not measured keep the base's walkers, or without a base follow the misses; an
    // interval not measured is the base's, or none.
    let base = OverlapSpec {
        walk_interval: 5,
        ..base
    };
    let o = overlap_spec(12.6, None, None, Some(&base)).unwrap();
    assert_eq!((o.miss_buffers, o.walkers, o.walk_interval), (13, 4, 5));
    assert_eq!(o.walks, WalkClock::Pooled);
    let o = overlap_spec(12.6, Some(f64::NAN), Some(f64::NAN), None).unwrap();
    assert_eq!((o.miss_buffers, o.walkers, o.walk_interval), (13, 13, 0));
    assert_eq!(o.walks, WalkClock::Pooled);
    // A dependent load faster than independent ones still has one miss in flight; an
    // absurd figure is held to the most a machine file may give.
    let o = overlap_spec(0.3, Some(1e9), Some(1e9), None).unwrap();
    assert_eq!(
        (o.miss_buffers, o.walkers, o.walk_interval),
        (1, MAX_IN_FLIGHT, MAX_WALK_INTERVAL)
    );
    assert!(overlap_spec(f64::INFINITY, None, None, None)
        .unwrap_err()
        .contains("not a measurement"));
    assert!(overlap_spec(-1.0, None, None, None).is_err());
}

#[test]
fn bad_curves_are_refused_saying_why() {
    let caches = emr_caches();
    let few: Vec<LatencyPoint> = (1..5)
        .map(|i| LatencyPoint {
            bytes: i * M,
            ns: 10.0,
        })
        .collect();
    let e = analyse(&few, &caches).unwrap_err();
    assert!(e.contains("4 footprints cannot show 3 cache levels"), "{e}");
    let mut pts = ideal(&[(48 * K, 2.4), (2 * M, 8.0)], 100.0);
    pts[5].ns = f64::NAN;
    assert!(analyse(&pts, &caches).unwrap_err().contains("footprint 5"));
    let mut pts = ideal(&[(48 * K, 2.4), (2 * M, 8.0)], 100.0);
    pts.swap(3, 4);
    assert!(analyse(&pts, &caches).unwrap_err().contains("not larger"));
    assert!(analyse(&pts, &[]).unwrap_err().contains("no cache level"));
}

#[test]
fn sizes_are_written_exactly() {
    assert_eq!(exact_size(3840 * K), "3840K");
    assert_eq!(exact_size(2 * M), "2M");
    assert_eq!(exact_size(1280), "1280");
    assert_eq!(exact_size(4 << 30), "4G");
}
