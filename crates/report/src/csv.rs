//! CSV: one row per (source, page size) with every numeric field of the schema.
//!
//! Sizes are bytes here, as in the JSON: CSV is read by programs and spreadsheets.
//! Per-level TLB counters become columns `<level>_accesses`, `<level>_hits`, `<level>_misses`
//! for every level that appears in any result, in order of first appearance; a run without
//! that level leaves them empty.

use crate::export::Exporter;
use crate::schema::{Results, RunStats, SimResult};
use anyhow::{Context, Result};
use std::io::Write;
use std::path::Path;

/// Columns before the per-level ones.
const FIXED: [&str; 15] = [
    "source_kind",
    "source_name",
    "tlb",
    "page_size",
    "refs_instr",
    "refs_data",
    "itlb_accesses",
    "itlb_misses",
    "dtlb_accesses",
    "dtlb_misses",
    "code_footprint_bytes",
    "data_footprint_bytes",
    "footprint_bytes",
    "faults",
    "elapsed_seconds",
];

/// Writes a header row and one row per (source, page size) to `out`.
pub fn write_csv_to(out: impl Write, results: &(impl Results + ?Sized)) -> Result<()> {
    let results = results.results();
    let levels = level_names(results);
    let mut w = csv::Writer::from_writer(out);
    let mut header: Vec<String> = FIXED.iter().map(|s| s.to_string()).collect();
    for level in &levels {
        for field in ["accesses", "hits", "misses"] {
            header.push(format!("{level}_{field}"));
        }
    }
    w.write_record(&header).context("cannot write CSV header")?;
    for r in results {
        for run in &r.runs {
            w.write_record(record(r, run, &levels))
                .context("cannot write CSV row")?;
        }
    }
    w.flush().context("cannot write CSV")?;
    Ok(())
}

/// Writes the CSV (see [`write_csv_to`]) to the file at `path`; errors name the path.
pub fn write_csv(path: impl AsRef<Path>, results: &(impl Results + ?Sized)) -> Result<()> {
    let path = path.as_ref();
    let mut text = Vec::new();
    write_csv_to(&mut text, results).context("cannot write CSV")?;
    pagelab_core::write_atomically(path, text)
        .with_context(|| format!("cannot write CSV file `{}`", path.display()))
}

fn record(r: &SimResult, run: &RunStats, levels: &[String]) -> Vec<String> {
    let mut rec = vec![
        r.source.kind.clone(),
        r.source.name.clone(),
        r.tlb_name(),
        run.page_size.bytes().to_string(),
        r.refs.instr.to_string(),
        r.refs.data.to_string(),
    ];
    rec.extend(
        [
            run.itlb_accesses,
            run.itlb_misses,
            run.dtlb_accesses,
            run.dtlb_misses,
            run.code_footprint_bytes,
            run.data_footprint_bytes,
            run.footprint_bytes,
            run.faults,
        ]
        .map(|n| n.to_string()),
    );
    rec.push(r.elapsed_seconds.map(|s| s.to_string()).unwrap_or_default());
    for level in levels {
        match run.tlb_levels.iter().find(|l| &l.level == level) {
            Some(l) => rec.extend([l.accesses, l.hits, l.misses].map(|n| n.to_string())),
            None => rec.extend([String::new(), String::new(), String::new()]),
        }
    }
    rec
}

fn level_names(results: &[SimResult]) -> Vec<String> {
    let mut names: Vec<String> = Vec::new();
    let all = results
        .iter()
        .flat_map(|r| &r.runs)
        .flat_map(|run| &run.tlb_levels);
    for l in all {
        if !names.contains(&l.level) {
            names.push(l.level.clone());
        }
    }
    names
}

/// Exports CSV (see [`write_csv_to`]).
#[derive(Clone, Copy, Debug, Default)]
pub struct CsvExporter;

impl Exporter for CsvExporter {
    fn export(&self, results: &[SimResult], out: &mut dyn Write) -> Result<()> {
        write_csv_to(out, results)
    }
}
