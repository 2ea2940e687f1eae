//! `detector probe container-runtime`: the CRI runtime's own status, asked over its socket as the
//! kubelet and `crictl info` ask it (`runtime.v1.RuntimeService/Status`, gRPC over HTTP/2 on a
//! Unix socket). Healthy when the runtime reports `RuntimeReady`; a problem when it reports it
//! false, when nothing listens on the socket, or when it does not answer in time (a wedged
//! containerd or CRI-O accepts connections and hangs); unknown when the socket is not there (not
//! mounted) or the runtime does not speak CRI v1. `NetworkReady` is not the runtime's health (the
//! kubelet reports it as the node's network) and is only named.
//!
//! The call is made with hyper's HTTP/2 client and the messages read with prost, written here for
//! the three messages read, not generated from the CRI's .proto: the detector needs one call and no
//! gRPC stack. I/O (the socket); the verdict is pure.

use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};

use super::{Found, healthy, problem, unknown};

/// Where containerd listens (the kubelet's default endpoint since dockershim went).
pub(crate) const DEFAULT_ENDPOINT: &str = "unix:///run/containerd/containerd.sock";

/// `runtime.v1.StatusResponse`, the fields read.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct StatusResponse {
    #[prost(message, optional, tag = "1")]
    pub(crate) status: Option<RuntimeStatus>,
}

/// `runtime.v1.RuntimeStatus`.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct RuntimeStatus {
    #[prost(message, repeated, tag = "1")]
    pub(crate) conditions: Vec<RuntimeCondition>,
}

/// `runtime.v1.RuntimeCondition`.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct RuntimeCondition {
    #[prost(string, tag = "1")]
    pub(crate) r#type: String,
    #[prost(bool, tag = "2")]
    pub(crate) status: bool,
    #[prost(string, tag = "3")]
    pub(crate) reason: String,
    #[prost(string, tag = "4")]
    pub(crate) message: String,
}

/// Why the status could not be had.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum Failure {
    #[error("{0}: no socket there (is the runtime's socket mounted into the detector?)")]
    NoSocket(String),
    #[error("{0}: nothing listens on the socket: {1}")]
    Refused(String, String),
    #[error("{0}: no answer within {1}")]
    Timeout(String, String),
    #[error("{0}: the runtime does not serve CRI v1 ({1})")]
    Unimplemented(String, String),
    #[error("{0}: {1}")]
    Other(String, String),
}

/// The socket path of a CRI endpoint (`unix:///path` or a bare path).
fn socket_path(endpoint: &str) -> Result<&str, Found> {
    match endpoint.strip_prefix("unix://") {
        Some(p) => Ok(p),
        None if endpoint.starts_with('/') => Ok(endpoint),
        None => Err(unknown(format!(
            "{endpoint}: only unix:// endpoints are probed"
        ))),
    }
}

/// The probe: ask, then judge.
pub(crate) fn probe(endpoint: &str, timeout: Duration) -> Found {
    let path = match socket_path(endpoint) {
        Ok(p) => p,
        Err(f) => return f,
    };
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => return unknown(format!("cannot start the probe: {e}")),
    };
    let asked = runtime.block_on(async {
        match tokio::time::timeout(timeout, status(path)).await {
            Ok(r) => r,
            Err(_) => Err(Failure::Timeout(
                path.to_string(),
                humantime::format_duration(timeout).to_string(),
            )),
        }
    });
    verdict(path, asked)
}

