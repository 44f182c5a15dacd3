//! A text table for a terminal: right-aligned columns, one row per page size.

use crate::cells::{headers, heading, refs_line, rows};
use crate::export::Exporter;
use crate::schema::{Results, SimResult};
use anyhow::Result;
use std::io::Write;

/// Space between columns.
const GAP: &str = "  ";

/// The text table of one result: a heading naming source and TLB, the reference counts, then a
/// header and one row per page size.
pub fn table(r: &SimResult) -> String {
    let rows = rows(r);
    let headers = headers(r);
    let widths: Vec<usize> = (0..headers.len())
        .map(|c| {
            rows.iter()
                .map(|row| row[c].chars().count())
                .chain([headers[c].len()])
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut out = format!("{}\n{}\n", heading(r), refs_line(r));
    let line = |cells: &mut dyn Iterator<Item = &str>| {
        let padded: Vec<String> = cells
            .zip(&widths)
            .map(|(cell, w)| format!("{cell:>w$}"))
            .collect();
        padded.join(GAP) + "\n"
    };
    out.push_str(&line(&mut headers.iter().copied()));
    for row in &rows {
        out.push_str(&line(&mut row.iter().map(String::as_str)));
    }
    out
}

/// The text tables of several results, separated by blank lines.
pub fn tables(results: &(impl Results + ?Sized)) -> String {
    let parts: Vec<String> = results.results().iter().map(table).collect();
    parts.join("\n")
}

/// Exports the text tables (see [`table`]).
#[derive(Clone, Copy, Debug, Default)]
pub struct TableExporter;

impl Exporter for TableExporter {
    fn export(&self, results: &[SimResult], out: &mut dyn Write) -> Result<()> {
        out.write_all(tables(results).as_bytes())?;
        Ok(())
    }
}
