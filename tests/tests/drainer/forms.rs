//! A decision says the same thing wherever it is shown: the live drainer's log line and Events,
//! and `plan` and `explain` over the same cluster. Here under a dry run (`--dry-run`), which every
//! form must say as "would", and for a pod already evicted, which is not one that waits on a PDB.

use std::process::Command;

use nodemedic_tests::bins::debug_bin;
use serde_json::json;

use crate::remedies::Scenario;

/// `drainer SUBCOMMAND ... --live` over the scenario's cluster: its standard output.
fn live(s: &Scenario, args: &[&str]) -> String {
    let out = Command::new(debug_bin("nodemedic-drainer", "drainer"))
        .env("KUBECONFIG", &s.kubeconfig)
        .args(args)
        .args(["--live", "--lease-name", &s.lease()])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "drainer {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dry_run_says_would_in_the_log_the_events_plan_and_explain() {
    let s = Scenario::new().await;
    let node = s.env.node("dry", "True", 3600, json!({})).await;
    s.env.pod("default", "web-dry", &node, json!({})).await;
    let selector = format!("--node-selector={}={}", crate::env::LABEL, s.env.id);
    let condition = "KernelDeadlock=True,10m";
    // Offline, before the drainer runs: plan and explain say what it would do.
    let plan = live(&s, &["plan", condition, "--dry-run", &selector]);
    let row = plan
        .lines()
        .find(|l| l.starts_with(&node))
        .unwrap_or_default();
    assert!(row.contains(" would cordon "), "plan: {plan}");
    let json = live(
        &s,
        &[
            "plan",
            condition,
            "--dry-run",
            &selector,
            "--output",
            "json",
        ],
    );
    let mine: serde_json::Value = json
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .find(|v| v["node"] == node.as_str())
        .unwrap();
    assert_eq!(
        (mine["action"].as_str(), mine["dryRun"].as_bool()),
        (Some("cordon"), Some(true))
    );
    let explain = live(&s, &["explain", &node, condition, "--dry-run", &selector]);
    assert!(explain.contains("\nDecision: would cordon — "), "{explain}");
    assert!(explain.contains("\nNext: now: would cordon ("), "{explain}");
    // Without the dry run, the same commands say what it does.
    let plan = live(&s, &["plan", condition, &selector]);
    let row = plan
        .lines()
        .find(|l| l.starts_with(&node))
        .unwrap_or_default();
    assert!(
        row.contains(" cordon ") && !row.contains("would"),
        "plan: {plan}"
    );
    // The live drainer in a dry run: its Event and its log line say "would", and nothing changes.
    let (drainer, _) = s.drainer(&[condition, "--dry-run"]).await;
    let message = s
        .until("the CordonStarting Event", &drainer, || async {
            s.env
                .drainer_events(&node)
                .await
                .into_iter()
                .find(|e| e.reason.as_deref() == Some("CordonStarting"))
                .and_then(|e| e.message)
        })
        .await;
    assert!(
        message.starts_with("Dry run (nothing changed): would cordon node: "),
        "{message}"
    );
    s.until("the decision's log line", &drainer, || async {
        drainer
            .output()
            .lines()
            .any(|l| l.contains(&node) && l.contains("action=would cordon"))
            .then_some(())
    })
    .await;
    assert!(!s.env.cordoned(&node).await, "a dry run cordoned the node");
    drop(drainer);
    s.env.cleanup().await;
}

/// A pod already evicted (terminating) is going: `explain` says so, not that it would wait on
/// the PodDisruptionBudget that admitted its eviction.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_evicted_pod_is_not_called_one_that_waits_on_a_pdb() {
    let s = Scenario::new().await;
    let node = s.env.node("evicted", "True", 3600, json!({})).await;
    let app = s.env.name("held");
    let pod = s
        .env
        .pod(
            "default",
            "held",
            &node,
            json!({"metadata": {"labels": {"app": app}, "finalizers": ["nodemedic.io/test-hold"]}}),
        )
        .await;
    let pdb = s.env.blocking_pdb(&app).await;
    let api: kube::Api<k8s_openapi::api::core::v1::Pod> =
        kube::Api::namespaced(s.env.cluster.client.clone(), "default");
    api.delete(&pod, &Default::default()).await.unwrap();
    let selector = format!("--node-selector={}={}", crate::env::LABEL, s.env.id);
    let explain = live(
        &s,
        &["explain", &node, "KernelDeadlock=True,10m", &selector],
    );
    let line = explain
        .lines()
        .find(|l| l.contains(&format!("default/{pod}")))
        .unwrap_or_default()
        .to_string();
    assert!(line.contains("terminating"), "{explain}");
    assert!(!line.contains("would wait on PDB"), "{line}");
    // The finalizer let go, so the pod goes.
    let clear = json!({"metadata": {"finalizers": null}});
    api.patch(&pod, &Default::default(), &kube::api::Patch::Merge(clear))
        .await
        .unwrap();
    s.env.free_pdb(&pdb).await;
    s.env.cleanup().await;
}
