//! A sweep of one workload parameter (`stride:heap=128K..32M/128K`): one
//! result per value, each carrying its value in `source.params`. This module
//! turns those results into a table and a plot of one metric against the
//! parameter, one line per page size (or policy), with the ratio of the first
//! run's metric to each other's beside it, as Winwood et al.'s (OLS 2002) Figure 4 draws
//! cycles per access for 4K and 4M pages and their ratio.
//!
//! ```
//! use pagelab_core::{PageSize, SourceInfo};
//! use pagelab_report::{curve, RunStats, SimResult};
//!
//! let result = |heap: &str, misses: u64| SimResult {
//!     source: SourceInfo {
//!         params: [("heap".to_string(), heap.to_string())].into(),
//!         ..Default::default()
//!     },
//!     runs: vec![RunStats { dtlb_accesses: 100, dtlb_misses: misses, ..RunStats::new(PageSize::K4) }],
//!     ..Default::default()
//! };
//! let results = [result("1M", 0), result("2M", 50)];
//! assert_eq!(curve::param_value(&results[1], "heap"), Some(2 << 20));
//! let text = curve::table(&results, "heap").unwrap();
//! assert!(text.contains("heap") && text.contains("50%"));
//! ```

use crate::colors::{label_colour, rgb};
use crate::lines;
use crate::plot::{font, Area};
use crate::schema::{RunStats, SimResult};
use anyhow::{bail, Context, Result};
use plotters::prelude::*;
use std::path::Path;

/// What a sweep shows of each run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Metric {
    /// Estimated memory cycles per load (translation, walk, caches): the
    /// accesses of a benchmark whose stores only initialise its data, as the
    /// Winwood et al.'s (OLS 2002) stride benchmark, timed over its loop.
    CyclesPerLoad,
    /// Estimated cycles per data reference (the paper's "per access"), when
    /// the machine gives caches and latencies.
    CyclesPerAccess,
    /// Data-TLB misses per data-TLB access, in percent, otherwise.
    DtlbMissPct,
}

impl Metric {
    /// Cycles per load when every run of every result is timed and loads,
    /// cycles per access when timed, else the miss rate.
    pub fn of(results: &[SimResult]) -> Metric {
        let runs = || results.iter().flat_map(|r| r.runs.iter());
        let timed =
            results.iter().all(|r| !r.runs.is_empty()) && runs().all(|run| run.cost.is_some());
        if !timed {
            Metric::DtlbMissPct
        } else if runs().all(|run| run.cost.as_ref().is_some_and(|c| c.loads > 0)) {
            Metric::CyclesPerLoad
        } else {
            Metric::CyclesPerAccess
        }
    }

    /// The metric for people, as an axis title.
    pub fn title(self) -> &'static str {
        match self {
            Metric::CyclesPerLoad => "memory cycles per load",
            Metric::CyclesPerAccess => "cycles per access",
            Metric::DtlbMissPct => "dTLB miss %",
        }
    }

    /// The metric of one run.
    pub fn value(self, run: &RunStats) -> Option<f64> {
        match self {
            Metric::CyclesPerLoad => run.cost.as_ref().map(|c| c.cycles_per_load),
            Metric::CyclesPerAccess => run.cost.as_ref().map(|c| c.cycles_per_data_ref),
            Metric::DtlbMissPct => (run.dtlb_accesses > 0)
                .then(|| 100.0 * run.dtlb_misses as f64 / run.dtlb_accesses as f64),
        }
    }
}

/// A run's series: its policy under `--policy`, else its page size.
pub fn label(run: &RunStats) -> String {
    match &run.mm {
        Some(m) => m.policy.clone(),
        None => run.page_size.to_string(),
    }
}

/// The value of `param` in a result's `source.params` (a size or a count).
pub fn param_value(r: &SimResult, param: &str) -> Option<u64> {
    pagelab_core::parse_bytes(r.source.params.get(param)?).ok()
}

/// The points of a sweep: per result its value, per series its metric.
struct Points {
    labels: Vec<String>,
    /// (value, metric of each series in `labels` order).
    rows: Vec<(u64, Vec<Option<f64>>)>,
    metric: Metric,
}

