//! pagelab's versioned result schema and every way of showing it.
//!
//! The engine writes one JSON result per simulation ([`SimResult`], schema `pagelab.sim/1`) or
//! one per study over several workloads ([`StudyResult`], schema `pagelab.study/1`). Every
//! other output is made from those structs, never from the simulator:
//!
//! - [`table`]: a text table for a terminal,
//! - [`markdown`]: the same table in Markdown, for a README,
//! - [`write_csv`] / [`write_csv_to`]: one row per (source, page size) for spreadsheets,
//! - [`lab_table`]: the lab's tables (`pagelab run`, `bench`, `validate`) from a [`LabResult`],
//! - [`plot_svg`]: the shape of Weisberg & Wiseman's Figure 1, misses and memory per page size,
//! - [`write_json`] / [`load`]: the JSON files themselves, with schema checks on reading,
//! - [`recommend`]: the answer, one sentence per workload, from a documented rule,
//! - [`html`]: the self-contained HTML report, opening with the answer,
//! - [`colors`]: one colour per page size, shared by every plot,
//! - [`curve`]: a metric against a swept workload parameter, table and plot,
//! - [`validate`]: `pagelab validate`'s result (`pagelab.validate/1`) and its table.
//!
//! Each format is also an [`Exporter`], chosen by [`Format`] name or file extension.
//!
//! ```
//! use pagelab_core::{PageSize, SourceInfo};
//! use pagelab_report::{table, RefCounts, RunStats, SimResult};
//!
//! let run = RunStats {
//!     itlb_accesses: 1_000_000,
//!     itlb_misses: 2_500,
//!     dtlb_accesses: 400_000,
//!     dtlb_misses: 12_000,
//!     code_footprint_bytes: 64 << 10,
//!     data_footprint_bytes: 1536 << 10,
//!     footprint_bytes: 1600 << 10,
//!     faults: 400,
//!     ..RunStats::new(PageSize::K4)
//! };
//! let result = SimResult {
//!     source: SourceInfo { kind: "workload".into(), name: "stride".into(), ..Default::default() },
//!     tlb: serde_json::json!({ "name": "fa64" }),
//!     refs: RefCounts { instr: 1_000_000, data: 400_000 },
//!     runs: vec![run],
//!     ..Default::default()
//! };
//! let text = table(&result);
//! print!("{text}");
//! assert!(text.starts_with("workload stride · TLB: fa64"));
//! assert!(text.contains("1,000,000") && text.contains("1.5M"));
//! ```

#![warn(missing_docs)]

mod any;
mod cells;
pub mod colors;
mod cost_schema;
mod csv;
pub mod curve;
mod export;
pub mod html;
mod json;
mod lab;
pub mod lab_plot;
pub mod lab_table;
mod lines;
mod markdown;
mod plot;
mod plot_time;
mod provenance;
pub mod recommend;
mod schema;
mod sweep;
mod table;
pub mod validate;
pub mod validate_mappings;

pub use crate::csv::{write_csv, write_csv_to, CsvExporter};
pub use any::{load_any, parse_any, AnyResult, KNOWN_SCHEMAS};
pub use cells::thousands;
pub use cost_schema::{CacheLevelCost, CostStats};
pub use export::{Exporter, Format, JsonExporter};
pub use json::{load, load_sim, load_study, parse, to_json_string, write_json, LoadedResult};
pub use lab::{ExitInfo, HostInfo, LabConfig, LabResult, Measurement, Summary, LAB_SCHEMA};
pub use markdown::{markdown, markdowns, MarkdownExporter};
pub use plot::{plot_svg, svg_string, SvgExporter};
pub use provenance::{checksum_bytes, checksum_file, Checksum, InputChecksum, Provenance};
pub use schema::{
    LevelStats, PolicyStats, RefCounts, Results, RunStats, SimResult, StudyResult, SIM_SCHEMA,
    STUDY_SCHEMA,
};
pub use sweep::{load_columns, parse_columns, SWEEP_SCHEMA};
pub use table::{columns, table, tables, TableExporter};
