//! Failure domains and their outages, pure: a domain (a zone; each Kosmos leaf node's member
//! cluster) where more than a share of the selected nodes is unhealthy at once is an **outage**:
//! nothing in it is cordoned or drained while it lasts. "Unhealthy" is time-free: a watched condition
//! in its problem status now (min durations aside, Kosmos-exempt conditions excluded), so a partition
//! is caught before any node has held its condition long enough to be cordoned.
//!
//! Settings: `config::safety` (`failure_domain`, `domain_outage_*`). State: the per-domain counts the
//! fleet keeps as running totals. Persists nothing: an outage is worked out again from the nodes.

use k8s_openapi::jiff::Timestamp;

use super::gate::Gate;
use crate::config::Config;
use crate::config::safety::Safety;
use crate::decide::candidate::Candidate;
use crate::decide::decision::Why;
use crate::decide::facts::Outage;
use crate::model::node::NodeView;
use std::collections::BTreeMap;

/// When the node became unhealthy: the earliest transition among its watched conditions now in
/// their problem status (Kosmos-exempt ones aside); `None` when it is not.
pub(crate) fn unhealthy_since(
    node: &NodeView,
    cfg: &Config,
    symptoms: Option<Symptoms>,
) -> Option<Timestamp> {
    problem_conditions(node, cfg, symptoms)
        .map(|(_, since)| since)
        .min()
}

/// The drainer's own symptom conditions found on a node, each with when it first was (`None`: not
/// known, a preview of one snapshot, which takes them as written).
pub(crate) type Symptoms<'a> = &'a [(&'static str, Timestamp)];

/// The node's conditions in a configured problem status now (a Kosmos leaf node's exempt ones
/// aside), each with the time it counts from. A PodsNotStarting or PodsNotTerminating condition
/// counts only where the drainer's own pass found it, from when it did (`symptoms`): its token may
/// write one on any Node, and a forged one once kept a reboot request standing, and named in it,
/// for a node the drainer itself called healthy (an attacker's review, issue 76).
fn problem_conditions<'a>(
    node: &'a NodeView,
    cfg: &'a Config,
    symptoms: Option<Symptoms<'a>>,
) -> impl Iterator<Item = (&'a crate::model::node::Condition, Timestamp)> + 'a {
    let kosmos = node.label(&cfg.kosmos_label.0) == Some(cfg.kosmos_label.1.as_str());
    cfg.conditions
        .iter()
        .filter(move |spec| !(kosmos && (spec.type_ == "Ready" || !cfg.kosmos_other_conditions)))
        .filter_map(|spec| node.conditions.iter().find(|c| spec.matches(c)))
        .filter_map(move |c| {
            let ours = crate::model::symptom::CONDITIONS
                .iter()
                .any(|(t, ..)| *t == &*c.type_);
            match symptoms.filter(|_| ours) {
                None => Some((c, c.since)),
                Some(found) => (found.iter())
                    .find(|(t, _)| *t == &*c.type_)
                    .map(|(_, at)| (c, c.since.max(*at))),
            }
        })
}

/// The problem a remediation of the node is for, as its detector reads the Node's conditions
/// (`KernelDeadlock=True`, each once): a reboot request names it, and the detector carries the
/// request out only while the Node carries one of them.
pub(crate) fn problem_named(
    node: &NodeView,
    cfg: &Config,
    symptoms: Option<Symptoms>,
) -> Box<[String]> {
    let mut named: Vec<String> = problem_conditions(node, cfg, symptoms)
        .map(|(c, _)| format!("{}={}", c.type_, c.status))
        .collect();
    named.dedup();
    named.into_boxed_slice()
}

/// The node's failure domain: a Kosmos leaf node's is its member cluster (`kosmos/<cluster>`, the
/// value of the cluster label, else the leaf node's own name), others the value of the domain label;
/// `None` without one.
pub(crate) fn domain_of(node: &NodeView, cfg: &Config) -> Option<String> {
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
pub(crate) struct DomainTotals {
    pub(crate) size: usize,
    pub(crate) unhealthy: usize,
    pub(crate) cordoned: usize,
}

/// Whether `domain` with totals `t` is an outage now.
pub(crate) fn outage(domain: &str, t: &DomainTotals, s: &Safety) -> Option<Outage> {
    let over = t.size >= s.domain_outage_min_nodes
        && (t.unhealthy as f64) * 100.0 > s.domain_outage_percent * t.size as f64;
    over.then(|| Outage {
        domain: domain.to_string(),
        unhealthy: t.unhealthy,
        size: t.size,
        percent: s.domain_outage_percent,
        cause: None,
    })
}

/// The outages of a round: nodes in these domains are held.
#[derive(Debug, Clone, Default)]
pub(crate) struct OutageGate {
    pub(crate) outages: BTreeMap<String, Outage>,
}

impl Gate for OutageGate {
    fn hold(&self, c: &Candidate) -> Option<Why> {
        let outage = c.domain.and_then(|d| self.outages.get(d))?;
        Some(Why::DomainOutage {
            outage: outage.clone(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn safety() -> Safety {
        Safety::default()
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
}
