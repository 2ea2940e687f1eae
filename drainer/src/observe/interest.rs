//! What of a node the controller's decisions read, pure: a change of nothing else (a condition
//! no rule names, a label neither the selector's answer nor a configured key depends on) is
//! taken at the next round instead of waking the controller ([`Observed::apply_view`]).
//!
//! A change held back this way is never lost: the node is marked changed and decided at the next
//! round (a tick, 5 s, at most; sooner when anything else wakes the controller), from the view
//! the cache holds then. What it saves is the wake-up and the round for a change that could not
//! have changed a decision: a kubelet's MemoryPressure reason, a label the selector reads whose
//! new value it selects as the old one.
//!
//! [`Observed::apply_view`]: super::Observed::apply_view

use std::sync::Arc;

use crate::config::Config;
use crate::model::node::{NodeView, Watched};

/// What decisions read of a node's view (set by the controller from its configuration; until it
/// does, everything).
#[derive(Clone, Default)]
pub(crate) struct Interest {
    conditions: Watched,
    /// `None`: every label is read.
    labels: Option<Labels>,
}

/// The labels decisions read: those the configuration names, and the selector's answer.
#[derive(Clone)]
struct Labels {
    /// Keys whose value some decision reads directly (Kosmos, exclusion, failure domains).
    named: Vec<String>,
    /// The configuration whose selector is asked, when a label it reads changed, whether its
    /// answer did.
    cfg: Arc<Config>,
}

impl Interest {
    /// What decisions read under `cfg`: the rules' conditions, Ready (readiness, a reboot's proof,
    /// the outage gate), the conditions the drainer writes itself (DrainScheduled, the symptoms',
    /// DetectorSilent), every condition when the selector reads them; the labels `cfg` names and
    /// the selector's answer.
    ///
    /// Left out on purpose, as they wait a tick without harm: the labels of the detector
    /// DaemonSet's placement (a node is declared silent after minutes, checked every second at
    /// most) and those the common-cause report compares (words in an Event, no decision).
    pub(crate) fn of(cfg: &Arc<Config>) -> Interest {
        let s = &cfg.safety;
        let mut named: Vec<String> = [
            &cfg.kosmos_label.0,
            &cfg.exclude_label.0,
            &s.failure_domain,
            &s.kosmos_cluster_label,
        ]
        .into_iter()
        .filter(|k| !k.is_empty())
        .cloned()
        .collect();
        named.sort();
        named.dedup();
        Interest {
            conditions: watched(cfg),
            labels: Some(Labels {
                named,
                cfg: cfg.clone(),
            }),
        }
    }

    /// Does going from `old` to `new` change anything a decision reads? Annotations, taints,
    /// cordoning, identity and software always count; conditions and labels as above.
    pub(crate) fn news(&self, old: &NodeView, new: &NodeView) -> bool {
        !(old.same_but_labels_and_conditions(new)
            && old.same_watched_conditions(new, &self.conditions)
            && self.same_read_labels(old, new))
    }

    /// The selector's answer for `old` kept with `new` when nothing it reads changed
    /// ([`crate::config::select::Selector::carry`]): a heartbeat's view inherits it, so the next
    /// label change is evaluated once, on its new view (the old one's answer at hand, and the
    /// fleet taking the new one's).
    pub(crate) fn carry(&self, old: &NodeView, new: &NodeView) {
        if let Some(l) = &self.labels {
            l.cfg.selector.carry(old, new);
        }
    }

    fn same_read_labels(&self, old: &NodeView, new: &NodeView) -> bool {
        if old.labels == new.labels {
            return true;
        }
        let Some(l) = &self.labels else {
            return false;
        };
        if l.named.iter().any(|k| old.label(k) != new.label(k)) {
            return false;
        }
        let selector = &l.cfg.selector;
        if selector.reads().same(old, new) {
            return true;
        }
        // The old view's answer is kept with it (carried from the view the fleet or the watch
        // evaluated last); the new one's is kept for the fleet. An evaluation error is news (the
        // fleet says it).
        match (selector.matches(old), selector.matches(new)) {
            (Ok(a), Ok(b)) => a == b,
            _ => false,
        }
    }
}

