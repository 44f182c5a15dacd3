//! An SVG plot of a `pagelab bench` result ([`LabResult`], command `bench`).
//!
//! Panels, top to bottom, each drawn when the result has its data:
//!
//! 1. **stride**, one panel per `every` (Winwood et al., OLS 2002 ran every page and every 16th):
//!    median `ns_per_access` against heap size (log axis, 128K..32M), one line per page-size
//!    configuration: the shape of the paper's Figure 4.
//! 2. **speed-up vs 4K** of every other kernel: for each kernel a group of bars, one per
//!    configuration, each the 4K configuration's median `ns_per_op` over its own (above 1
//!    is faster than 4K; the 4K bar is 1).
//! 3. **fault cost**: the `fault` kernel's median `first_touch_ns_per_mb` per configuration,
//!    as microseconds per MB first touched.
//!
//! Medians are over a configuration's runs. A stride subject is read as
//! `stride:heap=SIZE,...,every=N,...` (the canonical spec `pagelab bench` writes).

use crate::lab::{LabConfig, LabResult, Summary};
use crate::lines;
use crate::plot::{font, Area};
use anyhow::{bail, Context, Result};
use pagelab_core::parse_bytes;
use plotters::prelude::*;
use std::collections::BTreeMap;
use std::path::Path;

const WIDTH: u32 = 1000;
const PANEL_HEIGHT: u32 = 380;
const HEADER_HEIGHT: u32 = 46;

/// Renders `result` as SVG and writes it to `path`; errors name the path.
pub fn plot_bench_svg(result: &LabResult, path: impl AsRef<Path>) -> Result<()> {
    let path = path.as_ref();
    let svg = bench_svg_string(result)?;
    pagelab_core::write_atomically(path, svg)
        .with_context(|| format!("cannot write plot to `{}`", path.display()))
}

/// The median of `metric` over a configuration's runs, if any run has it.
pub fn metric_median(config: &LabConfig, metric: &str) -> Option<f64> {
    let values: Vec<f64> = config
        .runs
        .iter()
        .filter_map(|r| r.metrics.get(metric).copied())
        .collect();
    Summary::of(&values).map(|s| s.median)
}

/// One stride point: (every, configuration label, heap bytes, ns per access).
type StridePoint = (u64, String, u64, f64);

fn stride_points(result: &LabResult) -> Vec<StridePoint> {
    result
        .configs
        .iter()
        .filter_map(|c| {
            let params = c.subject.strip_prefix("stride:")?;
            let get = |key: &str| {
                params
                    .split(',')
                    .find_map(|kv| kv.strip_prefix(key)?.strip_prefix('='))
            };
            let heap = parse_bytes(get("heap")?).ok()?;
            let every = get("every")?.parse().ok()?;
            Some((
                every,
                c.label.clone(),
                heap,
                metric_median(c, "ns_per_access")?,
            ))
        })
        .collect()
}

/// Renders `result` (a `bench` result) as an SVG document.
///
/// # Errors
/// When the result holds nothing to plot, or drawing fails.
pub fn bench_svg_string(result: &LabResult) -> Result<String> {
    let mut labels: Vec<String> = Vec::new();
    for c in &result.configs {
        if !labels.contains(&c.label) {
            labels.push(c.label.clone());
        }
    }
    let stride = stride_points(result);
    let mut everys: Vec<u64> = stride.iter().map(|p| p.0).collect();
    everys.sort();
    everys.dedup();
    let speedups = speedup_groups(result);
    let fault: Vec<(String, f64)> = result
        .configs
        .iter()
        .filter(|c| c.subject.starts_with("fault:"))
        .filter_map(|c| Some((c.label.clone(), metric_median(c, "first_touch_ns_per_mb")?)))
        .collect();
    let panels = everys.len() + usize::from(!speedups.is_empty()) + usize::from(!fault.is_empty());
    if panels == 0 {
        bail!("nothing to plot: the result holds no benchmark metrics");
    }
    let mut svg = String::new();
    {
        let height = HEADER_HEIGHT + PANEL_HEIGHT * panels as u32;
        let root = SVGBackend::with_string(&mut svg, (WIDTH, height)).into_drawing_area();
        root.fill(&WHITE)?;
        let (header, body) = root.split_vertically(HEADER_HEIGHT);
        let title = format!(
            "pagelab bench on {} ({}{})",
            result.host.kernel,
            result.host.cpu,
            if result.host.virtualized {
                ", a VM"
            } else {
                ""
            }
        );
        header.draw(&Text::new(title, (20, 12), font(18.0).color(&BLACK)))?;
        let areas = body.split_evenly((panels, 1));
        let mut areas = areas.iter();
        for every in &everys {
            let pts: Vec<&StridePoint> = stride.iter().filter(|p| p.0 == *every).collect();
            draw_stride(
                areas.next().expect("one area per panel"),
                *every,
                &pts,
                &labels,
            )?;
        }
        if !speedups.is_empty() {
            draw_bars(
                areas.next().expect("one area per panel"),
                "speed-up vs 4K (4K's ns per op / this configuration's; above 1 is faster)",
                "speed-up vs 4K",
                &speedups,
                &labels,
            )?;
        }
        if !fault.is_empty() {
            let group = vec![(
                "fault".to_string(),
                fault.into_iter().map(|(l, ns)| (l, ns / 1e3)).collect(),
            )];
            draw_bars(
                areas.next().expect("one area per panel"),
                "fault cost: time to first-touch memory (lower is cheaper)",
                "microseconds per MB",
                &group,
                &labels,
            )?;
        }
        root.present()?;
    }
    Ok(svg)
}

