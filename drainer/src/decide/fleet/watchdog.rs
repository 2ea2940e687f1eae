//! The fleet's detector watchdog, pure: which selected nodes' detectors are silent now, and what
//! changed since the last check (one [`FleetEvent`] when a node falls silent and one when its
//! detector is heard again: one Event per node per episode). Checked against the watch cache's
//! latest views, which the controller hands over (a heartbeat alone is no news to the fleet, so its
//! own views may be older), for the nodes the fleet selects.

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
        let changed = self.safety.placement != placement;
        self.safety.placement = placement;
        changed
    }

    pub(crate) fn placement(&self) -> &Placement {
        &self.safety.placement
    }

    /// The node's detector is silent (as of the last check).
    pub fn silence(&self, name: &str) -> Option<&Silence> {
        self.safety.silent.get(name)
    }

    /// The nodes the fleet selects (whose detectors the watchdog checks).
    pub(crate) fn selected_names(&self) -> impl Iterator<Item = &ArcStr> {
        self.nodes
            .iter()
            .filter(|(_, e)| e.selected)
            .map(|(n, _)| n)
    }

    /// Selected nodes whose detector is silent (as of the last check).
    pub(crate) fn silent_count(&self) -> usize {
        self.safety.silent.len()
    }

    /// Check every selected node's detector at `now` against `latest`, the cache's views of the
    /// nodes the fleet selects ([`Fleet::selected_names`]; others given are ignored, and a selected
    /// node not given is not checked: the cache lost it, and the fleet forgets it at the next
    /// catch-up): report the nodes that fell silent and those heard again, and decide them again
    /// when `DetectorSilent` is a problem condition.
    pub(crate) fn watch_detectors(&mut self, latest: &[Arc<NodeView>], now: Timestamp) {
        let as_problem = self
            .cfg
            .conditions
            .iter()
            .any(|c| c.type_ == DETECTOR_SILENT);
        let placement = &self.safety.placement;
        let mut found: Vec<(ArcStr, Silence)> = latest
            .iter()
            .filter_map(|v| Some((self.nodes.get_key_value(&v.name)?, v)))
            .filter(|((_, e), _)| e.selected)
            .filter_map(|((n, _), v)| {
                silence::silence(v, &self.cfg, placement, now).map(|s| (n.clone(), s))
            })
            .collect();
        found.sort_by(|a, b| a.0.cmp(&b.0));
        // Searched, not scanned: with the detector DaemonSet down fleet-wide both lists hold
        // every selected node, and a scan per silent node is quadratic (50,000 x 50,000).
        let mut heard: Vec<(ArcStr, Silence)> = self
            .safety
            .silent
            .iter()
            .filter(|(n, _)| found.binary_search_by(|(f, _)| f.cmp(n)).is_err())
            .map(|(n, s)| (n.clone(), *s))
            .collect();
        heard.sort_by(|a, b| a.0.cmp(&b.0));
        for (node, was) in heard {
            self.safety.silent.remove(&node);
            self.events.push(FleetEvent::DetectorHeard {
                node: node.to_string(),
                silent_for: silent_for(was, now),
            });
            if as_problem {
                self.queue.dirty.insert(node);
            }
        }
        for (node, s) in found {
            match self.safety.silent.insert(node.clone(), s) {
                // Still silent: the same episode (a refreshed heartbeat would have ended it).
                Some(old) if old.last_heard == s.last_heard => continue,
                _ => {}
            }
            self.events.push(FleetEvent::DetectorSilent {
                node: node.to_string(),
                silence: s,
            });
            if as_problem {
                self.queue.dirty.insert(node);
            }
        }
    }
}

/// How long a detector was silent, from when it was deemed so to `now`.
fn silent_for(s: Silence, now: Timestamp) -> Duration {
    silence::ago(s.declared, now)
}
