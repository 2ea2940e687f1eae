//! The fleet's per-node entries, the writes laid over views until the watch shows them, and the
//! running totals the budgets and safety gates read, kept as nodes come and go. Pure data.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::jiff::Timestamp;
use nodemedic_common::keys::DRAIN_RECORD_ANNOTATION;

use crate::decide::Totals;
use crate::decide::gates::breaker;
use crate::decide::gates::outage::DomainTotals;
use crate::model::intern::ArcStr;
use crate::model::node::{NodeTaint, NodeView};
use crate::model::record::{Phase, Record};
use nodemedic_common::reboot::RebootRequest;

/// A node as the fleet holds it.
pub(super) struct Entry {
    pub(super) view: Arc<NodeView>,
    pub(super) selected: bool,
    /// The record on the node, whichever drainer owns it (boxed: most nodes have none).
    pub(super) record: Option<Box<Record>>,
    pub(super) wake: Option<Timestamp>,
    /// Its failure domain.
    pub(super) domain: Option<ArcStr>,
    /// Unhealthy since (a watched condition in its problem status now).
    pub(super) unhealthy: Option<Timestamp>,
    /// Those conditions, `Type=Status` (empty when healthy): what its reboot request is for.
    pub(super) problem: Box<[String]>,
    /// Its last decision left nothing to do until its view changes (healthy, not selected,
    /// excluded, exempt, another drainer's): the periodic resync need not decide it again.
    pub(super) at_rest: bool,
    /// Its last decision without its facts (the controller logs a decision when this changes).
    pub(super) last: Option<std::mem::Discriminant<crate::decide::Why>>,
    /// Its pods as the pod index last handed them over (shared with it; None: none yet).
    pub(super) pods: Option<Arc<Vec<Arc<crate::model::pod::PodInfo>>>>,
}

/// A write of ours not yet seen by the watch.
pub(super) struct Overlay {
    pub(super) after: Option<String>,
    /// When the record written was decided (a later one of ours on the node supersedes it).
    pub(super) at: Option<Timestamp>,
    pub(super) unschedulable: Option<bool>,
    /// Our taints the write took off, and those it put on.
    pub(super) untaint: Vec<NodeTaint>,
    pub(super) taint: Vec<NodeTaint>,
    pub(super) until: Timestamp,
}

impl Overlay {
    /// The write from the hold `from` records to the one `to` records (None: no record), until
    /// `until`: the record, and the cordon and taints as they change.
    pub(super) fn of(
        from: Option<&Record>,
        to: Option<&Record>,
        until: Timestamp,
        trust: &crate::model::seal::RecordTrust,
    ) -> Overlay {
        let cordoned = |r: Option<&Record>| r.is_some_and(|r| r.cordoned);
        let taints = |r: Option<&Record>| r.map(Record::held_taints).unwrap_or_default();
        let (was, will) = (taints(from), taints(to));
        Overlay {
            after: to.map(|r| r.to_annotation(trust)),
            at: to.map(|r| r.at),
            unschedulable: (cordoned(from) != cordoned(to)).then_some(cordoned(to)),
            untaint: was.iter().filter(|t| !will.contains(t)).cloned().collect(),
            taint: will.iter().filter(|t| !was.contains(t)).cloned().collect(),
            until,
        }
    }

    pub(super) fn lay(&self, view: &NodeView) -> NodeView {
        let mut v = view.clone();
        v.annotations = v
            .annotations
            .with(DRAIN_RECORD_ANNOTATION, self.after.as_deref());
        if let Some(u) = self.unschedulable {
            v.unschedulable = u;
        }
        if !self.untaint.is_empty() || !self.taint.is_empty() {
            let mut taints: Vec<NodeTaint> = v
                .taints
                .iter()
                .filter(|t| {
                    !self
                        .untaint
                        .iter()
                        .any(|u| u.key == t.key && u.effect == t.effect)
                })
                .cloned()
                .collect();
            taints.extend(
                self.taint
                    .iter()
                    .filter(|t| !taints.contains(t))
                    .cloned()
                    .collect::<Vec<_>>(),
            );
            v.taints = taints.into_boxed_slice();
        }
        v
    }
}

/// Totals over owned records, kept up to date as entries come and go.
#[derive(Default)]
pub(super) struct Running {
    pub(super) selected: usize,
    pub(super) cordoned: usize,
    pub(super) draining: usize,
    pub(super) drain_starts: BTreeMap<Timestamp, usize>,
    /// Selected nodes unhealthy now.
    pub(super) unhealthy: usize,
    /// ... by when they became unhealthy (the breaker's "newly" count).
    pub(super) unhealthy_since: BTreeMap<Timestamp, usize>,
    /// Selected nodes by failure domain.
    pub(super) domains: HashMap<ArcStr, DomainTotals>,
    /// The reboot requests our records stand for (phase `rebooting`, not vetoed), by node: what
    /// the requests ConfigMap must hold.
    pub(super) reboots: BTreeMap<ArcStr, RebootRequest>,
    /// `reboots` changed since it was last taken.
    pub(super) reboots_changed: bool,
    /// Nodes whose ladder ended with a person.
    pub(super) needs_person: usize,
    /// Ladder steps under way (restarts, reboots, replacements) by failure domain ("" for none):
    /// the nodes, by when their step started (the slow start's order of places).
    pub(super) remediating: HashMap<ArcStr, std::collections::BTreeSet<(Timestamp, ArcStr)>>,
    /// The nodes whose request is withheld now (`decide::gates::resume`): left out of the requests.
    pub(super) withheld: std::collections::BTreeSet<ArcStr>,
    /// What the selected nodes run and where (the common-cause watch compares a group with them).
    pub(super) attributes: crate::decide::common_cause::AttributeCounts,
    /// Selected nodes carrying a symptom condition we set ([`crate::decide::symptoms::marked`]):
    /// with the nodes a symptom is found on, the only ones the symptoms' writes can concern.
    pub(super) symptomatic: std::collections::HashSet<ArcStr>,
}

