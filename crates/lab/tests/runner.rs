//! The runner on real programs: what it measures, the environment of a configuration, the
//! shim under 2M madvise (root and THP only), and summaries over repetitions.

use pagelab_core::PageSize;
use pagelab_lab::runner::{self, RunSpec};
use pagelab_lab::session::KnobSession;
use pagelab_lab::shim;
use pagelab_lab::sysfs::{Sysfs, ThpMode};
use pagelab_report::{LabConfig, Measurement};
use std::ffi::OsString;
use std::sync::Mutex;

/// Tests that hold the knobs run one at a time (the session lock would serialize them too,
/// but a test's view of the kernel counters must not include another test's run).
static KNOBS: Mutex<()> = Mutex::new(());

fn spec(argv: &[&str]) -> RunSpec {
    RunSpec {
        argv: argv.iter().map(OsString::from).collect(),
        env: Vec::new(),
        capture_stdout: true,
        no_randomize: false,
        folios_at_exit: false,
    }
}

fn testprog(args: &[&str]) -> RunSpec {
    let mut s = spec(args);
    s.argv.insert(0, shim::testprog_path().into());
    s
}

/// Why the knob tests cannot run here, if they cannot.
fn no_knobs() -> Option<String> {
    Sysfs::host_for(&[PageSize::M2]).err()
}

#[test]
fn measures_exit_code_time_and_faults() {
    let sysfs = Sysfs::host();
    let out = runner::run_once(&sysfs, &spec(&["sh", "-c", "exit 3"]), None).unwrap();
    let m = &out.measurement;
    assert_eq!((m.exit.code, m.exit.signal), (Some(3), None));
    assert!(m.wall_seconds > 0.0 && m.wall_seconds < 10.0, "{m:?}");
    assert!(m.faults > 0, "{m:?}");
    assert!(m.peak_rss_bytes > 0, "{m:?}");
    assert_eq!(m.hw.len(), 4, "{m:?}");
    if m.hw.values().any(Option::is_none) {
        assert!(m.hw_unavailable.is_some(), "{m:?}");
    }
    assert_eq!(out.interrupted, None);

    // A program touching 8M takes at least one fault per 4K page it did not get larger.
    let out = runner::run_once(&sysfs, &testprog(&["mmap", "8M"]), None).unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.trim().ends_with(" 8388608"), "{text}");
    let m = &out.measurement;
    assert_eq!(m.exit.code, Some(0));
    let large: u64 = m
        .faults_by_size
        .iter()
        .map(|(size, n)| n * (size.parse::<PageSize>().unwrap().bytes() / 4096))
        .sum();
    assert!(m.faults + large >= 2048, "{m:?}");
}

#[test]
fn a_signal_death_and_a_missing_program_are_reported() {
    let sysfs = Sysfs::host();
    let out = runner::run_once(&sysfs, &spec(&["sh", "-c", "kill -TERM $$"]), None).unwrap();
    assert_eq!(out.measurement.exit.signal, Some(libc::SIGTERM));
    assert_eq!(out.measurement.exit.code, None);
    let err = runner::run_once(&sysfs, &spec(&["/nonexistent/prog"]), None).unwrap_err();
    let text = format!("{err:#}");
    assert!(
        text.contains("cannot run `/nonexistent/prog`") && text.contains("No such file"),
        "{text}"
    );
    let err = runner::run_once(&sysfs, &spec(&[]), None).unwrap_err();
    assert!(err.to_string().contains("no program"), "{err}");
}

