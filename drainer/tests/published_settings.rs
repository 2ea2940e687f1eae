//! `kubectl nodemedic plan` decides with the running drainer's settings (issue 42, point 3): with
//! default flags it said "breaker open: 2 of 5 nodes unhealthy" while the running drainer, with its
//! selector and breaker, saw 1 of 4 and a closed breaker. The drainer publishes what it decides
//! with (`<lease>-settings`), again after a reload; the plan reads it unless given conditions or
//! `--config`, and says which it used.

use std::process::{Command, Output, Stdio};
use std::time::Duration;

use k8s_openapi::api::core::v1::{ConfigMap, Node};
use kube::Api;
use kube::api::{Patch, PatchParams};
use nodemedic_tests::cluster::{Cluster, eventually, now_rfc3339};
use serde_json::{Value, json};

const WAIT: Duration = Duration::from_secs(60);

async fn deadlock(cluster: &Cluster, node: &str) {
    let an_hour_ago = (k8s_openapi::jiff::Timestamp::now() - Duration::from_secs(3600))
        .strftime("%Y-%m-%dT%H:%M:%SZ")
        .to_string();
    let body = json!({"status": {"conditions": [{"type": "KernelDeadlock", "status": "True",
        "reason": "DockerHung", "message": "m", "lastHeartbeatTime": now_rfc3339(),
        "lastTransitionTime": an_hour_ago}]}});
    Api::<Node>::all(cluster.client.clone())
        .patch_status(node, &PatchParams::default(), &Patch::Strategic(body))
        .await
        .unwrap();
}

/// `drainer plan --live` (what `kubectl nodemedic plan` runs) with `extra`, off the runtime's
/// thread (the test API server answers on it).
async fn plan(kubeconfig: &std::path::Path, extra: &[&str]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_drainer"));
    cmd.args(["plan", "--live", "--output", "json", "--kubeconfig"])
        .arg(kubeconfig)
        .args(extra);
    tokio::task::spawn_blocking(move || cmd.output().unwrap())
        .await
        .unwrap()
}

fn action(out: &Output, node: &str) -> String {
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .find(|p| p["node"] == node)
        .map(|p| p["action"].as_str().unwrap_or("").to_string())
        .unwrap_or_else(|| "not planned".into())
}

