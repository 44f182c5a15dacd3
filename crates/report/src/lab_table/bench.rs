//! The text tables of `pagelab bench`: one for the stride sweep, one per other kernel.

use crate::{columns, thousands, LabConfig, LabResult};

/// What a bench table needs to know of a kernel beyond its results.
#[derive(Clone, Debug, PartialEq)]
pub enum BenchKernel {
    /// A stride run: one row of the stride sweep table.
    Stride {
        /// The kernel's spec as results name it (`LabConfig::subject`).
        subject: String,
        /// Its heap, in bytes.
        heap: u64,
        /// Its stride, in 8-byte words.
        every: u64,
    },
    /// Any other kernel: a table of its own.
    Other {
        /// The kernel's spec as results name it.
        subject: String,
        /// The metric the table leads with (`ns_per_element`, read as `metrics/<headline>`).
        headline: String,
        /// Whether a larger headline is better (updates per second) or smaller (nanoseconds).
        larger_is_better: bool,
    },
}

/// The median of a summarized figure (`metrics/ns_per_access`, `faults`, ...).
fn median(c: &LabConfig, key: &str) -> Option<f64> {
    c.summary.get(key).map(|s| s.median)
}

fn spread(c: &LabConfig, key: &str) -> Option<f64> {
    c.summary.get(key).map(|s| s.spread)
}

/// A figure with three significant digits at most, thousands separated.
fn num(v: f64) -> String {
    if v >= 1000.0 {
        thousands(v.round() as u64)
    } else if v >= 100.0 {
        format!("{v:.0}")
    } else if v >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

/// A count (a median may be a half): whole, thousands separated.
fn count(v: f64) -> String {
    thousands(v.round() as u64)
}

/// The configuration labels in the order first run.
fn labels(result: &LabResult) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for c in &result.configs {
        if !out.contains(&c.label) {
            out.push(c.label.clone());
        }
    }
    out
}

fn find<'a>(result: &'a LabResult, subject: &str, label: &str) -> Option<&'a LabConfig> {
    result
        .configs
        .iter()
        .find(|c| c.subject == subject && c.label == label)
}

/// How many more times faster `v` is than the baseline `base`.
fn speedup(base: f64, v: f64, larger_is_better: bool) -> f64 {
    if larger_is_better {
        v / base
    } else {
        base / v
    }
}

/// Every table of a bench result: the stride sweep's (when a stride ran), then one per other
/// kernel, in the order of `kernels`.
pub fn bench_tables(result: &LabResult, kernels: &[BenchKernel]) -> String {
    let mut out = String::new();
    let strides: Vec<(&str, u64, u64)> = kernels
        .iter()
        .filter_map(|k| match k {
            BenchKernel::Stride {
                subject,
                heap,
                every,
            } => Some((subject.as_str(), *heap, *every)),
            BenchKernel::Other { .. } => None,
        })
        .collect();
    if !strides.is_empty() {
        out.push_str(&stride_table(result, &strides));
        out.push('\n');
    }
    for k in kernels {
        if let BenchKernel::Other {
            subject,
            headline,
            larger_is_better,
        } = k
        {
            out.push_str(&kernel_table(result, subject, headline, *larger_is_better));
            out.push('\n');
        }
    }
    if let Some(note) = frames_note(result) {
        out.push_str(&note);
    }
    out
}

/// A note when some kernel's 4K runs put their data's frames in very different numbers of
/// 2M blocks (`frame_blocks`, recorded as root): at least 64 in one run and 4 times as many
/// as in another. Under nested paging a 4K walk costs more the more blocks the frames fall
/// in, so such runs spread for that alone (`docs/cost.md`, session 38).
pub fn frames_note(result: &LabResult) -> Option<String> {
    let mut wide: Vec<(&str, f64, f64)> = Vec::new();
    for c in result.configs.iter().filter(|c| c.label == "4K") {
        let blocks: Vec<f64> = c
            .runs
            .iter()
            .filter_map(|r| r.metrics.get("frame_blocks").copied())
            .collect();
        let lo = blocks.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = blocks.iter().copied().fold(0.0, f64::max);
        if hi >= 64.0 && hi >= 4.0 * lo {
            wide.push((&c.subject, lo, hi));
        }
    }
    if wide.is_empty() {
        return None;
    }
    let list: Vec<String> = wide
        .iter()
        .map(|(s, lo, hi)| format!("  {s}: {lo:.0} to {hi:.0}"))
        .collect();
    Some(format!(
        "4K runs whose data's frames fell in very different numbers of 2M blocks (a 4K walk \
         costs more the more blocks under nested paging, so these runs spread for that \
         alone; `pool=SIZE` draws a kernel's frames alike in every run):\n{}\n",
        list.join("\n")
    ))
}

fn stride_table(result: &LabResult, strides: &[(&str, u64, u64)]) -> String {
    let labels = labels(result);
    let runs = super::run_counts(
        result
            .configs
            .iter()
            .filter(|c| strides.iter().any(|s| s.0 == c.subject)),
    );
    let mut rows = vec![{
        let mut h = vec!["heap".to_string(), "every".to_string()];
        h.extend(labels.iter().cloned());
        h
    }];
    for &(subject, heap, every) in strides {
        let base = find(result, subject, "4K").and_then(|c| median(c, "metrics/ns_per_access"));
        let mut row = vec![pagelab_core::Bytes(heap).to_string(), every.to_string()];
        for label in &labels {
            let v = find(result, subject, label).and_then(|c| median(c, "metrics/ns_per_access"));
            row.push(match (v, base) {
                (Some(v), Some(b)) if label != "4K" => {
                    format!("{} ({:.2}x)", num(v), speedup(b, v, false))
                }
                (Some(v), _) => num(v),
                (None, _) => "-".into(),
            });
        }
        rows.push(row);
    }
    format!(
        "stride: ns per access, median of {runs} run(s); (speed-up vs 4K)\n{}",
        columns(&rows, &[0])
    )
}

fn kernel_table(result: &LabResult, subject: &str, head: &str, larger: bool) -> String {
    let runs = super::run_counts(result.configs.iter().filter(|c| c.subject == subject));
    let key = format!("metrics/{head}");
    let base = find(result, subject, "4K").and_then(|c| median(c, &key));
    let mut rows = vec![[
        "config",
        head,
        "spread",
        "first touch us/MB",
        "faults",
        "THP allocations",
        "speed-up vs 4K",
    ]
    .map(String::from)
    .to_vec()];
    for c in result.configs.iter().filter(|c| c.subject == subject) {
        let v = median(c, &key);
        let allocs: Vec<String> = c
            .summary
            .iter()
            .filter_map(|(k, s)| Some((k.strip_prefix("faults_by_size/")?, s.median)))
            .filter(|(_, n)| *n > 0.0)
            .map(|(size, n)| format!("{size}: {}", count(n)))
            .collect();
        rows.push(vec![
            c.label.clone(),
            v.map_or("-".into(), num),
            spread(c, &key).map_or("-".into(), |s| format!("{:.1}%", s * 100.0)),
            median(c, "metrics/first_touch_ns_per_mb").map_or("-".into(), |ns| num(ns / 1e3)),
            median(c, "faults").map_or("-".into(), count),
            if allocs.is_empty() {
                "-".into()
            } else {
                allocs.join(", ")
            },
            match (v, base) {
                (Some(v), Some(b)) => format!("{:.2}", speedup(b, v, larger)),
                _ => "-".into(),
            },
        ]);
    }
    format!(
        "{subject}: median of {runs} run(s)\n{}",
        columns(&rows, &[0])
    )
}
