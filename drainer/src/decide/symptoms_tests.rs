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

/// A pod on `node`, bound `minutes` ago and not started, of owner `owner`, in namespace `app`.
fn waiting(name: &str, node: &str, minutes: i64, owner: &str) -> Arc<PodInfo> {
    waiting_in(
        "app",
        name,
        node,
        minutes,
        ("ReplicaSet", owner),
        Some("ContainerCreating"),
    )
}

/// A pod in `ns` on `node`, bound `minutes` ago and not started, of owner `(kind, name)`, its
/// container waiting for `reason` (None: the kubelet has said nothing yet).
pub(super) fn waiting_in(
    ns: &str,
    name: &str,
    node: &str,
    minutes: i64,
    (kind, owner): (&str, &str),
    reason: Option<&str>,
) -> Arc<PodInfo> {
    let statuses = match reason {
        Some(r) => {
            json!([{"name": "c", "image": "i", "imageID": "", "ready": false, "restartCount": 0,
            "state": {"waiting": {"reason": r}}}])
        }
        None => json!([]),
    };
    let p = json!({
        "metadata": {"name": name, "namespace": ns, "creationTimestamp": ago(minutes + 1),
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": kind, "name": owner, "uid": format!("uid-{ns}-{owner}"), "controller": true}]},
        "spec": {"nodeName": node, "containers": []},
        "status": {"phase": "Pending",
            "conditions": [{"type": "PodScheduled", "status": "True", "lastTransitionTime": ago(minutes)}],
            "containerStatuses": statuses}
    });
    Arc::new(PodInfo::from_pod(
        &serde_json::from_value(p).unwrap(),
        Some(&[]),
    ))
}

/// The cluster operators' node agent on `node` (a DaemonSet's pod in kube-system), waiting.
fn agent(node: &str, minutes: i64) -> Arc<PodInfo> {
    // One DaemonSet's pods wait on several nodes when its own spec is wrong (and then blame no
    // node): here each waits alone, as on a node whose runtime is wedged.
    let name = format!("agent-{node}");
    waiting_in(
        "kube-system",
        &name,
        node,
        minutes,
        ("DaemonSet", &name),
        Some("ContainerCreating"),
    )
}

/// A pod in `ns` on `node` deleted with its grace period ending `minutes` ago, its container still
/// running when `running` (else stopped: a finalizer holds it).
fn deleting_in(ns: &str, name: &str, node: &str, minutes: i64, running: bool) -> Arc<PodInfo> {
    let state = if running {
        json!({"running": {"startedAt": ago(600)}})
    } else {
        json!({"terminated": {"exitCode": 0}})
    };
    let p = json!({"metadata": {"name": name, "namespace": ns, "deletionTimestamp": ago(minutes), "finalizers": ["example.com/hold"]},
        "spec": {"nodeName": node, "containers": []}, "status": {"phase": "Running",
            "containerStatuses": [{"name": "c", "image": "i", "imageID": "", "ready": false, "restartCount": 0, "state": state}]}});
    Arc::new(PodInfo::from_pod(
        &serde_json::from_value(p).unwrap(),
        Some(&[]),
    ))
}

const ON: SymptomSettings = SymptomSettings {
    not_starting_after: Some(Duration::from_secs(600)),
    not_terminating_after: Some(Duration::from_secs(300)),
};

pub(super) fn run(pods: &[Arc<PodInfo>], starts: &[(&str, i64)]) -> Vec<(String, Symptom)> {
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
        waiting_in(
            "shop",
            "b",
            "n1",
            12,
            ("ReplicaSet", "api"),
            Some("ContainerCreating"),
        ),
        waiting("c", "n1", 3, "db"),
        agent("n1", 11),
    ];
    let got = run(&pods, &[("n1", 30)]);
    assert_eq!(got.len(), 1, "{got:?}");
    assert_eq!(got[0].0, "n1");
    assert_eq!(got[0].1.condition, "PodsNotStarting");
    assert_eq!(got[0].1.reason, "PodsWaitingToStart");
    assert_eq!(
        got[0].1.message,
        "3 pods bound here have waited over 10m to start and no container started here in that time: app/a (ContainerCreating, 14m), shop/b (ContainerCreating, 12m), kube-system/agent-n1 (ContainerCreating, 11m)"
    );
}

