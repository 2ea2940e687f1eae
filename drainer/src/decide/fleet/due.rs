//! A round over the fleet, pure: which nodes are due, the safety gates brought up to date (their
//! changes become [`FleetEvent`]s), the decisions of [`decide_some`] for the due nodes, and what
//! those decisions mean for the next rounds (waits, holds, wake-ups).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use k8s_openapi::jiff::Timestamp;

use super::queue::GatesKey;
use super::{Fleet, FleetEvent};
use crate::decide::gates::Gates;
use crate::decide::gates::breaker::BreakerChange;
use crate::decide::gates::flap::FlapGate;
use crate::decide::gates::outage::{self, OutageGate};
use crate::decide::gates::peer::Peer;
use crate::decide::gates::window;
use crate::decide::ladder::why::LadderWhy;
use crate::decide::{Action, Candidate, NodeDecision, Why, decide_some};
use crate::model::intern::ArcStr;
use crate::model::node::NodeView;

impl Fleet {
    /// The gates at `now`: the breaker and the outages are brought up to date from the running
    /// totals first (their changes become events).
    fn gates(&mut self, now: Timestamp) -> Gates {
        let cfg = self.cfg.clone();
        let s = &cfg.safety;
        self.correlate(now);
        self.pace(now);
        let health = self.running.health(s.breaker_window, now);
        match self.safety.breaker.observe(&health, s, now) {
            Some(BreakerChange::Opened(trip)) => {
                let cause = self.safety.cause.clone();
                self.events.push(FleetEvent::BreakerOpened { trip, cause })
            }
            Some(BreakerChange::Closed { open_for }) => {
                self.events.push(FleetEvent::BreakerClosed { open_for })
            }
            None => {}
        }
        let window_start = nodemedic_common::time::sub(now, s.breaker_window);
        self.safety.newly_wake = self
            .running
            .unhealthy_since
            .range(window_start..)
            .next()
            .map(|(t, _)| nodemedic_common::time::add(*t, s.breaker_window))
            .filter(|at| *at > now && self.safety.breaker.is_open());
        let mut domains = BTreeMap::new();
        let mut outages = BTreeMap::new();
        for (d, t) in &self.running.domains {
            domains.insert(d.clone(), *t);
            if let Some(mut o) = outage::outage(d, t, s) {
                o.cause = self.safety.cause.clone();
                outages.insert(d.to_string(), o);
            }
        }
        for (d, o) in &outages {
            if !self.safety.outages.contains(d) {
                self.events.push(FleetEvent::OutageStarted(o.clone()));
            }
        }
        for d in &self.safety.outages {
            if !outages.contains_key(d) {
                self.events
                    .push(FleetEvent::OutageEnded { domain: d.clone() });
            }
        }
        self.safety.outages = outages.keys().cloned().collect();
        Gates {
            pause: self.safety.paused.clone(),
            peers: self.safety.peers.clone(),
            flap: FlapGate {
                window: s.flap_window,
            },
            breaker: self.safety.breaker.hold(s).map(|mut b| {
                b.cause = self.safety.cause.clone();
                b
            }),
            outage: OutageGate { outages },
            domains,
            window: window::next_window(&s.drain_windows, now),
            replaced: self.records.seen.replaced_within_the_hour(now),
            pace: self
                .records
                .seen
                .pace
                .domains
                .iter()
                .map(|(d, p)| (d.clone(), p.width))
                .collect(),
            remediating: self
                .running
                .remediating
                .iter()
                .map(|(d, n)| (d.to_string(), n.len()))
                .collect(),
            under_way: crate::decide::gates::resume::UnderWay {
                order: (self.running.remediating.iter())
                    .map(|(d, n)| (d.to_string(), n.iter().map(|(_, n)| n.clone()).collect()))
                    .collect(),
                withheld: self.running.withheld.clone(),
            },
            pods_listed: !self.safety.pods_pending,
        }
    }

    /// Decide the nodes that changed, whose time came, or that wait for a budget, from what the
    /// fleet holds (views, pods, records); decisions come with the view they were made on.
    ///
    /// Kubelet heartbeats do not reach the fleet, so that view may carry the resourceVersion of the
    /// node's last state change: the controller writes against the cache's newer one when its state
    /// is the same (`controller::round::latest_to_write`).
    pub fn round(&mut self, now: Timestamp) -> Vec<(NodeDecision, Arc<NodeView>)> {
        let mut names = self.due(now);
        let gates = self.gates(now);
        let key = GatesKey {
            paused: gates.pause.is_some(),
            breaker: gates.breaker.is_some(),
            outages: gates.outage.outages.keys().cloned().collect(),
            window: gates.window.is_ok(),
            pods_listed: gates.pods_listed,
            kured: gates.peers.kured.as_ref().map(|(_, lock)| lock.clone()),
        };
        if self.queue.last_gates.as_ref() != Some(&key) {
            // A gate opened or closed: what it held is decided again, and every request that
            // stands (a gate that closes withdraws it).
            for n in std::mem::take(&mut self.queue.held) {
                if self.nodes.contains_key(&n) {
                    names.insert(n);
                }
            }
            names.extend(self.running.reboots.keys().cloned());
            self.queue.last_gates = Some(key);
        }
        let s = &self.cfg.safety;
        let candidates: Vec<Candidate> = names
            .iter()
            .map(|n| {
                let e = &self.nodes[n];
                Candidate {
                    node: &e.view,
                    selected: e.selected,
                    record: e.record.as_deref(),
                    pods: e.pods.iter().flat_map(|p| p.iter()).map(|p| &**p).collect(),
                    domain: e.domain.as_deref(),
                    flapping: self.safety.flaps.get(n).and_then(|f| f.flapping(now, s)),
                    silent: self.safety.silent.get(n).map(|s| s.declared),
                    symptoms: Some(self.safety.symptoms.get(n).map_or(&[][..], |s| &s[..])),
                    newest: self.records.seen.nodes.get(n.as_str()).map(|n| n.at),
                    reboots_today: self.records.seen.reboots_today(n, now),
                    gave_up: self.gave_up(n),
                }
            })
            .collect();
        let decisions = decide_some(&candidates, &self.running.totals(), &gates, &self.cfg, now);
        let flaps = self.visible_flaps(&candidates);
        drop(candidates);
        self.report_flaps(flaps);
        decisions.into_iter().map(|d| self.track(d, now)).collect()
    }