#[tokio::test]
async fn the_plan_decides_with_the_running_drainers_settings_and_follows_a_reload() {
    let cluster = Cluster::new().await;
    let pool = cluster.name("pool");
    let mut ours = Vec::new();
    for hint in ["a", "b", "c", "d"] {
        ours.push(
            cluster
                .create_node_with(hint, json!({"nodemedic.test/pool": pool}))
                .await,
        );
    }
    // Unhealthy too, outside the drainer's selector: with default flags the plan counts it.
    let outside = cluster.create_node("outside").await;
    deadlock(&cluster, &ours[0]).await;
    deadlock(&cluster, &outside).await;

    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    cluster.write_kubeconfig(&kubeconfig);
    let config = dir.path().join("drainer.yaml");
    let settings = |min: &str| {
        format!(
            "conditions: [\"KernelDeadlock=True,{min}\"]\nmaxUnhealthy: \"50%\"\nnotifyUrls: [\"https://hooks.example/T0KEN\"]\n"
        )
    };
    std::fs::write(&config, settings("10m")).unwrap();
    let lease = format!("nodemedic-published-{}", std::process::id());
    nodemedic_tests::drainer_objects(&cluster.client, "kube-system", &lease, None).await;
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_drainer"));
    cmd.arg("run")
        .arg("--kubeconfig")
        .arg(&kubeconfig)
        .arg("--config")
        .arg(&config)
        .arg("--listen=127.0.0.1:0")
        .arg(format!("--lease-name={lease}"))
        .arg(format!("--node-selector=nodemedic.test/pool={pool}"))
        .args(["--dry-run=true", "--notify-allow-http"])
        .env_remove("KUBECONFIG")
        .env("RUST_LOG", "info")
        .env("NO_COLOR", "1")
        .stdout(Stdio::null());
    let _drainer = nodemedic_tests::process::Logged::spawn(cmd, WAIT).await;
    let configmaps: Api<ConfigMap> = Api::namespaced(cluster.client.clone(), "kube-system");
    let published = format!("{lease}-settings");
    let holds = |needle: &'static str| {
        let (configmaps, published) = (configmaps.clone(), published.clone());
        async move {
            let cm = configmaps.get_opt(&published).await.ok()??;
            let data = cm.data?;
            data.values().any(|v| v.contains(needle)).then_some(data)
        }
    };
    let data = eventually("the settings published", WAIT, || holds("True,10m")).await;
    let all: String = data.values().cloned().collect();
    assert!(
        !all.contains("T0KEN"),
        "no notification URL published: {all}"
    );

    // With the running drainer's settings: 1 of its 4 nodes unhealthy, under 50%: cordon.
    let lease_flag = format!("--lease-name={lease}");
    let out = plan(&kubeconfig, &[&lease_flag]).await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains("deciding with the running drainer's settings")
            && stderr.contains(&published),
        "it says whose settings: {stderr}"
    );
    assert_eq!(action(&out, &ours[0]), "cordon", "{stderr}");
    assert_eq!(
        action(&out, &outside),
        "skip",
        "not selected by the running drainer"
    );
    // Given conditions, the plan decides with the flags instead: every node selected, 2 of 5
    // unhealthy is over the default 30%, so the breaker holds.
    let out = plan(&kubeconfig, &[&lease_flag, "KernelDeadlock=True,10m"]).await;
    assert!(!String::from_utf8_lossy(&out.stderr).contains("running drainer's settings"));
    assert_eq!(action(&out, &ours[0]), "hold");

    // A reload is published: the deadlock (an hour old) has not held 2h.
    std::fs::write(&config, settings("2h")).unwrap();
    eventually("the reload published", WAIT, || holds("True,2h")).await;
    let out = plan(&kubeconfig, &[&lease_flag]).await;
    assert_eq!(
        action(&out, &ours[0]),
        "wait",
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    // `kubectl nodemedic config` prints the settings in force as a config file, each value saying
    // where it comes from; given back to `drainer config --config`, it is the same file.
    let plugin = dir.path().join("kubectl-nodemedic");
    std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_drainer"), &plugin).unwrap();
    let mut cmd = Command::new(&plugin);
    cmd.arg("config")
        .arg("--kubeconfig")
        .arg(&kubeconfig)
        .arg(&lease_flag);
    let out = tokio::task::spawn_blocking(move || cmd.output().unwrap())
        .await
        .unwrap();
    let shown = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(shown.starts_with(&format!(
        "# Published in ConfigMap kube-system/{published} by "
    )));
    for line in [
        "conditions: [\"KernelDeadlock=True,2h\"]  # its config file",
        "maxUnhealthy: \"50%\"  # its config file",
        &format!("nodeSelector: \"nodemedic.test/pool={pool}\"  # flag"),
        "dryRun: true  # flag",
        "maxCordoned: \"10%\"  # default",
        "# notifyUrls: not published (they carry their tokens)",
    ] {
        assert!(shown.lines().any(|l| l == line), "no {line:?} in\n{shown}");
    }
    assert!(!shown.contains("T0KEN"), "{shown}");
    let again = dir.path().join("shown.yaml");
    std::fs::write(&again, &shown).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_drainer"))
        .args(["config", "--config"])
        .arg(&again)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let settings_of = |text: &str| -> Vec<String> {
        text.lines()
            .filter(|l| !l.starts_with('#') && !l.is_empty())
            .map(|l| l.rsplit_once("  # ").map_or(l, |(v, _)| v).to_string())
            .collect()
    };
    assert_eq!(
        settings_of(&String::from_utf8_lossy(&out.stdout)),
        settings_of(&shown),
        "the printed file builds the same settings"
    );

    // `kubectl nodemedic conditions` shows what the running drainer watches on every node: a node
    // without the condition shows it absent (with the defaults it would not be shown at all).
    let mut cmd = Command::new(&plugin);
    cmd.arg("conditions")
        .arg("--kubeconfig")
        .arg(&kubeconfig)
        .arg(&lease_flag);
    let out = tokio::task::spawn_blocking(move || cmd.output().unwrap())
        .await
        .unwrap();
    let (text, said) = (
        String::from_utf8_lossy(&out.stdout).to_string(),
        String::from_utf8_lossy(&out.stderr).to_string(),
    );
    assert!(out.status.success(), "{said}");
    assert!(
        said.starts_with("kubectl nodemedic: showing the running drainer's watched conditions"),
        "{said}"
    );
    let row = text
        .lines()
        .find(|l| l.split_whitespace().next() == Some(ours[1].as_str()))
        .unwrap_or_else(|| panic!("no {} in\n{text}", ours[1]));
    assert!(row.contains("KernelDeadlock=absent"), "{text}");

    // No drainer behind that Lease: said, and the flags decide (none given here: exit 2).
    let out = plan(&kubeconfig, &["--lease-name=no-such-drainer"]).await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains(
            "no running drainer's settings in ConfigMap kube-system/no-such-drainer-settings"
        ),
        "{stderr}"
    );
    let mut cmd = Command::new(&plugin);
    cmd.args(["config", "--lease-name=no-such-drainer", "--kubeconfig"])
        .arg(&kubeconfig);
    let out = tokio::task::spawn_blocking(move || cmd.output().unwrap())
        .await
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&out.stderr).starts_with(
            "kubectl nodemedic: no running drainer's settings in ConfigMap kube-system/no-such-drainer-settings"
        ),
        "the plugin's errors say its name: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    for n in ours.iter().chain([&outside]) {
        cluster.delete_node(n).await;
    }
}

