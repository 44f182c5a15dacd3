//! End-to-end tests of `pagelab run`: the JSON, the kernel's allocations per size, the exit
//! status, and every knob back after SIGINT, SIGTERM and (through the next command) SIGKILL.
//! Tests that change the knobs need root and THP with multi-size knobs, and skip saying why
//! elsewhere. They run one at a time and compare knobs while holding pagelab's own lock, so
//! another pagelab (another test binary) cannot change them under the comparison.

mod common;

use common::{pagelab, tmp};

use pagelab_lab::session::KnobSession;
use pagelab_lab::sysfs::Sysfs;
use serde_json::Value;
use std::collections::BTreeMap;
use std::process::{Child, Command, Output, Stdio};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

static SERIAL: Mutex<()> = Mutex::new(());

/// The lock of this file's tests, when the machine lets them change knobs; otherwise prints
/// why the test is skipped.
fn knobs_available() -> Option<MutexGuard<'static, ()>> {
    if let Err(why) = Sysfs::host_for(&["64K".parse().unwrap(), "2M".parse().unwrap()]) {
        eprintln!("SKIPPED: {why}");
        return None;
    }
    Some(SERIAL.lock().unwrap_or_else(|p| p.into_inner()))
}

/// Every knob pagelab may change, by path, as the files hold them.
fn knob_files() -> BTreeMap<String, String> {
    let sysfs = Sysfs::host();
    let mut files = vec![
        sysfs.thp_dir().join("enabled"),
        sysfs.thp_dir().join("defrag"),
        sysfs.thp_dir().join("use_zero_page"),
    ];
    for dir in [sysfs.thp_dir(), sysfs.mm.join("hugepages")] {
        for e in std::fs::read_dir(dir).unwrap().flatten() {
            files.push(e.path().join("enabled"));
            files.push(e.path().join("nr_hugepages"));
        }
    }
    files
        .into_iter()
        .filter_map(|p| Some((p.display().to_string(), std::fs::read_to_string(&p).ok()?)))
        .collect()
}

/// The knobs as they are when no pagelab holds them (taking pagelab's lock for the read).
fn settled_knobs() -> BTreeMap<String, String> {
    let session = KnobSession::begin(&Sysfs::host()).unwrap();
    let knobs = knob_files();
    session.restore().unwrap();
    knobs
}

fn size_knob(kb: u64) -> String {
    let path = Sysfs::host()
        .thp_dir()
        .join(format!("hugepages-{kb}kB/enabled"));
    std::fs::read_to_string(path).unwrap()
}

fn run_json(args: &[&str], name: &str) -> (Output, Value) {
    let dir = tmp("run");
    let json = dir.join(name);
    let out = pagelab()
        .arg("run")
        .arg("--json")
        .arg(&json)
        .args(args)
        .output()
        .unwrap();
    let text = std::fs::read_to_string(&json).unwrap_or_else(|e| panic!("{e}: {out:?}"));
    std::fs::remove_file(&json).unwrap();
    (out, serde_json::from_str(&text).unwrap())
}

#[test]
fn a_run_writes_the_lab_json() {
    let Some(_serial) = knobs_available() else {
        return;
    };
    let (out, r) = run_json(
        &["--pages", "64K", "--thp", "always", "--", "true"],
        "true.json",
    );
    assert!(out.status.success(), "{out:?}");
    assert_eq!(r["schema"], "pagelab.lab/1");
    assert_eq!(r["command"], "run");
    assert!(r["host"]["kernel"].as_str().unwrap().len() > 1, "{r}");
    let c = &r["configs"][0];
    assert_eq!(
        (c["label"].as_str(), c["thp"].as_str()),
        (Some("64K"), Some("always"))
    );
    assert_eq!(c["pages"], serde_json::json!([65536]));
    assert_eq!(c["subject"], "true");
    let m = &c["runs"][0];
    assert_eq!(m["exit"]["code"], 0);
    assert!(m["wall_seconds"].as_f64().unwrap() > 0.0, "{m}");
    assert_eq!(m["hw"].as_object().unwrap().len(), 4, "{m}");
    assert_eq!(c["summary"]["wall_seconds"]["spread"], 0.0);
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(table.contains("config") && table.contains("64K"), "{table}");
}

