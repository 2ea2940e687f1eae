//! The Kosmos eviction guard over real HTTPS: AdmissionReview requests allowed and denied, a malformed
//! body answered 400, an unknown node allowed, node state followed through the API server's watch,
//! Events and metrics, and certificate reload; on the real control plane also through a real
//! ValidatingWebhookConfiguration, with the API server calling the guard for real deletions under
//! both identities kube-controller-manager may use.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, Pod};
use kube::Api;
use kube::api::{Patch, PatchParams, PostParams};
use nodemedic_drainer::config::Config;
use nodemedic_drainer::config::select::Selector;
use nodemedic_drainer::guard::GuardConfig;
use nodemedic_drainer::guard::server::GuardOptions;
use nodemedic_drainer::leader::LeaseConfig;
use nodemedic_drainer::run::{self, Options, Running};
use nodemedic_tests::cluster::{Cluster, eventually};
use nodemedic_tests::webhook::{register_guard, write_cert};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const NC: &str = "system:serviceaccount:kube-system:node-controller";
/// Generous: a busy machine is not a failure; a passing wait returns as soon as it sees it.
const WAIT: Duration = Duration::from_secs(60);

/// A TLS connection to the guard trusting only `ca_pem`.
async fn connect(
    addr: std::net::SocketAddr,
    ca_pem: &str,
) -> Result<tokio_rustls::client::TlsStream<tokio::net::TcpStream>, String> {
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
    tokio_rustls::TlsConnector::from(Arc::new(cfg))
        .connect(name, tcp)
        .await
        .map_err(|e| e.to_string())
}

/// POST `body` to https://addr/validate trusting only `ca_pem`; returns (status, body).
async fn post(
    addr: std::net::SocketAddr,
    ca_pem: &str,
    body: &str,
) -> Result<(u16, String), String> {
    post_as(addr, ca_pem, "application/json", body).await
}

async fn post_as(
    addr: std::net::SocketAddr,
    ca_pem: &str,
    content_type: &str,
    body: &str,
) -> Result<(u16, String), String> {
    let mut tls = connect(addr, ca_pem).await?;
    let req = format!(
        "POST /validate HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
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

async fn node(cluster: &Cluster, name: &str, kosmos: bool, ready: &str) {
    let mut labels = json!({"nodemedic.test/run": cluster.id_label()});
    if kosmos {
        labels["kosmos.io/node"] = json!("true");
    }
    let n: Node =
        serde_json::from_value(json!({"metadata": {"name": name, "labels": labels}})).unwrap();
    Api::<Node>::all(cluster.client.clone())
        .create(&PostParams::default(), &n)
        .await
        .unwrap();
    cluster.kubelet.adopt(name);
    set_ready(cluster, name, ready).await;
}

async fn set_ready(cluster: &Cluster, name: &str, ready: &str) {
    let body = json!({"status": {"conditions": [{"type": "Ready", "status": ready, "reason": "Test", "message": "m",
        "lastHeartbeatTime": "2026-11-22T00:00:00Z", "lastTransitionTime": "2026-11-22T00:00:00Z"}]}});
    Api::<Node>::all(cluster.client.clone())
        .patch_status(name, &PatchParams::default(), &Patch::Strategic(body))
        .await
        .unwrap();
}

async fn start(cluster: &Cluster, dir: &Path) -> Running {
    start_with(cluster, dir, GuardConfig::default()).await
}

async fn start_with(cluster: &Cluster, dir: &Path, config: GuardConfig) -> Running {
    let lease = cluster.name("guard-test");
    let run = cluster.id_label();
    nodemedic_tests::drainer_objects(&cluster.client, "kube-system", &lease, Some(&run)).await;
    let opts = Options {
        config: Config {
            selector: Selector::labels("nodemedic.test/none=x").unwrap(),
            conditions: vec!["KernelDeadlock".parse().unwrap()],
            ..Default::default()
        },
        listen: "127.0.0.1:0".parse().unwrap(),
        lease: LeaseConfig {
            namespace: "kube-system".into(),
            name: lease,
            identity: "g".into(),
            duration: Duration::from_secs(2),
            renew_deadline: Duration::from_millis(1500),
            retry_period: Duration::from_millis(200),
        },
        tick: Duration::from_millis(200),
        reload: None,
        reboot_signing_key: None,
        record_key_file: None,
        record_key_previous_file: None,
        refuse_looser_start: false,
        settings: None,
        guard: Some(GuardOptions {
            listen: "127.0.0.1:0".parse().unwrap(),
            cert: dir.join("tls.crt"),
            key: dir.join("tls.key"),
            config,
        }),
    };
    run::start(opts, cluster.client.clone()).await.unwrap()
}

#[tokio::test]
async fn slow_clients_are_cut_off_and_connections_beyond_the_limit_refused() {
    let cluster = Cluster::new().await;
    let dir = tempfile::tempdir().unwrap();
    let ca = write_cert(dir.path(), "guard-limits");
    let config = GuardConfig {
        header_timeout: Duration::from_secs(1),
        request_timeout: Duration::from_secs(2),
        max_connections: 3,
        ..Default::default()
    };
    let running = start_with(&cluster, dir.path(), config).await;
    let addr = running.guard_addr.unwrap();

    // Headers that never end: the connection is closed after the header timeout.
    let mut slow = connect(addr, &ca).await.unwrap();
    slow.write_all(b"POST /validate HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        .await
        .unwrap();
    let mut buf = Vec::new();
    let closed = tokio::time::timeout(WAIT, slow.read_to_end(&mut buf)).await;
    assert!(
        closed.is_ok(),
        "a slowloris connection is closed by the guard"
    );
    drop(slow);

    // A body that trickles: 408 after the request timeout.
    let mut trickle = connect(addr, &ca).await.unwrap();
    trickle
        .write_all(
            b"POST /validate HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 100\r\n\r\n{\"a\":",
        )
        .await
        .unwrap();
    let mut buf = Vec::new();
    let _ = tokio::time::timeout(WAIT, trickle.read_to_end(&mut buf)).await;
    let text = String::from_utf8_lossy(&buf);
    assert!(text.starts_with("HTTP/1.1 408"), "{text:?}");
    drop(trickle);

    // Three connections held open: a fourth is refused at accept, before any TLS.
    let held = eventually("three connections accepted", WAIT, || async {
        let mut held = Vec::new();
        for _ in 0..3 {
            held.push(connect(addr, &ca).await.ok()?);
        }
        Some(held)
    })
    .await;
    assert!(
        connect(addr, &ca).await.is_err(),
        "a connection beyond the limit is refused"
    );
    drop(held);
    // Their permits come back: requests are served again.
    let review = json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
        "uid": "u-limits", "kind": {"group": "", "version": "v1", "kind": "Pod"},
        "resource": {"group": "", "version": "v1", "resource": "pods"}, "name": "p", "namespace": "app",
        "operation": "DELETE", "userInfo": {"username": NC}}})
    .to_string();
    let (status, _) = eventually("served after the held connections closed", WAIT, || async {
        post(addr, &ca, &review).await.ok()
    })
    .await;
    assert_eq!(status, 200);
    running.shutdown().await;
}

