//! `pagelab validate --per-mapping`: what each process maps at its exit, mapping by mapping,
//! the model's beside the kernel's, so that a difference in a case's totals can be found
//! in one mapping.
//!
//! Each side gives, per process in the order the processes exited, its mappings (range,
//! name, 4K pages present, large anonymous folios by size): the kernel's from
//! `/proc/PID/maps`, `pagemap` and `kpageflags` at the exit stop, the model's from its VMAs
//! and page table at the exit record. [`join`] matches the processes by their exit order
//! and the mappings by address: mappings of the two sides that overlap, directly or through
//! others, make one row, so a VMA one side splits and the other merges is still compared
//! as a whole and nothing is counted twice.
//!
//! ```
//! use pagelab_report::validate_mappings::{join, ExitMapping, ExitProcess};
//! use std::collections::BTreeMap;
//!
//! let m = |start, end, name: &str, pages, folios: &[(&str, u64)]| ExitMapping {
//!     start, end, name: name.into(), pages, zero: 0,
//!     folios: folios.iter().map(|(s, n)| (s.to_string(), *n)).collect(),
//! };
//! let kernel = [ExitProcess { pid: 7, mappings: vec![m(0x1000, 0x9000, "[heap]", 8, &[("16K", 2)])] }];
//! let model = [ExitProcess { pid: 1, mappings: vec![
//!     m(0x1000, 0x5000, "anon", 4, &[("16K", 1)]),
//!     m(0x5000, 0x9000, "anon", 4, &[]),
//! ] }];
//! let rows = join(&model, &kernel);
//! assert_eq!(rows.len(), 1);
//! assert_eq!(rows[0].name, "[heap]");
//! assert!(rows[0].differs()); // 1×16K against 2×16K
//! ```

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt::Write;

/// One mapping of one process at its exit.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExitMapping {
    /// First byte.
    pub start: u64,
    /// One past the last byte.
    pub end: u64,
    /// The kernel's path or `[heap]`, `[stack]`, ...; `anon`; the model's `file#ID`.
    pub name: String,
    /// 4K pages present (zero pages included).
    pub pages: u64,
    /// Of those, 4K pages of a zero page: read and never written.
    #[serde(default)]
    pub zero: u64,
    /// Large anonymous folios first seen in it, by size (`"64K"`).
    #[serde(default)]
    pub folios: BTreeMap<String, u64>,
}

/// One process's mappings at its exit.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExitProcess {
    /// Its pid (the trace's for the model, the native run's for the kernel).
    #[serde(default)]
    pub pid: u32,
    /// Its mappings, in address order.
    pub mappings: Vec<ExitMapping>,
}

/// One row of the per-mapping table: a range of one process where the two sides' mappings
/// overlap, with each side's pages and folios there.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MappingRow {
    /// The process, by exit order (1 = the first to exit).
    pub process: usize,
    /// First byte of the range.
    pub start: u64,
    /// One past its last byte.
    pub end: u64,
    /// The kernel's names of its mappings (the model's where the kernel has none there).
    pub name: String,
    /// The model's 4K pages present there.
    pub model_pages: u64,
    /// The kernel's.
    pub kernel_pages: u64,
    /// Of the model's pages, those of a zero page.
    pub model_zero: u64,
    /// Of the kernel's.
    pub kernel_zero: u64,
    /// The model's large anonymous folios there, by size.
    pub model: BTreeMap<String, u64>,
    /// The kernel's.
    pub kernel: BTreeMap<String, u64>,
}

impl MappingRow {
    /// Whether the two sides differ there, in pages or in folios.
    pub fn differs(&self) -> bool {
        self.model_pages != self.kernel_pages
            || self.model_zero != self.kernel_zero
            || self.model != self.kernel
    }

    /// Whether either side maps a large folio there.
    pub fn has_folios(&self) -> bool {
        self.model
            .values()
            .chain(self.kernel.values())
            .any(|&n| n > 0)
    }
}

