//! The lab's text tables, made from a [`LabResult`] alone: `pagelab run`'s ([`run_table`]),
//! `pagelab bench`'s ([`bench_tables`], and with `--predict` [`predict_table`]) and `pagelab validate`'s ([`validate_table`]).

mod bench;
mod predict;

pub use bench::{bench_tables, BenchKernel};
pub use predict::{
    measured_speedup, predict_table, same_ranking, settled, speedups_2m, unsettled_subjects,
    KernelPrediction, MeasuredSpeedup, SPEEDUP_TOLERANCE,
};

use crate::{columns, LabConfig, LabResult, Measurement};
use pagelab_core::PageSize;
use std::collections::BTreeMap;

/// How many runs the configurations have: `9`, or `9-27` where kernels measured again
/// (`bench --predict --settle`) have more than others.
pub(crate) fn run_counts<'a>(configs: impl Iterator<Item = &'a LabConfig>) -> String {
    let (lo, hi) = configs
        .map(|c| c.runs.len())
        .fold((usize::MAX, 0), |(lo, hi), n| (lo.min(n), hi.max(n)));
    match (lo, hi) {
        (usize::MAX, _) => "0".into(),
        (lo, hi) if lo == hi => lo.to_string(),
        (lo, hi) => format!("{lo}-{hi}"),
    }
}

/// `pagelab run`'s table: one row per configuration, medians over repetitions, then notes
/// (runs per configuration, unavailable hardware counters, hugetlb pools, failed runs).
pub fn run_table(result: &LabResult) -> String {
    let mut rows = vec![[
        "config",
        "wall",
        "user",
        "sys",
        "faults",
        "THP allocations",
        "fallbacks",
        "peak RSS",
        "vs 4K",
    ]
    .map(String::from)
    .to_vec()];
    for c in &result.configs {
        let med = |k: &str| c.summary.get(k).map_or(0.0, |s| s.median);
        let wall = c.summary.get("wall_seconds").copied().unwrap_or_default();
        let wall = if c.runs.len() > 1 {
            format!("{:.3} s ± {:.1}%", wall.median, wall.spread * 100.0)
        } else {
            format!("{:.3} s", wall.median)
        };
        let per_size = |prefix: &str| {
            let mut v: Vec<(PageSize, f64)> = c
                .summary
                .iter()
                .filter_map(|(k, s)| Some((k.strip_prefix(prefix)?.parse().ok()?, s.median)))
                .collect();
            v.sort_by_key(|e| std::cmp::Reverse(e.0));
            let text: Vec<String> = v
                .iter()
                .map(|(s, n)| format!("{s}:{}", count(*n)))
                .collect();
            if text.is_empty() {
                "-".to_string()
            } else {
                text.join(" ")
            }
        };
        rows.push(vec![
            c.label.clone(),
            wall,
            format!("{:.3} s", med("user_seconds")),
            format!("{:.3} s", med("system_seconds")),
            count(med("faults")),
            per_size("faults_by_size/"),
            per_size("fallbacks_by_size/"),
            pagelab_core::Bytes(med("peak_rss_bytes") as u64).to_string(),
            c.speedup_vs_4k.map_or("-".into(), |s| format!("{s:.2}x")),
        ]);
    }
    let mut out = columns(&rows, &[0]);
    let runs = result
        .configs
        .iter()
        .map(|c| c.runs.len())
        .max()
        .unwrap_or(0);
    out += &format!(
        "{} run{} per configuration; wall is the median{}; faults are minor faults; THP \
         allocations are the kernel's anon_fault_alloc per size (system-wide, during the run)\n",
        runs,
        if runs == 1 { "" } else { "s" },
        if runs > 1 { " ± (max-min)/median" } else { "" }
    );
    if let Some(why) = result
        .configs
        .iter()
        .flat_map(|c| &c.runs)
        .find_map(|m| m.hw_unavailable.as_ref())
    {
        out += &format!("hardware counters unavailable: {why}\n");
    }
    for c in result.configs.iter().filter(|c| !c.hugetlb.is_empty()) {
        out += &hugetlb_note(c);
    }
    if let Some(failures) = run_failures(result) {
        out += &format!("{failures}\n");
    }
    out
}

