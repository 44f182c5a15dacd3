//! Markdown tables with the same content as the text table, handy for a README.

use crate::cells::{headers, heading, refs_line, rows};
use crate::export::Exporter;
use crate::schema::{Results, SimResult};
use anyhow::Result;
use std::io::Write;

/// The Markdown table of one result: the heading and reference counts as a paragraph, then a
/// table with the page size left-aligned and every number right-aligned.
pub fn markdown(r: &SimResult) -> String {
    let mut out = format!("**{}**  \n{}\n\n", escape(&heading(r)), refs_line(r));
    let headers = headers(r);
    out.push_str(&format!("| {} |\n", headers.join(" | ")));
    let align: Vec<&str> = (0..headers.len())
        .map(|c| if c == 0 { ":---" } else { "---:" })
        .collect();
    out.push_str(&format!("| {} |\n", align.join(" | ")));
    for row in rows(r) {
        out.push_str(&format!("| {} |\n", row.join(" | ")));
    }
    out
}

/// The Markdown tables of several results, separated by blank lines.
pub fn markdowns(results: &(impl Results + ?Sized)) -> String {
    let parts: Vec<String> = results.results().iter().map(markdown).collect();
    parts.join("\n")
}

/// Keeps source names and parameters from being read as Markdown markup.
fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if matches!(c, '*' | '_' | '`' | '|' | '[' | ']' | '<' | '>' | '\\') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// Exports Markdown tables (see [`markdown`]).
#[derive(Clone, Copy, Debug, Default)]
pub struct MarkdownExporter;

impl Exporter for MarkdownExporter {
    fn export(&self, results: &[SimResult], out: &mut dyn Write) -> Result<()> {
        out.write_all(markdowns(results).as_bytes())?;
        Ok(())
    }
}
