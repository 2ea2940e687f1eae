//! What pods waiting to start or to go say about their node: the cases of `decide::symptoms`. Pure.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::jiff::Timestamp;
use serde_json::json;

use crate::decide::symptoms::{Evidence, Symptom, SymptomSettings, assess};
use crate::model::intern::{ArcStr, intern};
use crate::model::pod::PodInfo;

const NOW: &str = "2026-11-27T10:00:00Z";

fn now() -> Timestamp {
    NOW.parse().unwrap()
}

fn ago(minutes: i64) -> String {
    Timestamp::from_second(now().as_second() - minutes * 60)
        .unwrap()
        .to_string()
}

/// A pod on `node`, bound `minutes` ago and not started, of owner `owner`.
fn waiting(name: &str, node: &str, minutes: i64, owner: &str) -> Arc<PodInfo> {
    let p = json!({
        "metadata": {"name": name, "namespace": "app", "creationTimestamp": ago(minutes + 1),
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": owner, "uid": format!("uid-{owner}"), "controller": true}]},
        "spec": {"nodeName": node, "containers": []},
        "status": {"phase": "Pending",
            "conditions": [{"type": "PodScheduled", "status": "True", "lastTransitionTime": ago(minutes)}],
            "containerStatuses": [{"name": "c", "image": "i", "imageID": "", "ready": false, "restartCount": 0,
                "state": {"waiting": {"reason": "ContainerCreating"}}}]}
    });
    Arc::new(PodInfo::from_pod(
        &serde_json::from_value(p).unwrap(),
        Some(&[]),
    ))
}

/// A pod on `node` deleted with its grace period ending `minutes` ago.
fn deleting(name: &str, node: &str, minutes: i64) -> Arc<PodInfo> {
    let p = json!({"metadata": {"name": name, "namespace": "app", "deletionTimestamp": ago(minutes)},
        "spec": {"nodeName": node, "containers": []}, "status": {"phase": "Running"}});
    Arc::new(PodInfo::from_pod(
        &serde_json::from_value(p).unwrap(),
        Some(&[]),
    ))
}

const ON: SymptomSettings = SymptomSettings {
    not_starting_after: Some(Duration::from_secs(600)),
    not_terminating_after: Some(Duration::from_secs(300)),
};

fn run(pods: &[Arc<PodInfo>], starts: &[(&str, i64)]) -> Vec<(String, Symptom)> {
    run_with(pods, starts, &HashMap::new())
}

fn evidence<'a>(
    pods: &'a [Arc<PodInfo>],
    starts: &'a HashMap<ArcStr, Timestamp>,
    sandbox: &'a HashMap<ArcStr, (u64, Timestamp)>,
) -> Evidence<'a> {
    Evidence {
        pods,
        last_start: starts,
        sandbox,
    }
}

fn run_with(
    pods: &[Arc<PodInfo>],
    starts: &[(&str, i64)],
    sandbox: &HashMap<ArcStr, (u64, Timestamp)>,
) -> Vec<(String, Symptom)> {
    let starts: HashMap<ArcStr, Timestamp> = starts
        .iter()
        .map(|(n, m)| (intern(n), ago(*m).parse().unwrap()))
        .collect();
    assess(now(), &evidence(pods, &starts, sandbox), &ON)
        .into_iter()
        .flat_map(|(n, s)| s.into_iter().map(move |s| (n.to_string(), s)))
        .collect()
}

#[test]
fn pods_waiting_on_a_node_where_nothing_starts_are_its_symptom() {
    let pods = [
        waiting("a", "n1", 14, "web"),
        waiting("b", "n1", 12, "api"),
        waiting("c", "n1", 3, "db"),
    ];
    let got = run(&pods, &[("n1", 30)]);
    assert_eq!(got.len(), 1, "{got:?}");
    assert_eq!(got[0].0, "n1");
    assert_eq!(got[0].1.condition, "PodsNotStarting");
    assert_eq!(got[0].1.reason, "PodsWaitingToStart");
    assert_eq!(
        got[0].1.message,
        "2 pods bound here have waited over 10m to start and no container started here in that time: app/a (ContainerCreating, 14m), app/b (ContainerCreating, 12m)"
    );
}

#[test]
fn a_container_started_on_the_node_in_the_window_clears_it() {
    let pods = [waiting("a", "n1", 14, "web")];
    assert!(run(&pods, &[("n1", 5)]).is_empty());
    // Nothing ever started there (a new node): a symptom.
    assert_eq!(run(&pods, &[]).len(), 1);
}

#[test]
fn an_owner_whose_pods_wait_on_several_nodes_blames_no_node() {
    // A bad image: the same ReplicaSet's pods wait on n1 and n2.
    let pods = [waiting("a", "n1", 20, "bad"), waiting("b", "n2", 20, "bad")];
    assert!(run(&pods, &[]).is_empty());
    // n1 also has a pod of another owner waiting alone: that one still counts against n1.
    let pods = [
        waiting("a", "n1", 20, "bad"),
        waiting("b", "n2", 20, "bad"),
        waiting("c", "n1", 15, "web"),
    ];
    let got = run(&pods, &[]);
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].0, "n1");
    assert!(
        got[0].1.message.starts_with("1 pod bound here has waited"),
        "{}",
        got[0].1.message
    );
    assert!(
        got[0].1.message.ends_with("app/c (ContainerCreating, 15m)"),
        "{}",
        got[0].1.message
    );
}

