//! An SVG plot in the shape of Weisberg & Wiseman's Figure 1.
//!
//! One row per result (workload or trace), instructions on the left and data on the right.
//! The x axis lists the page sizes; each page size has two bars side by side: TLB misses (blue,
//! left axis) and memory used, the code or data footprint (red, right axis, in KB, MB or GB).
//!
//! Misses use a **log scale** on every panel: from 4K to 256K pages they typically fall by
//! orders of magnitude, and on a linear axis everything after the first bar or two would be
//! invisible. Because a log axis is hard to read exactly, every miss bar carries its count
//! (`35k`, `1.2M`), and a page size with no misses shows `0` and no bar. (With more than
//! eight page sizes the bars are too narrow for the counts, and only the axis remains.) Memory stays linear,
//! starting at zero, so its relative growth reads directly as in the paper.

use crate::export::Exporter;
use crate::schema::{Results, RunStats, SimResult};
use anyhow::{bail, Context, Result};
use plotters::coord::ranged1d::{DefaultFormatting, KeyPointHint};
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use std::io::Write;
use std::ops::Range;
use std::path::Path;

/// Width of the whole figure in pixels.
const WIDTH: u32 = 1200;
/// Height of one row (one result) in pixels.
const ROW_HEIGHT: u32 = 330;
/// Height of the title and legend band.
const HEADER_HEIGHT: u32 = 64;
/// Above this many page sizes a panel has no room to print each miss count over its bar.
const MAX_LABELLED_SLOTS: usize = 8;
/// How opaque a memory bar is: the page size's colour, paler than its miss bar beside it.
const MEM_OPACITY: f64 = 0.35;
/// Half the width of a page size's slot used by one bar, in x units (a slot is 1.0 wide).
const BAR: f64 = 0.38;
/// The space between a slot's two bars, in x units.
const GAP: f64 = 0.03;
const FONT: &str = "sans-serif";

/// A font of `px` pixels as rendered: plotters' SVG backend writes text at 1/1.24 of the
/// size it is given, so ask for more.
pub(crate) fn font(px: f64) -> FontDesc<'static> {
    (FONT, px * 1.24).into_font()
}

pub(crate) type Area<'a> = DrawingArea<SVGBackend<'a>, Shift>;

/// Renders `results` as SVG and writes it to `path`; errors name the path.
pub fn plot_svg(results: &(impl Results + ?Sized), path: impl AsRef<Path>) -> Result<()> {
    let path = path.as_ref();
    let svg = svg_string(results)?;
    pagelab_core::write_atomically(path, svg)
        .with_context(|| format!("cannot write plot to `{}`", path.display()))
}

/// Renders `results` as an SVG document.
pub fn svg_string(results: &(impl Results + ?Sized)) -> Result<String> {
    let results = results.results();
    if results.is_empty() {
        bail!("nothing to plot: the result holds no simulations");
    }
    let height = HEADER_HEIGHT + ROW_HEIGHT * results.len() as u32;
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (WIDTH, height)).into_drawing_area();
        root.fill(&WHITE)?;
        let (header, body) = root.split_vertically(HEADER_HEIGHT);
        draw_header(&header, results)?;
        // A third panel per row, the time, when some run was timed (`--cost`).
        let timed = results
            .iter()
            .any(|r| r.runs.iter().any(|run| run.cost.is_some()));
        let cols = if timed { 3 } else { 2 };
        let panels = body.split_evenly((results.len(), cols));
        for (r, row) in results.iter().zip(panels.chunks(cols)) {
            draw_panel(&row[0], r, Side::Instructions)?;
            draw_panel(&row[1], r, Side::Data)?;
            if timed {
                crate::plot_time::draw_time_panel(&row[2], r)?;
            }
        }
        root.present()?;
    }
    Ok(svg)
}

/// Which half of the figure a panel shows.
#[derive(Clone, Copy)]
enum Side {
    Instructions,
    Data,
}

impl Side {
    fn title(self) -> &'static str {
        match self {
            Side::Instructions => "instructions",
            Side::Data => "data",
        }
    }
    fn tlb(self) -> &'static str {
        match self {
            Side::Instructions => "iTLB",
            Side::Data => "dTLB",
        }
    }
    fn misses(self, run: &RunStats) -> u64 {
        match self {
            Side::Instructions => run.itlb_misses,
            Side::Data => run.dtlb_misses,
        }
    }
    fn footprint(self, run: &RunStats) -> u64 {
        match self {
            Side::Instructions => run.code_footprint_bytes,
            Side::Data => run.data_footprint_bytes,
        }
    }
}

