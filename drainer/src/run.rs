//! The controller: observe (reflectors) -> decide (pure plan) -> act (only while leading) -> record.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use futures::StreamExt;
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::jiff::Timestamp;
use kube::Api;
use kube::runtime::reflector::Store;
use kube::runtime::watcher;
use nodemedic_common::health::Health;
use prometheus_client::registry::Registry;
use tokio::sync::{Notify, watch};
use tokio::task::JoinHandle;

use crate::act::Actor;
use crate::config::Config;
use crate::decide::{self, Action, Effect, PodAction, PodInfo, Why};
use crate::leader::{self, LeaseConfig};
use crate::metrics::Metrics;
use crate::record::Record;

pub struct Options {
    pub config: Config,
    pub listen: SocketAddr,
    pub lease: LeaseConfig,
    /// Re-plan at least this often (changes also trigger a plan at once).
    pub tick: Duration,
    /// The Kosmos eviction guard webhook (served by every replica, leader or not).
    pub guard: Option<crate::guard::server::GuardOptions>,
}

pub struct Running {
    pub addr: SocketAddr,
    /// The guard's HTTPS address, when enabled.
    pub guard_addr: Option<SocketAddr>,
    pub leader: watch::Receiver<bool>,
    stop: watch::Sender<bool>,
    tasks: Vec<JoinHandle<()>>,
    election: JoinHandle<()>,
}

impl Running {
    /// Stop: the controller and the watches first (no write after this), then the election, which
    /// releases the Lease if we hold it (bounded: a hung API server does not hold up the exit).
    pub async fn shutdown(self) {
        let _ = self.stop.send(true);
        for t in self.tasks {
            t.abort();
            let _ = t.await;
        }
        let mut election = self.election;
        if tokio::time::timeout(Duration::from_secs(5), &mut election)
            .await
            .is_err()
        {
            election.abort();
        }
    }
}

/// The pod cache: compact [`PodInfo`]s by (namespace, name), fed by a watcher. A full `Pod` is
/// several KiB even when empty fields are dropped; 50,000 of them dominate the controller's memory.
#[derive(Clone, Default)]
struct PodCache {
    pods: Arc<std::sync::RwLock<HashMap<(String, String), Arc<PodInfo>>>>,
    ready: Arc<std::sync::atomic::AtomicBool>,
}

impl PodCache {
    fn snapshot(&self) -> Vec<Arc<PodInfo>> {
        self.pods.read().unwrap().values().cloned().collect()
    }

    fn spawn(&self, api: Api<Pod>, keep: Vec<String>, changed: Arc<Notify>) -> JoinHandle<()> {
        let cache = self.clone();
        tokio::spawn(async move {
            let stream = watcher(api, watcher::Config::default());
            futures::pin_mut!(stream);
            let mut relist: Option<HashMap<(String, String), Arc<PodInfo>>> = None;
            while let Some(ev) = stream.next().await {
                let key = |p: &Pod| {
                    (
                        p.metadata.namespace.clone().unwrap_or_default(),
                        p.metadata.name.clone().unwrap_or_default(),
                    )
                };
                match ev {
                    Ok(watcher::Event::Apply(p)) => {
                        cache
                            .pods
                            .write()
                            .unwrap()
                            .insert(key(&p), Arc::new(PodInfo::from_pod(&p, Some(&keep))));
                    }
                    Ok(watcher::Event::Delete(p)) => {
                        cache.pods.write().unwrap().remove(&key(&p));
                    }
                    Ok(watcher::Event::Init) => relist = Some(HashMap::new()),
                    Ok(watcher::Event::InitApply(p)) => {
                        relist
                            .get_or_insert_with(HashMap::new)
                            .insert(key(&p), Arc::new(PodInfo::from_pod(&p, Some(&keep))));
                    }
                    Ok(watcher::Event::InitDone) => {
                        *cache.pods.write().unwrap() = relist.take().unwrap_or_default();
                        cache
                            .ready
                            .store(true, std::sync::atomic::Ordering::Release);
                    }
                    Err(e) => tracing::warn!(error = %e, "pod watch error; the watcher retries"),
                }
                changed.notify_one();
            }
        })
    }
}

