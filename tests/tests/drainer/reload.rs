//! The drainer's config file edited in place, as a ConfigMap update reaches the pod (the kubelet
//! writes a new `..data` directory and swaps the symlink): a valid edit applies without a restart,
//! an invalid one is rejected, counted, and the running settings stay.

use std::path::Path;
use std::time::Duration;

use nodemedic_drainer::config::flags::PolicyArgs;
use nodemedic_tests::cluster::eventually;
use serde_json::json;

use crate::env::{Env, LABEL, WAIT};

/// Publish `drainer.yaml` in `dir` the way the kubelet updates a ConfigMap volume.
fn publish(dir: &Path, generation: u32, text: &str) {
    let data = dir.join(format!("..{generation}"));
    std::fs::create_dir(&data).unwrap();
    std::fs::write(data.join("drainer.yaml"), text).unwrap();
    let tmp = dir.join("..data_tmp");
    std::os::unix::fs::symlink(data.file_name().unwrap(), &tmp).unwrap();
    std::fs::rename(&tmp, dir.join("..data")).unwrap();
    if !dir.join("drainer.yaml").exists() {
        std::os::unix::fs::symlink("..data/drainer.yaml", dir.join("drainer.yaml")).unwrap();
    }
}

fn settings(env: &Env, conditions: &str, extra: &str) -> String {
    format!(
        "conditions: [{conditions}]\nnodeSelector: {LABEL}={}\ndrainBuffer: 1s\nmaxCordoned: 5\n{extra}",
        env.id
    )
}

async fn reloads(addr: std::net::SocketAddr, result: &str) -> u64 {
    let body = nodemedic_tests::http_get(&format!("http://{addr}/metrics")).await;
    let line = format!("nodemedic_drainer_config_reloads_total{{result=\"{result}\"}} ");
    body.lines()
        .find_map(|l| l.strip_prefix(&line))
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no {line} in\n{body}"))
}

/// Once an edit was refused (counted), the `ConfigReloadRefused` Event on the scenario's Lease.
async fn refused(env: &Env, addr: std::net::SocketAddr) -> k8s_openapi::api::core::v1::Event {
    eventually("the loosening edit refused", WAIT, || async {
        (reloads(addr, "failure").await == 1).then_some(())
    })
    .await;
    lease_event(env, "ConfigReloadRefused").await
}

/// The first Event with `reason` on the scenario's Lease, once there.
async fn lease_event(env: &Env, reason: &str) -> k8s_openapi::api::core::v1::Event {
    let lease = format!("nodemedic-drainer-test-{}", env.id);
    let events: kube::Api<k8s_openapi::api::core::v1::Event> =
        kube::Api::namespaced(env.cluster.client.clone(), "kube-system");
    eventually(&format!("a {reason} Event on the Lease"), WAIT, || async {
        let list = events
            .list(&kube::api::ListParams::default().fields(&format!("involvedObject.name={lease}")))
            .await
            .ok()?;
        list.items
            .into_iter()
            .find(|e| e.reason.as_deref() == Some(reason))
    })
    .await
}

#[tokio::test]
async fn a_config_edit_takes_effect_without_a_restart_and_a_bad_one_is_kept_out() {
    let env = Env::new().await;
    let node = env.node("edited", "True", 3600, json!({})).await;
    let keep = env
        .pod(
            "default",
            "keep",
            &node,
            json!({"metadata": {"annotations": {"nodemedic.test/keep": "yes"}}}),
        )
        .await;
    let go = env.pod("default", "go", &node, json!({})).await;
    let dir = tempfile::tempdir().unwrap();
    publish(
        dir.path(),
        1,
        &settings(&env, "'ReadonlyFilesystem=True,10m'", ""),
    );
    let running = env
        .start_reloading(PolicyArgs {
            config: Some(dir.path().join("drainer.yaml")),
            ..Default::default()
        })
        .await;
    // KernelDeadlock is not a condition it acts on yet: the node stays schedulable (asserted once a
    // node with the condition it does act on was decided after it).
    env.barrier("ReadonlyFilesystem", json!({})).await;
    assert!(
        !env.cordoned(&node).await,
        "cordoned under the first settings"
    );

    // A valid edit: it acts on KernelDeadlock now, and pods annotated nodemedic.test/keep are
    // protected. The pods were cached without that annotation: the drain must wait for the pod
    // cache to hold it, or it would evict the pod the edit protects.
    publish(
        dir.path(),
        2,
        &settings(
            &env,
            "'KernelDeadlock=True,10m'",
            "protectedPodAnnotations: ['nodemedic.test/keep']\n",
        ),
    );
    env.wait_drained(&node).await;
    assert!(env.cordoned(&node).await);
    assert!(!env.pod_exists("default", &go).await, "{go} evicted");
    assert!(
        env.pod_exists("default", &keep).await,
        "{keep} protected by the edit"
    );
    assert_eq!(reloads(running.addr, "success").await, 1);

    // An invalid edit (a misspelled key) is rejected and counted; the settings in force stay (a
    // recovering node is still uncordoned under them).
    publish(
        dir.path(),
        3,
        "conditions: ['KernelDeadlock=True,10m']\ndrainBufer: 5m\n",
    );
    eventually("the bad edit counted", WAIT, || async {
        (reloads(running.addr, "failure").await == 1).then_some(())
    })
    .await;
    assert_eq!(reloads(running.addr, "success").await, 1);
    env.set_condition(&node, "KernelDeadlock", "False", 700)
        .await;
    eventually(
        "uncordoned on recovery, under the settings kept",
        WAIT,
        || async { (!env.cordoned(&node).await).then_some(()) },
    )
    .await;
    running.shutdown().await;
    env.cleanup().await;
}

