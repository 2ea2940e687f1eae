//! The guard's HTTPS endpoint: `POST /validate` with an `admission.k8s.io/v1` AdmissionReview.
//! Certificates are re-read when their files change (a renewed Secret swaps its `..data` symlink).
//! I/O: the shell around the pure admission decision in `guard`.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use k8s_openapi::jiff::Timestamp;
use kube::core::admission::AdmissionResponse;
use nodemedic_common::events::NodeEvents;

use super::{Decision, GuardConfig, NodeState, Request, decide};
use crate::guard::BlockedEvents;
use crate::metrics::{GuardDecision, Metrics, Reload};
use crate::observe::Observed;

#[derive(Debug, Clone)]
pub struct GuardOptions {
    pub listen: SocketAddr,
    pub cert: PathBuf,
    pub key: PathBuf,
    pub config: GuardConfig,
}

/// What the machines check (`POST /machines`) needs besides the guard's: the drainer's record
/// trust and its name, given by `run` once the key is read.
#[derive(Clone)]
pub(crate) struct MachinesCheck {
    pub(crate) trust: crate::model::seal::RecordTrust,
    pub(crate) owner: String,
    pub(crate) namespace: String,
}

/// At most one Event per node in this interval; blocked deletions in between are counted into it.

#[derive(Clone)]
struct Guard {
    config: Arc<GuardConfig>,
    /// The drainer's node and pod caches.
    observed: Observed,
    metrics: Metrics,
    events: Option<kube::Client>,
    /// Denials per node and their PodDeletionBlocked Events.
    blocked: Arc<Mutex<BlockedEvents>>,
    /// Wakes the Event writer after a denial.
    flush: Arc<tokio::sync::Notify>,
    /// The machines check, where the drainer was started with its record key.
    tie: Option<Arc<super::machine_tie::Tie>>,
}

/// PodDeletionBlocked Events written per flush at most, and the least time between flushes.
const EVENTS_PER_FLUSH: usize = 20;
const FLUSH_SPACING: Duration = Duration::from_secs(1);

/// The audit annotation key (the API server logs it as `<webhook name>/decision`).
pub(crate) const AUDIT_KEY: &str = "decision";

impl Guard {
    fn node_state(&self, req: &Request) -> NodeState {
        if !self.observed.nodes_synced() {
            return NodeState::NotSynced;
        }
        let Some(name) = req.node.clone().or_else(|| {
            self.observed
                .pod(&req.namespace, &req.pod)
                .and_then(|p| p.node.as_deref().map(String::from))
        }) else {
            return NodeState::Unknown;
        };
        match self.observed.node(&name) {
            None => NodeState::Unknown,
            Some(n) => NodeState::Known {
                name,
                labels: n.labels.clone(),
                ready: n.condition("Ready").map(|c| c.status.to_string()),
                flap_taint: n.flap_taint().cloned(),
            },
        }
    }

    /// Count a blocked deletion on `node`; the Event is written by [`flush_blocked`].
    fn blocked(&self, node: &str, req: &Request) {
        let latest = format!("{}/{} by {}", req.namespace, req.pod, req.user);
        self.blocked.lock().unwrap().denied(node, latest);
    }
}

/// Write the PodDeletionBlocked Events that are due ([`BlockedEvents::due`] decides which).
async fn flush_blocked(g: &Guard, client: &kube::Client, interval: Duration) {
    let due = g
        .blocked
        .lock()
        .unwrap()
        .due(Timestamp::now(), interval, EVENTS_PER_FLUSH);
    for d in due {
        let events = NodeEvents::new(client.clone(), &d.node);
        let written = match d.existing {
            Some(name) => events.update(&name, &d.event).await.map(|()| name),
            None => events.create(&d.event).await,
        };
        match written {
            Ok(name) => g.blocked.lock().unwrap().written(&d.node, name),
            Err(e) => tracing::warn!(node = %d.node, error = %e, "cannot write the guard event"),
        }
    }
}

/// The AdmissionReview in a POST ([`super::read_review`]).
fn review(
    headers: &HeaderMap,
    body: &Bytes,
) -> Result<kube::core::admission::AdmissionRequest<kube::core::DynamicObject>, super::Malformed> {
    let content_type = headers
        .get(axum::http::header::CONTENT_TYPE)
        .map(|v| String::from_utf8_lossy(v.as_bytes()));
    super::read_review(content_type.as_deref(), body)
}

/// The answer to a POST that is no AdmissionReview the guard reads.
fn malformed(m: super::Malformed) -> Response {
    let status = StatusCode::from_u16(m.status).unwrap_or(StatusCode::BAD_REQUEST);
    (status, format!("{}\n", m.message)).into_response()
}

