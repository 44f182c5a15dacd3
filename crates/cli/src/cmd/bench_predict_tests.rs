//! Tests of `bench_predict.rs` (a file of their own, to keep it short).

use super::*;
use pagelab_lab::native::{expand, Scale};

fn one(text: &str) -> KernelSpec {
    expand(text, Scale::Full).unwrap().swap_remove(0)
}

#[test]
fn each_kernel_maps_to_the_model_workload_of_its_parameters() {
    // 256 accesses a pass: 256 passes make the warm 65536 accesses.
    let p = model_pair(&one("stride:heap=16M,every=16,iters=7")).unwrap();
    assert_eq!(
        p.small,
        "stride:heap=16M,page=4K,line=64,every=16,iters=256,align=2M"
    );
    assert_eq!(
        p.large,
        "stride:heap=16M,page=4K,line=64,every=16,iters=512,align=2M"
    );
    assert_eq!(p.ops, 256 * 256);
    // 16384 accesses a pass: the warm passes decide.
    let p = model_pair(&one("stride:heap=64M,iters=7")).unwrap();
    assert!(p.small.contains(",iters=8,") && p.large.contains(",iters=16,"));
    assert_eq!(p.ops, 8 * 16384);
    let p = model_pair(&one("gups:table=8M,updates=1000,seed=3")).unwrap();
    assert_eq!(p.large, "gups:table=8M,updates=1000,seed=3,align=2M");
    assert_eq!((p.small.contains("updates=500,"), p.ops), (true, 500));
    let p = model_pair(&one("chase:nodes=100,node=128,steps=11")).unwrap();
    assert_eq!(p.small, "chase:nodes=100,node=128,steps=5,seed=1,align=2M");
    assert_eq!(p.ops, 6);
    assert_eq!(model_pair(&one("stream:n=1000")).unwrap().ops, 4000);
    assert_eq!(model_pair(&one("fault:size=4M")), None);
    assert!(goal_holds(&one("stride:heap=16M,every=1")));
    assert!(!goal_holds(&one("stride:heap=8M,every=1")));
    assert!(!goal_holds(&one("stream")));
}

#[test]
fn a_strides_steady_state_is_taken_after_its_warm_passes() {
    let (cfg, cost) = model_of(&[vec![PageSize::K4]], "zen4", Some("nested")).unwrap();
    // A small heap: each pass two accesses, which the initialisation's misses hid
    // between 3 and 6 passes (0 cycles); warm, the loop's own instructions at least
    // (6 at zen4's 0.5 cycles).
    let pair = model_pair(&one("stride:heap=128K,every=16")).unwrap();
    let small = steady_state(&cfg, &cost, &pair, "small heap").unwrap();
    assert!(small[0] >= 3.0, "{small:?}");
    // A heap larger than the L2 D-TLB, which replaces at random: the pair's cycles an
    // access are those of later passes, not of the passes that fill the TLB.
    let pair = model_pair(&one("stride:heap=16M,every=1")).unwrap();
    let warm = steady_state(&cfg, &cost, &pair, "warm").unwrap()[0];
    let later = ModelPair {
        small: pair.small.replace(",iters=16,", ",iters=32,"),
        large: pair.large.replace(",iters=32,", ",iters=64,"),
        ops: 2 * pair.ops,
    };
    assert_ne!(later.small, pair.small);
    let later = steady_state(&cfg, &cost, &later, "later").unwrap()[0];
    assert!((warm / later - 1.0).abs() < 0.02, "{warm} against {later}");
}

