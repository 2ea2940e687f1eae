//! The drainer's listeners under a slowloris attack: the drainer binary serves the guard and its
//! operations listener (/metrics, /healthz; against the test API server). First 10,000 TCP
//! connections each send the first bytes of a TLS ClientHello to the guard and then nothing; then
//! as many send the start of an HTTP request's headers to the operations listener and then nothing.
//! Prints, for each, the drainer's RSS before, while they are held and at its peak, how many the
//! listener let in (the rest are closed at accept), and how long until every connection was closed.
//!
//! `cargo bench -p nodemedic-drainer --bench slowloris` (`SLOWLORIS_CONNECTIONS` to change 10,000;
//! the bench needs twice that many file descriptors).

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use nodemedic_tests::bench::free_port;
use nodemedic_tests::process::status_mib;
use nodemedic_tests::server::TestApiServer;

#[tokio::main]
async fn main() {
    let n: usize = std::env::var("SLOWLORIS_CONNECTIONS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(10_000);
    let server = TestApiServer::start().await;
    let dir = tempfile::tempdir().unwrap();
    nodemedic_tests::webhook::write_cert(dir.path(), "slowloris-bench");
    let kubeconfig = dir.path().join("kubeconfig");
    std::fs::write(
        &kubeconfig,
        format!(
            "apiVersion: v1\nkind: Config\nclusters: [{{name: c, cluster: {{server: \"{}\"}}}}]\n\
             users: [{{name: u, user: {{}}}}]\ncontexts: [{{name: c, context: {{cluster: c, user: u}}}}]\ncurrent-context: c\n",
            server.url()
        ),
    )
    .unwrap();
    // The record key Secret, as the manifests ship it (empty; the drainer fills it).
    server.put_object(
        "v1",
        "secrets",
        Some("kube-system"),
        serde_json::json!({"metadata": {"name": "nodemedic-drainer-record-key", "namespace": "kube-system"}}),
    );
    let guard_port = free_port();
    let ops_port = free_port();
    let mut child = Command::new(nodemedic_tests::bins::shipped_drainer())
        .args(["run", "KernelDeadlock=True", "--node-selector", "none=x"])
        .args(["--listen", &format!("127.0.0.1:{ops_port}")])
        .args(["--guard-listen", &format!("127.0.0.1:{guard_port}")])
        .arg("--guard-tls-cert")
        .arg(dir.path().join("tls.crt"))
        .arg("--guard-tls-key")
        .arg(dir.path().join("tls.key"))
        .env("KUBECONFIG", &kubeconfig)
        .env("POD_NAME", "slowloris-bench")
        .env("RUST_LOG", "warn")
        .stdout(Stdio::null())
        .spawn()
        .expect("start the drainer");
    let pid = child.id();
    let deadline = Instant::now() + Duration::from_secs(30);
    while TcpStream::connect(("127.0.0.1", guard_port)).is_err() {
        assert!(Instant::now() < deadline, "the guard did not come up");
        std::thread::sleep(Duration::from_millis(100));
    }
    std::thread::sleep(Duration::from_secs(2));
    // The start of a TLS handshake record (type 22, TLS 1.0, length 512), then silence.
    attack("guard", pid, guard_port, &[0x16, 0x03, 0x01, 0x02, 0x00], n);
    // The start of a scrape's headers, then silence.
    attack(
        "operations listener",
        pid,
        ops_port,
        b"GET /metrics HTTP/1.1\r\nHost: x\r\nX-Slow: ",
        n,
    );
    let _ = child.kill();
    let _ = child.wait();
}

/// `n` connections to `port`, each sending `first` and then nothing; what the drainer `pid` holds
/// and how long until the listener closed them all, printed.
fn attack(what: &str, pid: u32, port: u16, first: &[u8], n: usize) {
    let before = status_mib(pid, "VmRSS:");
    let opened = Instant::now();
    let mut conns = Vec::with_capacity(n);
    for _ in 0..n {
        match TcpStream::connect(("127.0.0.1", port)) {
            Ok(mut s) => {
                let _ = s.write_all(first);
                let _ = s.set_nonblocking(true);
                conns.push(s);
            }
            Err(e) => {
                eprintln!("connect failed after {} connections: {e}", conns.len());
                break;
            }
        }
    }
    let all_open = opened.elapsed();
    std::thread::sleep(Duration::from_secs(1));
    let held = status_mib(pid, "VmRSS:");
    // Watch them close: EOF or a reset on read.
    let mut open: Vec<bool> = vec![true; conns.len()];
    let mut left = conns.len();
    let mut closed_at_accept = 0;
    let mut first_pass = true;
    let start = Instant::now();
    let mut buf = [0u8; 64];
    while left > 0 && start.elapsed() < Duration::from_secs(60) {
        for (i, s) in conns.iter_mut().enumerate() {
            if !open[i] {
                continue;
            }
            let closed = match s.read(&mut buf) {
                Ok(0) => true,
                Ok(_) => false,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => false,
                Err(_) => true,
            };
            if closed {
                open[i] = false;
                left -= 1;
                if first_pass {
                    closed_at_accept += 1;
                }
            }
        }
        first_pass = false;
        std::thread::sleep(Duration::from_millis(50));
    }
    let all_closed = start.elapsed() + Duration::from_secs(1);
    let peak = status_mib(pid, "VmHWM:");
    println!(
        "{what} under {} slowloris connections (opened in {:.1} s): drainer RSS {before:.1} MiB before, {held:.1} MiB while held, peak {peak:.1} MiB; \
         {closed_at_accept} closed at once (over the connection limit), the rest closed by the listener; \
         all closed {:.1} s after the last was opened{}",
        conns.len(),
        all_open.as_secs_f64(),
        all_closed.as_secs_f64(),
        if left > 0 {
            format!(" ({left} still open after 60 s)")
        } else {
            String::new()
        }
    );
}
