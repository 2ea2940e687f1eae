//! Serving an admission webhook to a real API server from a test: a self-signed certificate for
//! 127.0.0.1, and a ValidatingWebhookConfiguration for the guard scoped to the scenario's namespaces.

use std::net::SocketAddr;
use std::path::Path;

use kube::Api;
use kube::api::PostParams;
use serde_json::json;

use crate::cluster::Cluster;

/// A self-signed certificate for 127.0.0.1 (and localhost) with common name `cn`, written to
/// DIR/tls.crt and DIR/tls.key atomically (a watcher never sees half a pair); returns its PEM.
pub fn write_cert(dir: &Path, cn: &str) -> String {
    let mut params =
        rcgen::CertificateParams::new(vec!["127.0.0.1".to_string(), "localhost".to_string()])
            .expect("certificate parameters");
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, cn);
    params
        .subject_alt_names
        .push(rcgen::SanType::IpAddress("127.0.0.1".parse().unwrap()));
    let key = rcgen::KeyPair::generate().expect("a key");
    let cert = params.self_signed(&key).expect("a self-signed certificate");
    std::fs::write(dir.join("tls.key.tmp"), key.serialize_pem()).expect("write tls.key");
    std::fs::write(dir.join("tls.crt.tmp"), cert.pem()).expect("write tls.crt");
    std::fs::rename(dir.join("tls.key.tmp"), dir.join("tls.key")).expect("rename tls.key");
    std::fs::rename(dir.join("tls.crt.tmp"), dir.join("tls.crt")).expect("rename tls.crt");
    cert.pem()
}

/// Standard base64 (the caBundle field).
pub fn base64(bytes: &[u8]) -> String {
    const T: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (b[0] as u32) << 16 | (b[1] as u32) << 8 | b[2] as u32;
        for i in 0..4 {
            out.push(if i <= chunk.len() {
                T[(n >> (18 - 6 * i) & 63) as usize] as char
            } else {
                '='
            });
        }
    }
    out
}

/// Register the guard served at `addr` (trusting `ca_pem`) for pod DELETE and pods/eviction CREATE
/// in namespaces labelled `nodemedic.test/guard=<cluster.id>` (other scenarios sharing the control
/// plane are not affected); returns the webhook's name.
pub async fn register_guard(cluster: &Cluster, addr: SocketAddr, ca_pem: &str) -> String {
    let name = format!("guard-{}.nodemedic.io", cluster.id);
    let cfg = json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
    "metadata": {"name": name, "labels": {"nodemedic.test/run": cluster.id_label()}},
    "webhooks": [{
        "name": name,
        "clientConfig": {"url": format!("https://127.0.0.1:{}/validate", addr.port()), "caBundle": base64(ca_pem.as_bytes())},
        "rules": [
            {"apiGroups": [""], "apiVersions": ["v1"], "operations": ["DELETE"], "resources": ["pods"], "scope": "Namespaced"},
            {"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["pods/eviction"], "scope": "Namespaced"}
        ],
        "namespaceSelector": {"matchLabels": {"nodemedic.test/guard": cluster.id}},
        "failurePolicy": "Ignore",
        "sideEffects": "NoneOnDryRun",
        "admissionReviewVersions": ["v1"],
        "timeoutSeconds": 3
    }]});
    let api: Api<k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration> =
        Api::all(cluster.client.clone());
    api.create(
        &PostParams::default(),
        &serde_json::from_value(cfg).expect("a webhook configuration"),
    )
    .await
    .expect("register the webhook");
    name
}

#[cfg(test)]
mod tests {
    #[test]
    fn base64_matches_the_standard_alphabet_and_padding() {
        assert_eq!(super::base64(b"Man"), "TWFu");
        assert_eq!(super::base64(b"Ma"), "TWE=");
        assert_eq!(super::base64(b"M"), "TQ==");
    }
}
