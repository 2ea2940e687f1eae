//! Slow start per failure domain (pure): the remediation ladder's steps past the drain (reboots,
//! replacements) start one at a time in each domain; the number allowed at once doubles each time
//! a remediated node of the domain has stayed healthy for the dwell time after its proof, at most
//! once a cooldown and only while a step waits for the width (a domain widens when it needs to,
//! not past what it ever used), and falls back to one when a step fails or the problem returns. The limit a
//! step meets is the smallest of its domain's width, the budgets and the breaker: a ramp instead of
//! the breaker's cliff. The state is kept with the record memory in its ConfigMaps
//! (`decide::fleet::seen`), so a restart or a new leader keeps each domain's earned width.

use k8s_openapi::jiff::Timestamp;
use nodemedic_common::time::add;
use std::collections::BTreeMap;

use crate::config::ladder::Pacing as Settings;

/// The key of nodes without a failure domain: they are paced together.
pub(crate) const NO_DOMAIN: &str = "";

/// One domain's pace.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Pace {
    /// Steps allowed at once.
    pub(crate) width: u32,
    /// When it last widened (or fell back to one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) changed_at: Option<Timestamp>,
    /// Remediated nodes in their dwell: node -> proven at.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub(crate) dwelling: BTreeMap<String, Timestamp>,
    /// Nodes whose dwell passed while the cooldown held the widening back.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub(crate) earned: u32,
    /// A step waited for the width since it last changed: widening would be used.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub(crate) wanted: bool,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

impl Default for Pace {
    fn default() -> Pace {
        Pace {
            width: 1,
            changed_at: None,
            dwelling: BTreeMap::new(),
            earned: 0,
            wanted: false,
        }
    }
}

/// A domain's width changed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Change {
    Widened {
        domain: String,
        width: u32,
    },
    Narrowed {
        domain: String,
        from: u32,
        why: String,
    },
}

/// Every domain's pace (domains at width one with nothing dwelling are not kept).
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub(crate) struct SlowStart {
    #[serde(flatten)]
    pub(crate) domains: BTreeMap<String, Pace>,
}

impl SlowStart {
    /// Steps allowed at once in `domain`.
    #[cfg(test)]
    pub(crate) fn width(&self, domain: &str) -> u32 {
        self.domains.get(domain).map_or(1, |p| p.width)
    }

    /// A step on `node` in `domain` was proven at `at`: its dwell starts.
    pub(crate) fn proven(&mut self, domain: &str, node: &str, at: Timestamp) {
        let pace = self.domains.entry(domain.to_string()).or_default();
        pace.dwelling.insert(node.to_string(), at);
    }

    /// A step in `domain` waits for its width.
    pub(crate) fn wanted(&mut self, domain: &str) -> bool {
        let pace = self.domains.entry(domain.to_string()).or_default();
        !std::mem::replace(&mut pace.wanted, true)
    }

    /// A step on `node` in `domain` failed, or its problem came back (`why`): the domain falls
    /// back to one, and what it had earned is forgotten.
    pub(crate) fn failed(
        &mut self,
        domain: &str,
        node: &str,
        why: &str,
        at: Timestamp,
    ) -> Option<Change> {
        let pace = self.domains.entry(domain.to_string()).or_default();
        let from = pace.width;
        pace.dwelling.clear();
        pace.earned = 0;
        pace.wanted = false;
        pace.width = 1;
        pace.changed_at = Some(at);
        self.forget_idle();
        (from > 1).then(|| Change::Narrowed {
            domain: domain.to_string(),
            from,
            why: format!("{node}: {why}"),
        })
    }

    /// The dwells that passed by `now` count, and each domain widens (doubles) once its cooldown
    /// allows and it has earned it.
    pub(crate) fn tick(&mut self, now: Timestamp, s: &Settings) -> Vec<Change> {
        let mut changes = Vec::new();
        for (domain, pace) in &mut self.domains {
            let passed: Vec<String> = pace
                .dwelling
                .iter()
                .filter(|(_, at)| add(**at, s.dwell) <= now)
                .map(|(n, _)| n.clone())
                .collect();
            for n in passed {
                pace.dwelling.remove(&n);
                pace.earned += 1;
            }
            let cooled = pace.changed_at.is_none_or(|t| add(t, s.cooldown) <= now);
            if pace.earned > 0 && cooled && pace.wanted {
                pace.earned = 0;
                pace.wanted = false;
                pace.width = pace.width.saturating_mul(2);
                pace.changed_at = Some(now);
                changes.push(Change::Widened {
                    domain: domain.clone(),
                    width: pace.width,
                });
            }
        }
        changes
    }

