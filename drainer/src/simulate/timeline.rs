//! A simulation's or backtest's reports as one self-contained HTML page (`--output html`): per run
//! (a scenario, or a policy side by side with the others on one time axis) a swimlane per node
//! (held by a gate, cordoned, draining, drained, probation, uncordoned, deleted; reasons on
//! hover), the number of nodes cordoned over time, and the breaker's open spans. Inline SVG and
//! CSS only: no script, nothing fetched. Pure.

use std::fmt::Write as _;
use std::time::Duration;

use super::report::{Happening, Report};

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

/// What a node's lane shows, from a time on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum State {
    Held,
    Cordoned,
    Draining,
    Drained,
    Probation,
    Uncordoned,
    Deleted,
    /// The remediation ladder's steps past the drain, and its end.
    Rebooting,
    Replacing,
    NeedsPerson,
}

impl State {
    pub(crate) const ALL: [State; 10] = [
        State::Held,
        State::Cordoned,
        State::Draining,
        State::Drained,
        State::Rebooting,
        State::Replacing,
        State::NeedsPerson,
        State::Probation,
        State::Uncordoned,
        State::Deleted,
    ];

    pub(crate) fn name(self) -> &'static str {
        match self {
            State::Held => "held by a gate",
            State::Cordoned => "cordoned",
            State::Draining => "draining",
            State::Drained => "drained",
            State::Probation => "probation",
            State::Uncordoned => "uncordoned",
            State::Deleted => "deleted",
            State::Rebooting => "rebooting",
            State::Replacing => "replacing",
            State::NeedsPerson => "needs a person",
        }
    }

    /// Its colour: distinct from each other and from the chart's, so a picture of the page can be
    /// read back (the browser test does).
    pub(crate) fn colour(self) -> &'static str {
        match self {
            State::Held => "#f2c14e",
            State::Cordoned => "#e07a5f",
            State::Draining => "#c0392b",
            State::Drained => "#6d2a8c",
            State::Probation => "#3d7ddb",
            State::Uncordoned => "#6abf69",
            State::Deleted => "#8a8a8a",
            State::Rebooting => "#17a2b8",
            State::Replacing => "#8c564b",
            State::NeedsPerson => "#d63384",
        }
    }

    fn of(what: &str) -> Option<State> {
        Some(match what {
            "held" => State::Held,
            "cordon" | "taint" | "relapse" => State::Cordoned,
            "drain" => State::Draining,
            "drained" => State::Drained,
            "probation" => State::Probation,
            "uncordon" | "untaint" => State::Uncordoned,
            "delete" => State::Deleted,
            "reboot" => State::Rebooting,
            "replace" => State::Replacing,
            "needs a person" => State::NeedsPerson,
            _ => return None,
        })
    }
}

/// The colour of the count of cordoned nodes, and of the breaker's open spans.
pub(crate) const COUNT_COLOUR: &str = "#1f4e79";
pub(crate) const BREAKER_COLOUR: &str = "#ff0000";

/// A span of one state on a node's lane, `[from, to)` in seconds since the start.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Segment {
    pub(crate) state: State,
    pub(crate) from: u64,
    pub(crate) to: u64,
    pub(crate) why: String,
}

/// Each node's segments, the nodes in the order they first appear.
pub(crate) fn lanes(r: &Report, end: u64) -> Vec<(String, Vec<Segment>)> {
    let mut all: Vec<&Happening> = r.happenings.iter().chain(&r.held).collect();
    all.sort_by_key(|h| h.at_secs);
    let mut out: Vec<(String, Vec<Segment>)> = Vec::new();
    for h in all {
        let Some(node) = &h.node else { continue };
        if h.what == "released" {
            // No gate holds it any more: its held span ends (nothing else changed).
            if let Some((_, segs)) = out.iter_mut().find(|(n, _)| n == node)
                && let Some(last) = segs.last_mut()
                && last.state == State::Held
                && last.to > h.at_secs
            {
                last.to = h.at_secs;
            }
            continue;
        }
        let Some(state) = State::of(&h.what) else {
            continue;
        };
        let i = match out.iter().position(|(n, _)| n == node) {
            Some(i) => i,
            None => {
                out.push((node.clone(), Vec::new()));
                out.len() - 1
            }
        };
        let segs = &mut out[i].1;
        // A wait begun while the node is already further on (a drain waiting its turn) does not
        // undo its state: it is said on the current segment.
        if state == State::Held
            && segs
                .last()
                .is_some_and(|s| s.state != State::Uncordoned && s.state != State::Held)
        {
            let last = segs.last_mut().expect("checked");
            last.why = format!("{}; then held: {}", last.why, h.detail);
            continue;
        }
        if let Some(last) = segs.last_mut() {
            last.to = last.to.min(h.at_secs);
        }
        segs.retain(|s| s.to > s.from);
        segs.push(Segment {
            state,
            from: h.at_secs,
            to: end,
            why: h.detail.clone(),
        });
    }
    out
}

