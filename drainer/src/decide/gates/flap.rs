//! Flap damping, pure: a node whose watched conditions changed state too often within a window is
//! **flapping**, and is neither cordoned nor drained until it has been stable for the window.
//!
//! Settings: `config::safety` (`flap_threshold`, `flap_window`). State: each node's recent changes
//! ([`Flaps`]), kept by the fleet. Persists nothing but its NodeFlapping Events, from which `drainer
//! plan` reads it back (`snapshot`).

use std::collections::VecDeque;

use k8s_openapi::jiff::Timestamp;

use super::gate::Gate;
use crate::config::Config;
use crate::config::safety::Safety;
use crate::decide::candidate::Candidate;
use crate::decide::decision::Why;
use crate::decide::facts::Flapping;
use crate::model::node::NodeView;

/// The state changes of a node's watched conditions seen lately.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Flaps {
    changes: VecDeque<Timestamp>,
}

impl Flaps {
    /// A change at `at`; changes older than the window are dropped.
    pub(crate) fn record(&mut self, at: Timestamp, s: &Safety) {
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
    pub(crate) fn flapping(&self, now: Timestamp, s: &Safety) -> Option<Flapping> {
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
}

/// The watched conditions whose status differs between two views of a node, with the time of the
/// change (the new transition time).
pub(crate) fn changes(old: &NodeView, new: &NodeView, cfg: &Config) -> Vec<Timestamp> {
    let status = |v: &NodeView, t: &str| {
        v.conditions
            .iter()
            .find(|c| *c.type_ == *t)
            .map(|c| (c.status, c.since))
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

/// Flap damping as a round reads it: each candidate says whether it is flapping.
#[derive(Debug, Clone)]
pub(crate) struct FlapGate {
    pub(crate) window: std::time::Duration,
}

impl Gate for FlapGate {
    fn hold(&self, c: &Candidate) -> Option<Why> {
        let f = c.flapping?;
        Some(Why::Flapping {
            changes: f.changes,
            window: self.window,
            stable_at: f.stable_at,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn t(s: &str) -> Timestamp {
        s.parse().unwrap()
    }

    fn safety() -> Safety {
        Safety::default()
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
}
