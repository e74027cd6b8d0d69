//! Charts as standalone SVG, drawn by our own code: a line chart and a
//! grouped bar chart, nothing more.
//!
//! An SVG file is XML text: a `<svg>` root with a coordinate system
//! (`viewBox`), then shapes (`<line>`, `<polyline>`, `<circle>`, `<rect>`)
//! and `<text>`, painted in document order. A chart is therefore three
//! steps: choose the data ranges, map data to pixels (a *scale*), and write
//! the shapes. Everything here is that, spelled out:
//!
//! ```text
//!   data range ──nice ticks──▶ axis range ──Scale::to_px──▶ pixel
//!    3..1,187                   0..1,200                     y = 380 .. 40
//! ```
//!
//! The y axis points down in SVG (0 is the top), so the scale flips it.
//! Thread counts (1, 2, 4 ... 64) are spaced evenly on a log2 axis, as in a
//! table of doublings; latencies that span 1 ms to seconds use a log10 axis.
//! Every piece of text goes through [`escape`], so a label such as
//! `p99 < 1 ms & more` cannot break the document.

use std::fmt::Write as _;

/// The canvas, in pixels (the `viewBox`; the file scales to any size).
const WIDTH: f64 = 760.0;
const HEIGHT: f64 = 420.0;
/// Room around the plot: tick labels on the left, the legend on the right.
const LEFT: f64 = 72.0;
const RIGHT: f64 = 200.0;
const TOP: f64 = 44.0;
const BOTTOM: f64 = 56.0;

/// Colours that stay distinct for colour-blind readers (Okabe and Ito).
const PALETTE: [&str; 8] = [
    "#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000", "#F0E442",
];

/// How values map to positions along an axis.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Axis {
    /// Equal steps for equal differences, from zero.
    Linear,
    /// Equal steps for each doubling (thread counts). Values must be > 0.
    Log2,
    /// Equal steps for each factor of ten (latencies). Values must be > 0.
    Log10,
}

/// One line of a [`LineChart`]: points joined in x order.
#[derive(Debug, Clone)]
pub struct Series {
    /// The legend's label.
    pub name: String,
    /// (x, y) points; non-finite values and, on a log axis, values <= 0 are
    /// skipped.
    pub points: Vec<(f64, f64)>,
    /// Drawn dashed and without point marks: a bound or a model, not data.
    pub dashed: bool,
}

/// A horizontal reference line across the whole plot (a bound, or a mode
/// that has no x, such as the epoll proxy against a chart of pool threads).
#[derive(Debug, Clone)]
pub struct Reference {
    /// The legend's label.
    pub name: String,
    /// Where the line is.
    pub y: f64,
}

/// A line chart with optional horizontal reference lines.
#[derive(Debug, Clone)]
pub struct LineChart {
    /// Drawn above the plot.
    pub title: String,
    /// Under the x axis.
    pub x_label: String,
    /// Beside the y axis.
    pub y_label: String,
    /// The x axis' kind (`Log2` for thread counts).
    pub x_axis: Axis,
    /// The lines.
    pub series: Vec<Series>,
    /// Dashed horizontal lines.
    pub references: Vec<Reference>,
}

/// A bar chart: one group of bars per category, one bar per series.
#[derive(Debug, Clone)]
pub struct BarChart {
    /// Drawn above the plot.
    pub title: String,
    /// Beside the y axis.
    pub y_label: String,
    /// `Linear` or `Log10` (`Log2` is treated as `Log10`).
    pub y_axis: Axis,
    /// The legend: one name per bar in a group.
    pub series: Vec<String>,
    /// (category label, one value per series; None: no bar).
    pub groups: Vec<(String, Vec<Option<f64>>)>,
}

/// Escapes text for XML content and attribute values.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            // XML 1.0 forbids most control characters, even escaped.
            c if c.is_control() && c != '\n' && c != '\t' => out.push(' '),
            c => out.push(c),
        }
    }
    out
}