/// A group of bars: (kernel name, [(configuration label, value)]).
type Group = (String, Vec<(String, f64)>);

fn speedup_groups(result: &LabResult) -> Vec<Group> {
    let mut by_subject: BTreeMap<&str, Vec<&LabConfig>> = BTreeMap::new();
    let mut order: Vec<&str> = Vec::new();
    for c in result
        .configs
        .iter()
        .filter(|c| !c.subject.starts_with("stride:"))
    {
        if !by_subject.contains_key(c.subject.as_str()) {
            order.push(&c.subject);
        }
        by_subject.entry(&c.subject).or_default().push(c);
    }
    order
        .into_iter()
        .filter_map(|subject| {
            let configs = &by_subject[subject];
            let base = configs
                .iter()
                .find(|c| c.label == "4K")
                .and_then(|c| metric_median(c, "ns_per_op"))?;
            let bars = configs
                .iter()
                .filter_map(|c| Some((c.label.clone(), base / metric_median(c, "ns_per_op")?)))
                .collect();
            let name = subject.split(':').next().unwrap_or(subject).to_string();
            Some((name, bars))
        })
        .collect()
}

/// A configuration's colour: its page size's, as in every plot ([`crate::colors`]); a
/// configuration of several sizes takes one of its own, by its order of appearance.
fn color(labels: &[String], label: &str) -> RGBColor {
    let i = labels.iter().position(|l| l == label).unwrap_or(0);
    let (r, g, b) = crate::colors::rgb(crate::colors::label_colour(label, i));
    RGBColor(r, g, b)
}

/// A bar's value in few characters: `1.97`, `215`, `2,835`.
fn bar_label(v: f64) -> String {
    if v >= 100.0 {
        let whole = v.round() as u64;
        let s = whole.to_string();
        let mut out = String::new();
        for (i, c) in s.chars().enumerate() {
            if i > 0 && (s.len() - i).is_multiple_of(3) {
                out.push(',');
            }
            out.push(c);
        }
        out
    } else {
        format!("{v:.2}")
    }
}

fn size_label(bytes: f64) -> String {
    let b = bytes.round() as u64;
    for (unit, name) in [(1u64 << 30, "G"), (1 << 20, "M"), (1 << 10, "K")] {
        if b >= unit {
            return format!("{}{name}", b / unit);
        }
    }
    format!("{b}")
}

fn draw_stride(area: &Area<'_>, every: u64, pts: &[&StridePoint], labels: &[String]) -> Result<()> {
    let lo = pts.iter().map(|p| p.2).min().unwrap_or(1) as f64;
    let hi = pts.iter().map(|p| p.2).max().unwrap_or(2) as f64;
    let (lo, hi) = if hi > lo {
        (lo, hi)
    } else {
        (lo / 2.0, lo * 2.0)
    };
    let top = pts.iter().map(|p| p.3).fold(0.0, f64::max) * 1.15 + 1e-9;
    let mut heaps: Vec<f64> = pts.iter().map(|p| p.2 as f64).collect();
    heaps.sort_by(f64::total_cmp);
    heaps.dedup();
    let which = if every == 1 {
        "every page".to_string()
    } else {
        format!("every {every}th page")
    };
    let mut chart = ChartBuilder::on(area)
        .caption(
            format!("stride, {which}: time per access against heap size"),
            font(16.0),
        )
        .margin(10)
        .margin_right(24)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d(
            (lo / 1.2..hi * 1.2).log_scale().with_key_points(heaps),
            0f64..top,
        )?;
    let x_label = |v: &f64| size_label(*v);
    lines::mesh(&mut chart, &x_label, "heap size", "ns per access (median)")?;
    for label in labels {
        let mut line: Vec<(f64, f64)> = pts
            .iter()
            .filter(|p| &p.1 == label)
            .map(|p| (p.2 as f64, p.3))
            .collect();
        if line.is_empty() {
            continue;
        }
        line.sort_by(|a, b| a.0.total_cmp(&b.0));
        let c = color(labels, label);
        lines::line(&mut chart, line.clone(), label, c)?;
        chart.draw_series(line.into_iter().map(|p| Circle::new(p, 3, c.filled())))?;
    }
    lines::legend(&mut chart, SeriesLabelPosition::UpperLeft)?;
    Ok(())
}