/// Bytes in flight are capped over every connection: with one large review holding most of the
/// budget, the next that would go over is shed unread (503, which the API server's failurePolicy
/// Ignore admits: the guard fails open) and counted; once the first is answered, reviews are served
/// again. A review over the per-request cap is refused outright.
#[tokio::test]
async fn reviews_beyond_the_bytes_in_flight_cap_are_shed_and_counted() {
    let cluster = Cluster::new().await;
    let dir = tempfile::tempdir().unwrap();
    let ca = write_cert(dir.path(), "guard-bytes");
    let config = GuardConfig {
        max_bytes_in_flight: 64 * 1024,
        max_request_bytes: 48 * 1024,
        request_timeout: Duration::from_secs(30),
        ..Default::default()
    };
    let running = start_with(&cluster, dir.path(), config).await;
    let addr = running.guard_addr.unwrap();
    // A review that declares 40 KiB and sends its body slowly: it holds 40 KiB of the budget.
    let mut big = connect(addr, &ca).await.unwrap();
    big.write_all(
        b"POST /validate HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 40960\r\n\r\n{",
    )
    .await
    .unwrap();
    let review = |uid: &str| {
        json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
            "uid": uid, "kind": {"group": "", "version": "v1", "kind": "Pod"},
            "resource": {"group": "", "version": "v1", "resource": "pods"}, "name": "p", "namespace": "app",
            "operation": "DELETE", "userInfo": {"username": NC},
            "object": {"padding": "x".repeat(30 * 1024)}}})
        .to_string()
    };
    // 40 KiB held + 30 KiB more is over 64 KiB: shed.
    let (status, _) = eventually("a review shed while the budget is held", WAIT, || async {
        post(addr, &ca, &review("u-shed"))
            .await
            .ok()
            .filter(|(s, _)| *s == 503)
    })
    .await;
    assert_eq!(status, 503);
    let metrics = nodemedic_tests::http_get(&format!("http://{}/metrics", running.addr)).await;
    assert!(
        metrics
            .lines()
            .any(|l| l.starts_with("nodemedic_guard_shed_total ") && !l.ends_with(" 0")),
        "{metrics}"
    );
    // The held review goes: its bytes come back.
    drop(big);
    let (status, body) = eventually("served once the budget is free", WAIT, || async {
        post(addr, &ca, &review("u-after"))
            .await
            .ok()
            .filter(|(s, _)| *s == 200)
    })
    .await;
    assert_eq!(status, 200, "{body}");
    // Over the per-request cap: refused before it is read.
    let huge = json!({"padding": "x".repeat(60 * 1024)}).to_string();
    let (status, _) = post(addr, &ca, &huge).await.unwrap();
    assert_eq!(status, 413);
    running.shutdown().await;
}

