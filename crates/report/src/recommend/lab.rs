//! Recommendations from the lab: `pagelab run`, `bench` and `validate` results.
//!
//! For `run` and `bench`, per program or kernel: the configuration with the best median time
//! (wall time of the whole program for `run`, the kernel's `ns_per_op` for `bench`) among
//! those whose median peak memory is within the budget over the 4K baseline. A gain counts as
//! reliable only when the ranges of the runs do not overlap (this configuration's slowest
//! run beats the baseline's fastest); otherwise the sentence says the gain is within the
//! spread. The stride sweep of `bench` is judged at its largest heap, per `every`.
//!
//! For `validate`, per workload: whether the model and the kernel agreed under every
//! configuration.

use super::sentence::{bytes, signed_percent};
use super::{Recommendation, Rule};
use crate::lab::{LabConfig, LabResult, Summary};
use pagelab_core::parse_bytes;

/// One recommendation per program, kernel or workload of `result`, in the order run.
pub fn all(result: &LabResult, rule: &Rule) -> Vec<Recommendation> {
    let subjects = subjects(result);
    match result.command.as_str() {
        "validate" => subjects.iter().map(|s| agreement(result, s)).collect(),
        "bench" => subjects
            .iter()
            .map(|s| fastest(result, s, "metrics/ns_per_op", "ns per operation", rule))
            .collect(),
        _ => subjects
            .iter()
            .map(|s| fastest(result, s, "wall_seconds", "wall time", rule))
            .collect(),
    }
}

/// The stride parameters of a bench subject (`stride:heap=32M,...,every=16`): (every, heap).
pub fn stride_params(subject: &str) -> Option<(u64, u64)> {
    let params = subject.strip_prefix("stride:")?;
    let get = |key: &str| {
        params
            .split(',')
            .find_map(|kv| kv.strip_prefix(key)?.strip_prefix('='))
    };
    Some((get("every")?.parse().ok()?, parse_bytes(get("heap")?).ok()?))
}

/// The subjects in the order run; of a stride sweep only the largest heap per `every`.
fn subjects(result: &LabResult) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for c in &result.configs {
        if out.contains(&c.subject) {
            continue;
        }
        if let Some((every, heap)) = stride_params(&c.subject) {
            let larger = result
                .configs
                .iter()
                .any(|o| stride_params(&o.subject).is_some_and(|(e, h)| e == every && h > heap));
            if larger {
                continue;
            }
        }
        out.push(c.subject.clone());
    }
    out
}

/// Whether a configuration is the 4K baseline (no larger size, no hugetlb pool).
pub fn is_baseline(c: &LabConfig) -> bool {
    c.hugetlb.is_empty() && c.pages.iter().all(|p| p.bytes() == 4096)
}

