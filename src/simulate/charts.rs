//! The report's charts, drawn with plotters' SVG back end into strings that
//! the HTML page inlines (so the page needs no network and no script).
//!
//! Two kinds: lines over virtual time (or over categories), where a series
//! may be dashed to mark a limit, and vertical bars over named categories.
//! A chart that draws nothing (no points) says so instead of failing.

use plotters::prelude::*;

/// Width and height of a chart, pixels.
pub const SIZE: (u32, u32) = (560, 260);

/// Colours of series, in order (a colour-blind-safe set, then repeats).
const COLOURS: [RGBColor; 8] = [
    RGBColor(0, 114, 178),
    RGBColor(213, 94, 0),
    RGBColor(0, 158, 115),
    RGBColor(204, 121, 167),
    RGBColor(230, 159, 0),
    RGBColor(86, 180, 233),
    RGBColor(120, 120, 120),
    RGBColor(240, 228, 66),
];

/// The colour of series `i`.
pub fn colour(i: usize) -> RGBColor {
    COLOURS[i % COLOURS.len()]
}

/// How a series is drawn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stroke {
    /// A solid line (a measured value).
    Solid,
    /// A dashed line (a configured limit).
    Dashed,
}

/// One line of a chart.
#[derive(Debug, Clone)]
pub struct Series {
    /// Legend text.
    pub name: String,
    /// One y per x.
    pub values: Vec<f64>,
    /// Solid or dashed.
    pub stroke: Stroke,
    /// Index into the colours.
    pub colour: usize,
}

/// Axes and title of a chart.
#[derive(Debug, Clone)]
pub struct Frame<'a> {
    /// Caption.
    pub title: &'a str,
    /// X axis label.
    pub x_label: &'a str,
    /// Y axis label.
    pub y_label: &'a str,
    /// Top of the y axis; `None` to fit the data. Charts shown side by side
    /// pass the same value so they compare.
    pub y_max: Option<f64>,
}

/// An SVG that says why there is no chart.
fn empty(title: &str, why: &str) -> String {
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, SIZE).into_drawing_area();
        let _ = root.fill(&WHITE);
        let style = ("sans-serif", 14).into_font().color(&BLACK);
        let _ = root.draw_text(title, &style, (10, 10));
        let _ = root.draw_text(
            why,
            &("sans-serif", 13)
                .into_font()
                .color(&RGBColor(120, 120, 120)),
            (10, 40),
        );
        let _ = root.present();
    }
    svg
}

/// The largest value of `series`, at least a small positive number.
pub fn top(series: &[Series]) -> f64 {
    series
        .iter()
        .flat_map(|s| s.values.iter().copied())
        .filter(|v| v.is_finite())
        .fold(0.0, f64::max)
}

/// Lines over `x` (hours of virtual time, or category positions).
pub fn lines(frame: &Frame<'_>, x: &[f64], series: &[Series]) -> String {
    if x.is_empty() || series.is_empty() {
        return empty(frame.title, "nothing to show");
    }
    let mut svg = String::new();
    let drawn = draw_lines(&mut svg, frame, x, series);
    match drawn {
        Ok(()) => svg,
        Err(e) => empty(frame.title, &format!("chart not drawn: {e}")),
    }
}

fn draw_lines(
    svg: &mut String,
    frame: &Frame<'_>,
    x: &[f64],
    series: &[Series],
) -> Result<(), Box<dyn std::error::Error>> {
    let x_max = x.iter().copied().fold(0.0, f64::max).max(1e-6);
    let y_max = frame.y_max.unwrap_or_else(|| top(series)).max(1e-9) * 1.05;
    let root = SVGBackend::with_string(svg, SIZE).into_drawing_area();
    root.fill(&WHITE)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(frame.title, ("sans-serif", 15))
        .margin(8)
        .x_label_area_size(34)
        .y_label_area_size(56)
        .build_cartesian_2d(0f64..x_max, 0f64..y_max)?;
    chart
        .configure_mesh()
        .x_desc(frame.x_label)
        .y_desc(frame.y_label)
        .light_line_style(RGBColor(235, 235, 235))
        .label_style(("sans-serif", 11))
        .draw()?;
    for s in series {
        let colour = colour(s.colour);
        let points = steps(x, &s.values);
        let style = colour.stroke_width(2);
        let drawn = match s.stroke {
            Stroke::Solid => chart.draw_series(LineSeries::new(points, style))?,
            Stroke::Dashed => chart.draw_series(DashedLineSeries::new(points, 6, 4, style))?,
        };
        drawn.label(s.name.clone()).legend(move |(x, y)| {
            PathElement::new(vec![(x, y), (x + 18, y)], colour.stroke_width(2))
        });
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.85))
        .border_style(RGBColor(200, 200, 200))
        .label_font(("sans-serif", 11))
        .position(SeriesLabelPosition::UpperLeft)
        .draw()?;
    root.present()?;
    Ok(())
}