fn points(results: &[SimResult], param: &str) -> Result<Points> {
    let Some(first) = results.first() else {
        bail!("a sweep of `{param}` has no results");
    };
    let labels: Vec<String> = first.runs.iter().map(label).collect();
    let metric = Metric::of(results);
    let rows = results
        .iter()
        .map(|r| {
            let v = param_value(r, param).with_context(|| {
                format!(
                    "result for {} has no parameter `{param}` in source.params",
                    r.source.name
                )
            })?;
            let ys = labels
                .iter()
                .map(|l| {
                    r.runs
                        .iter()
                        .find(|run| &label(run) == l)
                        .and_then(|run| metric.value(run))
                })
                .collect();
            Ok((v, ys))
        })
        .collect::<Result<Vec<_>>>()?;
    Ok(Points {
        labels,
        rows,
        metric,
    })
}

/// One line of a sweep: its label, and its (parameter value, metric) points
/// in the results' order.
pub type Line = (String, Vec<(u64, f64)>);

/// The sweep as lines, one per series (page size or policy), of the metric
/// [`Metric::of`] picks; then, with two series or more, the first series'
/// metric over each other's, labelled `first/other`. The text table, the SVG
/// and the HTML report draw these same numbers.
pub fn lines(results: &[SimResult], param: &str) -> Result<(Metric, Vec<Line>, Vec<Line>)> {
    let p = points(results, param)?;
    let line = |i: usize| -> Line {
        let pts = p.rows.iter().filter_map(|(v, ys)| Some((*v, ys[i]?)));
        (p.labels[i].clone(), pts.collect())
    };
    let ratios = (1..p.labels.len())
        .map(|i| {
            let pts = p
                .rows
                .iter()
                .filter_map(|(v, ys)| Some((*v, ratio(ys[0], ys[i])?)));
            (format!("{}/{}", p.labels[0], p.labels[i]), pts.collect())
        })
        .collect();
    Ok((p.metric, (0..p.labels.len()).map(line).collect(), ratios))
}

fn ratio(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    match (a, b) {
        (Some(a), Some(b)) if b > 0.0 => Some(a / b),
        _ => None,
    }
}

/// `v` bytes in the largest unit that writes it exactly (`4224K`, `6M`, `100`).
pub fn size_text(v: u64) -> String {
    for (shift, unit) in [(30, "G"), (20, "M"), (10, "K")] {
        if v >= 1 << shift && v.is_multiple_of(1 << shift) {
            return format!("{}{unit}", v >> shift);
        }
    }
    v.to_string()
}

/// The sweep as a text table: the parameter, each series' metric, and the
/// first series' metric over each other's (`4K/4M`).
pub fn table(results: &[SimResult], param: &str) -> Result<String> {
    let p = points(results, param)?;
    let short = match p.metric {
        Metric::CyclesPerLoad => "cycles/load",
        Metric::CyclesPerAccess => "cycles/access",
        Metric::DtlbMissPct => "dTLB miss",
    };
    let mut head = vec![param.to_string()];
    head.extend(p.labels.iter().map(|l| format!("{l} {short}")));
    head.extend(
        p.labels
            .iter()
            .skip(1)
            .map(|l| format!("{}/{l}", p.labels[0])),
    );
    let r = &results[0];
    let fixed: Vec<String> = r
        .source
        .params
        .iter()
        .filter(|(k, _)| *k != param)
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    let tlb = r.tlb.get("name").and_then(|n| n.as_str()).unwrap_or("-");
    let machine = r
        .machine
        .as_deref()
        .map(|m| format!(" · machine: {m}"))
        .unwrap_or_default();
    // Each value as the results write it: a size (`128K`) or a count.
    let text = |r: &SimResult| r.source.params.get(param).cloned().unwrap_or_default();
    let first = text(r);
    let last = results.last().map(text).unwrap_or_default();
    let heading = format!(
        "{} {} ({}) · {param} from {} to {} ({} values) · TLB: {tlb}{machine}\n",
        r.source.kind,
        r.source.name,
        fixed.join(", "),
        first,
        last,
        p.rows.len()
    );
    let mut rows = vec![head];
    for (r, (_, ys)) in results.iter().zip(&p.rows) {
        let mut row = vec![text(r)];
        row.extend(ys.iter().map(|y| match (y, p.metric) {
            (None, _) => "-".to_string(),
            (Some(y), Metric::CyclesPerAccess | Metric::CyclesPerLoad) => format!("{y:.2}"),
            (Some(y), Metric::DtlbMissPct) => format!("{}%", trim(*y)),
        }));
        row.extend(ys.iter().skip(1).map(|y| match ratio(ys[0], *y) {
            Some(r) => format!("{r:.2}"),
            None => "-".to_string(),
        }));
        rows.push(row);
    }
    Ok(heading + &crate::table::columns(&rows, &[]))
}

