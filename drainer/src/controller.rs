//! The controller loop: on every change (or tick) while leading, decide every node (pure) and
//! hand each effect to the [`Actor`] (act), which alone writes. It logs a decision when it changes and
//! keeps one WaitingForBudget Event per wait.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Node;
use k8s_openapi::jiff::Timestamp;
use kube::runtime::reflector::Store;
use nodemedic_common::health::Health;
use tokio::sync::{Notify, watch};
use tokio::task::JoinHandle;

use crate::act::Actor;
use crate::config::Config;
use crate::decide::{self, Action, Effect, Why};
use crate::metrics::Metrics;
use crate::observe::PodCache;

pub(crate) struct Controller {
    cfg: Arc<Config>,
    nodes: Store<Node>,
    nodes_ready: watch::Receiver<bool>,
    pods: PodCache,
    actor: Actor,
    metrics: Metrics,
    health: Health,
    leader: watch::Receiver<bool>,
    /// Drains running in this process, by node.
    drains: HashMap<String, JoinHandle<()>>,
    /// Node -> resourceVersion we last wrote against; not acted on again until the store moves past it.
    acted: HashMap<String, String>,
    /// Last decision per node, without its numbers (decisions are logged when they change).
    last_why: HashMap<String, Why>,
    /// Nodes waiting for a budget: the wait episode's Event (one per episode, its count refreshed).
    waits: HashMap<String, BudgetWait>,
}

/// A node's current wait for a budget.
struct BudgetWait {
    budget: &'static str,
    event: Option<String>,
    count: i32,
    first_seen: Timestamp,
    noted_at: Timestamp,
}

/// How often a wait episode's Event count is refreshed while the node keeps waiting.
const WAIT_EVENT_REFRESH: Duration = Duration::from_secs(60);

impl Controller {
    pub(crate) fn new(
        cfg: Config,
        nodes: Store<Node>,
        nodes_ready: watch::Receiver<bool>,
        pods: PodCache,
        actor: Actor,
        metrics: Metrics,
        health: Health,
        leader: watch::Receiver<bool>,
    ) -> Controller {
        Controller {
            cfg: Arc::new(cfg),
            nodes,
            nodes_ready,
            pods,
            actor,
            metrics,
            health,
            leader,
            drains: HashMap::new(),
            acted: HashMap::new(),
            last_why: HashMap::new(),
            waits: HashMap::new(),
        }
    }

    pub(crate) async fn run(
        mut self,
        changed: Arc<Notify>,
        tick: Duration,
        mut stop: watch::Receiver<bool>,
    ) {
        let beat = self.health.register("controller", Duration::from_secs(60));
        let _ = self.nodes_ready.wait_for(|ready| *ready).await;
        while !self.pods.ready.load(std::sync::atomic::Ordering::Acquire) {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        self.health.set_ready(true);
        tracing::info!("node and pod caches synced");
        loop {
            tokio::select! {
                _ = stop.changed() => return,
                _ = changed.notified() => {}
                _ = tokio::time::sleep(tick) => {}
            }
            beat.beat();
            let leading = *self.leader.borrow();
            self.metrics.leader.set(leading as i64);
            if !leading {
                continue;
            }
            self.round().await;
        }
    }

    /// Keep one WaitingForBudget Event per wait episode: created when a node starts waiting for a
    /// budget, its count and last time refreshed at most every [`WAIT_EVENT_REFRESH`] while it waits
    /// (a stable message, so no Event storm), forgotten when the wait ends.
    async fn budget_wait(&mut self, node: &str, budget: Option<&'static str>, now: Timestamp) {
        let Some(budget) = budget else {
            self.waits.remove(node);
            return;
        };
        self.metrics.budget_wait(budget);
        let message = match budget {
            "cordons" => "waiting for the cordon budget (--max-cordoned) to free a slot",
            _ => "waiting for the drain budget (--max-drains-in-flight) to free a slot",
        };
        let w = match self.waits.get_mut(node) {
            Some(w) if w.budget == budget => {
                if now.duration_since(w.noted_at).unsigned_abs() < WAIT_EVENT_REFRESH {
                    return;
                }
                w.count += 1;
                w
            }
            _ => {
                self.waits.insert(
                    node.to_string(),
                    BudgetWait {
                        budget,
                        event: None,
                        count: 1,
                        first_seen: now,
                        noted_at: now,
                    },
                );
                self.waits.get_mut(node).expect("just inserted")
            }
        };
        w.noted_at = now;
        let ev = nodemedic_common::events::NodeEvent {
            source: crate::act::SOURCE.into(),
            severity: nodemedic_common::events::Severity::Normal,
            reason: "WaitingForBudget".into(),
            message: message.into(),
            count: w.count,
            first_seen: w.first_seen,
            last_seen: now,
        };
        w.event = self.actor.note_episode(node, w.event.take(), &ev).await;
    }

    async fn round(&mut self) {
        self.drains.retain(|_, t| !t.is_finished());
        let nodes = self.nodes.state();
        let pods = self.pods.snapshot();
        let now = Timestamp::now();
        let decisions = decide::decide_nodes(&nodes, &pods, &self.cfg, now);
        self.waits
            .retain(|n, _| nodes.iter().any(|x| x.metadata.name.as_deref() == Some(n)));
        // Plans come back in the order of `nodes`.
        for (d, node) in decisions.into_iter().zip(nodes.iter()) {
            let rv = node.metadata.resource_version.clone().unwrap_or_default();
            // Log a decision when it changes (numbers and durations aside); a node that stays
            // healthy is not news.
            let previous = self.last_why.insert(d.node.clone(), d.why.clone());
            let changed = previous.as_ref().map(Why::kind) != Some(d.why.kind());
            if changed
                && (d.action != Action::None || previous.is_some())
                && d.why != Why::NotSelected
            {
                tracing::info!(node = %d.node, action = ?d.action, reason = %d.reason, "decision");
            }
            let budget = match d.why {
                Why::CordonBudget { .. } => Some("cordons"),
                Why::DrainBudget { .. } => Some("drains"),
                _ => None,
            };
            self.budget_wait(&d.node, budget, now).await;
            if d.effect == Effect::Nothing {
                continue;
            }
            if self.acted.get(&d.node) == Some(&rv) && !matches!(d.effect, Effect::Drain(_)) {
                continue; // our last write is not in the cache yet
            }
            match d.effect {
                Effect::Nothing => {}
                Effect::Cordon(record) => {
                    self.actor.cordon(node, &record, self.cfg.skip_drain).await;
                    self.acted.insert(d.node.clone(), rv);
                }
                Effect::Uncordon => {
                    self.actor.uncordon(&d.node, &d.reason).await;
                    self.acted.insert(d.node.clone(), rv);
                }
                Effect::Release(record) => {
                    tracing::info!(node = %d.node, "uncordoned by a person: released for this problem episode");
                    let _ = self.actor.set_record(&d.node, Some(&record)).await;
                    self.acted.insert(d.node.clone(), rv);
                }
                Effect::Forget => {
                    let _ = self.actor.set_record(&d.node, None).await;
                    self.acted.insert(d.node.clone(), rv);
                }
                Effect::Drain(job) => {
                    if self.drains.contains_key(&d.node) {
                        continue;
                    }
                    let (actor, cfg, name) = (self.actor.clone(), self.cfg.clone(), d.node.clone());
                    let task = tokio::spawn(async move { actor.drain(&name, job, &cfg).await });
                    self.drains.insert(d.node.clone(), task);
                }
            }
        }
    }
}
