//! The power-cycle provider over HTTP: the request a `power-cycle` step makes (a JSON POST, the
//! bearer token of `--power-cycle-token-file`), retried with backoff while the endpoint fails for a
//! passing reason (no answer, 5xx, 429) under the same operation ID. I/O; the HTTPS client is the
//! notifications' (`crate::notify`).

use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;

use crate::model::cluster::{PowerCycleError, PowerCycleRequest};

/// Tries, the first backoff (doubling), and how long one request may take.
const TRIES: u32 = 3;
const FIRST_BACKOFF: Duration = Duration::from_millis(500);
const TIMEOUT: Duration = Duration::from_secs(15);

/// POST `request` to `url`, trusting only the CA certificates `ca` (DER) if given, else the
/// system's; Ok once it answers 2xx.
pub(crate) async fn post(
    url: &str,
    token: Option<&str>,
    ca: Option<&[Vec<u8>]>,
    request: &PowerCycleRequest,
) -> Result<(), PowerCycleError> {
    let client = match ca {
        None => crate::notify::client(),
        Some(ca) => client_trusting(ca),
    }
    .map_err(|e| PowerCycleError::Transport(e.to_string()))?;
    let body = Bytes::from(serde_json::to_vec(request).unwrap_or_default());
    retried(|| once(&client, url, token, &body)).await
}