/// Someone who may edit ConfigMaps forges the published settings to select every node: the
/// plugin would show that (and who it claims published it), but the drainer never reads them. It
/// goes on deciding with its own: a node its selector selects is cordoned after the forgery, and
/// the node only the forgery selects is not.
#[tokio::test]
async fn forged_published_settings_change_nothing_the_drainer_does() {
    for cluster in Cluster::each_release().await {
        forged_published_settings_change_nothing_the_drainer_does_on(cluster).await;
    }
}

async fn forged_published_settings_change_nothing_the_drainer_does_on(cluster: Cluster) {
    let pool = cluster.name("pool");
    let ours = cluster
        .create_node_with("ours", json!({"nodemedic.test/pool": pool}))
        .await;
    // Selected only by the forged settings (a label of its own, so the forged view holds this test's
    // nodes alone on an API server other tests share).
    let forged_pool = cluster.name("forged");
    let other = cluster
        .create_node_with("other", json!({"nodemedic.test/forged": forged_pool}))
        .await;
    deadlock(&cluster, &other).await;
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    cluster.write_kubeconfig(&kubeconfig);
    let lease = format!("nodemedic-forged-{}", std::process::id());
    nodemedic_tests::drainer_objects(&cluster.client, "kube-system", &lease, None).await;
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_drainer"));
    cmd.arg("run")
        .arg("--kubeconfig")
        .arg(&kubeconfig)
        .arg("--listen=127.0.0.1:0")
        .arg(format!("--lease-name={lease}"))
        .arg(format!("--node-selector=nodemedic.test/pool={pool}"))
        .args([
            "--drain-buffer=1h",
            "--max-unhealthy=100%",
            "--breaker-new=100%",
        ])
        .args(["--domain-outage=100%", "KernelDeadlock=True,10m"])
        .env_remove("KUBECONFIG")
        .env("RUST_LOG", "info")
        .env("NO_COLOR", "1")
        .stdout(Stdio::null());
    // No config file: the flags alone are published (a drainer so run once published nothing).
    let _drainer = nodemedic_tests::process::Logged::spawn(cmd, WAIT).await;
    let configmaps: Api<ConfigMap> = Api::namespaced(cluster.client.clone(), "kube-system");
    let published = format!("{lease}-settings");
    let mut cm = eventually("the settings published", WAIT, || async {
        // Shipped empty: published once it holds the settings.
        let cm = configmaps.get_opt(&published).await.ok().flatten()?;
        cm.data.as_ref()?.contains_key("args.json").then_some(cm)
    })
    .await;
    // The forgery: another selector, under the drainer's identity.
    let data = cm.data.as_mut().unwrap();
    let mut args: Value = serde_json::from_str(&data["args.json"]).unwrap();
    args["node_selector"] = Value::from(format!("nodemedic.test/forged={forged_pool}"));
    data.insert("args.json".into(), args.to_string());
    configmaps
        .replace(&published, &Default::default(), &cm)
        .await
        .unwrap();
    let lease_flag = format!("--lease-name={lease}");
    let out = plan(&kubeconfig, &[&lease_flag]).await;
    assert_eq!(
        action(&out, &other),
        "cordon",
        "the plugin shows the forged view"
    );
    // The drainer goes on with its own settings: its node turns bad after the forgery and is
    // cordoned; the other, selected only by the forgery, is not.
    deadlock(&cluster, &ours).await;
    let nodes: Api<Node> = Api::all(cluster.client.clone());
    let cordoned = |n: Node| n.spec.and_then(|s| s.unschedulable).unwrap_or(false);
    eventually("the drainer's own node cordoned", WAIT, || async {
        cordoned(nodes.get(&ours).await.ok()?).then_some(())
    })
    .await;
    assert!(
        !cordoned(nodes.get(&other).await.unwrap()),
        "a node only the forged settings select was cordoned"
    );
    for n in [&ours, &other] {
        cluster.delete_node(n).await;
    }
}

