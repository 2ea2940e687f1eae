//! Fleet safety, pure: what holds remediation back when acting would hurt more than help.
//!
//! - The **circuit breaker** opens when too many selected nodes are unhealthy at once, or too many
//!   became unhealthy within a window: then nothing new is cordoned and no drain starts (drains
//!   already evicting finish, recovered nodes are still uncordoned). It closes once the counts have
//!   stayed at or under the thresholds for the cooldown.
//! - A **failure domain** (a zone; each Kosmos leaf node is its own) where more than a share of the
//!   nodes is unhealthy at once is an **outage**: nothing in it is cordoned or drained while it lasts.
//! - A node whose watched conditions changed state too often within a window is **flapping**.
//! - An annotation on the drainer's Lease **pauses** it; **drain windows** say when drains may start.
//!
//! "Unhealthy" is time-free: a selected node with a watched condition in its problem status now
//! (min durations aside, Kosmos-exempt conditions excluded), so a partition trips the breaker before
//! any node has held its condition long enough to be cordoned.

use std::collections::{BTreeMap, VecDeque};
use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::jiff::Timestamp;

use crate::config::safety::Safety;
use crate::config::window::DrainWindow;
use crate::config::{Budget, Config};
use crate::model::node::NodeView;

/// The annotation on the drainer's Lease that pauses it (`kubectl annotate lease ... KEY=reason`).
pub const PAUSE_ANNOTATION: &str = "nodemedic.io/pause";
/// The annotation where the leader keeps the breaker's state across restarts and leader changes.
pub const BREAKER_ANNOTATION: &str = "nodemedic.io/breaker";

fn ts(t: Timestamp) -> String {
    nodemedic_common::time::rfc3339(t)
}

fn budget_text(b: &Budget) -> String {
    match b {
        Budget::Count(n) => n.to_string(),
        Budget::Percent(p) => format!("{p}%"),
    }
}

// ---------------------------------------------------------------------------------------------
// Unhealthy nodes and their domains.

/// When the node became unhealthy: the earliest transition among its watched conditions now in
/// their problem status (Kosmos-exempt ones aside); `None` when it is not.
pub fn unhealthy_since(node: &NodeView, cfg: &Config) -> Option<Timestamp> {
    let kosmos = node.label(&cfg.kosmos_label.0) == Some(cfg.kosmos_label.1.as_str());
    cfg.conditions
        .iter()
        .filter(|spec| !(kosmos && (spec.type_ == "Ready" || !cfg.kosmos_other_conditions)))
        .filter_map(|spec| {
            node.conditions
                .iter()
                .find(|c| *c.type_ == *spec.type_ && c.status == spec.status)
                .map(|c| c.since)
        })
        .min()
}

/// The node's failure domain: a Kosmos leaf node's is its member cluster (`kosmos/<cluster>`, the
/// value of the cluster label, else the leaf node's own name), others the value of the domain label;
/// `None` without one.
pub fn domain_of(node: &NodeView, cfg: &Config) -> Option<String> {
    if node.label(&cfg.kosmos_label.0) == Some(cfg.kosmos_label.1.as_str()) {
        let label = &cfg.safety.kosmos_cluster_label;
        let cluster = (!label.is_empty())
            .then(|| node.label(label))
            .flatten()
            .filter(|c| !c.is_empty())
            .unwrap_or(&node.name);
        return Some(format!("kosmos/{cluster}"));
    }
    node.label(&cfg.safety.failure_domain)
        .filter(|v| !v.is_empty())
        .map(String::from)
}

/// Counts of one domain's selected nodes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DomainTotals {
    pub size: usize,
    pub unhealthy: usize,
    pub cordoned: usize,
}

/// An outage: more than the configured share of a large enough domain unhealthy.
#[derive(Debug, Clone, PartialEq)]
pub struct Outage {
    pub domain: String,
    pub unhealthy: usize,
    pub size: usize,
    pub percent: f64,
}

impl std::fmt::Display for Outage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "outage in {}: {} of {} nodes unhealthy > {}%",
            self.domain, self.unhealthy, self.size, self.percent
        )
    }
}

