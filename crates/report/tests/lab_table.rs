//! Snapshots of the lab's tables (`pagelab run`, `bench`, `validate`), made from crafted
//! results: what a user reads, fixed, so a change to it shows in review.

use pagelab_core::PageSize;
use pagelab_report::lab_table::{
    bench_tables, run_failures, run_table, validate_table, BenchKernel,
};
use pagelab_report::{ExitInfo, LabConfig, LabResult, Measurement, Summary};
use std::collections::BTreeMap;

fn size(s: &str) -> PageSize {
    s.parse().unwrap()
}

/// A configuration whose summary holds each `(key, values over runs)`.
fn config(subject: &str, label: &str, runs: usize, figures: &[(&str, &[f64])]) -> LabConfig {
    let mut c = LabConfig {
        subject: subject.into(),
        label: label.into(),
        pages: vec![if label == "4K" {
            PageSize::K4
        } else {
            size("64K")
        }],
        thp: "always".into(),
        runs: vec![
            Measurement {
                exit: ExitInfo {
                    code: Some(0),
                    signal: None
                },
                ..Default::default()
            };
            runs
        ],
        ..Default::default()
    };
    for (key, values) in figures {
        c.summary
            .insert(key.to_string(), Summary::of(values).unwrap());
    }
    c
}

fn run_result() -> LabResult {
    let mut r = LabResult::new("run", Default::default());
    let mut base = config(
        "./prog",
        "4K",
        3,
        &[
            ("wall_seconds", &[4.0, 6.0, 5.0]),
            ("user_seconds", &[3.9, 5.8, 4.9]),
            ("system_seconds", &[0.1, 0.2, 0.1]),
            ("faults", &[2050.0, 2000.0, 2100.0]),
            ("peak_rss_bytes", &[8.5e6, 8.5e6, 8.5e6]),
        ],
    );
    base.speedup_vs_4k = Some(1.0);
    let mut large = config(
        "./prog",
        "64K+2M",
        3,
        &[
            ("wall_seconds", &[3.0, 1.0, 2.0]),
            ("user_seconds", &[2.9, 0.9, 1.9]),
            ("system_seconds", &[0.01, 0.02, 0.01]),
            ("faults", &[30.0, 40.0, 20.0]),
            ("faults_by_size/64K", &[100.0, 200.0, 120.0]),
            ("faults_by_size/2M", &[3.0, 4.0, 3.0]),
            ("fallbacks_by_size/2M", &[0.0, 1.0, 0.0]),
            ("peak_rss_bytes", &[10.0 * 1048576.0; 3]),
        ],
    );
    large.speedup_vs_4k = Some(2.5);
    large.runs[1].hw_unavailable = Some("cycles: perf_event_open failed: no counters".into());
    r.configs = vec![base, large];
    r
}

#[test]
fn run_table_with_repeats_and_speedups() {
    insta::assert_snapshot!(run_table(&run_result()));
}

#[test]
fn run_table_with_a_hugetlb_pool_and_failed_runs() {
    let mut r = LabResult::new("run", Default::default());
    let mut c = config(
        "sh -c 'exit 7'",
        "2M hugetlb",
        2,
        &[
            ("wall_seconds", &[0.5, 0.5]),
            ("metrics/hugetlb_peak_in_use/2M", &[12.0, 13.0]),
            ("metrics/shim_processes", &[1.0, 1.0]),
            ("metrics/shim_hugetlb_mappings", &[2.0, 2.0]),
            ("metrics/shim_hugetlb_fallbacks", &[0.0, 0.0]),
        ],
    );
    c.hugetlb = BTreeMap::from([("2M".to_string(), 512)]);
    c.runs[0].exit = ExitInfo {
        code: Some(7),
        signal: None,
    };
    c.runs[1].exit = ExitInfo {
        code: None,
        signal: Some(9),
    };
    r.configs = vec![c];
    let text = run_table(&r);
    assert!(text.ends_with(&format!("{}\n", run_failures(&r).unwrap())));
    insta::assert_snapshot!(text);
    assert_eq!(run_failures(&run_result()), None);
}