/// The verdict on what the runtime said (or why it said nothing).
pub(crate) fn verdict(path: &str, asked: Result<StatusResponse, Failure>) -> Found {
    let status = match asked {
        Ok(s) => s,
        Err(e @ (Failure::NoSocket(..) | Failure::Unimplemented(..))) => {
            return unknown(format!("cannot tell: {e}"));
        }
        Err(e) => return problem(format!("container runtime not answering: {e}")),
    };
    let conditions = status.status.map(|s| s.conditions).unwrap_or_default();
    let network = conditions
        .iter()
        .find(|c| c.r#type == "NetworkReady")
        .map(|c| {
            if c.status {
                "; network ready"
            } else {
                "; network not ready"
            }
        })
        .unwrap_or_default();
    match conditions.iter().find(|c| c.r#type == "RuntimeReady") {
        Some(c) if c.status => healthy(format!("container runtime ready{network}")),
        Some(c) => problem(format!(
            "container runtime not ready: {}{}{}",
            c.reason,
            if c.message.is_empty() { "" } else { ": " },
            c.message
        )),
        None => unknown(format!(
            "cannot tell: {path}: the runtime's status names no RuntimeReady condition"
        )),
    }
}

/// `RuntimeService/Status` over the socket at `path`.
async fn status(path: &str) -> Result<StatusResponse, Failure> {
    let p = path.to_string();
    let stream = tokio::net::UnixStream::connect(path)
        .await
        .map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => Failure::NoSocket(p.clone()),
            std::io::ErrorKind::ConnectionRefused => Failure::Refused(p.clone(), e.to_string()),
            _ => Failure::Other(p.clone(), e.to_string()),
        })?;
    let other = |e: &dyn std::fmt::Display| Failure::Other(p.clone(), e.to_string());
    let io = hyper_util::rt::TokioIo::new(stream);
    let (mut send, conn) =
        hyper::client::conn::http2::handshake(hyper_util::rt::TokioExecutor::new(), io)
            .await
            .map_err(|e| other(&e))?;
    tokio::spawn(conn);
    // An empty StatusRequest (verbose: false) in one uncompressed gRPC frame.
    let request = http::Request::post("http://localhost/runtime.v1.RuntimeService/Status")
        .header("content-type", "application/grpc")
        .header("te", "trailers")
        .body(Full::new(Bytes::from_static(&[0, 0, 0, 0, 0])))
        .map_err(|e| other(&e))?;
    let response = send.send_request(request).await.map_err(|e| other(&e))?;
    let (head, body) = response.into_parts();
    let body = body.collect().await.map_err(|e| other(&e))?;
    // A failed call may carry its status in the headers alone ("trailers-only").
    let trailers = body.trailers().cloned().unwrap_or_default();
    let field = |name: &str| {
        trailers
            .get(name)
            .or_else(|| head.headers.get(name))
            .and_then(|v| v.to_str().ok())
            .map(String::from)
    };
    match field("grpc-status").as_deref() {
        Some("0") => {}
        Some("12") => {
            let m = field("grpc-message").unwrap_or_default();
            return Err(Failure::Unimplemented(p, m));
        }
        code => {
            let m = field("grpc-message").unwrap_or_default();
            let what = format!(
                "HTTP {}, gRPC status {}: {m}",
                head.status,
                code.unwrap_or("none")
            );
            return Err(Failure::Other(p, what));
        }
    }
    let data = body.to_bytes();
    let message = match data.get(..5) {
        Some([0, len @ ..]) => {
            let len = u32::from_be_bytes([len[0], len[1], len[2], len[3]]) as usize;
            data.get(5..5 + len)
                .ok_or_else(|| other(&"a short gRPC frame"))?
        }
        Some(_) => return Err(other(&"a compressed gRPC frame, which was not asked for")),
        None => return Err(other(&"an empty answer")),
    };
    <StatusResponse as prost::Message>::decode(message).map_err(|e| other(&e))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn said(conditions: &[(&str, bool, &str)]) -> Result<StatusResponse, Failure> {
        Ok(StatusResponse {
            status: Some(RuntimeStatus {
                conditions: conditions
                    .iter()
                    .map(|(t, s, r)| RuntimeCondition {
                        r#type: t.to_string(),
                        status: *s,
                        reason: r.to_string(),
                        message: String::new(),
                    })
                    .collect(),
            }),
        })
    }

    #[test]
    fn the_runtimes_own_readiness_decides() {
        let p = "/run/containerd/containerd.sock";
        assert_eq!(
            verdict(
                p,
                said(&[
                    ("RuntimeReady", true, ""),
                    ("NetworkReady", false, "NetworkPluginNotReady")
                ])
            ),
            healthy("container runtime ready; network not ready")
        );
        assert_eq!(
            verdict(p, said(&[("RuntimeReady", false, "ShimDead")])),
            problem("container runtime not ready: ShimDead")
        );
        assert_eq!(verdict(p, said(&[])).code, 2);
        assert_eq!(
            verdict(p, Err(Failure::Timeout(p.into(), "10s".into()))),
            problem(format!(
                "container runtime not answering: {p}: no answer within 10s"
            ))
        );
        assert_eq!(verdict(p, Err(Failure::NoSocket(p.into()))).code, 2);
        assert_eq!(
            verdict(p, Err(Failure::Refused(p.into(), "refused".into()))).code,
            1
        );
        assert_eq!(socket_path("tcp://x:1").unwrap_err().code, 2);
        assert_eq!(socket_path("/a.sock").unwrap(), "/a.sock");
    }

    /// A socket nobody answers on (accepted, then silence: a wedged runtime) is a problem after
    /// the timeout; a socket file with no listener is refused; no file at all is unknown.
    #[test]
    fn a_silent_a_dead_and_a_missing_runtime() {
        let dir = tempfile::tempdir().unwrap();
        let sock = dir.path().join("wedged.sock");
        let listener = std::os::unix::net::UnixListener::bind(&sock).unwrap();
        let endpoint = format!("unix://{}", sock.display());
        let found = probe(&endpoint, Duration::from_millis(300));
        assert_eq!(found.code, 1, "{found:?}");
        assert!(
            found.message.contains("no answer within 300ms"),
            "{found:?}"
        );
        drop(listener);
        let found = probe(&endpoint, Duration::from_secs(5));
        assert_eq!(found.code, 1, "{found:?}");
        assert!(found.message.contains("nothing listens"), "{found:?}");
        let found = probe(
            &format!("unix://{}/none.sock", dir.path().display()),
            Duration::from_secs(5),
        );
        assert_eq!(found.code, 2, "{found:?}");
    }
}