    /// The nodes due this round: changed, woken by the clock, or waiting for a budget.
    fn due(&mut self, now: Timestamp) -> BTreeSet<ArcStr> {
        while let Some((at, _)) = self.queue.wakes.first()
            && *at <= now
        {
            let Some((_, name)) = self.queue.wakes.pop_first() else {
                break;
            };
            if let Some(e) = self.nodes.get_mut(&name) {
                e.wake = None;
            }
            self.queue.dirty.insert(name);
        }
        std::mem::take(&mut self.queue.dirty)
            .into_iter()
            .chain(self.queue.waiting.names().cloned())
            .filter(|n| self.nodes.contains_key(n))
            .collect()
    }

    /// Whether each candidate flaps now, for the nodes this drainer selects or holds a record of
    /// (the rest are invisible to it).
    fn visible_flaps(&self, candidates: &[Candidate]) -> Vec<(ArcStr, Option<usize>)> {
        let owner = &self.cfg.owner;
        candidates
            .iter()
            .map(|c| {
                let visible = c.selected
                    || c.record
                        .is_some_and(|r| r.owner.is_empty() || r.owner == *owner);
                let flapping = c.flapping.filter(|_| visible).map(|f| f.changes);
                (c.node.name.clone(), flapping)
            })
            .collect()
    }

    /// A flapping episode is reported once: it ends when the node has been stable for the window,
    /// not when a decision happens not to need the fact (a healthy moment between flaps).
    fn report_flaps(&mut self, flaps: Vec<(ArcStr, Option<usize>)>) {
        for (node, flapping) in flaps {
            match flapping {
                Some(changes) => {
                    if self.safety.flapping.insert(node.clone()) {
                        let node = node.to_string();
                        self.events.push(FleetEvent::Flapping { node, changes });
                    }
                }
                None => {
                    self.safety.flapping.remove(&node);
                }
            }
        }
    }

    /// Keep what a decision says about the next rounds (a wait, a hold, a wake-up); with its view.
    fn track(&mut self, d: NodeDecision, now: Timestamp) -> (NodeDecision, Arc<NodeView>) {
        if let Why::Ladder(LadderWhy::SlowStart { domain, .. }) = &d.why {
            let changed = self.records.seen.pace.wanted(domain);
            self.records.fleet_changed(changed);
        }
        let withheld = matches!(d.why, Why::Ladder(LadderWhy::RequestHeld { .. }));
        let changed = if withheld {
            self.running.withheld.insert(d.node.clone())
        } else {
            self.running.withheld.remove(&d.node)
        };
        self.running.reboots_changed |= changed;
        match &d.why {
            Why::CordonBudget { .. }
            | Why::DrainBudget { .. }
            | Why::DomainBudget { .. }
            // A withheld request: its place in the slow start may come any round.
            | Why::Ladder(
                LadderWhy::SlowStart { .. }
                | LadderWhy::ReplaceBudget { .. }
                | LadderWhy::RequestHeld { .. },
            ) => {
                let refresh = self.cfg.event_refresh;
                self.queue
                    .waiting
                    .wait(&d.node, d.why.budget(), now, refresh);
            }
            _ => {
                self.queue.waiting.end(&d.node);
                // A peer's lock is a gate too: what waits for it is decided again when it changes.
                if d.action() == Action::Hold || matches!(d.why, Why::WaitingForPeer { .. }) {
                    self.queue.held.insert(d.node.clone());
                }
            }
        }
        match d.wake {
            Some(at) => self.wake_at(&d.node, at),
            None => self.unwake(&d.node),
        }
        let at_rest = matches!(d.action(), Action::None | Action::Skip)
            && d.wake.is_none()
            && matches!(
                d.why,
                Why::Healthy
                    | Why::NotSelected
                    | Why::Excluded { .. }
                    | Why::KosmosExempt { .. }
                    | Why::OwnedByOther(_)
            );
        let e = self
            .nodes
            .get_mut(&d.node)
            .expect("a decided node is in the fleet: round() decides only nodes it holds");
        e.at_rest = at_rest;
        let view = e.view.clone();
        let taken = (d.action() == Action::Hold)
            .then(|| self.safety.peers.taken(&view))
            .flatten();
        self.report_peer(&d.node, taken);
        (d, view)
    }

    /// A node held as another remediator's is reported once, when the hold starts.
    fn report_peer(&mut self, node: &ArcStr, taken: Option<(Peer, String)>) {
        match taken {
            Some((peer, how)) => {
                if self.safety.left_to_peer.insert(node.clone()) {
                    let node = node.to_string();
                    let taken = crate::decide::facts::Taken { node, peer, how };
                    self.events.push(FleetEvent::LeftToPeer(taken));
                }
            }
            None => {
                self.safety.left_to_peer.remove(node);
            }
        }
    }
}
