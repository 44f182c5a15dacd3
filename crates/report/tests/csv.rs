use crate::common;

use pagelab_report::{write_csv, write_csv_to};

fn csv_of(r: &(impl pagelab_report::Results + ?Sized)) -> String {
    let mut out = Vec::new();
    write_csv_to(&mut out, r).unwrap();
    String::from_utf8(out).unwrap()
}

#[test]
fn one_row_per_source_and_page_size() {
    let text = csv_of(&common::study());
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 1 + 7 + 7);
    assert!(lines[0].starts_with("source_kind,source_name,tlb,page_size,refs_instr,refs_data,"));
    assert!(lines[0].ends_with(
        "elapsed_seconds,l1i_accesses,l1i_hits,l1i_misses,l1d_accesses,l1d_hits,l1d_misses"
    ));
    assert_eq!(
        lines[1],
        "workload,crafty,fa64,4096,50000000,20000000,50000000,1250000,20000000,3400000,\
         184320,2150400,2334720,570,,50000000,48750000,1250000,20000000,16600000,3400000"
    );
    // vpr has no per-level counters: its level columns stay empty.
    assert!(lines[8].starts_with("workload,vpr,fa64,4096,"));
    assert!(lines[8].ends_with(",,,,,,,"), "{}", lines[8]);
}

#[test]
fn single_result_has_no_level_columns() {
    let text = csv_of(&common::vpr());
    let header = text.lines().next().unwrap();
    assert_eq!(header.split(',').count(), 15);
    assert!(header.ends_with("faults,elapsed_seconds"));
    assert_eq!(text.lines().count(), 8);
}

#[test]
fn csv_is_readable_back() {
    let text = csv_of(&common::study());
    let mut reader = csv::Reader::from_reader(text.as_bytes());
    let sizes: Vec<String> = reader
        .records()
        .map(|r| r.unwrap()[3].to_string())
        .collect();
    assert_eq!(sizes[6], "262144");
}

#[test]
fn writes_a_file() {
    let path = std::env::temp_dir().join(format!("pagelab-report-{}.csv", std::process::id()));
    write_csv(&path, std::slice::from_ref(&common::vpr())).unwrap();
    assert_eq!(
        std::fs::read_to_string(&path).unwrap(),
        csv_of(&common::vpr())
    );
    std::fs::remove_file(&path).unwrap();
}

#[test]
fn file_errors_name_the_path() {
    let e = write_csv("/nonexistent-dir/out.csv", &common::vpr()).unwrap_err();
    assert!(
        format!("{e:#}").contains("/nonexistent-dir/out.csv"),
        "{e:#}"
    );
}