/// The number of nodes cordoned by the drainer over time: (seconds, count) at each change.
pub(crate) fn cordoned_over_time(r: &Report) -> Vec<(u64, usize)> {
    let mut n = 0usize;
    let mut out = vec![(0, 0)];
    for h in &r.happenings {
        match h.what.as_str() {
            "cordon" | "taint" => n += 1,
            "uncordon" | "untaint" => n = n.saturating_sub(1),
            _ => continue,
        }
        out.push((h.at_secs, n));
    }
    out
}

/// The breaker's open spans, with what opened it.
pub(crate) fn breaker_spans(r: &Report, end: u64) -> Vec<(u64, u64, String)> {
    let mut out: Vec<(u64, u64, String)> = Vec::new();
    let mut open: Option<(u64, String)> = None;
    for h in &r.happenings {
        match h.what.as_str() {
            "breaker opened" => open = Some((h.at_secs, h.detail.clone())),
            "breaker closed" => {
                if let Some((from, why)) = open.take() {
                    out.push((from, h.at_secs, why));
                }
            }
            _ => {}
        }
    }
    if let Some((from, why)) = open {
        out.push((from, end, why));
    }
    out
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
    let lanes = lanes(r, end);
    let x = |secs: u64| LABELS + PLOT * secs as f64 / end as f64;
    let lanes_h = lanes.len() as f64 * (LANE + GAP);
    let chart_top = AXIS + lanes_h + 16.0;
    let height = chart_top + CHART + 8.0;
    let mut s = String::new();
    let _ = writeln!(
        s,
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{height}\" \
         viewBox=\"0 0 {} {height}\" font-size=\"11\">",
        LABELS + PLOT + 10.0,
        LABELS + PLOT + 10.0
    );
    // Time axis: ticks at a round step, at most about ten.
    let step = tick_step(end);
    let mut t = 0;
    while t <= end {
        let _ = writeln!(
            s,
            "<line x1=\"{0:.1}\" x2=\"{0:.1}\" y1=\"{AXIS}\" y2=\"{1:.1}\" stroke=\"#e4e4e4\"/>\
             <text x=\"{0:.1}\" y=\"14\" text-anchor=\"middle\">+{2}</text>",
            x(t),
            chart_top + CHART,
            humantime::format_duration(Duration::from_secs(t))
        );
        t += step;
    }
    for (from, to, why) in breaker_spans(r, end) {
        let _ = writeln!(
            s,
            "<rect class=\"breaker\" x=\"{:.1}\" y=\"{AXIS}\" width=\"{:.1}\" height=\"{:.1}\" \
             fill=\"{BREAKER_COLOUR}\" fill-opacity=\"0.25\"><title>breaker open from +{} to +{}: {}</title></rect>",
            x(from),
            (x(to) - x(from)).max(1.0),
            chart_top + CHART - AXIS,
            clock(from),
            clock(to),
            esc(&why)
        );
    }
    for (i, (node, segs)) in lanes.iter().enumerate() {
        let y = AXIS + i as f64 * (LANE + GAP);
        let _ = writeln!(
            s,
            "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\">{}</text>",
            LABELS - 6.0,
            y + LANE - 5.0,
            esc(node)
        );
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
        }
    }
    s.push_str(&count_chart(r, end, chart_top, &x));
    s.push_str("</svg>\n");
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