/// Whether `domain` with totals `t` is an outage now.
pub fn outage(domain: &str, t: &DomainTotals, s: &Safety) -> Option<Outage> {
    let over = t.size >= s.domain_outage_min_nodes
        && (t.unhealthy as f64) * 100.0 > s.domain_outage_percent * t.size as f64;
    over.then(|| Outage {
        domain: domain.to_string(),
        unhealthy: t.unhealthy,
        size: t.size,
        percent: s.domain_outage_percent,
    })
}

// ---------------------------------------------------------------------------------------------
// The circuit breaker.

/// What the breaker reads.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Health {
    pub selected: usize,
    pub unhealthy: usize,
    /// Unhealthy nodes that became so within the breaker window.
    pub newly: usize,
}

/// Why the breaker is open, with the numbers (its `Display` is what the plan and the log say).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Trip {
    Unhealthy {
        count: usize,
        of: usize,
        limit: String,
    },
    Newly {
        count: usize,
        of: usize,
        limit: String,
        window: Duration,
    },
}

impl std::fmt::Display for Trip {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Trip::Unhealthy { count, of, limit } => {
                write!(f, "{count} of {of} nodes unhealthy > {limit}")
            }
            Trip::Newly {
                count,
                of,
                limit,
                window,
            } => write!(
                f,
                "{count} of {of} nodes became unhealthy within {} > {limit}",
                humantime::format_duration(*window)
            ),
        }
    }
}

/// The thresholds test alone (what a plan over a snapshot can say).
pub fn trip(h: &Health, s: &Safety) -> Option<Trip> {
    if h.selected == 0 {
        return None;
    }
    if h.unhealthy > s.max_unhealthy.limit(h.selected) {
        return Some(Trip::Unhealthy {
            count: h.unhealthy,
            of: h.selected,
            limit: budget_text(&s.max_unhealthy),
        });
    }
    if h.newly > s.breaker_new.limit(h.selected) {
        return Some(Trip::Newly {
            count: h.newly,
            of: h.selected,
            limit: budget_text(&s.breaker_new),
            window: s.breaker_window,
        });
    }
    None
}

/// The breaker's state, as kept on the Lease (`BREAKER_ANNOTATION`) so that a restart or a new
/// leader neither forgets an open breaker nor cuts its cooldown short.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Breaker {
    /// Open since (None: closed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub open_since: Option<Timestamp>,
    /// Why it opened (the text of the trip).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub reason: String,
    /// While open: since when the counts have been at or under the thresholds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub calm_since: Option<Timestamp>,
}

/// A change of the breaker's state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BreakerChange {
    Opened(Trip),
    Closed { open_for: Duration },
}

impl Breaker {
    pub fn is_open(&self) -> bool {
        self.open_since.is_some()
    }

    /// Take the counts at `now`; returns a change when the state changed.
    pub fn observe(&mut self, h: &Health, s: &Safety, now: Timestamp) -> Option<BreakerChange> {
        match (trip(h, s), self.open_since) {
            (Some(t), None) => {
                *self = Breaker {
                    open_since: Some(now),
                    reason: t.to_string(),
                    calm_since: None,
                };
                Some(BreakerChange::Opened(t))
            }
            (Some(t), Some(_)) => {
                self.reason = t.to_string();
                self.calm_since = None;
                None
            }
            (None, None) => None,
            (None, Some(since)) => {
                let calm = *self.calm_since.get_or_insert(now);
                if nodemedic_common::time::add(calm, s.breaker_cooldown) <= now {
                    *self = Breaker::default();
                    Some(BreakerChange::Closed {
                        open_for: super::elapsed(since, now),
                    })
                } else {
                    None
                }
            }
        }
    }

    /// When the clock alone may close it.
    pub fn wake(&self, s: &Safety) -> Option<Timestamp> {
        self.calm_since
            .filter(|_| self.is_open())
            .map(|c| nodemedic_common::time::add(c, s.breaker_cooldown))
    }

    /// What holds decisions while it is open: the reason, and when it is calm, when it may close.
    pub fn hold(&self, s: &Safety) -> Option<String> {
        self.open_since?;
        Some(match self.wake(s) {
            Some(at) => format!(
                "{}; counts back under the thresholds, closing at {}",
                self.reason,
                ts(at)
            ),
            None => self.reason.clone(),
        })
    }

    /// Read back from the Lease annotation (anything unreadable is a closed breaker, logged by the
    /// caller).
    pub fn from_annotation(raw: &str) -> Result<Breaker, String> {
        serde_json::from_str(raw).map_err(|e| e.to_string())
    }

