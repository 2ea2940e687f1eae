//! A simulation's or backtest's reports as one self-contained HTML page (`--output html`): per run
//! (a scenario, or a policy side by side with the others on one time axis) what it came to in one
//! line (cordons, drains, reboots, replacements, people called), a band for the breaker's open
//! spans and one for the slow start's widths above the lanes, a swimlane per node the drainer
//! acted on, in the order it first acted (held by a gate, cordoned, draining, drained, probation,
//! uncordoned, deleted, the ladder's steps; relapses marked; reasons on hover), the nodes only
//! ever held folded into one lane with their count, and the number of nodes cordoned over time.
//! Inline SVG and CSS only: no script, nothing fetched. Pure.

use std::fmt::Write as _;
use std::time::Duration;

use super::report::Report;

mod lanes;

use lanes::{
    BREAKER_COLOUR, COUNT_COLOUR, Lane, Segment, State, arrange, breaker_spans, cordoned_over_time,
    lanes, slow_start_widths, summary,
};

/// One report to draw, under its title and what it is about.
pub(crate) struct Run<'a> {
    pub(crate) title: String,
    pub(crate) about: String,
    pub(crate) report: &'a Report,
}

/// Whether the runs share one time axis (policies compared side by side) or each has its own
/// (scenarios of different lengths).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Axis {
    Shared,
    Each,
}

/// Where a run's axis ends: a little after the last thing in it, and never at zero.
fn axis_end<'a>(reports: impl Iterator<Item = &'a Report>) -> u64 {
    let end = reports
        .flat_map(|r| r.happenings.iter().chain(&r.held))
        .map(|h| h.at_secs)
        .max()
        .unwrap_or(0);
    (end + end / 20).max(60)
}

/// The page. `rows` is a summary table (a backtest's figures per policy), `note` a line under the
/// title (where times start).
pub(crate) fn page(
    title: &str,
    note: &str,
    runs: &[Run],
    axis: Axis,
    rows: &[(String, Vec<String>)],
) -> String {
    let shared = axis_end(runs.iter().map(|r| r.report));
    let mut html = String::new();
    let _ = write!(
        html,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <title>{}</title><style>{STYLE}</style></head><body>\n<h1>{}</h1>\n<p>{}</p>\n",
        esc(title),
        esc(title),
        esc(note)
    );
    html.push_str(&legend());
    if !rows.is_empty() {
        html.push_str(&table(runs, rows));
    }
    for run in runs {
        let _ = writeln!(html, "<section><h2>{}</h2>", esc(&run.title));
        if !run.about.is_empty() {
            let _ = writeln!(html, "<p>{}</p>", esc(&run.about));
        }
        let _ = writeln!(
            html,
            "<p class=\"counts\">{}</p>",
            esc(&summary(run.report))
        );
        let end = match axis {
            Axis::Shared => shared,
            Axis::Each => axis_end(std::iter::once(run.report)),
        };
        html.push_str(&svg(run.report, end));
        html.push_str("</section>\n");
    }
    html.push_str("</body></html>\n");
    html
}

const STYLE: &str = "body{font:14px sans-serif;margin:16px;color:#222}h1{font-size:20px}\
    h2{font-size:16px;margin:16px 0 4px}svg{display:block}table{border-collapse:collapse}\
    td,th{border:1px solid #ccc;padding:2px 8px;text-align:right}th:first-child,td:first-child{text-align:left}\
    .legend span{display:inline-block;margin-right:12px}.legend i{display:inline-block;width:12px;\
    height:12px;margin-right:4px;vertical-align:middle}";

fn legend() -> String {
    let mut s = String::from("<p class=\"legend\">");
    for st in State::ALL {
        let _ = write!(
            s,
            "<span><i style=\"background:{}\"></i>{}</span>",
            st.colour(),
            st.name()
        );
    }
    let _ = writeln!(
        s,
        "<span><i style=\"background:{BREAKER_COLOUR};opacity:.25\"></i>breaker open</span>\
         <span><i style=\"background:{COUNT_COLOUR}\"></i>nodes cordoned</span></p>"
    );
    s
}

fn table(runs: &[Run], rows: &[(String, Vec<String>)]) -> String {
    let mut s = String::from("<table class=\"summary\"><tr><th></th>");
    for r in runs {
        let _ = write!(s, "<th>{}</th>", esc(&r.title));
    }
    s.push_str("</tr>\n");
    for (name, values) in rows {
        let _ = write!(s, "<tr><td>{}</td>", esc(name));
        for v in values {
            let _ = write!(s, "<td>{}</td>", esc(v));
        }
        s.push_str("</tr>\n");
    }
    s.push_str("</table>\n");
    s
}

const LABELS: f64 = 180.0;
const PLOT: f64 = 840.0;
const LANE: f64 = 18.0;
const GAP: f64 = 4.0;
const AXIS: f64 = 22.0;
const CHART: f64 = 70.0;

