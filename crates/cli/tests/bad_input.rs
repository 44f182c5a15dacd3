//! Regression tests for the defects a probe of bad input and output paths
//! found: each failed (a panic, a raw escape sequence, a partial file) before
//! its fix.

mod common;

use common::{pagelab, succeeded, tmp};

use std::process::{Command, Output, Stdio};

/// The standard error of a run that must fail cleanly: exit 1, no panic.
fn clean_failure(out: Output) -> String {
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(1), "stderr: {err}");
    assert!(!err.contains("panicked"), "{err}");
    err
}

fn fails(cmd: &mut Command) -> String {
    clean_failure(cmd.stdin(Stdio::null()).output().expect("pagelab runs"))
}

#[test]
fn the_last_address_of_u64_is_a_clean_error_under_every_policy() {
    let d = tmp("top");
    let t = d.join("t");
    std::fs::write(&t, " L ffffffffffffffff,1\n").unwrap();
    for policy in [
        "base:4K",
        "linux-thp",
        "relocation",
        "eager",
        "explicit",
        "reservation",
    ] {
        let err = fails(
            pagelab()
                .arg("sim")
                .arg("--trace")
                .arg(&t)
                .args(["--policy", policy]),
        );
        assert!(
            err.contains("record 0") && err.contains("outside the 48-bit virtual address space"),
            "{policy}: {err}"
        );
        assert!(!err.contains("out of memory"), "{policy}: {err}");
    }
}

#[test]
fn a_quoted_trace_line_reaches_the_terminal_escaped() {
    let d = tmp("escape");
    let t = d.join("t");
    std::fs::write(&t, b" L 1000,4\n\x1b]0;PWNED\x07\x1b[2J \x9b\xff\n").unwrap();
    let out = pagelab()
        .arg("sim")
        .arg("--trace")
        .arg(&t)
        .output()
        .unwrap();
    let bytes = out.stderr.clone();
    let err = clean_failure(out);
    assert!(!bytes.iter().any(|&b| b == 0x1b || b == 0x07), "{err}");
    assert!(
        err.contains("line 2") && err.contains("\\x1b]0;PWNED\\x07\\x1b[2J \\x9b\\xff"),
        "{err}"
    );
}

#[test]
fn a_file_name_with_escapes_reaches_the_terminal_escaped() {
    let err = fails(pagelab().args(["sim", "--trace", "/nonexistent/\x1b[2Jx"]));
    assert!(err.contains("\\x1b[2Jx") && !err.contains('\x1b'), "{err}");
}

#[test]
fn a_full_standard_output_is_an_error_not_a_panic() {
    common::full_stdout_is_a_clean_error(&[
        &["workloads"],
        &["presets"],
        &["sim", "--workload", "gups:table=8M,updates=20000"],
    ]);
}

#[test]
fn a_failed_conversion_leaves_no_file() {
    let d = tmp("convert");
    let input = d.join("in.lackey");
    // A whole first window of good lines, then a bad one: the writer has
    // written part of the output when the reader fails.
    let mut text = " L 1000,4\n".repeat(200_000);
    text.push_str(" L zz,4\n");
    std::fs::write(&input, text).unwrap();
    for out in ["out.lackey", "out.trace", "out.lackey.zst"] {
        let err = fails(pagelab().arg("convert").arg(&input).arg(d.join(out)));
        assert!(err.contains("line 200001"), "{err}");
        let left: Vec<_> = std::fs::read_dir(&d)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .filter(|n| n != "in.lackey")
            .collect();
        assert!(left.is_empty(), "{out}: left behind {left:?}");
    }
}

#[test]
fn memory_beyond_the_stated_limit_is_refused_and_the_limit_works() {
    let d = tmp("memory");
    let t = d.join("t");
    std::fs::write(&t, " L 1000,4\n").unwrap();
    let sim = || {
        let mut c = pagelab();
        c.arg("sim")
            .arg("--trace")
            .arg(&t)
            .args(["--policy", "base:4K"]);
        c
    };
    for m in ["512T", "1024T", "65T"] {
        let err = fails(sim().args(["--memory", m]));
        assert!(err.contains("up to 64T"), "{m}: {err}");
    }
    let phys = d.join("phys.toml");
    std::fs::write(&phys, "memory = \"1024T\"\n").unwrap();
    let err = fails(sim().arg("--phys").arg(&phys));
    assert!(err.contains("up to 64T"), "{err}");
    let out = sim().args(["--memory", "64T"]).output().unwrap();
    succeeded(&out);
    // The exact number: 4095 printed as a size reads "4.0K".
    let err = fails(sim().args(["--memory", "4095"]));
    assert!(err.contains("(4095 bytes) is not allowed"), "{err}");
}

#[test]
fn a_missing_tlb_file_is_said_once() {
    let err = fails(pagelab().args([
        "sim",
        "--workload",
        "gups:table=8M,updates=20000",
        "--tlb",
        "/nonexistent.toml",
    ]));
    assert_eq!(err.matches("No such file or directory").count(), 1, "{err}");
}

#[test]
fn policy_options_without_a_policy_are_refused() {
    for args in [
        &["--memory", "64M"][..],
        &["--phys", "configs/phys/small-split.toml"],
        &["--strict"],
        &["--cow", "base"],
    ] {
        let out = pagelab()
            .args(["sim", "--workload", "gups:table=8M,updates=20000"])
            .args(args)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains("--policy"), "{args:?}: {err}");
    }
}

