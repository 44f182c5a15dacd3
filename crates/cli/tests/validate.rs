//! `pagelab validate` end to end: the model against the real kernel (root and
//! THP only; skipped with the reason elsewhere), its errors, and the knobs
//! being back afterwards.

mod common;

use common::{pagelab, tmp, Scratch};

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Mutex, MutexGuard};
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

/// For a test on the real kernel: the serial lock and a scratch directory named `name`, or
/// `None` (saying why) where the test cannot run.
fn guarded(name: &str) -> Option<(MutexGuard<'static, ()>, Scratch)> {
    if let Some(why) = cannot_run() {
        eprintln!("skipped: {why}");
        return None;
    }
    let serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    Some((serial, tmp(name)))
}

/// As [`guarded`], for a test that also captures with QEMU and needs the kernel's THP
/// knobs: `None` (saying why) without them.
fn captured_and_guarded(name: &str) -> Option<(MutexGuard<'static, ()>, Scratch)> {
    if let Err(e) = pagelab_capture::find_qemu() {
        eprintln!("skipped: {e}");
        return None;
    }
    if let Err(why) = pagelab_lab::sysfs::Sysfs::host_for(&[]) {
        eprintln!("skipped: {why}");
        return None;
    }
    guarded(name)
}

/// `pagelab validate ARGS --tolerance 50% --json DIR/v.json -- PROGRAM`, which must succeed,
/// and its JSON.
fn validated(
    dir: &Path,
    args: &[&str],
    program: &[&str],
) -> pagelab_report::validate::ValidateResult {
    let json = dir.join("v.json");
    let out = pagelab()
        .arg("validate")
        .args(args)
        .args(["--tolerance", "50%", "--json"])
        .arg(&json)
        .arg("--")
        .args(program)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap()
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
    let Some((_serial, dir)) = guarded("agree") else {
        return;
    };
    let before = knobs();
    let json = dir.join("v.json");
    let out = pagelab()
        .args([
            "validate", "--pages", "4K", "--pages", "64K", "--pages", "2M",
        ])
        .args(["--pages", "16K,128K,2M", "--json"])
        .arg(&json)
        .arg("--html")
        .arg(dir.join("v.html"))
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
    // The HTML is the report of the JSON's schema, the answer one sentence per workload.
    let html = std::fs::read_to_string(dir.join("v.html")).unwrap();
    for w in [
        "stride:heap=4M,iters=1",
        "chase:nodes=65536,steps=1000,init=false",
    ] {
        let sentence = format!("{w}: the model and the kernel agree exactly");
        assert!(stdout.contains(&sentence), "{stdout}");
        assert!(
            html.contains(&format!("{w}: faults, model and kernel")),
            "{w}"
        );
    }
    let r: pagelab_report::validate::ValidateResult =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(r.schema, "pagelab.validate/1");
    assert_eq!(r.tolerance_percent, 0.0);
    assert_eq!(r.cases.len(), 8);
    assert!(r
        .cases
        .iter()
        .all(|c| c.verdict == "agree" && c.thp == "madvise"));
    // The 2M case of the 4M stride heap: its one aligned 2M range inside the
    // mapping gets a PMD page in both, the rest 4K pages. The chase reads
    // first: the huge zero page and 4K zero pages, no allocation at all.
    let c = r
        .cases
        .iter()
        .find(|c| c.config == "2M" && c.workload.starts_with("stride"))
        .unwrap();
    assert_eq!(c.model.allocs.get("2M"), Some(&1), "{c:?}");
    assert_eq!(c.kernel.allocs.get("2M"), Some(&1), "{c:?}");
    assert_eq!(c.model.faults, c.kernel.faults);
    assert!(c.model.faults > 500, "{c:?}");
    let c = r
        .cases
        .iter()
        .find(|c| c.config == "2M" && c.workload.starts_with("chase"))
        .unwrap();
    assert!(c.kernel.allocs.is_empty(), "{c:?}");
    assert!(c.model.allocs.is_empty());
    assert!(c.kernel.faults > 0);
}