async fn validate(State(g): State<Guard>, headers: HeaderMap, body: Bytes) -> Response {
    let req = match review(&headers, &body) {
        Ok(r) => r,
        Err(m) => {
            g.metrics.guard_request(GuardDecision::Malformed);
            return malformed(m);
        }
    };
    let request = Request::from_admission(&req);
    let node = g.node_state(&request);
    let decision = decide(&request, &node, &g.config);
    g.metrics.guard_request(decision.label());
    let mut response = AdmissionResponse::from(&req);
    // The reason lands in the API server's audit log as `<webhook name>/decision`: the server adds
    // the prefix, and a key with a '/' of its own is rejected as invalid.
    let why = match &decision {
        Decision::Allow(why) => why.to_string(),
        Decision::Deny(_) => "denied: kosmos-leaf-not-ready".to_string(),
    };
    response.audit_annotations.insert(AUDIT_KEY.into(), why);
    let response = match decision {
        Decision::Allow(_) => response,
        Decision::Deny(msg) => {
            tracing::warn!(pod = %format!("{}/{}", request.namespace, request.pod), user = %request.user, "{msg}");
            // No side effects for dry-run requests (the webhook declares sideEffects: NoneOnDryRun).
            if let (NodeState::Known { name, .. }, Some(_), false) = (&node, &g.events, req.dry_run)
            {
                g.blocked(name, &request);
                g.flush.notify_one();
            }
            response.deny(msg)
        }
    };
    axum::Json(response.into_review()).into_response()
}

/// `POST /machines`: the drainer's account's writes to machines, admitted only for a node whose
/// ladder has the step under way (`guard::machines`). Fails closed: a request it cannot read is
/// refused as `/validate` refuses it, one it cannot tell answers 503 (the API server then fails
/// the write under `failurePolicy: Fail`, and the drainer tries again).
async fn machines(State(g): State<Guard>, headers: HeaderMap, body: Bytes) -> Response {
    use super::machine_tie::Verdict;
    let req = match review(&headers, &body) {
        Ok(r) => r,
        Err(m) => return malformed(m),
    };
    let ask = super::machines::read(&req);
    let verdict = match &g.tie {
        Some(tie) => tie.verdict(&ask, Timestamp::now()).await,
        None => Verdict::Deny("the drainer was started without its record key".into()),
    };
    let user = req.user_info.username.clone().unwrap_or_default();
    let mut response = AdmissionResponse::from(&req);
    let response = match verdict {
        Verdict::Admit(why) => {
            tracing::debug!(%user, name = %req.name, "{why}");
            response.audit_annotations.insert(AUDIT_KEY.into(), why);
            response
        }
        Verdict::Deny(why) => {
            tracing::warn!(%user, name = %req.name, "machine write refused: {why}");
            let msg = format!(
                "nodemedic's drainer may reach a machine only for a node whose remediation it has under way: {why}"
            );
            response
                .audit_annotations
                .insert(AUDIT_KEY.into(), "denied: no remediation under way".into());
            response.deny(msg)
        }
        Verdict::Unknown(why) => {
            tracing::warn!(%user, name = %req.name, "machine write not checked: {why}");
            return (
                StatusCode::SERVICE_UNAVAILABLE,
                format!("cannot check: {why}\n"),
            )
                .into_response();
        }
    };
    axum::Json(response.into_review()).into_response()
}

