//! Results must not drift: the JSON of the default study, of `sim` under every
//! TLB preset, and of every policy on the bundled real trace and on each
//! built-in workload (plus the phys layouts and a reclaiming run) is compared
//! byte for byte with the files in `tests/data/golden/`, apart from
//! `elapsed_seconds`, whose value is written as 0 on both sides.
//!
//! A change that is meant to change results regenerates the files with
//! `PAGELAB_BLESS=1 cargo test -p pagelab --test golden` and says why in its
//! commit; any other difference is a regression.

mod common;

use common::tmp;

use std::path::{Path, PathBuf};
use std::process::Command;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Every policy the model has, in one pass.
const POLICIES: &[&str] = &[
    "--policy",
    "base:4K",
    "--policy",
    "base:64K",
    "--policy",
    "linux-thp",
    "--policy",
    "linux-thp:enabled=always,64K=always",
    "--policy",
    "relocation",
    "--policy",
    "eager",
    "--policy",
    "explicit",
    "--policy",
    "reservation",
];

/// The built-in workloads with their default footprints and fewer iterations,
/// so that the whole file runs in seconds.
const WORKLOADS: &[(&str, &str)] = &[
    ("stride", "stride:heap=8M,every=16,iters=200"),
    ("stream", "stream:n=131072,iters=1"),
    ("gups", "gups:table=8M,updates=100000"),
    ("chase", "chase:nodes=131072,steps=100000"),
];

/// The cases: a name (the golden file's stem) and the arguments, where `@gzip`
/// is the bundled trace and `@phys/NAME` a shipped phys layout.
fn cases() -> Vec<(String, Vec<String>)> {
    let s = |v: &[&str]| v.iter().map(|a| a.to_string()).collect::<Vec<_>>();
    let mut cases = vec![("study-default".to_string(), s(&["study"]))];
    for preset in pagelab_tlb::preset_names() {
        cases.push((
            format!("sim-gzip-{preset}"),
            s(&["sim", "--trace", "@gzip", "--tlb", preset]),
        ));
    }
    let mut gzip = s(&["sim", "--trace", "@gzip"]);
    gzip.extend(s(POLICIES));
    cases.push(("policies-gzip".to_string(), gzip));
    for (name, spec) in WORKLOADS {
        cases.push((format!("sim-{name}"), s(&["sim", "--workload", spec])));
        let mut v = s(&["sim", "--workload", spec]);
        v.extend(s(POLICIES));
        cases.push((format!("policies-{name}"), v));
    }
    // A boot-reserved zone for 2M pages, and a 64M machine that reclaims
    // (splitting superpages) under a 96M footprint.
    for (phys, spec) in [
        ("large-zone", "gups:table=16M,updates=100000"),
        ("small-split", "stride:heap=96M,iters=1,init=false"),
    ] {
        let mut v = s(&["sim", "--workload", spec]);
        v.extend(s(POLICIES));
        v.extend(s(&["--phys", &format!("@phys/{phys}")]));
        cases.push((format!("policies-{phys}"), v));
    }
    cases.push((
        "policies-reclaim-64M".to_string(),
        s(&[
            "sim",
            "--workload",
            "stride:heap=96M,iters=1,init=false",
            "--policy",
            "base:4K",
            "--policy",
            "linux-thp:enabled=always",
            "--policy",
            "relocation",
            "--memory",
            "64M",
        ]),
    ));
    cases
}

/// `text` without its `"provenance"` member (pagelab's version, the command
/// line, the host: what made the result, not the result), with the comma
/// before it; every other byte is kept.
fn without_provenance(text: &str) -> String {
    const KEY: &str = ",\n  \"provenance\": {";
    let Some(at) = text.find(KEY) else {
        return text.to_string();
    };
    let mut depth = 0usize;
    let mut in_string = false;
    let mut escaped = false;
    let start = at + KEY.len() - 1;
    for (i, c) in text[start..].char_indices() {
        match c {
            _ if escaped => escaped = false,
            '\\' if in_string => escaped = true,
            '"' => in_string = !in_string,
            '{' if !in_string => depth += 1,
            '}' if !in_string => {
                depth -= 1;
                if depth == 0 {
                    return format!("{}{}", &text[..at], &text[start + i + 1..]);
                }
            }
            _ => {}
        }
    }
    text.to_string()
}

