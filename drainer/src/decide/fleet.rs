//! The controller's incremental state, pure: every node's view, whether the selector selects it,
//! its record, and running totals of the budgets, updated as nodes change. A round decides only
//! the nodes that changed, whose time came ([`NodeDecision::wake`]) or that wait for a budget, with
//! [`decide_some`] — the same code `drainer plan` runs over all nodes — so work per event follows
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

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::jiff::Timestamp;
use nodemedic_common::keys::DRAIN_RECORD_ANNOTATION;

use super::facts::{Outage, Pause};
use super::gates::Gates;
use super::gates::breaker::{self, Breaker, BreakerChange};
use super::gates::flap::{self, FlapGate, Flaps};
use super::gates::outage::{self, DomainTotals, OutageGate};
use super::gates::window;
use super::{Action, Candidate, NodeDecision, Totals, Why, decide_some};
use crate::config::Config;
use crate::model::node::NodeView;
use crate::model::pod::PodInfo;
use crate::model::record::{Phase, Record};

/// How long a write is laid over a node whose watch never shows it (a missed event; the full resync
/// catches up after that).
const OVERLAY_TTL: Duration = Duration::from_secs(60);

struct Entry {
    view: Arc<NodeView>,
    selected: bool,
    /// The record on the node, whichever drainer owns it (boxed: most nodes have none).
    record: Option<Box<Record>>,
    wake: Option<Timestamp>,
    /// Its failure domain.
    domain: Option<Arc<str>>,
    /// Unhealthy since (a watched condition in its problem status now).
    unhealthy: Option<Timestamp>,
}

/// What changed among the fleet-wide safety states in a round (the controller logs, counts, writes
/// Events and notifies for each; `drainer simulate` prints them).
#[derive(Debug, Clone, PartialEq)]
pub enum FleetEvent {
    BreakerOpened {
        trip: super::facts::Trip,
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
}

/// A write of ours not yet seen by the watch.
struct Overlay {
    /// The record annotation the write replaced: a view still carrying it predates the write.
    before: Option<String>,
    after: Option<String>,
    unschedulable: Option<bool>,
    until: Timestamp,
}

impl Overlay {
    fn lay(&self, view: &NodeView) -> NodeView {
        let mut v = view.clone();
        v.annotations = v
            .annotations
            .with(DRAIN_RECORD_ANNOTATION, self.after.as_deref());
        if let Some(u) = self.unschedulable {
            v.unschedulable = u;
        }
        v
    }
}

/// Totals over owned records, kept up to date as entries come and go.
#[derive(Default)]
struct Running {
    selected: usize,
    cordoned: usize,
    draining: usize,
    drain_starts: BTreeMap<Timestamp, usize>,
    /// Selected nodes unhealthy now.
    unhealthy: usize,
    /// ... by when they became unhealthy (the breaker's "newly" count).
    unhealthy_since: BTreeMap<Timestamp, usize>,
    /// Selected nodes by failure domain.
    domains: HashMap<Arc<str>, DomainTotals>,
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
    fn count(&mut self, e: &Entry, owner: &str, add: bool) {
        let step = |n: &mut usize, yes: bool| {
            if yes {
                *n = if add { *n + 1 } else { n.saturating_sub(1) };
            }
        };
        step(&mut self.selected, e.selected);
        let owned = e.record.as_ref().filter(|r| r.owned_by(owner, e.selected));
        if e.selected {
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
        if let Some(t) = r.drain_started {
            multiset(&mut self.drain_starts, t, add);
        }
    }

    /// The breaker's counts at `now`.
    fn health(&self, window: Duration, now: Timestamp) -> breaker::Health {
        let from = nodemedic_common::time::sub(now, window);
        breaker::Health {
            selected: self.selected,
            unhealthy: self.unhealthy,
            newly: self.unhealthy_since.range(from..).map(|(_, n)| n).sum(),
        }
    }

    fn totals(&self) -> Totals {
        Totals {
            selected: self.selected,
            cordoned: self.cordoned,
            draining: self.draining,
            last_drain_start: self.drain_starts.keys().next_back().copied(),
        }
    }
}

pub struct Fleet {
    cfg: Arc<Config>,
    nodes: HashMap<String, Entry>,
    running: Running,
    overlays: HashMap<String, Overlay>,
    /// Decided at the next round.
    dirty: BTreeSet<String>,
    /// Clock wake-ups: (when, node).
    wakes: BTreeSet<(Timestamp, String)>,
    /// Waiting for a cordon or drain budget: decided every round, as a freed slot may be theirs.
    waiting: BTreeSet<String>,
    /// Held by a safety gate: decided again when the gates change.
    held: BTreeSet<String>,
    /// The gates of the last round (what a change is detected against).
    last_gates: Option<GatesKey>,
    breaker: Breaker,
    outages: BTreeSet<String>,
    paused: Option<Pause>,
    /// Recent condition changes of nodes that had any.
    flaps: HashMap<String, Flaps>,
    /// Nodes flapping now whose episode was reported.
    flapping: BTreeSet<String>,
    events: Vec<FleetEvent>,
    /// While the breaker is open: when the oldest start within its window leaves it (the "newly"
    /// count drops then, which may let it calm down); never in the past.
    newly_wake: Option<Timestamp>,
}

/// What of the gates a held decision depends on.
#[derive(Debug, Clone, PartialEq)]
struct GatesKey {
    paused: bool,
    breaker: bool,
    outages: BTreeSet<String>,
    window: bool,
}

/// How a selector error is reported: once per node view, by the caller.
pub type SelectError = (String, crate::config::select::SelectError);

impl Fleet {
    pub fn new(cfg: Arc<Config>) -> Fleet {
        Fleet {
            cfg,
            nodes: HashMap::new(),
            running: Running::default(),
            overlays: HashMap::new(),
            dirty: BTreeSet::new(),
            wakes: BTreeSet::new(),
            waiting: BTreeSet::new(),
            held: BTreeSet::new(),
            last_gates: None,
            breaker: Breaker::default(),
            outages: BTreeSet::new(),
            paused: None,
            flaps: HashMap::new(),
            flapping: BTreeSet::new(),
            events: Vec::new(),
            newly_wake: None,
        }
    }