/// A "nice" step for about `count` intervals over `span`: 1, 2 or 5 times a
/// power of ten, so tick labels read 0, 200, 400 rather than 0, 173, 346.
pub fn nice_step(span: f64, count: usize) -> f64 {
    if !(span.is_finite() && span > 0.0) || count == 0 {
        return 1.0;
    }
    let raw = span / count as f64;
    let magnitude = 10f64.powf(raw.log10().floor());
    let fraction = raw / magnitude;
    let nice = if fraction <= 1.0 {
        1.0
    } else if fraction <= 2.0 {
        2.0
    } else if fraction <= 5.0 {
        5.0
    } else {
        10.0
    };
    nice * magnitude
}

/// A number as a tick label: whole numbers with a thousands `k` when large,
/// up to two decimals when small.
pub fn format_tick(value: f64) -> String {
    let abs = value.abs();
    if abs >= 10_000.0 {
        let k = value / 1000.0;
        if (k - k.round()).abs() < 1e-9 {
            format!("{}k", k.round())
        } else {
            format!("{k:.1}k")
        }
    } else if abs >= 10.0 || (value - value.round()).abs() < 1e-9 {
        format!("{}", value.round())
    } else {
        // One decimal from 1 up, two below; no trailing zeros (0.5, not 0.50).
        let text = if abs >= 1.0 {
            format!("{value:.1}")
        } else {
            format!("{value:.2}")
        };
        text.trim_end_matches('0').trim_end_matches('.').to_string()
    }
}

/// Maps data values to pixels along one axis.
#[derive(Debug, Clone, Copy)]
struct Scale {
    axis: Axis,
    /// The data range shown (already extended to nice ticks).
    low: f64,
    high: f64,
    /// The pixel range it maps onto (for y, `from` is the bottom).
    from: f64,
    to: f64,
}

impl Scale {
    /// A scale covering `values` (and zero, on a linear axis), with its ticks.
    fn fit(axis: Axis, values: &[f64], from: f64, to: f64) -> (Scale, Vec<f64>) {
        let usable: Vec<f64> = values
            .iter()
            .copied()
            .filter(|v| v.is_finite() && (axis == Axis::Linear || *v > 0.0))
            .collect();
        let min = usable.iter().copied().fold(f64::INFINITY, f64::min);
        let max = usable.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let (low, high, ticks) = match axis {
            Axis::Linear => {
                let high = if max.is_finite() && max > 0.0 {
                    max
                } else {
                    1.0
                };
                let step = nice_step(high, 5);
                let top = (high / step).ceil() * step;
                // Bounded: top / step is about 5 (at most 10) by construction.
                let ticks = (0..=((top / step).round() as usize))
                    .map(|i| i as f64 * step)
                    .collect();
                (0.0, top, ticks)
            }
            Axis::Log2 | Axis::Log10 => {
                let base: f64 = if axis == Axis::Log2 { 2.0 } else { 10.0 };
                let (min, max) = if min.is_finite() {
                    (min, max)
                } else {
                    (1.0, base)
                };
                let first = min.log(base).floor() as i32;
                let mut last = max.log(base).ceil() as i32;
                if last <= first {
                    last = first + 1;
                }
                // A log axis over absurd ranges would be all ticks; cap it.
                let last = last.min(first + 40);
                let ticks = (first..=last).map(|e| base.powi(e)).collect();
                (base.powi(first), base.powi(last), ticks)
            }
        };
        (
            Scale {
                axis,
                low,
                high,
                from,
                to,
            },
            ticks,
        )
    }

    /// The pixel position of `value` (None if it cannot be shown: not
    /// finite, or not positive on a log axis).
    fn to_px(self, value: f64) -> Option<f64> {
        if !value.is_finite() {
            return None;
        }
        let fraction = match self.axis {
            Axis::Linear => (value - self.low) / (self.high - self.low),
            Axis::Log2 | Axis::Log10 => {
                if value <= 0.0 {
                    return None;
                }
                (value.ln() - self.low.ln()) / (self.high.ln() - self.low.ln())
            }
        };
        Some(self.from + fraction * (self.to - self.from))
    }
}

