//! `pagelab validate`: the kernel as the referee of the model.
//!
//! For every THP configuration (the 4K baseline, each size alone, all sizes
//! together) and every workload, a fresh child process replays the workload's
//! data references natively at the workload's own addresses ([`replay`]), and
//! the model's `linux-thp` policy runs the same references on the same mapping
//! with the settings the kernel held ([`model`]). Faults, per-size
//! `anon_fault_alloc` and `anon_fault_fallback` must agree exactly: the
//! kernel's anonymous fault path is deterministic for a given mapping, setting
//! and first-touch order while memory is plentiful. The child's faults are
//! taken after subtracting its baseline (a dry pass that generates the same
//! references without touching memory).
//!
//! Configurations run in madvise mode by default: only the child's advised
//! mapping may get large pages, so other processes on the machine cannot
//! disturb the kernel's global per-size counters during the replay.

pub mod model;
pub mod program;
pub mod replay;

use crate::session::KnobSession;
use crate::sysfs::Sysfs;
use crate::sysfs::ThpMode;
use anyhow::{bail, Context, Result};
use pagelab_core::PageSize;
use pagelab_report::validate::{Counts, ValidateCase, ValidateResult};
use pagelab_report::{LabConfig, LabResult, Measurement};
use replay::{Advise, ReplayReport};
use std::collections::BTreeMap;
use std::ffi::OsString;

/// The default workloads, each twice: writing its data first (`init=true`,
/// as programs usually do) and reading it first (`init=false`: reads of
/// never-written memory map the zero page, and writes then replace it). Their
/// data regions straddle 2M boundaries, so every size's alignment and
/// fallback paths are exercised.
pub const DEFAULT_WORKLOADS: [&str; 8] = [
    "stride:heap=4M,iters=2",
    "stream:n=131072,iters=1",
    "gups:table=8M,updates=200000",
    "chase:nodes=65536,steps=200000",
    "stride:heap=4M,iters=2,init=false",
    "stream:n=131072,iters=1,init=false",
    "gups:table=8M,updates=200000,init=false",
    "chase:nodes=65536,steps=200000,init=false",
];

/// What to validate.
#[derive(Clone, Debug)]
pub struct ValidateOptions {
    /// Workload specs.
    pub workloads: Vec<String>,
    /// Page-size configurations; each a set of sizes (4K alone is the baseline).
    pub configs: Vec<Vec<PageSize>>,
    /// How the sizes are enabled.
    pub mode: ThpMode,
    /// The command that runs one replay: the pagelab binary and its hidden
    /// child subcommand; `--advise`, `huge|none` and the workload are appended.
    pub child: Vec<OsString>,
}

impl ValidateOptions {
    /// The default configurations for a kernel offering `thp_sizes`: the 4K
    /// baseline, each size alone, and all of them together.
    pub fn default_configs(thp_sizes: &[PageSize]) -> Vec<Vec<PageSize>> {
        let mut out = vec![vec![PageSize::K4]];
        out.extend(thp_sizes.iter().map(|&s| vec![s]));
        if thp_sizes.len() > 1 {
            out.push(thp_sizes.to_vec());
        }
        out
    }
}

/// The label of a configuration: `4K`, `64K`, `16K+64K+2M`, or `all` for
/// every size of `thp_sizes` when there are several.
pub fn config_label(pages: &[PageSize], thp_sizes: &[PageSize]) -> String {
    if thp_sizes.len() > 1 && pages == thp_sizes {
        return "all".into();
    }
    crate::runner::config_label(pages, None)
}

/// Runs every (configuration, workload) natively and in the model; `progress`
/// hears about each step. The knobs are restored before this returns, whatever
/// happens.
pub fn run(
    sysfs: &Sysfs,
    opts: &ValidateOptions,
    mut progress: impl FnMut(&str),
) -> Result<LabResult, crate::LabError> {
    sysfs.require_thp()?;
    let mut result = LabResult::new("validate", sysfs.host_info());
    let mut session = KnobSession::begin(sysfs)?;
    let total = opts.configs.len() * opts.workloads.len();
    let thp_sizes = sysfs.thp_sizes();
    for (i, pages) in opts.configs.iter().enumerate() {
        let label = config_label(pages, &thp_sizes);
        session
            .configure(pages, opts.mode)
            .with_context(|| format!("configuring {label}"))?;
        for (j, w) in opts.workloads.iter().enumerate() {
            if let Some(signal) = crate::session::interrupted() {
                session.restore()?;
                return Err(crate::LabError::Interrupted { signal });
            }
            progress(&format!(
                "[{}/{total}] {} under {}",
                i * opts.workloads.len() + j + 1,
                w,
                label
            ));
            let advise = if opts.mode == ThpMode::Madvise {
                Advise::Huge
            } else {
                Advise::None
            };
            let report = match run_child(&opts.child, advise, w) {
                Ok(r) => r,
                // Ctrl-C reaches the replay too: its failure is the interrupt's.
                Err(e) => match crate::session::interrupted() {
                    Some(signal) => {
                        session.restore()?;
                        return Err(crate::LabError::Interrupted { signal });
                    }
                    None => return Err(e.into()),
                },
            };
            let predicted = model::predict(&report)?;
            result
                .configs
                .push(compare(pages, &label, opts.mode, &report, &predicted));
        }
    }
    session.restore()?;
    Ok(result)
}

