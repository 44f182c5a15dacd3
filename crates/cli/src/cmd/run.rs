//! `pagelab run`: a real program under chosen page sizes, measured, with every knob restored.
//!
//! The pipeline: parse and check everything (sizes against the kernel, the program in
//! `PATH`, root) before touching the machine; open one knob session; per configuration set
//! the THP sizes and hugetlb pools and run the program `--repeat` times; restore the knobs;
//! summarize, print the table, write the JSON; exit with the program's status.

use crate::out::out;
use crate::progress::Progress;
use anyhow::{bail, Context, Result};
use clap::Args;
use pagelab_core::{parse_page_sizes, PageSize};
use pagelab_lab::measure::Host;
use pagelab_lab::run::{self as lab_run, RunRequest};
use pagelab_lab::sysfs::{Sysfs, ThpMode};
use pagelab_report::{lab_table, AnyResult};
use std::ffi::OsString;
use std::path::PathBuf;

/// `pagelab run` options.
#[derive(Args, Debug)]
pub struct RunArgs {
    /// Page sizes available to the program's anonymous memory, e.g. `64K` or `64K,2M`
    /// (4K alone is the baseline); default: every THP size of the kernel, or 4K with --hugetlb.
    #[arg(long, value_name = "SIZE[,SIZE...]", conflicts_with = "compare")]
    pub pages: Option<String>,
    /// How the sizes are offered: `always` (every anonymous mapping) or `madvise` (mappings
    /// advised with MADV_HUGEPAGE, which glibc's tunable and pagelab's shim do for the program).
    #[arg(long, value_name = "MODE", default_value = "always")]
    pub thp: String,
    /// Grow the hugetlb pool of SIZE to COUNT pages for the run (restored after) and point the
    /// program's heap at it (the first given, when several); repeatable. With --compare each
    /// pool is one more configuration.
    #[arg(long, value_name = "SIZE:COUNT")]
    pub hugetlb: Vec<String>,
    /// Runs per configuration; the table shows medians and spreads.
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub repeat: u32,
    /// Also run under this configuration (sizes available together, e.g. `64K` or `64K,2M`);
    /// repeat for several. The 4K baseline always runs first and speed-ups are against it.
    #[arg(long, value_name = "SIZE[,SIZE...]")]
    pub compare: Vec<String>,
    /// Write the result as JSON (schema pagelab.lab/1, command "run").
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Write the self-contained HTML report (the answer, interactive plots, tables).
    #[arg(long, value_name = "FILE")]
    pub html: Option<PathBuf>,
    #[command(flatten)]
    pub rule: crate::cmd::report::RuleArgs,
    /// Do not preload pagelab's shim (glibc's tunable still applies).
    #[arg(long)]
    pub no_shim: bool,
    /// The program to run and its arguments, after `--`.
    #[arg(last = true, value_name = "PROGRAM", required = true)]
    pub program: Vec<OsString>,
}

pub fn run(a: RunArgs) -> Result<i32> {
    let mode: ThpMode = a.thp.parse().context("--thp")?;
    if a.repeat == 0 {
        bail!("--repeat 0: give at least 1 run per configuration");
    }
    let sizes =
        |flag: &str, text: &str| parse_page_sizes(text).with_context(|| format!("{flag} {text}"));
    let req = RunRequest {
        pages: a
            .pages
            .as_deref()
            .map(|p| sizes("--pages", p))
            .transpose()?,
        compare: a
            .compare
            .iter()
            .map(|c| sizes("--compare", c))
            .collect::<Result<_>>()?,
        pools: a
            .hugetlb
            .iter()
            .map(|h| parse_pool(h))
            .collect::<Result<_>>()?,
        mode,
        repeat: a.repeat,
        program: a.program.clone(),
        shim: !a.no_shim,
    };
    let sysfs = Sysfs::host();
    let configs = lab_run::plan(&req, &sysfs);
    lab_run::check_machine(&sysfs, &configs)?;
    let mut argv = req.program.clone();
    argv[0] = lab_run::find_program(&req.program[0])?.into_os_string();
    let rule = a.rule.rule()?;
    let progress = Progress::new("run");
    let mut result = lab_run::run(
        &sysfs,
        &req,
        &configs,
        &argv,
        &mut Host::new(&sysfs),
        &mut |msg| progress.line(msg),
    )?;
    progress.finish();
    result.provenance = Some(super::report::provenance(None, Vec::new())?);
    out!("{}", lab_table::run_table(&result))?;
    super::report::print_answer(&AnyResult::Lab(result.clone()), &rule)?;
    if let Some(path) = &a.html {
        super::report::write_one(path, AnyResult::Lab(result.clone()), &rule)?;
    }
    if let Some(path) = &a.json {
        let text = serde_json::to_string_pretty(&result)?;
        std::fs::write(path, text + "\n").with_context(|| format!("writing {}", path.display()))?;
    }
    if let Some(sig) = result.interrupted_by {
        eprintln!("pagelab: interrupted by signal {sig}; every setting is restored");
    } else if let Some(failure) = lab_table::run_failures(&result) {
        eprintln!("pagelab: {failure}");
    }
    Ok(lab_run::exit_code(&result))
}

/// `2M:512` as (2M, 512).
fn parse_pool(text: &str) -> Result<(PageSize, u64)> {
    let hint = "write SIZE:COUNT, e.g. --hugetlb 2M:512 or --hugetlb 1G:2";
    let (size, count) = text
        .split_once(':')
        .with_context(|| format!("--hugetlb {text}: {hint}"))?;
    let size: PageSize = size
        .parse()
        .with_context(|| format!("--hugetlb {text}: {hint}"))?;
    let count: u64 = count
        .trim()
        .parse()
        .map_err(|_| anyhow::anyhow!("--hugetlb {text}: `{count}` is not a page count; {hint}"))?;
    if count == 0 {
        bail!("--hugetlb {text}: a pool of 0 pages gives the program nothing; {hint}");
    }
    Ok((size, count))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pools_parse_and_refuse_clearly() {
        assert_eq!(parse_pool("2M:512").unwrap(), (PageSize::M2, 512));
        let e = format!("{:#}", parse_pool("2M:abc").unwrap_err());
        assert!(
            e.contains("`abc` is not a page count") && e.contains("2M:512"),
            "{e}"
        );
        let e = format!("{:#}", parse_pool("2M").unwrap_err());
        assert!(e.contains("SIZE:COUNT"), "{e}");
        let e = format!("{:#}", parse_pool("3M:2").unwrap_err());
        assert!(
            e.contains("--hugetlb 3M:2") && e.contains("not allowed"),
            "{e}"
        );
    }
}