fn draw_bars(
    area: &Area<'_>,
    caption: &str,
    y_desc: &str,
    groups: &[Group],
    labels: &[String],
) -> Result<()> {
    let n = groups.len();
    let top = groups
        .iter()
        .flat_map(|g| g.1.iter().map(|b| b.1))
        .fold(0.0, f64::max)
        * 1.6
        + 1e-9;
    let mut chart = ChartBuilder::on(area)
        .caption(caption, font(16.0))
        .margin(10)
        .margin_right(24)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d(-0.5f64..n as f64 - 0.5, 0f64..top)?;
    let names: Vec<String> = groups.iter().map(|g| g.0.clone()).collect();
    let x_label = move |v: &f64| {
        let i = v.round();
        if (v - i).abs() > 1e-6 || i < 0.0 {
            return String::new();
        }
        names.get(i as usize).cloned().unwrap_or_default()
    };
    chart
        .configure_mesh()
        .light_line_style(WHITE)
        .disable_x_mesh()
        .x_labels(n.max(1) * 2 + 1)
        .x_label_formatter(&x_label)
        .y_desc(y_desc)
        .axis_desc_style(font(13.0))
        .label_style(font(12.0))
        .draw()?;
    let style = TextStyle::from(font(10.0)).color(&BLACK);
    for label in labels {
        let c = color(labels, label);
        let mut bars = Vec::new();
        let mut texts = Vec::new();
        for (gi, (_, group)) in groups.iter().enumerate() {
            let k = group.len().max(1) as f64;
            if let Some(bi) = group.iter().position(|b| &b.0 == label) {
                let w = 0.8 / k;
                let x0 = gi as f64 - 0.4 + bi as f64 * w;
                let v = group[bi].1;
                bars.push(Rectangle::new(
                    [(x0 + 0.01, 0.0), (x0 + w - 0.01, v)],
                    c.filled(),
                ));
                texts.push(Text::new(
                    bar_label(v),
                    (x0 + 0.01, v + top * 0.02),
                    style.clone(),
                ));
            }
        }
        if bars.is_empty() {
            continue;
        }
        chart
            .draw_series(bars)?
            .label(label.clone())
            .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 12, y + 5)], c.filled()));
        chart.draw_series(texts)?;
    }
    lines::legend(&mut chart, SeriesLabelPosition::UpperRight)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lab::Measurement;

    fn config(subject: &str, label: &str, metrics: &[(&str, f64)]) -> LabConfig {
        let mut m = Measurement::default();
        for (k, v) in metrics {
            m.metrics.insert(k.to_string(), *v);
        }
        LabConfig {
            subject: subject.into(),
            label: label.into(),
            runs: vec![m],
            ..Default::default()
        }
    }

    #[test]
    fn stride_points_come_from_canonical_subjects() {
        let mut r = LabResult::new("bench", Default::default());
        r.configs.push(config(
            "stride:heap=4M,page=4K,line=64,every=16,iters=9",
            "2M",
            &[("ns_per_access", 3.0)],
        ));
        r.configs.push(config(
            "stride:heap=nonsense",
            "2M",
            &[("ns_per_access", 3.0)],
        ));
        assert_eq!(
            stride_points(&r),
            vec![(16, "2M".to_string(), 4 << 20, 3.0)]
        );
    }

    #[test]
    fn speedups_are_relative_to_4k_and_the_svg_has_every_panel() {
        let mut r = LabResult::new("bench", Default::default());
        for (label, ns) in [("4K", 10.0), ("2M", 5.0)] {
            r.configs
                .push(config("gups:table=8M", label, &[("ns_per_op", ns)]));
            r.configs.push(config(
                "fault:size=32M",
                label,
                &[("ns_per_op", ns), ("first_touch_ns_per_mb", ns * 1e4)],
            ));
            for heap in ["128K", "2M"] {
                let subject = format!("stride:heap={heap},page=4K,line=64,every=1,iters=4");
                r.configs
                    .push(config(&subject, label, &[("ns_per_access", ns)]));
            }
        }
        let groups = speedup_groups(&r);
        assert_eq!(groups[0].0, "gups");
        assert_eq!(
            groups[0].1,
            vec![("4K".to_string(), 1.0), ("2M".to_string(), 2.0)]
        );
        let svg = bench_svg_string(&r).unwrap();
        assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
        for text in ["stride, every page", "speed-up vs 4K", "fault cost", "128K"] {
            assert!(svg.contains(text), "missing {text}");
        }
    }

    #[test]
    fn bar_labels_are_short() {
        assert_eq!(bar_label(2834.58), "2,835");
        assert_eq!(bar_label(1234567.0), "1,234,567");
        assert_eq!(bar_label(215.16), "215");
        assert_eq!(bar_label(1.966), "1.97");
    }

    #[test]
    fn an_empty_result_is_refused() {
        let err = bench_svg_string(&LabResult::new("bench", Default::default())).unwrap_err();
        assert!(err.to_string().contains("nothing to plot"));
    }
}