/// How a run ended, as people say it: `exited with code 7`, `was killed by signal 9`.
fn ending(m: &Measurement) -> Option<String> {
    match (m.exit.code, m.exit.signal) {
        (Some(0), _) => None,
        (Some(code), _) => Some(format!("exited with code {code}")),
        (None, Some(sig)) => Some(format!("was killed by signal {sig}")),
        (None, None) => Some("ended in an unknown way".into()),
    }
}

/// A sentence naming every configuration whose program failed in some run, and how; `None`
/// when every run exited 0. The figures of such runs measure a program that did not do its
/// whole work, so the table must not pass for a normal one.
pub fn run_failures(result: &LabResult) -> Option<String> {
    let parts: Vec<String> = result
        .configs
        .iter()
        .filter_map(|c| {
            // Each distinct ending with its count, in the order first seen.
            let mut endings: Vec<(String, usize)> = Vec::new();
            for e in c.runs.iter().filter_map(ending) {
                match endings.iter_mut().find(|(seen, _)| *seen == e) {
                    Some((_, n)) => *n += 1,
                    None => endings.push((e, 1)),
                }
            }
            if endings.is_empty() {
                return None;
            }
            let how: Vec<String> = endings.iter().map(|(e, n)| format!("{e} in {n}")).collect();
            Some(format!(
                "under {} it {} of {} run{}",
                c.label,
                how.join(", "),
                c.runs.len(),
                if c.runs.len() == 1 { "" } else { "s" }
            ))
        })
        .collect();
    (!parts.is_empty()).then(|| {
        format!(
            "WARNING: the program failed: {}; those runs' figures are in the table and the \
             JSON as measured, and pagelab exits with the first failed run's status",
            parts.join("; ")
        )
    })
}

/// What a configuration with hugetlb pools got from them: the pool, the pages in use at the
/// peak (sampled), what the shim mapped.
fn hugetlb_note(c: &LabConfig) -> String {
    let med = |k: &str| c.summary.get(k).map_or(0.0, |s| s.median);
    let pools: Vec<String> = c
        .hugetlb
        .iter()
        .map(|(size, got)| {
            format!(
                "pool of {got} {size} pages, at most {} of them seen in use",
                count(med(&format!("metrics/hugetlb_peak_in_use/{size}")))
            )
        })
        .collect();
    let mut note = format!("{}: {}", c.label, pools.join("; "));
    if c.summary.contains_key("metrics/shim_processes") {
        note += &format!(
            "; the shim mapped {} mappings with MAP_HUGETLB ({} fell back to normal pages)",
            count(med("metrics/shim_hugetlb_mappings")),
            count(med("metrics/shim_hugetlb_fallbacks"))
        );
    }
    note + " (medians; use is sampled every 5 ms, so a run that short may show none)\n"
}

fn count(n: f64) -> String {
    if n.fract() == 0.0 {
        format!("{n:.0}")
    } else {
        format!("{n:.1}")
    }
}

/// `pagelab validate`'s table: one row per (workload, configuration), the model's faults and
/// per-size allocations beside the kernel's, and the verdict.
pub fn validate_table(result: &LabResult) -> String {
    let mut rows = vec![vec![
        "workload".to_string(),
        "pages".to_string(),
        "faults model".to_string(),
        "faults kernel".to_string(),
        "THP allocs model".to_string(),
        "THP allocs kernel".to_string(),
        "verdict".to_string(),
    ]];
    let sizes = |m: &BTreeMap<String, u64>| -> String {
        let mut v: Vec<(PageSize, u64)> = m
            .iter()
            .filter_map(|(k, n)| Some((k.parse().ok()?, *n)))
            .collect();
        v.sort();
        if v.is_empty() {
            return "-".into();
        }
        v.iter()
            .map(|(s, n)| format!("{n}×{s}"))
            .collect::<Vec<_>>()
            .join(" ")
    };
    for c in &result.configs {
        let (Some(p), Some(m)) = (&c.predicted, c.runs.first()) else {
            continue;
        };
        rows.push(vec![
            c.subject.clone(),
            c.label.clone(),
            p.faults.to_string(),
            m.faults.to_string(),
            sizes(&p.faults_by_size),
            sizes(&m.faults_by_size),
            if c.disagreements.is_empty() {
                "agree".to_string()
            } else {
                format!("DIFFER: {}", c.disagreements.join("; "))
            },
        ]);
    }
    let text = columns(&rows, &[0, 1, 4, 5, 6]);
    let (header, body) = text.split_once('\n').unwrap_or((&text, ""));
    format!("{header}\n{}\n{body}", "-".repeat(header.chars().count()))
}