/// The reboot request a record of ours stands for, if it does: only while what the drainer observes
/// now warrants it (issue 76, principle 1). A record is stored state: it may keep a request standing
/// for a node the policy selects whose problem condition is set now, never make one for a node that
/// has no problem or that the policy does not select (a record sealed with a stolen key once
/// rebooted such a node).
fn reboot_request(e: &Entry, r: &Record) -> Option<RebootRequest> {
    if !e.selected || e.unhealthy.is_none() {
        return None;
    }
    let view = &*e.view;
    // A power-cycle comes from outside: the node's detector is asked nothing.
    let action = r
        .step
        .unwrap_or(crate::model::ladder::Step::Reboot)
        .asks()?;
    if !matches!(r.phase, Phase::Rebooting | Phase::Restarting)
        || view
            .annotations
            .get(nodemedic_common::keys::DO_NOT_REMEDIATE_ANNOTATION)
            .is_some()
    {
        return None;
    }
    let time = |t: Option<Timestamp>| t.map(nodemedic_common::time::rfc3339).unwrap_or_default();
    Some(RebootRequest {
        action,
        node: view.name.to_string(),
        uid: view.uid.to_string(),
        boot_id: r.boot_id.clone(),
        requested: time(r.step_at),
        until: time(r.step_until),
        because: e.problem.to_vec(),
        signature: String::new(),
    })
}

fn multiset(m: &mut BTreeMap<Timestamp, usize>, t: Timestamp, add: bool) {
    if add {
        *m.entry(t).or_default() += 1;
    } else if let Some(n) = m.get_mut(&t) {
        *n -= 1;
        if *n == 0 {
            m.remove(&t);
        }
    }
}

impl Running {
    pub(super) fn count(&mut self, e: &Entry, owner: &str, add: bool) {
        self.count_parts(e, owner, add, true);
    }

    /// `old` (if the node was held) counted out and `new` in. What the common-cause watch
    /// compares is left as counted when both are selected and agree on it: most changes (a
    /// condition, an annotation) leave a node's software and labels as they were, and that count
    /// is the costliest part (a map lookup per label the node has).
    pub(super) fn replace(&mut self, old: Option<&Entry>, new: &Entry, owner: &str) {
        let attributes = !old.is_some_and(|o| {
            o.selected
                && new.selected
                && crate::decide::common_cause::same_attributes(&o.view, &new.view)
        });
        if let Some(o) = old {
            self.count_parts(o, owner, false, attributes);
        }
        self.count_parts(new, owner, true, attributes);
    }

    fn count_parts(&mut self, e: &Entry, owner: &str, add: bool, attributes: bool) {
        let step = |n: &mut usize, yes: bool| {
            if yes {
                *n = if add { *n + 1 } else { n.saturating_sub(1) };
            }
        };
        step(&mut self.selected, e.selected);
        let owned = e.record.as_ref().filter(|r| r.owned_by(owner, e.selected));
        if e.selected {
            if attributes {
                self.attributes.count(&e.view, add);
            }
            if crate::decide::symptoms::marked(&e.view) {
                if add {
                    self.symptomatic.insert(e.view.name.clone());
                } else {
                    self.symptomatic.remove(&e.view.name);
                }
            }
            step(&mut self.unhealthy, e.unhealthy.is_some());
            if let Some(t) = e.unhealthy {
                multiset(&mut self.unhealthy_since, t, add);
            }
            if let Some(d) = &e.domain {
                let t = self.domains.entry(d.clone()).or_default();
                step(&mut t.size, true);
                step(&mut t.unhealthy, e.unhealthy.is_some());
                step(&mut t.cordoned, owned.is_some_and(|r| r.holds_cordon()));
                if t.size == 0 {
                    self.domains.remove(d);
                }
            }
        }
        let Some(r) = owned else {
            return;
        };
        step(&mut self.cordoned, r.holds_cordon());
        step(&mut self.draining, r.phase == Phase::Draining);
        step(&mut self.needs_person, r.phase == Phase::NeedsPerson);
        if matches!(
            r.phase,
            Phase::Restarting | Phase::Rebooting | Phase::Replacing
        ) {
            let key = e.domain.clone().unwrap_or_default();
            let set = self.remediating.entry(key.clone()).or_default();
            let place = (r.step_at.unwrap_or(r.at), e.view.name.clone());
            if add {
                set.insert(place);
            } else {
                set.remove(&place);
            }
            if set.is_empty() {
                self.remediating.remove(&key);
            }
        }
        if let Some(request) = reboot_request(e, r) {
            self.reboots_changed = true;
            if add {
                self.reboots.insert(e.view.name.clone(), request);
            } else {
                self.reboots.remove(&e.view.name);
            }
        }
        if let Some(t) = r.drain_started {
            multiset(&mut self.drain_starts, t, add);
        }
    }

    /// The breaker's counts at `now`.
    pub(super) fn health(&self, window: Duration, now: Timestamp) -> breaker::Health {
        let from = nodemedic_common::time::sub(now, window);
        breaker::Health {
            selected: self.selected,
            unhealthy: self.unhealthy,
            newly: self.unhealthy_since.range(from..).map(|(_, n)| n).sum(),
        }
    }

    pub(super) fn totals(&self) -> Totals {
        Totals {
            selected: self.selected,
            cordoned: self.cordoned,
            draining: self.draining,
            last_drain_start: self.drain_starts.keys().next_back().copied(),
        }
    }
}
