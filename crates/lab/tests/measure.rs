//! The lab's arithmetic through the fake measurer, without root: what `pagelab run` makes of
//! the runs it measures (medians, spreads, per-size deltas, speed-ups, failures, the exit
//! status), on a fake kernel tree whose knobs must come back.

#[path = "common/tree.rs"]
mod tree;

use pagelab_core::PageSize;
use pagelab_lab::measure::fake::{FakeMeasurer, FakeRun};
use pagelab_lab::run::{self, RunRequest};
use pagelab_lab::sysfs::{Knob, Sysfs, ThpMode};
use pagelab_report::{LabConfig, LabResult};
use std::time::Duration;

const ALLOC_64K: &str = "hugepages-64kB/anon_fault_alloc";
const FALLBACK_64K: &str = "hugepages-64kB/anon_fault_fallback";

fn request(compare: &[&str], repeat: u32) -> RunRequest {
    RunRequest {
        pages: None,
        compare: compare
            .iter()
            .map(|c| pagelab_core::parse_page_sizes(c).unwrap())
            .collect(),
        pools: Vec::new(),
        mode: ThpMode::Always,
        repeat,
        program: vec!["prog".into(), "arg".into()],
        shim: false,
    }
}

fn knobs(sysfs: &Sysfs) -> Vec<String> {
    let mut k = vec![Knob::ThpEnabled];
    k.extend(sysfs.thp_sizes().into_iter().map(Knob::SizeEnabled));
    k.iter().map(|k| sysfs.read(k).unwrap()).collect()
}

/// `pagelab run` on the fake tree with `runs` scripted.
fn run_fake(req: &RunRequest, runs: Vec<FakeRun>) -> (LabResult, FakeMeasurer) {
    let dir = tempfile::tempdir().unwrap();
    let sysfs = tree::fake_tree(dir.path());
    let before = knobs(&sysfs);
    let mut m = FakeMeasurer::new();
    for r in runs {
        m.push(r);
    }
    let configs = run::plan(req, &sysfs);
    let result = run::run(&sysfs, req, &configs, &req.program, &mut m, &mut |_| {}).unwrap();
    assert_eq!(m.remaining(), 0, "every scripted run ran");
    assert_eq!(knobs(&sysfs), before, "the fake tree's knobs are back");
    (result, m)
}

fn config<'a>(r: &'a LabResult, label: &str) -> &'a LabConfig {
    r.configs.iter().find(|c| c.label == label).unwrap()
}

/// Checks a summary's median, minimum and maximum.
fn assert_summary(c: &LabConfig, key: &str, median: f64, min: f64, max: f64) {
    let s = c
        .summary
        .get(key)
        .unwrap_or_else(|| panic!("no {key} in {:?}", c.summary.keys()));
    assert_eq!(
        (s.median, s.min, s.max),
        (median, min, max),
        "{} {key}: median, min, max",
        c.label
    );
}

fn secs(s: f64) -> Duration {
    Duration::from_secs_f64(s)
}

/// A baseline and a 64K configuration, three runs each, with the kernel's 64K counters moving
/// during the runs and (noise of other processes) between them.
fn baseline_and_64k() -> (LabResult, FakeMeasurer) {
    let req = request(&["64K"], 3);
    let runs = vec![
        FakeRun::exits(0).wall(secs(4.0)).faults(2000),
        FakeRun::exits(0).wall(secs(6.0)).faults(2100),
        FakeRun::exits(0).wall(secs(5.0)).faults(2050),
        FakeRun::exits(0)
            .wall(secs(3.0))
            .faults(30)
            .counter(ALLOC_64K, 100)
            .then(ALLOC_64K, 1000),
        FakeRun::exits(0)
            .wall(secs(1.0))
            .faults(40)
            .counter(ALLOC_64K, 200)
            .counter(FALLBACK_64K, 4)
            .then(ALLOC_64K, 1000),
        FakeRun::exits(0)
            .wall(secs(2.0))
            .faults(20)
            .counter(ALLOC_64K, 120),
    ];
    run_fake(&req, runs)
}

