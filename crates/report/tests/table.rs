mod common;

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