/// Start the guard; returns its bound address.
pub(crate) async fn start(
    opts: GuardOptions,
    observed: Observed,
    metrics: Metrics,
    events: Option<kube::Client>,
    machines_check: Option<MachinesCheck>,
) -> crate::error::Result<SocketAddr> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let tls = axum_server::tls_rustls::RustlsConfig::from_pem_file(&opts.cert, &opts.key)
        .await
        .map_err(|source| crate::error::Error::GuardTls {
            cert: opts.cert.clone(),
            key: opts.key.clone(),
            source,
        })?;
    let tie = tie(machines_check, &events, &observed);
    let guard = Guard {
        tie,
        config: Arc::new(opts.config.clone()),
        observed,
        metrics: metrics.clone(),
        events,
        blocked: Arc::default(),
        flush: Arc::default(),
    };
    if let Some(client) = guard.events.clone() {
        let (g, interval) = (guard.clone(), opts.config.event_interval);
        tokio::spawn(async move {
            let mut last = tokio::time::Instant::now() - FLUSH_SPACING;
            loop {
                // After a denial, and then every second until held-back counts are written; never
                // two flushes within FLUSH_SPACING (so at most EVENTS_PER_FLUSH Events a second).
                tokio::select! {
                    _ = g.flush.notified() => {}
                    _ = tokio::time::sleep(FLUSH_SPACING) => {}
                }
                tokio::time::sleep_until(last + FLUSH_SPACING).await;
                last = tokio::time::Instant::now();
                flush_blocked(&g, &client, interval).await;
            }
        });
    }
    let request_timeout = opts.config.request_timeout;
    let budget = Arc::new(tokio::sync::Semaphore::new(opts.config.max_bytes_in_flight));
    let max_request = opts.config.max_request_bytes;
    let shed = metrics.clone();
    let app = Router::new()
        .route("/validate", post(validate))
        .route("/machines", post(machines))
        .with_state(guard)
        .layer(axum::extract::DefaultBodyLimit::max(max_request))
        // Bytes in flight: a request holds its declared length from the budget until answered.
        .layer(axum::middleware::from_fn(
            move |req: axum::extract::Request, next: axum::middleware::Next| {
                let bytes = super::limit::Bytes {
                    budget: budget.clone(),
                    max_request,
                    shed: shed.guard_shed.clone(),
                };
                bytes.admit(req, next)
            },
        ))
        // A request whose body trickles in (or anything slower than the API server waits) ends in 408.
        .layer(axum::middleware::from_fn(
            move |req: axum::extract::Request, next: axum::middleware::Next| async move {
                match tokio::time::timeout(request_timeout, next.run(req)).await {
                    Ok(response) => response,
                    Err(_) => StatusCode::REQUEST_TIMEOUT.into_response(),
                }
            },
        ));
    let handle = axum_server::Handle::new();
    let acceptor = super::limit::LimitAcceptor::new(
        axum_server::tls_rustls::RustlsAcceptor::new(tls.clone()),
        opts.config.max_connections,
    );
    let mut server = axum_server::bind(opts.listen)
        .acceptor(acceptor)
        .handle(handle.clone());
    // A connection that does not send its headers in time is closed (slowloris).
    server
        .http_builder()
        .http1()
        .timer(hyper_util::rt::TokioTimer::new())
        .header_read_timeout(opts.config.header_timeout);
    tokio::spawn(async move {
        if let Err(e) = server.serve(app.into_make_service()).await {
            tracing::error!(error = %e, "guard server stopped");
        }
    });
    spawn_reload(tls, opts.cert.clone(), opts.key.clone(), metrics.clone());
    let addr = handle
        .listening()
        .await
        .ok_or(crate::error::Error::GuardListen(opts.listen))?;
    tracing::info!(%addr, "guard serving POST /validate and /machines over HTTPS");
    Ok(addr)
}

/// The machines check's means, where the drainer gave its key and a client.
fn tie(
    check: Option<MachinesCheck>,
    client: &Option<kube::Client>,
    observed: &Observed,
) -> Option<Arc<super::machine_tie::Tie>> {
    let (m, client) = (check?, client.as_ref()?);
    let cluster =
        crate::act::kube::KubeCluster::new(client.clone(), observed.clone(), &m.namespace);
    Some(Arc::new(super::machine_tie::Tie {
        cluster,
        nodes: kube::Api::all(client.clone()),
        trust: m.trust,
        owner: m.owner,
    }))
}

/// Re-read the certificate and key when their directory changes; a bad pair keeps the old one.
fn spawn_reload(
    tls: axum_server::tls_rustls::RustlsConfig,
    cert: PathBuf,
    key: PathBuf,
    metrics: Metrics,
) {
    // Content changes only: reading the files (our own reload included) is no reason to reload.
    let mut watch = match nodemedic_common::filewatch::ContentWatch::new(
        &[cert.clone(), key.clone()],
        Duration::from_millis(300),
    ) {
        Ok(w) => {
            let checks = metrics.guard_cert_checks.clone();
            w.on_check(move || {
                checks.inc();
            })
        }
        Err(e) => {
            tracing::error!(error = %e, "cannot watch the guard certificate; it will not be reloaded");
            return;
        }
    };
    tokio::spawn(async move {
        while watch.changed().await.is_some() {
            match tls.reload_from_pem_file(&cert, &key).await {
                Ok(()) => {
                    metrics.guard_cert_reload(Reload::Success);
                    tracing::info!(cert = %cert.display(), "guard certificate reloaded")
                }
                Err(e) => {
                    metrics.guard_cert_reload(Reload::Failure);
                    tracing::error!(error = %e, "guard certificate reload failed; keeping the previous one")
                }
            }
        }
    });
}
