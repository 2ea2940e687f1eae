//! The controller's incremental state, pure: every node's view, whether the selector selects it,
//! its record, its pods, and running totals of the budgets, updated as nodes change. A round decides only
//! the nodes that changed, whose time came ([`NodeDecision::wake`](crate::decide::NodeDecision::wake)) or that wait for a budget, with
//! [`decide_some`](crate::decide::decide_some) — the same code `drainer plan` runs over all nodes — so work per event follows
//! what changed, not the size of the cluster.
//!
//! Writes the controller made are laid over the views ([`Fleet::wrote`]) until the watch shows
//! them, so a round between a write and its watch event neither repeats the write nor counts a
//! budget without it.
//!
//! The fleet also keeps what safety needs over time (`safety`): unhealthy counts (overall, by
//! failure domain, and by when they started) as running totals, the breaker's state, the outages,
//! and each node's recent condition changes. A round reports what changed among them as
//! [`FleetEvent`]s; nodes a gate holds are decided again when the gates change, not every round.
//!
//! ```text
//!  totals    the per-node entries, the overlays, the running totals
//!  queue     which nodes the next rounds decide: changed, woken by the clock, waiting, held
//!  safety    the fleet-wide safety states kept over time (breaker, outages, flaps, silences, causes)
//!  seen      our records as the watch showed them (kept on the Lease), and the ones refused
//!  due       a round: the due nodes, the gates, the decisions and what they mean for the next
//!  watchdog  which selected nodes' detectors are silent, checked at each resync
//!  cause     groups of nodes gaining one condition together, and what they share
//! ```

mod cause;
mod domains;
mod due;
mod follow;
mod inputs;
mod pace;
mod queue;
mod safety;
pub mod seen;
mod symptoms;
mod totals;
mod watchdog;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::jiff::Timestamp;
use nodemedic_common::keys::DRAIN_RECORD_ANNOTATION;

use crate::config::Config;
use crate::decide::facts::{Outage, Pause, Trip};
use crate::decide::gates::breaker::Breaker;
use crate::decide::gates::flap;
use crate::decide::gates::outage;
use crate::decide::{Totals, Why};
use crate::model::attempt::Outcome;
use crate::model::intern::ArcStr;
use crate::model::intern::ByName as ByNode;
use crate::model::node::NodeView;
use crate::model::pod::PodInfo;
use crate::model::record::{Checked, Record, Rejection};
use queue::Queue;
use safety::Safety;
use seen::Records;
use totals::{Entry, Overlay, Running};

/// How long a write is laid over a node whose watch never shows it (a missed event; the full resync
/// catches up after that).
const OVERLAY_TTL: Duration = Duration::from_secs(60);

/// What changed among the fleet-wide safety states in a round (the controller logs, counts, writes
/// Events and notifies for each; `drainer simulate` prints them).
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum FleetEvent {
    BreakerOpened {
        trip: Trip,
        /// The common cause reported for the nodes failing now, if one was.
        cause: Option<String>,
    },
    BreakerClosed {
        open_for: Duration,
    },
    OutageStarted(Outage),
    OutageEnded {
        domain: String,
    },
    /// A node started flapping (once per episode).
    Flapping {
        node: String,
        changes: usize,
    },
    /// A node another remediator took is left to it (once per taking).
    LeftToPeer(crate::decide::facts::Taken),
    /// A selected node's detector fell silent (once per episode).
    DetectorSilent {
        node: String,
        silence: crate::decide::silence::Silence,
    },
    /// A silent node's detector was heard again.
    DetectorHeard {
        node: String,
        silent_for: Duration,
    },
    /// More than `--correlate-min` nodes gained one condition together: what they share.
    CommonCause(crate::decide::common_cause::CommonCause),
    /// A failure domain's slow start widened or fell back to one.
    SlowStart(crate::decide::gates::slow_start::Change),
    /// A known node's labels now name another failure domain: it is kept in the one it had when
    /// first seen (until the drainer restarts or the Node is made again).
    DomainKept {
        node: String,
        kept: Option<String>,
        labels_say: Option<String>,
    },
}

pub struct Fleet {
    cfg: Arc<Config>,
    nodes: ByNode<Entry>,
    running: Running,
    overlays: ByNode<Overlay>,
    /// Which nodes the next rounds decide, and when.
    queue: Queue,
    /// The fleet-wide safety states kept over time (the gates are derived from them each round).
    safety: Safety,
    /// Our records as the watch showed them, and the ones refused.
    records: Records,
    events: Vec<FleetEvent>,
    /// Transitions of watched conditions seen since the controller last took them (only with
    /// `--history-file`).
    transitions: Vec<crate::model::transition::Transition>,
    /// What remediators said when they gave up on nodes' power-cycles (`follow`).
    gave_up: GaveUp,
}

