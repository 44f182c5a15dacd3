//! The report's interactive plots, described as data for `report.js` to draw.

use crate::colors::{label_colour, other_colour, size_colour};
use crate::curve::Line;
use crate::lab::{LabConfig, LabResult, Summary};
use crate::recommend::lab::{is_baseline, stride_params};
use crate::schema::{RunStats, SimResult};
use pagelab_core::{parse_bytes, PageSize};
use serde::Serialize;

/// One plot: bars over categories or lines over a numeric x.
#[derive(Clone, Debug, Serialize)]
pub(crate) struct Plot {
    /// The `id` of its `<figure>`.
    pub id: String,
    pub title: String,
    /// `bars` or `lines`.
    pub kind: &'static str,
    pub x_label: String,
    pub y_label: String,
    /// How values are written: `count`, `bytes`, `x` (a ratio), `ns`.
    pub unit: &'static str,
    /// How x values are written (lines).
    pub x_unit: &'static str,
    /// The y axis starts logarithmic.
    pub log: bool,
    /// The x axis is logarithmic (lines).
    pub x_log: bool,
    /// Bar groups (bars).
    pub categories: Vec<String>,
    pub series: Vec<Series>,
}

/// One series: a value per category (bars) or points (lines).
#[derive(Clone, Debug, Default, Serialize)]
pub(crate) struct Series {
    pub name: String,
    pub colour: String,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub values: Vec<Option<f64>>,
    /// Error bars, (low, high) per category.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub err: Vec<Option<[f64; 2]>>,
    /// A note per category, shown on hover.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<Option<String>>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub points: Vec<[f64; 2]>,
}

impl Plot {
    fn bars(id: String, title: String, x: &str, y: &str, unit: &'static str, log: bool) -> Plot {
        Plot {
            id,
            title,
            kind: "bars",
            x_label: x.into(),
            y_label: y.into(),
            unit,
            x_unit: "count",
            log,
            x_log: false,
            categories: Vec::new(),
            series: Vec::new(),
        }
    }
}

/// The plots of a page-size study (or one `sim`): per workload, TLB misses and memory per
/// page size, each page size one series in its own colour (the paper's Figure 1), and a
/// curve for every sweep the results hold.
pub(crate) fn study_plots(prefix: &str, results: &[SimResult]) -> Vec<Plot> {
    let mut plots = Vec::new();
    let subjects = crate::recommend::study::subjects(results);
    for (i, r) in results.iter().enumerate() {
        let name = &subjects[i];
        if r.runs.iter().any(|run| run.mm.is_some()) {
            plots.extend(policy_plots(&format!("{prefix}-r{i}"), name, r));
            continue;
        }
        let mut misses = Plot::bars(
            format!("{prefix}-r{i}-misses"),
            format!("{name}: TLB misses per page size"),
            "",
            "TLB misses",
            "count",
            true,
        );
        misses.categories = vec!["instructions (iTLB)".into(), "data (dTLB)".into()];
        let mut memory = Plot::bars(
            format!("{prefix}-r{i}-memory"),
            format!("{name}: memory used per page size"),
            "",
            "memory",
            "bytes",
            false,
        );
        memory.categories = vec!["code".into(), "data".into(), "total".into()];
        for run in &r.runs {
            let s = |values: Vec<u64>| Series {
                name: run.page_size.to_string(),
                colour: size_colour(run.page_size).into(),
                values: values.into_iter().map(|v| Some(v as f64)).collect(),
                ..Default::default()
            };
            misses
                .series
                .push(s(vec![run.itlb_misses, run.dtlb_misses]));
            memory.series.push(s(vec![
                run.code_footprint_bytes,
                run.data_footprint_bytes,
                run.footprint_bytes,
            ]));
        }
        plots.push(misses);
        plots.push(memory);
    }
    plots.extend(sweeps(prefix, results));
    plots
}