    pub fn to_annotation(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }
}

// ---------------------------------------------------------------------------------------------
// Flapping.

/// The state changes of a node's watched conditions seen lately.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Flaps {
    changes: VecDeque<Timestamp>,
}

/// A node flapping now: how many changes within the window, and when it counts as stable.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Flapping {
    pub changes: usize,
    pub stable_at: Timestamp,
}

impl Flaps {
    /// A change at `at`; changes older than the window are dropped.
    pub fn record(&mut self, at: Timestamp, s: &Safety) {
        let pos = self
            .changes
            .iter()
            .rposition(|t| *t <= at)
            .map_or(0, |p| p + 1);
        self.changes.insert(pos, at);
        let keep_after = nodemedic_common::time::sub(at, s.flap_window);
        while self.changes.front().is_some_and(|t| *t < keep_after) {
            self.changes.pop_front();
        }
        // Bounded: more than twice the threshold tells nothing more.
        while self.changes.len() > 2 * s.flap_threshold.max(1) {
            self.changes.pop_front();
        }
    }

    /// Flapping at `now`: at least the threshold of changes within the window. It stays so until
    /// the window has passed since the last change (stable for the window).
    pub fn flapping(&self, now: Timestamp, s: &Safety) -> Option<Flapping> {
        if s.flap_threshold == 0 {
            return None;
        }
        let last = *self.changes.back()?;
        let stable_at = nodemedic_common::time::add(last, s.flap_window);
        if stable_at <= now {
            return None;
        }
        // The changes within one window of each other, up to the last one.
        let from = nodemedic_common::time::sub(last, s.flap_window);
        let changes = self.changes.iter().filter(|t| **t >= from).count();
        (changes >= s.flap_threshold).then_some(Flapping { changes, stable_at })
    }

    pub fn is_empty(&self) -> bool {
        self.changes.is_empty()
    }
}

/// The watched conditions whose status differs between two views of a node, with the time of the
/// change (the new transition time).
pub fn changes(old: &NodeView, new: &NodeView, cfg: &Config) -> Vec<Timestamp> {
    let status = |v: &NodeView, t: &str| {
        v.conditions
            .iter()
            .find(|c| *c.type_ == *t)
            .map(|c| (c.status.clone(), c.since))
    };
    let mut seen = Vec::new();
    let mut out = Vec::new();
    for spec in &cfg.conditions {
        if seen.contains(&spec.type_.as_str()) {
            continue;
        }
        seen.push(spec.type_.as_str());
        match (status(old, &spec.type_), status(new, &spec.type_)) {
            (Some((a, _)), Some((b, since))) if a != b => out.push(since),
            _ => {}
        }
    }
    out
}

// ---------------------------------------------------------------------------------------------
// Pause.

/// A pause requested on the drainer's Lease.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pause {
    /// Who set it, as the API says: the field manager of the annotation (e.g. `kubectl-annotate`).
    pub by: String,
    pub since: Option<Timestamp>,
    /// The annotation's value.
    pub reason: String,
}

impl std::fmt::Display for Pause {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "paused by {}",
            if self.by.is_empty() {
                "someone"
            } else {
                &self.by
            }
        )?;
        if let Some(t) = self.since {
            write!(f, " since {}", ts(t))?;
        }
        if !self.reason.is_empty() {
            write!(f, ": {}", self.reason)?;
        }
        write!(
            f,
            " (remove the {PAUSE_ANNOTATION} annotation of the drainer's Lease to resume)"
        )
    }
}

/// The pause on `lease`, if its annotation is set. Who and since when come from the managed field
/// entry that owns the annotation.
pub fn pause_of(lease: &Lease) -> Option<Pause> {
    let reason = lease
        .metadata
        .annotations
        .as_ref()?
        .get(PAUSE_ANNOTATION)?
        .clone();
    let field = format!("f:{PAUSE_ANNOTATION}");
    let entry = lease
        .metadata
        .managed_fields
        .iter()
        .flatten()
        .filter(|m| {
            m.fields_v1.as_ref().is_some_and(|f| {
                f.0.get("f:metadata")
                    .and_then(|m| m.get("f:annotations"))
                    .is_some_and(|a| a.get(&field).is_some())
            })
        })
        .max_by_key(|m| m.time.as_ref().map(|t| t.0));
    Some(Pause {
        by: entry.and_then(|m| m.manager.clone()).unwrap_or_default(),
        since: entry.and_then(|m| m.time.as_ref().map(|t| t.0)),
        reason,
    })
}

