//! Latency of the Kosmos guard under load: 8 concurrent HTTPS clients (one TLS connection each,
//! keep-alive) sending 20,000 AdmissionReview requests in all (half would be denied) to the guard
//! served in-process, its caches holding 5,000 nodes and 50,000 pods from the test API server.
//! Prints p50 / p99 / max and throughput.
//!
//! `cargo bench -p nodemedic-drainer --bench guard`

use std::sync::Arc;
use std::time::{Duration, Instant};

use nodemedic_drainer::config::Config;
use nodemedic_drainer::config::select::Selector;
use nodemedic_drainer::guard::GuardConfig;
use nodemedic_drainer::guard::server::GuardOptions;
use nodemedic_drainer::leader::LeaseConfig;
use nodemedic_drainer::run::{self, Options};
use nodemedic_tests::server::TestApiServer;
use serde_json::json;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};

const CLIENTS: usize = 8;
const REQUESTS: usize = 20_000;

fn review(i: usize) -> String {
    let node = format!("node-{:05}", i % 5_000);
    json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
        "uid": format!("uid-{i}"), "kind": {"group": "", "version": "v1", "kind": "Pod"},
        "resource": {"group": "", "version": "v1", "resource": "pods"}, "name": format!("p-{i}"), "namespace": "app",
        "operation": "DELETE", "userInfo": {"username": "system:serviceaccount:kube-system:node-controller"},
        "oldObject": {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": format!("p-{i}"), "namespace": "app"}, "spec": {"nodeName": node, "containers": []}}}})
    .to_string()
}

#[tokio::main]
async fn main() {
    let server = TestApiServer::start().await;
    for i in 0..5_000 {
        let kosmos = i % 2 == 0;
        server.put_object("v1", "nodes", None, json!({"metadata": {"name": format!("node-{i:05}"), "labels": if kosmos { json!({"kosmos.io/node": "true"}) } else { json!({}) }},
            "status": {"conditions": [{"type": "Ready", "status": "Unknown"}]}}));
        for j in 0..10 {
            server.put_object("v1", "pods", Some("app"), json!({"metadata": {"name": format!("p-{i}-{j}"), "namespace": "app"}, "spec": {"nodeName": format!("node-{i:05}"), "containers": [{"name": "c"}]}}));
        }
    }
    let dir = tempfile::tempdir().unwrap();
    let key = rcgen::KeyPair::generate().unwrap();
    let mut params = rcgen::CertificateParams::new(vec!["127.0.0.1".to_string()]).unwrap();
    params
        .subject_alt_names
        .push(rcgen::SanType::IpAddress("127.0.0.1".parse().unwrap()));
    let cert = params.self_signed(&key).unwrap();
    std::fs::write(dir.path().join("tls.crt"), cert.pem()).unwrap();
    std::fs::write(dir.path().join("tls.key"), key.serialize_pem()).unwrap();
    nodemedic_tests::drainer_objects(&server.client(), "kube-system", "bench", None).await;
    let running = run::start(
        Options {
            config: Config {
                selector: Selector::labels("none=x").unwrap(),
                conditions: vec!["KernelDeadlock".parse().unwrap()],
                ..Default::default()
            },
            listen: "127.0.0.1:0".parse().unwrap(),
            lease: LeaseConfig {
                namespace: "kube-system".into(),
                name: "bench".into(),
                identity: "b".into(),
                duration: Duration::from_secs(15),
                renew_deadline: Duration::from_secs(10),
                retry_period: Duration::from_secs(2),
            },
            tick: Duration::from_secs(5),
            reload: None,
            reboot_signing_key: None,
            record_key_file: None,
            record_key_previous_file: None,
            refuse_looser_start: false,
            settings: None,
            guard: Some(GuardOptions {
                listen: "127.0.0.1:0".parse().unwrap(),
                cert: dir.path().join("tls.crt"),
                key: dir.path().join("tls.key"),
                config: GuardConfig::default(),
            }),
        },
        server.client(),
    )
    .await
    .unwrap();
    let addr = running.guard_addr.unwrap();
    tokio::time::sleep(Duration::from_secs(5)).await; // caches sync

    let mut roots = rustls::RootCertStore::empty();
    roots.add(cert.der().clone()).unwrap();
    let tls = Arc::new(
        rustls::ClientConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth(),
    );
    let started = Instant::now();
    let mut tasks = Vec::new();
    for c in 0..CLIENTS {
        let tls = tls.clone();
        tasks.push(tokio::spawn(async move {
            let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
            let stream = tokio_rustls::TlsConnector::from(tls).connect(rustls::pki_types::ServerName::try_from("127.0.0.1").unwrap(), tcp).await.unwrap();
            let mut stream = BufReader::new(stream);
            let mut lat = Vec::new();
            let (mut denied, mut n) = (0, c);
            while n < REQUESTS {
                let body = review(n);
                let t0 = Instant::now();
                let req = format!("POST /validate HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}", body.len());
                stream.get_mut().write_all(req.as_bytes()).await.unwrap();
                let mut len = 0usize;
                loop {
                    let mut line = String::new();
                    stream.read_line(&mut line).await.unwrap();
                    if line == "\r\n" {
                        break;
                    }
                    if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                        len = v.trim().parse().unwrap();
                    }
                }
                let mut resp = vec![0; len];
                stream.read_exact(&mut resp).await.unwrap();
                lat.push(t0.elapsed());
                if String::from_utf8_lossy(&resp).contains("\"allowed\":false") {
                    denied += 1;
                }
                n += CLIENTS;
            }
            (lat, denied)
        }));
    }
    let mut all = Vec::new();
    let mut denied = 0;
    for t in tasks {
        let (l, d) = t.await.unwrap();
        all.extend(l);
        denied += d;
    }
    let wall = started.elapsed();
    all.sort();
    let pct = |p: f64| all[((all.len() as f64 * p) as usize).min(all.len() - 1)];
    println!(
        "guard: {} requests from {CLIENTS} clients in {wall:?} ({:.0} req/s), {denied} denied; latency p50 {:?}, p99 {:?}, max {:?}",
        all.len(),
        all.len() as f64 / wall.as_secs_f64(),
        pct(0.50),
        pct(0.99),
        all[all.len() - 1]
    );
    running.shutdown().await;
}