#[test]
fn touching_8m_allocates_64k_pages_and_the_baseline_none() {
    let Some(_serial) = knobs_available() else {
        return;
    };
    let prog = pagelab_lab::shim::testprog_path()
        .to_str()
        .unwrap()
        .to_string();
    let args = [
        "--compare",
        "64K",
        "--thp",
        "always",
        "--",
        &prog,
        "mmap",
        "8M",
    ];
    let (out, r) = run_json(&args, "touch.json");
    assert!(out.status.success(), "{out:?}");
    let configs = r["configs"].as_array().unwrap();
    let labels: Vec<&str> = configs
        .iter()
        .map(|c| c["label"].as_str().unwrap())
        .collect();
    assert_eq!(labels, ["4K", "64K"]);
    // With every THP size `never`, nothing on the machine gets a large page.
    assert_eq!(
        configs[0]["runs"][0]["faults_by_size"],
        serde_json::json!({})
    );
    let got = configs[1]["runs"][0]["faults_by_size"]["64K"]
        .as_u64()
        .unwrap();
    assert!(got >= 128, "8M is 128 64K pages: {}", configs[1]);
    assert_eq!(configs[0]["speedup_vs_4k"], 1.0);
    assert!(configs[1]["speedup_vs_4k"].as_f64().unwrap() > 0.0);
    let base_faults = configs[0]["runs"][0]["faults"].as_u64().unwrap();
    let faults_64k = configs[1]["runs"][0]["faults"].as_u64().unwrap();
    assert!(
        base_faults >= 2048 && faults_64k < base_faults / 4,
        "{base_faults} {faults_64k}"
    );
}

#[test]
fn the_programs_exit_status_is_pagelabs() {
    let Some(_serial) = knobs_available() else {
        return;
    };
    let before = settled_knobs();
    let out = pagelab()
        .args(["run", "--pages", "64K", "--", "sh", "-c", "exit 7"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(7), "{out:?}");
    // Regression: the table once passed for a normal one.
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains(
            "WARNING: the program failed: under 64K it exited with code 7 in 1 of 1 run;"
        ),
        "{stdout}"
    );
    let (out, r) = run_json(
        &[
            "--pages",
            "64K",
            "--repeat",
            "2",
            "--",
            "sh",
            "-c",
            "kill -KILL $$",
        ],
        "killed.json",
    );
    assert_eq!(out.status.code(), Some(128 + 9), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("under 64K it was killed by signal 9 in 2 of 2 runs"),
        "{stderr}"
    );
    assert_eq!(r["failed_runs"], 2, "{r}");
    assert_eq!(r["configs"][0]["runs"][1]["exit"]["signal"], 9, "{r}");
    // The program failing or being killed is one more exit path: all restored.
    assert_eq!(settled_knobs(), before);
}

/// Starts `pagelab run ... -- sleep 30`, waits until the 64K knob says `always`.
fn start_sleeper(extra: &[&str]) -> Child {
    start_sleeper_with(pagelab(), extra)
}