/// The rows of `model` against `kernel`: processes matched by exit order, mappings by
/// address (overlapping mappings, transitively, make one row), in process and address
/// order. A process or mapping only one side has is a row with the other side's figures 0.
pub fn join(model: &[ExitProcess], kernel: &[ExitProcess]) -> Vec<MappingRow> {
    let mut rows = Vec::new();
    let none = ExitProcess::default();
    for i in 0..model.len().max(kernel.len()) {
        let (m, k) = (
            model.get(i).unwrap_or(&none),
            kernel.get(i).unwrap_or(&none),
        );
        // (mapping, is the kernel's) by start address; ties: the kernel's first, so its
        // name leads.
        let mut all: Vec<(&ExitMapping, bool)> = m
            .mappings
            .iter()
            .map(|x| (x, false))
            .chain(k.mappings.iter().map(|x| (x, true)))
            .collect();
        all.sort_by_key(|&(x, kernel)| (x.start, !kernel));
        let mut row: Option<(MappingRow, Vec<String>, Vec<String>)> = None;
        for (x, is_kernel) in all {
            let open = matches!(&row, Some((r, _, _)) if x.start < r.end);
            if !open {
                rows.extend(row.take().map(finish));
                row = Some((
                    MappingRow {
                        process: i + 1,
                        start: x.start,
                        end: x.end,
                        ..Default::default()
                    },
                    Vec::new(),
                    Vec::new(),
                ));
            }
            let (r, knames, mnames) = row.as_mut().expect("a row is open");
            r.end = r.end.max(x.end);
            let (pages, zero, folios, names) = if is_kernel {
                (
                    &mut r.kernel_pages,
                    &mut r.kernel_zero,
                    &mut r.kernel,
                    knames,
                )
            } else {
                (&mut r.model_pages, &mut r.model_zero, &mut r.model, mnames)
            };
            *pages += x.pages;
            *zero += x.zero;
            for (s, n) in &x.folios {
                *folios.entry(s.clone()).or_default() += n;
            }
            if !names.contains(&x.name) {
                names.push(x.name.clone());
            }
        }
        rows.extend(row.take().map(finish));
    }
    rows
}

/// A row with its name: the kernel's names, else the model's, joined by ` + `; sizes with
/// no folio dropped.
fn finish((mut r, knames, mnames): (MappingRow, Vec<String>, Vec<String>)) -> MappingRow {
    r.name = if knames.is_empty() { mnames } else { knames }.join(" + ");
    r.model.retain(|_, n| *n > 0);
    r.kernel.retain(|_, n| *n > 0);
    r
}

/// The text table of `rows` for one case: every row where either side maps a large folio
/// or the two sides differ (in pages present, pages of a zero page, or folios), then how
/// many rows were equal and left out. `-` for no folios.
pub fn mappings_table(rows: &[MappingRow]) -> String {
    let shown: Vec<&MappingRow> = rows
        .iter()
        .filter(|r| r.has_folios() || r.differs())
        .collect();
    let head = [
        "proc",
        "range",
        "mapping",
        "pages model",
        "pages kernel",
        "zero model",
        "zero kernel",
        "folios model",
        "folios kernel",
        "",
    ];
    let cells: Vec<[String; 10]> = shown
        .iter()
        .map(|r| {
            [
                r.process.to_string(),
                format!("{:x}-{:x}", r.start, r.end),
                r.name.clone(),
                r.model_pages.to_string(),
                r.kernel_pages.to_string(),
                r.model_zero.to_string(),
                r.kernel_zero.to_string(),
                crate::validate::per_size_text(&r.model),
                crate::validate::per_size_text(&r.kernel),
                if r.differs() { "differ" } else { "" }.to_string(),
            ]
        })
        .collect();
    let mut widths = head.map(str::len);
    for row in &cells {
        for (w, c) in widths.iter_mut().zip(row) {
            *w = (*w).max(c.chars().count());
        }
    }
    let mut out = String::new();
    let line = |out: &mut String, row: &[String]| {
        let mut text = String::new();
        for (i, (c, w)) in row.iter().zip(widths).enumerate() {
            let pad = " ".repeat(w.saturating_sub(c.chars().count()));
            let cell = if (3..=6).contains(&i) {
                format!("{pad}{c}")
            } else {
                format!("{c}{pad}")
            };
            text.push_str(&cell);
            text.push_str("  ");
        }
        let _ = writeln!(out, "  {}", text.trim_end());
    };
    line(&mut out, &head.map(String::from));
    for row in &cells {
        line(&mut out, row);
    }
    let hidden = rows.len() - shown.len();
    let _ = writeln!(
        out,
        "  ({hidden} of {} mappings equal on both sides and without large folios, not shown)",
        rows.len()
    );
    out
}

#[cfg(test)]
#[path = "validate_mappings_tests.rs"]
mod tests;
