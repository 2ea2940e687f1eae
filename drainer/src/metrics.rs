//! The drainer's metrics: draino's names (dashboards keep working) plus our own.

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

type Labels = Vec<(String, String)>;

#[derive(Clone)]
pub struct Metrics {
    cordoned: Family<Labels, Counter>,
    uncordoned: Family<Labels, Counter>,
    drained: Family<Labels, Counter>,
    drain_scheduled: Family<Labels, Counter>,
    budget_waits: Family<Labels, Counter>,
    evictions: Family<Labels, Counter>,
    guard_requests: Family<Labels, Counter>,
    guard_cert_reloads: Family<Labels, Counter>,
    pub drain_duration: Histogram,
    pub leader: Gauge,
    pub stale_pods: Gauge,
    pub stale_reported: Counter,
    stale_evictions: Family<Labels, Counter>,
}

fn result(r: &str) -> Labels {
    vec![("result".to_string(), r.to_string())]
}

impl Metrics {
    pub fn register(registry: &mut Registry) -> Metrics {
        let m = Metrics {
            cordoned: Family::default(),
            uncordoned: Family::default(),
            drained: Family::default(),
            drain_scheduled: Family::default(),
            budget_waits: Family::default(),
            evictions: Family::default(),
            guard_requests: Family::default(),
            guard_cert_reloads: Family::default(),
            drain_duration: Histogram::new([10.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1200.0]),
            leader: Gauge::default(),
            stale_pods: Gauge::default(),
            stale_reported: Counter::default(),
            stale_evictions: Family::default(),
        };
        registry.register(
            "nodemedic_drainer_stale_pods",
            "Pods whose readiness is stale now (Ready=False, containers ready, node Ready a while)",
            m.stale_pods.clone(),
        );
        registry.register(
            "nodemedic_drainer_stale_pods_reported",
            "PodReadinessStale reports (one per pod per 10 minutes at most)",
            m.stale_reported.clone(),
        );
        registry.register(
            "nodemedic_drainer_stale_evictions",
            "Evictions of stale pods, by result",
            m.stale_evictions.clone(),
        );
        registry.register(
            "draino_cordoned_nodes",
            "Nodes cordoned, by result (draino name)",
            m.cordoned.clone(),
        );
        registry.register(
            "draino_uncordoned_nodes",
            "Nodes uncordoned, by result (draino name)",
            m.uncordoned.clone(),
        );
        registry.register(
            "draino_drained_nodes",
            "Node drains, by result (draino name)",
            m.drained.clone(),
        );
        registry.register(
            "draino_drain_scheduled_nodes",
            "Drains scheduled, by result (draino name)",
            m.drain_scheduled.clone(),
        );
        registry.register(
            "nodemedic_drainer_budget_waits",
            "Plan rounds in which a node waited for a budget, by budget",
            m.budget_waits.clone(),
        );
        registry.register(
            "nodemedic_drainer_evictions",
            "Pod evictions, by result",
            m.evictions.clone(),
        );
        registry.register(
            "nodemedic_guard_requests",
            "Admission requests to the Kosmos guard, by decision",
            m.guard_requests.clone(),
        );
        registry.register(
            "nodemedic_guard_certificate_reloads",
            "Reloads of the guard's serving certificate after its files changed, by result",
            m.guard_cert_reloads.clone(),
        );
        registry.register(
            "nodemedic_drainer_drain_duration_seconds",
            "Time from drain start to its end",
            m.drain_duration.clone(),
        );
        registry.register(
            "nodemedic_drainer_is_leader",
            "1 while this replica holds the lease",
            m.leader.clone(),
        );
        m
    }
    pub fn cordoned(&self, r: &str) {
        self.cordoned.get_or_create(&result(r)).inc();
    }
    pub fn uncordoned(&self, r: &str) {
        self.uncordoned.get_or_create(&result(r)).inc();
    }
    pub fn drained(&self, r: &str) {
        self.drained.get_or_create(&result(r)).inc();
    }
    pub fn drain_scheduled(&self, r: &str) {
        self.drain_scheduled.get_or_create(&result(r)).inc();
    }
    pub fn budget_wait(&self, budget: &str) {
        self.budget_waits
            .get_or_create(&vec![("budget".to_string(), budget.to_string())])
            .inc();
    }
    pub fn guard_request(&self, decision: &str) {
        self.guard_requests
            .get_or_create(&vec![("decision".to_string(), decision.to_string())])
            .inc();
    }
    pub fn guard_cert_reload(&self, r: &str) {
        self.guard_cert_reloads.get_or_create(&result(r)).inc();
    }
    pub fn stale_eviction(&self, r: &str) {
        self.stale_evictions.get_or_create(&result(r)).inc();
    }
    pub fn eviction(&self, r: &str) {
        self.evictions.get_or_create(&result(r)).inc();
    }
}
