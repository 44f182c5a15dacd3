//! One module per subcommand; shared set-up lives here.

pub mod bench;
pub mod capture;
pub mod convert;
pub mod list;
pub mod report;
pub mod run;
pub mod sim;
pub mod study;
pub mod sweep;
pub mod validate;

use crate::args::ModelArgs;
use anyhow::Result;
use pagelab_engine::StudyConfig;

/// The study configuration named by the command line.
pub fn study_config(m: &ModelArgs) -> Result<StudyConfig> {
    pagelab::model::study_config(&m.page_sizes, &m.tlb)
}

/// Parses a trace format name given on the command line.
pub fn parse_format(flag: &str, value: Option<&str>) -> Result<Option<pagelab_trace::Format>> {
    value
        .map(|v| v.parse().map_err(|e| anyhow::anyhow!("{flag} {v}: {e}")))
        .transpose()
}
