//! The Kosmos eviction guard over real HTTPS: AdmissionReview requests allowed and denied, a malformed
//! body answered 400, an unknown node allowed, node state followed through the test API server's
//! watch, Events and metrics, and certificate reload.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, Pod};
use kube::Api;
use kube::api::{Patch, PatchParams, PostParams};
use nodemedic_drainer::config::Config;
use nodemedic_drainer::guard::GuardConfig;
use nodemedic_drainer::guard::server::GuardOptions;
use nodemedic_drainer::leader::LeaseConfig;
use nodemedic_drainer::run::{self, Options, Running};
use nodemedic_drainer::select::Selector;
use nodemedic_tests::cluster::eventually;
use nodemedic_tests::server::TestApiServer;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const NC: &str = "system:serviceaccount:kube-system:node-controller";
const WAIT: Duration = Duration::from_secs(20);

/// A self-signed certificate for 127.0.0.1 written to DIR/tls.crt and DIR/tls.key; returns the PEM.
fn write_cert(dir: &Path, cn: &str) -> String {
    let mut params =
        rcgen::CertificateParams::new(vec!["127.0.0.1".to_string(), "localhost".to_string()])
            .unwrap();
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, cn);
    params
        .subject_alt_names
        .push(rcgen::SanType::IpAddress("127.0.0.1".parse().unwrap()));
    let key = rcgen::KeyPair::generate().unwrap();
    let cert = params.self_signed(&key).unwrap();
    std::fs::write(dir.join("tls.key.tmp"), key.serialize_pem()).unwrap();
    std::fs::write(dir.join("tls.crt.tmp"), cert.pem()).unwrap();
    std::fs::rename(dir.join("tls.key.tmp"), dir.join("tls.key")).unwrap();
    std::fs::rename(dir.join("tls.crt.tmp"), dir.join("tls.crt")).unwrap();
    cert.pem()
}

/// POST `body` to https://addr/validate trusting only `ca_pem`; returns (status, body).
async fn post(
    addr: std::net::SocketAddr,
    ca_pem: &str,
    body: &str,
) -> Result<(u16, String), String> {
    let mut roots = rustls::RootCertStore::empty();
    let der = rustls::pki_types::CertificateDer::from(pem_der(ca_pem));
    roots.add(der).map_err(|e| e.to_string())?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let cfg = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    let tcp = tokio::net::TcpStream::connect(addr)
        .await
        .map_err(|e| e.to_string())?;
    let name = rustls::pki_types::ServerName::try_from("127.0.0.1").unwrap();
    let mut tls = tokio_rustls::TlsConnector::from(Arc::new(cfg))
        .connect(name, tcp)
        .await
        .map_err(|e| e.to_string())?;
    let req = format!(
        "POST /validate HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    tls.write_all(req.as_bytes())
        .await
        .map_err(|e| e.to_string())?;
    let mut buf = Vec::new();
    let _ = tls.read_to_end(&mut buf).await;
    let text = String::from_utf8_lossy(&buf).into_owned();
    let status: u16 = text
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or(format!("no status in {text:?}"))?;
    let body = text
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or_default();
    Ok((status, body))
}

fn pem_der(pem: &str) -> Vec<u8> {
    let b64: String = pem.lines().filter(|l| !l.starts_with("-----")).collect();
    base64_decode(&b64)
}

fn base64_decode(s: &str) -> Vec<u8> {
    const T: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = Vec::new();
    let (mut acc, mut bits) = (0u32, 0);
    for c in s.bytes().filter(|c| *c != b'=') {
        acc = (acc << 6) | T.iter().position(|t| *t == c).unwrap() as u32;
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
        }
    }
    out
}

