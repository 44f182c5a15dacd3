//! End-to-end tests of `pagelab bench` and its hidden child: each kernel's metrics, the
//! faults the first touch takes under 4K and under 2M THP (root and THP needed: skipped,
//! saying why, elsewhere), the JSON and SVG outputs, the knobs restored, and errors.

mod common;

use common::{pagelab, succeeded, tmp};

use pagelab_report::{LabConfig, LabResult};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Output;

fn ok(out: &Output) -> String {
    succeeded(out);
    String::from_utf8(out.stdout.clone()).unwrap()
}

const THP: &str = "/sys/kernel/mm/transparent_hugepage";

/// Whether the THP knobs can be changed here; prints why not when they cannot.
fn knobs_available(sizes: &[&str]) -> bool {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("SKIPPED: changing the THP knobs needs root");
        return false;
    }
    for size in sizes {
        let knob = format!("{THP}/hugepages-{size}/enabled");
        if !Path::new(&knob).exists() {
            eprintln!("SKIPPED: {knob} does not exist (no THP of that size in this kernel)");
            return false;
        }
    }
    true
}

/// Every THP `enabled` knob and its value, read while holding pagelab's knob lock, so that
/// no pagelab (another test's, for instance) is in the middle of a session.
fn knobs() -> Vec<(PathBuf, String)> {
    use std::os::fd::AsRawFd;
    let state = pagelab_lab::sysfs::Sysfs::host().state;
    std::fs::create_dir_all(&state).unwrap();
    let lock = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(state.join("lock"))
        .unwrap();
    // SAFETY: flock on a descriptor we own; closing it (at the end) releases the lock.
    assert_eq!(unsafe { libc::flock(lock.as_raw_fd(), libc::LOCK_EX) }, 0);
    let values = read_knobs();
    drop(lock);
    values
}

fn read_knobs() -> Vec<(PathBuf, String)> {
    let mut out = vec![];
    let mut paths = vec![PathBuf::from(THP).join("enabled")];
    for e in std::fs::read_dir(THP).unwrap().flatten() {
        paths.push(e.path().join("enabled"));
    }
    for p in paths.into_iter().filter(|p| p.exists()) {
        let v = std::fs::read_to_string(&p).unwrap();
        out.push((p, v));
    }
    out.sort();
    out
}

fn child(spec: &str, advice: &str) -> Value {
    let out = pagelab()
        .args(["bench-child", "--advice", advice, spec])
        .output()
        .unwrap();
    let text = ok(&out);
    serde_json::from_str(text.trim()).unwrap_or_else(|e| panic!("{e}: {text}"))
}

fn metric(v: &Value, name: &str) -> f64 {
    v["metrics"][name]
        .as_f64()
        .unwrap_or_else(|| panic!("no {name} in {v}"))
}

fn median(c: &LabConfig, name: &str) -> f64 {
    let mut v: Vec<f64> = c.runs.iter().map(|r| r.metrics[name]).collect();
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

#[test]
fn each_kernels_child_prints_sane_metrics() {
    let cases = [
        (
            "stride:heap=256K,every=16,iters=1000",
            "ns_per_access",
            256 << 10,
        ),
        ("stream:n=65536,iters=2", "ns_per_element", 3 * 8 * 65536),
        ("gups:table=4M,updates=100000", "ns_per_update", 4 << 20),
        ("chase:nodes=16384,steps=100000", "ns_per_step", 16384 * 64),
        ("fault:size=8M", "first_touch_ns_per_mb", 8 << 20),
    ];
    for (spec, headline, bytes) in cases {
        let v = child(spec, "nohugepage");
        assert_eq!(v["advice"], "nohugepage");
        assert!(v["spec"]
            .as_str()
            .unwrap()
            .starts_with(spec.split(':').next().unwrap()));
        let h = metric(&v, headline);
        assert!(h.is_finite() && h > 0.0, "{spec}: {headline} = {h}");
        assert!(metric(&v, "ns_per_op") < 1e6, "{spec}: {v}");
        if spec.starts_with("stream") {
            assert!(metric(&v, "mb_per_s") > 100.0, "{spec}: {v}");
        }
        assert_eq!(metric(&v, "data_bytes"), bytes as f64);
        // Under MADV_NOHUGEPAGE, one fault per 4K page written for the first time.
        let pages = (bytes / 4096) as f64;
        let faults = metric(&v, "first_touch_faults");
        assert!(
            faults >= pages && faults <= pages + 8.0,
            "{spec}: {faults} first-touch faults for {pages} pages"
        );
        assert!(metric(&v, "loop_faults") <= 8.0, "{spec}: {v}");
    }
}

#[test]
fn bad_kernel_specs_and_flags_are_clear_errors() {
    let cases: [(&[&str], &str); 6] = [
        (
            &["nope"],
            "unknown kernel `nope` in `nope`: the kernels are stride, stream, gups, chase, fault",
        ),
        (
            &["gups:table=3M"],
            "gups: table=3M is not allowed: write a power of two",
        ),
        (&["stride:hep=4M"], "stride has no parameter `hep`"),
        (&["--repeat", "0", "fault"], "--repeat 0"),
        (
            &["--thp", "sometimes", "fault"],
            "THP mode `sometimes` is not allowed",
        ),
        (&["--pages", "4K", "--pages", "5K", "fault"], "--pages 5K"),
    ];
    for (args, want) in cases {
        let out = pagelab().arg("bench").args(args).output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {stderr}");
        assert!(stderr.contains(want), "{args:?}: {stderr}");
    }
    let out = pagelab()
        .args(["bench-child", "--advice", "huge", "fault:size=1M"])
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&out.stderr)
        .contains("advice `huge` is not one of nohugepage, none, hugepage"));
}