    /// The breaker as kept on the Lease (a restart or a new leader continues it).
    pub fn restore_breaker(&mut self, b: Breaker) {
        self.breaker = b;
    }

    pub fn breaker(&self) -> &Breaker {
        &self.breaker
    }

    /// The pause read from the Lease (None: not paused).
    pub fn set_pause(&mut self, p: Option<Pause>) {
        self.paused = p;
    }

    /// The pause in force, if any.
    pub fn paused(&self) -> Option<&Pause> {
        self.paused.as_ref()
    }

    /// What changed among the safety states since the last call.
    pub fn take_events(&mut self) -> Vec<FleetEvent> {
        std::mem::take(&mut self.events)
    }

    /// Domains in an outage now.
    pub fn outages(&self) -> &BTreeSet<String> {
        &self.outages
    }

    /// Nodes a safety gate holds now.
    pub fn held(&self) -> usize {
        self.held.len()
    }

    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.nodes.keys().map(String::as_str)
    }

    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    pub fn contains(&self, name: &str) -> bool {
        self.nodes.contains_key(name)
    }

    pub fn view(&self, name: &str) -> Option<&Arc<NodeView>> {
        self.nodes.get(name).map(|e| &e.view)
    }

    pub fn selected(&self, name: &str) -> bool {
        self.nodes.get(name).is_some_and(|e| e.selected)
    }

    pub fn totals(&self) -> Totals {
        self.running.totals()
    }

    /// A node's current view (from the watch). Returns the selector's error for a changed view, if
    /// it failed (the node then counts as not selected).
    pub fn observe(&mut self, view: Arc<NodeView>, now: Timestamp) -> Option<SelectError> {
        let view = match self.overlays.get(&view.name) {
            Some(o)
                if o.until > now
                    && view.annotations.get(DRAIN_RECORD_ANNOTATION) == o.before.as_deref() =>
            {
                Arc::new(o.lay(&view))
            }
            Some(_) => {
                self.overlays.remove(&view.name);
                view
            }
            None => view,
        };
        self.update(view)
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
        if let Some(old) = self.nodes.remove(&name) {
            self.running.count(&old, &self.cfg.owner, false);
            for at in flap::changes(&old.view, &view, &self.cfg) {
                self.flaps
                    .entry(name.clone())
                    .or_default()
                    .record(at, &self.cfg.safety);
            }
        }
        let (selected, error) = match self.cfg.selector.matches(&view) {
            Ok(s) => (s, None),
            Err(e) => (false, Some((name.clone(), e))),
        };
        let entry = Entry {
            record: Record::of(&view).map(Box::new),
            // Interned: a zone's name is shared by all its nodes.
            domain: outage::domain_of(&view, &self.cfg).map(|d| crate::model::intern::intern(&d)),
            unhealthy: outage::unhealthy_since(&view, &self.cfg),
            view,
            selected,
            wake: None,
        };
        self.running.count(&entry, &self.cfg.owner, true);
        self.nodes.insert(name.clone(), entry);
        self.dirty.insert(name);
        error
    }

