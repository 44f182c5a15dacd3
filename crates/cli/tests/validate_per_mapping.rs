//! `pagelab validate --per-mapping -- PROGRAM` end to end on the real kernel (root, multi-size
//! THP and QEMU; skipped with the reason elsewhere): each case's table of the mappings each
//! process held at its exit, the model's beside the kernel's.

mod common;

use common::{pagelab, tmp};
use pagelab_report::validate::ValidateResult;
use pagelab_report::validate_mappings::MappingRow;
use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::path::Path;

/// Why this cannot run here, if it cannot.
fn cannot_run() -> Option<String> {
    // SAFETY: geteuid cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        return Some("not root: validate changes the THP knobs and reads kpageflags".into());
    }
    let k64 = pagelab_core::PageSize::from_shift(16).expect("64K");
    if let Err(why) = pagelab_lab::sysfs::Sysfs::host_for(&[k64]) {
        return Some(why.to_string());
    }
    pagelab_capture::find_qemu().err().map(|e| e.to_string())
}

/// `pagelab validate --per-mapping --pages 64K --thp always --repeat 1 --tolerance TOL
/// --json DIR/v.json -- PROGRAM`, which must succeed and print the per-mapping tables: its
/// JSON and standard output.
fn per_mapping(dir: &Path, tolerance: &str, program: &[&OsStr]) -> (ValidateResult, String) {
    let json = dir.join("v.json");
    let out = pagelab()
        .args([
            "validate",
            "--per-mapping",
            "--pages",
            "64K",
            "--thp",
            "always",
        ])
        .args(["--repeat", "1", "--tolerance", tolerance, "--json"])
        .arg(&json)
        .arg("--")
        .args(program)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(stdout.contains("per mapping at exit"), "{stdout}");
    let r = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    (r, stdout)
}

/// `ls /` under 64K always: the rows add up to each side's totals, the kernel names the
/// mappings, and the 64K folio the kernel and the model both map at exit (one, in every
/// session since 12) lies in the same mapping on both sides.
#[test]
fn each_mapping_of_ls_holds_the_same_folios_on_both_sides() {
    if let Some(why) = cannot_run() {
        eprintln!("skipped: {why}");
        return;
    }
    let dir = tmp("per-mapping");
    let (r, stdout) = per_mapping(&dir, "50%", &["ls".as_ref(), "/".as_ref()]);
    assert_eq!(r.cases.len(), 1);
    let c = &r.cases[0];
    assert!(!c.mappings.is_empty(), "{c:?}");
    let sum = |side: fn(&MappingRow) -> &BTreeMap<String, u64>| {
        let mut total = BTreeMap::new();
        for row in &c.mappings {
            for (s, n) in side(row) {
                *total.entry(s.clone()).or_insert(0) += n;
            }
        }
        total
    };
    assert_eq!(Some(sum(|r| &r.model)), c.model.exit_folios, "{stdout}");
    assert_eq!(Some(sum(|r| &r.kernel)), c.kernel.exit_folios, "{stdout}");
    let named = |name: &str| c.mappings.iter().any(|r| r.name.contains(name));
    assert!(named("[stack]") && named("/ls"), "{stdout}");
    let with_64k: Vec<_> = c
        .mappings
        .iter()
        .filter(|r| r.kernel.contains_key("64K") || r.model.contains_key("64K"))
        .collect();
    assert_eq!(with_64k.len(), 1, "{stdout}");
    assert_eq!(with_64k[0].model, with_64k[0].kernel, "{stdout}");
}

/// gzip -9 reads its input with read(2) into its window (64K in its bss) and then only
/// reads the window: the kernel's writes are its first touch (write faults, large folios
/// under 64K), which QEMU's plugin does not see. Before the capture recorded them as
/// stores, the model took the window's pages as read first (zero pages, then a copy):
/// +35% faults and 6 against 7×64K on in.txt (docs/real-programs.md). Now the faults are
/// within 5%, the folios equal, and no mapping holds zero pages on one side only.
#[test]
fn a_buffer_read_fills_is_written_first_as_the_kernel_writes_it() {
    if let Some(why) = cannot_run() {
        eprintln!("skipped: {why}");
        return;
    }
    if !Path::new("/usr/bin/gzip").exists() {
        eprintln!("skipped: no /usr/bin/gzip");
        return;
    }
    let dir = tmp("per-mapping-gzip");
    let input = dir.join("in.txt");
    let mut text = String::new();
    let mut n: u64 = 1;
    while text.len() < 360_000 {
        n = n.wrapping_mul(6364136223846793005) % 1_000_000_007;
        text.push_str(&format!("line {n}: pages of many sizes {}\n", n % 977));
    }
    std::fs::write(&input, text).unwrap();
    let program: [&OsStr; 5] = [
        "gzip".as_ref(),
        "-9".as_ref(),
        "-k".as_ref(),
        "-c".as_ref(),
        input.as_ref(),
    ];
    let (r, stdout) = per_mapping(&dir, "5%", &program);
    let c = &r.cases[0];
    assert_eq!(c.verdict, "agree", "{stdout}");
    for row in &c.mappings {
        assert_eq!(row.model_zero, row.kernel_zero, "{row:?}\n{stdout}");
    }
}
