//! What the line plots share: their mesh, a line with its legend entry, and
//! the legend box (the lab's stride panel and a parameter sweep's curve; the
//! lab's bars use the legend box too).

use crate::plot::font;
use anyhow::Result;
use plotters::coord::ranged1d::ValueFormatter;
use plotters::coord::types::RangedCoordf64;
use plotters::prelude::*;

/// A chart whose y axis is linear.
pub(crate) type LineChart<'a, 'b, X> =
    ChartContext<'a, SVGBackend<'b>, Cartesian2d<X, RangedCoordf64>>;

/// Draws the mesh: no light grid, `x_label` on the x ticks, both axes titled.
pub(crate) fn mesh<X>(
    chart: &mut LineChart<'_, '_, X>,
    x_label: &dyn Fn(&X::ValueType) -> String,
    x_desc: &str,
    y_desc: &str,
) -> Result<()>
where
    X: Ranged + ValueFormatter<X::ValueType>,
{
    chart
        .configure_mesh()
        .light_line_style(WHITE)
        .x_label_formatter(x_label)
        .x_desc(x_desc)
        .y_desc(y_desc)
        .axis_desc_style(font(13.0))
        .label_style(font(12.0))
        .draw()?;
    Ok(())
}

/// Draws one series as a line of colour `c`, with its legend entry.
pub(crate) fn line<X>(
    chart: &mut LineChart<'_, '_, X>,
    points: impl IntoIterator<Item = (X::ValueType, f64)>,
    label: &str,
    c: RGBColor,
) -> Result<()>
where
    X: Ranged,
    X::ValueType: Clone + 'static,
{
    chart
        .draw_series(LineSeries::new(points, c.stroke_width(2)))?
        .label(label)
        .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], c.stroke_width(2)));
    Ok(())
}

/// Draws the legend box at `at`.
pub(crate) fn legend<'a, 'b: 'a, X: Ranged>(
    chart: &mut LineChart<'a, 'b, X>,
    at: SeriesLabelPosition,
) -> Result<()> {
    chart
        .configure_series_labels()
        .position(at)
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .label_font(font(12.0))
        .draw()?;
    Ok(())
}
