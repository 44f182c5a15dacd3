//! `FROM..TO/STEP` in a workload parameter end to end: one `pagelab.study/1`
//! file whose results carry their value in `source.params`, a table of the
//! metric against the parameter, a plot; on Winwood et al.'s (OLS 2002) machine the
//! stride benchmark's curve breaks where the paper's Figure 4 does.

mod common;

fn pagelab(args: &[&str]) -> std::process::Output {
    common::pagelab().args(args).output().expect("pagelab runs")
}

#[test]
fn a_sweep_of_the_heap_is_one_study_with_figure_4s_breaks() {
    let dir = common::tmp("sweep");
    let (json, svg) = (dir.join("f.json"), dir.join("f.svg"));
    let out = pagelab(&[
        "sim",
        "--machine",
        "pentium4",
        "--page-sizes",
        "4K,4M",
        "--workload",
        "stride:heap=3584K..11M/128K,every=16,iters=10,init=false",
        "--json",
        json.to_str().unwrap(),
        "--svg",
        svg.to_str().unwrap(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let table = String::from_utf8(out.stdout).unwrap();
    assert!(
        table.contains("heap from 3584K to 11M (61 values)"),
        "{table}"
    );
    assert!(
        table.contains("4K cycles/load  4M cycles/load  4K/4M"),
        "{table}"
    );
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(v["schema"], "pagelab.study/1");
    let results = v["results"].as_array().unwrap();
    assert_eq!(results.len(), 61);
    assert_eq!(results[4]["source"]["params"]["heap"], "4M");
    let mut k4 = Vec::new();
    let mut m4 = Vec::new();
    for r in results {
        let heap = r["source"]["params"]["heap"].as_str().unwrap();
        let bytes = pagelab_core::parse_bytes(heap).unwrap();
        let y = |i: usize| r["runs"][i]["cost"]["cycles_per_load"].as_f64().unwrap();
        assert!(y(1) <= y(0), "4M slower at {heap}");
        k4.push((bytes, y(0)));
        m4.push((bytes, y(1)));
    }
    const M: u64 = 1 << 20;
    // The workload's heap (0x7f3a1c5e3010) puts each PTE line two L1 sets
    // before its data line: the 4K slope ends at 94 touched pages, 5.875M
    // (the paper's 2M-aligned heap: 96, 6M; crates/engine/tests/cost.rs).
    assert_eq!(
        pagelab_report::curve::breaks(&k4, 0.05)[..2],
        [4 * M, 6 * M - 128 * 1024],
        "{k4:?}"
    );
    assert_eq!(
        pagelab_report::curve::breaks(&m4, 0.05)[..2],
        [8 * M, 10 * M],
        "{m4:?}"
    );
    let plot = std::fs::read_to_string(&svg).unwrap();
    assert!(plot.contains("memory cycles per load against heap") && plot.contains("4K/4M"));
}

#[test]
fn bad_sweeps_are_refused_naming_the_parameter() {
    let out = pagelab(&["sim", "--workload", "stride:heap=4M..1M/1M"]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(
        err.contains("parameter `heap`: FROM 4M is above TO 1M"),
        "{err}"
    );
    let out = pagelab(&["study", "stride:heap=1M..4M/1M", "--out", "/nonexistent/x"]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(
        err.contains(
            "stride:heap=1M..4M/1M: a FROM..TO/STEP sweep runs under `pagelab sim --workload`"
        ),
        "{err}"
    );
}