fn review(operation: &str, sub: Option<&str>, user: &str, pod: &str, node: Option<&str>) -> String {
    let mut req = json!({
        "uid": "705ab4f5-6393-11e8-b7cc-42010a800002",
        "kind": {"group": "", "version": "v1", "kind": "Pod"},
        "resource": {"group": "", "version": "v1", "resource": "pods"},
        "name": pod, "namespace": "app", "operation": operation,
        "userInfo": {"username": user},
        "dryRun": false
    });
    if let Some(s) = sub {
        req["subResource"] = json!(s);
        req["kind"] = json!({"group": "policy", "version": "v1", "kind": "Eviction"});
        req["object"] = json!({"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": pod, "namespace": "app"}});
    }
    if let Some(n) = node {
        req["oldObject"] = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": pod, "namespace": "app"}, "spec": {"nodeName": n, "containers": []}});
    }
    json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": req})
        .to_string()
}

fn allowed(resp: &(u16, String)) -> (bool, String) {
    assert_eq!(resp.0, 200, "{}", resp.1);
    let v: Value = serde_json::from_str(&resp.1).unwrap();
    assert_eq!(v["response"]["uid"], "705ab4f5-6393-11e8-b7cc-42010a800002");
    (
        v["response"]["allowed"].as_bool().unwrap(),
        v["response"]["status"]["message"]
            .as_str()
            .unwrap_or("")
            .to_string(),
    )
}

async fn node(server: &TestApiServer, name: &str, kosmos: bool, ready: &str) {
    let labels = if kosmos {
        json!({"kosmos.io/node": "true"})
    } else {
        json!({})
    };
    let n: Node =
        serde_json::from_value(json!({"metadata": {"name": name, "labels": labels}})).unwrap();
    Api::<Node>::all(server.client())
        .create(&PostParams::default(), &n)
        .await
        .unwrap();
    set_ready(server, name, ready).await;
}

async fn set_ready(server: &TestApiServer, name: &str, ready: &str) {
    let body = json!({"status": {"conditions": [{"type": "Ready", "status": ready, "reason": "Test", "message": "m",
        "lastHeartbeatTime": "2026-11-22T00:00:00Z", "lastTransitionTime": "2026-11-22T00:00:00Z"}]}});
    Api::<Node>::all(server.client())
        .patch_status(name, &PatchParams::default(), &Patch::Strategic(body))
        .await
        .unwrap();
}

async fn start(server: &TestApiServer, dir: &Path) -> Running {
    let opts = Options {
        config: Config {
            selector: Selector::labels("nodemedic.test/none=x").unwrap(),
            conditions: vec!["KernelDeadlock".parse().unwrap()],
            ..Default::default()
        },
        listen: "127.0.0.1:0".parse().unwrap(),
        lease: LeaseConfig {
            namespace: "kube-system".into(),
            name: "guard-test".into(),
            identity: "g".into(),
            duration: Duration::from_secs(2),
            renew_deadline: Duration::from_millis(1500),
            retry_period: Duration::from_millis(200),
        },
        tick: Duration::from_millis(200),
        guard: Some(GuardOptions {
            listen: "127.0.0.1:0".parse().unwrap(),
            cert: dir.join("tls.crt"),
            key: dir.join("tls.key"),
            config: GuardConfig::default(),
        }),
    };
    run::start(opts, server.client()).await.unwrap()
}

