//! The time panel of the plot: estimated cycles per reference for each page
//! size (bars, linear from zero), with the speed-up over 4K printed on each.

use crate::plot::{display_name, font, label_at, Area, Slots};
use crate::schema::SimResult;
use anyhow::Result;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

/// Green, apart from the misses' blue and the memory's red.
const TIME_COLOR: RGBColor = RGBColor(44, 160, 44);

/// Draws cycles per reference per page size for `r` (runs without a time get no bar).
pub(crate) fn draw_time_panel(area: &Area<'_>, r: &SimResult) -> Result<()> {
    let n = r.runs.len().max(1);
    let labels: Vec<String> = r.runs.iter().map(|run| run.page_size.to_string()).collect();
    let cpr: Vec<Option<(f64, Option<f64>)>> = r
        .runs
        .iter()
        .map(|run| {
            run.cost
                .as_ref()
                .map(|c| (c.cycles_per_ref, c.speedup_over_4k))
        })
        .collect();
    let top = cpr
        .iter()
        .flatten()
        .map(|c| c.0)
        .fold(0.0, f64::max)
        .max(1e-9)
        * 1.2;
    let machine = r.machine.as_deref().unwrap_or("-");
    let mut chart = ChartBuilder::on(area)
        .caption(
            format!("{}: time on {machine}", display_name(r)),
            font(17.0),
        )
        .margin(8)
        .x_label_area_size(42)
        .y_label_area_size(60)
        .build_cartesian_2d(Slots(n), 0f64..top)?;
    let x_label = |v: &f64| label_at(&labels, *v);
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_label_formatter(&x_label)
        .x_desc("page size")
        .y_desc("cycles per reference")
        .axis_desc_style(font(13.0))
        .label_style(font(12.0))
        .draw()?;
    chart.draw_series(cpr.iter().enumerate().filter_map(|(i, c)| {
        let (y, _) = (*c)?;
        let x = i as f64;
        Some(Rectangle::new(
            [(x - 0.38, 0.0), (x + 0.38, y)],
            TIME_COLOR.filled(),
        ))
    }))?;
    let style = TextStyle::from(font(11.0))
        .color(&BLACK)
        .pos(Pos::new(HPos::Center, VPos::Bottom));
    chart.draw_series(cpr.iter().enumerate().filter_map(|(i, c)| {
        let (y, s) = (*c)?;
        let text = match s {
            Some(s) => format!("{y:.1} ({s:.2}×)"),
            None => format!("{y:.1}"),
        };
        Some(EmptyElement::at((i as f64, y)) + Text::new(text, (0, -3), style.clone()))
    }))?;
    Ok(())
}
