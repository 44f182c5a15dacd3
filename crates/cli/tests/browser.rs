//! The HTML report in a real browser: headless Chromium opens each kind of report (a study,
//! sim with policies, run, bench, validate, a sweep, two results side by side) and the
//! test checks that the scripts ran without a console message, drew every plot, that the
//! legend toggles and the log/linear switch and table sorting work (the report's own
//! `#selftest`, which clicks them as a person would), that the answer in the page is the
//! one computed from the JSON, and that nothing can be fetched (a CSP forbidding it, no
//! URL in any attribute). A screenshot of each is kept in
//! `target/report-screenshots/` for CI to keep as a file of the run.
//!
//! Skipped, saying why, where Chromium is missing (`bash scripts/setup.sh` installs it).

mod common;

use common::{data, pagelab, tmp};

use pagelab_report::recommend::Rule;
use std::path::{Path, PathBuf};
use std::process::Command;

fn run(cmd: &mut Command) {
    let out = cmd.output().expect("pagelab runs");
    assert!(
        out.status.success(),
        "pagelab failed: {}\nstderr: {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
}

fn chromium() -> Option<PathBuf> {
    for name in ["chromium", "chromium-browser", "google-chrome"] {
        if let Ok(out) = Command::new("sh")
            .args(["-c", &format!("command -v {name}")])
            .output()
        {
            let path = String::from_utf8_lossy(&out.stdout).trim().to_string();
            if out.status.success() && !path.is_empty() {
                return Some(PathBuf::from(path));
            }
        }
    }
    eprintln!(
        "browser tests skipped: no chromium, chromium-browser or google-chrome in PATH \
         (bash scripts/setup.sh installs Debian's chromium)"
    );
    None
}

fn headless(chrome: &Path) -> Command {
    let mut c = Command::new(chrome);
    c.args([
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--no-first-run",
        "--hide-scrollbars",
        "--virtual-time-budget=10000",
    ]);
    c
}

/// The attribute `name` of the first `<tag ...>` in `dom`.
fn attr<'a>(dom: &'a str, tag: &str, name: &str) -> Option<&'a str> {
    let start = dom.find(&format!("<{tag}"))?;
    let end = start + dom[start..].find('>')?;
    let key = format!("{name}=\"");
    let at = start + dom[start..end].find(&key)? + key.len();
    Some(&dom[at..at + dom[at..].find('"')?])
}

fn unescape(text: &str) -> String {
    text.replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&#39;", "'")
        .replace("&amp;", "&")
}

