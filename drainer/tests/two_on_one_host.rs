//! Two drainer processes on one host, with the same Lease and no identity given (no `POD_NAME`):
//! each takes an identity of its own (the host's name and a random suffix), so only one leads; when
//! the leader stops, the other takes the Lease over under its own identity. With the host's name
//! alone, both took themselves for the holder and led together. The follower says who leads.

use std::process::{Command, Stdio};
use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use kube::Api;
use nodemedic_tests::cluster::{Cluster, eventually};
use nodemedic_tests::process::Logged;

const WAIT: Duration = Duration::from_secs(60);

/// `drainer run` on Lease `lease`, selecting nothing, its metrics on a port of its own choosing
/// (read from its log: a port picked beforehand could be taken by a test running beside).
async fn drainer(kubeconfig: &std::path::Path, lease: &str) -> Logged {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_drainer"));
    cmd.arg("run")
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .arg("--listen=127.0.0.1:0")
        .arg(format!("--lease-name={lease}"))
        .args([
            "--node-selector=nodemedic.test/none=x",
            "--leader-election-lease-duration=2s",
            "--leader-election-renew-deadline=1500ms",
            "--leader-election-retry-period=200ms",
            "KernelDeadlock=True",
        ])
        .env_remove("KUBECONFIG")
        .env_remove("POD_NAME")
        .env("RUST_LOG", "info")
        .env("NO_COLOR", "1")
        .stdout(Stdio::null());
    Logged::spawn(cmd, WAIT).await
}

/// The process's leader gauge, once its metrics answer.
async fn leading(addr: &str) -> Option<bool> {
    let body = nodemedic_tests::try_http_get(&format!("http://{addr}/metrics"))
        .await
        .ok()?;
    body.lines()
        .find_map(|l| l.strip_prefix("nodemedic_drainer_is_leader "))
        .map(|v| v.trim() == "1")
}

#[tokio::test]
async fn two_drainers_on_one_host_never_lead_together() {
    let cluster = Cluster::new().await;
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    cluster.write_kubeconfig(&kubeconfig);
    let lease = format!("nodemedic-drainer-host-{}", std::process::id());
    nodemedic_tests::drainer_objects(&cluster.client, "kube-system", &lease, None).await;
    let leases: Api<Lease> = Api::namespaced(cluster.client.clone(), "kube-system");
    let holder = || async {
        leases
            .get(&lease)
            .await
            .ok()
            .and_then(|l| l.spec?.holder_identity)
            .filter(|h| !h.is_empty())
    };
    let mut a = drainer(&kubeconfig, &lease).await;
    let pa = a.addr.clone();
    eventually("the first drainer leads", WAIT, || async {
        leading(&pa).await.filter(|l| *l)
    })
    .await;
    let first = holder().await.expect("a holder");
    let host = gethostname();
    assert!(
        first.starts_with(&format!("{host}_")) && first.len() > host.len() + 1,
        "the identity is the host's name and a suffix: {first}"
    );
    // The second on the same host: it follows while the first leads...
    let mut b = drainer(&kubeconfig, &lease).await;
    let pb = b.addr.clone();
    // It says who leads (a follower that said nothing after "caches synced" left its operator
    // guessing).
    let said = tokio::time::timeout(WAIT, async {
        while let Some(line) = b.lines.recv().await {
            if line.contains("another replica leads: following") {
                return line;
            }
        }
        String::new()
    })
    .await
    .expect("the follower says who leads");
    assert!(said.contains(&format!("holder={first}")), "{said}");
    let b_leads = eventually("the second drainer's metrics", WAIT, || async {
        leading(&pb).await
    })
    .await;
    assert!(!b_leads, "the second led while the first held the Lease");
    assert_eq!(leading(&pa).await, Some(true));
    // ... and takes over, under its own identity, once the first stops (it releases the Lease).
    let _ = Command::new("kill")
        .args(["-TERM", &a.child.id().to_string()])
        .status();
    let _ = a.child.wait();
    let second = eventually("the second drainer leads", WAIT, || async {
        let h = holder().await?;
        (h != first && leading(&pb).await == Some(true)).then_some(h)
    })
    .await;
    assert!(second.starts_with(&format!("{host}_")), "{second}");
    drop(b);
}

fn gethostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .unwrap_or_default()
}