/// The manifests ship the settings ConfigMap empty (the drainer's Role may not create it): before
/// any drainer has led, `plan --live` finds nothing published there and decides with its flags, as
/// when the ConfigMap did not exist.
#[tokio::test]
async fn an_empty_shipped_settings_configmap_is_nothing_published() {
    let cluster = Cluster::new().await;
    let node = cluster.create_node("shipped-empty").await;
    deadlock(&cluster, &node).await;
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    cluster.write_kubeconfig(&kubeconfig);
    let lease = format!("nodemedic-shipped-{}", std::process::id());
    nodemedic_tests::drainer_objects(&cluster.client, "kube-system", &lease, None).await;
    let lease_flag = format!("--lease-name={lease}");
    let out = plan(&kubeconfig, &[&lease_flag]).await;
    let said = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(
        out.status.success() || out.status.code() == Some(2),
        "{said}"
    );
    assert!(
        said.contains("no running drainer's settings in ConfigMap"),
        "{said}"
    );
    assert!(!said.contains("cannot be used"), "{said}");
}

/// Without conditions or `--config`, the running drainer's settings are all a plan has to decide
/// with: one it cannot read stops the plan with why (here no API server; a 403 the same way, with
/// the roles that grant the read), not "no problem conditions given" after it.
#[tokio::test]
async fn a_plan_that_cannot_read_the_running_drainers_settings_says_why_and_stops() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    std::fs::write(
        &kubeconfig,
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster: {{server: 'http://127.0.0.1:{port}'}}\n\
             users:\n- name: u\n  user: {{token: t}}\ncontexts:\n- name: x\n  context: {{cluster: c, user: u}}\ncurrent-context: x\n"
        ),
    )
    .unwrap();
    let out = plan(&kubeconfig, &[]).await;
    let said = String::from_utf8_lossy(&out.stderr).to_string();
    assert_eq!(out.status.code(), Some(1), "{said}");
    assert!(
        said.contains("cannot read ConfigMap kube-system/nodemedic-drainer-settings"),
        "{said}"
    );
    assert!(said.contains("give conditions or --config"), "{said}");
    assert!(!said.contains("no problem conditions given"), "{said}");
}
