//! The symptoms the drainer found itself (pure): PodsNotStarting and PodsNotTerminating count as a
//! problem only on a node where its own last look at the pods found them. Its token may write
//! those two conditions on any Node (the node policy cannot tell its writes from a forger's), so
//! a condition alone, written by anyone, never starts a drain (issue 76, principle 1). And it is
//! held from when the drainer first found it, not from the condition's transition time, which
//! the token may back-date (an attacker's review).

use k8s_openapi::jiff::Timestamp;

use super::Fleet;
use crate::decide::symptoms::Found;

impl Fleet {
    /// What the last symptom pass found (`found`, every node's); the nodes whose symptoms changed
    /// are decided again.
    pub(crate) fn symptoms_found(&mut self, found: &Found, at: Timestamp) {
        let now: Vec<(crate::model::intern::ArcStr, Vec<(&'static str, Timestamp)>)> = found
            .iter()
            .filter_map(|(n, s)| {
                let (name, _) = self.nodes.get_key_value(n)?;
                let mut c: Vec<&'static str> = s.iter().map(|s| s.condition).collect();
                c.sort_unstable();
                c.dedup();
                // Each since the pass that first found it.
                let before = self.safety.symptoms.get(n);
                let since = |c: &str| {
                    (before.into_iter().flatten())
                        .find(|(b, _)| *b == c)
                        .map_or(at, |(_, t)| *t)
                };
                Some((name.clone(), c.into_iter().map(|c| (c, since(c))).collect()))
            })
            .collect();
        let gone: Vec<_> = (self.safety.symptoms.keys())
            .filter(|n| !found.contains_key(*n))
            .cloned()
            .collect();
        for n in gone {
            self.safety.symptoms.remove(&n);
            self.recount(&n);
            self.queue.dirty.insert(n);
        }
        for (n, c) in now {
            if self.safety.symptoms.get(&n) != Some(&c) {
                self.safety.symptoms.insert(n.clone(), c);
                self.recount(&n);
                self.queue.dirty.insert(n);
            }
        }
    }

    /// The symptoms the last pass found on `node` (none: an empty list, not "unknown").
    pub(super) fn found(&self, node: &str) -> &[(&'static str, Timestamp)] {
        self.safety.symptoms.get(node).map_or(&[][..], |s| &s[..])
    }

    /// `node`'s problem as the running totals count it (unhealthy since, the problem a request
    /// names), again after its found symptoms changed.
    fn recount(&mut self, node: &str) {
        let found = self.safety.symptoms.get(node).map_or(&[][..], |s| &s[..]);
        let Some(e) = self.nodes.get_mut(node) else {
            return;
        };
        let unhealthy =
            crate::decide::gates::outage::unhealthy_since(&e.view, &self.cfg, Some(found));
        let problem = crate::decide::gates::outage::problem_named(&e.view, &self.cfg, Some(found));
        if (unhealthy, &problem) == (e.unhealthy, &e.problem) {
            return;
        }
        self.running.count(e, &self.cfg.owner, false);
        (e.unhealthy, e.problem) = (unhealthy, problem);
        self.running.count(e, &self.cfg.owner, true);
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use nodemedic_common::status::Status;

    use super::*;
    use crate::config::{Budget, Config};
    use crate::decide::Effect;
    use crate::decide::symptoms::{PODS_NOT_STARTING, Symptom};
    use crate::model::node::{Condition, NodeView};

    fn t(s: i64) -> Timestamp {
        Timestamp::from_second(1_800_000_000 + s).unwrap()
    }

    /// A node carrying PodsNotStarting=True since `t(0)` (back-dated, as a forger writes it).
    fn stuck(name: &str) -> Arc<NodeView> {
        Arc::new(NodeView {
            name: name.into(),
            resource_version: "1".into(),
            conditions: Box::new([Condition {
                type_: PODS_NOT_STARTING.into(),
                status: Status::True,
                reason: Some("PodsNotStarting".into()),
                since: t(0),
                heartbeat: 0,
            }]),
            ..Default::default()
        })
    }

    /// What a pass that found `node`'s pods not starting hands the fleet.
    fn stuck_found(node: &str) -> Found {
        let s = Symptom {
            condition: PODS_NOT_STARTING,
            reason: "PodsNotStarting",
            message: "m".into(),
        };
        [(node.into(), vec![s])].into_iter().collect()
    }

    fn cordoned(f: &mut Fleet, now: Timestamp) -> Vec<String> {
        (f.round(now).into_iter())
            .filter(|(d, _)| matches!(d.effect, Effect::Cordon(_)))
            .map(|(d, _)| d.node.to_string())
            .collect()
    }

    #[test]
    fn a_symptom_condition_counts_only_where_the_drainers_own_pass_found_it() {
        let cfg = Arc::new(Config {
            safety: crate::config::safety::Safety::off(),
            conditions: vec!["PodsNotStarting=True,10m".parse().unwrap()],
            max_cordoned: Budget::Count(5),
            drain_buffer: Duration::from_secs(60),
            ..Default::default()
        });
        let mut f = Fleet::new(cfg);
        let now = t(3600);
        f.observe(stuck("forged"), now);
        f.observe(stuck("real"), now);
        // Written by anyone, found by no pass: not a problem (a preview takes it as written).
        assert_eq!(cordoned(&mut f, now), Vec::<String>::new());
        // The pass finds the real one's pods stuck: that node, and only it, is decided again.
        let found = stuck_found("real");
        f.symptoms_found(&found, now);
        assert_eq!(f.pending(), 1);
        // Held from when the pass first found it, not from the condition's back-dated time.
        assert_eq!(cordoned(&mut f, now), Vec::<String>::new());
        let later = t(3600 + 600);
        f.symptoms_found(&found, later);
        assert_eq!(f.pending(), 0, "the same symptom since the same pass");
        assert_eq!(cordoned(&mut f, later), vec!["real".to_string()]);
        let now = later;
        // A pass that finds nothing any more decides it again; nothing else changes.
        f.symptoms_found(&Found::new(), now);
        assert_eq!(f.pending(), 1);
        f.round(now);
        f.symptoms_found(&Found::new(), now);
        assert_eq!(f.pending(), 0, "an unchanged pass queues nothing");
    }

    /// What the fleet counts and asks for follows the same rule (an attacker's review): a forged
    /// symptom condition neither makes a node unhealthy in the totals (the breaker, outages) nor
    /// keeps a reboot request standing, nor is named in one; found by a pass, it is.
    #[test]
    fn a_forged_symptom_keeps_no_request_standing_and_counts_no_node_unhealthy() {
        use crate::model::record::{Phase, Record};
        let cfg = Arc::new(Config {
            safety: crate::config::safety::Safety::off(),
            conditions: vec!["PodsNotStarting=True,10m: drain, reboot".parse().unwrap()],
            ..Default::default()
        });
        let mut f = Fleet::new(cfg.clone());
        let now = t(3600);
        let mut v = (*stuck("n")).clone();
        let r = Record {
            owner: cfg.owner.clone(),
            phase: Phase::Rebooting,
            step: Some(crate::model::ladder::Step::Reboot),
            step_at: Some(t(100)),
            step_until: Some(t(100_000)),
            boot_id: "0f6a1d43-8e0b-4c7e-9b5e-1c2d3e4f5a6b".into(),
            ..Default::default()
        }
        .bound(&v, None, t(100));
        v.resource_version = "2".into();
        v.annotations = v.annotations.with(
            nodemedic_common::keys::DRAIN_RECORD_ANNOTATION,
            Some(&r.to_annotation(&cfg.records)),
        );
        f.observe(Arc::new(v), now);
        assert_eq!(f.running.unhealthy, 0, "a forged symptom is no problem");
        assert!(f.running.reboots.is_empty(), "{:?}", f.running.reboots);
        let found = stuck_found("n");
        f.symptoms_found(&found, now);
        assert_eq!(f.running.unhealthy, 1);
        assert_eq!(f.running.reboots["n"].because, ["PodsNotStarting=True"]);
        // Not found any more: the request goes with it.
        f.symptoms_found(&Found::new(), t(3700));
        assert_eq!(f.running.unhealthy, 0);
        assert!(f.running.reboots.is_empty());
    }
}