/// What remediators said when they gave up on nodes' power-cycles: (the attempt's operation ID,
/// what was said), by node (`follow`).
type GaveUp = std::collections::BTreeMap<ArcStr, (String, String)>;

/// How a selector error is reported: once per node view, by the caller.
pub(crate) type SelectError = (String, crate::config::select::SelectError);

impl Fleet {
    pub fn new(cfg: Arc<Config>) -> Fleet {
        Fleet {
            cfg,
            nodes: ByNode::default(),
            running: Running::default(),
            overlays: ByNode::default(),
            queue: Queue::default(),
            safety: Safety::default(),
            records: Records::default(),
            events: Vec::new(),
            transitions: Vec::new(),
            gave_up: GaveUp::new(),
        }
    }

    /// The record memory to keep, with the shards that changed since the last call, when any did
    /// (removed records a week old are forgotten at most once a minute, at `now`).
    pub(crate) fn memory_changed(&mut self, now: Timestamp) -> Option<(seen::Dirty, &seen::Seen)> {
        let due = self
            .records
            .pruned
            .is_none_or(|t| nodemedic_common::time::add(t, Duration::from_secs(60)) <= now);
        if due {
            self.records.pruned = Some(now);
            self.records.dirty |= self.records.seen.prune(now);
        }
        let dirty = std::mem::take(&mut self.records.dirty);
        (dirty != 0).then_some((dirty, &self.records.seen))
    }

    /// The reboot requests our records stand for, by node name, when they may have changed since
    /// the last call: those withheld now left out (`decide::gates::resume`).
    pub(crate) fn reboots_changed(
        &mut self,
    ) -> Option<BTreeMap<String, nodemedic_common::reboot::RebootRequest>> {
        let changed = std::mem::take(&mut self.running.reboots_changed);
        changed.then(|| {
            let r = &self.running.reboots;
            let withheld = &self.running.withheld;
            (r.iter().filter(|(n, _)| !withheld.contains(*n)))
                .map(|(n, q)| (n.to_string(), q.clone()))
                .collect()
        })
    }

    /// Nodes whose ladder ended with a person.
    pub(crate) fn needs_person(&self) -> usize {
        self.running.needs_person
    }

    /// The record memory the previous leader kept (read back before the first round).
    pub(crate) fn restore_seen(&mut self, s: seen::Seen) {
        self.records.seen = s;
        self.records.dirty = seen::ALL_SHARDS;
        self.apply_pins();
    }

    /// Records on nodes refused since the last call (node, why): each is reported once.
    pub(crate) fn take_rejected(&mut self) -> Vec<(String, Rejection)> {
        std::mem::take(&mut self.records.rejected)
    }

    /// The breaker as kept on the Lease (a restart or a new leader continues it).
    pub(crate) fn restore_breaker(&mut self, b: Breaker) {
        self.safety.breaker = b;
    }

    pub(crate) fn breaker(&self) -> &Breaker {
        &self.safety.breaker
    }

    /// Whether every pod is known: until then the rounds hold drains and the steps after them.
    pub(crate) fn set_pods_listed(&mut self, listed: bool) {
        self.safety.pods_pending = !listed;
    }

    /// The pause in force, if any.
    pub(crate) fn paused(&self) -> Option<&Pause> {
        self.safety.paused.as_ref()
    }

    /// The watched conditions' transitions seen since the last call (with `--history-file`).
    pub(crate) fn take_transitions(&mut self) -> Vec<crate::model::transition::Transition> {
        std::mem::take(&mut self.transitions)
    }

    /// What changed among the safety states since the last call.
    pub(crate) fn take_events(&mut self) -> Vec<FleetEvent> {
        std::mem::take(&mut self.events)
    }

    /// The WaitingForBudget notes due since the last call (one Event per wait, its count
    /// refreshed at most every `--event-refresh`).
    pub(crate) fn take_wait_notes(&mut self) -> Vec<(ArcStr, crate::decide::schedule::Note)> {
        self.queue.waiting.take_notes()
    }

    /// The wait note of `node` was written as `event` (`None`: the write failed).
    pub(crate) fn wait_noted(&mut self, node: &str, event: Option<String>) {
        self.queue.waiting.noted(node, event);
    }

    /// Domains in an outage now.
    pub(crate) fn outages(&self) -> &BTreeSet<String> {
        &self.safety.outages
    }