#[test]
fn medians_spreads_per_size_deltas_and_speedups() {
    let (r, m) = baseline_and_64k();
    let labels: Vec<&str> = r.configs.iter().map(|c| c.label.as_str()).collect();
    assert_eq!(labels, ["4K", "64K"]);
    assert_eq!(m.ran.len(), 6);
    assert!(m.ran.iter().all(|argv| argv == &["prog", "arg"]));
    let base = config(&r, "4K");
    assert_summary(base, "wall_seconds", 5.0, 4.0, 6.0);
    assert_eq!(base.summary["wall_seconds"].spread, 0.4, "(6-4)/5");
    assert_summary(base, "faults", 2050.0, 2000.0, 2100.0);
    assert!(base.runs.iter().all(|m| m.faults_by_size.is_empty()));
    let c = config(&r, "64K");
    assert_summary(c, "wall_seconds", 2.0, 1.0, 3.0);
    assert_eq!(c.summary["wall_seconds"].spread, 1.0, "(3-1)/2");
    // The run's own allocations, not the 1000 others made between runs.
    let allocs: Vec<u64> = c.runs.iter().map(|m| m.faults_by_size["64K"]).collect();
    assert_eq!(allocs, [100, 200, 120]);
    assert_summary(c, "faults_by_size/64K", 120.0, 100.0, 200.0);
    // A run without fallbacks counts 0 in the summary.
    assert_summary(c, "fallbacks_by_size/64K", 0.0, 0.0, 4.0);
    assert_eq!(c.runs[1].kernel_counters[FALLBACK_64K], 4);
    assert_eq!(base.speedup_vs_4k, Some(1.0));
    assert_eq!(c.speedup_vs_4k, Some(2.5), "5 s over 2 s");
    assert_eq!((r.failed_runs, r.interrupted_by), (0, None));
    assert_eq!(run::exit_code(&r), 0);
    assert_eq!(c.pages, [PageSize::from_bytes(65536).unwrap()]);
}

/// The checks above can fail: the mean (140) is not the median (120), and counting the
/// allocations made between runs would give other figures.
#[test]
#[should_panic(expected = "64K faults_by_size/64K: median, min, max")]
fn a_wrong_median_is_caught() {
    let (r, _) = baseline_and_64k();
    assert_summary(config(&r, "64K"), "faults_by_size/64K", 140.0, 100.0, 200.0);
}

#[test]
#[should_panic(expected = "64K faults_by_size/64K: median, min, max")]
fn a_delta_that_took_in_other_processes_is_caught() {
    let (r, _) = baseline_and_64k();
    assert_summary(
        config(&r, "64K"),
        "faults_by_size/64K",
        1120.0,
        100.0,
        1200.0,
    );
}

#[test]
fn failed_runs_are_counted_and_the_first_decides_the_exit() {
    let req = request(&[], 3);
    let runs = vec![FakeRun::exits(0), FakeRun::exits(7), FakeRun::killed(9)];
    let (r, _) = run_fake(&req, runs);
    assert_eq!(r.failed_runs, 2);
    assert_eq!(run::exit_code(&r), 7);
    let (r, _) = run_fake(
        &req,
        vec![FakeRun::killed(9), FakeRun::exits(3), FakeRun::exits(0)],
    );
    assert_eq!(run::exit_code(&r), 128 + 9);
    let mut interrupted = r.clone();
    interrupted.interrupted_by = Some(2);
    assert_eq!(
        run::exit_code(&interrupted),
        130,
        "an interrupt decides first"
    );
}

#[test]
fn the_default_configuration_is_every_thp_size_of_the_kernel() {
    let req = request(&[], 1);
    let (r, m) = run_fake(&req, vec![FakeRun::exits(0)]);
    assert_eq!(r.configs.len(), 1);
    assert_eq!(
        r.configs[0].label, "16K+32K+64K+128K+256K+512K+1M+2M",
        "{:?}",
        r.configs[0]
    );
    // Always mode needs no glibc tunable; no shim was asked for.
    assert!(m.envs[0].is_empty(), "{:?}", m.envs[0]);
    assert_eq!(r.configs[0].speedup_vs_4k, None, "no baseline ran");
}

/// `pagelab bench`'s loop through the fake: each child's report becomes the run's metrics,
/// summarized per (kernel, configuration), the runs in rounds of every configuration, the
/// baseline advised MADV_NOHUGEPAGE; a failing child is an error naming the kernel and
/// configuration.
#[test]
fn bench_summarizes_each_childs_report_and_names_a_failing_child() {
    use pagelab_lab::bench::{self, BenchRequest};
    let dir = tempfile::tempdir().unwrap();
    let sysfs = tree::fake_tree(dir.path());
    let specs =
        pagelab_lab::native::expand("stream:n=1000", pagelab_lab::native::Scale::Quick).unwrap();
    let req = BenchRequest {
        pages: vec![vec![PageSize::K4], vec![PageSize::M2]],
        mode: ThpMode::Madvise,
        repeat: 2,
        specs,
        child: vec!["pagelab".into(), "bench-child".into()],
    };
    let report = |ns: f64| {
        format!("{{\"spec\":\"s\",\"advice\":\"a\",\"metrics\":{{\"ns_per_element\":{ns}}}}}\n")
    };
    let mut m = FakeMeasurer::new();
    for ns in [3.0, 5.0, 2.0, 1.0] {
        m.push(FakeRun::exits(0).stdout(&report(ns)));
    }
    let session = pagelab_lab::session::KnobSession::begin(&sysfs).unwrap();
    let r = bench::run(&sysfs, &req, Some(session), &mut m, &mut |_| {}).unwrap();
    let medians: Vec<(String, f64)> = r
        .configs
        .iter()
        .map(|c| (c.label.clone(), c.summary["metrics/ns_per_element"].median))
        .collect();
    // The runs go in rounds, every configuration once a round: 4K gets the first and
    // third reports (3 and 2), 2M the second and fourth (5 and 1).
    assert_eq!(medians, [("4K".to_string(), 2.5), ("2M".to_string(), 3.0)]);
    assert!(r.configs.iter().all(|c| c.runs.len() == 2));
    let advice: Vec<&str> = m.ran.iter().map(|a| a[2].to_str().unwrap()).collect();
    assert_eq!(
        advice,
        [
            "--advice=nohugepage",
            "--advice=hugepage",
            "--advice=nohugepage",
            "--advice=hugepage"
        ]
    );
    let mut m = FakeMeasurer::new();
    m.push(FakeRun::exits(2));
    let e = bench::run(&sysfs, &req, None, &mut m, &mut |_| {}).unwrap_err();
    assert!(
        format!("{e:#}").contains("the benchmark child for `stream:n=1000")
            && format!("{e:#}").contains("under 4K failed (exit code Some(2)"),
        "{e:#}"
    );
}