#[test]
fn an_implausible_reference_size_is_refused_unless_allowed() {
    let d = tmp("refsize");
    let t = d.join("t.lackey");
    let mut text = String::from(" L 1000,4\n");
    text.push_str(&" L 7f0000001000,4294967295\n".repeat(50));
    std::fs::write(&t, text).unwrap();
    let start = std::time::Instant::now();
    let err = fails(pagelab().arg("sim").arg("--trace").arg(&t));
    assert!(start.elapsed().as_secs() < 5, "took {:?}", start.elapsed());
    assert!(
        err.contains("line 2") && err.contains("--max-ref-size") && err.contains(",4294967295"),
        "{err}"
    );
    // The line is well formed: the syntax of a line would mislead.
    assert!(!err.contains("a Lackey line is"), "{err}");
    // A large but allowed size reads, here and after a round trip through
    // the native format (which carries it as an escaped size).
    std::fs::write(&t, " L 1000,4\n L 2000,100000\n").unwrap();
    let err = fails(pagelab().arg("sim").arg("--trace").arg(&t));
    assert!(err.contains("line 2"), "{err}");
    let native = d.join("t.trace");
    let ok = pagelab()
        .args(["--max-ref-size", "1M", "convert"])
        .arg(&t)
        .arg(&native)
        .output()
        .unwrap();
    succeeded(&ok);
    let err = fails(pagelab().arg("sim").arg("--trace").arg(&native));
    assert!(
        err.contains("byte offset") && err.contains("--max-ref-size"),
        "{err}"
    );
    let ok = pagelab()
        .args(["sim", "--max-ref-size", "100000", "--trace"])
        .arg(&native)
        .output()
        .unwrap();
    succeeded(&ok);
    let out = pagelab()
        .args(["sim", "--max-ref-size", "4G", "--trace"])
        .arg(&t)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("below 4G"));
}

#[test]
fn the_bundled_trace_with_parameters_is_named_as_what_it_is() {
    let err = fails(pagelab().args(["sim", "--workload", "gzip:x=1"]));
    assert!(
        err.contains("bundled real trace, which takes no parameters")
            && !err.contains("unknown workload"),
        "{err}"
    );
}

#[test]
fn a_native_trace_with_a_damaged_magic_is_not_called_bad_lackey() {
    let d = tmp("magic");
    let t = d.join("t.lackey");
    std::fs::write(&t, " L 1000,4\n S 2000,8\n").unwrap();
    let native = d.join("t.trace");
    let ok = pagelab()
        .arg("convert")
        .arg(&t)
        .arg(&native)
        .output()
        .unwrap();
    assert!(ok.status.success());
    let mut bytes = std::fs::read(&native).unwrap();
    bytes[5] ^= 0x20;
    std::fs::write(&native, &bytes).unwrap();
    for input in [native.clone(), d.join("t.trace.zst")] {
        if input.extension().unwrap() == "zst" {
            std::fs::write(&input, zstd::encode_all(&bytes[..], 3).unwrap()).unwrap();
        }
        let err = fails(pagelab().arg("sim").arg("--trace").arg(&input));
        assert!(
            err.contains("byte offset")
                && err.contains("damaged magic")
                && !err.contains("Lackey line"),
            "{err}"
        );
    }
}

/// A Lackey text large enough to span several compressed blocks.
fn lackey_text() -> Vec<u8> {
    (0..200_000u64)
        .map(|i| format!(" L {:x},4\n", 0x1000 + (i * 7919 % 100_000) * 64))
        .collect::<String>()
        .into_bytes()
}

/// The error names the input, the compression, the offsets and the Lackey line
/// the decompressed text was cut in (the line after the last whole one).
fn assert_said_corrupt(input: &std::path::Path, kind: &str) {
    let err = fails(pagelab().arg("sim").arg("--trace").arg(input));
    assert!(
        err.contains(&input.display().to_string())
            && err.contains(&format!(
                "{kind}-compressed input corrupt or truncated within its first"
            )),
        "{err}"
    );
    let produced: usize = err
        .split_once(" bytes of decompressed data")
        .and_then(|(head, _)| head.rsplit(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no decompressed offset in: {err}"));
    let text = lackey_text();
    assert!(produced < text.len(), "{err}");
    let line = text[..produced].iter().filter(|&&b| b == b'\n').count() + 1;
    assert!(err.contains(&format!("in Lackey line {line}")), "{err}");
}

#[test]
fn a_truncated_or_corrupt_zstd_trace_says_so_and_where() {
    let d = tmp("zstd");
    let whole = zstd::encode_all(&lackey_text()[..], 3).unwrap();
    let t = d.join("t.lackey.zst");
    std::fs::write(&t, &whole[..whole.len() / 2]).unwrap();
    assert_said_corrupt(&t, "zstd");
    let mut bad = whole.clone();
    let mid = bad.len() / 2;
    for b in &mut bad[mid..mid + 64] {
        *b ^= 0x5a;
    }
    std::fs::write(&t, &bad).unwrap();
    assert_said_corrupt(&t, "zstd");
}

#[test]
fn a_truncated_xz_trace_says_so_and_where() {
    let d = tmp("xz");
    let t = d.join("t.lackey");
    std::fs::write(&t, lackey_text()).unwrap();
    match Command::new("xz").arg("-k").arg(&t).status() {
        Ok(s) if s.success() => {}
        _ => {
            eprintln!("skipped: no xz command to make the input");
            return;
        }
    }
    let xz = d.join("t.lackey.xz");
    let whole = std::fs::read(&xz).unwrap();
    std::fs::write(&xz, &whole[..whole.len() / 2]).unwrap();
    assert_said_corrupt(&xz, "xz");
}