#[tokio::test]
async fn guard_allows_and_denies_pod_deletions_over_https() {
    let cluster = Cluster::new().await;
    let (leaf, ordinary) = (cluster.name("kosmos-leaf"), cluster.name("ordinary"));
    node(&cluster, &leaf, true, "Unknown").await;
    node(&cluster, &ordinary, false, "False").await;
    // The eviction request names only the pod: the guard finds its node in the pod cache.
    cluster.ensure_namespace("app", json!({})).await;
    let web2 = cluster.name("web-2");
    let pod: Pod = serde_json::from_value(json!({"metadata": {"name": web2, "namespace": "app", "labels": {"nodemedic.test/run": cluster.id_label()}},
        "spec": {"nodeName": leaf, "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.9"}]}})).unwrap();
    Api::<Pod>::namespaced(cluster.client.clone(), "app")
        .create(&PostParams::default(), &pod)
        .await
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let ca = write_cert(dir.path(), "guard-1");
    let running = start(&cluster, dir.path()).await;
    let addr = running.guard_addr.unwrap();

    // denied: node-controller deleting a pod of a leaf node that is not Ready
    let (ok, msg) = eventually("a denial once the node cache synced", WAIT, || async {
        let r = allowed(
            &post(addr, &ca, &review("DELETE", None, NC, "web-1", Some(&leaf)))
                .await
                .unwrap(),
        );
        (!r.0).then_some(r)
    })
    .await;
    assert!(!ok);
    assert!(
        msg.contains("app/web-1") && msg.contains(&leaf) && msg.contains("kosmos-leaf-not-ready"),
        "{msg}"
    );
    // eviction of a pod known to the pod cache on that node: denied too (once the pod cache has it)
    eventually("eviction by node-controller denied", WAIT, || async {
        let r = allowed(
            &post(
                addr,
                &ca,
                &review("CREATE", Some("eviction"), NC, &web2, None),
            )
            .await
            .unwrap(),
        );
        (!r.0).then_some(())
    })
    .await;
    // allowed: another user, an ordinary node, an unknown node, an unknown pod's eviction
    assert!(
        allowed(
            &post(
                addr,
                &ca,
                &review("DELETE", None, "alice", "web-1", Some(&leaf))
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
                &review("DELETE", None, NC, "web-1", Some(&ordinary))
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
    // another media type: 415; another kind of object in a review's clothes: 400
    let denied_review = review("DELETE", None, NC, "web-1", Some(&leaf));
    let (status, body) = post_as(addr, &ca, "text/plain", &denied_review)
        .await
        .unwrap();
    assert_eq!(status, 415, "{body}");
    assert!(
        body.contains("expected Content-Type: application/json"),
        "{body}"
    );
    let (status, body) = post(
        addr,
        &ca,
        &denied_review.replacen("\"kind\":\"AdmissionReview\"", "\"kind\":\"Pod\"", 1),
    )
    .await
    .unwrap();
    assert_eq!(status, 400, "{body}");
    assert!(body.contains("kind \"Pod\""), "{body}");
    // the node becomes Ready (through the watch): allowed
    set_ready(&cluster, &leaf, "True").await;
    eventually("allowed once Ready", WAIT, || async {
        allowed(
            &post(addr, &ca, &review("DELETE", None, NC, "web-1", Some(&leaf)))
                .await
                .unwrap(),
        )
        .0
        .then_some(())
    })
    .await;
    // an Event on the node, and metrics by decision
    eventually("a PodDeletionBlocked Event on the leaf", WAIT, || async {
        cluster
            .node_events_from(&leaf, &["nodemedic-guard"])
            .await
            .into_iter()
            .find(|e| e.reason.as_deref() == Some("PodDeletionBlocked"))
    })
    .await;
    let metrics = nodemedic_tests::http_get(&format!("http://{}/metrics", running.addr)).await;
    assert!(
        metrics.contains("nodemedic_guard_requests_total{decision=\"denied\"}"),
        "{metrics}"
    );
    assert!(
        metrics.contains("nodemedic_guard_requests_total{decision=\"malformed\"} 3"),
        "{metrics}"
    );
    running.shutdown().await;
    cluster.cleanup(&["app"]).await;
}

/// `nodemedic_guard_certificate_checks_total`: the times the files were looked at.
fn cert_checks(metrics: &str) -> u64 {
    metrics
        .lines()
        .find_map(|l| l.strip_prefix("nodemedic_guard_certificate_checks_total "))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0)
}

fn cert_reloads(metrics: &str) -> u64 {
    metrics
        .lines()
        .find_map(|l| {
            l.strip_prefix("nodemedic_guard_certificate_reloads_total{result=\"success\"} ")
        })
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0)
}