/// A limit under a minute is said as it is: pods that waited over 30 s, not "over 1m".
#[test]
fn a_limit_under_a_minute_is_said_in_seconds() {
    let pods = [
        waiting("a", "n1", 2, "web"),
        waiting_in(
            "shop",
            "b",
            "n1",
            2,
            ("ReplicaSet", "api"),
            Some("ContainerCreating"),
        ),
        agent("n1", 2),
    ];
    let starts: HashMap<ArcStr, Timestamp> = [(intern("n1"), ago(30).parse().unwrap())].into();
    let settings = SymptomSettings {
        not_starting_after: Some(Duration::from_secs(30)),
        not_terminating_after: None,
    };
    let got = assess(now(), &evidence(&pods, &starts, &HashMap::new()), &settings);
    let message = &got[&intern("n1")][0].message;
    assert!(
        message.starts_with("3 pods bound here have waited over 30s to start"),
        "{message}"
    );
    assert!(
        message.contains("app/a (ContainerCreating, 2m)"),
        "{message}"
    );
}

#[test]
fn a_container_started_on_the_node_in_the_window_clears_it() {
    let pods = [waiting("a", "n1", 14, "web"), agent("n1", 14)];
    assert!(run(&pods, &[("n1", 5)]).is_empty());
    // Nothing ever started there (a new node): a symptom.
    assert_eq!(run(&pods, &[]).len(), 1);
}