/// Whoever may edit the drainer's ConfigMap may tighten its safety limits, never loosen those the
/// command line set: such an edit is refused, counted, said in a Warning Event on the drainer's
/// Lease, and the running settings stay.
#[tokio::test]
async fn a_config_edit_cannot_loosen_a_limit_the_command_line_set() {
    let env = Env::new().await;
    let first = env.node("ceiling-a", "True", 3600, json!({})).await;
    let second = env.node("ceiling-b", "True", 3000, json!({})).await;
    let dir = tempfile::tempdir().unwrap();
    let limited = |max: usize| {
        format!(
            "conditions: ['KernelDeadlock=True,10m']\nnodeSelector: {LABEL}={}\ndrainBuffer: 1h\nmaxCordoned: {max}\n\
             maxUnhealthy: 100%\nbreakerNew: 100%\ndomainOutage: 100%\nflapThreshold: 0\n",
            env.id
        )
    };
    publish(dir.path(), 1, &limited(1));
    let running = env
        .start_reloading(PolicyArgs {
            config: Some(dir.path().join("drainer.yaml")),
            max_cordoned: Some("1".into()),
            ..Default::default()
        })
        .await;
    eventually("the oldest problem cordoned", WAIT, || async {
        env.cordoned(&first).await.then_some(())
    })
    .await;
    // The ConfigMap's editor raises the budget past the command line's.
    publish(dir.path(), 2, &limited(5));
    let said = refused(&env, running.addr).await;
    assert_eq!(said.type_.as_deref(), Some("Warning"));
    let message = said.message.unwrap_or_default();
    assert!(
        message.contains("maxCordoned \"5\" is looser than --max-cordoned 1"),
        "{message}"
    );
    // Still one cordon at a time: the second node waits for the budget.
    env.barrier("KernelDeadlock", json!({})).await;
    assert!(
        !env.cordoned(&second).await,
        "the refused budget was applied"
    );
    assert!(
        env.event_reasons(&second)
            .await
            .contains(&"WaitingForBudget".to_string())
    );
    assert_eq!(reloads(running.addr, "success").await, 0);
    running.shutdown().await;
    env.cleanup().await;
}

/// Issue 64, point 3: with the shipped manifests (their `drainer.yaml`, and a command line whose one
/// ceiling is `--min-ready-duration`), an edit of the ConfigMap to 100% budgets, the breaker off and
/// `MemoryPressure=False,0s` cordoned every node. The values in force at start are the ceilings: the
/// edit is refused whole, with the Event saying why, and no node is touched.
#[tokio::test]
async fn an_edit_of_the_shipped_config_cannot_loosen_what_the_drainer_started_with() {
    let env = Env::new().await;
    let mut nodes = Vec::new();
    for i in 0..10 {
        let n = env
            .node(&format!("shipped-{i}"), "False", 3600, json!({}))
            .await;
        env.set_condition(&n, "MemoryPressure", "False", 3600).await;
        nodes.push(n);
    }
    let shipped = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../deploy/base/drainer.yaml"
    ))
    .unwrap();
    // Confined to this test's nodes, as every scenario is; otherwise as shipped.
    let selector = format!("nodeSelector: {LABEL}={}\n", env.id);
    let dir = tempfile::tempdir().unwrap();
    publish(dir.path(), 1, &format!("{shipped}\n{selector}"));
    let running = env
        .start_reloading(PolicyArgs {
            config: Some(dir.path().join("drainer.yaml")),
            min_ready_duration: Some(Duration::from_secs(300)),
            ..Default::default()
        })
        .await;
    // Running, its file watched, and deciding with the shipped settings.
    env.barrier("KernelDeadlock", json!({})).await;
    let loosened = format!(
        "conditions: ['MemoryPressure=False,0s']\nmaxCordoned: '100%'\nmaxDrainsInFlight: 10\n\
         maxUnhealthy: '100%'\nbreakerNew: '100%'\ndomainOutage: '100%'\n{selector}"
    );
    publish(dir.path(), 2, &loosened);
    let said = refused(&env, running.addr).await;
    let message = said.message.unwrap_or_default();
    assert!(
        message.contains("maxCordoned 100% is not comparable (a count and a percentage) with")
            || message.contains("maxCordoned 100% is looser than 10%"),
        "{message}"
    );
    assert!(
        message.contains("in force since the drainer started"),
        "{message}"
    );
    // The running settings decide: a deadlocked barrier is cordoned, and not one healthy node.
    env.barrier("KernelDeadlock", json!({})).await;
    for n in &nodes {
        assert!(!env.cordoned(n).await, "{n} cordoned by the refused edit");
    }
    assert_eq!(reloads(running.addr, "success").await, 0);
    running.shutdown().await;
    env.cleanup().await;
}

