//! The guard's HTTPS endpoint: `POST /validate` with an `admission.k8s.io/v1` AdmissionReview.
//! Certificates are re-read when their files change (a renewed Secret swaps its `..data` symlink).

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use k8s_openapi::api::core::v1::Node;
use k8s_openapi::jiff::Timestamp;
use kube::core::DynamicObject;
use kube::core::admission::{AdmissionRequest, AdmissionResponse, AdmissionReview};
use kube::runtime::reflector::{ObjectRef, Store};
use nodemedic_common::events::{NodeEvent, NodeEvents, Severity};

use super::{Decision, GuardConfig, NodeState, Request, decide};
use crate::metrics::Metrics;

#[derive(Debug, Clone)]
pub struct GuardOptions {
    pub listen: SocketAddr,
    pub cert: PathBuf,
    pub key: PathBuf,
    pub config: GuardConfig,
}

/// Pod (namespace, name) -> its node, from the controller's pod cache (for evictions, whose request
/// does not carry the pod).
pub type PodNode = Arc<dyn Fn(&str, &str) -> Option<String> + Send + Sync>;

/// At most one Event per node in this interval; blocked deletions in between are counted into it.
const EVENT_INTERVAL: Duration = Duration::from_secs(60);

#[derive(Clone)]
struct Guard {
    config: Arc<GuardConfig>,
    nodes: Store<Node>,
    nodes_synced: Arc<AtomicBool>,
    pod_node: PodNode,
    metrics: Metrics,
    events: Option<kube::Client>,
    /// node -> (last Event written, deletions blocked since)
    blocked: Arc<Mutex<HashMap<String, (Option<Instant>, u32)>>>,
}

impl Guard {
    fn node_state(&self, req: &Request) -> NodeState {
        if !self.nodes_synced.load(Ordering::Acquire) {
            return NodeState::NotSynced;
        }
        let Some(name) = req
            .node
            .clone()
            .or_else(|| (self.pod_node)(&req.namespace, &req.pod))
        else {
            return NodeState::Unknown;
        };
        match self.nodes.get(&ObjectRef::new(&name)) {
            None => NodeState::Unknown,
            Some(n) => NodeState::Known {
                name,
                labels: n.metadata.labels.clone().unwrap_or_default(),
                ready: n
                    .status
                    .as_ref()
                    .and_then(|s| s.conditions.as_ref())
                    .and_then(|c| c.iter().find(|c| c.type_ == "Ready"))
                    .map(|c| c.status.clone()),
            },
        }
    }

    /// Record a blocked deletion; returns the Event to write, if one is due.
    fn blocked_event(&self, node: &str, req: &Request) -> Option<NodeEvent> {
        let mut map = self.blocked.lock().unwrap();
        let entry = map.entry(node.to_string()).or_insert((None, 0));
        entry.1 += 1;
        if entry.0.is_some_and(|t| t.elapsed() < EVENT_INTERVAL) {
            return None;
        }
        let count = std::mem::take(&mut entry.1);
        entry.0 = Some(Instant::now());
        let now = Timestamp::now();
        Some(NodeEvent {
            source: "nodemedic-guard".into(),
            severity: Severity::Warning,
            reason: "PodDeletionBlocked".into(),
            message: format!(
                "blocked {count} pod deletion(s) by {} while the node is not Ready (latest: {}/{})",
                req.user, req.namespace, req.pod
            ),
            count: count as i32,
            first_seen: now,
            last_seen: now,
        })
    }
}

