//! The LD_PRELOAD shim on the test program: it loads, advises what it should, counts, and
//! falls back when a hugetlb pool is empty.

use pagelab_lab::shim::{shim_bytes, shim_path, testprog_path, ShimReport};
use std::fs;

#[test]
fn the_shim_is_written_once_and_loads() {
    let a = shim_path().unwrap();
    let b = shim_path().unwrap();
    assert_eq!(a, b);
    assert_eq!(fs::read(&a).unwrap(), shim_bytes());
    let out = std::process::Command::new(testprog_path())
        .args(["mmap", "1M"])
        .env("LD_PRELOAD", &a)
        .env("PAGELAB_SHIM_ADVISE", "1")
        .env("PAGELAB_SHIM_REPORT", "2")
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let r = ShimReport::parse(&String::from_utf8_lossy(&out.stderr));
    assert_eq!(
        (r.processes, r.advised_mappings, r.advised_bytes),
        (1, 1, 1 << 20),
        "{out:?}"
    );
    assert!(r.peak_rss_bytes >= 1 << 20, "{r:?}");
}

/// Runs the test program under the shim with `env`; its report.
fn shim_run(args: &[&str], env: &[(&str, &str)]) -> ShimReport {
    let out = std::process::Command::new(testprog_path())
        .args(args)
        .env("LD_PRELOAD", shim_path().unwrap())
        .env("PAGELAB_SHIM_REPORT", "2")
        .envs(env.iter().copied())
        .output()
        .unwrap();
    assert!(out.status.success(), "{args:?}: {out:?}");
    ShimReport::parse(&String::from_utf8_lossy(&out.stderr))
}

#[test]
fn heap_growth_mremap_and_the_threshold() {
    let advise = [("PAGELAB_SHIM_ADVISE", "1"), ("PAGELAB_SHIM_MIN", "2M")];
    let r = shim_run(&["sbrk", "4M"], &advise);
    assert_eq!((r.advised_mappings, r.advised_bytes), (1, 4 << 20), "{r:?}");
    // The 64K mapping is below the threshold; its growth to 8M is advised.
    let r = shim_run(&["mremap", "8M"], &advise);
    assert_eq!((r.advised_mappings, r.advised_bytes), (1, 8 << 20), "{r:?}");
    let r = shim_run(&["mmap", "1M"], &advise);
    assert_eq!(r.advised_mappings, 0, "below PAGELAB_SHIM_MIN: {r:?}");
    // Without PAGELAB_SHIM_ADVISE the shim only counts.
    let r = shim_run(&["mmap", "8M"], &[]);
    assert_eq!((r.processes, r.advised_mappings), (1, 0), "{r:?}");
}

#[test]
fn an_empty_pool_falls_back_to_normal_pages() {
    let free = "/sys/kernel/mm/hugepages/hugepages-2048kB/free_hugepages";
    match fs::read_to_string(free).map(|t| t.trim().to_string()) {
        Ok(n) if n == "0" => {}
        other => {
            eprintln!("skipped: the 2M pool is not known to be empty ({other:?})");
            return;
        }
    }
    let r = shim_run(&["mmap", "4M"], &[("PAGELAB_SHIM_HUGETLB", "2M")]);
    assert_eq!((r.hugetlb_mappings, r.hugetlb_fallbacks), (0, 1), "{r:?}");
}