/// More rounds of some kernels (`bench --predict --settle`) go after each configuration's
/// own runs, round by round, and the summaries and speed-ups are made again over them all.
#[test]
fn more_rounds_follow_each_configurations_own() {
    use pagelab_lab::bench::{self, BenchRequest};
    let dir = tempfile::tempdir().unwrap();
    let sysfs = tree::fake_tree(dir.path());
    let specs = pagelab_lab::native::expand("stream:n=1000", pagelab_lab::native::Scale::Quick)
        .unwrap()
        .into_iter()
        .chain(
            pagelab_lab::native::expand("gups:table=1M", pagelab_lab::native::Scale::Quick)
                .unwrap(),
        )
        .collect::<Vec<_>>();
    let report = |ns: f64| {
        format!("{{\"spec\":\"s\",\"advice\":\"a\",\"metrics\":{{\"ns_per_op\":{ns}}}}}\n")
    };
    let run = |specs: Vec<_>, repeat, ns: &[f64]| {
        let req = BenchRequest {
            pages: vec![vec![PageSize::K4], vec![PageSize::M2]],
            mode: ThpMode::Madvise,
            repeat,
            specs,
            child: vec!["pagelab".into(), "bench-child".into()],
        };
        let mut m = FakeMeasurer::new();
        for &v in ns {
            m.push(
                FakeRun::exits(0)
                    .stdout(&report(v))
                    .wall(std::time::Duration::from_secs_f64(v)),
            );
        }
        let session = pagelab_lab::session::KnobSession::begin(&sysfs).unwrap();
        bench::run(&sysfs, &req, Some(session), &mut m, &mut |_| {}).unwrap()
    };
    // One round of both kernels: stream 4K 4, gups 4K 8, stream 2M 2, gups 2M 8.
    let mut r = run(specs.clone(), 1, &[4.0, 8.0, 2.0, 8.0]);
    // Two more of gups alone: 4K 10 then 2M 5, 4K 12 then 2M 4.
    let more = run(specs[1..].to_vec(), 2, &[10.0, 5.0, 12.0, 4.0]);
    bench::append_rounds(&mut r, more);
    let runs = |subject: &str, label: &str| -> Vec<f64> {
        let c = r
            .configs
            .iter()
            .find(|c| c.subject == subject && c.label == label)
            .unwrap();
        c.runs.iter().map(|m| m.metrics["ns_per_op"]).collect()
    };
    let gups = specs[1].to_string();
    let stream = specs[0].to_string();
    assert_eq!(runs(&gups, "4K"), [8.0, 10.0, 12.0]);
    assert_eq!(runs(&gups, "2M"), [8.0, 5.0, 4.0]);
    assert_eq!(runs(&stream, "4K"), [4.0]);
    let c = r
        .configs
        .iter()
        .find(|c| c.subject == gups && c.label == "2M")
        .unwrap();
    assert_eq!(c.summary["metrics/ns_per_op"].median, 5.0);
    // The speed-up of the medians of wall time: 10 over 5.
    assert_eq!(c.speedup_vs_4k, Some(2.0));
    assert_eq!(r.configs.len(), 4);
}

/// A run's faults are the program's own, from its exec on, when the measurer counts them so;
/// `wait4`'s (which also hold the child's faults before its exec) stay in the metrics, and
/// without the exec count they are the figure.
#[test]
fn faults_are_counted_from_the_exec_when_the_kernel_can() {
    let req = request(&[], 2);
    let (r, _) = run_fake(
        &req,
        vec![
            FakeRun::exits(0).faults(127).exec_faults(100, 2),
            FakeRun::exits(0).faults(131),
        ],
    );
    assert_eq!(r.configs.len(), 1);
    let runs = &r.configs[0].runs;
    assert_eq!((runs[0].faults, runs[0].major_faults), (100, 2));
    assert_eq!(runs[0].metrics["rusage_minor_faults"], 127.0);
    assert_eq!(runs[0].metrics["rusage_major_faults"], 0.0);
    assert_eq!((runs[1].faults, runs[1].major_faults), (131, 0));
    assert_eq!(runs[1].metrics["rusage_minor_faults"], 131.0);
}