async fn validate(State(g): State<Guard>, body: Bytes) -> Response {
    let review: AdmissionReview<DynamicObject> = match serde_json::from_slice(&body) {
        Ok(r) => r,
        Err(e) => {
            g.metrics.guard_request("malformed");
            return (
                StatusCode::BAD_REQUEST,
                format!("malformed AdmissionReview (expected admission.k8s.io/v1 JSON): {e}\n"),
            )
                .into_response();
        }
    };
    let req: AdmissionRequest<DynamicObject> = match review.try_into() {
        Ok(r) => r,
        Err(_) => {
            g.metrics.guard_request("malformed");
            return (
                StatusCode::BAD_REQUEST,
                "malformed AdmissionReview: it has no request\n",
            )
                .into_response();
        }
    };
    let request = Request::from_admission(&req);
    let node = g.node_state(&request);
    let decision = decide(&request, &node, &g.config);
    g.metrics.guard_request(decision.label());
    let mut response = AdmissionResponse::from(&req);
    // The reason lands in the API server's audit log: why a deletion was let through or not.
    let why = match &decision {
        Decision::Allow(why) => why.to_string(),
        Decision::Deny(_) => "denied: kosmos-leaf-not-ready".to_string(),
    };
    response
        .audit_annotations
        .insert("guard.nodemedic.io/decision".into(), why);
    let response = match decision {
        Decision::Allow(_) => response,
        Decision::Deny(msg) => {
            tracing::warn!(pod = %format!("{}/{}", request.namespace, request.pod), user = %request.user, "{msg}");
            // No side effects for dry-run requests (the webhook declares sideEffects: NoneOnDryRun).
            if let (NodeState::Known { name, .. }, Some(client), false) =
                (&node, &g.events, req.dry_run)
            {
                if let Some(ev) = g.blocked_event(name, &request) {
                    let (client, name) = (client.clone(), name.clone());
                    tokio::spawn(async move {
                        if let Err(e) = NodeEvents::new(client, &name).create(&ev).await {
                            tracing::warn!(node = %name, error = %e, "cannot write the guard event");
                        }
                    });
                }
            }
            response.deny(msg)
        }
    };
    axum::Json(response.into_review()).into_response()
}

/// Start the guard; returns its bound address.
pub async fn start(
    opts: GuardOptions,
    nodes: Store<Node>,
    nodes_ready: tokio::sync::watch::Receiver<bool>,
    pod_node: PodNode,
    metrics: Metrics,
    events: Option<kube::Client>,
) -> anyhow::Result<SocketAddr> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let tls = axum_server::tls_rustls::RustlsConfig::from_pem_file(&opts.cert, &opts.key)
        .await
        .map_err(|e| {
            anyhow::anyhow!(
                "guard TLS: cannot load {} / {}: {e}",
                opts.cert.display(),
                opts.key.display()
            )
        })?;
    let nodes_synced = Arc::new(AtomicBool::new(false));
    {
        let (mut ready, flag) = (nodes_ready, nodes_synced.clone());
        tokio::spawn(async move {
            if ready.wait_for(|r| *r).await.is_ok() {
                flag.store(true, Ordering::Release);
            }
        });
    }
    let guard = Guard {
        config: Arc::new(opts.config.clone()),
        nodes,
        nodes_synced,
        pod_node,
        metrics,
        events,
        blocked: Arc::default(),
    };
    let app = Router::new()
        .route("/validate", post(validate))
        .with_state(guard);
    let handle = axum_server::Handle::new();
    let server = axum_server::bind_rustls(opts.listen, tls.clone()).handle(handle.clone());
    tokio::spawn(async move {
        if let Err(e) = server.serve(app.into_make_service()).await {
            tracing::error!(error = %e, "guard server stopped");
        }
    });
    spawn_reload(tls, opts.cert.clone(), opts.key.clone());
    let addr = handle
        .listening()
        .await
        .ok_or_else(|| anyhow::anyhow!("guard: cannot listen on {}", opts.listen))?;
    tracing::info!(%addr, "guard serving POST /validate over HTTPS");
    Ok(addr)
}

/// Re-read the certificate and key when their directory changes; a bad pair keeps the old one.
fn spawn_reload(tls: axum_server::tls_rustls::RustlsConfig, cert: PathBuf, key: PathBuf) {
    use notify::{RecursiveMode, Watcher};
    let (tx, mut rx) = tokio::sync::mpsc::channel::<()>(8);
    let mut watcher = match notify::recommended_watcher(move |r: notify::Result<notify::Event>| {
        if r.is_ok() {
            let _ = tx.try_send(());
        }
    }) {
        Ok(w) => w,
        Err(e) => {
            tracing::error!(error = %e, "cannot watch the guard certificate; it will not be reloaded");
            return;
        }
    };
    for dir in [cert.parent(), key.parent()].into_iter().flatten() {
        let _ = watcher.watch(dir, RecursiveMode::NonRecursive);
    }
    tokio::spawn(async move {
        let _watcher = watcher;
        while rx.recv().await.is_some() {
            tokio::time::sleep(Duration::from_millis(300)).await;
            while rx.try_recv().is_ok() {}
            match tls.reload_from_pem_file(&cert, &key).await {
                Ok(()) => tracing::info!(cert = %cert.display(), "guard certificate reloaded"),
                Err(e) => {
                    tracing::error!(error = %e, "guard certificate reload failed; keeping the previous one")
                }
            }
        }
    });
}
