use crate::common;

use pagelab_core::{PageSize, SourceInfo};
use pagelab_report::{markdown, table, tables, RunStats, SimResult};

#[test]
fn text_table_of_a_study_row() {
    insta::assert_snapshot!(table(&common::crafty()));
}

#[test]
fn text_tables_of_a_study_are_separated() {
    let text = tables(&common::study());
    assert_eq!(text.matches("· TLB: fa64").count(), 2);
    assert!(text.contains("\n\nworkload vpr"));
}

#[test]
fn markdown_table() {
    insta::assert_snapshot!(markdown(&common::vpr()));
}

#[test]
fn columns_are_right_aligned() {
    let text = table(&common::crafty());
    let lines: Vec<&str> = text.lines().skip(2).collect();
    let width = lines[0].len();
    assert!(lines.iter().all(|l| l.len() == width), "{text}");
    assert!(lines[1].starts_with("  4K"), "{text}");
}

#[test]
fn no_accesses_shows_a_dash_and_no_tlb_shows_a_dash() {
    let r = SimResult {
        source: SourceInfo {
            kind: "lackey".into(),
            name: "traces/ls.trace".into(),
            compression: Some("zstd".into()),
            ..Default::default()
        },
        runs: vec![RunStats::new(PageSize::K4)],
        ..Default::default()
    };
    insta::assert_snapshot!(table(&r));
}

/// A policy run's result: `reclaimed` bytes reclaimed and `major` major faults.
fn policy_result(reclaimed: u64, major: u64) -> SimResult {
    let mm = pagelab_report::PolicyStats {
        policy: "base:4K".into(),
        reclaimed_bytes: reclaimed,
        swapped_out_bytes: reclaimed,
        swap_bytes: reclaimed / 2,
        major_faults: major,
        ..Default::default()
    };
    SimResult {
        runs: vec![RunStats {
            faults: 300,
            mm: Some(mm),
            ..RunStats::new(PageSize::K4)
        }],
        ..Default::default()
    }
}

#[test]
fn reclaim_columns_appear_only_when_a_run_reclaimed() {
    let quiet = table(&policy_result(0, 0));
    assert!(!quiet.contains("reclaimed"), "{quiet}");
    let pressed = table(&policy_result(8 << 20, 1234));
    let lines: Vec<&str> = pressed.lines().collect();
    let header = lines[2];
    let row = lines[3];
    for h in ["major", "reclaimed", "swapped out", "in swap"] {
        assert!(header.contains(h), "{pressed}");
    }
    let cells: Vec<&str> = row.split_whitespace().collect();
    assert_eq!(
        cells[cells.len() - 4..],
        ["1,234", "8M", "8M", "4M"],
        "{pressed}"
    );
    let md = markdown(&policy_result(8 << 20, 1234));
    assert!(
        md.contains("| major | reclaimed | swapped out | in swap |"),
        "{md}"
    );
}