/// Runs one replay in a fresh process and reads its report.
fn run_child(child: &[OsString], advise: Advise, workload: &str) -> Result<ReplayReport> {
    let (exe, args) = child.split_first().context("no child command")?;
    let mut cmd = std::process::Command::new(exe);
    let parent = std::process::id();
    // SAFETY: die_with_parent makes only async-signal-safe system calls, as code between
    // fork and exec must.
    unsafe {
        std::os::unix::process::CommandExt::pre_exec(&mut cmd, move || {
            pagelab_sys::process::die_with_parent(parent)
        });
    }
    let out = cmd
        .args(args)
        .arg("--advise")
        .arg(match advise {
            Advise::Huge => "huge",
            Advise::None => "none",
        })
        .arg(workload)
        .stderr(std::process::Stdio::inherit())
        .output()
        .with_context(|| format!("running {exe:?}"))?;
    if !out.status.success() {
        bail!("the replay of `{workload}` failed ({})", out.status);
    }
    serde_json::from_slice(&out.stdout).with_context(|| {
        format!(
            "the replay of `{workload}` printed no report: {}",
            String::from_utf8_lossy(&out.stdout)
        )
    })
}

/// The lab configuration of one replay and its prediction, with every disagreement named.
fn compare(
    pages: &[PageSize],
    label: &str,
    mode: ThpMode,
    report: &ReplayReport,
    predicted: &model::Prediction,
) -> LabConfig {
    let measured_faults = report.faults.saturating_sub(report.baseline_faults);
    let alloc = crate::counters::faults_by_size(&report.counters);
    let fallback = crate::counters::fallbacks_by_size(&report.counters);
    let mut disagreements = Vec::new();
    if measured_faults != predicted.faults {
        disagreements.push(format!(
            "faults: model {}, kernel {measured_faults}",
            predicted.faults
        ));
    }
    for (what, model, kernel) in [
        ("anon_fault_alloc", &predicted.alloc_by_size, &alloc),
        (
            "anon_fault_fallback",
            &predicted.fallback_by_size,
            &fallback,
        ),
    ] {
        let mut sizes: Vec<&String> = model.keys().chain(kernel.keys()).collect();
        sizes.sort_by_key(|k| k.parse::<PageSize>().ok());
        sizes.dedup();
        for s in sizes {
            let (m, k) = (model.get(s).copied(), kernel.get(s).copied());
            if m.unwrap_or(0) != k.unwrap_or(0) {
                disagreements.push(format!(
                    "{s} {what}: model {}, kernel {}",
                    m.unwrap_or(0),
                    k.unwrap_or(0)
                ));
            }
        }
    }
    LabConfig {
        subject: report.workload.clone(),
        label: label.to_string(),
        pages: pages.to_vec(),
        thp: mode.to_string(),
        runs: vec![Measurement {
            wall_seconds: report.seconds,
            faults: measured_faults,
            faults_by_size: alloc.clone(),
            fallbacks_by_size: fallback.clone(),
            kernel_counters: report.counters.clone(),
            metrics: BTreeMap::from([
                ("baseline_faults".to_string(), report.baseline_faults as f64),
                ("refs".to_string(), report.refs as f64),
                ("mapping_start".to_string(), report.start as f64),
                ("mapping_bytes".to_string(), report.len as f64),
            ]),
            ..Default::default()
        }],
        predicted: Some(Measurement {
            faults: predicted.faults,
            faults_by_size: predicted.alloc_by_size.clone(),
            fallbacks_by_size: predicted.fallback_by_size.clone(),
            ..Default::default()
        }),
        disagreements,
        ..Default::default()
    }
}

