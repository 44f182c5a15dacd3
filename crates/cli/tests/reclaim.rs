//! End to end: `pagelab sim --policy ... --memory 64M` on a workload larger
//! than memory reclaims, swaps and refaults, and says so in the JSON result;
//! a `--phys` file chooses the watermarks and how superpages are reclaimed.

mod common;

use common::{pagelab, succeeded, tmp};

use std::path::{Path, PathBuf};

fn sim(args: &[&str], json: &Path) -> serde_json::Value {
    let out = pagelab()
        .arg("sim")
        .args(args)
        .arg("--json")
        .arg(json)
        .output()
        .expect("pagelab runs");
    succeeded(&out);
    serde_json::from_str(&std::fs::read_to_string(json).unwrap()).unwrap()
}

fn n(run: &serde_json::Value, key: &str) -> u64 {
    run[key]
        .as_u64()
        .unwrap_or_else(|| panic!("{key} missing in {run}"))
}

/// 96M touched twice, one word per 4K page, in 64M of memory.
const WORKLOAD: &str = "stride:heap=96M,iters=2,init=false";

#[test]
fn a_workload_larger_than_memory_reclaims_and_refaults() {
    let dir = tmp("memory");
    let r = sim(
        &[
            "--workload",
            WORKLOAD,
            "--policy",
            "base:4K",
            "--policy",
            "linux-thp:enabled=always",
            "--memory",
            "64M",
        ],
        &dir.join("r.json"),
    );
    for run in r["runs"].as_array().unwrap() {
        let policy = run["policy"].as_str().unwrap();
        assert!(n(run, "reclaimed_bytes") >= 32 << 20, "{policy}: {run}");
        assert_eq!(
            n(run, "reclaimed_bytes"),
            n(run, "swapped_out_bytes"),
            "{policy}"
        );
        assert!(n(run, "kswapd_runs") > 0, "{policy}");
        // The second pass finds the first pages swapped out.
        assert!(n(run, "major_faults") > 0, "{policy}");
        assert_eq!(n(run, "major_faults"), n(run, "swap_in_faults"), "{policy}");
        assert!(n(run, "swapped_in_bytes") > 0, "{policy}");
        assert!(n(run, "rss_bytes") <= 64 << 20, "{policy}");
        assert!(n(run, "swap_bytes") > 0, "{policy}");
    }
    // With 4G, the same workload never reclaims.
    let r = sim(
        &["--workload", WORKLOAD, "--policy", "base:4K"],
        &dir.join("big.json"),
    );
    assert_eq!(n(&r["runs"][0], "reclaimed_bytes"), 0);
    assert_eq!(n(&r["runs"][0], "major_faults"), 0);
}

#[test]
fn a_phys_file_splits_superpages_before_reclaim() {
    let dir = tmp("split");
    let phys =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../configs/phys/small-split.toml");
    let r = sim(
        &[
            "--workload",
            WORKLOAD,
            "--policy",
            "linux-thp:enabled=always",
            "--phys",
            phys.to_str().unwrap(),
        ],
        &dir.join("r.json"),
    );
    let run = &r["runs"][0];
    assert!(n(run, "reclaim_splits") > 0, "{run}");
    assert!(n(run, "demotions") >= n(run, "reclaim_splits"), "{run}");
    assert!(n(run, "swapped_out_bytes") > 0, "{run}");
    // A bad value names the field and what is allowed.
    let bad = dir.join("bad.toml");
    let refused = |toml: &str| {
        std::fs::write(&bad, toml).unwrap();
        let out = pagelab()
            .args(["sim", "--workload", "gups", "--policy", "eager", "--phys"])
            .arg(&bad)
            .output()
            .unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let (code, err) = refused("memory = \"64M\"\nreclaim_superpages = \"half\"\n");
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains("reclaim_superpages") && err.contains("whole"),
        "{err}"
    );
    let (_, err) = refused("memory = \"64M\"\nwatermarks = { low = \"4M\", high = \"2M\" }\n");
    assert!(
        err.contains("watermarks.high") && err.contains("not above low"),
        "{err}"
    );
}