/// The document's start: root element, white background, title.
fn open(title: &str) -> String {
    let mut svg = String::new();
    let _ = write!(
        svg,
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{WIDTH}\" height=\"{HEIGHT}\" \
         viewBox=\"0 0 {WIDTH} {HEIGHT}\" font-family=\"sans-serif\" font-size=\"12\">\n\
         <title>{t}</title>\n\
         <rect x=\"0\" y=\"0\" width=\"{WIDTH}\" height=\"{HEIGHT}\" fill=\"white\"/>\n\
         <text x=\"{x:.1}\" y=\"24\" font-size=\"15\" font-weight=\"bold\" text-anchor=\"middle\">{t}</text>\n",
        t = escape(title),
        x = (LEFT + (WIDTH - RIGHT)) / 2.0,
    );
    svg
}

/// The axes' lines, the y ticks with grid lines, and the axis labels.
fn axes(svg: &mut String, y: &Scale, y_ticks: &[f64], x_label: &str, y_label: &str) {
    let (x0, x1) = (LEFT, WIDTH - RIGHT);
    let (y0, y1) = (HEIGHT - BOTTOM, TOP);
    for &tick in y_ticks {
        if let Some(py) = y.to_px(tick) {
            let _ = writeln!(
                svg,
                "<line x1=\"{x0:.1}\" y1=\"{py:.1}\" x2=\"{x1:.1}\" y2=\"{py:.1}\" stroke=\"#e0e0e0\"/>\n\
                 <text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\">{}</text>",
                x0 - 6.0,
                py + 4.0,
                escape(&format_tick(tick))
            );
        }
    }
    let _ = writeln!(
        svg,
        "<line x1=\"{x0:.1}\" y1=\"{y0:.1}\" x2=\"{x1:.1}\" y2=\"{y0:.1}\" stroke=\"black\"/>\n\
         <line x1=\"{x0:.1}\" y1=\"{y0:.1}\" x2=\"{x0:.1}\" y2=\"{y1:.1}\" stroke=\"black\"/>\n\
         <text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{}</text>\n\
         <text x=\"16\" y=\"{:.1}\" text-anchor=\"middle\" transform=\"rotate(-90 16 {:.1})\">{}</text>",
        (x0 + x1) / 2.0,
        HEIGHT - 14.0,
        escape(x_label),
        (y0 + y1) / 2.0,
        (y0 + y1) / 2.0,
        escape(y_label)
    );
}

/// One legend entry at row `row`: a sample of the line (dashed or solid, or
/// a filled box for bars) and the label.
fn legend_entry(svg: &mut String, row: usize, colour: &str, style: LegendStyle, label: &str) {
    let x = WIDTH - RIGHT + 16.0;
    let y = TOP + 8.0 + row as f64 * 20.0;
    match style {
        LegendStyle::Line => {
            let _ = writeln!(
                svg,
                "<line x1=\"{x:.1}\" y1=\"{y:.1}\" x2=\"{:.1}\" y2=\"{y:.1}\" stroke=\"{colour}\" stroke-width=\"2\"/>\n\
                 <circle cx=\"{:.1}\" cy=\"{y:.1}\" r=\"3\" fill=\"{colour}\"/>",
                x + 24.0,
                x + 12.0
            );
        }
        LegendStyle::Dashed => {
            let _ = writeln!(
                svg,
                "<line x1=\"{x:.1}\" y1=\"{y:.1}\" x2=\"{:.1}\" y2=\"{y:.1}\" stroke=\"{colour}\" \
                 stroke-width=\"2\" stroke-dasharray=\"6 4\"/>",
                x + 24.0
            );
        }
        LegendStyle::Box => {
            let _ = writeln!(
                svg,
                "<rect x=\"{x:.1}\" y=\"{:.1}\" width=\"24\" height=\"10\" fill=\"{colour}\"/>",
                y - 5.0
            );
        }
    }
    let _ = writeln!(
        svg,
        "<text x=\"{:.1}\" y=\"{:.1}\">{}</text>",
        x + 30.0,
        y + 4.0,
        escape(label)
    );
}