/// What a snapshot of the objects cannot show but the cluster recorded: a pause on the drainer's
/// Lease, and nodes the drainer reported flapping (its NodeFlapping Events).
#[derive(Debug, Clone, Default)]
pub struct Recorded {
    pub paused: Option<Pause>,
    pub flapping: std::collections::HashMap<String, Flapping>,
}

/// Nodes flapping at `now` by the drainer's NodeFlapping Events: an episode reported within the
/// flap window lasts at least until a window after its report (its last change may be later;
/// the controller, which saw every change, knows better).
pub fn flapping_from_events(
    events: &[k8s_openapi::api::core::v1::Event],
    s: &Safety,
    now: Timestamp,
) -> std::collections::HashMap<String, Flapping> {
    let mut out = std::collections::HashMap::new();
    for e in events {
        let ours = e.source.as_ref().and_then(|s| s.component.as_deref())
            == Some(crate::model::occurrence::SOURCE);
        if !ours || e.reason.as_deref() != Some(crate::model::occurrence::reason::NODE_FLAPPING) {
            continue;
        }
        let (Some(node), Some(at)) = (
            e.involved_object.name.clone(),
            e.last_timestamp.as_ref().map(|t| t.0),
        ) else {
            continue;
        };
        let stable_at = nodemedic_common::time::add(at, s.flap_window);
        if stable_at <= now {
            continue;
        }
        let changes = e
            .message
            .as_deref()
            .and_then(|m| m.split("changed ").nth(1))
            .and_then(|m| m.split(' ').next())
            .and_then(|n| n.parse().ok())
            .unwrap_or(s.flap_threshold);
        let f = Flapping { changes, stable_at };
        out.entry(node)
            .and_modify(|old: &mut Flapping| {
                if f.stable_at > old.stable_at {
                    *old = f;
                }
            })
            .or_insert(f);
    }
    out
}

// ---------------------------------------------------------------------------------------------
// Drain windows.

/// Drains may start now (no windows, or inside one); otherwise when the next window opens.
pub fn next_window(windows: &[DrainWindow], now: Timestamp) -> Result<(), Option<Timestamp>> {
    if windows.is_empty() || windows.iter().any(|w| w.contains(now)) {
        return Ok(());
    }
    Err(windows.iter().filter_map(|w| w.next_start(now)).min())
}

// ---------------------------------------------------------------------------------------------
// What a round's decisions read, besides each node.

/// The fleet-wide holds a decision reads.
#[derive(Debug, Clone)]
pub struct Gates {
    pub paused: Option<Pause>,
    /// The breaker's hold text while it is open.
    pub breaker: Option<String>,
    /// Domains in an outage now.
    pub outages: BTreeMap<String, Outage>,
    /// Per-domain totals (for the per-domain cordon budget).
    pub domains: BTreeMap<String, DomainTotals>,
    /// `Err(next)` outside the drain windows.
    pub window: Result<(), Option<Timestamp>>,
}

impl Default for Gates {
    fn default() -> Self {
        Gates {
            paused: None,
            breaker: None,
            outages: BTreeMap::new(),
            domains: BTreeMap::new(),
            window: Ok(()),
        }
    }
}

