//! One HTTP listener for operations: `/metrics` (Prometheus/OpenMetrics text), `/healthz` (fails with
//! 503 naming the stuck loops), `/readyz`, plus whatever routes the binary adds (the detector's
//! `/conditions`).

use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use prometheus_client::registry::Registry;

use crate::health::Health;

#[derive(Clone)]
struct Ops {
    registry: Arc<Registry>,
    health: Health,
}

/// The operations router; merge the binary's own routes into it.
pub fn router(registry: Arc<Registry>, health: Health) -> Router {
    Router::new()
        .route("/metrics", get(metrics))
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .with_state(Ops { registry, health })
}

/// Bind `addr` and serve `app` until the process ends. Returns the bound address (port 0 picks one).
pub async fn spawn(addr: SocketAddr, app: Router) -> std::io::Result<SocketAddr> {
    let listener = tokio::net::TcpListener::bind(addr).await?;
    let local = listener.local_addr()?;
    tokio::spawn(async move {
        if let Err(e) = axum::serve(listener, app).await {
            tracing::error!(error = %e, "operations listener stopped");
        }
    });
    Ok(local)
}

async fn metrics(State(ops): State<Ops>) -> Response {
    let mut body = String::new();
    match prometheus_client::encoding::text::encode(&mut body, &ops.registry) {
        Ok(()) => (
            [(
                header::CONTENT_TYPE,
                "application/openmetrics-text; version=1.0.0; charset=utf-8",
            )],
            body,
        )
            .into_response(),
        Err(e) => (
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("encoding metrics failed: {e}"),
        )
            .into_response(),
    }
}

async fn healthz(State(ops): State<Ops>) -> Response {
    let stuck = ops.health.stuck();
    if stuck.is_empty() {
        let mut body = String::from("ok\n");
        for (name, note) in ops.health.notes() {
            body.push_str(&format!("{name}: {note}\n"));
        }
        (StatusCode::OK, body).into_response()
    } else {
        let names: Vec<String> = stuck
            .iter()
            .map(|s| format!("{} (silent {}s)", s.name, s.silent_for_secs))
            .collect();
        (
            StatusCode::SERVICE_UNAVAILABLE,
            format!("stuck: {}\n", names.join(", ")),
        )
            .into_response()
    }
}

async fn readyz(State(ops): State<Ops>) -> Response {
    if ops.health.is_ready() {
        (StatusCode::OK, "ready\n").into_response()
    } else {
        (StatusCode::SERVICE_UNAVAILABLE, "not ready\n").into_response()
    }
}
