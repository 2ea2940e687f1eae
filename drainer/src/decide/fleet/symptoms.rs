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
            self.queue.dirty.insert(n);
        }
        for (n, c) in now {
            if self.safety.symptoms.get(&n) != Some(&c) {
                self.safety.symptoms.insert(n.clone(), c);
                self.queue.dirty.insert(n);
            }
        }
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
        let found: Found = [(
            "real".into(),
            vec![Symptom {
                condition: PODS_NOT_STARTING,
                reason: "PodsNotStarting",
                message: "m".into(),
            }],
        )]
        .into_iter()
        .collect();
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
}
