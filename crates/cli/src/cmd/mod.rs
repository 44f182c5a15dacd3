//! One module per subcommand; shared set-up lives here.

pub mod bench;
pub mod bench_predict;
pub mod capture;
pub mod convert;
pub mod list;
pub mod machines;
pub mod machines_blocks;
pub mod machines_measure;
pub mod machines_probe;
pub mod report;
pub mod run;
pub mod sharing;
pub mod sim;
pub mod sim_sweep;
pub mod study;
pub mod sweep;
pub mod validate;
mod validate_program;

use crate::args::ModelArgs;
use anyhow::Result;
use pagelab_engine::{CostConfig, StudyConfig};
use pagelab_machine::Machine;

/// The study configuration named by the command line, and the machine when
/// `--machine` names one (see [`pagelab::model::machine_study_config`]).
pub fn study_config(m: &ModelArgs) -> Result<(StudyConfig, Option<Machine>)> {
    pagelab::model::machine_study_config(
        m.machine.as_deref(),
        m.page_sizes.as_deref(),
        m.tlb.as_deref(),
    )
}

/// What times the runs when the machine gives caches and latencies
/// (see [`pagelab::model::cost_config`]).
pub fn cost_config(
    m: &ModelArgs,
    cfg: &StudyConfig,
    machine: Option<&Machine>,
) -> Result<Option<CostConfig>> {
    pagelab::model::cost_config(machine, cfg, m.virt.as_deref())
}

/// Parses a trace format name given on the command line.
pub fn parse_format(flag: &str, value: Option<&str>) -> Result<Option<pagelab_trace::Format>> {
    value
        .map(|v| v.parse().map_err(|e| anyhow::anyhow!("{flag} {v}: {e}")))
        .transpose()
}
