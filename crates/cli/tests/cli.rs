//! End-to-end tests of the `pagelab` binary: real trace in, the reference
//! model's counts out; every input path (file, compressed, native, standard
//! input, workload); every error says what and where; the study's files.

mod common;

use common::{data, pagelab, succeeded, tmp};

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

fn run(cmd: &mut Command) -> Output {
    let out = cmd.output().expect("pagelab runs");
    succeeded(&out);
    out
}

fn fail(cmd: &mut Command) -> String {
    let out = cmd.output().expect("pagelab runs");
    assert_eq!(
        out.status.code(),
        Some(1),
        "expected exit 1, stdout: {}",
        String::from_utf8_lossy(&out.stdout)
    );
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(!err.contains("panicked"), "{err}");
    err
}

fn json(path: &Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

const ALL_SIZES: &str = "4K,8K,16K,32K,64K,128K,256K,2M,1G";

/// The result's runs restricted to the fields the expected file carries.
fn runs_like_expected(result: &serde_json::Value) -> serde_json::Value {
    let keys = [
        "page_size",
        "itlb_accesses",
        "itlb_misses",
        "dtlb_accesses",
        "dtlb_misses",
        "code_footprint_bytes",
        "data_footprint_bytes",
        "footprint_bytes",
        "faults",
    ];
    let runs = result["runs"].as_array().unwrap();
    serde_json::Value::Array(
        runs.iter()
            .map(|r| {
                keys.iter()
                    .map(|k| (k.to_string(), r[*k].clone()))
                    .collect::<serde_json::Map<_, _>>()
                    .into()
            })
            .collect(),
    )
}

fn decompressed_real_trace() -> Vec<u8> {
    zstd::decode_all(&std::fs::read(data("gzip-9.lackey.zst")).unwrap()[..]).unwrap()
}

#[test]
fn sim_on_real_trace_gives_the_reference_counts() {
    let dir = tmp("sim-real");
    let out = dir.join("r.json");
    let o = run(pagelab()
        .args(["sim", "--page-sizes", ALL_SIZES, "--trace"])
        .arg(data("gzip-9.lackey.zst"))
        .arg("--json")
        .arg(&out)
        .arg("--csv")
        .arg(dir.join("r.csv")));
    let expected = json(&data("gzip-9.expected.json"));
    let got = json(&out);
    assert_eq!(got["schema"], "pagelab.sim/1");
    assert_eq!(got["source"]["kind"], "lackey");
    assert_eq!(got["source"]["compression"], "zstd");
    assert_eq!(got["tlb"]["name"], "weisberg");
    assert_eq!(
        got["refs"]["instr"].as_u64().unwrap() + got["refs"]["data"].as_u64().unwrap(),
        4_518_898
    );
    assert_eq!(runs_like_expected(&got), expected["runs"]);
    // The table names every page size; no progress line when stderr is not a terminal.
    let table = String::from_utf8(o.stdout).unwrap();
    for s in ["4K", "256K", "2M", "1G"] {
        assert!(table.contains(s), "{table}");
    }
    assert!(
        o.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let csv = std::fs::read_to_string(dir.join("r.csv")).unwrap();
    assert_eq!(csv.lines().count(), 1 + 9, "{csv}");
}

#[test]
fn standard_input_xz_and_native_give_the_same_result() {
    let dir = tmp("inputs");
    let text = decompressed_real_trace();
    // Standard input, plain text, as from `valgrind ... | pagelab sim --trace -`.
    let mut child = pagelab()
        .args(["sim", "--page-sizes", ALL_SIZES, "--trace", "-", "--json"])
        .arg(dir.join("stdin.json"))
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(&text).unwrap();
    assert!(child.wait().unwrap().success());
    // xz-compressed text.
    let xz = dir.join("t.lackey.xz");
    let mut enc = liblzma::write::XzEncoder::new(std::fs::File::create(&xz).unwrap(), 1);
    enc.write_all(&text).unwrap();
    enc.finish().unwrap();
    run(pagelab()
        .args(["sim", "--page-sizes", ALL_SIZES, "--trace"])
        .arg(&xz)
        .arg("--json")
        .arg(dir.join("xz.json")));
    // Native, converted by pagelab.
    let native = dir.join("t.trace");
    run(pagelab()
        .arg("convert")
        .arg(data("gzip-9.lackey.zst"))
        .arg(&native));
    run(pagelab()
        .args(["sim", "--page-sizes", ALL_SIZES, "--trace"])
        .arg(&native)
        .arg("--json")
        .arg(dir.join("n.json")));
    let expected = json(&data("gzip-9.expected.json"))["runs"].clone();
    for f in ["stdin.json", "xz.json", "n.json"] {
        assert_eq!(runs_like_expected(&json(&dir.join(f))), expected, "{f}");
    }
    assert_eq!(json(&dir.join("n.json"))["source"]["kind"], "native");
    assert_eq!(json(&dir.join("stdin.json"))["source"]["name"], "-");
}

#[test]
fn convert_round_trip_is_exact() {
    let dir = tmp("convert");
    let native = dir.join("t.trace");
    let back = dir.join("back.lackey");
    run(pagelab()
        .arg("convert")
        .arg(data("gzip-9.lackey.zst"))
        .arg(&native));
    run(pagelab().arg("convert").arg(&native).arg(&back));
    let original: Vec<u8> = decompressed_real_trace()
        .split_inclusive(|&b| b == b'\n')
        .filter(|l| !l.starts_with(b"=="))
        .flatten()
        .copied()
        .collect();
    assert!(
        std::fs::read(&back).unwrap() == original,
        "Lackey -> native -> Lackey changed the records"
    );
    assert!(
        std::fs::metadata(&native).unwrap().len() * 10 < original.len() as u64,
        "native is compact"
    );
}

#[test]
fn a_page_index_for_each_tlb_gives_the_study_of_the_records() {
    let dir = tmp("page-index");
    let native = |name: &str, extra: &[&str]| {
        let path = dir.join(name);
        run(pagelab()
            .arg("convert")
            .arg(data("gzip-9.lackey.zst"))
            .arg(&path)
            .args(extra));
        path
    };
    let plain = native("plain.trace", &["--no-page-index"]);
    let indexed = native("weisberg.trace", &[]);
    let zen4 = native("zen4.trace", &["--page-index-tlb", "zen4"]);
    let header = |p: &Path| std::fs::read(p).unwrap()[8..16].to_vec();
    assert_eq!(header(&plain), [5, 0, 0, 0, 0, 0, 0, 0]);
    assert_eq!(
        header(&indexed),
        [5, 0, 1, 0, 4, 0, 0, 0],
        "depth 4, no fragments"
    );
    assert_eq!(
        header(&zen4),
        [5, 0, 1, 0, 4, 1, 0, 0],
        "depth 4, fragments"
    );
    let len = |p: &Path| std::fs::metadata(p).unwrap().len();
    assert!(len(&plain) < len(&indexed) && len(&indexed) < len(&plain) * 13 / 10);
    // Each TLB's study is the same from every file, read through an index made for it
    // or from the records; an index for another TLB's filter gets a word on how to
    // make one for this TLB.
    for tlb in ["weisberg", "zen4", "power5plus"] {
        let study = |trace: &Path| {
            let out = dir.join(format!(
                "{tlb}-{}.json",
                trace.file_stem().unwrap().to_str().unwrap()
            ));
            let o = run(pagelab()
                .args(["sim", "--page-sizes", ALL_SIZES, "--tlb", tlb, "--json"])
                .arg(&out)
                .arg("--trace")
                .arg(trace));
            let said = String::from_utf8(o.stderr).unwrap();
            let hint = said.contains(&format!("--page-index-tlb {tlb}` writes one"));
            (json(&out)["runs"].clone(), hint)
        };
        let want = study(&plain).0;
        assert_eq!(study(&plain), (want.clone(), false), "{tlb}");
        assert_eq!(study(&indexed), (want.clone(), tlb != "weisberg"), "{tlb}");
        assert_eq!(study(&zen4), (want, tlb != "zen4"), "{tlb}");
    }
    // The options are for a native output.
    let e = fail(
        pagelab()
            .arg("convert")
            .arg(&plain)
            .arg(dir.join("t.lackey"))
            .arg("--no-page-index"),
    );
    assert!(
        e.contains("are for a native output") && e.contains("t.lackey"),
        "{e}"
    );
    let e = fail(
        pagelab()
            .arg("convert")
            .arg(&plain)
            .arg(dir.join("t.trace"))
            .args(["--page-index-tlb", "nosuch"]),
    );
    assert!(
        e.contains("--page-index-tlb nosuch") && e.contains("weisberg"),
        "{e}"
    );
}

#[test]
fn bad_input_is_a_clear_error() {
    let dir = tmp("errors");
    let e = fail(pagelab().args(["sim", "--workload", "stride", "--page-sizes", "4K,3K"]));
    assert!(
        e.contains("3K") && e.contains("power of two from 4K to 1G"),
        "{e}"
    );
    let e = fail(pagelab().args(["sim", "--workload", "stride", "--tlb", "nosuch"]));
    for p in [
        "weisberg",
        "pentium4",
        "pkunity",
        "power5plus",
        "skylake",
        "zen4",
    ] {
        assert!(e.contains(p), "{e}");
    }
    let e = fail(pagelab().args(["sim", "--workload", "nosuch"]));
    for w in ["stride", "stream", "gups", "chase"] {
        assert!(e.contains(w), "{e}");
    }
    let bad = dir.join("bad.lackey");
    std::fs::write(&bad, "I  04000b20,3\n L 1ffefffc58,8\n X 12,4\n").unwrap();
    let e = fail(pagelab().args(["sim", "--trace"]).arg(&bad));
    assert!(
        e.contains("bad.lackey") && e.contains("line 3") && e.contains("X 12,4"),
        "{e}"
    );
    // A native trace cut short names the byte offset.
    let native = dir.join("t.trace");
    run(pagelab()
        .arg("convert")
        .arg(data("gzip-9.lackey.zst"))
        .arg(&native));
    let bytes = std::fs::read(&native).unwrap();
    let cut = dir.join("cut.trace");
    std::fs::write(&cut, &bytes[..bytes.len() / 2]).unwrap();
    let e = fail(pagelab().args(["sim", "--trace"]).arg(&cut));
    assert!(e.contains("cut.trace") && e.contains("byte offset"), "{e}");
    let e = fail(
        pagelab()
            .args(["sim", "--trace"])
            .arg(dir.join("missing.lackey")),
    );
    assert!(e.contains("missing.lackey"), "{e}");
}

#[test]
fn study_writes_json_csv_and_plot() {
    let dir = tmp("study");
    let o = run(pagelab()
        .args(["study", "-o"])
        .arg(&dir)
        .args(["stride:heap=1M,iters=2", "chase:nodes=4096,steps=10000"]));
    let stdout = String::from_utf8(o.stdout).unwrap();
    assert!(
        stdout.contains("stride") && stdout.contains("chase"),
        "{stdout}"
    );
    let result = json(&dir.join("result.json"));
    assert_eq!(result["schema"], "pagelab.study/1");
    let results = result["results"].as_array().unwrap();
    assert_eq!(results.len(), 2);
    for r in results {
        assert_eq!(r["schema"], "pagelab.sim/1");
        let sizes: Vec<u64> = r["runs"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["page_size"].as_u64().unwrap())
            .collect();
        assert_eq!(
            sizes,
            [4096, 8192, 16384, 32768, 65536, 131072, 262144, 2097152]
        );
    }
    let svg = std::fs::read_to_string(dir.join("study.svg")).unwrap();
    assert!(svg.starts_with("<svg") && svg.contains("stride") && svg.contains("256K"));
    assert!(
        std::fs::read_to_string(dir.join("result.csv"))
            .unwrap()
            .lines()
            .count()
            == 1 + 16
    );
}

#[test]
fn sim_table_snapshot() {
    let o = run(pagelab().args([
        "sim",
        "--workload",
        "stride:heap=256K,iters=2",
        "--page-sizes",
        "4K,64K,2M",
    ]));
    insta::assert_snapshot!(String::from_utf8(o.stdout).unwrap());
}

#[test]
fn presets_and_workloads_are_listed() {
    let p = String::from_utf8(run(pagelab().arg("presets")).stdout).unwrap();
    for name in [
        "weisberg",
        "pentium4",
        "pkunity",
        "power5plus",
        "skylake",
        "zen4",
    ] {
        assert!(p.contains(name), "{p}");
    }
    let w = String::from_utf8(run(pagelab().arg("workloads")).stdout).unwrap();
    for name in ["stride", "stream", "gups", "chase"] {
        assert!(w.contains(name), "{w}");
    }
}

/// Peak resident memory of a `pagelab` run, in KiB, as the process itself
/// reports it (`VmHWM`): a `wait4` figure would include the memory of this
/// test process, which the child shares until it execs.
fn peak_rss_kib(args: &[&str]) -> u64 {
    let out = run(pagelab().args(args).env("PAGELAB_PEAK_RSS", "1"));
    let err = String::from_utf8(out.stderr).unwrap();
    let line = err
        .lines()
        .find_map(|l| l.strip_prefix("pagelab: peak rss "))
        .expect("peak rss reported");
    line.trim_end_matches(" kB").trim().parse().unwrap()
}

#[test]
fn memory_stays_flat_whatever_the_trace_length() {
    // 10 times the references, the same peak memory (within a few MB).
    let short = peak_rss_kib(&["sim", "--workload", "gups:table=4M,updates=200000"]);
    let long = peak_rss_kib(&["sim", "--workload", "gups:table=4M,updates=2000000"]);
    assert!(
        long < short + 4096,
        "peak RSS grew from {short} KiB to {long} KiB"
    );
}

#[test]
fn sim_with_policies_reports_the_model_figures() {
    let dir = tmp("policies");
    let out = dir.join("p.json");
    let phys = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../configs/phys/large-zone.toml");
    let o = run(pagelab()
        .args([
            "sim",
            "--workload",
            "gups:table=8M,updates=20000",
            "--policy",
            "base:4K",
            "--policy",
            "linux-thp:enabled=always",
            "--phys",
        ])
        .arg(&phys)
        .arg("--json")
        .arg(&out));
    let table = String::from_utf8(o.stdout).unwrap();
    assert!(
        table.contains("linux-thp:enabled=always") && table.contains("2M:"),
        "{table}"
    );
    let r = json(&out);
    assert_eq!(r["runs"][0]["policy"], "base:4K");
    assert_eq!(
        r["runs"][1]["faults_by_size"]["2M"].as_u64().unwrap(),
        r["runs"][1]["faults"].as_u64().unwrap()
    );
    for key in [
        "rss_bytes",
        "page_table_bytes",
        "walk_refs",
        "promotions",
        "demotions",
        "copied_bytes",
        "zeroed_bytes",
        "fragmentation",
        "fragmentation_worst",
    ] {
        assert!(r["runs"][1].get(key).is_some(), "{key} missing");
    }
    let e = fail(pagelab().args(["sim", "--workload", "gups", "--policy", "huge:2M"]));
    assert!(
        e.contains("huge:2M") && e.contains("linux-thp") && e.contains("reservation"),
        "{e}"
    );
    let bad = dir.join("bad.toml");
    std::fs::write(&bad, "memory = \"4G\"\nbogus = 1\n").unwrap();
    let e = fail(
        pagelab()
            .args(["sim", "--workload", "gups", "--policy", "eager", "--phys"])
            .arg(&bad),
    );
    assert!(
        e.contains("bad.toml") && e.contains("bogus") && e.contains("line 2"),
        "{e}"
    );
}

/// Runs `cmd` with its standard error on a new pseudo-terminal and returns
/// what was drawn there.
fn on_a_terminal(cmd: &mut Command) -> String {
    use std::io::Read;
    use std::os::fd::FromRawFd;
    let (mut master, mut slave) = (0, 0);
    let size = libc::winsize {
        ws_row: 24,
        ws_col: 100,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    // SAFETY: the out-pointers are valid; no name buffer, no termios asked for.
    let rc = unsafe {
        libc::openpty(
            &mut master,
            &mut slave,
            std::ptr::null_mut(),
            std::ptr::null(),
            &size,
        )
    };
    assert_eq!(rc, 0, "openpty: {}", std::io::Error::last_os_error());
    // SAFETY: openpty returned two open descriptors that nothing else owns.
    let (mut master, slave) = unsafe {
        (
            std::fs::File::from_raw_fd(master),
            std::fs::File::from_raw_fd(slave),
        )
    };
    let mut child = cmd
        .stdout(Stdio::null())
        .stdin(Stdio::null())
        .stderr(slave)
        .spawn()
        .unwrap();
    // `cmd` holds the last copy of the slave: without it, reads of the master
    // end (with EIO) once the child has ended.
    drop(std::mem::replace(cmd, Command::new("true")));
    let reader = std::thread::spawn(move || {
        let mut drawn = Vec::new();
        let _ = master.read_to_end(&mut drawn);
        drawn
    });
    let status = child.wait().unwrap();
    let drawn = reader.join().unwrap();
    let drawn = String::from_utf8_lossy(&drawn).into_owned();
    assert!(status.success(), "{drawn}");
    drawn
}

/// The one progress display draws on a terminal (the engine's count in `sim`,
/// the source's count in `convert`) and never anywhere else.
#[test]
fn progress_is_drawn_on_a_terminal_and_nowhere_else() {
    let dir = tmp("progress");
    let trace = data("gzip-9.lackey.zst");
    let sim = || {
        let mut c = pagelab();
        c.arg("sim").arg("--trace").arg(&trace);
        c
    };
    let convert = || {
        let mut c = pagelab();
        c.arg("convert").arg(&trace).arg(dir.join("t.trace"));
        c
    };
    for (name, mut cmd) in [("sim", sim()), ("convert", convert())] {
        let drawn = on_a_terminal(&mut cmd);
        assert!(
            drawn.contains("gzip-9.lackey.zst: ") && drawn.contains(" M refs/s"),
            "{name}: {drawn:?}"
        );
    }
    for (name, mut cmd) in [("sim", sim()), ("convert", convert())] {
        let out = run(&mut cmd);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            !err.contains("refs/s") && !err.contains('\x1b') && !err.contains('\r'),
            "{name}: {err:?}"
        );
    }
}

#[test]
fn every_command_help_ends_with_an_example_and_policy_help_lists_every_policy() {
    let (commands, _) = common::commands();
    for c in commands {
        let help = String::from_utf8(run(pagelab().args([&c, "--help"])).stdout).unwrap();
        let tail: Vec<&str> = help.lines().rev().take(6).collect();
        assert!(
            tail.iter().any(|l| l.starts_with("Example"))
                && tail[0].starts_with("  ")
                && ["pagelab ", "sudo pagelab "]
                    .iter()
                    .any(|p| tail[0].trim_start().starts_with(p)),
            "`pagelab {c} --help` does not end with an example:\n{help}"
        );
    }
    let sim = String::from_utf8(run(pagelab().args(["sim", "--help"])).stdout).unwrap();
    for policy in [
        "base:SIZE",
        "linux-thp",
        "eager",
        "explicit",
        "reservation",
        "relocation",
    ] {
        assert!(sim.contains(policy), "--policy help lacks {policy}");
    }
}

#[test]
fn report_reads_a_sweep_as_one_column_per_configuration() {
    let d = tmp("sweep-report");
    let mut entries = Vec::new();
    for (config, tlb) in [("weisberg", "weisberg"), ("skylake", "skylake")] {
        for w in ["stride:iters=2", "gups:updates=20000"] {
            let json = d.join(format!("{config}-{}.json", entries.len()));
            run(pagelab()
                .args([
                    "sim",
                    "--page-sizes",
                    "4K,2M",
                    "--tlb",
                    tlb,
                    "--workload",
                    w,
                    "--json",
                ])
                .arg(&json));
            let result: serde_json::Value =
                serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
            entries.push(serde_json::json!({"source": w, "config": config, "result": result}));
        }
    }
    let sweep = d.join("sweep.json");
    let doc = serde_json::json!({"schema": "pagelab.sweep/1", "results": entries});
    std::fs::write(&sweep, doc.to_string()).unwrap();
    let html = d.join("r.html");
    let out = run(pagelab().arg("report").arg(&sweep).arg("-o").arg(&html));
    let text = std::fs::read_to_string(&html).unwrap();
    assert!(
        text.contains("weisberg") && text.contains("skylake"),
        "{text:.300}"
    );
    // One recommendation block per configuration, each over both sources.
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(stdout.matches("Recommendation").count(), 2, "{stdout}");
    assert_eq!(stdout.matches("gups").count(), 2, "{stdout}");

    // An entry that is not a sim result, or a malformed entry, is an error naming it.
    let mut bad = doc.clone();
    bad["results"][1]["result"] =
        serde_json::from_str(&std::fs::read_to_string(data("lab/run.json")).unwrap()).unwrap();
    let err = report_fails(&sweep, &bad, &html);
    assert!(
        err.contains("results[1] (source `gups:updates=20000`, config `weisberg`)")
            && err.contains("not a `run` one"),
        "{err}"
    );
    let mut bad = doc;
    bad["results"][0].as_object_mut().unwrap().remove("config");
    let err = report_fails(&sweep, &bad, &html);
    assert!(
        err.contains("does not match it") && err.contains("config"),
        "{err}"
    );
}

/// Writes `doc` to `sweep`, runs `pagelab report` on it, checks it fails with
/// exit status 1, and gives its stderr.
fn report_fails(sweep: &Path, doc: &serde_json::Value, html: &Path) -> String {
    std::fs::write(sweep, doc.to_string()).unwrap();
    let out = pagelab()
        .arg("report")
        .arg(sweep)
        .arg("-o")
        .arg(html)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(1), "{err}");
    err
}

#[test]
fn a_trace_files_checksum_is_the_same_hashed_as_read_or_read_again() {
    // The real trace, decompressed into a file of several 1 MiB windows: `sim` hashes it as
    // the reader goes; the checksum of the same bytes in one pass must match.
    let dir = tmp("checksum");
    let text = decompressed_real_trace();
    assert!(text.len() > 3 << 20, "{} bytes", text.len());
    let trace = dir.join("t.lackey");
    std::fs::write(&trace, &text).unwrap();
    let mut c = pagelab_core::Checksum::default();
    c.update(&text);
    let want = serde_json::json!([{
        "name": trace.display().to_string(),
        "bytes": text.len(),
        "checksum": c.finish(),
    }]);
    let sim = dir.join("sim.json");
    run(pagelab()
        .args(["sim", "--trace"])
        .arg(&trace)
        .arg("--json")
        .arg(&sim));
    assert_eq!(json(&sim)["provenance"]["inputs"], want);
    // Cut short (--limit), the reader has not hashed it all: the file is read again.
    let part = dir.join("part.json");
    run(pagelab()
        .args(["sim", "--limit", "1000", "--trace"])
        .arg(&trace)
        .arg("--json")
        .arg(&part));
    assert_eq!(json(&part)["provenance"]["inputs"], want);
}