    /// Nodes a safety gate holds now.
    pub(crate) fn held(&self) -> usize {
        self.queue.held.len()
    }

    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    pub(crate) fn names(&self) -> impl Iterator<Item = &str> {
        self.nodes.keys().map(ArcStr::as_str)
    }

    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    pub(crate) fn contains(&self, name: &str) -> bool {
        self.nodes.contains_key(name)
    }

    pub(crate) fn view(&self, name: &str) -> Option<&Arc<NodeView>> {
        self.nodes.get(name).map(|e| &e.view)
    }

    /// Every node's view and whether it is selected.
    pub(crate) fn selections(&self) -> impl Iterator<Item = (&NodeView, bool)> {
        self.nodes.values().map(|e| (&*e.view, e.selected))
    }

    /// The selected nodes carrying a symptom condition we set (to be cleared when the symptom is
    /// gone).
    pub(crate) fn symptomatic(&self) -> impl Iterator<Item = &ArcStr> {
        self.running.symptomatic.iter()
    }

    pub(crate) fn selected(&self, name: &str) -> bool {
        self.nodes.get(name).is_some_and(|e| e.selected)
    }

    pub fn totals(&self) -> Totals {
        self.running.totals()
    }

    /// A node's current view (from the watch). Returns the selector's error for a changed view, if
    /// it failed (the node then counts as not selected).
    pub fn observe(&mut self, view: Arc<NodeView>, now: Timestamp) -> Option<SelectError> {
        // Until the watch shows our write, what it shows predates the write (a watch delivers in
        // order) and our write replaces it: the write stays laid over it, so neither a stale view
        // nor a record written on the node meanwhile is decided on.
        let overlaid = match self.overlays.get(&view.name) {
            Some(o)
                if o.until > now
                    && view.annotations.get(DRAIN_RECORD_ANNOTATION) != o.after.as_deref()
                    && !self.later_than(&view, o.at) =>
            {
                Some(Arc::new(o.lay(&view)))
            }
            Some(_) => {
                self.overlays.remove(&view.name);
                None
            }
            None => None,
        };
        match overlaid {
            Some(v) => self.update(v),
            None => {
                self.confirm(&view);
                self.update(view)
            }
        }
    }

    /// `view` is as the watch shows it, no write of ours pending: an authentic record on it is the
    /// newest of ours unless an older one was written back.
    fn confirm(&mut self, view: &NodeView) {
        match Record::check(view, &self.cfg.records, &self.cfg.owner) {
            // A replay the memory already knows raises nothing.
            Checked::Authentic(r) if self.records.seen.replayed(&view.name, r.at).is_none() => {
                let changed = self.records.seen.saw(&view.name, Some(r.at));
                self.records.node_changed(&view.name, changed);
                let started = matches!(
                    r.phase,
                    crate::model::record::Phase::Rebooting | crate::model::record::Phase::Replacing
                );
                if let (true, Some(step), Some(at)) = (started, r.step, r.step_at) {
                    let changed = self.records.seen.stepped(&view.name, step, at);
                    self.records.node_changed(&view.name, changed);
                    self.records.fleet_changed(changed);
                }
                // A step withheld until it started again was never carried out: not counted.
                let withheld = r.ended.iter().filter(|a| a.outcome == Outcome::Withheld);
                for a in withheld {
                    let changed = self.records.seen.unstepped(&view.name, a.step, a.started);
                    self.records.node_changed(&view.name, changed);
                }
            }
            Checked::Absent => {
                let changed = self.records.seen.saw(&view.name, None);
                self.records.node_changed(&view.name, changed);
            }
            Checked::Authentic(_) | Checked::Foreign(_) | Checked::Rejected(_) => {}
        }
    }

    /// The record on `view` if it is ours (or another drainer's, which is never acted on); one
    /// refused is reported once and counts as none: the node is decided from its conditions.
    fn checked(&mut self, view: &NodeView) -> Option<Box<Record>> {
        let verdict = match Record::check(view, &self.cfg.records, &self.cfg.owner) {
            Checked::Absent => Ok(None),
            Checked::Foreign(r) => Ok(Some(r)),
            Checked::Authentic(r) => match self.records.seen.replayed(&view.name, r.at) {
                Some(newest) => Err(Rejection::Replayed { at: r.at, newest }),
                None => Ok(Some(r)),
            },
            Checked::Rejected(why) => Err(why),
        };
        match verdict {
            Ok(r) => {
                self.records.refused.remove(&view.name);
                r.map(Box::new)
            }
            Err(why) => {
                use std::hash::{Hash, Hasher};
                let mut h = std::collections::hash_map::DefaultHasher::new();
                view.annotations.get(DRAIN_RECORD_ANNOTATION).hash(&mut h);
                let h = h.finish();
                if self.records.refused.insert(view.name.clone(), h) != Some(h) {
                    self.records.rejected.push((view.name.to_string(), why));
                }
                None
            }
        }
    }