/// An edit made after the drainer read its config file and before it first watched it (a ConfigMap
/// updated while the pod starts) was taken as the file's first content and never applied. It is
/// applied: here the drainer starts with the settings of the file's first version while the file
/// already holds the second, which watches another condition.
#[tokio::test]
async fn an_edit_made_while_the_drainer_starts_is_applied() {
    let env = Env::new().await;
    let dir = tempfile::tempdir().unwrap();
    let watching = |condition: &str| {
        format!(
            "conditions: ['{condition}']\nnodeSelector: {LABEL}={}\ndrainBuffer: 1h\nmaxUnhealthy: 100%\nbreakerNew: 100%\ndomainOutage: 100%\nflapThreshold: 0\n",
            env.id
        )
    };
    publish(dir.path(), 1, &watching("KernelDeadlock=True,10m"));
    let args = PolicyArgs {
        config: Some(dir.path().join("drainer.yaml")),
        ..Default::default()
    };
    let first = nodemedic_drainer::config::build::build(&args).unwrap();
    publish(dir.path(), 2, &watching("ReadonlyFilesystem=True,10m"));
    let running = env.start_reloading_from(first, args).await;
    eventually("the edit applied", WAIT, || async {
        (reloads(running.addr, "success").await == 1).then_some(())
    })
    .await;
    // The second version decides: a ReadonlyFilesystem node is acted on (under the first, nothing
    // would be said about it and the barrier would wait in vain).
    env.barrier("ReadonlyFilesystem", json!({})).await;
    running.shutdown().await;
    env.cleanup().await;
}

/// Issue 76, principle 6: an edit its reload refused was taken silently at the next pod restart.
/// A start looser than the settings last published is said (log, metric, a StartedLooser Event on
/// the Lease), and with `--refuse-looser-start` refused, naming what loosened.
#[tokio::test]
async fn a_start_looser_than_the_settings_last_published_is_told_and_refusable() {
    let env = Env::new().await;
    let dir = tempfile::tempdir().unwrap();
    let args = || PolicyArgs {
        config: Some(dir.path().join("drainer.yaml")),
        ..Default::default()
    };
    let text = |max: u32| {
        format!(
            "conditions: ['KernelDeadlock=True,10m']\nnodeSelector: {LABEL}={}\nmaxCordoned: {max}\n",
            env.id
        )
    };
    publish(dir.path(), 1, &text(1));
    let first = env
        .try_start_published(args(), Some(text(1)), true)
        .await
        .unwrap();
    // Published once it leads.
    let lease = format!("nodemedic-drainer-test-{}", env.id);
    let cms: kube::Api<k8s_openapi::api::core::v1::ConfigMap> =
        kube::Api::namespaced(env.cluster.client.clone(), "kube-system");
    eventually("the settings published", WAIT, || async {
        let cm = cms.get_opt(&format!("{lease}-settings")).await.ok()??;
        cm.data.filter(|d| !d.is_empty()).map(|_| ())
    })
    .await;
    first.shutdown().await;
    // The ConfigMap edited to 5 (the reload would have refused it), then the pod restarted.
    publish(dir.path(), 2, &text(5));
    let refused = env.try_start_published(args(), Some(text(5)), true).await;
    let Err(e) = refused else {
        panic!("a start looser than the published settings was not refused");
    };
    let said = e.to_string();
    assert!(
        said.contains("--refuse-looser-start") && said.contains("maxCordoned 5 is looser than 1"),
        "{said}"
    );
    // Without the flag it starts, and says so.
    let running = env
        .try_start_published(args(), Some(text(5)), false)
        .await
        .unwrap();
    let body = nodemedic_tests::http_get(&format!("http://{}/metrics", running.addr)).await;
    assert!(
        body.lines()
            .any(|l| l == "nodemedic_drainer_looser_starts_total 1"),
        "{body}"
    );
    let event = lease_event(&env, "StartedLooser").await;
    let message = event.message.unwrap_or_default();
    assert!(
        message.contains("maxCordoned 5 is looser than 1"),
        "{message}"
    );
    running.shutdown().await;
    env.cleanup().await;
}
