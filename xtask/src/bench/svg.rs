//! A line chart as SVG text, written by hand: both axes logarithmic (base
//! 2), one polyline with point markers per series, labelled ticks, a
//! legend and a title. No plotting dependency: the chart has one shape.

use std::fmt::Write as _;

/// Canvas width, in SVG user units.
const WIDTH: f64 = 880.0;
/// Canvas height.
const HEIGHT: f64 = 440.0;
/// The plot area: left, top, right, bottom edges.
const LEFT: f64 = 80.0;
const TOP: f64 = 50.0;
const RIGHT: f64 = 540.0;
const BOTTOM: f64 = 370.0;
/// Where the legend starts.
const LEGEND_X: f64 = 560.0;
const LEGEND_Y: f64 = 70.0;
/// Space between two legend lines.
const LEGEND_STEP: f64 = 22.0;

/// One line of the chart.
#[derive(Debug, Clone)]
pub struct Series {
    /// Its name in the legend.
    pub name: String,
    /// Stroke colour (any SVG colour).
    pub colour: String,
    /// Drawn dashed (a baseline rather than a measured case).
    pub dashed: bool,
    /// (x, y) points, both positive, in increasing x.
    pub points: Vec<(f64, f64)>,
}

/// What the chart shows.
#[derive(Debug, Clone)]
pub struct Chart {
    /// The title, above the plot.
    pub title: String,
    /// The x axis' label.
    pub x_label: String,
    /// The y axis' label.
    pub y_label: String,
    /// How an x tick value is written (e.g. `16 MiB`, `1 GiB`).
    pub x_tick: fn(f64) -> String,
    /// How a y tick value is written.
    pub y_tick: fn(f64) -> String,
    /// The lines, in legend order.
    pub series: Vec<Series>,
}

/// A log-2 scale from a domain onto a pixel range.
#[derive(Debug, Clone, Copy)]
struct Scale {
    low: f64,
    high: f64,
    from: f64,
    to: f64,
}

impl Scale {
    /// The smallest range of whole powers of two that holds `values`.
    fn covering(values: impl Iterator<Item = f64>, from: f64, to: f64) -> Self {
        let (mut low, mut high) = (f64::INFINITY, f64::NEG_INFINITY);
        for value in values.filter(|v| *v > 0.0) {
            low = low.min(value.log2().floor());
            high = high.max(value.log2().ceil());
        }
        if !low.is_finite() {
            (low, high) = (0.0, 1.0);
        }
        if high <= low {
            high = low + 1.0;
        }
        Scale {
            low,
            high,
            from,
            to,
        }
    }

    /// Where `value` goes, in pixels.
    fn at(&self, value: f64) -> f64 {
        let t = (value.log2() - self.low) / (self.high - self.low);
        self.from + t * (self.to - self.from)
    }

    /// The powers of two of the domain, every `step`-th exponent.
    fn ticks(&self, step: usize) -> impl Iterator<Item = f64> + '_ {
        ((self.low as i32)..=(self.high as i32))
            .step_by(step.max(1))
            .map(|exponent| 2f64.powi(exponent))
    }
}

/// Writes `value` with one decimal, as every coordinate is written.
fn px(value: f64) -> String {
    format!("{value:.1}")
}

/// Escapes the five characters XML gives a meaning.
fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
        .replace('\'', "&apos;")
}