/// [`start_sleeper`] through `cmd` (a `pagelab` command with its environment set).
fn start_sleeper_with(mut cmd: Command, extra: &[&str]) -> Child {
    let child = cmd
        .args(["run", "--pages", "64K,2M", "--thp", "always"])
        .args(extra)
        .args(["--", "sleep", "30"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let start = Instant::now();
    while !size_knob(64).contains("[always]") {
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "pagelab never set the 64K knob"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    // The knob is set just before the program starts; wait until it has.
    while children(child.id()).is_empty() {
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "pagelab never started sleep"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    child
}

/// The pids of the processes `pid`'s main thread started.
fn children(pid: u32) -> Vec<i32> {
    std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children"))
        .unwrap_or_default()
        .split_whitespace()
        .map(|p| p.parse().unwrap())
        .collect()
}

/// Waits for `child` at most `limit`; its exit code.
fn exit_within(child: &mut Child, limit: Duration) -> Option<i32> {
    let start = Instant::now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status.code();
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            panic!("pagelab did not exit within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn signal_restores_everything(sig: libc::c_int, extra: &[&str]) {
    let before = settled_knobs();
    let mut child = start_sleeper(extra);
    assert_ne!(knob_files(), before, "the run changed no knob");
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as i32, sig) };
    let code = exit_within(&mut child, Duration::from_secs(5));
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(code, Some(128 + sig), "{stderr}");
    assert!(stderr.contains("every setting is restored"), "{stderr}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("64K+2M"),
        "the table of the interrupted run: {stdout}"
    );
    assert_eq!(settled_knobs(), before, "{stderr}");
}

#[test]
fn sigint_restores_every_knob() {
    let Some(_serial) = knobs_available() else {
        return;
    };
    signal_restores_everything(libc::SIGINT, &[]);
}

#[test]
fn sigterm_restores_every_knob_and_the_pool() {
    let Some(_serial) = knobs_available() else {
        return;
    };
    signal_restores_everything(libc::SIGTERM, &["--hugetlb", "2M:4"]);
}

/// A state directory of a test's own. Dropped, it runs a pagelab command there first, so that
/// a test that fails after a SIGKILL still has the knobs restored from the journal in it
/// before the directory, and the journal, are gone.
struct PrivateState(tempfile::TempDir);

impl PrivateState {
    /// A `pagelab` command that keeps its lock and journal here.
    fn pagelab(&self) -> Command {
        let mut cmd = pagelab();
        cmd.env("PAGELAB_STATE_DIR", self.0.path());
        cmd
    }
}

impl Drop for PrivateState {
    fn drop(&mut self) {
        let _ = self.pagelab().arg("presets").output();
    }
}

#[test]
fn after_sigkill_the_next_command_restores() {
    let Some(_serial) = knobs_available() else {
        return;
    };
    let before = settled_knobs();
    // A state directory of its own (the lock and the journal): every pagelab command restores
    // a dead run's knobs from the journal it finds, so another one started meanwhile from the
    // shared directory (by test binaries running beside this one) would restore them before
    // this test's own next command could, as it once did in CI.
    let state = PrivateState(tempfile::tempdir().unwrap());
    let mut child = start_sleeper_with(state.pagelab(), &[]);
    let sleepers = children(child.id());
    assert_eq!(sleepers.len(), 1, "{sleepers:?}");
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    // Regression: the measured program kept running after its pagelab was SIGKILLed; its
    // parent-death signal now ends it with pagelab.
    let deadline = Instant::now() + Duration::from_secs(5);
    let gone = |pid: i32| {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        stat.is_empty()
            || stat
                .rsplit_once(')')
                .is_some_and(|(_, r)| r.trim_start().starts_with('Z'))
    };
    while !gone(sleepers[0]) {
        assert!(
            Instant::now() < deadline,
            "sleep {} outlived pagelab",
            sleepers[0]
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(
        size_knob(64).contains("[always]"),
        "SIGKILL left nothing to restore"
    );
    let out = state.pagelab().arg("presets").output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{out:?}");
    assert!(
        stderr.contains("restored") && stderr.contains("hugepages-64kB"),
        "{stderr}"
    );
    assert_eq!(knob_files(), before, "{stderr}");
}

#[test]
fn bad_sizes_are_refused_before_anything_changes() {
    let Some(_serial) = knobs_available() else {
        return;
    };
    let before = settled_knobs();
    let cases: [(&[&str], &[&str]); 5] = [
        // Regression: this took 23 GiB into the pool before the shortfall error.
        (
            &["--hugetlb", "2M:100000000"],
            &["--hugetlb 2M:100000000: a pool of 100000000 2M pages is 190.7T, more than this machine's", "ask for fewer"],
        ),
        (&["--pages", "3K"], &["--pages 3K", "not allowed"]),
        (
            &["--hugetlb", "2M:abc"],
            &["`abc` is not a page count", "2M:512"],
        ),
        (&["--pages", "8K"], &["no 8K THP page size", "2M"]),
        (&["--thp", "never"], &["--thp", "`never`"]),
    ];
    for (args, wanted) in cases {
        let out = pagelab()
            .arg("run")
            .args(args)
            .args(["--", "true"])
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {stderr}");
        for w in wanted {
            assert!(stderr.contains(w), "{args:?}: `{w}` not in {stderr}");
        }
        assert_eq!(knob_files(), before, "{args:?} changed a knob");
    }
    let out = pagelab()
        .args(["run", "--", "/nonexistent/prog"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("cannot run /nonexistent/prog"), "{stderr}");
    assert_eq!(knob_files(), before);
}

#[test]
fn without_root_it_says_to_use_sudo() {
    let Some(_serial) = knobs_available() else {
        return;
    };
    let Ok(out) = Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups", "--"])
        .arg(env!("CARGO_BIN_EXE_pagelab"))
        .args(["run", "--pages", "64K", "--", "true"])
        .output()
    else {
        eprintln!("SKIPPED: no setpriv to drop root");
        return;
    };
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("run it as root (sudo pagelab run ...)"),
        "{stderr}"
    );
}

#[test]
fn a_full_standard_output_is_an_error_and_the_knobs_come_back() {
    let Some(_serial) = knobs_available() else {
        return;
    };
    let before = settled_knobs();
    common::full_stdout_is_a_clean_error(&[&[
        "run", "--pages", "64K", "--thp", "always", "--", "true",
    ]]);
    assert_eq!(settled_knobs(), before);
}
