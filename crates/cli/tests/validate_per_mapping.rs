//! `pagelab validate --per-mapping -- PROGRAM` end to end on the real kernel (root, multi-size
//! THP and QEMU; skipped with the reason elsewhere): each case's table of the mappings each
//! process held at its exit, the model's beside the kernel's.

mod common;

use common::{pagelab, tmp};
use pagelab_report::validate::ValidateResult;
use std::collections::BTreeMap;

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
        .args(["--repeat", "1", "--tolerance", "50%", "--json"])
        .arg(&json)
        .args(["--", "ls", "/"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(stdout.contains("per mapping at exit"), "{stdout}");
    let r: ValidateResult = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(r.cases.len(), 1);
    let c = &r.cases[0];
    assert!(!c.mappings.is_empty(), "{c:?}");
    let sum =
        |side: fn(&pagelab_report::validate_mappings::MappingRow) -> &BTreeMap<String, u64>| {
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
    assert!(
        c.mappings.iter().any(|r| r.name.contains("[stack]")),
        "{stdout}"
    );
    assert!(
        c.mappings.iter().any(|r| r.name.contains("/ls")),
        "{stdout}"
    );
    let with_64k: Vec<_> = c
        .mappings
        .iter()
        .filter(|r| r.kernel.contains_key("64K") || r.model.contains_key("64K"))
        .collect();
    assert_eq!(with_64k.len(), 1, "{stdout}");
    assert_eq!(with_64k[0].model, with_64k[0].kernel, "{stdout}");
}