/// Sweeps: three or more results of the same workload that differ in exactly one numeric
/// parameter (what `FROM..TO/STEP` makes). Each is drawn as `pagelab sim` tabulates it
/// ([`crate::curve::lines`]): its metric (cycles per load or per access when the machine has
/// caches, else the dTLB miss rate) against the parameter, one line per page size or policy;
/// and with two series or more, the first's metric over each other's.
fn sweeps(prefix: &str, results: &[SimResult]) -> Vec<Plot> {
    let mut plots = Vec::new();
    let mut done: Vec<(String, String)> = Vec::new();
    for a in results {
        for key in a.source.params.keys() {
            let mut group: Vec<(f64, &SimResult)> = results
                .iter()
                .filter(|b| {
                    b.source.name == a.source.name
                        && b.source.params.len() == a.source.params.len()
                        && b.source
                            .params
                            .iter()
                            .all(|(k, v)| k == key || a.source.params.get(k) == Some(v))
                })
                .filter_map(|b| Some((number(b.source.params.get(key)?)?, b)))
                .collect();
            let id = (a.source.name.clone(), key.clone());
            if group.len() < 3 || done.contains(&id) {
                continue;
            }
            done.push(id);
            group.sort_by(|p, q| p.0.total_cmp(&q.0));
            let group: Vec<SimResult> = group.into_iter().map(|(_, r)| r.clone()).collect();
            let Ok((metric, series, ratios)) = crate::curve::lines(&group, key) else {
                continue;
            };
            let bytes = group
                .iter()
                .any(|r| r.source.params[key].ends_with(['K', 'M', 'G']));
            let (lo, hi) = series
                .iter()
                .flat_map(|(_, pts)| pts.iter().map(|p| p.0))
                .fold((u64::MAX, 0), |(lo, hi), v| (lo.min(v), hi.max(v)));
            let mut plot = |title: String, y: String, unit: &'static str, lines: Vec<Line>| {
                let mut plot = Plot::bars(
                    format!("{prefix}-sweep{}", plots.len()),
                    title,
                    key,
                    &y,
                    unit,
                    false,
                );
                plot.kind = "lines";
                // A range of two decades or more reads better on a log axis.
                plot.x_log = lo > 0 && hi / lo >= 100;
                plot.x_unit = if bytes { "bytes" } else { "count" };
                for (i, (name, pts)) in lines.into_iter().enumerate() {
                    plot.series.push(Series {
                        colour: label_colour(name.split('/').next_back().unwrap_or(&name), i)
                            .into(),
                        name,
                        points: pts.into_iter().map(|(x, y)| [x as f64, y]).collect(),
                        ..Default::default()
                    });
                }
                plots.push(plot);
            };
            let name = &a.source.name;
            let title = format!("{name}: {} against {key}", metric.title());
            plot(title, metric.title().into(), "count", series);
            if !ratios.is_empty() {
                let title = format!("{name}: {} ratio against {key}", metric.title());
                plot(title, format!("{} ratio", metric.title()), "x", ratios);
            }
        }
    }
    plots
}