#[test]
fn a_baseline_bench_writes_lab_json_and_svg() {
    let dir = tmp("baseline");
    let (json, svg) = (dir.join("r.json"), dir.join("r.svg"));
    let out = pagelab()
        .args(["bench", "--quick", "--repeat", "2", "--pages", "4K"])
        .args(["stride:heap=256K", "fault", "gups:table=2M"])
        .arg("--json")
        .arg(&json)
        .arg("--svg")
        .arg(&svg)
        .output()
        .unwrap();
    let stdout = ok(&out);
    assert!(stdout.contains("stride: ns per access"), "{stdout}");
    assert!(
        stdout.contains("fault:size=32M: median of 2 run(s)"),
        "{stdout}"
    );
    let r: LabResult = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(
        (r.schema.as_str(), r.command.as_str()),
        ("pagelab.lab/1", "bench")
    );
    let subjects: Vec<&str> = r.configs.iter().map(|c| c.subject.as_str()).collect();
    assert_eq!(
        subjects,
        [
            "stride:heap=256K,page=4K,line=64,every=1,iters=1024,rounds=5",
            "stride:heap=256K,page=4K,line=64,every=16,iters=16384,rounds=5",
            "fault:size=32M",
            "gups:table=2M,updates=262144,seed=1",
        ]
    );
    for c in &r.configs {
        assert_eq!((c.label.as_str(), c.runs.len()), ("4K", 2));
        assert!(
            c.summary.contains_key("metrics/ns_per_op"),
            "{:?}",
            c.summary.keys()
        );
        assert_eq!(c.speedup_vs_4k, Some(1.0));
        for run in &c.runs {
            assert_eq!(run.exit.code, Some(0));
            assert!(run.faults as f64 >= run.metrics["first_touch_faults"]);
            assert!(
                run.faults_by_size.values().all(|&n| n == 0),
                "{:?}",
                run.faults_by_size
            );
        }
    }
    let fault = &r.configs[2];
    assert!((8192.0..8192.0 + 16.0).contains(&median(fault, "first_touch_faults")));
    let text = std::fs::read_to_string(&svg).unwrap();
    assert!(text.starts_with("<svg") && text.trim_end().ends_with("</svg>"));
    assert_eq!(text.matches("<svg").count(), text.matches("</svg>").count());
    assert!(text.contains("stride, every 16th page") && text.contains("fault cost"));
}

