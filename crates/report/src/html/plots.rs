//! The report's interactive plots, described as data for `report.js` to draw.

use crate::colors::{label_colour, other_colour, size_colour};
use crate::curve::Line;
use crate::schema::{RunStats, SimResult};
use pagelab_core::{parse_bytes, PageSize};
use serde::Serialize;

mod lab;
pub(crate) use lab::lab_plots;

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