#[test]
fn a_kernels_frames_are_the_medians_of_its_4k_runs() {
    use pagelab_report::{LabConfig, Measurement};
    let run = |n: Option<f64>, span: f64| Measurement {
        metrics: n
            .map(|n| {
                [
                    ("frame_neighbours".into(), n),
                    ("frame_span_bytes".into(), span),
                ]
            })
            .into_iter()
            .flatten()
            .collect(),
        ..Default::default()
    };
    let pooled = |blocks: f64| {
        let mut m = run(Some(0.0), 2e10);
        m.metrics.insert("pool_blocks".into(), blocks);
        m
    };
    let counted = |blocks: f64| {
        let mut m = run(Some(0.3), 2e10);
        m.metrics.insert("frame_blocks".into(), blocks);
        m
    };
    let config = |subject: &str, pages: &[PageSize], runs| LabConfig {
        subject: subject.into(),
        pages: pages.to_vec(),
        runs,
        ..Default::default()
    };
    let (k4, m2) = (PageSize::K4, PageSize::M2);
    let result = LabResult {
        configs: vec![
            config(
                "stride:a",
                &[k4],
                vec![
                    run(Some(0.9), 4e9),
                    run(Some(0.0), 2e10),
                    run(Some(0.1), 3e10),
                ],
            ),
            // 2M runs' frames are not the 4K pages'; runs without frames (not root) give
            // none.
            config("stride:a", &[m2], vec![run(Some(1.0), 1.0)]),
            config("gups:b", &[k4], vec![run(None, 0.0)]),
            // Drawn from a pool: spread over the blocks the pool came back in.
            config(
                "chase:c",
                &[k4],
                [4565.0, 4100.0, 4200.0].map(pooled).to_vec(),
            ),
            // Left to the allocator, with their blocks counted: over those blocks.
            config(
                "stream:d",
                &[k4],
                [16.0, 2700.0, 40.0].map(counted).to_vec(),
            ),
        ],
        ..Default::default()
    };
    let f = kernel_frames(&result);
    assert_eq!(f.len(), 3, "{f:?}");
    assert_eq!(
        f["stream:d"],
        KernelFrames {
            neighbours: 0.3,
            span: 40 << 21
        }
    );
    assert_eq!(
        f["chase:c"],
        KernelFrames {
            neighbours: 0.0,
            span: 4200 << 21
        }
    );
    assert_eq!(
        f["stride:a"],
        KernelFrames {
            neighbours: 0.1,
            span: 20_000_000_000
        }
    );
    // Placed as they lay: scattered over whole 2M blocks, within the machine's memory.
    let (cfg, cost) = model_of(&[vec![k4]], "zen4", Some("nested")).unwrap();
    let placed = with_frames(&cost, &f["stride:a"]);
    let frames = placed.machine.cost.frames;
    assert_eq!(frames.placement, pagelab_cache::FramePlacement::Scattered);
    assert_eq!(frames.neighbours, Some(0.1));
    assert_eq!(frames.span.unwrap() % (2 << 20), 0);
    assert!(frames.span.unwrap() >= 20_000_000_000);
    let wide = KernelFrames {
        neighbours: 2.0,
        span: 1 << 50,
    };
    let capped = with_frames(&cost, &wide).machine.cost.frames;
    assert_eq!(
        (capped.span, capped.neighbours),
        (Some(24 << 30), Some(1.0))
    );
    // And the model runs on it: a scattered heap costs a chase's 4K walks more.
    let pair = model_pair(&one("chase:nodes=16384,node=4096,steps=40000")).unwrap();
    let first = steady_state(&cfg, &cost, &pair, "first touch").unwrap();
    let spread = steady_state(&cfg, &placed, &pair, "scattered").unwrap();
    assert!(spread[0] > first[0], "{spread:?} against {first:?}");
}

#[test]
fn a_pooled_kernel_is_modelled_with_its_pool_not_its_measured_frames() {
    let measured = |subject: &str| {
        BTreeMap::from([(
            subject.to_string(),
            KernelFrames {
                neighbours: 0.8,
                span: 20 << 30,
            },
        )])
    };
    let pooled = one("stride:heap=16M,every=1,iters=4,pool=8G");
    // Without runs that recorded frames, the pool as asked; with them, as measured.
    assert_eq!(
        frames_for(&pooled, &BTreeMap::new()),
        Some((
            KernelFrames {
                neighbours: 0.0,
                span: 8 << 30
            },
            true
        ))
    );
    let m = measured(&pooled.to_string());
    assert_eq!(
        frames_for(&pooled, &m),
        Some((m[&pooled.to_string()], true))
    );
    let plain = one("stride:heap=16M,every=1,iters=4");
    let m = measured(&plain.to_string());
    assert_eq!(frames_for(&plain, &m), Some((m[&plain.to_string()], false)));
    assert_eq!(frames_for(&plain, &BTreeMap::new()), None);
    // The model's own pair of runs does not carry the pool: the frames do.
    let pair = model_pair(&pooled).unwrap();
    assert!(!pair.small.contains("pool"), "{}", pair.small);
}