    /// When `tick` may next change something (a dwell's end, or a cooldown's for what was earned).
    pub(crate) fn wake(&self, s: &Settings) -> Option<Timestamp> {
        self.domains
            .values()
            .flat_map(|p| {
                let dwell = p.dwelling.values().map(|at| add(*at, s.dwell)).min();
                let cooldown = (p.earned > 0 && p.wanted)
                    .then(|| p.changed_at.map(|t| add(t, s.cooldown)))
                    .flatten();
                [dwell, cooldown]
            })
            .flatten()
            .min()
    }

    /// A node that stopped dwelling (deleted) is forgotten.
    pub(crate) fn forget_node(&mut self, node: &str) {
        for p in self.domains.values_mut() {
            p.dwelling.remove(node);
        }
    }

    fn forget_idle(&mut self) {
        self.domains
            .retain(|_, p| p.width > 1 || !p.dwelling.is_empty() || p.earned > 0 || p.wanted);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(s: i64) -> Timestamp {
        Timestamp::from_second(1_800_000_000 + s).unwrap()
    }

    #[test]
    fn a_domain_widens_one_two_four_as_each_wave_stays_healthy_and_falls_back_on_a_failure() {
        let s = Settings::default();
        let mut p = SlowStart::default();
        assert_eq!(p.width("a"), 1);
        p.proven("idle", "x", t(0));
        assert!(
            p.tick(t(300), &s).is_empty(),
            "nothing waits for the width: no need to widen"
        );
        assert_eq!(p.width("idle"), 1);
        p.domains.remove("idle");
        p.proven("a", "n1", t(0));
        assert!(p.wanted("a"));
        assert!(!p.wanted("a"), "said once");
        assert!(p.tick(t(299), &s).is_empty(), "still dwelling");
        assert_eq!(p.wake(&s), Some(t(300)));
        assert_eq!(
            p.tick(t(300), &s),
            [Change::Widened {
                domain: "a".into(),
                width: 2
            }]
        );
        // Two proven in the next wave: one widening, and the second waits for the cooldown.
        p.proven("a", "n2", t(310));
        p.proven("a", "n3", t(320));
        p.wanted("a");
        assert_eq!(p.wake(&s), Some(t(610)));
        assert_eq!(p.tick(t(610), &s).len(), 1);
        assert_eq!(p.width("a"), 4);
        p.wanted("a");
        assert!(
            p.tick(t(620), &s).is_empty(),
            "earned, but the cooldown since 610 holds it"
        );
        assert_eq!(p.wake(&s), Some(t(910)));
        assert_eq!(p.tick(t(910), &s).len(), 1);
        assert_eq!(p.width("a"), 8);
        assert_eq!(p.width("b"), 1, "each domain earns its own");
        // Round trip through the Lease annotation.
        let back: SlowStart = serde_json::from_str(&serde_json::to_string(&p).unwrap()).unwrap();
        assert_eq!(back, p);
        // A failure: back to one, and what dwelt is forgotten.
        p.proven("a", "n4", t(700));
        let c = p.failed("a", "n5", "no new bootID by the reboot deadline", t(710));
        assert_eq!(
            c,
            Some(Change::Narrowed {
                domain: "a".into(),
                from: 8,
                why: "n5: no new bootID by the reboot deadline".into()
            })
        );
        assert_eq!(p.width("a"), 1);
        assert!(p.tick(t(2000), &s).is_empty(), "n4's dwell was forgotten");
        assert_eq!(p.failed("a", "n6", "again", t(2001)), None, "already one");
        assert!(p.domains.is_empty(), "nothing kept for a domain at one");
    }
}
