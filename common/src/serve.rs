//! One HTTP listener for operations: `/metrics` (Prometheus/OpenMetrics text), `/healthz` (fails with
//! 503 naming the stuck loops), `/readyz`, plus whatever routes the binary adds (the detector's
//! `/conditions`).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

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

/// What one client may hold of the operations listener. Scrapers and probes send small GETs and
/// are served at once; anything else is cut short, so slow or many clients cannot grow memory.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Connections served at once; one beyond is closed at accept.
    pub max_connections: usize,
    /// A request's headers must arrive within this long (slowloris).
    pub header_timeout: Duration,
    /// A request must be answered within this long.
    pub request_timeout: Duration,
    /// Bytes of a request body (the operations routes take none).
    pub max_body: u64,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            max_connections: 128,
            header_timeout: Duration::from_secs(5),
            request_timeout: Duration::from_secs(10),
            max_body: 4096,
        }
    }
}

/// A listen address from a flag: `HOST:PORT`, `[IPv6]:PORT`, or an IPv6 address without brackets
/// followed by `:PORT` (what `$(POD_IP):PORT` gives in a manifest on an IPv6 cluster).
pub fn listen_addr(s: &str) -> Result<SocketAddr, String> {
    if let Ok(addr) = s.parse() {
        return Ok(addr);
    }
    let bad = || {
        format!(
            "{s:?} is not an address to listen on (IP:PORT, e.g. 127.0.0.1:20257 or [::1]:20257)"
        )
    };
    let (host, port) = s.rsplit_once(':').ok_or_else(bad)?;
    let ip: std::net::IpAddr = host.parse().map_err(|_| bad())?;
    let port: u16 = port.parse().map_err(|_| bad())?;
    Ok(SocketAddr::new(ip, port))
}

/// Bind `addr` and serve `app` until the process ends, within [`Limits::default`]. Returns the bound
/// address (port 0 picks one).
pub async fn spawn(addr: SocketAddr, app: Router) -> std::io::Result<SocketAddr> {
    spawn_with(addr, app, Limits::default()).await
}