#[tokio::test]
async fn the_guard_certificate_is_reloaded_when_its_files_change() {
    let cluster = Cluster::new().await;
    let dir = tempfile::tempdir().unwrap();
    let first = write_cert(dir.path(), "guard-1");
    let running = start(&cluster, dir.path()).await;
    let metrics_url = format!("http://{}/metrics", running.addr);
    let checked = |n: u64| {
        let url = metrics_url.clone();
        async move {
            eventually(
                &format!("{n} look(s) at the certificate files"),
                WAIT,
                || async {
                    (cert_checks(&nodemedic_tests::http_get(&url).await) >= n).then_some(())
                },
            )
            .await
        }
    };
    // Reading the files (as an operator or a backup would) is no reason to reload: not even a
    // look. Rewriting the same bytes is looked at (after the reads) and is no reason either.
    for _ in 0..20 {
        let _ = std::fs::read(dir.path().join("tls.crt")).unwrap();
        let _ = std::fs::read(dir.path().join("tls.key")).unwrap();
    }
    let same = std::fs::read(dir.path().join("tls.crt")).unwrap();
    std::fs::write(dir.path().join("tls.crt"), same).unwrap();
    checked(1).await;
    assert_eq!(
        cert_reloads(&nodemedic_tests::http_get(&metrics_url).await),
        0
    );
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
    // No loop on its own reads: a last rewrite of the same bytes is looked at, and no reload came
    // before it or with it.
    let looked = cert_checks(&nodemedic_tests::http_get(&metrics_url).await);
    let same = std::fs::read(dir.path().join("tls.crt")).unwrap();
    std::fs::write(dir.path().join("tls.crt"), same).unwrap();
    checked(looked + 1).await;
    assert_eq!(
        cert_reloads(&nodemedic_tests::http_get(&metrics_url).await),
        1,
        "one change, one reload (no loop on its own reads)"
    );
    running.shutdown().await;
    cluster.cleanup(&[]).await;
}