#[test]
fn bench_tables_give_speedups_in_each_headlines_direction() {
    let mut r = LabResult::new("bench", Default::default());
    let stride = "stride:heap=4M,every=16";
    let stream = "stream:n=1000";
    let gups = "gups:table=8M";
    for (label, ns, per_elem, updates) in [("4K", 8.0, 3.0, 2.0e6), ("2M", 2.0, 2.0, 3.0e6)] {
        let mut s = config(stride, label, 1, &[("metrics/ns_per_access", &[ns])]);
        s.pages = vec![size(label)];
        r.configs.push(s);
        let allocs: &[f64] = if label == "2M" { &[16.0] } else { &[0.0] };
        r.configs.push(config(
            stream,
            label,
            1,
            &[
                ("metrics/ns_per_element", &[per_elem]),
                ("metrics/first_touch_ns_per_mb", &[150_000.0]),
                ("faults", &[1234.0]),
                ("faults_by_size/2M", allocs),
            ],
        ));
        r.configs.push(config(
            gups,
            label,
            1,
            &[("metrics/updates_per_second", &[updates])],
        ));
    }
    let kernels = [
        BenchKernel::Other {
            subject: stream.into(),
            headline: "ns_per_element".into(),
            larger_is_better: false,
        },
        BenchKernel::Stride {
            subject: stride.into(),
            heap: 4 << 20,
            every: 16,
        },
        BenchKernel::Other {
            subject: gups.into(),
            headline: "updates_per_second".into(),
            larger_is_better: true,
        },
    ];
    let text = bench_tables(&r, &kernels);
    // 8 ns over 2 ns; 3 ns over 2 ns; 3M updates/s over 2M.
    assert!(text.contains("8.00  2.00 (4.00x)"), "{text}");
    insta::assert_snapshot!(text);
}

/// Runs whose frames fell in very different numbers of 2M blocks are named after the
/// tables, with the range; runs within a factor of 4, or all under 64 blocks, are not.
#[test]
fn bench_tables_name_4k_runs_whose_frames_spread_over_blocks() {
    let mut r = LabResult::new("bench", Default::default());
    let with_blocks = |subject: &str, label: &str, blocks: &[f64]| {
        let mut c = config(
            subject,
            label,
            blocks.len(),
            &[("metrics/ns_per_op", &[1.0])],
        );
        for (run, &b) in c.runs.iter_mut().zip(blocks) {
            run.metrics.insert("frame_blocks".into(), b);
        }
        c
    };
    r.configs
        .push(with_blocks("gups:a", "4K", &[16.0, 2673.0, 900.0]));
    r.configs.push(with_blocks("gups:a", "2M", &[8.0, 4096.0]));
    r.configs
        .push(with_blocks("gups:b", "4K", &[600.0, 2000.0]));
    r.configs.push(with_blocks("gups:c", "4K", &[2.0, 40.0]));
    let kernels: Vec<BenchKernel> = ["gups:a", "gups:b", "gups:c"]
        .map(|s| BenchKernel::Other {
            subject: s.into(),
            headline: "ns_per_op".into(),
            larger_is_better: false,
        })
        .to_vec();
    let text = bench_tables(&r, &kernels);
    let note = text
        .split("very different numbers of 2M blocks")
        .nth(1)
        .expect(&text);
    assert!(note.contains("  gups:a: 16 to 2673\n"), "{text}");
    assert!(
        !note.contains("gups:b") && !note.contains("gups:c"),
        "{text}"
    );
    assert!(note.contains("`pool=SIZE`"), "{text}");
    // No frames recorded (not root): no note.
    let plain = LabResult {
        configs: vec![config("gups:a", "4K", 2, &[("metrics/ns_per_op", &[1.0])])],
        ..LabResult::new("bench", Default::default())
    };
    assert!(!bench_tables(&plain, &kernels[..1]).contains("2M blocks"));
}

#[test]
fn validate_table_names_each_disagreement() {
    let mut r = LabResult::new("validate", Default::default());
    for (label, kernel_2m, differ) in [("4K", 0, false), ("2M", 2, true)] {
        let m = Measurement {
            faults: 1025,
            faults_by_size: BTreeMap::from([("2M".to_string(), kernel_2m)]),
            ..Default::default()
        };
        let p = Measurement {
            faults: if differ { 1024 } else { 1025 },
            faults_by_size: BTreeMap::from([("2M".to_string(), kernel_2m.min(1))]),
            ..Default::default()
        };
        r.configs.push(LabConfig {
            subject: "stride:heap=4M,iters=1".into(),
            label: label.into(),
            runs: vec![m],
            predicted: Some(p),
            disagreements: if differ {
                vec![
                    "faults: model 1024, kernel 1025".into(),
                    "2M anon_fault_alloc: model 1, kernel 2".into(),
                ]
            } else {
                Vec::new()
            },
            ..Default::default()
        });
    }
    insta::assert_snapshot!(validate_table(&r));
}