/// [`spawn`] within `limits`.
pub async fn spawn_with(
    addr: SocketAddr,
    app: Router,
    limits: Limits,
) -> std::io::Result<SocketAddr> {
    let listener = tokio::net::TcpListener::bind(addr).await?;
    let local = listener.local_addr()?;
    let app = app.layer(axum::middleware::from_fn(move |req, next| {
        bounded(req, next, limits)
    }));
    let permits = Arc::new(tokio::sync::Semaphore::new(limits.max_connections.max(1)));
    tokio::spawn(async move {
        loop {
            let stream = match listener.accept().await {
                Ok((stream, _)) => stream,
                Err(e) => {
                    // Out of file descriptors, say: wait rather than spin.
                    tracing::warn!(error = %e, "operations listener cannot accept");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            };
            let Ok(permit) = permits.clone().try_acquire_owned() else {
                tracing::debug!("operations listener at its connection limit: connection closed");
                continue;
            };
            let service = hyper_util::service::TowerToHyperService::new(app.clone());
            tokio::spawn(async move {
                let _permit = permit;
                let mut conn = hyper::server::conn::http1::Builder::new();
                conn.timer(hyper_util::rt::TokioTimer::new())
                    .header_read_timeout(limits.header_timeout)
                    .max_buf_size(16 * 1024);
                let io = hyper_util::rt::TokioIo::new(stream);
                let _ = conn.serve_connection(io, service).await;
            });
        }
    });
    Ok(local)
}

/// A request within `limits`: a declared body over the cap is refused (413), and the answer must
/// come within the request timeout (else 503).
async fn bounded(
    req: axum::extract::Request,
    next: axum::middleware::Next,
    limits: Limits,
) -> Response {
    let declared = req
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    let chunked = req.headers().contains_key(header::TRANSFER_ENCODING);
    if declared.is_some_and(|n| n > limits.max_body) || chunked {
        return (StatusCode::PAYLOAD_TOO_LARGE, "request body too large\n").into_response();
    }
    match tokio::time::timeout(limits.request_timeout, next.run(req)).await {
        Ok(r) => r,
        Err(_) => (StatusCode::SERVICE_UNAVAILABLE, "timed out\n").into_response(),
    }
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

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpStream;

    #[test]
    fn listen_addresses_take_the_forms_manifests_give() {
        assert_eq!(
            listen_addr("127.0.0.1:20257").unwrap(),
            "127.0.0.1:20257".parse().unwrap()
        );
        assert_eq!(
            listen_addr("[fd00::1]:20257").unwrap(),
            "[fd00::1]:20257".parse().unwrap()
        );
        // $(POD_IP):PORT on an IPv6 cluster.
        assert_eq!(
            listen_addr("fd00::1:20257").unwrap(),
            "[fd00::1]:20257".parse().unwrap()
        );
        for bad in [
            "",
            "20257",
            "localhost:20257",
            "10.0.0.1:http",
            "10.0.0.1:70000",
        ] {
            let e = listen_addr(bad).unwrap_err();
            assert!(e.contains("not an address to listen on"), "{bad}: {e}");
        }
    }

    async fn serve(limits: Limits) -> SocketAddr {
        let app = router(Arc::new(Registry::default()), Health::default());
        spawn_with("127.0.0.1:0".parse().unwrap(), app, limits)
            .await
            .unwrap()
    }

    /// A client that sends half a request and stalls (slowloris).
    async fn stall(addr: SocketAddr) -> TcpStream {
        let mut s = TcpStream::connect(addr).await.unwrap();
        s.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")
            .await
            .unwrap();
        s
    }

    /// Until the server closes `s` (end of file or a reset), within a generous bound.
    async fn closed(s: &mut TcpStream) -> bool {
        let mut buf = [0u8; 256];
        let read = tokio::time::timeout(Duration::from_secs(30), async {
            loop {
                match s.read(&mut buf).await {
                    Ok(0) | Err(_) => return,
                    Ok(_) => {}
                }
            }
        });
        read.await.is_ok()
    }

    async fn get(addr: SocketAddr, request: &str) -> String {
        let mut s = TcpStream::connect(addr).await.unwrap();
        s.write_all(request.as_bytes()).await.unwrap();
        let mut out = Vec::new();
        let _ = tokio::time::timeout(Duration::from_secs(30), s.read_to_end(&mut out)).await;
        String::from_utf8_lossy(&out).into_owned()
    }

    #[tokio::test]
    async fn stalled_clients_are_cut_off_and_cannot_hold_more_than_the_cap() {
        // The cap: two stalled clients hold it; a third connection is closed at once.
        let addr = serve(Limits {
            max_connections: 2,
            header_timeout: Duration::from_secs(600),
            ..Limits::default()
        })
        .await;
        let (_a, _b) = (stall(addr).await, stall(addr).await);
        // Let the listener take both before the third arrives.
        let mut third = TcpStream::connect(addr).await.unwrap();
        third
            .write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            .await
            .unwrap();
        let mut out = Vec::new();
        let _ = tokio::time::timeout(Duration::from_secs(30), third.read_to_end(&mut out)).await;
        assert!(
            out.is_empty(),
            "served beyond the cap: {}",
            String::from_utf8_lossy(&out)
        );

        // The header timeout: a stalled client is closed; the listener serves the next one.
        let addr = serve(Limits {
            header_timeout: Duration::from_millis(300),
            ..Limits::default()
        })
        .await;
        let mut slow = stall(addr).await;
        assert!(
            closed(&mut slow).await,
            "a stalled client was never cut off"
        );
        let ok = get(
            addr,
            "GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
        )
        .await;
        assert!(ok.starts_with("HTTP/1.1 200"), "{ok}");
        // A body where none is taken.
        let big = get(
            addr,
            "POST /healthz HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\nConnection: close\r\n\r\n",
        )
        .await;
        assert!(big.starts_with("HTTP/1.1 413"), "{big}");
    }
}