/// The chart as a complete SVG document.
pub fn render(chart: &Chart) -> String {
    let points = || chart.series.iter().flat_map(|s| s.points.iter());
    let x = Scale::covering(points().map(|p| p.0), LEFT, RIGHT);
    let y = Scale::covering(points().map(|p| p.1), BOTTOM, TOP);
    let mut svg = String::new();
    let _ = writeln!(
        svg,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" viewBox="0 0 {w} {h}" font-family="sans-serif" font-size="12">"#,
        w = WIDTH,
        h = HEIGHT
    );
    let _ = writeln!(
        svg,
        r#"<rect x="0" y="0" width="{WIDTH}" height="{HEIGHT}" fill="white"/>"#
    );
    let _ = writeln!(
        svg,
        r#"<text x="{}" y="28" text-anchor="middle" font-size="15" font-weight="bold">{}</text>"#,
        px((LEFT + RIGHT) / 2.0),
        escape(&chart.title)
    );
    // Grid and ticks: every power of two on x, every other one on y when
    // the range is wide.
    let y_step = if y.high - y.low > 8.0 { 2 } else { 1 };
    for value in x.ticks(1) {
        let at = px(x.at(value));
        let _ = writeln!(
            svg,
            r##"<line x1="{at}" y1="{TOP}" x2="{at}" y2="{BOTTOM}" stroke="#e0e0e0"/>"##
        );
        let _ = writeln!(
            svg,
            r#"<text x="{at}" y="{}" text-anchor="middle">{}</text>"#,
            px(BOTTOM + 18.0),
            escape(&(chart.x_tick)(value))
        );
    }
    for value in y.ticks(y_step) {
        let at = y.at(value);
        let _ = writeln!(
            svg,
            r##"<line x1="{LEFT}" y1="{0}" x2="{RIGHT}" y2="{0}" stroke="#e0e0e0"/>"##,
            px(at)
        );
        let _ = writeln!(
            svg,
            r#"<text x="{}" y="{}" text-anchor="end">{}</text>"#,
            px(LEFT - 8.0),
            px(at + 4.0),
            escape(&(chart.y_tick)(value))
        );
    }
    let _ = writeln!(
        svg,
        r#"<rect x="{LEFT}" y="{TOP}" width="{}" height="{}" fill="none" stroke="black"/>"#,
        px(RIGHT - LEFT),
        px(BOTTOM - TOP)
    );
    let _ = writeln!(
        svg,
        r#"<text x="{}" y="{}" text-anchor="middle">{}</text>"#,
        px((LEFT + RIGHT) / 2.0),
        px(BOTTOM + 42.0),
        escape(&chart.x_label)
    );
    let _ = writeln!(
        svg,
        r#"<text x="22" y="{0}" text-anchor="middle" transform="rotate(-90 22 {0})">{1}</text>"#,
        px((TOP + BOTTOM) / 2.0),
        escape(&chart.y_label)
    );
    for (i, series) in chart.series.iter().enumerate() {
        let dash = if series.dashed {
            r#" stroke-dasharray="6 4""#
        } else {
            ""
        };
        let path: Vec<String> = series
            .points
            .iter()
            .map(|&(px_x, px_y)| format!("{},{}", px(x.at(px_x)), px(y.at(px_y))))
            .collect();
        let _ = writeln!(
            svg,
            r#"<polyline points="{}" fill="none" stroke="{}" stroke-width="2"{dash}/>"#,
            path.join(" "),
            escape(&series.colour)
        );
        for &(vx, vy) in &series.points {
            let _ = writeln!(
                svg,
                r#"<circle cx="{}" cy="{}" r="3" fill="{}"><title>{}: {} at {}</title></circle>"#,
                px(x.at(vx)),
                px(y.at(vy)),
                escape(&series.colour),
                escape(&series.name),
                escape(&(chart.y_tick)(vy)),
                escape(&(chart.x_tick)(vx)),
            );
        }
        let row = LEGEND_Y + LEGEND_STEP * i as f64;
        let _ = writeln!(
            svg,
            r#"<line x1="{LEGEND_X}" y1="{0}" x2="{1}" y2="{0}" stroke="{2}" stroke-width="2"{dash}/>"#,
            px(row),
            px(LEGEND_X + 24.0),
            escape(&series.colour)
        );
        let _ = writeln!(
            svg,
            r#"<text x="{}" y="{}">{}</text>"#,
            px(LEGEND_X + 30.0),
            px(row + 4.0),
            escape(&series.name)
        );
    }
    svg.push_str("</svg>\n");
    svg
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chart(series: Vec<Series>) -> Chart {
        Chart {
            title: "a <b> & c".into(),
            x_label: "x".into(),
            y_label: "y".into(),
            x_tick: |v| format!("{v}"),
            y_tick: |v| format!("{v}"),
            series,
        }
    }

    fn series(name: &str, dashed: bool, points: Vec<(f64, f64)>) -> Series {
        Series {
            name: name.into(),
            colour: "red".into(),
            dashed,
            points,
        }
    }

    /// The lines of `svg` that start with `prefix`.
    fn lines<'a>(svg: &'a str, prefix: &str) -> Vec<&'a str> {
        svg.lines().filter(|l| l.starts_with(prefix)).collect()
    }

    #[test]
    fn points_land_on_log_scales_spanning_whole_powers_of_two() {
        // x over 2^1..2^3 on 80..540 (230 px per power), y over 2^0..2^2 on
        // 370..50 (160 px per power).
        let svg = render(&chart(vec![
            series("a", false, vec![(2.0, 1.0), (4.0, 2.0), (8.0, 4.0)]),
            series("b", true, vec![(2.0, 3.0), (8.0, 3.0)]),
        ]));
        assert_eq!(
            lines(&svg, "<polyline"),
            [
                r#"<polyline points="80.0,370.0 310.0,210.0 540.0,50.0" fill="none" stroke="red" stroke-width="2"/>"#,
                // log2(3) = 1.585: 370 - 1.585 * 160 = 116.4
                r#"<polyline points="80.0,116.4 540.0,116.4" fill="none" stroke="red" stroke-width="2" stroke-dasharray="6 4"/>"#,
            ]
        );
        assert_eq!(
            lines(&svg, "<circle")[1],
            r#"<circle cx="310.0" cy="210.0" r="3" fill="red"><title>a: 2 at 4</title></circle>"#
        );
        // One grid line and label per power of two on each axis.
        let texts = lines(&svg, "<text");
        assert_eq!(
            texts[1..4],
            [
                r#"<text x="80.0" y="388.0" text-anchor="middle">2</text>"#,
                r#"<text x="310.0" y="388.0" text-anchor="middle">4</text>"#,
                r#"<text x="540.0" y="388.0" text-anchor="middle">8</text>"#,
            ]
        );
        assert_eq!(
            texts[4..7],
            [
                r#"<text x="72.0" y="374.0" text-anchor="end">1</text>"#,
                r#"<text x="72.0" y="214.0" text-anchor="end">2</text>"#,
                r#"<text x="72.0" y="54.0" text-anchor="end">4</text>"#,
            ]
        );
        assert_eq!(lines(&svg, "<line").len(), 3 + 3 + 2);
        // The title is escaped; the legend has a row per series.
        assert_eq!(
            texts[0],
            r#"<text x="310.0" y="28" text-anchor="middle" font-size="15" font-weight="bold">a &lt;b&gt; &amp; c</text>"#
        );
        assert_eq!(
            texts[texts.len() - 2..],
            [
                r#"<text x="590.0" y="74.0">a</text>"#,
                r#"<text x="590.0" y="96.0">b</text>"#,
            ]
        );
        assert!(svg.starts_with("<svg xmlns=\"http://www.w3.org/2000/svg\""));
        assert!(svg.ends_with("</svg>\n"));
    }

    #[test]
    fn a_wide_y_range_labels_every_other_power() {
        let svg = render(&chart(vec![series(
            "a",
            false,
            vec![(1.0, 1.0), (2.0, 1024.0)],
        )]));
        let y_labels: Vec<&str> = lines(&svg, "<text")
            .into_iter()
            .filter(|l| l.contains("text-anchor=\"end\""))
            .collect();
        assert_eq!(y_labels.len(), 6, "{y_labels:?}"); // 2^0, 2^2, … 2^10
        assert_eq!(
            y_labels[5],
            r#"<text x="72.0" y="54.0" text-anchor="end">1024</text>"#
        );
    }
}
