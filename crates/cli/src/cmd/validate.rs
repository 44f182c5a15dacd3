//! `pagelab validate`: the kernel as the referee of the model (see
//! `pagelab_lab::validate`), and its hidden child, which replays one workload.

use crate::out::{out, outln};
use crate::progress::Progress;
use anyhow::{bail, Context, Result};
use clap::Args;
use pagelab_lab::sysfs::{Sysfs, ThpMode};
use pagelab_lab::validate::{self, replay, ValidateOptions};
use std::path::PathBuf;

#[derive(Args, Debug)]
pub struct ValidateArgs {
    /// Page-size configurations to check, each a comma-separated set of THP sizes
    /// (`4K` alone is the baseline); repeat the flag for several. Default: 4K, each
    /// size the kernel offers alone, and all of them together.
    #[arg(long = "pages", value_name = "SIZES")]
    pub pages: Vec<String>,
    /// How the sizes are enabled: madvise or always. Workloads default to madvise
    /// (only the replay's advised mapping gets large pages, so other processes
    /// cannot disturb the kernel's counters); a program runs in both by default.
    #[arg(long, value_name = "MODE")]
    pub thp: Option<String>,
    /// With a program: how far (in percent of the kernel's figure) the model's faults
    /// and each size's allocations may be from the kernel's for the case to agree.
    /// Workloads are held exact.
    #[arg(long, value_name = "P%")]
    pub tolerance: Option<String>,
    /// With a program: native runs per configuration (default 3). Their median is
    /// shown and their range (the kernel's own run-to-run noise); each figure of the
    /// model agrees when within the tolerance of that range (inside it, or near
    /// its nearer end). A racy program needs enough runs to show its range.
    #[arg(long, value_name = "N")]
    pub repeat: Option<usize>,
    /// With a program: after the totals, a table per case of what each process mapped at
    /// its exit, mapping by mapping (range, file or [heap]/[stack]/anon, 4K pages present,
    /// large anonymous folios by size), the model's beside the kernel's, so that a
    /// difference can be found in one mapping; also in `--json` (`mappings`).
    #[arg(long)]
    pub per_mapping: bool,
    /// Write the result as JSON (schema pagelab.validate/1).
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Write the self-contained HTML report (the answer, interactive plots, tables).
    #[arg(long, value_name = "FILE")]
    pub html: Option<PathBuf>,
    /// Workloads to replay, as NAME[:key=value,...]; the default set when none is given.
    #[arg(value_name = "WORKLOAD")]
    pub workloads: Vec<String>,
    /// A program to validate instead (`-- PROGRAM ARGS...`): captured once, run
    /// natively under every configuration, and modelled under the settings the
    /// kernel held.
    #[command(flatten)]
    pub program: crate::args::ProgramArgs,
    #[command(flatten)]
    pub layout: crate::args::LayoutArgs,
}

/// The hidden child of `pagelab validate`: replays one workload at its own
/// addresses and prints one JSON report.
#[derive(Args, Debug)]
pub struct ValidateChildArgs {
    /// huge (madvise(MADV_HUGEPAGE) the mapping) or none.
    #[arg(long, value_name = "ADVICE")]
    pub advise: String,
    /// The workload spec.
    pub workload: String,
}

pub fn run(a: ValidateArgs) -> Result<i32> {
    let sysfs = Sysfs::host();
    if !a.program.program.is_empty() {
        if !a.workloads.is_empty() {
            bail!("give workloads or `-- PROGRAM`, not both");
        }
        return super::validate_program::run(&a, &sysfs);
    }
    for (flag, given) in [
        ("--tolerance", a.tolerance.is_some()),
        ("--repeat", a.repeat.is_some()),
        ("--layout", a.layout.layout.is_some()),
        ("--per-mapping", a.per_mapping),
    ] {
        if given {
            bail!("{flag} is for a program (`-- PROGRAM`): workloads are held exact, in one run");
        }
    }
    let mode: ThpMode = a.thp.as_deref().unwrap_or("madvise").parse()?;
    let configs = configs(&a, &sysfs)?;
    let workloads: Vec<String> = if a.workloads.is_empty() {
        validate::DEFAULT_WORKLOADS
            .iter()
            .map(|s| s.to_string())
            .collect()
    } else {
        a.workloads.clone()
    };
    // A typo should fail before any knob changes.
    for w in &workloads {
        replay::data_extent(w)?;
    }
    let exe = std::env::current_exe().context("finding the pagelab binary")?;
    let opts = ValidateOptions {
        workloads,
        configs,
        mode,
        child: vec![exe.into(), "validate-child".into()],
    };
    let progress = Progress::new("validate");
    let mut result = validate::run(&sysfs, &opts, |msg| progress.step(msg))?;
    progress.finish();
    result.provenance = Some(super::report::provenance(None, Vec::new())?);
    out!("{}", pagelab_report::lab_table::validate_table(&result))?;
    // One schema for the JSON, the HTML and `pagelab report` of either: pagelab.validate/1.
    let any = write_outputs(&a, validate::validate_result(&result))?;
    let rule = pagelab_report::recommend::Rule::default();
    let differ = result
        .configs
        .iter()
        .filter(|c| !c.disagreements.is_empty())
        .count();
    if differ > 0 {
        super::report::print_answer(&any, &rule)?;
        bail!(
            "the model and the kernel disagree on {differ} of {} cases",
            result.configs.len()
        );
    }
    match result.configs.len() {
        1 => outln!("the model and the kernel agree on the one case")?,
        n => outln!("the model and the kernel agree on all {n} cases")?,
    }
    super::report::print_answer(&any, &rule)?;
    Ok(0)
}

/// Writes a validation's `--json` and `--html`, each saying where it wrote.
/// Writes `--json` and `--html` of one validation (pagelab.validate/1 both) and returns
/// the result as the report's `AnyResult`, for the answer lines.
pub(super) fn write_outputs(
    a: &ValidateArgs,
    result: pagelab_report::validate::ValidateResult,
) -> Result<pagelab_report::AnyResult> {
    if let Some(path) = &a.json {
        pagelab_report::write_json(path, &result)?;
        outln!("wrote {}", path.display())?;
    }
    let any = pagelab_report::AnyResult::Validate(result);
    if let Some(path) = &a.html {
        // Validation has no budget to weigh: the default rule only words the verdicts.
        super::report::write_one(
            path,
            any.clone(),
            &pagelab_report::recommend::Rule::default(),
        )?;
        outln!("wrote {}", path.display())?;
    }
    Ok(any)
}

/// The configurations `--pages` asks for, or the default: 4K, each THP size alone, all.
pub(super) fn configs(a: &ValidateArgs, sysfs: &Sysfs) -> Result<Vec<Vec<pagelab_core::PageSize>>> {
    if a.pages.is_empty() {
        return Ok(ValidateOptions::default_configs(&sysfs.thp_sizes()));
    }
    a.pages
        .iter()
        .map(|p| pagelab_core::parse_page_sizes(p).with_context(|| format!("--pages {p}")))
        .collect()
}

pub fn child(a: ValidateChildArgs) -> Result<()> {
    let advise = match a.advise.as_str() {
        "huge" => replay::Advise::Huge,
        "none" => replay::Advise::None,
        other => bail!("--advise {other}: use huge or none"),
    };
    let report = replay::replay(&a.workload, advise, &Sysfs::host())?;
    outln!("{}", serde_json::to_string(&report)?)
}
