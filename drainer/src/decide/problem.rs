//! The problem on one node (pure): which configured conditions it has, held long enough or not yet,
//! the episode they make, and how long until a recovery counts.

use std::time::Duration;

use k8s_openapi::jiff::Timestamp;

use super::silence::DETECTOR_SILENT;
use crate::config::Config;
use crate::config::ladder::Ladder;
use crate::model::node::{Condition, NodeView, Status};

/// The state of the problem on a node.
pub(crate) struct Problem {
    /// Conditions held at least their min duration (`Type=Status since T`).
    pub(crate) held: Vec<String>,
    /// Episode identity of the held conditions.
    pub(crate) episode: String,
    /// Matching but not yet held long enough: (description, remaining).
    pub(crate) pending: Vec<(String, Duration)>,
    /// Oldest transition among held/pending (for ordering).
    pub(crate) since: Option<Timestamp>,
    /// Kosmos exemption removed conditions.
    pub(crate) exempted: Vec<String>,
    /// When conditions cleared recently: the longest remaining wait before recovery counts.
    pub(crate) recovering: Option<Duration>,
    /// The remediation ladder of the first held condition that names one (config order).
    pub(crate) ladder: Option<Ladder>,
}

/// How long from `since` to `now` (zero if `now` is earlier).
pub(crate) fn elapsed(since: Timestamp, now: Timestamp) -> Duration {
    Duration::from_millis((now.as_millisecond() - since.as_millisecond()).max(0) as u64)
}

/// A duration as people read it: its two largest units (`10d 9h`, `12m 3s`).
pub(crate) fn fmt_d(d: Duration) -> String {
    nodemedic_common::time::spoken(d)
}

/// The problem on `node` at `now`: which configured conditions hold (long enough or not yet),
/// which a Kosmos leaf node is exempt from, and how long until a recovery counts. `silent`: when
/// the watchdog deemed the node's detector silent, if it is; it stands for a `DetectorSilent=True`
/// condition since then (a node carrying a real one keeps it). `symptoms`: the symptom conditions
/// the drainer found itself on the node, if known; a PodsNotStarting or PodsNotTerminating
/// condition outside them is not counted (anyone with the drainer's token may write one).
pub(crate) fn problem(
    node: &NodeView,
    silent: Option<Timestamp>,
    symptoms: Option<&[(&str, Timestamp)]>,
    cfg: &Config,
    now: Timestamp,
) -> Problem {
    let conditions = &node.conditions;
    let synthetic = silent.map(|since| Condition {
        type_: arcstr::literal!(DETECTOR_SILENT),
        status: Status::True,
        reason: None,
        since,
        heartbeat: 0,
    });
    let kosmos = node.label(&cfg.kosmos_label.0) == Some(cfg.kosmos_label.1.as_str());
    let mut p = Problem {
        held: vec![],
        episode: String::new(),
        pending: vec![],
        since: None,
        exempted: vec![],
        recovering: None,
        ladder: None,
    };
    let mut episode = Vec::new();
    for spec in &cfg.conditions {
        let found = conditions.iter().find(|c| *c.type_ == *spec.type_);
        let Some(c) = found.or(synthetic.as_ref().filter(|c| *c.type_ == *spec.type_)) else {
            continue;
        };
        let ours = crate::model::symptom::CONDITIONS
            .iter()
            .any(|(t, ..)| *t == &*spec.type_);
        // The drainer's own symptom: counted only as found, and held from when it was found.
        let found_at = match symptoms.filter(|_| ours) {
            None => None,
            Some(s) => match s.iter().find(|(t, _)| *t == &*spec.type_) {
                Some((_, at)) => Some(*at),
                None => continue,
            },
        };
        let transition = found_at.map_or(c.since, |at| c.since.max(at));
        if c.status != spec.status {
            // Cleared: recovery counts once the healthy status held the min duration too.
            let held_for = elapsed(transition, now);
            if held_for < spec.min_duration {
                let left = spec.min_duration - held_for;
                p.recovering = Some(p.recovering.map_or(left, |r| r.max(left)));
            }
            continue;
        }
        if !spec.for_reason(c.reason.as_deref()) {
            // The condition in its problem status with another reason: another spec's.
            continue;
        }
        let desc = spec.describe(c.reason.as_deref());
        if kosmos && (spec.type_ == "Ready" || !cfg.kosmos_other_conditions) {
            p.exempted.push(desc);
            continue;
        }
        p.since = Some(p.since.map_or(transition, |s: Timestamp| s.min(transition)));
        let held_for = elapsed(transition, now);
        if held_for >= spec.min_duration {
            // A condition acted on at once (no min duration) that has just turned: "for 0s" read
            // as if it had not held at all.
            p.held.push(if held_for < Duration::from_secs(1) {
                format!("{desc} (just now)")
            } else {
                format!("{desc} for {}", fmt_d(held_for))
            });
            episode.push(format!("{desc}@{}", transition.as_second()));
            p.ladder = p.ladder.or(spec.ladder);
        } else {
            p.pending.push((
                format!(
                    "{desc} for {} of {}",
                    fmt_d(held_for),
                    fmt_d(spec.min_duration)
                ),
                spec.min_duration - held_for,
            ));
        }
    }
    p.episode = episode.join(",");
    p
}