fn fastest(
    result: &LabResult,
    subject: &str,
    key: &str,
    what: &str,
    rule: &Rule,
) -> Recommendation {
    let configs: Vec<&LabConfig> = result
        .configs
        .iter()
        .filter(|c| c.subject == subject)
        .collect();
    let heap_note = stride_params(subject).map_or(String::new(), |(every, heap)| {
        format!(
            " (stride sweep, every {every}, at its largest heap {})",
            bytes(heap as f64)
        )
    });
    let sum = |c: &LabConfig| c.summary.get(key).copied();
    let mem = |c: &LabConfig| c.summary.get("peak_rss_bytes").map(|s| s.median);
    let runs = configs.iter().map(|c| c.runs.len()).max().unwrap_or(0);
    let none = |why: String| Recommendation {
        subject: subject.to_string(),
        choice: None,
        sentence: format!("{subject}{heap_note}: {why}."),
    };
    let Some(base) = configs.iter().copied().find(|c| is_baseline(c)) else {
        return none("no 4K baseline ran, so there is nothing to compare against".into());
    };
    let Some(bs) = sum(base).filter(|s| s.median > 0.0) else {
        return none(format!("the 4K baseline has no {what}"));
    };
    let in_budget = |c: &LabConfig| match (mem(base), mem(c)) {
        (Some(b), Some(m)) if b > 0.0 => rule.within_budget(b, m),
        _ => true,
    };
    let best = configs
        .iter()
        .copied()
        .filter(|c| !is_baseline(c) && in_budget(c))
        .filter_map(|c| Some((c, sum(c)?)))
        .filter(|(_, s)| s.median > 0.0)
        .min_by(|a, b| a.1.median.total_cmp(&b.1.median));
    let Some((c, cs)) = best else {
        return none(format!(
            "no configuration other than 4K within memory +{} has a {what}",
            pct(rule.max_memory_growth)
        ));
    };
    let speedup = bs.median / cs.median;
    let memory = match (mem(base), mem(c)) {
        (Some(b), Some(m)) if b > 0.0 => format!(", peak memory {}", signed_percent(b, m)),
        _ => String::new(),
    };
    let figures = format!(
        "{what} {} against {}{memory}",
        spread_text(&cs),
        spread_text(&bs)
    );
    let (choice, verdict) = if speedup <= 1.0 {
        (
            "4K",
            format!(
                "keep 4K: no configuration within memory +{} was faster (the best, {}, ran at {speedup:.2}x: {figures})",
                pct(rule.max_memory_growth),
                c.label
            ),
        )
    } else {
        let judged = if runs < 2 {
            "one run each, so there is no spread to judge it by (use --repeat 5)".to_string()
        } else if cs.max < bs.min {
            format!("beyond the spread of {runs} runs")
        } else {
            format!("within the spread of {runs} runs, so not a reliable gain (rerun with a larger --repeat)")
        };
        (
            c.label.as_str(),
            format!(
                "{}: {speedup:.2}x faster than 4K ({figures}); {judged}",
                c.label
            ),
        )
    };
    Recommendation {
        subject: subject.to_string(),
        choice: Some(choice.to_string()),
        sentence: format!("{subject}{heap_note}: {verdict}."),
    }
}

/// `0.447 ± 23%` (median ± spread).
fn spread_text(s: &Summary) -> String {
    let digits = if s.median >= 100.0 {
        0
    } else if s.median >= 1.0 {
        2
    } else {
        3
    };
    format!("{:.digits$} \u{b1} {:.0}%", s.median, s.spread * 100.0)
}

fn pct(fraction: f64) -> String {
    format!("{:.0}%", fraction * 100.0)
}

fn agreement(result: &LabResult, subject: &str) -> Recommendation {
    let configs: Vec<&LabConfig> = result
        .configs
        .iter()
        .filter(|c| c.subject == subject)
        .collect();
    let disagree: Vec<&LabConfig> = configs
        .iter()
        .copied()
        .filter(|c| !c.disagreements.is_empty())
        .collect();
    let unpredicted = configs.iter().filter(|c| c.predicted.is_none()).count();
    let sentence = if disagree.is_empty() && unpredicted == 0 {
        format!(
            "{subject}: the model and the kernel agree on faults and allocations per size under all {} configurations.",
            configs.len()
        )
    } else if disagree.is_empty() {
        format!(
            "{subject}: the model agrees with the kernel where it predicted, but {unpredicted} of {} configurations have no prediction.",
            configs.len()
        )
    } else {
        let labels: Vec<&str> = disagree.iter().map(|c| c.label.as_str()).collect();
        format!(
            "{subject}: the model and the kernel DISAGREE under {} of {} configurations ({}): {}.",
            disagree.len(),
            configs.len(),
            labels.join(", "),
            disagree[0].disagreements[0].trim_end_matches('.')
        )
    };
    Recommendation {
        subject: subject.to_string(),
        choice: Some(
            if disagree.is_empty() {
                "agree"
            } else {
                "disagree"
            }
            .to_string(),
        ),
        sentence,
    }
}