#[test]
fn pods_past_their_grace_period_by_the_margin_are_stuck_terminating() {
    let pods = [
        deleting("a", "n1", 7),
        deleting("b", "n1", 2),
        deleting("c", "n2", 61),
    ];
    let got = run(&pods, &[]);
    let by: Vec<(&str, &str, &str)> = got
        .iter()
        .map(|(n, s)| (n.as_str(), s.condition, s.message.as_str()))
        .collect();
    assert_eq!(
        by,
        [
            (
                "n1",
                "PodsNotTerminating",
                "1 pod deleted here is still there over 5m past its grace period: app/a (7m past its grace period)"
            ),
            (
                "n2",
                "PodsNotTerminating",
                "1 pod deleted here is still there over 5m past its grace period: app/c (1h1m past its grace period)"
            ),
        ]
    );
    let off = SymptomSettings {
        not_starting_after: None,
        not_terminating_after: None,
    };
    let none = HashMap::new();
    assert!(assess(now(), &evidence(&pods, &none, &HashMap::new()), &off).is_empty());
}

#[test]
fn a_message_names_at_most_three_pods_and_counts_the_rest() {
    let pods: Vec<_> = (0..5)
        .map(|i| waiting(&format!("p{i}"), "n1", 20 + i, &format!("o{i}")))
        .collect();
    let got = run(&pods, &[]);
    assert!(
        got[0]
            .1
            .message
            .starts_with("5 pods bound here have waited")
    );
    assert!(
        got[0].1.message.ends_with("app/p4 (ContainerCreating, 24m), app/p3 (ContainerCreating, 23m), app/p2 (ContainerCreating, 22m), and 2 more"),
        "{}",
        got[0].1.message
    );
}

fn view(
    name: &str,
    conditions: serde_json::Value,
    labels: serde_json::Value,
) -> crate::model::node::NodeView {
    let n: k8s_openapi::api::core::v1::Node = serde_json::from_value(json!({
        "metadata": {"name": name, "labels": labels}, "status": {"conditions": conditions}}))
    .unwrap();
    crate::model::node::NodeView::of(&n)
}

#[test]
fn only_changes_are_written_and_a_kosmos_leaf_gets_none() {
    use crate::decide::symptoms::{SymptomWrite, writes};
    let pods = [
        waiting("a", "n1", 14, "web"),
        waiting("b", "n3", 14, "api"),
        waiting("c", "leaf", 14, "db"),
    ];
    let none = HashMap::new();
    let found = assess(now(), &evidence(&pods, &none, &HashMap::new()), &ON);
    let set =
        json!([{"type": "PodsNotStarting", "status": "True", "reason": "PodsWaitingToStart"}]);
    let views = [
        view("n1", json!([]), json!({})),
        // Already True with our reason: nothing to write.
        view("n3", set.clone(), json!({})),
        // True with our reason and no symptom now: cleared.
        view("n2", set, json!({})),
        // True by someone else's reason and no symptom: not ours to clear.
        view(
            "n4",
            json!([{"type": "PodsNotStarting", "status": "True", "reason": "Theirs"}]),
            json!({}),
        ),
        view("leaf", json!([]), json!({"kosmos.io/node": "true"})),
        // No symptom, no condition: nothing at all.
        view("n5", json!([]), json!({})),
    ];
    let kosmos = ("kosmos.io/node".to_string(), "true".to_string());
    let got: Vec<(String, String)> = writes(&found, views.iter(), &kosmos)
        .into_iter()
        .map(|(n, w)| {
            let what = match w {
                SymptomWrite::Set(s) => format!("set {}", s.condition),
                SymptomWrite::Clear {
                    condition, reason, ..
                } => format!("clear {condition} ({reason})"),
            };
            (n.to_string(), what)
        })
        .collect();
    assert_eq!(
        got,
        [
            ("n1".to_string(), "set PodsNotStarting".to_string()),
            (
                "n2".to_string(),
                "clear PodsNotStarting (PodsStart)".to_string()
            ),
        ]
    );
}

#[test]
fn the_kubelets_sandbox_failures_add_words_but_never_a_symptom() {
    let t: Timestamp = ago(2).parse().unwrap();
    let sandbox: HashMap<ArcStr, (u64, Timestamp)> =
        [(intern("n1"), (7, t)), (intern("n2"), (40, t))]
            .into_iter()
            .collect();
    let pods = [waiting("a", "n1", 14, "web")];
    let got = run_with(&pods, &[], &sandbox);
    // n2 has failures and no pod waiting there: no symptom (an Event can name any node).
    assert_eq!(got.len(), 1, "{got:?}");
    assert!(
        got[0].1.message.ends_with(
            "; its kubelet reported FailedCreatePodSandBox 7 times in that time, last 2m ago"
        ),
        "{}",
        got[0].1.message
    );
}
