//! Integration-test support for nodemedic.
//!
//! - [`envtest`]: a real etcd + kube-apiserver + kube-controller-manager on loopback, from the binaries
//!   `KUBEBUILDER_ASSETS` names; the truth every scenario runs against when it is set (CI sets it).
//! - [`cluster`]: what a scenario talks to: that control plane, a cluster in `KUBECONFIG` with
//!   `NODEMEDIC_E2E=1`, or else the test server; plus a stand-in kubelet for the scenario's nodes.
//! - [`server`]: our own API server stand-in, kept for what a real one cannot do on demand: injected
//!   500s/429s, cut watches, exact request logs without audit plumbing. It answers like the exchanges
//!   recorded under `shared/reference/apiserver/`, which `tests/recorded.rs` checks.
//! - [`process`]: CPU time and memory of another process, for benchmarks.
//! - [`tmpfs`]: a size-limited filesystem that really fills, with a detector watching it.
//! - [`webhook`]: a certificate and a ValidatingWebhookConfiguration for serving the guard to a real
//!   API server.

pub mod admission;
pub mod bench;
pub mod bins;
pub mod cluster;
pub mod debug_dump;
pub mod docs;
pub mod envtest;
pub mod fleet;
pub mod process;
pub mod server;
pub mod tmpfs;
pub mod webhook;

/// A plain HTTP GET over loopback (tests read /metrics and /healthz with it); returns the body.
pub async fn http_get(url: &str) -> String {
    try_http_get(url)
        .await
        .unwrap_or_else(|e| panic!("GET {url}: {e}"))
}

/// [`http_get`] for a server that may not be listening yet (a process just started): the error
/// instead of a panic.
pub async fn try_http_get(url: &str) -> Result<String, String> {
    use http_body_util::{BodyExt, Empty};
    let client = hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
        .build_http::<Empty<bytes::Bytes>>();
    let uri = url
        .parse()
        .map_err(|e| format!("not an http:// URL: {e}"))?;
    let response = client.get(uri).await.map_err(|e| e.to_string())?;
    let body = response
        .into_body()
        .collect()
        .await
        .map_err(|e| format!("reading the body: {e}"))?
        .to_bytes();
    Ok(String::from_utf8_lossy(&body).into_owned())
}

/// The drainer's record key Secret for Lease `lease` in `namespace`, made empty as the shipped
/// manifests make it (the drainer fills it at its first start); one that exists already is kept.
/// `run`: the scenario's `nodemedic.test/run` label, so its cleanup removes it.
pub async fn record_key_secret(
    client: &kube::Client,
    namespace: &str,
    lease: &str,
    run: Option<&str>,
) {
    use k8s_openapi::api::core::v1::Secret;
    let api: kube::Api<Secret> = kube::Api::namespaced(client.clone(), namespace);
    let labels = match run {
        Some(run) => serde_json::json!({"nodemedic.test/run": run}),
        None => serde_json::json!({}),
    };
    let secret: Secret = serde_json::from_value(serde_json::json!({
        "metadata": {"name": format!("{lease}-record-key"), "namespace": namespace, "labels": labels},
        "type": "Opaque"
    }))
    .unwrap();
    match api.create(&Default::default(), &secret).await {
        Ok(_) => {}
        Err(kube::Error::Api(e)) if e.code == 409 => {}
        Err(e) => panic!("cannot make the record key Secret for {lease}: {e}"),
    }
}