/// The condition types decisions read under `cfg` ([`Interest::of`]).
fn watched(cfg: &Config) -> Watched {
    if cfg.selector.reads().conditions {
        return Watched::All;
    }
    let ours = [
        "Ready",
        nodemedic_common::keys::DRAIN_SCHEDULED_CONDITION,
        crate::decide::symptoms::PODS_NOT_STARTING,
        crate::decide::symptoms::PODS_NOT_TERMINATING,
        crate::decide::silence::DETECTOR_SILENT,
    ];
    let mut types: Vec<String> = (cfg.conditions.iter())
        .map(|c| c.type_.to_string())
        .chain(ours.map(String::from))
        .collect();
    types.sort();
    types.dedup();
    Watched::Types(types)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::select::Selector;
    use serde_json::json;

    const SELECTOR: &str =
        "metadata.labels['draino'] == 'node' && metadata.labels['flip'] != 'off'";

    fn node(labels: serde_json::Value, memory: &str) -> NodeView {
        NodeView::of(
            &serde_json::from_value(json!({
                "metadata": {"name": "n1", "uid": "u1", "resourceVersion": "1", "labels": labels},
                "status": {"conditions": [
                    {"type": "Ready", "status": "True", "lastTransitionTime": "2026-11-28T09:00:00Z"},
                    {"type": "MemoryPressure", "status": "False", "reason": memory,
                     "lastTransitionTime": "2026-11-28T09:00:00Z"}]}
            }))
            .unwrap(),
        )
    }

    fn interest(selector: Selector) -> Interest {
        Interest::of(&Arc::new(Config {
            selector,
            ..Config::default()
        }))
    }

    fn labels(flip: &str, extra: &[(&str, &str)]) -> serde_json::Value {
        let mut l = json!({"draino": "node", "flip": flip,
            "topology.kubernetes.io/zone": "z1"});
        for (k, v) in extra {
            l[*k] = json!(v);
        }
        l
    }

    #[test]
    fn until_the_controller_says_every_change_is_news() {
        let i = Interest::default();
        let a = node(labels("a", &[]), "M");
        assert!(i.news(&a, &node(labels("b", &[]), "M")));
        assert!(i.news(&a, &node(labels("a", &[]), "Other")));
        assert!(!i.news(&a, &a.clone()));
    }

    #[test]
    fn a_label_change_that_leaves_the_selection_and_every_named_key_is_no_news() {
        let i = interest(Selector::cel(SELECTOR).unwrap());
        let a = node(labels("a", &[]), "M");
        // A label the selector reads, its answer the same; a label nothing reads; both with an
        // unwatched condition's change.
        for b in [
            node(labels("b", &[]), "M"),
            node(labels("a", &[("team", "x")]), "M"),
            node(labels("b", &[("team", "x")]), "Other"),
        ] {
            assert!(!i.news(&a, &b), "{:?}", b.labels);
        }
        // The selection changes: news (leaving, and a key it needs gone).
        assert!(i.news(&a, &node(labels("off", &[]), "M")));
        assert!(i.news(&a, &node(json!({"flip": "a"}), "M")));
        assert!(
            i.news(&node(labels("off", &[]), "M"), &a),
            "and coming back"
        );
        // Keys decisions read directly: the failure domain, exclusion, a Kosmos leaf.
        for (k, v) in [
            ("topology.kubernetes.io/zone", "z2"),
            (nodemedic_common::keys::EXCLUDE_LABEL, "true"),
            ("kosmos.io/node", "true"),
        ] {
            let mut l = labels("a", &[]);
            l[k] = json!(v);
            assert!(i.news(&a, &node(l, "M")), "{k}");
        }
        // A watched condition's change still is, whatever comes with it.
        let mut not_ready = node(labels("b", &[]), "Other");
        let mut conditions = not_ready.conditions.to_vec();
        conditions[0].status = crate::model::node::Status::False;
        not_ready.conditions = conditions.into();
        assert!(i.news(&a, &not_ready));
        // An annotation always is.
        let mut annotated = a.clone();
        annotated.annotations = annotated.annotations.with("anything", Some("1"));
        assert!(i.news(&a, &annotated));
    }

    #[test]
    fn without_a_selector_only_the_named_keys_count_and_a_label_selector_is_asked() {
        let a = node(labels("a", &[]), "M");
        let all = interest(Selector::All);
        assert!(!all.news(&a, &node(labels("off", &[]), "M")));
        assert!(all.news(
            &a,
            &node(labels("a", &[("topology.kubernetes.io/zone", "z9")]), "M")
        ));
        let by_label = interest(Selector::labels("flip!=off").unwrap());
        assert!(!by_label.news(&a, &node(labels("b", &[]), "M")));
        assert!(by_label.news(&a, &node(labels("off", &[]), "M")));
    }

    #[test]
    fn a_selector_that_reads_conditions_makes_every_condition_news() {
        let i = interest(
            Selector::cel("metadata.labels['draino'] == 'node' && status.conditions.size() > 0")
                .unwrap(),
        );
        let a = node(labels("a", &[]), "M");
        assert!(i.news(&a, &node(labels("a", &[]), "Other")));
        assert!(
            !i.news(&a, &node(labels("b", &[]), "M")),
            "flip is not read"
        );
    }
}