/// The result as `pagelab.validate/1`: one case per (workload, configuration), with the
/// model's and the kernel's faults and allocations per size and the verdict, which is
/// `agree` only when faults, allocations and fallbacks were all exactly equal.
pub fn validate_result(result: &LabResult) -> ValidateResult {
    let counts = |m: &Measurement| Counts {
        faults: m.faults,
        allocs: m
            .faults_by_size
            .iter()
            .filter(|&(_, &n)| n > 0)
            .map(|(k, &n)| (k.clone(), n))
            .collect(),
        exit_folios: None,
    };
    let mut out = ValidateResult::new(0.0);
    out.provenance = result.provenance.clone();
    out.cases = result
        .configs
        .iter()
        .map(|c| ValidateCase {
            workload: c.subject.clone(),
            config: c.label.clone(),
            thp: c.thp.clone(),
            model: c.predicted.as_ref().map(counts).unwrap_or_default(),
            kernel: c.runs.first().map(counts).unwrap_or_default(),
            kernel_runs: Vec::new(),
            mappings: Vec::new(),
            verdict: if c.disagreements.is_empty() {
                "agree"
            } else {
                "differ"
            }
            .into(),
        })
        .collect();
    out
}

/// Whether every configuration agreed.
pub fn agreed(result: &LabResult) -> bool {
    result.configs.iter().all(|c| c.disagreements.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report(counters: &[(&str, i64)], faults: u64) -> ReplayReport {
        ReplayReport {
            workload: "stride:heap=64K,iters=1".into(),
            faults,
            baseline_faults: 0,
            counters: counters.iter().map(|(k, v)| (k.to_string(), *v)).collect(),
            ..Default::default()
        }
    }

    fn prediction(faults: u64, alloc: &[(&str, u64)]) -> model::Prediction {
        model::Prediction {
            faults,
            alloc_by_size: alloc.iter().map(|(k, v)| (k.to_string(), *v)).collect(),
            fallback_by_size: BTreeMap::new(),
        }
    }

    #[test]
    fn agreement_has_no_disagreements() {
        let r = report(&[("hugepages-64kB/anon_fault_alloc", 3)], 5);
        let c = compare(
            &[PageSize::K4],
            "4K",
            ThpMode::Madvise,
            &r,
            &prediction(5, &[("64K", 3)]),
        );
        assert!(c.disagreements.is_empty(), "{:?}", c.disagreements);
    }

    #[test]
    fn every_difference_is_named() {
        let r = report(
            &[
                ("hugepages-64kB/anon_fault_alloc", 3),
                ("hugepages-2048kB/anon_fault_fallback", 1),
            ],
            6,
        );
        let c = compare(
            &[PageSize::K4],
            "4K",
            ThpMode::Madvise,
            &r,
            &prediction(5, &[("16K", 2), ("64K", 3)]),
        );
        assert_eq!(
            c.disagreements,
            [
                "faults: model 5, kernel 6",
                "16K anon_fault_alloc: model 2, kernel 0",
                "2M anon_fault_fallback: model 0, kernel 1",
            ]
        );
        let mut result = LabResult::new("validate", Default::default());
        result.configs.push(c);
        assert!(!agreed(&result));
        assert!(pagelab_report::lab_table::validate_table(&result)
            .contains("DIFFER: faults: model 5, kernel 6"));
    }

    #[test]
    fn the_baseline_is_subtracted() {
        let mut r = report(&[], 20);
        r.baseline_faults = 4;
        let c = compare(
            &[PageSize::K4],
            "4K",
            ThpMode::Madvise,
            &r,
            &prediction(16, &[]),
        );
        assert!(c.disagreements.is_empty(), "{:?}", c.disagreements);
        assert_eq!(c.runs[0].faults, 16);
    }

    #[test]
    fn the_model_counts_one_fault_per_4k_page_without_thp() {
        // 64K heap of stride at its default (unaligned) address: 17 pages.
        let (start, end) = replay::data_extent("stride:heap=64K,iters=1").unwrap();
        let r = ReplayReport {
            workload: "stride:heap=64K,iters=1".into(),
            start,
            len: end - start,
            settings: "enabled=never".into(),
            ..Default::default()
        };
        let p = model::predict(&r).unwrap();
        assert_eq!(p.faults, (end - start) / 4096);
        assert!(p.alloc_by_size.values().all(|&n| n == 0));
    }
}