fn svg(r: &Report, end: u64) -> String {
    let (acted, quiet) = arrange(lanes(r, end));
    let spans = breaker_spans(r, end);
    let widths = slow_start_widths(r);
    let x = |secs: u64| LABELS + PLOT * secs as f64 / end as f64;
    // Rows from the top: the breaker's band, the slow start's, a lane per node acted on, the
    // quiet nodes' lane; each band only when it has something to show.
    let rows = usize::from(!spans.is_empty())
        + usize::from(!widths.is_empty())
        + acted.len()
        + usize::from(!quiet.is_empty());
    let row_y = |i: usize| AXIS + i as f64 * (LANE + GAP);
    let chart_top = row_y(rows) + 16.0;
    let height = chart_top + CHART + 8.0;
    let mut s = String::new();
    let _ = writeln!(
        s,
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{height}\" \
         viewBox=\"0 0 {} {height}\" font-size=\"11\">",
        LABELS + PLOT + 10.0,
        LABELS + PLOT + 10.0
    );
    s.push_str(&ticks(end, chart_top + CHART, &x));
    // Faint behind every lane, so a lane's span can be read against it.
    for (from, to, why) in &spans {
        let _ = writeln!(
            s,
            "<rect class=\"breaker\" x=\"{:.1}\" y=\"{AXIS}\" width=\"{:.1}\" height=\"{:.1}\" \
             fill=\"{BREAKER_COLOUR}\" fill-opacity=\"0.25\"><title>breaker open from +{} to +{}: {}</title></rect>",
            x(*from),
            (x(*to) - x(*from)).max(1.0),
            chart_top + CHART - AXIS,
            clock(*from),
            clock(*to),
            esc(why)
        );
    }
    let mut row = 0;
    if !spans.is_empty() {
        s.push_str(&breaker_band(&spans, row_y(row), &x));
        row += 1;
    }
    if !widths.is_empty() {
        s.push_str(&slow_start_band(&widths, row_y(row), &x));
        row += 1;
    }
    for (node, segs) in &acted {
        s.push_str(&lane(node, segs, row_y(row), &x));
        row += 1;
    }
    if !quiet.is_empty() {
        s.push_str(&quiet_lane(&quiet, row_y(row), &x));
    }
    s.push_str(&count_chart(r, end, chart_top, &x));
    s.push_str("</svg>\n");
    s
}

/// The time axis: ticks at a round step, at most about ten, lines down to `bottom`.
fn ticks(end: u64, bottom: f64, x: &dyn Fn(u64) -> f64) -> String {
    let mut s = String::new();
    let step = tick_step(end);
    let mut t = 0;
    while t <= end {
        let _ = writeln!(
            s,
            "<line x1=\"{0:.1}\" x2=\"{0:.1}\" y1=\"{AXIS}\" y2=\"{1:.1}\" stroke=\"#e4e4e4\"/>\
             <text x=\"{0:.1}\" y=\"14\" text-anchor=\"middle\">+{2}</text>",
            x(t),
            bottom,
            humantime::format_duration(Duration::from_secs(t))
        );
        t += step;
    }
    s
}

fn row_label(y: f64, text: &str) -> String {
    format!(
        "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\">{}</text>\n",
        LABELS - 6.0,
        y + LANE - 5.0,
        esc(text)
    )
}

/// The breaker's open spans as a band of their own above the lanes.
fn breaker_band(spans: &[(u64, u64, String)], y: f64, x: &dyn Fn(u64) -> f64) -> String {
    let mut s = row_label(y, "breaker open");
    for (from, to, why) in spans {
        let _ = writeln!(
            s,
            "<rect class=\"breaker-band\" x=\"{:.1}\" y=\"{y:.1}\" width=\"{:.1}\" height=\"{LANE}\" \
             fill=\"{BREAKER_COLOUR}\" fill-opacity=\"0.25\"><title>breaker open from +{} to +{}: {}</title></rect>",
            x(*from),
            (x(*to) - x(*from)).max(1.0),
            clock(*from),
            clock(*to),
            esc(why)
        );
    }
    s
}

/// The slow start's width (nodes at once) at each change, as numbers on a band above the lanes.
fn slow_start_band(widths: &[(u64, String, String)], y: f64, x: &dyn Fn(u64) -> f64) -> String {
    let mut s = row_label(y, "slow start, at once");
    for (at, width, said) in widths {
        let (left, width, said, when) = (x(*at), esc(width), esc(said), clock(*at));
        let (bottom, baseline) = (y + LANE, y + LANE - 5.0);
        let _ = writeln!(
            s,
            "<g class=\"slow-start\" data-width=\"{width}\"><line x1=\"{left:.1}\" x2=\"{left:.1}\" \
             y1=\"{y:.1}\" y2=\"{bottom:.1}\" stroke=\"#555\"/><text x=\"{:.1}\" y=\"{baseline:.1}\">{width}</text>\
             <title>+{when} {said}</title></g>",
            left + 2.0
        );
    }
    s
}

