//! How the drainer binary starts where an operator first meets it: draino's Deployment with only
//! the image changed (none of the drainer's own objects made beforehand), and an API server that
//! is not there yet (started together with the control plane, or during an outage).

use std::path::Path;
use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::Api;
use kube::api::DeleteParams;
use nodemedic_tests::bins::debug_bin;
use serde_json::json;

use crate::env::{Env, LABEL};
use crate::remedies::Proc;

/// draino's manifest's container command, without the binary (tests/fixtures/draino).
const DRAINO_ARGS: [&str; 4] = [
    "--dry-run",
    "--node-label=draino-enabled=true",
    "BadCondition",
    "ReallyBadCondition",
];

/// Remove the drainer's own objects for `lease` (made by the drainer itself in these tests, so
/// without the scenario's label its cleanup goes by).
async fn remove_objects(client: &kube::Client, lease: &str) {
    for (kind, name) in nodemedic_tests::drainer_object_names(lease) {
        let dp = DeleteParams::default();
        let _ = match kind {
            "Lease" => Api::<Lease>::namespaced(client.clone(), "kube-system")
                .delete(&name, &dp)
                .await
                .map(drop),
            "Secret" => Api::<Secret>::namespaced(client.clone(), "kube-system")
                .delete(&name, &dp)
                .await
                .map(drop),
            _ => Api::<ConfigMap>::namespaced(client.clone(), "kube-system")
                .delete(&name, &dp)
                .await
                .map(drop),
        };
    }
}

#[tokio::test]
async fn a_draino_deployment_with_only_the_image_changed_makes_its_objects_and_runs() {
    let env = Env::new().await;
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    env.cluster.write_kubeconfig(&kubeconfig);
    let lease = env.name("draino-image");
    // A draino Deployment's environment: its own lock name, a port; nothing of the drainer's made.
    let node = env
        .node("draino-image", "True", 0, json!({"draino-enabled": "true"}))
        .await;
    env.set_condition(&node, "ReallyBadCondition", "True", 0)
        .await;
    let mut args: Vec<String> = DRAINO_ARGS.map(String::from).to_vec();
    args.push(format!("--leader-election-token-name={lease}"));
    args.push("--listen=127.0.0.1:0".into());
    let bin = debug_bin("nodemedic-drainer", "drainer");
    let proc = Proc::spawn(&bin, &args, &kubeconfig, dir.path().join("drainer.log"));
    let said = |what: &'static str| {
        let proc = &proc;
        async move { proc.output().contains(what).then_some(()) }
    };
    wait_for(
        &proc,
        "a dry-run CordonStarting on the draino-enabled node",
        || async {
            env.event_reasons(&node)
                .await
                .contains(&"CordonStarting".to_string())
                .then_some(())
        },
    )
    .await;
    wait_for(&proc, "the objects it made, said", || {
        said("created the drainer's missing objects")
    })
    .await;
    let secret = Api::<Secret>::namespaced(env.cluster.client.clone(), "kube-system")
        .get(&format!("{lease}-record-key"))
        .await
        .expect("the record key Secret was made");
    assert!(
        secret.data.is_some_and(|d| d.contains_key("key")),
        "and filled"
    );
    assert!(!env.cordoned(&node).await, "draino's manifest is a dry run");
    drop(proc);
    remove_objects(&env.cluster.client, &lease).await;
    env.cleanup().await;
}

/// Wait (generously) until `check` holds, printing what the drainer said if it never does.
async fn wait_for<T, F, Fut>(proc: &Proc, what: &str, check: F) -> T
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let got = tokio::time::timeout(Duration::from_secs(60), async {
        loop {
            if let Some(v) = check().await {
                return v;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
    .await;
    got.unwrap_or_else(|_| {
        panic!(
            "{what}: not within 60s; the drainer said:\n{}",
            proc.output()
        )
    })
}

/// The kubeconfig at `path` with its server's port replaced by `port` (same host and scheme).
fn pointed_at(path: &Path, port: u16) -> u16 {
    let text = std::fs::read_to_string(path).unwrap();
    let re = regex::Regex::new(r"(server: \S+://[^:\s]+):(\d+)").unwrap();
    let caps = re.captures(&text).expect("a server with a port");
    let real: u16 = caps[2].parse().unwrap();
    let text = re.replace(&text, format!("${{1}}:{port}"));
    std::fs::write(path, text.as_ref()).unwrap();
    real
}

/// Pass every connection to `listener` on to 127.0.0.1:`to`, as the API server's address.
async fn forward(listener: tokio::net::TcpListener, to: u16) {
    loop {
        let Ok((mut inbound, _)) = listener.accept().await else {
            return;
        };
        tokio::spawn(async move {
            if let Ok(mut outbound) = tokio::net::TcpStream::connect(("127.0.0.1", to)).await {
                let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
            }
        });
    }
}

#[tokio::test]
async fn a_drainer_started_before_its_api_server_waits_unready_then_runs() {
    let env = Env::new().await;
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    env.cluster.write_kubeconfig(&kubeconfig);
    // The API server's address, with nothing listening on it yet.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let real = pointed_at(&kubeconfig, port);
    let lease = env.name("late-api");
    nodemedic_tests::drainer_objects(&env.cluster.client, "kube-system", &lease, Some(&env.id))
        .await;
    let node = env.node("late-api", "True", 3600, json!({})).await;
    let args: Vec<String> = [
        format!("--lease-name={lease}"),
        format!("--node-selector={LABEL}={}", env.id),
        "--listen=127.0.0.1:0".into(),
        "KernelDeadlock=True,10m".into(),
    ]
    .to_vec();
    let bin = debug_bin("nodemedic-drainer", "drainer");
    let proc = Proc::spawn(&bin, &args, &kubeconfig, dir.path().join("drainer.log"));
    // It waits, saying so, twice at least (with backoff), instead of exiting; not ready meanwhile.
    let addr = wait_for(&proc, "its address", || async {
        proc.output()
            .lines()
            .find(|l| l.contains("serving /metrics"))
            .and_then(|l| l.split_once("addr=").map(|(_, a)| a.trim().to_string()))
    })
    .await;
    wait_for(&proc, "two tries said", || async {
        let tries = proc.output().matches("cannot reach the API server").count();
        (tries >= 2).then_some(())
    })
    .await;
    let ready = nodemedic_tests::try_http_get(&format!("http://{addr}/readyz")).await;
    assert_eq!(ready.as_deref(), Ok("not ready\n"));
    // The API server comes: the drainer goes on, without a restart, and does its work.
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", port))
        .await
        .expect("the port the drainer waits on is still free");
    let forwarding = tokio::spawn(forward(listener, real));
    wait_for(&proc, "the problem node cordoned", || async {
        env.cordoned(&node).await.then_some(())
    })
    .await;
    let ready = nodemedic_tests::try_http_get(&format!("http://{addr}/readyz")).await;
    assert_eq!(ready.as_deref(), Ok("ready\n"));
    assert!(
        !proc.output().contains("ERROR"),
        "waiting is not an error:\n{}",
        proc.output()
    );
    drop(proc);
    forwarding.abort();
    env.cleanup().await;
}
