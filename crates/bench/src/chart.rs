//! Line charts as SVG (plotters' SVG backend: no font or system library needed; text is left to
//! the SVG viewer), for the scenarios whose result is a curve.

use plotters::prelude::*;
use std::path::Path;

/// One line of a chart.
pub struct Series {
    pub name: String,
    pub points: Vec<(f64, f64)>,
}

/// What to draw.
pub struct Chart<'a> {
    pub title: &'a str,
    pub x_label: &'a str,
    pub y_label: &'a str,
    /// Logarithmic x axis (base 10); every x must be > 0.
    pub log_x: bool,
    /// Logarithmic y axis (base 10); points with y ≤ 0 are left out.
    pub log_y: bool,
    pub series: Vec<Series>,
    /// Vertical lines at an x, with a label (a knee, a limit).
    pub marks: Vec<(f64, String)>,
}

const COLORS: [RGBColor; 5] =
    [RGBColor(31, 119, 180), RGBColor(214, 39, 40), RGBColor(44, 160, 44), ORANGE, MAGENTA];
const ORANGE: RGBColor = RGBColor(255, 127, 14);
const MAGENTA: RGBColor = RGBColor(148, 103, 189);

/// Draws `chart` into an SVG file at `path`.
pub fn draw_svg(path: &Path, chart: &Chart) -> Result<(), String> {
    draw(path, chart).map_err(|e| format!("drawing {}: {e}", path.display()))
}

fn draw(path: &Path, chart: &Chart) -> Result<(), Box<dyn std::error::Error>> {
    let (log_x, log_y) = (chart.log_x, chart.log_y);
    let x_of = move |x: f64| if log_x { x.log10() } else { x };
    let y_of = move |y: f64| if log_y { y.log10() } else { y };
    let shown = |s: &Series| -> Vec<(f64, f64)> {
        s.points
            .iter()
            .filter(|p| p.0.is_finite() && p.1.is_finite() && (!log_y || p.1 > 0.0))
            .filter(|p| !log_x || p.0 > 0.0)
            .map(|&(x, y)| (x_of(x), y_of(y)))
            .collect()
    };
    let all: Vec<(f64, f64)> = chart.series.iter().flat_map(shown).collect();
    let marks = chart.marks.iter().map(|m| x_of(m.0));
    let (x0, x1) = bounds(all.iter().map(|p| p.0).chain(marks));
    let (y0, y1) = bounds(all.iter().map(|p| p.1));
    let (x0, x1) = if log_x { (x0.floor(), x1.ceil().max(x0.floor() + 1.0)) } else { (x0, x1) };
    let (y0, y1) = if log_y {
        (y0.floor(), y1.ceil().max(y0.floor() + 1.0))
    } else {
        (y0.min(0.0), if y1 > 0.0 { y1 * 1.1 } else { 1.0 })
    };

    let root = SVGBackend::new(path, (900, 540)).into_drawing_area();
    root.fill(&WHITE)?;
    let mut plot = ChartBuilder::on(&root)
        .caption(chart.title, ("sans-serif", 20))
        .margin(20)
        .x_label_area_size(50)
        .y_label_area_size(80)
        .build_cartesian_2d(x0..x1, y0..y1)?;
    // counts (workers) label their whole values only
    let whole_x = !log_x && all.iter().all(|p| p.0.fract() == 0.0);
    let x_format = move |v: &f64| match (log_x, whole_x) {
        (true, _) => human(10f64.powf(*v)),
        (false, true) if v.fract().abs() > 1e-9 => String::new(),
        _ => human(*v),
    };
    let y_format = move |v: &f64| human(if log_y { 10f64.powf(*v) } else { *v });
    let decades = |lo: f64, hi: f64| (hi - lo).round() as usize + 1;
    plot.configure_mesh()
        .x_desc(chart.x_label)
        .y_desc(chart.y_label)
        .x_labels(if log_x { decades(x0, x1) } else { 10 })
        .y_labels(if log_y { decades(y0, y1) } else { 10 })
        .x_label_formatter(&x_format)
        .y_label_formatter(&y_format)
        .draw()?;
    for (i, series) in chart.series.iter().enumerate() {
        let color = COLORS[i % COLORS.len()];
        let points = shown(series);
        plot.draw_series(LineSeries::new(points.clone(), color.stroke_width(2)))?
            .label(series.name.as_str())
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2))
            });
        plot.draw_series(points.into_iter().map(|p| Circle::new(p, 3, color.filled())))?;
    }
    for (x, label) in &chart.marks {
        let x = x_of(*x);
        plot.draw_series(LineSeries::new(vec![(x, y0), (x, y1)], BLACK.stroke_width(1)))?;
        let at = (x, y0 + (y1 - y0) * 0.97);
        plot.draw_series(std::iter::once(Text::new(
            label.clone(),
            at,
            ("sans-serif", 14).into_font(),
        )))?;
    }
    plot.configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()?;
    root.present()?;
    Ok(())
}

fn bounds(values: impl Iterator<Item = f64>) -> (f64, f64) {
    let (lo, hi) =
        values.fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), v| (lo.min(v), hi.max(v)));
    if lo.is_finite() && hi > lo {
        (lo, hi)
    } else if lo.is_finite() {
        (lo - 1.0, lo + 1.0)
    } else {
        (0.0, 1.0)
    }
}

/// 1,500 → "1.5k", 2,000,000 → "2M", 0.25 → "0.25".
pub fn human(v: f64) -> String {
    let a = v.abs();
    let (scaled, unit) = if a >= 1e6 {
        (v / 1e6, "M")
    } else if a >= 1e3 {
        (v / 1e3, "k")
    } else {
        (v, "")
    };
    let text = format!("{scaled:.2}");
    let text = text.trim_end_matches('0').trim_end_matches('.');
    format!("{text}{unit}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_are_short() {
        assert_eq!(human(1500.0), "1.5k");
        assert_eq!(human(2_000_000.0), "2M");
        assert_eq!(human(0.25), "0.25");
        assert_eq!(human(100.0), "100");
    }

    #[test]
    fn a_log_chart_is_a_valid_svg() {
        let path = std::env::temp_dir().join(format!("needle-chart-{}.svg", std::process::id()));
        let chart = Chart {
            title: "t",
            x_label: "queries",
            y_label: "ms",
            log_x: true,
            log_y: true,
            series: vec![Series { name: "p50".into(), points: vec![(1.0, 0.5), (1000.0, 2.0)] }],
            marks: vec![(100.0, "knee".into())],
        };
        draw_svg(&path, &chart).unwrap();
        let svg = std::fs::read_to_string(&path).unwrap();
        assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"), "{svg}");
        assert!(svg.contains("knee") && svg.contains("p50"));
        let _ = std::fs::remove_file(&path);
    }
}