/// One node's lane: a bar per state, a mark where the problem came back during probation.
fn lane(node: &str, segs: &[Segment], y: f64, x: &dyn Fn(u64) -> f64) -> String {
    let mut s = row_label(y, node);
    for seg in segs {
        let why = if seg.why.is_empty() {
            String::new()
        } else {
            format!(": {}", seg.why)
        };
        let _ = writeln!(
            s,
            "<rect class=\"seg\" data-node=\"{}\" data-state=\"{}\" x=\"{:.1}\" y=\"{y:.1}\" \
             width=\"{:.1}\" height=\"{LANE}\" fill=\"{}\"><title>{} {} from +{} to +{}{}</title></rect>",
            esc(node),
            seg.state.name(),
            x(seg.from),
            (x(seg.to) - x(seg.from)).max(2.0),
            seg.state.colour(),
            esc(node),
            seg.state.name(),
            clock(seg.from),
            clock(seg.to),
            esc(&why)
        );
        if seg.relapse {
            let (at, top) = (x(seg.from), y - 2.0);
            let _ = writeln!(
                s,
                "<path class=\"relapse\" data-node=\"{}\" d=\"M{:.1} {top:.1} l-5 -6 h10 z\" fill=\"#000\">\
                 <title>{} relapsed at +{}{}</title></path>",
                esc(node),
                at,
                esc(node),
                clock(seg.from),
                esc(&why)
            );
        }
    }
    s
}

/// The nodes only ever held by a gate, never acted on: one lane, from the first hold to the last.
fn quiet_lane(quiet: &[Lane], y: f64, x: &dyn Fn(u64) -> f64) -> String {
    let spans = quiet.iter().flat_map(|(_, segs)| segs);
    let from = spans.clone().map(|s| s.from).min().unwrap_or(0);
    let to = spans.map(|s| s.to).max().unwrap_or(from);
    const NAMED: usize = 20;
    let mut names: Vec<&str> = quiet.iter().take(NAMED).map(|(n, _)| n.as_str()).collect();
    if quiet.len() > NAMED {
        names.push("...");
    }
    let n = quiet.len();
    let mut s = row_label(y, &format!("{n} more, only held"));
    let _ = writeln!(
        s,
        "<rect class=\"quiet\" data-count=\"{n}\" x=\"{:.1}\" y=\"{y:.1}\" width=\"{:.1}\" \
         height=\"{LANE}\" fill=\"{}\" fill-opacity=\"0.6\"><title>{n} nodes held by a gate and never \
         acted on, from +{} to +{}: {}</title></rect>",
        x(from),
        (x(to) - x(from)).max(2.0),
        State::Held.colour(),
        clock(from),
        clock(to),
        esc(&names.join(", "))
    );
    s
}

/// The count of cordoned nodes as a step line under the lanes, its scale at the left.
fn count_chart(r: &Report, end: u64, top: f64, x: &dyn Fn(u64) -> f64) -> String {
    let series = cordoned_over_time(r);
    let max = series.iter().map(|(_, n)| *n).max().unwrap_or(0).max(1);
    let y = |n: usize| top + CHART - CHART * n as f64 / max as f64;
    let mut points = Vec::new();
    let mut last = 0;
    for (t, n) in &series {
        points.push(format!("{:.1},{:.1}", x(*t), y(last)));
        points.push(format!("{:.1},{:.1}", x(*t), y(*n)));
        last = *n;
    }
    points.push(format!("{:.1},{:.1}", x(end), y(last)));
    let mut s = String::new();
    let _ = writeln!(
        s,
        "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\">nodes cordoned</text>\
         <text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\">{max}</text>\
         <line x1=\"{LABELS}\" x2=\"{:.1}\" y1=\"{:.1}\" y2=\"{:.1}\" stroke=\"#999\"/>\
         <polyline class=\"cordoned-count\" data-max=\"{max}\" fill=\"none\" stroke=\"{COUNT_COLOUR}\" \
         stroke-width=\"3\" points=\"{}\"><title>at most {max} nodes cordoned at once</title></polyline>",
        LABELS - 6.0,
        top + CHART / 2.0,
        LABELS - 6.0,
        top + 10.0,
        LABELS + PLOT,
        top + CHART,
        top + CHART,
        points.join(" ")
    );
    s
}

/// A round step for about ten ticks over `end` seconds.
fn tick_step(end: u64) -> u64 {
    const STEPS: [u64; 13] = [
        10, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 21600, 43200, 86400,
    ];
    STEPS
        .into_iter()
        .find(|s| end / s <= 10)
        .unwrap_or(86400 * (end / 86400 / 10 + 1))
}

/// Seconds since the start: as the text report writes them (`3m05s`) within the first hour,
/// then as people say them (`1day 2h 5m`).
fn clock(secs: u64) -> String {
    if secs < 3600 {
        format!("{}m{:02}s", secs / 60, secs % 60)
    } else {
        humantime::format_duration(Duration::from_secs(secs)).to_string()
    }
}

/// Text for HTML (element content and quoted attributes alike).
fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests;
