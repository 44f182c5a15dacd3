//! The SIMD tiers end to end: every tier this CPU has gives byte-identical
//! results (apart from `elapsed_seconds`), a wrong `PAGELAB_ISA` is refused at
//! startup, and the portable tier really runs on a CPU without AVX (under
//! QEMU's user-mode emulator, when it is installed).

mod common;

use common::{data, tmp};

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use pagelab_core::isa::Isa;

fn ok(out: Output, what: &str) -> Output {
    assert!(
        out.status.success(),
        "{what} failed: {}\nstderr: {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// The JSON at `path` with every `elapsed_seconds` and `provenance` taken out, as text.
fn result_without_time(path: &Path) -> String {
    fn strip(v: &mut serde_json::Value) {
        match v {
            serde_json::Value::Object(m) => {
                m.remove("elapsed_seconds");
                // The command line and the host, not a result of the model.
                m.remove("provenance");
                m.values_mut().for_each(strip);
            }
            serde_json::Value::Array(a) => a.iter_mut().for_each(strip),
            _ => {}
        }
    }
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut v: serde_json::Value = serde_json::from_str(&text).unwrap();
    strip(&mut v);
    serde_json::to_string_pretty(&v).unwrap()
}

/// The commands compared across tiers: the study's fronts and the Lackey
/// parser (sim and study on the bundled trace), the policies' model, and
/// workloads (no parser, fronts only).
const CASES: &[(&str, &[&str])] = &[
    ("sim-trace", &["sim", "--trace", "@gzip"]),
    (
        "sim-policies",
        &[
            "sim",
            "--trace",
            "@gzip",
            "--policy",
            "base:4K",
            "--policy",
            "linux-thp",
        ],
    ),
    (
        "sim-stream",
        &["sim", "--workload", "stream:n=65536,iters=3"],
    ),
    (
        "study",
        &[
            "study",
            "gzip",
            "gups:updates=200000,table=64M",
            "stride:iters=20",
        ],
    ),
];

/// Runs case `args` with `PAGELAB_ISA=tier` into `dir`, returning its result.
fn run_case(bin: &[&str], tier: &str, args: &[&str], dir: &Path) -> String {
    let gzip = data("gzip-9.lackey.zst");
    let args: Vec<String> = args
        .iter()
        .map(|a| match *a {
            "@gzip" => gzip.display().to_string(),
            a => a.to_string(),
        })
        .collect();
    let mut cmd = Command::new(bin[0]);
    cmd.args(&bin[1..]).args(&args).env("PAGELAB_ISA", tier);
    let result = if args[0] == "study" {
        cmd.arg("-o").arg(dir);
        dir.join("result.json")
    } else {
        let p = dir.join("result.json");
        cmd.arg("--json").arg(&p);
        p
    };
    ok(
        cmd.output().expect("pagelab runs"),
        &format!("{args:?} with PAGELAB_ISA={tier}"),
    );
    result_without_time(&result)
}

#[test]
fn every_tier_gives_identical_results() {
    let bin = env!("CARGO_BIN_EXE_pagelab");
    let tiers = Isa::supported_tiers();
    for t in Isa::ALL.into_iter().filter(|t| !t.supported()) {
        eprintln!(
            "tier {t}: skipped: this CPU lacks {}",
            t.missing().join(", ")
        );
    }
    let root = tmp("tiers");
    for (name, args) in CASES {
        let mut first: Option<(Isa, String)> = None;
        for &tier in &tiers {
            let dir = mkdir(root.join(format!("{name}-{tier}")));
            let got = run_case(&[bin], tier.name(), args, &dir);
            match &first {
                None => first = Some((tier, got)),
                Some((t0, want)) => assert!(
                    *want == got,
                    "{name}: PAGELAB_ISA={tier} differs from PAGELAB_ISA={t0}; results in {}",
                    root.display()
                ),
            }
        }
    }
    let _ = std::fs::remove_dir_all(&root);
}

#[test]
fn a_wrong_tier_is_refused_at_startup() {
    let bin = env!("CARGO_BIN_EXE_pagelab");
    let out = Command::new(bin)
        .args(["sim", "--workload", "stride"])
        .env("PAGELAB_ISA", "avx9")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.starts_with("pagelab: error: PAGELAB_ISA=\"avx9\" is not a SIMD tier: use portable, avx2 or avx512 (this CPU has portable"),
        "{err}"
    );
    assert!(out.stdout.is_empty(), "no work before the refusal");
    match Isa::ALL.into_iter().find(|t| !t.supported()) {
        None => eprintln!("a tier this CPU lacks: skipped: this CPU has every tier"),
        Some(t) => {
            let out = Command::new(bin)
                .args(["sim", "--workload", "stride"])
                .env("PAGELAB_ISA", t.name())
                .output()
                .unwrap();
            assert_eq!(out.status.code(), Some(2));
            let err = String::from_utf8_lossy(&out.stderr);
            assert!(
                err.contains(&format!(
                    "PAGELAB_ISA={t} needs CPU features this CPU lacks"
                )),
                "{err}"
            );
        }
    }
}

/// QEMU's user-mode emulator, if installed, with the reason to skip if not.
fn qemu() -> Result<&'static str, String> {
    match Command::new("qemu-x86_64").arg("--version").output() {
        Ok(o) if o.status.success() => Ok("qemu-x86_64"),
        Ok(o) => Err(format!("qemu-x86_64 --version failed ({})", o.status)),
        Err(e) => Err(format!(
            "qemu-x86_64 not found ({e}); scripts/setup.sh installs qemu-user"
        )),
    }
}

/// Under an emulated CPU without AVX (Nehalem: SSE4.2, POPCNT, whose AVX
/// instructions QEMU refuses with SIGILL), the default tier is portable, runs,
/// and gives the native run's results; an emulated Haswell runs the AVX2 tier.
#[test]
fn the_portable_tier_runs_on_a_cpu_without_avx() {
    if !cfg!(target_arch = "x86_64") {
        eprintln!("skipped: QEMU's x86-64 CPU models only test an x86-64 build");
        return;
    }
    let qemu = match qemu() {
        Ok(q) => q,
        Err(why) => {
            eprintln!("skipped: {why}");
            return;
        }
    };
    let bin = env!("CARGO_BIN_EXE_pagelab");
    let root = tmp("qemu");
    let args: &[&str] = &["sim", "--trace", "@gzip"];
    let native = run_case(&[bin], "", args, &mkdir(root.join("native")));
    for (cpu, tier) in [
        ("Nehalem", ""),
        ("Nehalem", "portable"),
        ("Haswell", "avx2"),
    ] {
        let dir = mkdir(root.join(format!("{cpu}-{tier}")));
        let got = run_case(&[qemu, "-cpu", cpu, bin], tier, args, &dir);
        assert!(
            got == native,
            "under QEMU -cpu {cpu} PAGELAB_ISA={tier:?} the result differs"
        );
    }
    // And the emulated Nehalem refuses the tiers it lacks.
    let out = Command::new(qemu)
        .args(["-cpu", "Nehalem", bin, "presets"])
        .env("PAGELAB_ISA", "avx2")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("PAGELAB_ISA=avx2 needs CPU features this CPU lacks (avx2, bmi1, bmi2, lzcnt): use portable (this CPU's best is portable)"),
        "{err}"
    );
    let _ = std::fs::remove_dir_all(&root);
}

/// `p`, created.
fn mkdir(p: PathBuf) -> PathBuf {
    std::fs::create_dir_all(&p).unwrap();
    p
}