fn draw_header(area: &Area<'_>, results: &[SimResult]) -> Result<()> {
    let mut tlbs: Vec<String> = Vec::new();
    for name in results.iter().map(SimResult::tlb_name) {
        if !tlbs.contains(&name) {
            tlbs.push(name);
        }
    }
    let title = format!(
        "TLB misses and memory used per page size  (TLB: {})",
        tlbs.join(", ")
    );
    area.draw(&Text::new(title, (20, 10), font(20.0).color(&BLACK)))?;
    // Each page size has its own colour (as in every plot and report, `colors.rs`); the two
    // bars of a size tell misses from memory by shade.
    let key = RGBColor(96, 96, 96);
    area.draw(&Rectangle::new([(20, 40), (34, 54)], key.filled()))?;
    area.draw(&Text::new(
        "TLB misses (left axis, log scale)",
        (40, 40),
        font(15.0).color(&BLACK),
    ))?;
    area.draw(&Rectangle::new(
        [(350, 40), (364, 54)],
        key.mix(MEM_OPACITY).filled(),
    ))?;
    area.draw(&Rectangle::new([(350, 40), (364, 54)], key.stroke_width(1)))?;
    area.draw(&Text::new(
        "memory used (right axis): the pale bar of each page size's colour",
        (370, 40),
        font(15.0).color(&BLACK),
    ))?;
    Ok(())
}

fn draw_panel(area: &Area<'_>, r: &SimResult, side: Side) -> Result<()> {
    let caption = format!("{}: {}", display_name(r), side.title());
    let n = r.runs.len();
    if n == 0 {
        area.draw(&Text::new(
            format!("{caption}: no runs"),
            (20, 20),
            font(16.0).color(&BLACK),
        ))?;
        return Ok(());
    }
    let labels: Vec<String> = r.runs.iter().map(|run| run.page_size.to_string()).collect();
    let misses: Vec<u64> = r.runs.iter().map(|run| side.misses(run)).collect();
    let bytes: Vec<u64> = r.runs.iter().map(|run| side.footprint(run)).collect();
    let miss_top = log_top(misses.iter().copied().max().unwrap_or(0));
    let unit = Unit::for_max(bytes.iter().copied().max().unwrap_or(0));
    let mem_max = bytes.iter().copied().max().unwrap_or(0) as f64 / unit.bytes;
    let mem_top = if mem_max > 0.0 { mem_max * 1.15 } else { 1.0 };

    let mut chart = ChartBuilder::on(area)
        .caption(caption, font(17.0))
        .margin(8)
        .margin_right(12)
        .x_label_area_size(42)
        .y_label_area_size(68)
        .right_y_label_area_size(68)
        .build_cartesian_2d(
            Slots(n),
            (1f64..miss_top)
                .log_scale()
                .with_key_points(decades(miss_top)),
        )?
        .set_secondary_coord(Slots(n), 0f64..mem_top);

    let x_label = |v: &f64| label_at(&labels, *v);
    let y_label = |v: &f64| compact(*v);
    chart
        .configure_mesh()
        .disable_x_mesh()
        .light_line_style(WHITE)
        .x_label_formatter(&x_label)
        .y_label_formatter(&y_label)
        .x_desc("page size")
        .y_desc(format!("{} misses", side.tlb()))
        .axis_desc_style(font(13.0))
        .label_style(font(12.0))
        .draw()?;
    let mem_label = |v: &f64| trim_float(*v);
    chart
        .configure_secondary_axes()
        .y_desc(format!("memory used ({})", unit.name))
        .y_label_formatter(&mem_label)
        .axis_desc_style(font(13.0))
        .label_style(font(12.0))
        .draw()?;

    let colours: Vec<RGBColor> = r
        .runs
        .iter()
        .map(|run| {
            let (red, green, blue) = crate::colors::rgb(crate::colors::size_colour(run.page_size));
            RGBColor(red, green, blue)
        })
        .collect();
    let miss_bars = misses
        .iter()
        .enumerate()
        .filter(|(_, m)| **m > 0)
        .map(|(i, m)| {
            let c = i as f64;
            Rectangle::new([(c - BAR, 1.0), (c - GAP, *m as f64)], colours[i].filled())
        });
    chart.draw_series(miss_bars)?;
    let mem_bar = |i: usize, style: ShapeStyle| {
        let c = i as f64;
        let top = bytes[i] as f64 / unit.bytes;
        Rectangle::new([(c + GAP, 0.0), (c + BAR, top)], style)
    };
    // A pale fill, then an outline in the full colour so a small bar still shows its size's hue.
    chart
        .draw_secondary_series((0..n).map(|i| mem_bar(i, colours[i].mix(MEM_OPACITY).filled())))?;
    chart.draw_secondary_series((0..n).map(|i| mem_bar(i, colours[i].stroke_width(1))))?;

    let style = TextStyle::from(font(11.0))
        .color(&BLACK)
        .pos(Pos::new(HPos::Center, VPos::Bottom));
    let miss_labels = misses.iter().enumerate().map(|(i, m)| {
        let at = (i as f64 - (BAR + GAP) / 2.0, (*m as f64).max(1.0));
        EmptyElement::at(at) + Text::new(compact(*m as f64), (0, -3), style.clone())
    });
    if n <= MAX_LABELLED_SLOTS {
        chart.draw_series(miss_labels)?;
    }
    Ok(())
}