pub async fn start(opts: Options, client: kube::Client) -> anyhow::Result<Running> {
    let mut registry = Registry::default();
    let metrics = Metrics::register(&mut registry);
    let health = Health::default();
    let app = nodemedic_common::serve::router(Arc::new(registry), health.clone());
    let addr = nodemedic_common::serve::spawn(opts.listen, app)
        .await
        .with_context(|| format!("cannot listen on {}", opts.listen))?;
    tracing::info!(%addr, "serving /metrics /healthz /readyz");

    let (stop_tx, stop_rx) = watch::channel(false);
    let (leader_tx, leader_rx) = watch::channel(false);
    let changed = Arc::new(Notify::new());
    let (nodes, t1) = nodemedic_common::runtime::watch_store(
        Api::<Node>::all(client.clone()),
        watcher::Config::default(),
        changed.clone(),
        |n: &mut Node| n.metadata.managed_fields = None,
    );
    let pods = PodCache::default();
    let t2 = pods.spawn(
        Api::<Pod>::all(client.clone()),
        crate::decide::pods::kept_annotations(&opts.config),
        changed.clone(),
    );
    // One task waits for the node cache: kube's Store::wait_until_ready wakes only the last of several
    // concurrent waiters (one oneshot receiver behind it), so the controller and the guard share this.
    let (nodes_ready_tx, nodes_ready) = watch::channel(false);
    {
        let nodes = nodes.clone();
        tokio::spawn(async move {
            let _ = nodes.wait_until_ready().await;
            let _ = nodes_ready_tx.send(true);
        });
    }
    let guard_addr = match opts.guard.clone() {
        None => None,
        Some(g) => {
            let cache = pods.clone();
            let pod_node: crate::guard::server::PodNode = Arc::new(move |ns: &str, name: &str| {
                cache
                    .pods
                    .read()
                    .unwrap()
                    .get(&(ns.to_string(), name.to_string()))
                    .and_then(|p| p.node.clone())
            });
            Some(
                crate::guard::server::start(
                    g,
                    nodes.clone(),
                    nodes_ready.clone(),
                    pod_node,
                    metrics.clone(),
                    Some(client.clone()),
                )
                .await?,
            )
        }
    };
    let t3 = tokio::spawn(leader::run(
        client.clone(),
        opts.lease.clone(),
        leader_tx,
        stop_rx.clone(),
    ));
    let actor = Actor::new(client, metrics.clone(), opts.config.dry_run);
    // A drainer is known by its Lease name: its records carry it, and it acts only on its own.
    let mut config = opts.config;
    config.owner = opts.lease.name.clone();
    let controller = Controller {
        cfg: Arc::new(config),
        nodes,
        nodes_ready,
        pods,
        actor,
        metrics,
        health,
        leader: leader_rx.clone(),
        drains: HashMap::new(),
        acted: HashMap::new(),
        last_why: HashMap::new(),
        waits: HashMap::new(),
    };
    let t4 = tokio::spawn(controller.run(changed, opts.tick, stop_rx));
    Ok(Running {
        addr,
        guard_addr,
        leader: leader_rx,
        stop: stop_tx,
        tasks: vec![t1, t2, t4],
        election: t3,
    })
}

struct Controller {
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
    async fn run(mut self, changed: Arc<Notify>, tick: Duration, mut stop: watch::Receiver<bool>) {
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
        let plans = decide::plan(&nodes, &pods, &self.cfg, now);
        self.waits
            .retain(|n, _| nodes.iter().any(|x| x.metadata.name.as_deref() == Some(n)));
        // Plans come back in the order of `nodes`.
        for (plan, node) in plans.into_iter().zip(nodes.iter()) {
            let rv = node.metadata.resource_version.clone().unwrap_or_default();
            // Log a decision when it changes (numbers and durations aside); a node that stays
            // healthy is not news.
            let previous = self.last_why.insert(plan.node.clone(), plan.why.clone());
            let changed = previous.as_ref().map(Why::kind) != Some(plan.why.kind());
            if changed
                && (plan.action != Action::None || previous.is_some())
                && plan.why != Why::NotSelected
            {
                tracing::info!(node = %plan.node, action = ?plan.action, reason = %plan.reason, "decision");
            }
            let budget = match plan.why {
                Why::CordonBudget { .. } => Some("cordons"),
                Why::DrainBudget { .. } => Some("drains"),
                _ => None,
            };
            self.budget_wait(&plan.node, budget, now).await;
            if plan.effect == Effect::Nothing {
                continue;
            }
            if self.acted.get(&plan.node) == Some(&rv) && plan.effect != Effect::Drain {
                continue; // our last write is not in the cache yet
            }
            match plan.effect {
                Effect::Nothing => {}
                Effect::Cordon(record) => {
                    self.actor.cordon(node, &record, self.cfg.skip_drain).await;
                    self.acted.insert(plan.node.clone(), rv);
                }
                Effect::Uncordon => {
                    self.actor.uncordon(&plan.node, &plan.reason).await;
                    self.acted.insert(plan.node.clone(), rv);
                }
                Effect::Release(record) => {
                    tracing::info!(node = %plan.node, "uncordoned by a person: released for this problem episode");
                    let _ = self.actor.set_record(&plan.node, Some(&record)).await;
                    self.acted.insert(plan.node.clone(), rv);
                }
                Effect::Forget => {
                    let _ = self.actor.set_record(&plan.node, None).await;
                    self.acted.insert(plan.node.clone(), rv);
                }
                Effect::Drain => {
                    if self.drains.contains_key(&plan.node) {
                        continue;
                    }
                    let Some(record) = Record::of(node) else {
                        continue;
                    };
                    let evict: Vec<PodInfo> = plan
                        .pods
                        .iter()
                        .filter(|p| p.action == PodAction::Evict)
                        .filter_map(|p| {
                            pods.iter()
                                .find(|x| x.name == p.name && x.namespace == p.namespace)
                                .map(|x| (**x).clone())
                        })
                        .collect();
                    let (actor, cfg, leader, name) = (
                        self.actor.clone(),
                        self.cfg.clone(),
                        self.leader.clone(),
                        plan.node.clone(),
                    );
                    let task = tokio::spawn(async move {
                        actor.drain(&name, record, evict, &cfg, leader).await
                    });
                    self.drains.insert(plan.node.clone(), task);
                }
            }
        }
    }
}