/// A validation: per workload, its faults under each configuration, the model's bars beside
/// the kernel's (with the kernel's range over repeated runs as error bars).
pub(crate) fn validate_plots(prefix: &str, v: &crate::validate::ValidateResult) -> Vec<Plot> {
    v.workloads()
        .iter()
        .enumerate()
        .map(|(i, w)| {
            let cases: Vec<_> = v.cases.iter().filter(|c| c.workload == *w).collect();
            let mut plot = Plot::bars(
                format!("{prefix}-v{i}"),
                format!("{w}: faults, model and kernel"),
                "",
                "faults",
                "count",
                false,
            );
            plot.categories = cases
                .iter()
                .map(|c| format!("{} {}", c.config, c.thp))
                .collect();
            let values = |f: &dyn Fn(&crate::validate::ValidateCase) -> u64| {
                cases.iter().map(|c| Some(f(c) as f64)).collect()
            };
            plot.series.push(Series {
                name: "model".into(),
                colour: other_colour(0).into(),
                values: values(&|c| c.model.faults),
                ..Default::default()
            });
            let err = cases
                .iter()
                .map(|c| {
                    let runs = c.kernel_runs.iter().map(|k| k.faults as f64);
                    let lo = runs.clone().fold(f64::MAX, f64::min);
                    let hi = runs.fold(f64::MIN, f64::max);
                    (c.kernel_runs.len() > 1).then_some([lo, hi])
                })
                .collect();
            plot.series.push(Series {
                name: "kernel".into(),
                colour: other_colour(1).into(),
                values: values(&|c| c.kernel.faults),
                err,
                ..Default::default()
            });
            plot
        })
        .collect()
}

/// A parameter value as a number: `4M` as bytes, `100` as itself.
fn number(text: &str) -> Option<f64> {
    if let Ok(v) = text.parse::<f64>() {
        return Some(v);
    }
    parse_bytes(text).ok().map(|b| b as f64)
}

/// Policies side by side: misses and walks, memory, and faults by the size they mapped.
fn policy_plots(prefix: &str, name: &str, r: &SimResult) -> Vec<Plot> {
    let runs: Vec<(&RunStats, String)> = r
        .runs
        .iter()
        .map(|run| {
            (
                run,
                run.mm.as_ref().map_or("-".into(), |m| m.policy.clone()),
            )
        })
        .collect();
    let categories: Vec<String> = runs.iter().map(|(_, p)| p.clone()).collect();
    let series = |i: usize, name: &str, f: &dyn Fn(&RunStats) -> u64| Series {
        name: name.into(),
        colour: other_colour(i).into(),
        values: runs.iter().map(|(run, _)| Some(f(run) as f64)).collect(),
        ..Default::default()
    };
    let mm = |run: &RunStats| run.mm.clone().unwrap_or_default();
    let mut tlb = Plot::bars(
        format!("{prefix}-tlb"),
        format!("{name}: TLB misses and page walks per policy"),
        "policy",
        "count",
        "count",
        true,
    );
    tlb.categories = categories.clone();
    tlb.series = vec![
        series(0, "iTLB misses", &|run| run.itlb_misses),
        series(1, "dTLB misses", &|run| run.dtlb_misses),
        series(2, "page-walk references", &|run| mm(run).walk_refs),
        series(3, "faults", &|run| run.faults),
    ];
    let mut memory = Plot::bars(
        format!("{prefix}-mem"),
        format!("{name}: memory per policy"),
        "policy",
        "memory",
        "bytes",
        false,
    );
    memory.categories = categories.clone();
    memory.series = vec![
        series(4, "peak RSS", &|run| mm(run).peak_rss_bytes),
        series(5, "RSS at the end", &|run| mm(run).rss_bytes),
        series(6, "page tables", &|run| mm(run).page_table_bytes),
    ];
    let mut by_size = Plot::bars(
        format!("{prefix}-sizes"),
        format!("{name}: faults by the page size they mapped"),
        "policy",
        "faults",
        "count",
        true,
    );
    by_size.categories = categories;
    let mut sizes: Vec<PageSize> = runs
        .iter()
        .flat_map(|(run, _)| mm(run).faults_by_size.into_keys())
        .filter_map(|k| k.parse().ok())
        .collect();
    sizes.sort();
    sizes.dedup();
    for size in sizes {
        by_size.series.push(Series {
            name: size.to_string(),
            colour: size_colour(size).into(),
            values: runs
                .iter()
                .map(|(run, _)| {
                    mm(run)
                        .faults_by_size
                        .get(&size.to_string())
                        .map(|&v| v as f64)
                })
                .collect(),
            ..Default::default()
        });
    }
    vec![tlb, memory, by_size]
}

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