    /// Take `view` as the node's state (overlays already laid).
    fn update(&mut self, view: Arc<NodeView>) -> Option<SelectError> {
        let name = view.name.clone();
        if let Some(e) = self.nodes.get_mut(&name)
            && e.view.same_state(&view)
        {
            e.view = view; // a heartbeat: nothing to decide
            return None;
        }
        self.unwake(&name);
        let (mut last, mut pods, mut domain) = (None, None, None);
        // The selection holds while nothing the selector reads changed (a condition's change under
        // a label selector): evaluated again only when something it reads did.
        let mut kept = None;
        let old = self.nodes.remove(&name);
        if let Some(old) = &old {
            (last, pods) = (old.last, old.pods.clone());
            // The failure domain is the one the Node had when first seen: a kubelet may set its
            // own zone label, and a node moving between domains could hide an outage (more
            // healthy nodes in it) or take another domain's pace. A new Node (a new UID) is
            // read afresh; a relabelled one is told of once and kept where it was.
            if old.view.uid == view.uid {
                if old.view.labels != view.labels {
                    self.domain_moved(&view, old.domain.as_ref());
                }
                domain = Some(old.domain.clone());
            }
            if self.cfg.selector.reads().same(&old.view, &view) {
                kept = Some(old.selected);
            }
            let gains = crate::decide::common_cause::gains(&old.view, &view, &self.cfg.conditions);
            self.safety.gains.extend(gains);
            if self.cfg.history_file.is_some() {
                let mut types: Vec<&str> = self
                    .cfg
                    .conditions
                    .iter()
                    .map(|c| c.type_.as_str())
                    .collect();
                types.dedup();
                let seen = crate::model::transition::between(&old.view, &view, &types);
                self.transitions.extend(seen);
            }
            for at in flap::changes(&old.view, &view, &self.cfg) {
                self.safety
                    .flaps
                    .entry(name.clone())
                    .or_default()
                    .record(at, &self.cfg.safety);
            }
        }
        let (selected, error) = match kept
            .map(Ok)
            .unwrap_or_else(|| self.cfg.selector.matches(&view))
        {
            Ok(s) => (s, None),
            Err(e) => (false, Some((name.to_string(), e))),
        };
        let entry = Entry {
            record: self.checked(&view),
            // Interned: a zone's name is shared by all its nodes.
            domain: (domain.or_else(|| self.pinned_domain(&view))).unwrap_or_else(|| {
                outage::domain_of(&view, &self.cfg).map(|d| crate::model::intern::intern(&d))
            }),
            unhealthy: outage::unhealthy_since(&view, &self.cfg, Some(self.found(&name))),
            problem: outage::problem_named(&view, &self.cfg, Some(self.found(&name))),
            view,
            selected,
            wake: None,
            at_rest: false,
            last,
            pods,
        };
        self.running.replace(old.as_ref(), &entry, &self.cfg.owner);
        self.nodes.insert(name.clone(), entry);
        self.queue.dirty.insert(name);
        error
    }

    /// Note `why` as the node's last decision; the one noted before, if any (None also for a node
    /// the fleet does not hold).
    pub fn note(
        &mut self,
        name: &str,
        why: std::mem::Discriminant<Why>,
    ) -> Option<std::mem::Discriminant<Why>> {
        self.nodes.get_mut(name).and_then(|e| e.last.replace(why))
    }

    /// Decide with new settings (a config reload): every node's selection, budget count and
    /// decision is worked out again from its view at the next round. Writes not yet seen by the
    /// watch stay laid over the views, so the reload repeats none of them. Returns the selector's
    /// errors, as [`Fleet::observe`] does.
    pub(crate) fn reconfigure(&mut self, cfg: Arc<Config>) -> Vec<SelectError> {
        let entries: Vec<_> = (self.nodes.drain())
            .map(|(_, e)| (e.view, e.last, e.pods))
            .collect();
        self.cfg = cfg;
        self.running = Running::default();
        self.queue.clear();
        let mut errors = Vec::new();
        for (view, last, pods) in entries {
            let name = view.name.clone();
            errors.extend(self.update(view));
            if let Some(e) = self.nodes.get_mut(&name) {
                (e.last, e.pods) = (last, pods);
            }
        }
        errors
    }