#[test]
fn config_env_asks_glibc_and_the_shim() {
    let k64: PageSize = "64K".parse().unwrap();
    let get = |env: &[(OsString, OsString)], k: &str| {
        env.iter()
            .find(|(key, _)| key == k)
            .map(|(_, v)| v.to_string_lossy().into_owned())
    };
    let env = runner::config_env(&[k64, PageSize::M2], ThpMode::Madvise, None, true).unwrap();
    assert!(get(&env, "GLIBC_TUNABLES")
        .unwrap()
        .ends_with("glibc.malloc.hugetlb=1"));
    assert!(get(&env, "LD_PRELOAD")
        .unwrap()
        .contains("libpagelab_shim-"));
    assert_eq!(get(&env, "PAGELAB_SHIM_ADVISE").as_deref(), Some("1"));
    assert_eq!(get(&env, "PAGELAB_SHIM_MIN").as_deref(), Some("65536"));

    let env = runner::config_env(&[k64], ThpMode::Always, None, false).unwrap();
    assert!(env.is_empty(), "always mode needs no advice: {env:?}");

    let env =
        runner::config_env(&[PageSize::K4], ThpMode::Madvise, Some(PageSize::M2), true).unwrap();
    assert!(get(&env, "GLIBC_TUNABLES")
        .unwrap()
        .ends_with("glibc.malloc.hugetlb=2097152"));
    assert_eq!(
        get(&env, "PAGELAB_SHIM_HUGETLB").as_deref(),
        Some("2097152")
    );
    assert_eq!(get(&env, "PAGELAB_SHIM_ADVISE"), None);

    assert_eq!(
        runner::merge_tunables(
            "glibc.malloc.hugetlb=1:glibc.malloc.arena_max=2",
            "glibc.malloc.hugetlb=2097152"
        ),
        "glibc.malloc.arena_max=2:glibc.malloc.hugetlb=2097152"
    );
    assert_eq!(
        runner::merge_tunables("", "glibc.malloc.hugetlb=1"),
        "glibc.malloc.hugetlb=1"
    );
}

#[test]
fn labels_read_like_people_write_them() {
    let k64: PageSize = "64K".parse().unwrap();
    assert_eq!(runner::config_label(&[PageSize::K4], None), "4K");
    assert_eq!(runner::config_label(&[k64, PageSize::M2], None), "64K+2M");
    assert_eq!(runner::config_label(&[], Some(PageSize::G1)), "1G hugetlb");
}

#[test]
fn summarize_gives_medians_spreads_and_speedups() {
    let run = |wall: f64, alloc64: Option<u64>, cycles: Option<u64>| {
        let mut m = Measurement {
            wall_seconds: wall,
            faults: 10,
            ..Default::default()
        };
        if let Some(n) = alloc64 {
            m.faults_by_size.insert("64K".into(), n);
        }
        m.hw.insert("cycles".into(), cycles);
        m
    };
    let k64: PageSize = "64K".parse().unwrap();
    let mut configs = vec![
        LabConfig {
            subject: "prog".into(),
            label: "4K".into(),
            pages: vec![PageSize::K4],
            runs: vec![
                run(2.0, None, Some(5)),
                run(4.0, None, Some(7)),
                run(3.0, None, Some(6)),
            ],
            ..Default::default()
        },
        LabConfig {
            subject: "prog".into(),
            label: "64K".into(),
            pages: vec![k64],
            runs: vec![run(1.0, Some(4), None), run(2.0, None, Some(1))],
            ..Default::default()
        },
        LabConfig {
            subject: "other".into(),
            label: "64K".into(),
            pages: vec![k64],
            runs: vec![run(1.0, None, None)],
            ..Default::default()
        },
    ];
    runner::summarize(&mut configs);
    let wall = configs[0].summary["wall_seconds"];
    assert_eq!((wall.median, wall.min, wall.max), (3.0, 2.0, 4.0));
    assert!((wall.spread - 2.0 / 3.0).abs() < 1e-12);
    assert_eq!(configs[0].summary["hw/cycles"].median, 6.0);
    assert_eq!(configs[0].speedup_vs_4k, Some(1.0));
    assert_eq!(configs[1].summary["wall_seconds"].median, 1.5);
    assert_eq!(configs[1].speedup_vs_4k, Some(2.0));
    // A run without the key counts 0; a counter missing from one run has no summary.
    assert_eq!(configs[1].summary["faults_by_size/64K"].median, 2.0);
    assert!(!configs[1].summary.contains_key("hw/cycles"));
    assert_eq!(
        configs[2].speedup_vs_4k, None,
        "no baseline of this subject"
    );
}

