//! The exporter seam: every output format is a small type that turns results into bytes.
//!
//! Contract: an exporter reads only the [`SimResult`]s it is given (never the trace, never the
//! simulator), writes its whole output to `out`, and produces the same bytes for the same
//! results, so that its output can be snapshot-tested.

use crate::csv::CsvExporter;
use crate::json::to_json_string;
use crate::markdown::MarkdownExporter;
use crate::plot::SvgExporter;
use crate::schema::{SimResult, StudyResult};
use crate::table::TableExporter;
use anyhow::{bail, Result};
use std::io::Write;
use std::path::Path;
use std::str::FromStr;

/// Turns results into one output format.
pub trait Exporter {
    /// Writes `results` to `out` in this exporter's format.
    fn export(&self, results: &[SimResult], out: &mut dyn Write) -> Result<()>;
}

/// Exports JSON: a single result as `pagelab.sim/1`, several as a `pagelab.study/1`.
#[derive(Clone, Copy, Debug, Default)]
pub struct JsonExporter;

impl Exporter for JsonExporter {
    fn export(&self, results: &[SimResult], out: &mut dyn Write) -> Result<()> {
        let text = match results {
            [one] => to_json_string(one)?,
            many => to_json_string(&StudyResult::new(many.to_vec()))?,
        };
        out.write_all(text.as_bytes())?;
        Ok(())
    }
}

/// The output formats, for choosing an exporter by name or by file extension.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// Text table for a terminal ([`TableExporter`]).
    Table,
    /// Markdown tables ([`MarkdownExporter`]).
    Markdown,
    /// CSV ([`CsvExporter`]).
    Csv,
    /// Versioned JSON ([`JsonExporter`]).
    Json,
    /// SVG plot in the shape of Weisberg & Wiseman's Figure 1 ([`SvgExporter`]).
    Svg,
}

impl Format {
    /// Every format, in the order help texts list them.
    pub const ALL: [Format; 5] = [
        Format::Table,
        Format::Markdown,
        Format::Csv,
        Format::Json,
        Format::Svg,
    ];

    /// The name accepted by [`Format::from_str`].
    pub fn name(self) -> &'static str {
        match self {
            Format::Table => "table",
            Format::Markdown => "md",
            Format::Csv => "csv",
            Format::Json => "json",
            Format::Svg => "svg",
        }
    }

    /// The format a file name asks for by its extension (`.md`, `.csv`, `.json`, `.svg`,
    /// `.txt`), if any.
    pub fn from_path(path: &Path) -> Option<Format> {
        let ext = path.extension()?.to_str()?.to_ascii_lowercase();
        match ext.as_str() {
            "txt" => Some(Format::Table),
            "md" | "markdown" => Some(Format::Markdown),
            "csv" => Some(Format::Csv),
            "json" => Some(Format::Json),
            "svg" => Some(Format::Svg),
            _ => None,
        }
    }

    /// The exporter for this format.
    pub fn exporter(self) -> Box<dyn Exporter> {
        match self {
            Format::Table => Box::new(TableExporter),
            Format::Markdown => Box::new(MarkdownExporter),
            Format::Csv => Box::new(CsvExporter),
            Format::Json => Box::new(JsonExporter),
            Format::Svg => Box::new(SvgExporter),
        }
    }
}

impl FromStr for Format {
    type Err = anyhow::Error;
    fn from_str(s: &str) -> Result<Self> {
        let lower = s.trim().to_ascii_lowercase();
        let found = match lower.as_str() {
            "text" | "txt" => Some(Format::Table),
            "markdown" => Some(Format::Markdown),
            other => Format::ALL.into_iter().find(|f| f.name() == other),
        };
        match found {
            Some(f) => Ok(f),
            None => {
                let names: Vec<&str> = Format::ALL.iter().map(|f| f.name()).collect();
                bail!(
                    "unknown output format `{s}`: choose one of {}",
                    names.join(", ")
                )
            }
        }
    }
}

impl std::fmt::Display for Format {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}