/// The x axis: `n` page-size slots of width 1 centred on 0, 1, ..., n-1, one tick per slot.
///
/// plotters' own f64 axis picks "nice" ticks between slots, and its key-point override cannot
/// be formatted, hence this small axis.
#[derive(Clone, Copy)]
pub(crate) struct Slots(pub(crate) usize);

impl Ranged for Slots {
    type FormatOption = DefaultFormatting;
    type ValueType = f64;

    fn map(&self, value: &f64, limit: (i32, i32)) -> i32 {
        let frac = (value + 0.5) / self.0 as f64;
        limit.0 + ((limit.1 - limit.0) as f64 * frac).round() as i32
    }

    fn key_points<H: KeyPointHint>(&self, hint: H) -> Vec<f64> {
        if hint.weight().allow_light_points() {
            return Vec::new();
        }
        (0..self.0).map(|i| i as f64).collect()
    }

    fn range(&self) -> Range<f64> {
        -0.5..self.0 as f64 - 0.5
    }
}

/// The name a panel title shows: a workload's name, or a trace file's name without folders.
pub(crate) fn display_name(r: &SimResult) -> String {
    let name = &r.source.name;
    if r.source.kind == "workload" {
        return name.clone();
    }
    Path::new(name)
        .file_name()
        .and_then(|f| f.to_str())
        .unwrap_or(name)
        .to_string()
}

/// The page size label at slot `v`, or nothing between slots.
pub(crate) fn label_at(labels: &[String], v: f64) -> String {
    let i = v.round();
    if (v - i).abs() > 1e-6 || i < 0.0 {
        return String::new();
    }
    labels.get(i as usize).cloned().unwrap_or_default()
}

/// The top of a log axis: a power of ten with room above the tallest bar for its label.
fn log_top(max: u64) -> f64 {
    let with_room = (max as f64 * 2.0).max(10.0);
    10f64.powf(with_room.log10().ceil())
}

/// Powers of ten from 1 to `top`, the tick marks of a log axis.
fn decades(top: f64) -> Vec<f64> {
    let mut out = vec![1.0];
    while *out.last().expect("starts non-empty") < top {
        let next = out.last().expect("starts non-empty") * 10.0;
        out.push(next);
    }
    out
}

/// A count in few characters: `0`, `950`, `35k`, `1.2M`, `3G`.
fn compact(v: f64) -> String {
    const STEPS: [(f64, &str); 3] = [(1e9, "G"), (1e6, "M"), (1e3, "k")];
    for (step, suffix) in STEPS {
        if v >= step {
            return format!("{}{suffix}", trim_float(round_sig(v / step)));
        }
    }
    format!("{}", v.round())
}

/// Two significant digits below 10, whole numbers above: `1.2`, `35`, `350`.
fn round_sig(v: f64) -> f64 {
    if v < 10.0 {
        (v * 10.0).round() / 10.0
    } else {
        v.round()
    }
}

/// A number without a useless fractional part: `2`, `2.5`, `0.25`.
fn trim_float(v: f64) -> String {
    let s = format!("{v:.2}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    if s == "-0" {
        "0".to_string()
    } else {
        s.to_string()
    }
}

/// The unit of a memory axis.
struct Unit {
    bytes: f64,
    name: &'static str,
}

impl Unit {
    fn for_max(max: u64) -> Unit {
        let (bytes, name) = match max {
            m if m >= 1 << 30 => ((1u64 << 30) as f64, "GB"),
            m if m >= 1 << 20 => ((1u64 << 20) as f64, "MB"),
            _ => (1024.0, "KB"),
        };
        Unit { bytes, name }
    }
}

/// Exports the SVG plot (see [`svg_string`]).
#[derive(Clone, Copy, Debug, Default)]
pub struct SvgExporter;

impl Exporter for SvgExporter {
    fn export(&self, results: &[SimResult], out: &mut dyn Write) -> Result<()> {
        out.write_all(svg_string(results)?.as_bytes())?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compact_counts() {
        assert_eq!(compact(0.0), "0");
        assert_eq!(compact(950.0), "950");
        assert_eq!(compact(35_000.0), "35k");
        assert_eq!(compact(1_234_567.0), "1.2M");
        assert_eq!(compact(3e9), "3G");
    }

    #[test]
    fn log_axis_has_room_and_decades() {
        assert_eq!(log_top(0), 10.0);
        assert_eq!(log_top(35_000), 100_000.0);
        assert_eq!(log_top(100_000), 1_000_000.0);
        assert_eq!(decades(1000.0), vec![1.0, 10.0, 100.0, 1000.0]);
    }

    #[test]
    fn x_labels_only_on_slots() {
        let labels = vec!["4K".to_string(), "8K".to_string()];
        assert_eq!(label_at(&labels, 1.0), "8K");
        assert_eq!(label_at(&labels, 0.5), "");
        assert_eq!(label_at(&labels, 2.0), "");
    }
}