/// Opens `html` headless, checks it, and saves a screenshot as `shots/<kind>.png`.
/// Returns the time the scripts took, in milliseconds.
fn check(chrome: &Path, html: &Path, kind: &str, results: &[&Path]) -> u64 {
    let source = std::fs::read_to_string(html).unwrap();
    assert!(source.contains("Content-Security-Policy\" content=\"default-src 'none'"));
    for needle in [" src=", " href=", "url(", "@import"] {
        assert!(!source.contains(needle), "{kind}: `{needle}` in the report");
    }
    let url = format!("file://{}#selftest", html.display());
    let out = headless(chrome)
        .args(["--enable-logging=stderr", "--v=0", "--dump-dom", &url])
        .output()
        .expect("chromium runs");
    let dom = String::from_utf8_lossy(&out.stdout);
    let log = String::from_utf8_lossy(&out.stderr);
    let console: Vec<&str> = log.lines().filter(|l| l.contains("CONSOLE")).collect();
    assert!(
        console.is_empty(),
        "{kind}: console messages:\n{}",
        console.join("\n")
    );
    let figures = dom.matches("<figure class=\"plot\"").count();
    assert!(figures > 0, "{kind}: no plot in\n{dom}");
    assert_eq!(
        attr(&dom, "body", "data-ready"),
        Some(figures.to_string().as_str()),
        "{kind}"
    );
    assert_eq!(
        attr(&dom, "body", "data-selftest"),
        Some("ok"),
        "{kind}: {dom}"
    );
    let drawn: Vec<u64> = dom
        .split("data-drawn=\"")
        .skip(1)
        .map(|s| s[..s.find('"').unwrap()].parse().unwrap())
        .collect();
    assert_eq!(drawn.len(), figures, "{kind}: every plot drawn");
    assert!(
        drawn.iter().all(|&n| n > 0),
        "{kind}: an empty plot: {drawn:?}"
    );
    assert!(dom.contains("<svg"), "{kind}");
    // The answer in the page is the one the JSON gives.
    let shown: Vec<String> = dom
        .split("<li class=\"rec\"")
        .skip(1)
        .map(|s| {
            let s = &s[s.find('>').unwrap() + 1..];
            unescape(&s[..s.find("</li>").unwrap()])
        })
        .collect();
    let expected: Vec<String> = results
        .iter()
        .flat_map(|p| {
            pagelab_report::load_any(p)
                .unwrap()
                .recommendations(&Rule::default())
        })
        .map(|r| r.sentence)
        .collect();
    assert!(!expected.is_empty(), "{kind}");
    assert_eq!(
        shown, expected,
        "{kind}: the answer differs from the JSON's"
    );
    let shots = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("../report-screenshots");
    std::fs::create_dir_all(&shots).unwrap();
    let shot = shots.join(format!("{kind}.png"));
    let _ = std::fs::remove_file(&shot);
    let out = headless(chrome)
        .args([
            "--window-size=1280,1600",
            &format!("--screenshot={}", shot.display()),
            &format!("file://{}", html.display()),
        ])
        .output()
        .expect("chromium runs");
    assert!(
        std::fs::metadata(&shot)
            .map(|m| m.len() > 10_000)
            .unwrap_or(false),
        "{kind}: no screenshot: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    attr(&dom, "body", "data-render-ms")
        .unwrap()
        .parse()
        .unwrap()
}

#[test]
fn every_kind_of_report_renders_in_a_real_browser() {
    let Some(chrome) = chromium() else { return };
    let dir = tmp("all");

    // The default study: report.html beside result.json, at most 2 MB, drawn in under 2 s.
    let study = dir.join("study");
    run(pagelab().args(["study", "-o"]).arg(&study));
    let html = study.join("report.html");
    let size = std::fs::metadata(&html).unwrap().len();
    assert!(
        size <= 2 << 20,
        "the default study's report is {size} bytes"
    );
    let json = study.join("result.json");
    let ms = check(&chrome, &html, "study", &[&json]);
    assert!(ms < 2000, "the default study's report took {ms} ms to draw");

    // Every policy side by side.
    let sim = dir.join("policies.json");
    let sim_html = dir.join("policies.html");
    let mut cmd = pagelab();
    cmd.args([
        "sim",
        "--workload",
        "gups:table=16M,updates=100000",
        "--memory",
        "1G",
    ]);
    for p in [
        "base:4K",
        "base:64K",
        "linux-thp:enabled=always",
        "eager",
        "explicit",
        "reservation",
        "relocation",
    ] {
        cmd.args(["--policy", p]);
    }
    run(cmd.arg("--json").arg(&sim).arg("--html").arg(&sim_html));
    let html_text = std::fs::read_to_string(&sim_html).unwrap();
    assert!(html_text.contains("faults by the page size they mapped"));
    check(&chrome, &sim_html, "policies", &[&sim]);

    // A sweep: one workload at three table sizes, a curve per page size and their ratios.
    let sweep = dir.join("sweep");
    run(pagelab()
        .args(["study", "--page-sizes", "4K,64K,2M", "-o"])
        .arg(&sweep)
        .args([
            "gups:table=1M,updates=50000",
            "gups:table=4M,updates=50000",
            "gups:table=16M,updates=50000",
        ]));
    let sweep_html = sweep.join("report.html");
    assert!(std::fs::read_to_string(&sweep_html)
        .unwrap()
        .contains("dTLB miss % against table"));
    check(&chrome, &sweep_html, "sweep", &[&sweep.join("result.json")]);

    // The lab's results, measured on a real machine (tests/data/lab), through pagelab report.
    for kind in ["run", "bench", "validate", "validate-program"] {
        let result = data(&format!("lab/{kind}.json"));
        let html = dir.join(format!("{kind}.html"));
        run(pagelab().arg("report").arg(&result).arg("-o").arg(&html));
        check(&chrome, &html, kind, &[&result]);
    }

    // Before and after, side by side.
    let side = dir.join("side.html");
    run(pagelab()
        .arg("report")
        .arg(&json)
        .arg(&sim)
        .arg("-o")
        .arg(&side));
    assert!(std::fs::read_to_string(&side)
        .unwrap()
        .contains("repeat(2, minmax(0, 1fr))"));
    check(&chrome, &side, "side-by-side", &[&json, &sim]);
}