/// The points of a series drawn as steps: a sample's value holds until the
/// next sample (the replay samples the state when it changes, so a straight
/// line between two distant samples would show changes that never happened).
fn steps(x: &[f64], values: &[f64]) -> Vec<(f64, f64)> {
    let mut points = Vec::with_capacity(2 * x.len());
    for (i, (&xi, &yi)) in x.iter().zip(values).enumerate() {
        if i > 0 {
            points.push((xi, values[i - 1]));
        }
        points.push((xi, yi));
    }
    points
}

/// Vertical bars, one per label.
pub fn bars(frame: &Frame<'_>, labels: &[String], values: &[f64], colour_index: usize) -> String {
    if labels.is_empty() {
        return empty(frame.title, "nothing to show");
    }
    let mut svg = String::new();
    match draw_bars(&mut svg, frame, labels, values, colour_index) {
        Ok(()) => svg,
        Err(e) => empty(frame.title, &format!("chart not drawn: {e}")),
    }
}

fn draw_bars(
    svg: &mut String,
    frame: &Frame<'_>,
    labels: &[String],
    values: &[f64],
    colour_index: usize,
) -> Result<(), Box<dyn std::error::Error>> {
    let y_max = frame
        .y_max
        .unwrap_or_else(|| values.iter().copied().fold(0.0, f64::max))
        .max(1.0)
        * 1.1;
    let root = SVGBackend::with_string(svg, SIZE).into_drawing_area();
    root.fill(&WHITE)?;
    let n = labels.len() as u32;
    let mut chart = ChartBuilder::on(&root)
        .caption(frame.title, ("sans-serif", 15))
        .margin(8)
        .x_label_area_size(40)
        .y_label_area_size(56)
        .build_cartesian_2d((0u32..n).into_segmented(), 0f64..y_max)?;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_desc(frame.x_label)
        .y_desc(frame.y_label)
        .x_labels(labels.len())
        .x_label_formatter(&|v| match v {
            SegmentValue::CenterOf(i) => labels.get(*i as usize).cloned().unwrap_or_default(),
            _ => String::new(),
        })
        .label_style(("sans-serif", 11))
        .draw()?;
    chart.draw_series(
        Histogram::vertical(&chart)
            .style(colour(colour_index).filled())
            .margin(6)
            .data(values.iter().enumerate().map(|(i, v)| (i as u32, *v))),
    )?;
    root.present()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(title: &str) -> Frame<'_> {
        Frame {
            title,
            x_label: "hours",
            y_label: "cores",
            y_max: None,
        }
    }

    #[test]
    fn lines_draw_every_series_with_its_legend() {
        let x = [0.0, 1.0, 2.0];
        let series = [
            Series {
                name: "allocated".into(),
                values: vec![1.0, 3.0, 2.0],
                stroke: Stroke::Solid,
                colour: 0,
            },
            Series {
                name: "guaranteed".into(),
                values: vec![2.5; 3],
                stroke: Stroke::Dashed,
                colour: 1,
            },
        ];
        let svg = lines(&frame("usage"), &x, &series);
        assert!(svg.starts_with("<svg"), "{svg}");
        for text in ["usage", "allocated", "guaranteed", "hours", "cores"] {
            assert!(svg.contains(text), "{text} missing");
        }
        // The dashed limit is drawn in pieces: more lines than solid points.
        assert!(svg.matches("<polyline").count() >= 3, "{svg}");
        assert_eq!(top(&series), 3.0);
    }

    #[test]
    fn values_hold_until_the_next_sample() {
        assert_eq!(
            steps(&[0.0, 1.0, 3.0], &[2.0, 5.0, 1.0]),
            [(0.0, 2.0), (1.0, 2.0), (1.0, 5.0), (3.0, 5.0), (3.0, 1.0)]
        );
        assert!(steps(&[], &[]).is_empty());
    }

    #[test]
    fn bars_name_their_categories_and_empty_charts_say_so() {
        let labels = ["Completed".to_string(), "Rejected".to_string()];
        let svg = bars(&frame("apps"), &labels, &[5.0, 1.0], 2);
        assert!(
            svg.contains("Completed") && svg.contains("Rejected"),
            "{svg}"
        );
        assert!(svg.matches("<rect").count() >= 3, "{svg}");
        let none = lines(&frame("nothing"), &[], &[]);
        assert!(none.contains("nothing to show"), "{none}");
    }
}
