//! `FROM..TO/STEP` in a workload parameter end to end: one `pagelab.study/1`
//! file whose results carry their value in `source.params`, a table of the
//! metric against the parameter, a plot; on Winwood et al.'s (OLS 2002) machine the
//! stride benchmark's curve breaks where the paper's Figure 4 does.

mod common;

use std::path::PathBuf;

fn pagelab(args: &[&str]) -> std::process::Output {
    common::pagelab().args(args).output().expect("pagelab runs")
}

/// Runs `pagelab sim ARGS --json JSON --html HTML` (in `dir`), which must
/// succeed; gives its stdout and the two paths.
fn sim(dir: &std::path::Path, args: &[&str]) -> (String, PathBuf, PathBuf) {
    let (json, html) = (dir.join("r.json"), dir.join("r.html"));
    let out = common::pagelab()
        .arg("sim")
        .args(args)
        .arg("--json")
        .arg(&json)
        .arg("--html")
        .arg(&html)
        .output()
        .expect("pagelab runs");
    common::succeeded(&out);
    (String::from_utf8(out.stdout).unwrap(), json, html)
}

#[test]
fn a_sweep_of_the_heap_is_one_study_with_figure_4s_breaks() {
    let dir = common::tmp("sweep");
    let svg = dir.join("f.svg");
    let (table, json, html) = sim(
        &dir,
        &[
            "--machine",
            "pentium4",
            "--page-sizes",
            "4K,4M",
            "--workload",
            "stride:heap=3584K..11M/128K,every=16,iters=10,init=false",
            "--svg",
            svg.to_str().unwrap(),
        ],
    );
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

    // The HTML report draws the same numbers: each line's points are the
    // results' cycles per load, and the ratio plot 4K's over 4M's.
    let plots = html_plots(&html);
    let curve = plot_titled(&plots, "stride: memory cycles per load against heap");
    same(&points(curve, "4K"), &k4);
    same(&points(curve, "4M"), &m4);
    let ratio = plot_titled(&plots, "stride: memory cycles per load ratio against heap");
    let want: Vec<(u64, f64)> = k4.iter().zip(&m4).map(|(a, b)| (a.0, a.1 / b.1)).collect();
    same(&points(ratio, "4K/4M"), &want);
    assert_eq!(curve["x_unit"], "bytes");
}

#[test]
fn a_policy_sweep_without_caches_is_drawn_as_its_miss_rates() {
    let dir = common::tmp("sweep-policy");
    let (_, json, html) = sim(
        &dir,
        &[
            "--policy",
            "base:4K",
            "--policy",
            "linux-thp:enabled=always",
            "--workload",
            "gups:table=4M,updates=10000..40000/10000",
        ],
    );
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let rate = |policy: &str| -> Vec<(u64, f64)> {
        let results = v["results"].as_array().unwrap();
        results
            .iter()
            .map(|r| {
                let updates = r["source"]["params"]["updates"].as_str().unwrap();
                let run = r["runs"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .find(|run| run["policy"] == policy)
                    .unwrap();
                let (a, m) = (
                    run["dtlb_accesses"].as_f64().unwrap(),
                    run["dtlb_misses"].as_f64().unwrap(),
                );
                (updates.parse().unwrap(), 100.0 * m / a)
            })
            .collect()
    };
    let plots = html_plots(&html);
    let curve = plot_titled(&plots, "gups: dTLB miss % against updates");
    let base = rate("base:4K");
    assert_eq!(base.len(), 4);
    same(&points(curve, "base:4K"), &base);
    let thp = rate("linux-thp:enabled=always");
    same(&points(curve, "linux-thp:enabled=always"), &thp);
}

/// The same points, up to the last bits serde_json's float parsing may lose.
fn same(got: &[(u64, f64)], want: &[(u64, f64)]) {
    assert_eq!(got.len(), want.len(), "{got:?} against {want:?}");
    for (g, w) in got.iter().zip(want) {
        assert!(
            g.0 == w.0 && (g.1 - w.1).abs() <= 1e-12 * w.1.abs(),
            "{g:?} against {w:?}"
        );
    }
}

/// The plots' data a report embeds.
fn html_plots(html: &std::path::Path) -> Vec<serde_json::Value> {
    let text = std::fs::read_to_string(html).unwrap();
    let open = "id=\"pagelab-plots\">";
    let start = text.find(open).expect("the plots' data") + open.len();
    let end = start + text[start..].find("</script>").unwrap();
    serde_json::from_str(&text[start..end]).unwrap()
}

fn plot_titled<'a>(plots: &'a [serde_json::Value], title: &str) -> &'a serde_json::Value {
    let titles: Vec<&serde_json::Value> = plots.iter().map(|p| &p["title"]).collect();
    plots
        .iter()
        .find(|p| p["title"] == title)
        .unwrap_or_else(|| panic!("no plot `{title}` among {titles:?}"))
}

/// A line's points as (parameter value, metric).
fn points(plot: &serde_json::Value, series: &str) -> Vec<(u64, f64)> {
    let s = plot["series"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == series)
        .unwrap_or_else(|| panic!("no series {series} in {plot}"));
    let pts = s["points"].as_array().unwrap();
    pts.iter()
        .map(|p| (p[0].as_f64().unwrap() as u64, p[1].as_f64().unwrap()))
        .collect()
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