#[test]
fn an_owner_whose_pods_wait_on_several_nodes_blames_no_node() {
    // The owner's own fault: the same ReplicaSet's pods wait on n1, n2 and n3.
    let pods = [
        waiting("a", "n1", 20, "bad"),
        waiting("b", "n2", 20, "bad"),
        waiting("d", "n3", 20, "bad"),
    ];
    assert!(run(&pods, &[]).is_empty());
    // n1 also has a pod of another owner waiting alone: that one still counts against n1.
    let pods = [
        waiting("a", "n1", 20, "bad"),
        waiting("b", "n2", 20, "bad"),
        waiting("d", "n3", 20, "bad"),
        waiting("c", "n1", 15, "web"),
        agent("n1", 16),
    ];
    let got = run(&pods, &[]);
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].0, "n1");
    assert!(
        got[0]
            .1
            .message
            .starts_with("2 pods bound here have waited"),
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
        deleting_in("app", "a", "n1", 7, true),
        deleting_in("shop", "b", "n1", 6, true),
        deleting_in("app", "late", "n1", 2, true),
        deleting_in("app", "c", "n2", 61, true),
        deleting_in("web", "d", "n2", 62, true),
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
                "2 pods deleted here are still running over 5m past their grace period: app/a (7m past its grace period), shop/b (6m past its grace period)"
            ),
            (
                "n2",
                "PodsNotTerminating",
                "2 pods deleted here are still running over 5m past their grace period: web/d (1h2m past its grace period), app/c (1h1m past its grace period)"
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
    let mut pods: Vec<_> = (0..5)
        .map(|i| {
            let (ns, owner) = (format!("ns{}", i % 2), format!("o{i}"));
            waiting_in(
                &ns,
                &format!("p{i}"),
                "n1",
                20 + i,
                ("ReplicaSet", &owner),
                Some("ContainerCreating"),
            )
        })
        .collect();
    pods.push(agent("n1", 10));
    let got = run(&pods, &[]);
    assert!(
        got[0]
            .1
            .message
            .starts_with("6 pods bound here have waited")
    );
    assert!(
        got[0].1.message.ends_with("ns0/p4 (ContainerCreating, 24m), ns1/p3 (ContainerCreating, 23m), ns0/p2 (ContainerCreating, 22m), and 3 more"),
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
        agent("n1", 14),
        waiting("b", "n3", 14, "api"),
        agent("n3", 14),
        waiting("c", "leaf", 14, "db"),
        agent("leaf", 14),
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
    let pods = [waiting("a", "n1", 14, "web"), agent("n1", 13)];
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

/// Issue 64, point 1: a tenant who may create pods only in its own namespace binds them to nodes
/// of its choice (`spec.nodeName`) with an image that cannot be pulled, a missing volume, a crash
/// loop, a finalizer, and deletes them. None of it sets a symptom on any node.
#[test]
fn one_tenants_pods_never_set_a_symptom_on_a_node_it_picks() {
    let mut pods = Vec::new();
    for (i, reason) in [
        Some("ErrImagePull"),
        Some("ImagePullBackOff"),
        Some("InvalidImageName"),
        Some("CreateContainerConfigError"),
        Some("CrashLoopBackOff"),
        // A volume that does not exist keeps a pod here; so does a pod the kubelet never took.
        Some("ContainerCreating"),
        None,
    ]
    .into_iter()
    .enumerate()
    {
        // Each its own owner, so none is excused as "waiting on several nodes".
        let owner = format!("o{i}");
        pods.push(waiting_in(
            "tenant",
            &format!("p{i}"),
            "n3",
            30,
            ("ReplicaSet", &owner),
            reason,
        ));
    }
    pods.push(deleting_in("tenant", "held", "n5", 60, false));
    pods.push(deleting_in("tenant", "held-running", "n5", 60, true));
    assert!(run(&pods, &[]).is_empty(), "{:?}", run(&pods, &[]));
}

/// What still counts: the operators' DaemonSet pod waiting for the node itself, with whatever else
/// waits there; pods of tenants alone never do, from however many namespaces (a Secret volume that
/// does not exist keeps a pod in ContainerCreating for good: issue 76, point 4); reasons a pod's own
/// spec causes never do.
#[test]
fn a_wedged_runtime_is_still_seen_through_pods_no_single_tenant_owns() {
    let two = [
        waiting_in(
            "a",
            "x",
            "n1",
            30,
            ("ReplicaSet", "x"),
            Some("ContainerCreating"),
        ),
        waiting_in("b", "y", "n1", 30, ("ReplicaSet", "y"), None),
    ];
    assert!(run(&two, &[]).is_empty(), "two tenants' namespaces alone");
    let mut with_agent = two.to_vec();
    with_agent.push(agent("n1", 30));
    let found = run(&with_agent, &[]);
    assert_eq!(found.len(), 1, "the operators' agent waits too");
    let message = &found[0].1.message;
    assert!(message.starts_with("3 pods bound here"), "{message}");
    assert_eq!(
        run(&[agent("n1", 30)], &[]).len(),
        1,
        "the operators' node agent"
    );
    // A DaemonSet a tenant made in its own namespace is one tenant still.
    let theirs = [waiting_in(
        "tenant",
        "ds",
        "n1",
        30,
        ("DaemonSet", "theirs"),
        None,
    )];
    assert!(run(&theirs, &[]).is_empty());
    let pulled = [
        waiting_in(
            "a",
            "x",
            "n1",
            30,
            ("ReplicaSet", "x"),
            Some("ImagePullBackOff"),
        ),
        waiting_in(
            "b",
            "y",
            "n1",
            30,
            ("ReplicaSet", "y"),
            Some("CrashLoopBackOff"),
        ),
        agent_with("n1", "ErrImagePull"),
    ];
    assert!(run(&pulled, &[]).is_empty(), "the pods' own doing");
    // Deleted pods from two namespaces whose containers the kubelet did not stop: the node.
    let stuck = [
        deleting_in("a", "x", "n2", 10, true),
        deleting_in("b", "y", "n2", 10, true),
    ];
    assert_eq!(run(&stuck, &[]).len(), 1);
    let held = [
        deleting_in("a", "x", "n2", 10, false),
        deleting_in("b", "y", "n2", 10, false),
    ];
    assert!(run(&held, &[]).is_empty(), "held by finalizers only");
    // Deleted pods from two namespaces, each with an NFS volume on a server its spec names (a
    // tenant who stops that server hangs them in the kernel): never the node's.
    let on_their_server = [
        deleting_on_nfs("a", "x", "n3"),
        deleting_on_nfs("b", "y", "n3"),
    ];
    assert!(
        run(&on_their_server, &[]).is_empty(),
        "their own NFS server's doing"
    );
    let mut with_one_more = on_their_server.to_vec();
    with_one_more.push(deleting_in("c", "z", "n3", 10, true));
    assert!(
        run(&with_one_more, &[]).is_empty(),
        "one namespace's pod is left"
    );
    with_one_more.push(deleting_in("d", "w", "n3", 10, true));
    let found = run(&with_one_more, &[]);
    assert_eq!(found.len(), 1, "two namespaces without such volumes");
    assert!(
        found[0].1.message.starts_with("2 pods deleted here"),
        "{}",
        found[0].1.message
    );
}

/// A pod in `ns` on `node`, deleted 10 minutes past its grace period and still running, with an
/// inline NFS volume.
fn deleting_on_nfs(ns: &str, name: &str, node: &str) -> Arc<PodInfo> {
    let p = json!({"metadata": {"name": name, "namespace": ns, "deletionTimestamp": ago(10)},
        "spec": {"nodeName": node, "containers": [],
            "volumes": [{"name": "share", "nfs": {"server": "10.0.0.9", "path": "/x"}}]},
        "status": {"phase": "Running", "containerStatuses": [{"name": "c", "image": "i", "imageID": "",
            "ready": false, "restartCount": 0, "state": {"running": {"startedAt": ago(600)}}}]}});
    Arc::new(PodInfo::from_pod(
        &serde_json::from_value(p).unwrap(),
        Some(&[]),
    ))
}

fn agent_with(node: &str, reason: &str) -> Arc<PodInfo> {
    waiting_in(
        "kube-system",
        "agent",
        node,
        30,
        ("DaemonSet", "agent"),
        Some(reason),
    )
}
