//! The stall timeline: when each ticker tick happened, one lane per run.

use std::fmt::Write as _;

/// One lane of the timeline.
pub struct Lane<'a> {
    /// Label on the left.
    pub label: &'a str,
    /// Tick times in ms since the program started.
    pub ticks: &'a [f64],
    /// Lane colour (any SVG colour).
    pub color: &'a str,
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;")
}

/// Renders the lanes; `busy` is the window (ms) in which the spin thread computes.
pub fn timeline(title: &str, lanes: &[Lane<'_>], busy: (f64, f64)) -> String {
    let end_ms = lanes
        .iter()
        .flat_map(|l| l.ticks.iter().copied())
        .fold(busy.1, f64::max)
        .max(100.0);
    let end_ms = (end_ms / 250.0).ceil() * 250.0;
    let (left, right, top, lane_h) = (230.0, 30.0, 50.0, 46.0);
    let width = 960.0;
    let plot_w = width - left - right;
    let height = top + lane_h * lanes.len() as f64 + 50.0;
    let x = |ms: f64| left + ms / end_ms * plot_w;
    let mut s = String::new();
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="13">"#
    );
    let _ = writeln!(s, r#"<rect width="100%" height="100%" fill="white"/>"#);
    let _ = writeln!(
        s,
        r#"<text x="{}" y="24" font-size="15" font-weight="bold">{}</text>"#,
        left,
        esc(title)
    );
    let plot_bottom = top + lane_h * lanes.len() as f64;
    let _ = writeln!(
        s,
        r##"<rect x="{:.1}" y="{top}" width="{:.1}" height="{:.1}" fill="#f6d6d6"/>"##,
        x(busy.0),
        x(busy.1) - x(busy.0),
        plot_bottom - top
    );
    let _ = writeln!(
        s,
        r##"<text x="{:.1}" y="{:.1}" fill="#a33" text-anchor="middle">thread 'spin' computes</text>"##,
        (x(busy.0) + x(busy.1)) / 2.0,
        top - 6.0
    );
    let mut t = 0.0;
    while t <= end_ms {
        let _ = writeln!(
            s,
            r##"<line x1="{0:.1}" y1="{top}" x2="{0:.1}" y2="{1:.1}" stroke="#ddd"/><text x="{0:.1}" y="{2:.1}" text-anchor="middle" fill="#555">{3}</text>"##,
            x(t),
            plot_bottom,
            plot_bottom + 18.0,
            t as i64
        );
        t += 250.0;
    }
    let _ = writeln!(
        s,
        r##"<text x="{:.1}" y="{:.1}" text-anchor="middle" fill="#555">ms since start (ticker wants a tick every 100 ms)</text>"##,
        left + plot_w / 2.0,
        plot_bottom + 38.0
    );
    for (i, lane) in lanes.iter().enumerate() {
        let y = top + lane_h * i as f64 + lane_h / 2.0;
        let _ = writeln!(s, r#"<text x="10" y="{:.1}">{}</text>"#, y + 4.0, esc(lane.label));
        let _ = writeln!(
            s,
            r##"<line x1="{left}" y1="{y:.1}" x2="{:.1}" y2="{y:.1}" stroke="#999"/>"##,
            left + plot_w
        );
        let mut prev = 0.0;
        for &tick in lane.ticks {
            let gap = tick - prev;
            if gap > 250.0 {
                let _ = writeln!(
                    s,
                    r##"<text x="{:.1}" y="{:.1}" text-anchor="middle" fill="#a33">{:.0} ms gap</text>"##,
                    (x(prev) + x(tick)) / 2.0,
                    y - 10.0,
                    gap
                );
            }
            let _ = writeln!(
                s,
                r#"<circle cx="{:.1}" cy="{y:.1}" r="4.5" fill="{}"/>"#,
                x(tick),
                lane.color
            );
            prev = tick;
        }
    }
    s.push_str("</svg>\n");
    s
}