    /// Decide with new settings (a config reload): every node's selection, budget count and
    /// decision is worked out again from its view at the next round. Writes not yet seen by the
    /// watch stay laid over the views, so the reload repeats none of them. Returns the selector's
    /// errors, as [`Fleet::observe`] does.
    pub fn reconfigure(&mut self, cfg: Arc<Config>) -> Vec<SelectError> {
        let views: Vec<Arc<NodeView>> = self.nodes.drain().map(|(_, e)| e.view).collect();
        self.cfg = cfg;
        self.running = Running::default();
        self.wakes.clear();
        self.waiting.clear();
        self.held.clear();
        self.dirty.clear();
        self.last_gates = None;
        views.into_iter().filter_map(|v| self.update(v)).collect()
    }

    /// The node is gone.
    pub fn remove(&mut self, name: &str) {
        self.unwake(name);
        if let Some(old) = self.nodes.remove(name) {
            self.running.count(&old, &self.cfg.owner, false);
        }
        self.overlays.remove(name);
        self.dirty.remove(name);
        self.waiting.remove(name);
        self.held.remove(name);
        self.flaps.remove(name);
        self.flapping.remove(name);
    }

    /// Its pods changed: decide it again.
    pub fn touch(&mut self, name: &str) {
        if self.nodes.contains_key(name) {
            self.dirty.insert(name.to_string());
        }
    }

    /// Decide every node at the next round (a relist, or the periodic resync).
    pub fn touch_all(&mut self) {
        self.dirty.extend(self.nodes.keys().cloned());
    }

    /// Decide `name` again at `at` (e.g. to retry a failed write).
    pub fn wake_at(&mut self, name: &str, at: Timestamp) {
        if let Some(e) = self.nodes.get_mut(name) {
            if let Some(old) = e.wake.take() {
                self.wakes.remove(&(old, name.to_string()));
            }
            e.wake = Some(at);
            self.wakes.insert((at, name.to_string()));
        }
    }

    fn unwake(&mut self, name: &str) {
        if let Some(at) = self.nodes.get_mut(name).and_then(|e| e.wake.take()) {
            self.wakes.remove(&(at, name.to_string()));
        }
    }

    /// Nodes the next round will decide at least (changed or waiting; due wake-ups aside).
    pub fn pending(&self) -> usize {
        self.dirty.len() + self.waiting.len()
    }

    /// The next clock wake-up.
    pub fn next_wake(&self) -> Option<Timestamp> {
        let node = self.wakes.first().map(|(t, _)| *t);
        let breaker = self.breaker.wake(&self.cfg.safety);
        [node, breaker, self.newly_wake].into_iter().flatten().min()
    }

    /// We wrote `record` (None: removed it) and, when given, `unschedulable` on the node: lay it
    /// over the node's view until the watch shows it.
    pub fn wrote(
        &mut self,
        name: &str,
        record: Option<&Record>,
        unschedulable: Option<bool>,
        now: Timestamp,
    ) {
        let Some(e) = self.nodes.get(name) else {
            return;
        };
        let overlay = Overlay {
            before: e
                .view
                .annotations
                .get(DRAIN_RECORD_ANNOTATION)
                .map(String::from),
            after: record.map(Record::to_annotation),
            unschedulable,
            until: nodemedic_common::time::add(now, OVERLAY_TTL),
        };
        let view = Arc::new(overlay.lay(&e.view));
        self.overlays.insert(name.to_string(), overlay);
        self.update(view);
    }

    /// The gates at `now`: the breaker and the outages are brought up to date from the running
    /// totals first (their changes become events).
    fn gates(&mut self, now: Timestamp) -> Gates {
        let cfg = self.cfg.clone();
        let s = &cfg.safety;
        let health = self.running.health(s.breaker_window, now);
        match self.breaker.observe(&health, s, now) {
            Some(BreakerChange::Opened(trip)) => {
                self.events.push(FleetEvent::BreakerOpened { trip })
            }
            Some(BreakerChange::Closed { open_for }) => {
                self.events.push(FleetEvent::BreakerClosed { open_for })
            }
            None => {}
        }
        let window_start = nodemedic_common::time::sub(now, s.breaker_window);
        self.newly_wake = self
            .running
            .unhealthy_since
            .range(window_start..)
            .next()
            .map(|(t, _)| nodemedic_common::time::add(*t, s.breaker_window))
            .filter(|at| *at > now && self.breaker.is_open());
        let mut domains = BTreeMap::new();
        let mut outages = BTreeMap::new();
        for (d, t) in &self.running.domains {
            domains.insert(d.to_string(), *t);
            if let Some(o) = outage::outage(d, t, s) {
                outages.insert(d.to_string(), o);
            }
        }
        for (d, o) in &outages {
            if !self.outages.contains(d) {
                self.events.push(FleetEvent::OutageStarted(o.clone()));
            }
        }
        for d in &self.outages {
            if !outages.contains_key(d) {
                self.events
                    .push(FleetEvent::OutageEnded { domain: d.clone() });
            }
        }
        self.outages = outages.keys().cloned().collect();
        Gates {
            pause: self.paused.clone(),
            flap: FlapGate {
                window: s.flap_window,
            },
            breaker: self.breaker.hold(s),
            outage: OutageGate { outages },
            domains,
            window: window::next_window(&s.drain_windows, now),
        }
    }