#[tokio::test]
async fn through_the_api_server_real_deletions_of_a_leaf_nodes_pods_are_denied_under_both_controller_identities()
 {
    use kube::api::{DeleteParams, EvictParams};
    use nodemedic_tests::envtest::{self, KCM_USER};
    let cluster = Cluster::new().await;
    let Some(plane) = cluster.plane else {
        envtest::say_skipped(
            "through_the_api_server_real_deletions_are_denied",
            "kube-apiserver calling the guard as a validating webhook",
        );
        return;
    };
    let leaf = cluster.name("leaf");
    node(&cluster, &leaf, true, "Unknown").await;
    let ns = cluster.name("guarded");
    cluster
        .ensure_namespace(&ns, json!({"nodemedic.test/guard": cluster.id}))
        .await;
    let pods: Vec<String> = (0..3).map(|i| format!("web-{i}")).collect();
    for p in &pods {
        let pod: Pod = serde_json::from_value(json!({"metadata": {"name": p, "namespace": ns},
            "spec": {"nodeName": leaf, "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.9"}]}}))
        .unwrap();
        Api::<Pod>::namespaced(cluster.client.clone(), &ns)
            .create(&PostParams::default(), &pod)
            .await
            .unwrap();
    }
    let dir = tempfile::tempdir().unwrap();
    let ca = write_cert(dir.path(), "guard-1");
    let running = start_with(
        &cluster,
        dir.path(),
        GuardConfig {
            event_interval: Duration::from_secs(1),
            ..Default::default()
        },
    )
    .await;
    let webhook = register_guard(&cluster, running.guard_addr.unwrap(), &ca).await;

    // The controller manager's own user carries the rights of all its controllers (as our token
    // file grants it: system:masters); the node-controller service account has its RBAC role.
    let as_user = |user: &str| {
        let client = if user == KCM_USER {
            plane.client_impersonating_groups(user, &["system:masters"])
        } else {
            plane.client_impersonating(user)
        };
        Api::<Pod>::namespaced(client, &ns)
    };
    // Probe with dry-run deletions (no side effects) until the API server calls the guard and the
    // guard's node cache has synced (it fails open before).
    let dry = DeleteParams {
        dry_run: true,
        ..Default::default()
    };
    eventually("the API server consults the guard", WAIT, || async {
        match as_user(NC).delete(&pods[0], &dry).await {
            Err(kube::Error::Api(e)) if e.message.contains("kosmos-leaf-not-ready") => Some(()),
            _ => None,
        }
    })
    .await;
    // Real deletions and evictions, as the node lifecycle controller makes them with
    // --use-service-account-credentials=true (its service account) and =false (the controller
    // manager's own user): every one denied, every pod still there.
    let mut denied: i32 = 0;
    for user in [NC, KCM_USER] {
        for p in &pods {
            let err = as_user(user)
                .delete(p, &DeleteParams::default())
                .await
                .expect_err("denied");
            assert!(
                err.to_string().contains("kosmos-leaf-not-ready"),
                "{user}: {err}"
            );
            denied += 1;
        }
    }
    // An eviction too (the node-controller's RBAC has no evictions; the controller manager's own
    // user here is system:masters).
    let err = as_user(KCM_USER)
        .evict(&pods[0], &EvictParams::default())
        .await
        .expect_err("eviction denied");
    assert!(err.to_string().contains("kosmos-leaf-not-ready"), "{err}");
    denied += 1;
    for p in &pods {
        assert!(
            Api::<Pod>::namespaced(cluster.client.clone(), &ns)
                .get_opt(p)
                .await
                .unwrap()
                .is_some(),
            "{p} survived"
        );
    }
    // Someone else (an operator) is not stopped.
    assert!(
        as_user("alice@example.com")
            .delete(&pods[0], &dry)
            .await
            .is_ok()
            || as_user("alice@example.com")
                .delete(&pods[0], &dry)
                .await
                .is_err_and(|e| !e.to_string().contains("kosmos")),
        "an operator's deletion is not the guard's business"
    );
    // The decision is in the API server's audit log under the webhook's name.
    let key = format!("{webhook}/decision");
    let audited = plane
        .audit()
        .iter()
        .filter(|e| {
            e.namespace == ns
                && e.annotations.get(&key).map(String::as_str)
                    == Some("denied: kosmos-leaf-not-ready")
        })
        .count();
    assert!(
        audited >= denied as usize,
        "{audited} audited denials for {denied}"
    );
    // One PodDeletionBlocked Event whose count is every denial (held-back ones flushed on a timer).
    let ev = eventually(
        &format!("PodDeletionBlocked with count {denied}"),
        WAIT,
        || async {
            cluster
                .node_events_from(&leaf, &["nodemedic-guard"])
                .await
                .into_iter()
                .find(|e| {
                    e.reason.as_deref() == Some("PodDeletionBlocked") && e.count == Some(denied)
                })
        },
    )
    .await;
    assert_eq!(
        cluster
            .node_events_from(&leaf, &["nodemedic-guard"])
            .await
            .len(),
        1,
        "one Event object: {ev:?}"
    );
    // Ready again: the node-controller's deletion goes through.
    set_ready(&cluster, &leaf, "True").await;
    eventually("allowed once Ready", WAIT, || async {
        as_user(NC).delete(&pods[1], &dry).await.ok()
    })
    .await;
    // The API server's own view of the webhook's latency.
    let metrics = plane.metrics().await;
    // Summed over its series (one per operation and rejected=true|false).
    let series = |suffix: &str| -> f64 {
        metrics
            .lines()
            .filter(|l| {
                l.starts_with(&format!(
                    "apiserver_admission_webhook_admission_duration_seconds_{suffix}{{"
                )) && l.contains(&format!("name=\"{webhook}\""))
            })
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .sum()
    };
    let (sum, count) = (series("sum"), series("count"));
    assert!(
        count >= denied as f64,
        "the API server timed {count} calls of the guard"
    );
    eprintln!(
        "guard webhook, as the API server timed it: {count} calls, mean {:.2} ms",
        sum / count * 1000.0
    );
    let api: Api<k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration> =
        Api::all(cluster.client.clone());
    let _ = api.delete(&webhook, &DeleteParams::default()).await;
    running.shutdown().await;
    let _ = Api::<Pod>::namespaced(cluster.client.clone(), &ns)
        .delete_collection(
            &DeleteParams::default().grace_period(0),
            &Default::default(),
        )
        .await;
    cluster.cleanup(&[]).await;
}
