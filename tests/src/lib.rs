//! Integration-test support for nodemedic.
//!
//! - [`server`]: a Kubernetes API server stand-in on 127.0.0.1 that answers like the real one does in the
//!   exchanges recorded under `shared/reference/apiserver/` (status codes, Status bodies, strategic merge
//!   of conditions by type, watches with resourceVersion and 410 Expired), with fault injection.
//! - [`cluster`]: what a scenario talks to: that server, or a real cluster when `NODEMEDIC_E2E=1` and
//!   `KUBECONFIG` point at one, so the same scenarios can check the fake against reality.

pub mod cluster;
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
