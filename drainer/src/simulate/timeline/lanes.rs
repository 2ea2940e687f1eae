//! What a run's timeline shows, as values: each node's states over time ([`lanes`], ordered and
//! folded by [`arrange`]), the breaker's open spans, the slow start's widths, the count of
//! cordoned nodes, and what the run came to ([`summary`]). Pure; `super` draws them.

use super::super::report::{Happening, Report};

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
            "uncordon" | "untaint" | "restart over" => State::Uncordoned,
            "delete" => State::Deleted,
            "reboot" | "power-cycle" | "restart" => State::Rebooting,
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
    /// It began with the problem coming back during probation (marked on the lane).
    pub(crate) relapse: bool,
}

/// One node's lane.
pub(crate) type Lane = (String, Vec<Segment>);

/// The lanes drawn: the nodes the drainer acted on, in the order it first acted (the time of
/// their first state other than held), and the nodes only ever held, folded into one lane.
pub(crate) fn arrange(lanes: Vec<Lane>) -> (Vec<Lane>, Vec<Lane>) {
    let first_act = |segs: &[Segment]| {
        segs.iter()
            .filter(|s| s.state != State::Held)
            .map(|s| s.from)
            .min()
    };
    let (mut acted, quiet): (Vec<Lane>, Vec<Lane>) = lanes
        .into_iter()
        .partition(|(_, segs)| first_act(segs).is_some());
    // Stable: nodes first acted on at once keep the order they appeared in.
    acted.sort_by_key(|(_, segs)| first_act(segs));
    (acted, quiet)
}

/// What a run came to, in one line.
pub(crate) fn summary(r: &Report) -> String {
    let count = |what: &[&str]| {
        (r.happenings.iter())
            .filter(|h| what.contains(&h.what.as_str()))
            .count()
    };
    let plural =
        |n: usize, one: &str, many: &str| format!("{n} {}", if n == 1 { one } else { many });
    let mut parts = vec![
        format!("{} cordoned", count(&["cordon", "taint"])),
        format!("{} drained", count(&["drained"])),
        format!(
            "{} ({} proven)",
            plural(count(&["reboot", "power-cycle"]), "reboot", "reboots"),
            count(&["reboot proven"])
        ),
        format!("{} replaced", count(&["replace"])),
        format!("{} needed a person", count(&["needs a person"])),
    ];
    for (what, one, many) in [
        ("relapse", "relapse", "relapses"),
        ("delete", "Node deleted", "Nodes deleted"),
    ] {
        let n = count(&[what]);
        if n > 0 {
            parts.push(plural(n, one, many));
        }
    }
    parts.join(", ")
}

/// The slow start's changes of width: (seconds, nodes at once, what was said).
pub(crate) fn slow_start_widths(r: &Report) -> Vec<(u64, String, String)> {
    r.happenings
        .iter()
        .filter(|h| h.what.starts_with("slow start "))
        .map(|h| {
            let width = h
                .detail
                .rsplit_once(": ")
                .and_then(|(_, w)| w.split(' ').next())
                .unwrap_or("?")
                .to_string();
            (h.at_secs, width, format!("{}: {}", h.what, h.detail))
        })
        .collect()
}

/// Each node's segments, the nodes in the order they first appear.
pub(crate) fn lanes(r: &Report, end: u64) -> Vec<Lane> {
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
        // A relapse followed within the second by the next step (a drain) keeps its mark there.
        let relapsed = segs.last().is_some_and(|s| s.relapse && s.to == s.from);
        segs.retain(|s| s.to > s.from);
        segs.push(Segment {
            state,
            from: h.at_secs,
            to: end,
            why: h.detail.clone(),
            relapse: relapsed || h.what == "relapse",
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