/// `text` with the value of every `"elapsed_seconds"` written as 0; every
/// other byte is kept.
fn without_time(text: &str) -> String {
    const KEY: &str = "\"elapsed_seconds\":";
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find(KEY) {
        let after = &rest[at + KEY.len()..];
        let value_at = after.len() - after.trim_start().len();
        let value = &after[value_at..];
        let len = value
            .find(|c: char| !(c.is_ascii_alphanumeric() || "+-.".contains(c)))
            .unwrap_or(value.len());
        out.push_str(&rest[..at + KEY.len()]);
        out.push_str(&after[..value_at]);
        out.push('0');
        rest = &value[len..];
    }
    out.push_str(rest);
    out
}

/// Runs one case into `dir` and returns its JSON result, time taken out.
fn run_case(args: &[String], dir: &Path) -> String {
    // Paths relative to the repository, so that results name the same file
    // in every clone.
    let args: Vec<String> = args
        .iter()
        .map(|a| match a.as_str() {
            "@gzip" => "tests/data/gzip-9.lackey.zst".to_string(),
            a => match a.strip_prefix("@phys/") {
                Some(p) => format!("configs/phys/{p}.toml"),
                None => a.to_string(),
            },
        })
        .collect();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_pagelab"));
    cmd.current_dir(root()).args(&args);
    let result = if args[0] == "study" {
        cmd.arg("-o").arg(dir);
        dir.join("result.json")
    } else {
        let p = dir.join("result.json");
        cmd.arg("--json").arg(&p);
        p
    };
    let out = cmd.output().expect("pagelab runs");
    common::succeeded(&out);
    let text =
        std::fs::read_to_string(&result).unwrap_or_else(|e| panic!("{}: {e}", result.display()));
    without_time(&without_provenance(&text))
}

#[test]
fn provenance_is_taken_out_whole() {
    let text = "{\n  \"a\": [1],\n  \"provenance\": {\n    \"command_line\": [\"}{\\\"\"],\n    \"host\": {}\n  }\n}\n";
    assert_eq!(without_provenance(text), "{\n  \"a\": [1]\n}\n");
    assert_eq!(without_provenance("{\n  \"a\": 1\n}"), "{\n  \"a\": 1\n}");
}

#[test]
fn time_is_the_only_thing_taken_out() {
    let text =
        "{\n  \"a\": 1,\n  \"elapsed_seconds\": 1.25e-3,\n  \"b\": {\"elapsed_seconds\":7}\n}";
    assert_eq!(
        without_time(text),
        "{\n  \"a\": 1,\n  \"elapsed_seconds\": 0,\n  \"b\": {\"elapsed_seconds\":0}\n}"
    );
    assert_eq!(
        without_time("{\"elapsed_seconds\": null}"),
        "{\"elapsed_seconds\": 0}"
    );
}

#[test]
fn every_result_matches_its_golden_file() {
    let bless = std::env::var_os("PAGELAB_BLESS").is_some();
    let golden = root().join("tests/data/golden");
    let work = tmp("cases");
    let mut differ = Vec::new();
    for (name, args) in cases() {
        let dir = work.join(&name);
        std::fs::create_dir_all(&dir).unwrap();
        let got = run_case(&args, &dir);
        let path = golden.join(format!("{name}.json"));
        if bless {
            std::fs::create_dir_all(&golden).unwrap();
            std::fs::write(&path, &got).unwrap();
            continue;
        }
        let want = std::fs::read_to_string(&path).unwrap_or_else(|e| {
            panic!(
                "{}: {e} (PAGELAB_BLESS=1 writes the golden files)",
                path.display()
            )
        });
        if got != want {
            let got_path = dir.join("got.json");
            std::fs::write(&got_path, &got).unwrap();
            differ.push(format!(
                "{name}: {} differs from {}",
                got_path.display(),
                path.display()
            ));
        }
    }
    assert!(differ.is_empty(), "results changed:\n{}", differ.join("\n"));
    let _ = std::fs::remove_dir_all(&work);
}