/// The gates a snapshot shows on its own (`drainer plan`): the breaker by its thresholds alone (no
/// cooldown known), the outages, the windows, and a pause if one was read.
pub fn gates_of_snapshot(
    views: &[(&NodeView, bool)],
    cfg: &Config,
    paused: Option<Pause>,
    now: Timestamp,
) -> Gates {
    let s = &cfg.safety;
    let mut health = Health::default();
    let mut domains: BTreeMap<String, DomainTotals> = BTreeMap::new();
    let window_start = nodemedic_common::time::sub(now, s.breaker_window);
    for (v, selected) in views {
        if !*selected {
            continue;
        }
        let since = unhealthy_since(v, cfg);
        health.selected += 1;
        health.unhealthy += since.is_some() as usize;
        health.newly += since.is_some_and(|t| t >= window_start) as usize;
        if let Some(d) = domain_of(v, cfg) {
            let t = domains.entry(d).or_default();
            t.size += 1;
            t.unhealthy += since.is_some() as usize;
            t.cordoned += crate::model::record::Record::of(v)
                .is_some_and(|r| r.owned_by(&cfg.owner, true) && r.holds_cordon())
                as usize;
        }
    }
    Gates {
        paused,
        breaker: trip(&health, s).map(|t| t.to_string()),
        outages: domains
            .iter()
            .filter_map(|(d, t)| outage(d, t, s).map(|o| (d.clone(), o)))
            .collect(),
        domains,
        window: next_window(&s.drain_windows, now),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(s: &str) -> Timestamp {
        s.parse().unwrap()
    }

    fn safety() -> Safety {
        Safety::default()
    }

    #[test]
    fn the_breaker_opens_over_either_threshold_and_closes_after_a_calm_cooldown() {
        let s = safety();
        let mut b = Breaker::default();
        let now = t("2026-11-24T10:00:00Z");
        // 30% of 120 is 36: 36 unhealthy holds, 37 trips.
        let h = |unhealthy, newly| Health {
            selected: 120,
            unhealthy,
            newly,
        };
        assert_eq!(b.observe(&h(36, 0), &s, now), None);
        let opened = b.observe(&h(41, 0), &s, now).unwrap();
        assert_eq!(
            opened,
            BreakerChange::Opened(Trip::Unhealthy {
                count: 41,
                of: 120,
                limit: "30%".into()
            })
        );
        assert_eq!(b.hold(&s).unwrap(), "41 of 120 nodes unhealthy > 30%");
        // Calm for less than the cooldown: still open; a relapse restarts the cooldown.
        let later = |secs: u64| nodemedic_common::time::add(now, Duration::from_secs(secs));
        assert_eq!(b.observe(&h(10, 0), &s, later(60)), None);
        assert!(
            b.hold(&s)
                .unwrap()
                .contains("closing at 2026-11-24T10:11:00Z")
        );
        assert_eq!(b.observe(&h(40, 0), &s, later(120)), None);
        assert_eq!(b.calm_since, None);
        assert_eq!(b.observe(&h(10, 0), &s, later(180)), None);
        assert_eq!(b.wake(&s), Some(later(780)));
        assert_eq!(b.observe(&h(10, 0), &s, later(779)), None);
        assert_eq!(
            b.observe(&h(10, 0), &s, later(780)),
            Some(BreakerChange::Closed {
                open_for: Duration::from_secs(780)
            })
        );
        assert!(!b.is_open());
        // Many new at once trips it too (20% of 120 = 24).
        let opened = b.observe(&h(30, 25), &s, later(800)).unwrap();
        assert_eq!(
            opened.clone(),
            BreakerChange::Opened(Trip::Newly {
                count: 25,
                of: 120,
                limit: "20%".into(),
                window: Duration::from_secs(300)
            })
        );
        // It survives a restart through its annotation.
        let back = Breaker::from_annotation(&b.to_annotation()).unwrap();
        assert_eq!(back, b);
        assert!(Breaker::from_annotation("{nope").is_err());
    }

    #[test]
    fn an_outage_needs_a_large_enough_domain_and_more_than_the_share() {
        let s = safety();
        let d = |size, unhealthy| DomainTotals {
            size,
            unhealthy,
            cordoned: 0,
        };
        assert!(
            outage("z", &d(10, 5), &s).is_none(),
            "50% is not more than 50%"
        );
        let o = outage("z", &d(10, 6), &s).unwrap();
        assert_eq!(o.to_string(), "outage in z: 6 of 10 nodes unhealthy > 50%");
        assert!(
            outage("z", &d(2, 2), &s).is_none(),
            "2 nodes are not a partition"
        );
        assert!(outage("z", &d(3, 2), &s).is_some());
    }

    #[test]
    fn flapping_needs_the_threshold_within_the_window_and_ends_after_a_stable_window() {
        let s = safety(); // 4 changes in 10m
        let mut f = Flaps::default();
        let base = t("2026-11-24T10:00:00Z");
        let at = |secs: u64| nodemedic_common::time::add(base, Duration::from_secs(secs));
        for secs in [0, 30, 60] {
            f.record(at(secs), &s);
        }
        assert_eq!(f.flapping(at(61), &s), None, "3 changes");
        f.record(at(90), &s);
        assert_eq!(
            f.flapping(at(91), &s),
            Some(Flapping {
                changes: 4,
                stable_at: at(690)
            })
        );
        assert!(f.flapping(at(689), &s).is_some());
        assert_eq!(f.flapping(at(690), &s), None, "stable for the window");
        // Changes spread wider than the window are not a flap.
        let mut g = Flaps::default();
        for secs in [0, 400, 800, 1200] {
            g.record(at(secs), &s);
        }
        assert_eq!(g.flapping(at(1201), &s), None);
        // Bounded memory.
        for secs in 0..100 {
            g.record(at(2000 + secs), &s);
        }
        assert!(g.changes.len() <= 8);
    }

    #[test]
    fn drain_windows_parse_and_say_when_they_open() {
        let w: DrainWindow = "Mon-Fri 09:00-17:00 Europe/Berlin".parse().unwrap();
        // 2026-11-24 is a Tuesday; Berlin is UTC+1 in November.
        assert!(w.contains(t("2026-11-24T08:00:00Z")), "09:00 Berlin");
        assert!(!w.contains(t("2026-11-24T07:59:59Z")));
        assert!(
            !w.contains(t("2026-11-24T16:00:00Z")),
            "17:00 Berlin is the end"
        );
        assert_eq!(
            w.next_start(t("2026-11-24T16:30:00Z")),
            Some(t("2026-11-25T08:00:00Z"))
        );
        // Friday evening: next is Monday.
        assert_eq!(
            w.next_start(t("2026-11-27T17:00:00Z")),
            Some(t("2026-11-30T08:00:00Z"))
        );
        // Past midnight, UTC by default, lists of days.
        let night: DrainWindow = "Sat,Sun 22:00-02:00".parse().unwrap();
        assert!(
            night.contains(t("2026-11-29T01:00:00Z")),
            "Sunday 01:00 is Saturday's window"
        );
        assert!(night.contains(t("2026-11-29T23:00:00Z")));
        assert!(!night.contains(t("2026-11-30T03:00:00Z")));
        assert!(
            "* 00:00-24:00"
                .parse::<DrainWindow>()
                .unwrap()
                .contains(t("2026-11-24T12:00:00Z"))
        );
        assert_eq!(
            next_window(&[w.clone(), night.clone()], t("2026-11-28T12:00:00Z")),
            Err(Some(t("2026-11-28T22:00:00Z")))
        );
        assert_eq!(next_window(&[], t("2026-11-28T12:00:00Z")), Ok(()));
        for bad in [
            "Mon-Fri",
            "Mon-Fry 09:00-17:00",
            "Mon 9-17",
            "Mon 25:00-26:00",
            "Mon 09:00-09:00",
            "Mon 09:00-17:00 Mars/Olympus",
        ] {
            let e = bad.parse::<DrainWindow>().unwrap_err();
            assert_eq!(e.window, bad);
            assert!(
                e.to_string()
                    .starts_with(&format!("drain window {bad:?}: ")),
                "{e}"
            );
        }
    }

    #[test]
    fn the_pause_says_who_and_since_when_from_managed_fields() {
        let lease: Lease = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "nodemedic-drainer", "annotations": {PAUSE_ANNOTATION: "kernel rollout"},
              "managedFields": [
                {"manager": "nodemedic-drainer", "operation": "Update", "time": "2026-11-24T09:00:00Z",
                 "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {"f:holderIdentity": {}}}},
                {"manager": "kubectl-annotate", "operation": "Update", "time": "2026-11-24T09:30:00Z",
                 "fieldsType": "FieldsV1", "fieldsV1": {"f:metadata": {"f:annotations": {".": {}, "f:nodemedic.io/pause": {}}}}}
              ]}
        }))
        .unwrap();
        let p = pause_of(&lease).unwrap();
        assert_eq!(
            p.to_string(),
            "paused by kubectl-annotate since 2026-11-24T09:30:00Z: kernel rollout (remove the nodemedic.io/pause annotation of the drainer's Lease to resume)"
        );
        let mut unpaused = lease.clone();
        unpaused.metadata.annotations = None;
        assert_eq!(pause_of(&unpaused), None);
    }
}
