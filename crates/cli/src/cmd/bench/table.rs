//! The text tables of `pagelab bench`: one for the stride sweep, one per other kernel.

use pagelab_lab::native::KernelSpec;
use pagelab_report::{thousands, LabConfig, LabResult};

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

/// Every table of a bench result, in the order of `specs`.
pub fn tables(result: &LabResult, specs: &[KernelSpec]) -> String {
    let runs = result.configs.first().map_or(0, |c| c.runs.len());
    let mut out = String::new();
    let strides: Vec<&KernelSpec> = specs
        .iter()
        .filter(|s| matches!(s, KernelSpec::Stride(_)))
        .collect();
    if !strides.is_empty() {
        out.push_str(&stride_table(result, &strides, runs));
        out.push('\n');
    }
    for spec in specs.iter().filter(|s| !matches!(s, KernelSpec::Stride(_))) {
        out.push_str(&kernel_table(result, spec, runs));
        out.push('\n');
    }
    out
}

fn stride_table(result: &LabResult, specs: &[&KernelSpec], runs: usize) -> String {
    let labels = labels(result);
    let mut rows = vec![{
        let mut h = vec!["heap".to_string(), "every".to_string()];
        h.extend(labels.iter().cloned());
        h
    }];
    for spec in specs {
        let KernelSpec::Stride(s) = spec else {
            continue;
        };
        let subject = spec.to_string();
        let base = find(result, &subject, "4K").and_then(|c| median(c, "metrics/ns_per_access"));
        let mut row = vec![pagelab_core::Bytes(s.heap).to_string(), s.every.to_string()];
        for label in &labels {
            let v = find(result, &subject, label).and_then(|c| median(c, "metrics/ns_per_access"));
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
        pagelab_report::columns(&rows, &[0])
    )
}

fn kernel_table(result: &LabResult, spec: &KernelSpec, runs: usize) -> String {
    let subject = spec.to_string();
    let (head, larger) = spec.headline();
    let key = format!("metrics/{head}");
    let base = find(result, &subject, "4K").and_then(|c| median(c, &key));
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
        pagelab_report::columns(&rows, &[0])
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use pagelab_lab::native::{expand, Scale};
    use pagelab_report::{Measurement, Summary};

    fn config(subject: &str, label: &str, metric: &str, v: f64) -> LabConfig {
        let mut c = LabConfig {
            subject: subject.into(),
            label: label.into(),
            runs: vec![Measurement::default()],
            ..Default::default()
        };
        c.summary
            .insert(format!("metrics/{metric}"), Summary::of(&[v]).unwrap());
        c.summary.insert(
            "faults_by_size/2M".into(),
            Summary::of(&[if label == "2M" { 16.0 } else { 0.0 }]).unwrap(),
        );
        c
    }

    #[test]
    fn speedups_are_over_4k_in_the_headlines_direction() {
        assert_eq!(speedup(1000.0, 1500.0, true), 1.5);
        assert_eq!(speedup(3.0, 2.0, false), 1.5);
        let specs = [
            expand("stream:n=1000", Scale::Full).unwrap(),
            expand("stride:heap=4M,every=16", Scale::Full).unwrap(),
        ]
        .concat();
        let (stream, stride) = (specs[0].to_string(), specs[1].to_string());
        let mut r = LabResult::new("bench", Default::default());
        for (label, per_elem, ns) in [("4K", 3.0, 8.0), ("2M", 2.0, 2.0)] {
            r.configs
                .push(config(&stream, label, "ns_per_element", per_elem));
            r.configs.push(config(&stride, label, "ns_per_access", ns));
        }
        let text = tables(&r, &specs);
        assert!(text.contains("4M       16  8.00  2.00 (4.00x)"), "{text}");
        let line = text.lines().find(|l| l.starts_with("2M ")).unwrap();
        assert!(
            line.contains("2M: 16") && line.trim_end().ends_with("1.50"),
            "{line}"
        );
    }
}
