//! Integration-test support for nodemedic.
//!
//! - [`envtest`]: a real etcd + kube-apiserver + kube-controller-manager on loopback, from the binaries
//!   `KUBEBUILDER_ASSETS` names; the truth every scenario runs against when it is set (CI sets it).
//! - [`cluster`]: what a scenario talks to: that control plane, a cluster in `KUBECONFIG` with
//!   `NODEMEDIC_E2E=1`, or else the test server; plus a stand-in kubelet for the scenario's nodes.
//! - [`server`]: our own API server stand-in, kept for what a real one cannot do on demand: injected
//!   500s/429s, cut watches, exact request logs without audit plumbing. It answers like the exchanges
//!   recorded under `shared/reference/apiserver/`, which `tests/recorded.rs` checks.

pub mod cluster;
pub mod envtest;
pub mod server;

/// A plain HTTP GET over loopback (tests read /metrics and /healthz with it); returns the body,
/// de-chunked when the server chunked it.
pub async fn http_get(url: &str) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let rest = url.strip_prefix("http://").expect("an http:// URL");
    let (host, path) = rest
        .split_once('/')
        .map(|(h, p)| (h, format!("/{p}")))
        .unwrap_or((rest, "/".into()));
    let mut s = tokio::net::TcpStream::connect(host).await.expect("connect");
    s.write_all(
        format!("GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n").as_bytes(),
    )
    .await
    .expect("write");
    let mut buf = Vec::new();
    s.read_to_end(&mut buf).await.expect("read");
    let text = String::from_utf8_lossy(&buf).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    if head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked")
    {
        dechunk(body)
    } else {
        body.to_string()
    }
}

fn dechunk(body: &str) -> String {
    let mut out = String::new();
    let mut rest = body;
    while let Some((size, after)) = rest.split_once("\r\n") {
        let n = usize::from_str_radix(size.trim(), 16).unwrap_or(0);
        if n == 0 || after.len() < n {
            break;
        }
        out.push_str(&after[..n]);
        rest = after[n..].strip_prefix("\r\n").unwrap_or(&after[n..]);
    }
    out
}
