//! `pagelab validate` end to end: the model against the real kernel (root and
//! THP only; skipped with the reason elsewhere), its errors, and the knobs
//! being back afterwards.

mod common;

use common::{pagelab, tmp};

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The tests that change the real knobs run one at a time, so one's before/after comparison
/// never sees the other's changes.
static SERIAL: Mutex<()> = Mutex::new(());

const THP: &str = "/sys/kernel/mm/transparent_hugepage";

/// Why the real-kernel tests cannot run here, if they cannot.
fn cannot_run() -> Option<String> {
    // SAFETY: geteuid cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        return Some("not root: validate changes the THP knobs".into());
    }
    if !Path::new(THP).join("hugepages-64kB/enabled").exists() {
        return Some(format!(
            "{THP}/hugepages-64kB/enabled is missing: no multi-size THP"
        ));
    }
    None
}

/// Every THP knob and its value, to check nothing is left changed.
fn knobs() -> Vec<(PathBuf, String)> {
    let mut files = vec![
        PathBuf::from(THP).join("enabled"),
        PathBuf::from(THP).join("defrag"),
    ];
    for e in std::fs::read_dir(THP).unwrap().flatten() {
        let f = e.path().join("enabled");
        if f.exists() {
            files.push(f);
        }
    }
    files.sort();
    files
        .into_iter()
        .map(|f| {
            let v = std::fs::read_to_string(&f).unwrap();
            (f, v)
        })
        .collect()
}

#[test]
fn model_and_kernel_agree_and_knobs_come_back() {
    if let Some(why) = cannot_run() {
        eprintln!("skipped: {why}");
        return;
    }
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let before = knobs();
    let dir = tmp("agree");
    let json = dir.join("v.json");
    let out = pagelab()
        .args([
            "validate", "--pages", "4K", "--pages", "64K", "--pages", "2M",
        ])
        .args(["--pages", "16K,128K,2M", "--json"])
        .arg(&json)
        .args([
            "stride:heap=4M,iters=1",
            "chase:nodes=65536,steps=1000,init=false",
        ])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(stdout.contains("agree on all 8 cases"), "{stdout}");
    assert_eq!(knobs(), before, "validate left a knob changed");
    let r: pagelab_report::LabResult =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(r.command, "validate");
    assert_eq!(r.configs.len(), 8);
    // The 2M case of the 4M stride heap: its one aligned 2M range inside the
    // mapping gets a PMD page in both, the rest 4K pages. The chase reads
    // first: the huge zero page and 4K zero pages, no allocation at all.
    let c = r
        .configs
        .iter()
        .find(|c| c.label == "2M" && c.subject.starts_with("stride"))
        .unwrap();
    let p = c.predicted.as_ref().unwrap();
    assert_eq!(p.faults_by_size.get("2M"), Some(&1), "{c:?}");
    assert_eq!(c.runs[0].faults_by_size.get("2M"), Some(&1), "{c:?}");
    assert_eq!(p.faults, c.runs[0].faults);
    assert!(p.faults > 500, "{c:?}");
    let c = r
        .configs
        .iter()
        .find(|c| c.label == "2M" && c.subject.starts_with("chase"))
        .unwrap();
    assert!(c.runs[0].faults_by_size.is_empty(), "{c:?}");
    assert!(c.predicted.as_ref().unwrap().faults_by_size.is_empty());
    assert!(c.runs[0].faults > 0);
}

#[test]
fn a_bad_workload_fails_before_any_knob_changes() {
    let out = pagelab()
        .args(["validate", "stride:heap=banana"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("heap"), "{err}");
}

#[test]
fn a_kernel_without_thp_is_named() {
    let root = tmp("nothp");
    let out = pagelab()
        .env("PAGELAB_SYSFS_ROOT", &root)
        .env("PAGELAB_STATE_DIR", root.join("state"))
        .args(["validate", "--pages", "4K", "stride:heap=64K,iters=1"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("transparent_hugepage"), "{err}");
}

/// Regression: validate exited 1 on SIGINT/SIGTERM where run and bench exit 128 + signal.
#[test]
fn a_signal_exits_128_plus_it_with_the_knobs_back() {
    if let Some(why) = cannot_run() {
        eprintln!("skipped: {why}");
        return;
    }
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    for sig in [libc::SIGINT, libc::SIGTERM] {
        let before = knobs();
        let k64 = PathBuf::from(THP).join("hugepages-64kB/enabled");
        assert!(
            !std::fs::read_to_string(&k64).unwrap().contains("[madvise]"),
            "64K is already madvise: the test cannot see validate set it"
        );
        let mut child = pagelab()
            .args(["validate", "--pages", "64K"])
            .args(std::iter::repeat_n("stride:heap=16M,iters=2", 200))
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(30);
        while !std::fs::read_to_string(&k64).unwrap().contains("[madvise]") {
            assert!(Instant::now() < deadline, "validate never set 64K");
            std::thread::sleep(Duration::from_millis(10));
        }
        // SAFETY: signalling our own child.
        unsafe { libc::kill(child.id() as i32, sig) };
        let deadline = Instant::now() + Duration::from_secs(30);
        let status = loop {
            if let Some(s) = child.try_wait().unwrap() {
                break s;
            }
            assert!(Instant::now() < deadline, "validate did not stop");
            std::thread::sleep(Duration::from_millis(20));
        };
        let mut stderr = String::new();
        std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut stderr).unwrap();
        assert_eq!(status.code(), Some(128 + sig), "{stderr}");
        assert!(
            stderr.contains(&format!(
                "interrupted by signal {sig}; every setting is restored"
            )),
            "{stderr}"
        );
        assert_eq!(knobs(), before, "signal {sig} left a knob changed");
    }
}

#[test]
fn a_full_standard_output_is_an_error_and_the_knobs_come_back() {
    if let Some(why) = cannot_run() {
        eprintln!("skipped: {why}");
        return;
    }
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let before = knobs();
    common::full_stdout_is_a_clean_error(&[
        &["validate", "--pages", "4K", "stride:heap=4M,iters=1"],
        &[
            "validate-child",
            "--advise",
            "none",
            "stride:heap=4M,iters=1",
        ],
    ]);
    assert_eq!(knobs(), before, "validate left a knob changed");
}
