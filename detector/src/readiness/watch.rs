//! The I/O shell of stale-readiness detection: watch this node and its pods, report stale pods with
//! a Warning Event (`PodReadinessStale`) and a metric, and, when enabled, evict them through the
//! Eviction API so their controllers recreate them (a PodDisruptionBudget's 429 is retried on the next
//! round; exempt pods are never evicted).

use std::collections::HashMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, ObjectReference, Pod};
use k8s_openapi::jiff::Timestamp;
use kube::api::Api;
use kube::runtime::watcher;
use nodemedic_common::events::{NodeEvent, Severity, create_for};
use nodemedic_common::evict::Evicted;
use nodemedic_common::health::Health;
use tokio::sync::{Notify, watch};

use crate::metrics::Metrics;

#[derive(Debug, Clone)]
pub struct StaleOptions {
    /// The node must have been Ready this long (default 2m).
    pub threshold: Duration,
    /// Evict stale pods (default off).
    pub evict: bool,
    /// Re-check at least this often.
    pub interval: Duration,
}

impl Default for StaleOptions {
    fn default() -> Self {
        StaleOptions {
            threshold: Duration::from_secs(120),
            evict: false,
            interval: Duration::from_secs(15),
        }
    }
}

/// Report one stale pod again only after this long (one Event per episode, not per round).
const REPORT_EVERY: Duration = Duration::from_secs(600);

pub async fn run(
    client: kube::Client,
    node_name: String,
    opts: StaleOptions,
    metrics: Metrics,
    health: Health,
    mut stop: watch::Receiver<bool>,
) {
    let changed = std::sync::Arc::new(Notify::new());
    let by_node = watcher::Config::default().fields(&format!("spec.nodeName={node_name}"));
    let (pods, _) = nodemedic_common::runtime::watch_store(
        Api::<Pod>::all(client.clone()),
        by_node,
        changed.clone(),
        |_| {},
    );
    let this_node = watcher::Config::default().fields(&format!("metadata.name={node_name}"));
    let (nodes, _) = nodemedic_common::runtime::watch_store(
        Api::<Node>::all(client.clone()),
        this_node,
        changed.clone(),
        |_| {},
    );
    let beat = health.register("stale-readiness", Duration::from_secs(120));
    let mut reported: HashMap<String, Timestamp> = HashMap::new();
    loop {
        tokio::select! {
            _ = stop.changed() => return,
            _ = changed.notified() => {}
            _ = tokio::time::sleep(opts.interval) => {}
        }
        beat.beat();
        let Some(node) = nodes.state().into_iter().next() else {
            continue;
        };
        let now = Timestamp::now();
        let all = pods.state();
        let stale = super::stale_pods(&node, all.iter().map(|p| p.as_ref()), opts.threshold, now);
        metrics.stale_pods.set(stale.len() as i64);
        reported.retain(|uid, _| stale.iter().any(|s| s.uid.as_deref() == Some(uid)));
        for s in stale {
            let key = s
                .uid
                .clone()
                .unwrap_or_else(|| format!("{}/{}", s.namespace, s.name));
            let due = reported.get(&key).is_none_or(|t| *t + REPORT_EVERY <= now);
            if due {
                reported.insert(key, now);
                metrics.stale_reported.inc();
                let action = match (&s.exempt, opts.evict) {
                    (Some(why), _) => format!("never evicted ({why})"),
                    (None, true) => "evicting it so its controller recreates it".to_string(),
                    (None, false) => "not evicted (enable with --evict-stale-pods)".to_string(),
                };
                let message = format!(
                    "Pod is Ready=False although all its containers are ready, and its node {node_name} has been Ready for over {}: \
                     the readiness is stale (left from a node flap) and Services exclude the pod; {action}",
                    humantime::format_duration(opts.threshold)
                );
                tracing::warn!(pod = %format!("{}/{}", s.namespace, s.name), "{message}");
                let ev = NodeEvent {
                    source: "nodemedic-detector".into(),
                    severity: Severity::Warning,
                    reason: "PodReadinessStale".into(),
                    message,
                    count: 1,
                    first_seen: now,
                    last_seen: now,
                };
                let reference = ObjectReference {
                    api_version: Some("v1".into()),
                    kind: Some("Pod".into()),
                    name: Some(s.name.clone()),
                    namespace: Some(s.namespace.clone()),
                    uid: s.uid.clone(),
                    ..Default::default()
                };
                if let Err(e) =
                    create_for(client.clone(), &s.namespace, reference, &node_name, &ev).await
                {
                    metrics.report_error("events");
                    tracing::warn!(error = %e, "cannot write the PodReadinessStale event");
                }
            }
            if opts.evict && s.exempt.is_none() {
                match nodemedic_common::evict::evict(&client, &s.namespace, &s.name, None).await {
                    Ok(Evicted::Accepted | Evicted::Gone) => metrics.stale_eviction("succeeded"),
                    Ok(Evicted::Refused(_)) => {
                        metrics.stale_eviction("pdb_refused");
                        tracing::info!(pod = %format!("{}/{}", s.namespace, s.name), "eviction refused by a PodDisruptionBudget; retried next round");
                    }
                    Err(e) => {
                        metrics.stale_eviction("failed");
                        tracing::warn!(error = %e, "stale pod eviction failed; retried next round");
                    }
                }
            }
        }
    }
}