#[test]
fn under_2m_thp_a_32m_heap_is_16_huge_pages_and_the_knobs_come_back() {
    if !knobs_available(&["2048kB", "64kB"]) {
        return;
    }
    let before = knobs();
    let dir = tmp("thp");
    let json = dir.join("r.json");
    let out = pagelab()
        .args([
            "bench", "--quick", "--repeat", "1", "--pages", "4K", "--pages", "2M",
        ])
        .args(["fault:size=32M", "stride:heap=32M,every=16"])
        .arg("--json")
        .arg(&json)
        .output()
        .unwrap();
    ok(&out);
    assert_eq!(knobs(), before, "bench left a knob changed");
    let r: LabResult = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let get = |subject: &str, label: &str| {
        r.configs
            .iter()
            .find(|c| c.subject.starts_with(subject) && c.label == label)
            .unwrap_or_else(|| panic!("no {subject} under {label}"))
    };
    for subject in ["fault", "stride"] {
        let (small, huge) = (get(subject, "4K"), get(subject, "2M"));
        let f4 = median(small, "first_touch_faults");
        let f2 = median(huge, "first_touch_faults");
        assert!((8192.0..8192.0 + 16.0).contains(&f4), "{subject} 4K: {f4}");
        assert!(
            f2 <= 16.0 + 16.0,
            "{subject} 2M: {f2} faults for 16 huge pages"
        );
        // The counter is system-wide: at least our 16, never fewer.
        let allocs = huge.runs[0].faults_by_size.get("2M").copied().unwrap_or(0);
        assert!(
            allocs >= 16,
            "{subject}: {allocs} 2M allocations: {:?}",
            huge.runs[0]
        );
        assert_eq!(
            small.runs[0].faults_by_size.get("2M").copied().unwrap_or(0),
            0
        );
    }
    // A size the kernel has no THP knob for is refused before any knob changes.
    if !Path::new(THP).join("hugepages-1048576kB").exists() {
        let out = pagelab()
            .args([
                "bench", "--quick", "--pages", "4K", "--pages", "1G", "fault",
            ])
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{stderr}");
        assert!(
            stderr.contains("--pages: 1G is not a THP size of this kernel (it has 16K"),
            "{stderr}"
        );
    }
    // `always` needs no advice: an 8M region gets 128 64K pages.
    let out = pagelab()
        .args([
            "bench", "--quick", "--repeat", "1", "--thp", "always", "--pages", "64K",
        ])
        .args(["fault:size=8M", "--json"])
        .arg(&json)
        .output()
        .unwrap();
    ok(&out);
    assert_eq!(knobs(), before, "bench --thp always left a knob changed");
    let r: LabResult = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let run = &r.configs[0].runs[0];
    assert!(
        run.faults_by_size.get("64K").copied().unwrap_or(0) >= 128,
        "{run:?}"
    );
    assert!(run.metrics["first_touch_faults"] <= 128.0 + 16.0, "{run:?}");
}

#[test]
fn without_root_the_default_is_the_4k_baseline_and_larger_sizes_are_refused() {
    use std::os::unix::process::CommandExt;
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("SKIPPED: dropping to an unprivileged user needs root to start from");
        return;
    }
    let as_nobody = || {
        let mut c = pagelab();
        c.uid(65534).gid(65534);
        c
    };
    let out = as_nobody()
        .args(["bench", "--quick", "--repeat", "1", "fault:size=4M"])
        .output()
        .unwrap();
    let stdout = ok(&out);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("changing the THP knobs needs root; running the 4K baseline only"),
        "{stderr}"
    );
    assert!(
        stdout.contains("fault:size=4M: median of 1 run(s)"),
        "{stdout}"
    );
    let out = as_nobody()
        .args([
            "bench",
            "--quick",
            "--pages",
            "4K",
            "--pages",
            "2M",
            "fault:size=4M",
        ])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("or ask for the 4K baseline alone with --pages 4K"),
        "{stderr}"
    );
}

/// Whether `pid` has a child process yet (a bench child runs only inside a knob session).
fn has_child(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children"))
        .is_ok_and(|s| !s.trim().is_empty())
}

#[test]
fn sigint_stops_the_bench_and_every_knob_comes_back() {
    if !knobs_available(&["2048kB"]) {
        return;
    }
    let before = knobs();
    let child = pagelab()
        .args([
            "bench",
            "--repeat",
            "200",
            "--pages",
            "2M",
            "--pages",
            "4K",
            "fault:size=64M",
        ])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let start = std::time::Instant::now();
    while !has_child(child.id()) {
        assert!(
            start.elapsed().as_secs() < 60,
            "the bench never started a child"
        );
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    std::thread::sleep(std::time::Duration::from_millis(200));
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(130), "{stderr}");
    assert!(
        stderr.contains("interrupted by signal 2; every knob is restored"),
        "{stderr}"
    );
    assert_eq!(knobs(), before, "a knob stayed changed after SIGINT");
}

#[test]
fn a_full_standard_output_is_an_error_not_a_panic() {
    common::full_stdout_is_a_clean_error(&[
        &[
            "bench",
            "--quick",
            "--repeat",
            "1",
            "--pages",
            "4K",
            "stride:heap=256K",
        ],
        &["bench-child", "stride:heap=256K"],
    ]);
}