/// The values after which a curve of (value, metric) points, in order of
/// value, starts rising by more than `min_rise` per step, then stops: the
/// inflection points of Winwood et al.'s (OLS 2002) Figure 4.
pub fn breaks(points: &[(u64, f64)], min_rise: f64) -> Vec<u64> {
    let mut out = Vec::new();
    let mut rising = false;
    for w in points.windows(2) {
        let now = w[1].1 - w[0].1 > min_rise;
        if now != rising {
            out.push(w[0].0);
            rising = now;
        }
    }
    out
}

fn trim(v: f64) -> String {
    let s = format!("{v:.3}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// Writes the sweep's plot to `path`; errors name the path.
pub fn plot_svg(results: &[SimResult], param: &str, path: impl AsRef<Path>) -> Result<()> {
    let path = path.as_ref();
    let svg = svg_string(results, param)?;
    pagelab_core::write_atomically(path, svg)
        .with_context(|| format!("cannot write plot to `{}`", path.display()))
}

/// The sweep as SVG: the metric against the parameter, one line per series;
/// beside it, with two series or more, the first's metric over the others'.
pub fn svg_string(results: &[SimResult], param: &str) -> Result<String> {
    let (metric, series, ratios) = lines(results, param)?;
    let as_f64 = |lines: Vec<Line>| -> Vec<(String, Vec<(f64, f64)>)> {
        let f = |(l, pts): Line| (l, pts.into_iter().map(|(v, y)| (v as f64, y)).collect());
        lines.into_iter().map(f).collect()
    };
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (1200, 480)).into_drawing_area();
        root.fill(&WHITE)?;
        let source = &results[0].source.name;
        let machine = results[0]
            .machine
            .as_deref()
            .map(|m| format!(" on {m}"))
            .unwrap_or_default();
        let (left, right) = if series.len() > 1 {
            root.split_horizontally(720)
        } else {
            root.split_horizontally(1200)
        };
        let title = format!("{source}{machine}: {} against {param}", metric.title());
        draw_lines(&left, &title, param, metric.title(), &as_f64(series), true)?;
        if !ratios.is_empty() {
            let y_title = format!("{} ratio", metric.title());
            draw_lines(&right, "ratio", param, &y_title, &as_f64(ratios), false)?;
        }
        root.present()?;
    }
    Ok(svg)
}

fn trim_one(v: f64) -> String {
    let s = format!("{v:.1}");
    s.strip_suffix(".0").unwrap_or(&s).to_string()
}

fn draw_lines(
    area: &Area<'_>,
    title: &str,
    param: &str,
    y_title: &str,
    series: &[(String, Vec<(f64, f64)>)],
    from_zero: bool,
) -> Result<()> {
    let all = || series.iter().flat_map(|s| s.1.iter());
    let (lo, hi) = all().fold((f64::MAX, f64::MIN), |(lo, hi), p| {
        (lo.min(p.0), hi.max(p.0))
    });
    let (lo, hi) = if lo < hi {
        (lo, hi)
    } else {
        (0.0, lo.max(1.0) * 2.0)
    };
    // The x axis counts in the unit of its largest value, so that its ticks
    // fall on round sizes (5M, 10M) rather than round byte counts.
    let (unit, name) = [(1u64 << 30, "G"), (1 << 20, "M"), (1 << 10, "K")]
        .into_iter()
        .find(|(u, _)| hi >= *u as f64)
        .map_or((1.0, ""), |(u, n)| (u as f64, n));
    let (lo, hi) = (lo / unit, hi / unit);
    let top = all().map(|p| p.1).fold(0.0, f64::max).max(1e-9) * 1.1;
    let bottom = if from_zero {
        0.0
    } else {
        all().map(|p| p.1).fold(f64::MAX, f64::min).min(1.0) * 0.9
    };
    let mut chart = ChartBuilder::on(area)
        .caption(title, font(15.0))
        .margin(10)
        .margin_right(24)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d(lo..hi, bottom..top)?;
    let x_label = |v: &f64| format!("{}{name}", trim_one(*v));
    lines::mesh(&mut chart, &x_label, param, y_title)?;
    for (i, (l, pts)) in series.iter().enumerate() {
        let (r, g, b) = rgb(label_colour(l.split('/').next_back().unwrap_or(l), i));
        let points = pts.iter().map(|p| (p.0 / unit, p.1));
        lines::line(&mut chart, points, l, RGBColor(r, g, b))?;
    }
    lines::legend(&mut chart, SeriesLabelPosition::UpperLeft)?;
    Ok(())
}
