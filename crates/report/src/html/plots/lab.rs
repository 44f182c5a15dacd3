//! The plots of a lab result: speed-ups over 4K, the stride sweep as curves, and faults
//! per configuration.

use super::{Plot, Series};
use crate::colors::label_colour;
use crate::lab::{LabConfig, LabResult, Summary};
use crate::recommend::lab::{is_baseline, stride_params};

/// The plots of a lab result: speed-ups with their spreads, the stride sweep as curves,
/// faults per configuration; for `validate`, the faults the kernel counted.
pub(crate) fn lab_plots(prefix: &str, lab: &LabResult) -> Vec<Plot> {
    let mut labels: Vec<String> = Vec::new();
    for c in &lab.configs {
        if !labels.contains(&c.label) {
            labels.push(c.label.clone());
        }
    }
    let colour = |label: &str| {
        let i = labels.iter().position(|l| l == label).unwrap_or(0);
        label_colour(label, i).to_string()
    };
    let mut subjects: Vec<String> = Vec::new();
    for c in &lab.configs {
        if !subjects.contains(&c.subject) && stride_params(&c.subject).is_none() {
            subjects.push(c.subject.clone());
        }
    }
    let find = |s: &str, l: &str| lab.configs.iter().find(|c| c.subject == s && c.label == l);
    let mut plots = Vec::new();
    let key = if lab.command == "bench" {
        "metrics/ns_per_op"
    } else {
        "wall_seconds"
    };
    if lab.command != "validate" && !subjects.is_empty() {
        let mut speed = Plot::bars(
            format!("{prefix}-speedup"),
            "Speed-up over 4K (median; bars span the runs' range)".into(),
            "",
            "speed-up over 4K",
            "x",
            false,
        );
        speed.categories = subjects.iter().map(|s| short(s)).collect();
        speed.series = series_over(&labels, &subjects, &colour, |subject, l, s| {
            let base = lab
                .configs
                .iter()
                .find(|c| c.subject == subject && is_baseline(c))
                .and_then(|c| c.summary.get(key));
            let own = find(subject, l).and_then(|c| c.summary.get(key));
            match (base, own) {
                (Some(b), Some(o)) if o.median > 0.0 && o.min > 0.0 => {
                    s.values.push(Some(b.median / o.median));
                    s.err.push(Some([b.median / o.max, b.median / o.min]));
                    s.notes
                        .push(Some(format!("spread {:.0}%", o.spread * 100.0)));
                }
                _ => {
                    s.values.push(None);
                    s.err.push(None);
                    s.notes.push(None);
                }
            }
        });
        plots.push(speed);
    }
    plots.extend(stride_curves(prefix, lab, &labels, &colour));
    let mut faults = Plot::bars(
        format!("{prefix}-faults"),
        if lab.command == "validate" {
            "Faults the kernel counted (hover: the model's prediction)".into()
        } else {
            "Page faults (median)".into()
        },
        "",
        "faults",
        "count",
        true,
    );
    faults.categories = subjects.iter().map(|s| short(s)).collect();
    faults.series = series_over(&labels, &subjects, &colour, |subject, l, s| {
        let c = find(subject, l);
        // From the runs: validate keeps no summaries.
        s.values.push(c.and_then(|c| {
            let faults: Vec<f64> = c.runs.iter().map(|m| m.faults as f64).collect();
            Summary::of(&faults).map(|f| f.median)
        }));
        s.notes.push(c.and_then(note));
    });
    if !faults.categories.is_empty() {
        plots.push(faults);
    }
    plots
}

/// One series per configuration label, in its colour, each with a point per subject that
/// `point(subject, label, series)` pushes.
fn series_over(
    labels: &[String],
    subjects: &[String],
    colour: &impl Fn(&str) -> String,
    mut point: impl FnMut(&str, &str, &mut Series),
) -> Vec<Series> {
    labels
        .iter()
        .map(|l| {
            let mut s = Series {
                name: l.clone(),
                colour: colour(l),
                ..Default::default()
            };
            for subject in subjects {
                point(subject, l, &mut s);
            }
            s
        })
        .collect()
}

fn note(c: &LabConfig) -> Option<String> {
    let p = c.predicted.as_ref()?;
    let verdict = if c.disagreements.is_empty() {
        "agree"
    } else {
        "DISAGREE"
    };
    Some(format!("model {} faults, {verdict}", p.faults))
}

/// The stride sweep: median ns per access against heap size, one line per configuration,
/// one plot per `every`.
fn stride_curves(
    prefix: &str,
    lab: &LabResult,
    labels: &[String],
    colour: &dyn Fn(&str) -> String,
) -> Vec<Plot> {
    let mut everys: Vec<u64> = lab
        .configs
        .iter()
        .filter_map(|c| stride_params(&c.subject).map(|p| p.0))
        .collect();
    everys.sort();
    everys.dedup();
    everys
        .into_iter()
        .map(|every| {
            let mut plot = Plot::bars(
                format!("{prefix}-stride{every}"),
                format!("stride, every {every} page(s): time per access against heap size"),
                "heap",
                "ns per access",
                "ns",
                true,
            );
            plot.kind = "lines";
            plot.x_log = true;
            plot.x_unit = "bytes";
            for l in labels {
                let mut points: Vec<[f64; 2]> = lab
                    .configs
                    .iter()
                    .filter(|c| &c.label == l)
                    .filter_map(|c| {
                        let (e, heap) = stride_params(&c.subject)?;
                        let v = c.summary.get("metrics/ns_per_access")?.median;
                        (e == every).then_some([heap as f64, v])
                    })
                    .collect();
                points.sort_by(|p, q| p[0].total_cmp(&q[0]));
                if !points.is_empty() {
                    plot.series.push(Series {
                        name: l.clone(),
                        colour: colour(l),
                        points,
                        ..Default::default()
                    });
                }
            }
            plot
        })
        .collect()
}

/// A subject short enough for an axis: the program's name, or the kernel with its parameters.
fn short(subject: &str) -> String {
    let first = subject.split_whitespace().next().unwrap_or(subject);
    first.rsplit('/').next().unwrap_or(first).to_string()
}
