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

/// Rows of cells in aligned columns, two spaces apart, each line's trailing
/// spaces trimmed: the columns whose index is in `left` aligned left, the
/// others right (rows may be ragged). The lab's tables use it.
pub fn columns(rows: &[Vec<String>], left: &[usize]) -> String {
    let cols = rows.iter().map(Vec::len).max().unwrap_or(0);
    let widths: Vec<usize> = (0..cols)
        .map(|i| {
            rows.iter()
                .filter_map(|r| r.get(i))
                .map(|s| s.chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut out = String::new();
    for r in rows {
        let cells: Vec<String> = r
            .iter()
            .zip(&widths)
            .enumerate()
            .map(|(i, (cell, &w))| {
                if left.contains(&i) {
                    format!("{cell:<w$}")
                } else {
                    format!("{cell:>w$}")
                }
            })
            .collect();
        out.push_str(cells.join(GAP).trim_end());
        out.push('\n');
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

#[cfg(test)]
mod tests {
    use super::columns;

    #[test]
    fn columns_align_left_and_right_and_trim() {
        let rows = vec![
            vec!["a".to_string(), "1".into(), "x".into()],
            vec!["bbb".to_string(), "22".into()],
        ];
        assert_eq!(columns(&rows, &[0]), "a     1  x\nbbb  22\n");
        assert_eq!(columns(&rows, &[0, 1]), "a    1   x\nbbb  22\n");
    }
}
