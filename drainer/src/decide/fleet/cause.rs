//! The fleet's common-cause watch, pure: the gains of watched conditions it saw (kept for
//! `--correlate-window`), and once per group the report of what the nodes of a group share (a
//! [`FleetEvent::CommonCause`]); the latest report is named by the breaker's and outages' reasons
//! while its group lasts.

use k8s_openapi::jiff::Timestamp;

use super::{Fleet, FleetEvent};
use crate::decide::common_cause;
use crate::model::node::NodeView;

impl Fleet {
    /// Bring the common-cause watch up to date at `now` (each round, before the gates).
    pub(super) fn correlate(&mut self, now: Timestamp) {
        let s = &self.cfg.safety;
        if s.correlate_min == 0 {
            self.safety.gains.clear();
            return;
        }
        let since = nodemedic_common::time::sub(now, s.correlate_window);
        self.safety.gains.retain(|g| g.at >= since);
        let nodes = &self.nodes;
        let cfg = &self.cfg;
        // Selected nodes, and not a Kosmos leaf node's exempt conditions (their flaps are expected).
        let counts = |g: &&common_cause::Gain| {
            nodes.get(&g.node).is_some_and(|e| {
                let (k, v) = &cfg.kosmos_label;
                let kosmos = e.view.label(k) == Some(v.as_str());
                e.selected && !(kosmos && (*g.type_ == *"Ready" || !cfg.kosmos_other_conditions))
            })
        };
        let selected: Vec<common_cause::Gain> =
            self.safety.gains.iter().filter(counts).cloned().collect();
        let groups = common_cause::groups(&selected, s.correlate_min, s.correlate_window, now);
        self.safety.causes.retain(|k, _| groups.contains_key(k));
        if self.safety.causes.is_empty() {
            self.safety.cause = None;
        }
        for (key, group) in groups {
            let size = self.safety.causes.get(&key).copied();
            if size == Some(group.len()) {
                continue;
            }
            let ins: Vec<&NodeView> = (group.iter())
                .filter_map(|g| self.nodes.get(&g.node))
                .filter(|e| e.selected)
                .map(|e| &*e.view)
                .collect();
            let found = common_cause::cause(&group, &ins, &self.running.attributes);
            // Reported once per group; as it grows, what the holds name is brought up to date.
            self.safety.cause = Some(found.to_string());
            if size.is_none() {
                self.events.push(FleetEvent::CommonCause(found));
            }
            self.safety.causes.insert(key, group.len());
        }
    }
}
