//! The first sync as a hand-written SVG: the share of Ready tunnels and of hostnames with their
//! DNS records over time, and the floor the budget allows as a vertical line.
use std::fmt::Write as _;

use super::samples::Sample;

const WIDTH: f64 = 800.0;
const HEIGHT: f64 = 420.0;
const LEFT: f64 = 70.0;
const RIGHT: f64 = 30.0;
const TOP: f64 = 40.0;
const BOTTOM: f64 = 60.0;

/// A line's label, colour, total and value of a sample.
type Line = (&'static str, &'static str, usize, fn(&Sample) -> usize);

/// What the chart shows besides the samples.
pub struct Chart<'a> {
    pub title: &'a str,
    pub tunnels: usize,
    pub hostnames: usize,
    /// Vertical lines: (seconds, label, colour, dashed).
    pub marks: Vec<(f64, String, &'a str, bool)>,
}

pub fn render(samples: &[Sample], chart: &Chart) -> String {
    let last = samples.last().map_or(1.0, |s| s.at);
    let mark_max = chart.marks.iter().map(|m| m.0).fold(0.0, f64::max);
    let x_max = nice_ceiling(last.max(mark_max).max(1.0) * 1.05);
    let plot_w = WIDTH - LEFT - RIGHT;
    let plot_h = HEIGHT - TOP - BOTTOM;
    let x = |t: f64| LEFT + t / x_max * plot_w;
    let y = |share: f64| TOP + (1.0 - share) * plot_h;

    let mut svg = String::new();
    let _ = writeln!(
        svg,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" viewBox="0 0 {WIDTH} {HEIGHT}" font-family="sans-serif" font-size="12">"#
    );
    let _ = writeln!(
        svg,
        r#"<rect width="{WIDTH}" height="{HEIGHT}" fill="white"/>"#
    );
    let _ = writeln!(
        svg,
        r#"<text x="{}" y="22" text-anchor="middle" font-size="14">{}</text>"#,
        WIDTH / 2.0,
        escape(chart.title)
    );
    // Axes, grid and ticks.
    for i in 0..=4 {
        let share = f64::from(i) / 4.0;
        let _ = writeln!(
            svg,
            r##"<line x1="{LEFT}" y1="{0:.1}" x2="{1:.1}" y2="{0:.1}" stroke="#ddd"/><text x="{2:.1}" y="{3:.1}" text-anchor="end">{4}%</text>"##,
            y(share),
            WIDTH - RIGHT,
            LEFT - 6.0,
            y(share) + 4.0,
            i * 25
        );
    }
    let step = x_max / 5.0;
    for i in 0..=5 {
        let t = step * f64::from(i);
        let _ = writeln!(
            svg,
            r##"<line x1="{0:.1}" y1="{TOP}" x2="{0:.1}" y2="{1:.1}" stroke="#eee"/><text x="{0:.1}" y="{2:.1}" text-anchor="middle">{3:.0}</text>"##,
            x(t),
            TOP + plot_h,
            TOP + plot_h + 16.0,
            t
        );
    }
    let _ = writeln!(
        svg,
        r#"<rect x="{LEFT}" y="{TOP}" width="{plot_w}" height="{plot_h}" fill="none" stroke="black"/>"#
    );
    let _ = writeln!(
        svg,
        r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">seconds since the first object was created</text>"#,
        LEFT + plot_w / 2.0,
        HEIGHT - 18.0
    );
    let _ = writeln!(
        svg,
        r#"<text transform="translate(18 {:.1}) rotate(-90)" text-anchor="middle">share of its total</text>"#,
        TOP + plot_h / 2.0
    );
    // The two lines.
    let lines: [Line; 2] = [
        ("Ready tunnels", "#1f77b4", chart.tunnels, |s| s.ready),
        ("hostnames with DNS", "#2ca02c", chart.hostnames, |s| s.dns),
    ];
    for (i, (label, colour, total, value)) in lines.iter().enumerate() {
        let total = (*total).max(1) as f64;
        let points: Vec<String> = samples
            .iter()
            .map(|s| format!("{:.1},{:.1}", x(s.at), y(value(s) as f64 / total)))
            .collect();
        let _ = writeln!(
            svg,
            r#"<polyline fill="none" stroke="{colour}" stroke-width="2" points="{}"/>"#,
            points.join(" ")
        );
        let legend_y = TOP + 16.0 + 16.0 * i as f64;
        let _ = writeln!(
            svg,
            r#"<line x1="{0:.1}" y1="{1:.1}" x2="{2:.1}" y2="{1:.1}" stroke="{colour}" stroke-width="2"/><text x="{3:.1}" y="{4:.1}">{5} (of {6})</text>"#,
            LEFT + 10.0,
            legend_y,
            LEFT + 30.0,
            LEFT + 36.0,
            legend_y + 4.0,
            label,
            total
        );
    }
    for (i, (at, label, colour, dashed)) in chart.marks.iter().enumerate() {
        let dash = if *dashed {
            r#" stroke-dasharray="6 4""#
        } else {
            ""
        };
        // Labels right of their line, or left of it in the right part of the plot.
        let (text_x, anchor) = match x(*at) > LEFT + 0.6 * plot_w {
            true => (x(*at) - 4.0, "end"),
            false => (x(*at) + 4.0, "start"),
        };
        let _ = writeln!(
            svg,
            r#"<line x1="{0:.1}" y1="{TOP}" x2="{0:.1}" y2="{1:.1}" stroke="{colour}" stroke-width="1.5"{dash}/><text x="{2:.1}" y="{3:.1}" fill="{colour}" text-anchor="{anchor}">{4}</text>"#,
            x(*at),
            TOP + plot_h,
            text_x,
            TOP + plot_h - 8.0 - 14.0 * i as f64,
            escape(label)
        );
    }
    svg.push_str("</svg>\n");
    svg
}

/// 1, 2 or 5 times a power of ten, at least `v`.
fn nice_ceiling(v: f64) -> f64 {
    let magnitude = 10f64.powf(v.log10().floor());
    [1.0, 2.0, 5.0, 10.0]
        .into_iter()
        .map(|m| m * magnitude)
        .find(|c| *c >= v)
        .unwrap_or(10.0 * magnitude)
}

fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}