/// A real program: every (mode, configuration) runs natively `--repeat` times, the model's
/// figures stand beside the median, each verdict follows from the figures and the tolerance,
/// and the exit status from the verdicts.
#[test]
fn a_program_is_run_in_both_modes_and_modelled_once() {
    let Some((_serial, dir)) = guarded("program") else {
        return;
    };
    let before = knobs();
    let json = dir.join("v.json");
    let out = pagelab()
        .args([
            "validate", "--pages", "4K", "--pages", "64K", "--pages", "2M",
        ])
        .args(["--repeat", "2", "--tolerance", "50%", "--json"])
        .arg(&json)
        .arg("--html")
        .arg(dir.join("v.html"))
        .args(["--", "sh", "-c", "echo hello"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(knobs(), before, "validate left a knob changed");
    assert!(
        !stdout.lines().any(|l| l.trim() == "hello"),
        "the program's output is not validate's: {stdout}"
    );
    let r: pagelab_report::validate::ValidateResult =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(r.tolerance_percent, 50.0);
    let html = std::fs::read_to_string(dir.join("v.html")).unwrap();
    assert!(
        html.contains("sh -c &#39;echo hello&#39;: faults, model and kernel"),
        "no plot of the program in the HTML"
    );
    assert!(
        stdout.contains("sh -c 'echo hello': the model and the kernel"),
        "no answer: {stdout}"
    );
    let labels: Vec<(&str, &str)> = r
        .cases
        .iter()
        .map(|c| (c.config.as_str(), c.thp.as_str()))
        .collect();
    assert_eq!(
        labels,
        [
            ("4K", "madvise"),
            ("64K", "madvise"),
            ("2M", "madvise"),
            ("4K", "always"),
            ("64K", "always"),
            ("2M", "always"),
        ]
    );
    for c in &r.cases {
        assert_eq!(c.workload, "sh -c 'echo hello'");
        assert_eq!(c.kernel_runs.len(), 2, "{c:?}");
        assert!(c.model.faults > 0 && c.kernel.faults > 0, "{c:?}");
        assert_eq!(
            c.verdict,
            pagelab_report::validate::ValidateCase::verdict_of(&c.model, &c.kernel, 50.0),
            "{c:?}"
        );
    }
    // sh advises nothing: in madvise mode the model gives no large page under any size.
    assert!(r.cases[..3].iter().all(|c| c.model.allocs.is_empty()));
    let differ = r.differing();
    assert_eq!(out.status.success(), differ == 0, "{stdout}\n{stderr}");
    if differ > 0 {
        assert!(
            stderr.contains(&format!("on {differ} of 6 cases")),
            "{stderr}"
        );
    }
}

/// A program that forks and execs (`sh -c 'ls / | wc -l'`: two children exec ls and wc),
/// modelled in Linux's layout with each exec'd program laid out afresh, against the kernel
/// at 4K. Measured on Linux 6.18: model 280, kernel 293..295 (-4.4%; docs/real-programs.md
/// names what remains). The bound is wide because the kernel's count moves with the
/// machine (other processes' page cache, the children's scheduling): the model must lie
/// between 70% of the lowest native run and 5% above the highest. A model that lost an
/// exec'd program (its image, its faults) would fall far below.
#[test]
fn a_program_that_execs_is_modelled_in_linux_layout() {
    let Some((_serial, dir)) = guarded("execs") else {
        return;
    };
    let r = validated(
        &dir,
        &["--pages", "4K", "--thp", "madvise", "--repeat", "3"],
        &["sh", "-c", "ls / | wc -l"],
    );
    let c = &r.cases[0];
    let lowest = c.kernel_runs.iter().map(|k| k.faults).min().unwrap();
    let highest = c.kernel_runs.iter().map(|k| k.faults).max().unwrap();
    assert!(c.model.faults * 10 >= lowest * 7, "{c:?}");
    assert!(c.model.faults * 100 <= highest * 105, "{c:?}");
}

#[test]
fn a_program_and_workloads_together_are_refused() {
    let out = pagelab()
        .args(["validate", "stride:heap=64K", "--", "true"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("not both"), "{err}");
    let out = pagelab()
        .args(["validate", "--tolerance", "5%", "stride:heap=64K"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--tolerance is for a program"), "{err}");
    let out = pagelab()
        .args(["validate", "--layout", "linux", "stride:heap=64K"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--layout is for a program"), "{err}");
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
    let Some((_serial, _dir)) = guarded("signal") else {
        return;
    };
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
    let Some((_serial, _dir)) = guarded("stdout") else {
        return;
    };
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

/// A real interpreter's faults at 4K, where most are on the pages of its own code and its
/// libraries' (file pages, mapped by fault-around): the model must count them as the kernel
/// does. Before the program's segments were mapped from their files the model took a fault
/// on every page of code: this run was +43% over the kernel (cc1's 33 MB of text: +169%);
/// since, it is within 3% here. 10% leaves room for the kernel's own run-to-run
/// noise on another machine without letting that error back in.
#[test]
fn an_interpreter_faults_as_the_kernel_counts_at_4k() {
    let python = Path::new("/usr/bin/python3");
    if !python.exists() {
        eprintln!("skipped: no /usr/bin/python3");
        return;
    }
    let Some((_serial, dir)) = guarded("interpreter") else {
        return;
    };
    let json = dir.join("v.json");
    let out = pagelab()
        .args(["validate", "--pages", "4K", "--repeat", "3"])
        .args(["--tolerance", "10%", "--json"])
        .arg(&json)
        .arg("--")
        .arg(python)
        .args([
            "-c",
            "import json, decimal; print(len(json.dumps(list(range(1000)))))",
        ])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    let r: pagelab_report::validate::ValidateResult =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(r.cases.len(), 2, "{stdout}");
    for c in &r.cases {
        // Hundreds of file pages: a model that faulted on each would be far over.
        assert!(c.kernel.faults > 300, "{c:?}");
        let diff = c.model.faults.abs_diff(c.kernel.faults) as f64 / c.kernel.faults as f64;
        assert!(diff <= 0.10, "{c:?}");
    }
}

/// The per-process allocation verdict on a real program against the real kernel: the large
/// anonymous folios `ls /` maps at its exit, read from pagemap and kpageflags at its ptrace
/// exit stop, and the model's at its exit record. On Linux 6.18 both are one 64K folio under
/// 64K always (idle and at load 8, every repeat, sessions 12 and 13) and none under 2M
/// always (no anonymous mapping of ls holds an aligned 2M range: before the initial stack
/// was mapped, the model put a 2M page there). The kernel's figure is read per run: each
/// must equal the model's, as the count at exit does not move with the machine's load.
#[test]
fn ls_maps_the_kernels_large_folios_at_exit() {
    let k64 = pagelab_core::PageSize::from_shift(16).unwrap();
    if let Err(why) = pagelab_lab::sysfs::Sysfs::host_for(&[k64, pagelab_core::PageSize::M2]) {
        eprintln!("skipped: {why}");
        return;
    }
    let Some((_serial, dir)) = guarded("exit-folios") else {
        return;
    };
    let r = validated(
        &dir,
        &[
            "--pages", "64K", "--pages", "2M", "--thp", "always", "--repeat", "2",
        ],
        &["ls", "/"],
    );
    let folios = |c: &pagelab_report::validate::Counts| {
        let f = c
            .exit_folios
            .clone()
            .expect("folios at exit are counted as root");
        f.into_iter().filter(|&(_, n)| n > 0).collect::<Vec<_>>()
    };
    let one = vec![("64K".to_string(), 1)];
    for (c, want) in r.cases.iter().zip([one, Vec::new()]) {
        assert_eq!(folios(&c.model), want, "model, {}: {c:?}", c.config);
        for k in &c.kernel_runs {
            assert_eq!(folios(k), want, "kernel, {}: {c:?}", c.config);
        }
    }
    assert_eq!(r.cases.len(), 2);
}

/// dash runs a simple command with `vfork`: the child runs in the shell's address space
/// until its exec and takes no fault of its own before it (perf on Linux 6.18: 0). QEMU runs
/// vfork as a plain fork; the capture records the clone flags the shell asked for, and the
/// model runs the child in the shell's space with the shell held until the exec (kernel/fork.c:
/// copy_mm with CLONE_VM, mm_release and vfork_done). Measured: model 164 against the
/// kernel's 160..161 (+2.5%); with the child modelled as a fork the model took 177 (+10.6%),
/// which this bound refuses.
#[test]
fn a_vfork_child_runs_in_the_shells_address_space() {
    let dash = Path::new("/usr/bin/dash");
    if !dash.exists() {
        eprintln!("skipped: no /usr/bin/dash (the shell that vforks for a simple command)");
        return;
    }
    let Some((_serial, dir)) = captured_and_guarded("vfork") else {
        return;
    };
    let json = dir.join("v.json");
    let out = pagelab()
        .args(["validate", "--pages", "4K", "--thp", "madvise"])
        .args(["--repeat", "3", "--tolerance", "5%", "--json"])
        .arg(&json)
        .arg("--")
        .arg(dash)
        .args(["-c", "ls /"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let r: pagelab_report::validate::ValidateResult =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let c = &r.cases[0];
    // The kernel's count moves by a fault or two between runs: the model must be within 5%
    // of one of them.
    let near = |k: u64| c.model.faults.abs_diff(k) * 100 <= k * 5;
    assert!(
        c.kernel_runs.iter().any(|k| near(k.faults)),
        "{c:?}\n{stdout}\n{stderr}"
    );
}

/// A read-modify-write instruction's first touch of a page is one write fault natively
/// (`addl $1, (page)` on 2000 fresh pages: 2070 faults in all on Linux 6.18). QEMU's plugin
/// reports it as a load then a store, which the model took as a read fault (the zero page)
/// and a write fault (4147 before the decoder made the pair one modify).
#[test]
fn a_read_modify_write_first_touch_is_one_fault() {
    let Some((_serial, dir)) = captured_and_guarded("rmw") else {
        return;
    };
    let prog = pagelab_capture::testprog_path();
    let prog = prog.to_str().unwrap();
    let r = validated(
        &dir,
        &["--pages", "4K", "--thp", "madvise"],
        &[prog, "rmw", "2000"],
    );
    let c = &r.cases[0];
    assert!(c.kernel.faults >= 2000, "{c:?}");
    assert!(
        c.model.faults.abs_diff(c.kernel.faults) * 100 <= c.kernel.faults * 5,
        "{c:?}"
    );
}