    /// Decide the nodes that changed, whose time came, or that wait for a budget; `latest` gives a
    /// node's current view from the cache and `pods_of` its pods. Decisions come with the view they
    /// were made on.
    ///
    /// Each node decided is brought up to date with `latest` first: heartbeats do not reach the
    /// fleet, so a node woken by the clock would otherwise carry the resourceVersion of its last real
    /// change, and a cordon made against it would fail its precondition (409) every time.
    pub fn round(
        &mut self,
        latest: impl Fn(&str) -> Option<Arc<NodeView>>,
        pods_of: impl Fn(&str) -> Vec<Arc<PodInfo>>,
        now: Timestamp,
    ) -> Vec<(NodeDecision, Arc<NodeView>)> {
        while let Some((at, _)) = self.wakes.first()
            && *at <= now
        {
            let (_, name) = self.wakes.pop_first().expect("non-empty");
            if let Some(e) = self.nodes.get_mut(&name) {
                e.wake = None;
            }
            self.dirty.insert(name);
        }
        let names: BTreeSet<String> = std::mem::take(&mut self.dirty)
            .into_iter()
            .chain(std::mem::take(&mut self.waiting))
            .filter(|n| self.nodes.contains_key(n))
            .collect();
        for n in &names {
            if let Some(v) = latest(n) {
                self.observe(v, now);
            }
            self.dirty.remove(n);
        }
        let gates = self.gates(now);
        let key = GatesKey {
            paused: gates.pause.is_some(),
            breaker: gates.breaker.is_some(),
            outages: gates.outage.outages.keys().cloned().collect(),
            window: gates.window.is_ok(),
        };
        let mut names = names;
        if self.last_gates.as_ref() != Some(&key) {
            // A gate opened or closed: what it held is decided again.
            for n in std::mem::take(&mut self.held) {
                if self.nodes.contains_key(&n) && !names.contains(&n) {
                    if let Some(v) = latest(&n) {
                        self.observe(v, now);
                    }
                    self.dirty.remove(&n);
                    names.insert(n);
                }
            }
            self.last_gates = Some(key);
        }
        let pods: Vec<Vec<Arc<PodInfo>>> = names.iter().map(|n| pods_of(n)).collect();
        let s = &self.cfg.safety;
        let candidates: Vec<Candidate> = names
            .iter()
            .zip(&pods)
            .map(|(n, p)| {
                let e = &self.nodes[n];
                Candidate {
                    node: &e.view,
                    selected: e.selected,
                    record: e.record.as_deref(),
                    pods: p.iter().map(|p| &**p).collect(),
                    domain: e.domain.as_deref(),
                    flapping: self.flaps.get(n).and_then(|f| f.flapping(now, s)),
                }
            })
            .collect();
        let decisions = decide_some(&candidates, &self.running.totals(), &gates, &self.cfg, now);
        // A flapping episode is reported once: it ends when the node has been stable for the
        // window, not when a decision happens not to need the fact (a healthy moment between
        // flaps).
        // Only about nodes this drainer selects or holds a record of: the rest are invisible to it.
        let owner = &self.cfg.owner;
        let flaps: Vec<(String, Option<usize>)> = candidates
            .iter()
            .map(|c| {
                let visible = c.selected
                    || c.record
                        .is_some_and(|r| r.owner.is_empty() || r.owner == *owner);
                let flapping = c.flapping.filter(|_| visible).map(|f| f.changes);
                (c.node.name.clone(), flapping)
            })
            .collect();
        drop(candidates);
        for (node, flapping) in flaps {
            match flapping {
                Some(changes) => {
                    if self.flapping.insert(node.clone()) {
                        self.events.push(FleetEvent::Flapping { node, changes });
                    }
                }
                None => {
                    self.flapping.remove(&node);
                }
            }
        }
        let mut out = Vec::with_capacity(decisions.len());
        for d in decisions {
            match &d.why {
                Why::CordonBudget { .. } | Why::DrainBudget { .. } | Why::DomainBudget { .. } => {
                    self.waiting.insert(d.node.clone());
                }
                _ if d.action == Action::Hold => {
                    self.held.insert(d.node.clone());
                }
                _ => {}
            }

            match d.wake {
                Some(at) => self.wake_at(&d.node, at),
                None => self.unwake(&d.node),
            }
            let view = self.nodes[&d.node].view.clone();
            out.push((d, view));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    //! The incremental rounds against the full plan: after any sequence of changes and writes, what
    //! the fleet decides for the nodes it looks at is what `decide_nodes` decides for them.

    use super::*;
    use crate::config::Budget;
    use crate::decide::{Action, Effect, decide_nodes};
    use crate::model::node::Condition;
    use nodemedic_common::status::Status;

    fn t(s: i64) -> Timestamp {
        Timestamp::from_second(1_800_000_000 + s).unwrap()
    }

    fn cfg(max_cordoned: usize) -> Arc<Config> {
        Arc::new(Config {
            safety: crate::config::safety::Safety::off(),
            conditions: vec!["KernelDeadlock=True,10m".parse().unwrap()],
            max_cordoned: Budget::Count(max_cordoned),
            max_drains_in_flight: 1,
            drain_buffer: Duration::from_secs(60),
            selector: crate::config::select::Selector::cel("metadata.labels['pool'] == 'a'")
                .unwrap(),
            ..Default::default()
        })
    }

    fn view(name: &str, pool: &str, bad_since: Option<i64>) -> NodeView {
        NodeView {
            name: name.into(),
            resource_version: "1".into(),
            labels: [("pool", pool)].into_iter().collect(),
            conditions: Box::new([Condition {
                type_: "KernelDeadlock".into(),
                status: if bad_since.is_some() {
                    Status::True
                } else {
                    Status::False
                },
                reason: None,
                since: t(bad_since.unwrap_or(0)),
            }]),
            ..Default::default()
        }
    }

    /// Apply what the controller would write for `d` to the fleet (as a write plus its watch event).
    fn act(f: &mut Fleet, d: &NodeDecision, now: Timestamp) {
        match &d.effect {
            Effect::Cordon(r) => f.wrote(&d.node, Some(r), Some(true), now),
            Effect::Uncordon => f.wrote(&d.node, None, Some(false), now),
            Effect::Release(r) => f.wrote(&d.node, Some(r), None, now),
            Effect::Forget => f.wrote(&d.node, None, None, now),
            Effect::Drain(job) => {
                let r = job.record.draining(now);
                f.wrote(&d.node, Some(&r), None, now)
            }
            Effect::Nothing | Effect::DeleteNode => {}
        }
    }

    fn full(f: &Fleet, cfg: &Config, now: Timestamp) -> HashMap<String, (Action, String)> {
        let nodes: Vec<k8s_openapi::api::core::v1::Node> = f
            .nodes
            .values()
            .map(|e| {
                let v = &e.view;
                let mut n = k8s_openapi::api::core::v1::Node::default();
                n.metadata.name = Some(v.name.clone());
                n.metadata.labels = Some(v.labels.to_btree());
                n.metadata.annotations = Some(v.annotations.to_btree());
                n.spec = Some(k8s_openapi::api::core::v1::NodeSpec {
                    unschedulable: Some(v.unschedulable),
                    ..Default::default()
                });
                n.status = Some(k8s_openapi::api::core::v1::NodeStatus {
                    conditions: Some(
                        v.conditions
                            .iter()
                            .map(|c| k8s_openapi::api::core::v1::NodeCondition {
                                type_: c.type_.to_string(),
                                status: c.status.to_string(),
                                last_transition_time: Some(
                                    k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(c.since),
                                ),
                                ..Default::default()
                            })
                            .collect(),
                    ),
                    ..Default::default()
                });
                n
            })
            .collect();
        decide_nodes(&nodes, &[] as &[PodInfo], cfg, now)
            .into_iter()
            .map(|d| (d.node, (d.action, d.reason)))
            .collect()
    }

    #[test]
    fn incremental_rounds_agree_with_the_full_plan() {
        let c = cfg(3);
        let mut f = Fleet::new(c.clone());
        let mut now = t(0);
        // 20 nodes, half selected; problems start over time and clear again.
        for i in 0..20 {
            let pool = if i % 2 == 0 { "a" } else { "b" };
            f.observe(Arc::new(view(&format!("n{i:02}"), pool, None)), now);
        }
        let mut decided = 0;
        for step in 0..60i64 {
            now = t(step * 120);
            // Node (step * 7) % 20 changes state.
            let i = (step * 7 % 20) as usize;
            let name = format!("n{i:02}");
            let mut v = (**f.view(&name).unwrap()).clone();
            let bad = v.conditions[0].status == Status::False;
            v.conditions[0] = Condition {
                type_: "KernelDeadlock".into(),
                status: if bad { Status::True } else { Status::False },
                reason: None,
                since: now,
            };
            v.resource_version = format!("{step}");
            f.observe(Arc::new(v), now);
            let expected = full(&f, &c, now);
            let decisions = f.round(|_| None, |_| Vec::new(), now);
            decided += decisions.len();
            for (d, _) in &decisions {
                assert_eq!(
                    (d.action, d.reason.clone()),
                    expected[&d.node],
                    "step {step}: {}",
                    d.node
                );
            }
            for (d, _) in &decisions {
                act(&mut f, d, now);
            }
            // The running totals are what a count over all nodes says.
            let all = Totals::of(f.nodes.values().map(|e| {
                (
                    e.selected,
                    e.record
                        .as_deref()
                        .filter(|r| r.owned_by(&c.owner, e.selected)),
                )
            }));
            assert_eq!(f.totals(), all, "step {step}");
            assert!(f.totals().cordoned <= 3, "the budget holds");
        }
        assert!(
            decided < 60 * 20 / 3,
            "rounds decide what changed, not every node: {decided}"
        );
    }

    #[test]
    fn a_reconfigured_fleet_decides_every_node_again_with_the_new_settings() {
        let mut f = Fleet::new(cfg(1));
        let now = t(10_000);
        for (i, pool) in ["a", "a", "b", "b"].iter().enumerate() {
            f.observe(Arc::new(view(&format!("n{i}"), pool, Some(0))), now);
        }
        let first = f.round(|_| None, |_| Vec::new(), now);
        let cordoned: Vec<String> = first
            .iter()
            .filter(|(d, _)| matches!(d.effect, Effect::Cordon(_)))
            .map(|(d, _)| d.node.clone())
            .collect();
        assert_eq!(cordoned.len(), 1, "a budget of one");
        for (d, _) in &first {
            act(&mut f, d, now);
        }
        // The new settings select both pools and allow three cordons.
        let new = Arc::new(Config {
            safety: crate::config::safety::Safety::off(),
            conditions: vec!["KernelDeadlock=True,10m".parse().unwrap()],
            max_cordoned: Budget::Count(3),
            max_drains_in_flight: 1,
            drain_buffer: Duration::from_secs(60),
            selector: crate::config::select::Selector::cel("metadata.labels['pool'] in ['a', 'b']")
                .unwrap(),
            ..Default::default()
        });
        assert!(f.reconfigure(new.clone()).is_empty());
        assert_eq!(f.pending(), 4, "every node is decided again");
        let expected = full(&f, &new, now);
        let second = f.round(|_| None, |_| Vec::new(), now);
        assert_eq!(second.len(), 4);
        for (d, _) in &second {
            assert_eq!(
                (d.action, d.reason.clone()),
                expected[&d.node],
                "{}",
                d.node
            );
        }
        let cordons: Vec<&str> = second
            .iter()
            .filter(|(d, _)| matches!(d.effect, Effect::Cordon(_)))
            .map(|(d, _)| d.node.as_str())
            .collect();
        assert_eq!(
            cordons.len(),
            2,
            "two more within the new budget: {cordons:?}"
        );
        assert!(
            !cordons.contains(&cordoned[0].as_str()),
            "the cordon written before the reload (not yet seen by the watch) is not repeated"
        );
        for (d, _) in &second {
            act(&mut f, d, now);
        }
        assert_eq!(f.totals().selected, 4);
        assert_eq!(f.totals().cordoned, 3);
    }

    fn zoned(name: &str, zone: &str, bad_since: Option<i64>) -> NodeView {
        let mut v = view(name, "a", bad_since);
        v.labels = [("pool", "a"), ("topology.kubernetes.io/zone", zone)]
            .into_iter()
            .collect();
        v
    }

    fn safe_cfg(edit: impl FnOnce(&mut Config)) -> Arc<Config> {
        let mut c = Config {
            conditions: vec!["KernelDeadlock=True,10m".parse().unwrap()],
            max_cordoned: Budget::Count(100),
            max_drains_in_flight: 10,
            drain_buffer: Duration::from_secs(60),
            selector: crate::config::select::Selector::cel("metadata.labels['pool'] == 'a'")
                .unwrap(),
            ..Default::default()
        };
        edit(&mut c);
        Arc::new(c)
    }

    fn whys(d: &[(NodeDecision, Arc<NodeView>)]) -> Vec<(String, Action, String)> {
        let mut out: Vec<(String, Action, String)> = d
            .iter()
            .map(|(d, _)| (d.node.clone(), d.action, d.reason.clone()))
            .collect();
        out.sort_by(|a, b| a.0.cmp(&b.0));
        out
    }

    #[test]
    fn the_next_wake_is_never_in_the_past_while_the_breaker_is_open() {
        // Problems that started long before the breaker window must not make the controller wake
        // at once, round after round (it spun at 400 rounds a second before).
        let mut f = Fleet::new(safe_cfg(|_| {}));
        let now = t(100_000);
        for i in 0..6 {
            let bad = (i < 4).then_some(0);
            f.observe(Arc::new(zoned(&format!("n{i}"), "z", bad)), now);
        }
        f.round(|_| None, |_| Vec::new(), now);
        assert!(f.breaker().is_open());
        assert!(f.next_wake().is_none_or(|w| w > now), "{:?}", f.next_wake());
        // Starts within the window wake the fleet when they leave it.
        let mut g = Fleet::new(safe_cfg(|_| {}));
        for i in 0..6 {
            let bad = (i < 4).then_some(99_900);
            g.observe(Arc::new(zoned(&format!("n{i}"), "z", bad)), now);
        }
        g.round(|_| None, |_| Vec::new(), now);
        assert_eq!(g.next_wake(), Some(t(99_900 + 300)));
    }

    #[test]
    fn a_pause_holds_everything_and_lifting_it_decides_the_held_nodes_again() {
        let mut f = Fleet::new(safe_cfg(|_| {}));
        let now = t(10_000);
        for i in 0..10 {
            let bad = (i == 3).then_some(0);
            f.observe(
                Arc::new(zoned(&format!("n{i}"), &format!("z{}", i % 5), bad)),
                now,
            );
        }
        f.set_pause(Some(Pause {
            by: "kubectl-annotate".into(),
            since: Some(t(9_000)),
            reason: "rollout".into(),
        }));
        let d = f.round(|_| None, |_| Vec::new(), now);
        let held: Vec<_> = whys(&d)
            .into_iter()
            .filter(|w| w.1 == Action::Hold)
            .collect();
        assert_eq!(held.len(), 1);
        assert!(
            held[0].2.starts_with("paused by kubectl-annotate since"),
            "{held:?}"
        );
        assert_eq!(f.held(), 1);
        // Nothing changed: the held node is not decided again.
        assert!(f.round(|_| None, |_| Vec::new(), now).is_empty());
        f.set_pause(None);
        let d = f.round(|_| None, |_| Vec::new(), now);
        assert_eq!(
            d.len(),
            1,
            "the held node, decided again when the gate lifts"
        );
        assert!(matches!(d[0].0.effect, Effect::Cordon(_)));
    }

    #[test]
    fn a_domain_budget_and_an_outage_act_per_domain() {
        let mut f = Fleet::new(safe_cfg(|c| {
            c.safety = crate::config::safety::Safety {
                max_cordoned_per_domain: Some(Budget::Count(1)),
                ..crate::config::safety::Safety::off()
            };
            c.safety.domain_outage_percent = 50.0;
        }));
        let now = t(10_000);
        // z0: 4 nodes, 3 bad (an outage); z1: 4 nodes, 2 bad (budget of one); z2: healthy.
        let bad_in = |zone: usize, i: usize| match zone {
            0 => i < 3,
            1 => i < 2,
            _ => false,
        };
        for zone in 0..3 {
            for i in 0..4 {
                let bad = bad_in(zone, i).then_some(0);
                f.observe(
                    Arc::new(zoned(&format!("z{zone}-n{i}"), &format!("z{zone}"), bad)),
                    now,
                );
            }
        }
        let d = f.round(|_| None, |_| Vec::new(), now);
        let events = f.take_events();
        assert_eq!(events.len(), 1, "{events:?}");
        assert!(
            matches!(&events[0], FleetEvent::OutageStarted(o) if o.domain == "z0" && o.unhealthy == 3 && o.size == 4)
        );
        let w = whys(&d);
        let of = |n: &str| w.iter().find(|x| x.0 == n).unwrap().clone();
        for n in ["z0-n0", "z0-n1", "z0-n2"] {
            assert_eq!(of(n).1, Action::Hold);
            assert!(
                of(n)
                    .2
                    .starts_with("outage in z0: 3 of 4 nodes unhealthy > 50%"),
                "{:?}",
                of(n)
            );
        }
        assert_eq!(of("z1-n0").1, Action::Cordon);
        assert_eq!(of("z1-n1").1, Action::Wait);
        assert!(
            of("z1-n1")
                .2
                .starts_with("cordon budget of z1 full: 1 of 1"),
            "{:?}",
            of("z1-n1")
        );
        // The outage ends when nodes recover: its held nodes are decided again.
        for (n, i) in [("z0-n1", 1), ("z0-n2", 2)] {
            let mut v = zoned(n, "z0", None);
            v.resource_version = format!("r{i}");
            f.observe(Arc::new(v), now);
        }
        let d = f.round(|_| None, |_| Vec::new(), now);
        assert_eq!(
            f.take_events(),
            vec![FleetEvent::OutageEnded {
                domain: "z0".into()
            }]
        );
        assert!(
            d.iter()
                .any(|(d, _)| d.node == "z0-n0" && matches!(d.effect, Effect::Cordon(_))),
            "{:?}",
            whys(&d)
        );
    }

    #[test]
    fn outside_the_drain_windows_a_node_is_cordoned_and_its_drain_waits_for_the_next() {
        let mut f = Fleet::new(safe_cfg(|c| {
            c.safety = crate::config::safety::Safety::off();
            c.drain_buffer = Duration::ZERO;
            // t(0) is 2027-01-15T08:00:00Z, a Friday.
            c.safety.drain_windows = vec!["Sat 10:00-12:00 UTC".parse().unwrap()];
        }));
        let now = t(0);
        f.observe(Arc::new(zoned("n1", "z", Some(-3600))), now);
        let d = f.round(|_| None, |_| Vec::new(), now);
        assert!(
            matches!(d[0].0.effect, Effect::Cordon(_)),
            "cordons happen at once"
        );
        for (d, _) in &d {
            act(&mut f, d, now);
        }
        let d = f.round(|_| None, |_| Vec::new(), now);
        assert_eq!(d[0].0.action, Action::Wait);
        assert!(
            d[0].0.reason.starts_with(
                "cordoned; drains start inside the drain windows, next at 2027-01-16T10:00:00Z"
            ),
            "{}",
            d[0].0.reason
        );
        assert_eq!(d[0].0.wake, Some("2027-01-16T10:00:00Z".parse().unwrap()));
        let d = f.round(
            |_| None,
            |_| Vec::new(),
            "2027-01-16T10:00:00Z".parse().unwrap(),
        );
        assert_eq!(d[0].0.action, Action::Drain, "inside the window");
    }

    #[test]
    fn a_heartbeat_decides_nothing_and_a_late_event_does_not_undo_a_write() {
        let mut f = Fleet::new(cfg(1));
        let now = t(10_000);
        f.observe(Arc::new(view("n1", "a", Some(0))), now);
        let d = f.round(|_| None, |_| Vec::new(), now);
        assert_eq!(d[0].0.action, Action::Cordon);
        act(&mut f, &d[0].0, now);
        assert_eq!(f.totals().cordoned, 1, "counted before the watch shows it");
        // A heartbeat that predates our write arrives: still cordoned for us, nothing to decide.
        let mut late = view("n1", "a", Some(0));
        late.resource_version = "2".into();
        f.observe(Arc::new(late), now);
        assert_eq!(f.totals().cordoned, 1);
        let d = f.round(|_| None, |_| Vec::new(), now);
        assert!(d.iter().all(|(d, _)| d.action != Action::Cordon), "{d:?}");
        // Another node waits for the budget and is decided each round until a slot frees.
        f.observe(Arc::new(view("n2", "a", Some(0))), now);
        let d = f.round(|_| None, |_| Vec::new(), now);
        assert!(matches!(d[0].0.why, Why::CordonBudget { .. }));
        let d = f.round(|_| None, |_| Vec::new(), now);
        assert_eq!(d.len(), 1, "the waiting node is decided again");
    }

    #[test]
    fn a_pending_condition_wakes_its_node_when_the_min_duration_is_reached() {
        let mut f = Fleet::new(cfg(5));
        let start = t(0);
        f.observe(Arc::new(view("n1", "a", Some(0))), start);
        let d = f.round(|_| None, |_| Vec::new(), start);
        assert_eq!(d[0].0.action, Action::Wait);
        assert_eq!(f.next_wake(), Some(t(600)));
        assert!(f.round(|_| None, |_| Vec::new(), t(599)).is_empty());
        // Meanwhile the kubelet heartbeated: the cache has a newer resourceVersion, and the cordon
        // must be made against it.
        let mut beat = view("n1", "a", Some(0));
        beat.resource_version = "77".into();
        let beat = Arc::new(beat);
        let d = f.round(|_| Some(beat.clone()), |_| Vec::new(), t(600));
        assert_eq!(d[0].0.action, Action::Cordon);
        assert_eq!(d[0].1.resource_version, "77");
    }
}
