//! The fleet's detector watchdog, pure: which selected nodes' detectors are silent now, and what
//! changed since the last check (one [`FleetEvent`] when a node falls silent and one when its
//! detector is heard again: one Event per node per episode). Checked against the watch cache's
//! latest views (a heartbeat alone is no news to the fleet, so its own views may be older), for
//! the nodes the fleet selects.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::jiff::Timestamp;

use super::{Fleet, FleetEvent};
use crate::decide::silence::{self, DETECTOR_SILENT, Placement, Silence};
use crate::model::intern::ArcStr;
use crate::model::node::NodeView;

impl Fleet {
    /// Where the detector DaemonSet places its pods (as last read); true when it changed.
    pub(crate) fn set_placement(&mut self, placement: Placement) -> bool {
        let changed = self.placement != placement;
        self.placement = placement;
        changed
    }

    pub(crate) fn placement(&self) -> &Placement {
        &self.placement
    }

    /// The node's detector is silent (as of the last check).
    pub fn silence(&self, name: &str) -> Option<&Silence> {
        self.silent.get(name)
    }

    /// Selected nodes whose detector is silent (as of the last check).
    pub(crate) fn silent_count(&self) -> usize {
        self.silent.len()
    }

    /// Check every selected node's detector at `now`: report the nodes that fell silent and those
    /// heard again, and decide them again when `DetectorSilent` is a problem condition.
    pub(crate) fn watch_detectors(
        &mut self,
        latest: impl Fn(&str) -> Option<Arc<NodeView>>,
        now: Timestamp,
    ) {
        let as_problem = self
            .cfg
            .conditions
            .iter()
            .any(|c| c.type_ == DETECTOR_SILENT);
        let mut found: Vec<(ArcStr, Silence)> = self
            .nodes
            .iter()
            .filter(|(_, e)| e.selected)
            .filter_map(|(n, e)| {
                let view = latest(n).unwrap_or_else(|| e.view.clone());
                silence::silence(&view, &self.cfg, &self.placement, now).map(|s| (n.clone(), s))
            })
            .collect();
        found.sort_by(|a, b| a.0.cmp(&b.0));
        let mut heard: Vec<(ArcStr, Silence)> = self
            .silent
            .iter()
            .filter(|(n, _)| !found.iter().any(|(f, _)| f == *n))
            .map(|(n, s)| (n.clone(), *s))
            .collect();
        heard.sort_by(|a, b| a.0.cmp(&b.0));
        for (node, was) in heard {
            self.silent.remove(&node);
            self.events.push(FleetEvent::DetectorHeard {
                node: node.to_string(),
                silent_for: silent_for(was, now),
            });
            if as_problem {
                self.dirty.insert(node);
            }
        }
        for (node, s) in found {
            match self.silent.insert(node.clone(), s) {
                // Still silent: the same episode (a refreshed heartbeat would have ended it).
                Some(old) if old.last_heard == s.last_heard => continue,
                _ => {}
            }
            self.events.push(FleetEvent::DetectorSilent {
                node: node.to_string(),
                silence: s,
            });
            if as_problem {
                self.dirty.insert(node);
            }
        }
    }
}

/// How long a detector was silent, from when it was deemed so to `now`.
fn silent_for(s: Silence, now: Timestamp) -> Duration {
    silence::ago(s.declared, now)
}