/// An HTTPS client that trusts the certificates `ca` (DER) and no other authority.
fn client_trusting(ca: &[Vec<u8>]) -> Result<crate::notify::HttpClient, std::io::Error> {
    let mut roots = rustls::RootCertStore::empty();
    for der in ca {
        roots
            .add(rustls::pki_types::CertificateDer::from(der.clone()))
            .map_err(|e| std::io::Error::other(format!("the CA file's certificate: {e}")))?;
    }
    let tls = rustls::ClientConfig::builder_with_provider(std::sync::Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .map_err(std::io::Error::other)?
    .with_root_certificates(roots)
    .with_no_client_auth();
    let https = hyper_rustls::HttpsConnectorBuilder::new()
        .with_tls_config(tls)
        .https_or_http()
        .enable_http1()
        .build();
    Ok(
        hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
            .build(https),
    )
}

/// `ask` until it succeeds, is refused (asking again cannot help: a 4xx other than 429, no such
/// host), or has failed [`TRIES`] times for a passing reason ([`PowerCycleError::is_transient`]),
/// backing off between tries: every provider's budget for one attempt, each try the same request
/// (the same operation ID).
pub(crate) async fn retried<F, Fut>(mut ask: F) -> Result<(), PowerCycleError>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<(), PowerCycleError>>,
{
    let mut backoff = FIRST_BACKOFF;
    let mut attempt = 1;
    loop {
        match ask().await {
            Ok(()) => return Ok(()),
            Err(e) if !e.is_transient() || attempt >= TRIES => return Err(e),
            Err(_) => {}
        }
        tokio::time::sleep(backoff).await;
        backoff *= 2;
        attempt += 1;
    }
}

async fn once(
    client: &crate::notify::HttpClient,
    url: &str,
    token: Option<&str>,
    body: &Bytes,
) -> Result<(), PowerCycleError> {
    let mut req = axum::http::Request::post(url)
        .header(axum::http::header::CONTENT_TYPE, "application/json")
        .header(
            axum::http::header::USER_AGENT,
            nodemedic_common::keys::DRAINER_MANAGER,
        );
    if let Some(t) = token {
        req = req.header(axum::http::header::AUTHORIZATION, format!("Bearer {t}"));
    }
    let req = req
        .body(Full::new(body.clone()))
        .map_err(|e| PowerCycleError::Transport(e.to_string()))?;
    let resp = tokio::time::timeout(TIMEOUT, client.request(req))
        .await
        .map_err(|_| PowerCycleError::Timeout(TIMEOUT.as_secs()))?
        .map_err(|e| PowerCycleError::Transport(e.to_string()))?;
    if resp.status().is_success() {
        Ok(())
    } else {
        Err(PowerCycleError::Status(resp.status().as_u16()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};

    /// A loopback provider answering `statuses` in turn (then 200), recording what it was sent.
    async fn provider(
        statuses: Vec<u16>,
    ) -> (String, Arc<Mutex<Vec<(Option<String>, serde_json::Value)>>>) {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let answers = Arc::new(Mutex::new(statuses));
        let (s, a) = (seen.clone(), answers.clone());
        let app = axum::Router::new().route(
            "/power",
            axum::routing::post(move |h: axum::http::HeaderMap, body: axum::body::Bytes| {
                let (s, a) = (s.clone(), a.clone());
                async move {
                    let auth = h
                        .get(axum::http::header::AUTHORIZATION)
                        .and_then(|v| v.to_str().ok())
                        .map(String::from);
                    let json = serde_json::from_slice(&body).unwrap_or_default();
                    s.lock().unwrap().push((auth, json));
                    let mut a = a.lock().unwrap();
                    let code = if a.is_empty() { 200 } else { a.remove(0) };
                    axum::http::StatusCode::from_u16(code).unwrap()
                }
            }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await });
        (format!("http://{addr}/power"), seen)
    }

    fn request() -> PowerCycleRequest {
        PowerCycleRequest {
            action: "power-cycle",
            node: "n1".into(),
            uid: "u1".into(),
            boot_id: "b1".into(),
            requested: "2026-12-02T10:00:00Z".into(),
            until: "2026-12-02T10:20:00Z".into(),
            operation_id: "u1-b1".into(),
        }
    }

    #[tokio::test]
    async fn the_request_carries_the_node_and_the_token_and_a_passing_failure_is_retried_under_one_id()
     {
        let (url, seen) = provider(vec![503]).await;
        post(&url, Some("s3cret"), None, &request()).await.unwrap();
        let seen = seen.lock().unwrap().clone();
        assert_eq!(seen.len(), 2, "503, then the same request again");
        for (auth, body) in &seen {
            assert_eq!(auth.as_deref(), Some("Bearer s3cret"));
            assert_eq!(
                body,
                &serde_json::json!({"action": "power-cycle", "node": "n1", "uid": "u1", "bootID": "b1",
                    "requested": "2026-12-02T10:00:00Z", "until": "2026-12-02T10:20:00Z", "operationID": "u1-b1"})
            );
        }
    }

    #[tokio::test]
    async fn a_refusal_is_not_retried_and_nothing_listening_is_said() {
        let (url, seen) = provider(vec![403]).await;
        let e = post(&url, None, None, &request()).await.unwrap_err();
        assert_eq!(e, PowerCycleError::Status(403));
        assert_eq!(seen.lock().unwrap().len(), 1);
        assert_eq!(
            seen.lock().unwrap()[0].0,
            None,
            "no token file, no Authorization"
        );
        let closed = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap();
        let e = post(&format!("http://{closed}/power"), None, None, &request())
            .await
            .unwrap_err();
        assert!(matches!(e, PowerCycleError::Transport(_)), "{e}");
    }

    /// An HTTPS provider on 127.0.0.1 with a self-signed certificate: (url, its DER).
    async fn tls_provider() -> (String, Vec<u8>) {
        let cert = rcgen::generate_simple_self_signed(vec!["127.0.0.1".into()]).unwrap();
        let der = cert.cert.der().to_vec();
        let key = rustls::pki_types::PrivateKeyDer::Pkcs8(cert.signing_key.serialize_der().into());
        let cfg = rustls::ServerConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(vec![der.clone().into()], key)
        .unwrap();
        let app = axum::Router::new().route(
            "/power",
            axum::routing::post(|| async { axum::http::StatusCode::OK }),
        );
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let addr = listener.local_addr().unwrap();
        let tls = axum_server::tls_rustls::RustlsConfig::from_config(Arc::new(cfg));
        tokio::spawn(async move {
            axum_server::from_tcp_rustls(listener, tls)
                .unwrap()
                .serve(app.into_make_service())
                .await
        });
        (format!("https://{addr}/power"), der)
    }

    #[tokio::test]
    async fn a_ca_file_is_the_only_authority_trusted() {
        let (url, der) = tls_provider().await;
        post(&url, None, Some(&[der]), &request()).await.unwrap();
        // The system's authorities do not vouch for it, nor does another CA.
        let e = post(&url, None, None, &request()).await.unwrap_err();
        assert!(matches!(e, PowerCycleError::Transport(_)), "{e}");
        let other = rcgen::generate_simple_self_signed(vec!["127.0.0.1".into()]).unwrap();
        let e = post(&url, None, Some(&[other.cert.der().to_vec()]), &request())
            .await
            .unwrap_err();
        assert!(matches!(e, PowerCycleError::Transport(_)), "{e}");
    }
}
