//! `with_threads`: a run bounded to one thread uses no thread beside its
//! caller, and every run gives the same results whatever its bound: the study
//! read ahead (a zstd trace) and in pieces (a plain Lackey file), the study
//! with time, and the policy runs.
//!
//! One test, so that no other test of this binary starts threads while it
//! counts the process's.

use crate::common;

use common::{real_events, real_prefix};
use pagelab_core::{parse_page_sizes, Bytes, Event};
use pagelab_engine::{
    run_cost_study, run_policies, run_study, with_threads, CostConfig, CostMachine, PolicyConfig,
    Progress, StudyConfig,
};
use pagelab_mm::phys::PhysConfig;
use pagelab_report::SimResult;
use pagelab_trace::{Events, LackeyWriter, TraceSource};
use std::num::NonZeroUsize;
use std::path::{Path, PathBuf};

/// The threads of this process, from `/proc/self/status`.
fn process_threads() -> usize {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("Threads:"))
        .unwrap()
        .trim()
        .parse()
        .unwrap()
}

/// Records the most threads the process had at any progress report.
struct MostThreads(usize);

impl Progress for MostThreads {
    fn update(&mut self, _refs: u64, _elapsed: std::time::Duration) {
        self.0 = self.0.max(process_threads());
    }
}

/// A result without its time, as JSON.
fn timeless(mut r: SimResult) -> serde_json::Value {
    r.elapsed_seconds = None;
    serde_json::to_value(r).unwrap()
}

/// The bundled trace as a plain Lackey file (read in pieces), removed when dropped.
struct PlainFile(PathBuf);

impl Drop for PlainFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

fn plain_file(events: &[Event]) -> PlainFile {
    let path = std::env::temp_dir().join(format!("pagelab-threads-{}.lackey", std::process::id()));
    let mut w = LackeyWriter::new(std::fs::File::create(&path).unwrap());
    for e in events {
        w.write(e).unwrap();
    }
    w.finish().unwrap();
    PlainFile(path)
}

fn bundled() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/data/gzip-9.lackey.zst")
}

fn open(path: &Path) -> Box<dyn TraceSource + Send> {
    pagelab_trace::open(path.to_str().unwrap(), None).unwrap()
}

/// Each bound: none (the machine's), one thread, three threads.
fn bounds() -> [Option<NonZeroUsize>; 3] {
    [None, NonZeroUsize::new(1), NonZeroUsize::new(3)]
}

#[test]
fn one_thread_means_one_and_no_bound_changes_a_result() {
    let plain = plain_file(&real_events());
    let sizes = parse_page_sizes("4K,8K,64K,2M").unwrap();
    let cfg = StudyConfig {
        page_sizes: sizes.clone(),
        tlb: pagelab_tlb::preset("weisberg").unwrap(),
    };
    let zen4 = pagelab_machine::preset("zen4").unwrap();
    let zen4_tlb = zen4.tlb.clone().unwrap();
    let cost = CostConfig {
        machine: CostMachine::new(&zen4, &zen4_tlb).unwrap().unwrap(),
        nested_host: None,
    };
    let cost_cfg = StudyConfig {
        page_sizes: sizes.clone(),
        tlb: zen4_tlb,
    };
    let pcfg = PolicyConfig {
        policies: ["base:4K", "base:64K", "linux-thp:enabled=always"]
            .iter()
            .map(|p| p.parse().unwrap())
            .collect(),
        tlb: pagelab_tlb::preset("weisberg").unwrap(),
        phys: PhysConfig::new(Bytes(1 << 30)),
        strict: false,
        cow: Default::default(),
        file_faults: Default::default(),
        platform: None,
        exit_mappings: false,
    };
    let prefix = real_prefix(1_500_000);

    let before = process_threads();
    let mut results: Vec<Vec<serde_json::Value>> = Vec::new();
    for bound in bounds() {
        let mut most = MostThreads(0);
        let runs = with_threads(bound, || {
            vec![
                timeless(run_study(&mut *open(&bundled()), &cfg, &mut most).unwrap()),
                timeless(run_study(&mut *open(&plain.0), &cfg, &mut most).unwrap()),
                timeless(
                    run_cost_study(&mut *open(&bundled()), &cost_cfg, &cost, &mut most).unwrap(),
                ),
                timeless(
                    run_policies(&mut Events(prefix.clone().into_iter()), &pcfg, &mut most)
                        .unwrap(),
                ),
            ]
        });
        assert!(most.0 > 0, "progress was reported");
        if bound == NonZeroUsize::new(1) {
            assert_eq!(
                most.0, before,
                "bounded to one thread, a run started no thread ({before} before it)"
            );
        }
        results.push(runs);
    }
    // The machine's bound reads ahead on a thread of its own where it has
    // two cores or more: then the count above says something.
    if std::thread::available_parallelism().map_or(1, NonZeroUsize::get) > 1 {
        let mut most = MostThreads(0);
        run_study(&mut *open(&bundled()), &cfg, &mut most).unwrap();
        assert!(
            most.0 > before,
            "unbounded, the study reads on a thread of its own"
        );
    }
    let names = [
        "study read ahead",
        "study in pieces",
        "study with time",
        "policies",
    ];
    for (b, got) in bounds().iter().zip(&results).skip(1) {
        for ((g, w), name) in got.iter().zip(&results[0]).zip(names) {
            assert_eq!(g, w, "{name}: bound {b:?} against none");
        }
    }
}