#[derive(Debug, Clone, Copy)]
enum LegendStyle {
    Line,
    Dashed,
    Box,
}

impl LineChart {
    /// The chart as a standalone SVG document.
    pub fn render(&self) -> String {
        let xs: Vec<f64> = self
            .series
            .iter()
            .flat_map(|s| s.points.iter().map(|p| p.0))
            .collect();
        let ys: Vec<f64> = self
            .series
            .iter()
            .flat_map(|s| s.points.iter().map(|p| p.1))
            .chain(self.references.iter().map(|r| r.y))
            .collect();
        let (x, x_ticks) = Scale::fit(self.x_axis, &xs, LEFT, WIDTH - RIGHT);
        let (y, y_ticks) = Scale::fit(Axis::Linear, &ys, HEIGHT - BOTTOM, TOP);
        let mut svg = open(&self.title);
        axes(&mut svg, &y, &y_ticks, &self.x_label, &self.y_label);
        x_ticks_at(&mut svg, &x, &x_ticks);
        let mut row = 0;
        for (i, series) in self.series.iter().enumerate() {
            let colour = PALETTE[i % PALETTE.len()];
            series_line(&mut svg, series, colour, &x, &y);
            let style = if series.dashed {
                LegendStyle::Dashed
            } else {
                LegendStyle::Line
            };
            legend_entry(&mut svg, row, colour, style, &series.name);
            row += 1;
        }
        for (i, reference) in self.references.iter().enumerate() {
            let colour = PALETTE[(self.series.len() + i) % PALETTE.len()];
            if let Some(py) = y.to_px(reference.y) {
                let _ = writeln!(
                    svg,
                    "<line x1=\"{LEFT:.1}\" y1=\"{py:.1}\" x2=\"{:.1}\" y2=\"{py:.1}\" stroke=\"{colour}\" \
                     stroke-width=\"2\" stroke-dasharray=\"6 4\"/>",
                    WIDTH - RIGHT
                );
            }
            legend_entry(&mut svg, row, colour, LegendStyle::Dashed, &reference.name);
            row += 1;
        }
        svg.push_str("</svg>\n");
        svg
    }
}

/// The x axis' ticks and their labels, under the plot.
fn x_ticks_at(svg: &mut String, x: &Scale, ticks: &[f64]) {
    for &tick in ticks {
        if let Some(px) = x.to_px(tick) {
            let _ = writeln!(
                svg,
                "<line x1=\"{px:.1}\" y1=\"{:.1}\" x2=\"{px:.1}\" y2=\"{:.1}\" stroke=\"black\"/>\n\
                 <text x=\"{px:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{}</text>",
                HEIGHT - BOTTOM,
                HEIGHT - BOTTOM + 5.0,
                HEIGHT - BOTTOM + 19.0,
                escape(&format_tick(tick))
            );
        }
    }
}

/// One series: its points joined left to right (dashed if it is a bound),
/// and a dot on each measured point.
fn series_line(svg: &mut String, series: &Series, colour: &str, x: &Scale, y: &Scale) {
    let mut points: Vec<(f64, f64)> = series
        .points
        .iter()
        .filter_map(|&(px, py)| Some((x.to_px(px)?, y.to_px(py)?)))
        .collect();
    points.sort_by(|a, b| a.0.total_cmp(&b.0));
    let path: Vec<String> = points
        .iter()
        .map(|(px, py)| format!("{px:.1},{py:.1}"))
        .collect();
    let dash = if series.dashed {
        " stroke-dasharray=\"6 4\""
    } else {
        ""
    };
    if points.len() > 1 {
        let _ = writeln!(
            svg,
            "<polyline points=\"{}\" fill=\"none\" stroke=\"{colour}\" stroke-width=\"2\"{dash}/>",
            path.join(" ")
        );
    }
    if !series.dashed {
        for (px, py) in &points {
            let _ = writeln!(
                svg,
                "<circle cx=\"{px:.1}\" cy=\"{py:.1}\" r=\"3.5\" fill=\"{colour}\"/>"
            );
        }
    }
}