#[tokio::test]
async fn guard_allows_and_denies_pod_deletions_over_https() {
    let server = TestApiServer::start().await;
    node(&server, "kosmos-leaf", true, "Unknown").await;
    node(&server, "ordinary", false, "False").await;
    let pod: Pod = serde_json::from_value(json!({"metadata": {"name": "web-2", "namespace": "app"}, "spec": {"nodeName": "kosmos-leaf", "containers": [{"name": "c"}]}})).unwrap();
    Api::<Pod>::namespaced(server.client(), "app")
        .create(&PostParams::default(), &pod)
        .await
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let ca = write_cert(dir.path(), "guard-1");
    let running = start(&server, dir.path()).await;
    let addr = running.guard_addr.unwrap();

    // denied: node-controller deleting a pod of a leaf node that is not Ready
    let (ok, msg) = eventually("a denial once the node cache synced", WAIT, || async {
        let r = allowed(
            &post(
                addr,
                &ca,
                &review("DELETE", None, NC, "web-1", Some("kosmos-leaf")),
            )
            .await
            .unwrap(),
        );
        (!r.0).then_some(r)
    })
    .await;
    assert!(!ok);
    assert!(
        msg.contains("app/web-1")
            && msg.contains("kosmos-leaf")
            && msg.contains("kosmos-leaf-not-ready"),
        "{msg}"
    );
    // eviction of a pod known to the pod cache on that node: denied too
    let (ok, _) = allowed(
        &post(
            addr,
            &ca,
            &review("CREATE", Some("eviction"), NC, "web-2", None),
        )
        .await
        .unwrap(),
    );
    assert!(!ok, "eviction by node-controller denied");
    // allowed: another user, an ordinary node, an unknown node, an unknown pod's eviction
    assert!(
        allowed(
            &post(
                addr,
                &ca,
                &review("DELETE", None, "alice", "web-1", Some("kosmos-leaf"))
            )
            .await
            .unwrap()
        )
        .0
    );
    assert!(
        allowed(
            &post(
                addr,
                &ca,
                &review("DELETE", None, NC, "web-1", Some("ordinary"))
            )
            .await
            .unwrap()
        )
        .0
    );
    assert!(
        allowed(
            &post(
                addr,
                &ca,
                &review("DELETE", None, NC, "web-1", Some("no-such-node"))
            )
            .await
            .unwrap()
        )
        .0
    );
    assert!(
        allowed(
            &post(
                addr,
                &ca,
                &review("CREATE", Some("eviction"), NC, "unknown-pod", None)
            )
            .await
            .unwrap()
        )
        .0
    );
    // malformed body: 400 with a clear message
    let (status, body) = post(addr, &ca, "{not json").await.unwrap();
    assert_eq!(status, 400);
    assert!(body.contains("malformed AdmissionReview"), "{body}");
    // the node becomes Ready (through the watch): allowed
    set_ready(&server, "kosmos-leaf", "True").await;
    eventually("allowed once Ready", WAIT, || async {
        allowed(
            &post(
                addr,
                &ca,
                &review("DELETE", None, NC, "web-1", Some("kosmos-leaf")),
            )
            .await
            .unwrap(),
        )
        .0
        .then_some(())
    })
    .await;
    // an Event on the node, and metrics by decision
    let events = server.objects("v1", "events");
    assert!(
        events
            .iter()
            .any(|e| e["reason"] == "PodDeletionBlocked"
                && e["involvedObject"]["name"] == "kosmos-leaf"),
        "{events:?}"
    );
    let metrics = nodemedic_tests::http_get(&format!("http://{}/metrics", running.addr)).await;
    assert!(
        metrics.contains("nodemedic_guard_requests_total{decision=\"denied\"}"),
        "{metrics}"
    );
    assert!(
        metrics.contains("nodemedic_guard_requests_total{decision=\"malformed\"} 1"),
        "{metrics}"
    );
    running.shutdown().await;
}

#[tokio::test]
async fn the_guard_certificate_is_reloaded_when_its_files_change() {
    let server = TestApiServer::start().await;
    let dir = tempfile::tempdir().unwrap();
    let first = write_cert(dir.path(), "guard-1");
    let running = start(&server, dir.path()).await;
    let addr = running.guard_addr.unwrap();
    assert!(
        post(addr, &first, &review("DELETE", None, "alice", "p", None))
            .await
            .is_ok()
    );
    let second = write_cert(dir.path(), "guard-2");
    eventually("the new certificate is served", WAIT, || async {
        post(addr, &second, &review("DELETE", None, "alice", "p", None))
            .await
            .ok()
    })
    .await;
    assert!(
        post(addr, &first, &review("DELETE", None, "alice", "p", None))
            .await
            .is_err(),
        "the old certificate is no longer served"
    );
    running.shutdown().await;
}