/// The shim under 2M THP in madvise mode: the program's own mmap is advised, so the kernel
/// allocates 2M pages for it; without the shim (glibc's tunable does not reach a direct
/// mmap) it allocates none.
#[test]
fn the_shim_gets_2m_pages_for_a_direct_mmap_in_madvise_mode() {
    if let Some(why) = no_knobs() {
        eprintln!("skipped: {why}");
        return;
    }
    let _serial = KNOBS.lock().unwrap_or_else(|p| p.into_inner());
    let sysfs = Sysfs::host();
    let mut session = KnobSession::begin(&sysfs).unwrap();
    session
        .configure(&[PageSize::M2], ThpMode::Madvise)
        .unwrap();
    let run = |shim: bool| {
        let mut s = testprog(&["mmap", "8M"]);
        s.env = runner::config_env(&[PageSize::M2], ThpMode::Madvise, None, shim).unwrap();
        runner::run_once(&sysfs, &s, None).unwrap().measurement
    };
    let with = run(true);
    let without = run(false);
    session.restore().unwrap();

    assert_eq!(with.exit.code, Some(0));
    let allocated = with.faults_by_size.get("2M").copied().unwrap_or(0);
    // 8M at any 4K alignment holds at least three aligned 2M pages.
    assert!(allocated >= 3, "{with:?}");
    assert!(
        with.kernel_counters
            .get("vmstat/thp_fault_alloc")
            .copied()
            .unwrap_or(0)
            >= 3,
        "{with:?}"
    );
    assert_eq!(
        with.metrics.get("shim_advised_mappings"),
        Some(&1.0),
        "{with:?}"
    );
    assert_eq!(
        with.metrics.get("shim_advised_bytes"),
        Some(&8388608.0),
        "{with:?}"
    );
    assert!(with.faults < without.faults, "{with:?}\n{without:?}");
    assert_eq!(without.faults_by_size.get("2M"), None, "{without:?}");
    assert!(
        !without.metrics.contains_key("shim_processes"),
        "{without:?}"
    );
}

/// The shim maps a direct mmap from a grown 2M hugetlb pool, rounded up to whole pages, and
/// the program's own munmap of its unrounded length still succeeds.
#[test]
fn the_shim_maps_from_a_hugetlb_pool() {
    if let Some(why) = no_knobs() {
        eprintln!("skipped: {why}");
        return;
    }
    let sysfs = Sysfs::host();
    if !sysfs.hugetlb_sizes().contains(&PageSize::M2) {
        eprintln!("skipped: no 2M hugetlb pool");
        return;
    }
    let _serial = KNOBS.lock().unwrap_or_else(|p| p.into_inner());
    let mut session = KnobSession::begin(&sysfs).unwrap();
    session.configure(&[PageSize::K4], ThpMode::Always).unwrap();
    let got = match session.grow_hugetlb(PageSize::M2, 4) {
        Ok(got) => got,
        Err(e) => {
            eprintln!("skipped: {e:#}");
            return;
        }
    };
    let mut s = testprog(&["mmap", "3M"]);
    s.env = runner::config_env(&[PageSize::K4], ThpMode::Always, Some(PageSize::M2), true).unwrap();
    let m = runner::run_once(&sysfs, &s, None).unwrap().measurement;
    session.restore().unwrap();

    assert!(got >= 4);
    assert_eq!(
        m.exit.code,
        Some(0),
        "the program's munmap(3M) failed: {m:?}"
    );
    assert_eq!(m.metrics.get("shim_hugetlb_mappings"), Some(&1.0), "{m:?}");
    assert_eq!(
        m.metrics.get("shim_hugetlb_bytes"),
        Some(&4194304.0),
        "{m:?}"
    );
    assert_eq!(m.metrics.get("shim_hugetlb_fallbacks"), Some(&0.0), "{m:?}");
    // 768 4K pages touched through two 2M pages: two faults instead of 768.
    assert!(m.faults < 400, "{m:?}");
}