impl BarChart {
    /// The chart as a standalone SVG document.
    pub fn render(&self) -> String {
        let y_axis = match self.y_axis {
            Axis::Linear => Axis::Linear,
            Axis::Log2 | Axis::Log10 => Axis::Log10,
        };
        let values: Vec<f64> = self
            .groups
            .iter()
            .flat_map(|(_, v)| v.iter().flatten().copied())
            .collect();
        let (y, y_ticks) = Scale::fit(y_axis, &values, HEIGHT - BOTTOM, TOP);
        let mut svg = open(&self.title);
        axes(&mut svg, &y, &y_ticks, "", &self.y_label);
        let plot = WIDTH - RIGHT - LEFT;
        let group_width = plot / self.groups.len().max(1) as f64;
        // Bars fill 80% of a group; the rest is the gap between groups.
        let bar_width = group_width * 0.8 / self.series.len().max(1) as f64;
        let baseline = HEIGHT - BOTTOM;
        for (g, (label, values)) in self.groups.iter().enumerate() {
            let group_x = LEFT + g as f64 * group_width;
            for (s, value) in values.iter().enumerate().take(self.series.len()) {
                let Some(top) = value.and_then(|v| y.to_px(v)) else {
                    continue;
                };
                // A value below a log axis' first tick still shows as a sliver.
                let top = top.min(baseline - 1.0);
                let _ = writeln!(
                    svg,
                    "<rect x=\"{:.1}\" y=\"{top:.1}\" width=\"{:.1}\" height=\"{:.1}\" fill=\"{}\"/>",
                    group_x + group_width * 0.1 + s as f64 * bar_width,
                    bar_width,
                    baseline - top,
                    PALETTE[s % PALETTE.len()]
                );
            }
            // Slanted, so long labels in narrow groups do not overlap.
            let (lx, ly) = (group_x + group_width / 2.0, baseline + 14.0);
            let _ = writeln!(
                svg,
                "<text x=\"{lx:.1}\" y=\"{ly:.1}\" font-size=\"11\" text-anchor=\"end\" \
                 transform=\"rotate(-30 {lx:.1} {ly:.1})\">{}</text>",
                escape(label)
            );
        }
        for (s, name) in self.series.iter().enumerate() {
            legend_entry(
                &mut svg,
                s,
                PALETTE[s % PALETTE.len()],
                LegendStyle::Box,
                name,
            );
        }
        svg.push_str("</svg>\n");
        svg
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A small well-formedness check: every element opened is closed in
    /// order (or self-closed), and no raw `<` or `&` is left in text.
    fn balanced(svg: &str) -> Result<(), String> {
        let mut stack: Vec<String> = Vec::new();
        let mut rest = svg;
        while let Some(start) = rest.find('<') {
            let text = &rest[..start];
            if text.contains('>') {
                return Err(format!("a stray '>' in {text:?}"));
            }
            for (i, _) in text.match_indices('&') {
                let entity = &text[i..];
                if !["&amp;", "&lt;", "&gt;", "&quot;", "&apos;"]
                    .iter()
                    .any(|e| entity.starts_with(e))
                {
                    return Err(format!("an unescaped '&' in {text:?}"));
                }
            }
            let end = rest[start..].find('>').ok_or("an unclosed tag")? + start;
            let tag = &rest[start + 1..end];
            if let Some(name) = tag.strip_prefix('/') {
                match stack.pop() {
                    Some(open) if open == name => {}
                    other => return Err(format!("</{name}> closes {other:?}")),
                }
            } else if !tag.ends_with('/') {
                let name = tag.split_whitespace().next().unwrap_or("");
                stack.push(name.to_string());
            }
            rest = &rest[end + 1..];
        }
        if stack.is_empty() {
            Ok(())
        } else {
            Err(format!("never closed: {stack:?}"))
        }
    }

    fn sample_line_chart() -> LineChart {
        LineChart {
            title: "req/s <& pool threads>".to_string(),
            x_label: "pool threads".to_string(),
            y_label: "req/s".to_string(),
            x_axis: Axis::Log2,
            series: vec![Series {
                name: "pool".to_string(),
                points: vec![(1.0, 19.0), (2.0, 39.0), (64.0, 1200.0), (0.0, 5.0)],
                dashed: false,
            }],
            references: vec![Reference {
                name: "epoll \"1\"".to_string(),
                y: 1250.0,
            }],
        }
    }

    #[test]
    fn text_is_escaped() {
        assert_eq!(
            escape("a<b & \"c\" 'd'>"),
            "a&lt;b &amp; &quot;c&quot; &apos;d&apos;&gt;"
        );
        assert_eq!(escape("bell\u{7}"), "bell ");
        let svg = sample_line_chart().render();
        assert!(svg.contains("req/s &lt;&amp; pool threads&gt;"));
        assert!(svg.contains("epoll &quot;1&quot;"));
    }

    #[test]
    fn charts_are_standalone_well_formed_documents() {
        let line = sample_line_chart().render();
        assert!(line.starts_with("<svg xmlns=\"http://www.w3.org/2000/svg\""));
        assert!(line.trim_end().ends_with("</svg>"));
        balanced(&line).unwrap();
        let bars = BarChart {
            title: "latency".to_string(),
            y_label: "ms".to_string(),
            y_axis: Axis::Log10,
            series: vec!["p50".to_string(), "p99".to_string()],
            groups: vec![
                ("pool 8".to_string(), vec![Some(1600.0), Some(1700.0)]),
                ("epoll 1".to_string(), vec![Some(50.2), None]),
                ("nothing".to_string(), vec![]),
            ],
        }
        .render();
        balanced(&bars).unwrap();
        assert_eq!(
            bars.matches("<rect").count(),
            1 + 3 + 2,
            "background, bars, legend"
        );
        // An empty chart is still a valid document.
        let empty = LineChart {
            series: vec![],
            references: vec![],
            ..sample_line_chart()
        };
        balanced(&empty.render()).unwrap();
        assert!(balanced("<svg><g></svg>").is_err());
        assert!(balanced("<svg>a & b</svg>").is_err());
    }

    #[test]
    fn nice_steps_and_labels() {
        assert_eq!(nice_step(1187.0, 5), 500.0);
        assert_eq!(nice_step(100.0, 5), 20.0);
        assert_eq!(nice_step(7.0, 5), 2.0);
        assert_eq!(nice_step(0.0, 5), 1.0);
        assert_eq!(format_tick(0.0), "0");
        assert_eq!(format_tick(1200.0), "1200");
        assert_eq!(format_tick(20_000.0), "20k");
        assert_eq!(format_tick(12_500.0), "12.5k");
        assert_eq!(format_tick(2.5), "2.5");
        assert_eq!(format_tick(0.25), "0.25");
        assert_eq!(format_tick(0.5), "0.5");
        assert_eq!(format_tick(1.5), "1.5");
    }

    #[test]
    fn scales_map_ranges_and_doublings_evenly() {
        let (linear, ticks) = Scale::fit(Axis::Linear, &[3.0, 1187.0], 400.0, 0.0);
        assert_eq!(ticks.first(), Some(&0.0));
        assert_eq!(ticks.last(), Some(&1500.0));
        assert_eq!(linear.to_px(0.0), Some(400.0));
        assert_eq!(linear.to_px(1500.0), Some(0.0));

        let (log2, ticks) = Scale::fit(Axis::Log2, &[1.0, 64.0, -3.0], 0.0, 600.0);
        assert_eq!(ticks, vec![1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0]);
        let px: Vec<f64> = ticks.iter().map(|&t| log2.to_px(t).unwrap()).collect();
        for pair in px.windows(2) {
            assert!((pair[1] - pair[0] - 100.0).abs() < 1e-9, "{px:?}");
        }
        assert_eq!(log2.to_px(0.0), None);
        assert_eq!(log2.to_px(f64::NAN), None);

        let (_, ticks) = Scale::fit(Axis::Log10, &[0.4, 2600.0], 0.0, 1.0);
        assert_eq!(ticks, vec![0.1, 1.0, 10.0, 100.0, 1000.0, 10000.0]);
    }
}