    /// The node is gone.
    pub(crate) fn remove(&mut self, name: &str) {
        self.unwake(name);
        if let Some(old) = self.nodes.remove(name) {
            self.running.count(&old, &self.cfg.owner, false);
        }
        self.overlays.remove(name);
        self.running.withheld.remove(name);
        self.queue.forget(name);
        self.safety.forget(name);
        self.records.refused.remove(name);
        // A node gone while it dwelt proves nothing about its domain.
        self.records.seen.pace.forget_node(name);
        // Gone with its Node: forgotten a week on, as a removed record is.
        let changed = self.records.seen.saw(name, None) | self.records.seen.unpin(name);
        self.records.node_changed(name, changed);
        self.records.fleet_changed(true);
    }

    /// The node's pods, as the pod index holds them now (when they changed, and when the node is
    /// new to the fleet): it is decided again. Ignored for a node the fleet does not hold (its pods
    /// are handed over when it comes).
    pub fn pods(&mut self, name: &str, pods: Arc<Vec<Arc<PodInfo>>>) {
        if let Some(e) = self.nodes.get_mut(name) {
            e.pods = Some(pods);
            self.queue.dirty.insert(e.view.name.clone());
        }
    }

    /// Decide every node at the next round (a relist, or the periodic resync).
    pub fn touch_all(&mut self) {
        self.queue.dirty.extend(self.nodes.keys().cloned());
    }

    /// Decide again, at the next round, every node whose last decision left something to do or
    /// watch (the periodic resync): a node at rest changes only with its view, which the watch
    /// reports, so at 15,000 mostly healthy nodes the resync decides the few that are not.
    pub(crate) fn touch_restless(&mut self) {
        let restless = self.nodes.iter().filter(|(_, e)| !e.at_rest);
        self.queue.dirty.extend(restless.map(|(n, _)| n.clone()));
    }

    /// Decide `name` again at `at` (e.g. to retry a failed write).
    pub(crate) fn wake_at(&mut self, name: &str, at: Timestamp) {
        if let Some(e) = self.nodes.get_mut(name) {
            let name = e.view.name.clone();
            if let Some(old) = e.wake.take() {
                self.queue.wakes.remove(&(old, name.clone()));
            }
            e.wake = Some(at);
            self.queue.wakes.insert((at, name));
        }
    }

    fn unwake(&mut self, name: &str) {
        if let Some(e) = self.nodes.get_mut(name)
            && let Some(at) = e.wake.take()
        {
            self.queue.wakes.remove(&(at, e.view.name.clone()));
        }
    }

    /// Nodes the next round will decide at least (changed or waiting; due wake-ups aside).
    pub(crate) fn pending(&self) -> usize {
        let q = &self.queue;
        let waiting = q.waiting.names().filter(|n| !q.dirty.contains(*n)).count();
        q.dirty.len() + waiting
    }

    /// The next clock wake-up.
    pub(crate) fn next_wake(&self) -> Option<Timestamp> {
        let node = self.queue.wakes.first().map(|(t, _)| *t);
        let breaker = self.safety.breaker.wake(&self.cfg.safety);
        [node, breaker, self.safety.newly_wake, self.pace_wake()]
            .into_iter()
            .flatten()
            .min()
    }

    /// Whether `view` carries a record of ours decided after `at` (the executor wrote the node's
    /// record again, an attempt ended: it supersedes the one laid over the view).
    fn later_than(&self, view: &NodeView, at: Option<Timestamp>) -> bool {
        let Some(at) = at else { return false };
        matches!(
            Record::check(view, &self.cfg.records, &self.cfg.owner),
            Checked::Authentic(r) if r.at > at
        )
    }

    /// We wrote `record` (None: removed it) on the node, and the cordon and taints it says we hold
    /// (against the record the fleet holds for it): lay it over the node's view until the watch
    /// shows it.
    pub(crate) fn wrote(&mut self, name: &str, record: Option<&Record>, now: Timestamp) {
        let Some(e) = self.nodes.get(name) else {
            return;
        };
        let until = nodemedic_common::time::add(now, OVERLAY_TTL);
        let overlay = Overlay::of(e.record.as_deref(), record, until, &self.cfg.records);
        let view = Arc::new(overlay.lay(&e.view));
        self.overlays.insert(e.view.name.clone(), overlay);
        self.update(view);
    }
}

#[cfg(test)]
mod tests;
