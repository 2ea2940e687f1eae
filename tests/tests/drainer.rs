//! Drainer scenarios: the real controller (`run::start`) with a real kube::Client over HTTP against the
//! real control plane when KUBEBUILDER_ASSETS is set (its disruption controller computes PDB status,
//! its garbage collector deletes pods without a real owner), else the test API server, or a real
//! cluster with NODEMEDIC_E2E=1. Names get a unique suffix, the drainer is restricted by a label
//! selector to the nodes the scenario made, and everything is deleted afterwards.

use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use k8s_openapi::api::core::v1::{Event, Node, Pod};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::Api;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use nodemedic_common::keys;
use nodemedic_drainer::config::{Budget, Config};
use nodemedic_drainer::leader::LeaseConfig;
use nodemedic_drainer::run::{self, Options, Running};
use nodemedic_drainer::select::Selector;
use nodemedic_tests::cluster::{Cluster, eventually};
use serde_json::{Value, json};

const WAIT: Duration = Duration::from_secs(30);
const LABEL: &str = "nodemedic.test/run";
static RUN: AtomicU32 = AtomicU32::new(0);

struct Env {
    cluster: Cluster,
    id: String,
    namespaces: Vec<&'static str>,
}

fn ago(secs: i64) -> String {
    (k8s_openapi::jiff::Timestamp::now() - Duration::from_secs(secs as u64))
        .strftime("%Y-%m-%dT%H:%M:%SZ")
        .to_string()
}

fn merge(a: &mut Value, b: &Value) {
    match (a, b) {
        (Value::Object(a), Value::Object(b)) => b
            .iter()
            .for_each(|(k, v)| merge(a.entry(k.clone()).or_insert(Value::Null), v)),
        (a, b) => *a = b.clone(),
    }
}

impl Env {
    async fn new() -> Env {
        let n = RUN.fetch_add(1, Ordering::Relaxed);
        let cluster = Cluster::new().await;
        let id = if cluster.real() {
            cluster.id_label()
        } else {
            format!("{}-{n}", std::process::id())
        };
        Env {
            cluster,
            id,
            namespaces: vec!["default", "kube-system"],
        }
    }

    fn name(&self, hint: &str) -> String {
        self.cluster.name(hint)
    }

    fn config(&self, buffer: Duration) -> Config {
        Config {
            selector: Selector::labels(&format!("{LABEL}={}", self.id)).unwrap(),
            conditions: vec!["KernelDeadlock=True,10m".parse().unwrap()],
            drain_buffer: buffer,
            max_cordoned: Budget::Count(10),
            max_grace_period: Duration::from_secs(30),
            eviction_headroom: Duration::from_secs(30),
            ..Default::default()
        }
    }

    async fn start(&self, cfg: Config, identity: &str) -> Running {
        self.start_with_lease(
            cfg,
            identity,
            &format!("nodemedic-drainer-test-{}", self.id),
        )
        .await
    }

    async fn start_with_lease(&self, cfg: Config, identity: &str, lease: &str) -> Running {
        let opts = Options {
            config: cfg,
            listen: "127.0.0.1:0".parse().unwrap(),
            lease: LeaseConfig {
                namespace: "kube-system".into(),
                name: lease.into(),
                identity: identity.into(),
                duration: Duration::from_secs(2),
                renew_deadline: Duration::from_millis(1500),
                retry_period: Duration::from_millis(200),
            },
            tick: Duration::from_millis(200),
            guard: None,
        };
        run::start(opts, self.cluster.client_for(lease))
            .await
            .unwrap()
    }

    /// A selected node with Ready=True and KernelDeadlock=`status` since `since_secs` ago.
    async fn node(&self, hint: &str, status: &str, since_secs: i64, labels: Value) -> String {
        let name = self.name(hint);
        let mut l = json!({LABEL: self.id});
        merge(&mut l, &labels);
        let n: Node =
            serde_json::from_value(json!({"metadata": {"name": name, "labels": l}})).unwrap();
        Api::<Node>::all(self.cluster.client.clone())
            .create(&PostParams::default(), &n)
            .await
            .unwrap();
        self.cluster.kubelet.adopt(&name);
        self.set_condition(&name, "KernelDeadlock", status, since_secs)
            .await;
        self.set_condition(&name, "Ready", "True", 3600).await;
        name
    }

    async fn set_condition(&self, node: &str, type_: &str, status: &str, since_secs: i64) {
        let body = json!({"status": {"conditions": [{"type": type_, "status": status, "reason": "Test", "message": "m",
            "lastHeartbeatTime": ago(0), "lastTransitionTime": ago(since_secs)}]}});
        Api::<Node>::all(self.cluster.client.clone())
            .patch_status(node, &PatchParams::default(), &Patch::Strategic(body))
            .await
            .unwrap();
    }

    /// A Running, Ready pod on `node` owned by a real (empty) ReplicaSet; `extra` is merged in (an
    /// `ownerReferences` there replaces the ReplicaSet).
    async fn pod(&self, ns: &str, hint: &str, node: &str, extra: Value) -> String {
        let name = self.name(hint);
        let owner = self.cluster.owner(ns, "rs").await;
        let mut v = json!({
            "metadata": {"name": name, "namespace": ns, "labels": {"app": name, LABEL: self.id},
                "ownerReferences": owner},
            "spec": {"nodeName": node, "terminationGracePeriodSeconds": 30, "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.9"}]},
        });
        merge(&mut v, &extra);
        let p: Pod = serde_json::from_value(v).unwrap();
        Api::<Pod>::namespaced(self.cluster.client.clone(), ns)
            .create(&PostParams::default(), &p)
            .await
            .unwrap();
        // No kubelet: report it Running and Ready as the kubelet would (the disruption controller
        // counts Ready pods as healthy).
        let now = nodemedic_tests::cluster::now_rfc3339();
        self.cluster
            .set_pod_status(
                ns,
                &name,
                json!({"phase": "Running", "conditions": [
                    {"type": "Ready", "status": "True", "lastTransitionTime": now},
                    {"type": "ContainersReady", "status": "True", "lastTransitionTime": now}]}),
            )
            .await;
        name
    }

    /// A PodDisruptionBudget that allows no disruption of `app` (free it with [`Env::free_pdb`]).
    async fn blocking_pdb(&self, app: &str) -> String {
        let name = self.name("pdb");
        let pdb = json!({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
            "metadata": {"name": name, "namespace": "default", "labels": {LABEL: self.id}},
            "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": app}}}});
        let api: Api<PodDisruptionBudget> = Api::namespaced(self.cluster.client.clone(), "default");
        api.create(
            &PostParams::default(),
            &serde_json::from_value(pdb.clone()).unwrap(),
        )
        .await
        .unwrap();
        if let Some(fake) = &self.cluster.fake {
            // What the disruption controller would compute for one pod that must stay.
            let mut with_status = fake
                .object("policy/v1", "poddisruptionbudgets", Some("default"), &name)
                .unwrap();
            with_status["status"] = json!({"disruptionsAllowed": 0, "currentHealthy": 1, "desiredHealthy": 1, "expectedPods": 1});
            fake.put_object(
                "policy/v1",
                "poddisruptionbudgets",
                Some("default"),
                with_status,
            );
        }
        name
    }

    /// Let the PDB allow a disruption: minAvailable 0 (on a real cluster the disruption controller
    /// then computes disruptionsAllowed 1; the test server is told so).
    async fn free_pdb(&self, name: &str) {
        let api: Api<PodDisruptionBudget> = Api::namespaced(self.cluster.client.clone(), "default");
        api.patch(
            name,
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"minAvailable": 0}})),
        )
        .await
        .unwrap();
        if let Some(fake) = &self.cluster.fake {
            let mut stored = fake
                .object("policy/v1", "poddisruptionbudgets", Some("default"), name)
                .unwrap();
            stored["status"]["disruptionsAllowed"] = json!(1);
            fake.put_object("policy/v1", "poddisruptionbudgets", Some("default"), stored);
        }
    }

    /// The PDB's status as its controller computed it: (disruptionsAllowed, currentHealthy).
    async fn pdb_status(&self, name: &str) -> (i32, i32) {
        let api: Api<PodDisruptionBudget> = Api::namespaced(self.cluster.client.clone(), "default");
        let st = api.get(name).await.unwrap().status.unwrap_or_default();
        (st.disruptions_allowed, st.current_healthy)
    }

    /// Eviction requests the API server answered with `code` for `pod` (any pod when empty).
    fn evictions(&self, pod: &str, code: Option<u16>) -> usize {
        if let Some(plane) = self.cluster.plane {
            return plane
                .audit()
                .iter()
                .filter(|e| {
                    e.verb == "create"
                        && e.resource == "pods"
                        && e.subresource == "eviction"
                        && e.name.ends_with(&format!("-{}", self.id))
                        && (pod.is_empty() || e.name == pod)
                        && code.is_none_or(|c| e.code == c)
                })
                .count();
        }
        let fake = self.cluster.fake.as_ref().expect("test server");
        fake.log()
            .iter()
            .filter(|l| {
                l.path.ends_with("/eviction")
                    && (pod.is_empty() || l.path.ends_with(&format!("/pods/{pod}/eviction")))
                    && code.is_none_or(|c| l.status == c)
            })
            .count()
    }

    async fn get_node(&self, name: &str) -> Value {
        serde_json::to_value(
            Api::<Node>::all(self.cluster.client.clone())
                .get(name)
                .await
                .unwrap(),
        )
        .unwrap()
    }

    async fn cordoned(&self, name: &str) -> bool {
        self.get_node(name).await["spec"]["unschedulable"] == json!(true)
    }

    async fn pod_exists(&self, ns: &str, name: &str) -> bool {
        Api::<Pod>::namespaced(self.cluster.client.clone(), ns)
            .get_opt(name)
            .await
            .unwrap()
            .is_some()
    }

    /// Reasons of the drainer's Events about the node (a real cluster's controllers write their own).
    async fn event_reasons(&self, node: &str) -> Vec<String> {
        self.drainer_events(node)
            .await
            .into_iter()
            .filter_map(|e| e.reason)
            .collect()
    }

    async fn drainer_events(&self, node: &str) -> Vec<Event> {
        self.cluster
            .node_events_from(node, &["nodemedic-drainer"])
            .await
    }

    /// Writes (create, patch, update, delete) the scenario's drainer made to `resource[/sub]`.
    fn drainer_writes(&self, resource: &str, sub: &str) -> usize {
        let lease = format!("nodemedic-drainer-test-{}", self.id);
        ["create", "patch", "update", "delete"]
            .iter()
            .map(|v| self.cluster.requests_from(&lease, v, resource, sub))
            .sum()
    }

    async fn drain_scheduled(&self, node: &str) -> Option<String> {
        let n = self.get_node(node).await;
        n["status"]["conditions"]
            .as_array()?
            .iter()
            .find(|c| c["type"] == keys::DRAIN_SCHEDULED_CONDITION)
            .map(|c| c["message"].as_str().unwrap_or("").to_string())
    }

    async fn record_phase(&self, node: &str) -> Option<String> {
        let n = self.get_node(node).await;
        let raw = n["metadata"]["annotations"][keys::DRAIN_RECORD_ANNOTATION]
            .as_str()?
            .to_string();
        serde_json::from_str::<Value>(&raw).ok()?["phase"]
            .as_str()
            .map(String::from)
    }

    async fn wait_drained(&self, node: &str) {
        eventually(&format!("{node} drain completed"), WAIT, || async {
            self.drain_scheduled(node)
                .await
                .filter(|m| m.contains(" | Completed: "))
        })
        .await;
    }

    async fn cleanup(self) {
        self.cluster.cleanup(&self.namespaces).await;
    }
}

#[tokio::test]
async fn held_condition_cordons_then_drains_after_the_buffer_sparing_protected_pods() {
    let env = Env::new().await;
    let bad = env.node("bad", "True", 3600, json!({})).await;
    let web = env.pod("default", "web", &bad, json!({})).await;
    let elsewhere = env
        .pod("default", "elsewhere", "some-other-node", json!({}))
        .await;
    let ds_owner = env
        .cluster
        .owner_of_kind("kube-system", "DaemonSet", "ds")
        .await;
    let ds = env
        .pod(
            "kube-system",
            "ds",
            &bad,
            json!({"metadata": {"ownerReferences": ds_owner}}),
        )
        .await;
    let ne = env.pod("kube-system", "not-evicted", &bad, json!({"metadata": {"annotations": {"scheduler.alpha.kubernetes.io/not-evicted-pod": ""}}})).await;
    let crit = env.pod("kube-system", "critical", &bad, json!({"metadata": {"annotations": {"scheduler.alpha.kubernetes.io/critical-pod": ""}}})).await;
    let mirror = env
        .pod(
            "kube-system",
            "mirror",
            &bad,
            json!({"metadata": {"annotations": {"kubernetes.io/config.mirror": "x"}}}),
        )
        .await;
    let running = env.start(env.config(Duration::from_secs(2)), "a").await;

    eventually("cordoned", WAIT, || async {
        env.cordoned(&bad).await.then_some(())
    })
    .await;
    let scheduled = eventually("DrainScheduled condition", WAIT, || async {
        env.drain_scheduled(&bad).await
    })
    .await;
    assert!(
        scheduled.starts_with("Drain activity scheduled "),
        "{scheduled}"
    );
    assert!(
        env.pod_exists("default", &web).await,
        "not drained before the buffer"
    );
    env.wait_drained(&bad).await;
    assert!(
        !env.pod_exists("default", &web).await,
        "the ReplicaSet pod was evicted"
    );
    assert!(env.pod_exists("default", &elsewhere).await);
    for p in [&ds, &ne, &crit, &mirror] {
        assert!(
            env.pod_exists("kube-system", p).await,
            "kube-system/{p} must stay"
        );
    }
    assert_eq!(env.record_phase(&bad).await.as_deref(), Some("drained"));
    assert!(env.cordoned(&bad).await, "stays cordoned after the drain");
    let reasons = env.event_reasons(&bad).await;
    for r in [
        "CordonStarting",
        "CordonSucceeded",
        "DrainScheduled",
        "DrainStarting",
        "DrainSucceeded",
    ] {
        assert!(
            reasons.contains(&r.to_string()),
            "{r} missing from {reasons:?}"
        );
    }
    assert_eq!(
        (env.evictions("", None), env.evictions(&web, Some(201))),
        (1, 1),
        "exactly one eviction, of {web}"
    );
    let body = nodemedic_tests::http_get(&format!("http://{}/metrics", running.addr)).await;
    assert!(
        body.contains("draino_cordoned_nodes_total{result=\"succeeded\"} 1"),
        "{body}"
    );
    assert!(
        body.contains("draino_drained_nodes_total{result=\"succeeded\"} 1"),
        "{body}"
    );
    running.shutdown().await;
    env.cleanup().await;
}

#[tokio::test]
async fn flapping_condition_and_kosmos_leaf_not_ready_do_nothing() {
    let env = Env::new().await;
    let flappy = env.node("flappy", "True", 30, json!({})).await;
    let leaf = env
        .node(
            "kosmos-leaf",
            "False",
            3600,
            json!({"kosmos.io/node": "true"}),
        )
        .await;
    env.set_condition(&leaf, "Ready", "Unknown", 3600).await;
    let mut cfg = env.config(Duration::from_secs(1));
    cfg.conditions.push("Ready=Unknown,1m".parse().unwrap());
    // (On the test server every request counts: take the scenario's own writes as the baseline.)
    let writes_before = env.drainer_writes("nodes", "");
    let running = env.start(cfg, "a").await;
    eventually("leader", WAIT, || async {
        (*running.leader.borrow()).then_some(())
    })
    .await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    for n in [&flappy, &leaf] {
        assert!(!env.cordoned(n).await, "{n} must not be cordoned");
        assert!(env.event_reasons(n).await.is_empty(), "{n}: no events");
    }
    assert_eq!(
        env.drainer_writes("nodes", ""),
        writes_before,
        "the drainer wrote no node"
    );
    running.shutdown().await;
    env.cleanup().await;
}

#[tokio::test]
async fn pdb_refusals_are_retried_until_the_budget_frees() {
    let env = Env::new().await;
    let bad = env.node("bad", "True", 3600, json!({})).await;
    let api = env.pod("default", "api", &bad, json!({})).await;
    let pdb = env.blocking_pdb(&api).await;
    let running = env.start(env.config(Duration::from_secs(1)), "a").await;
    eventually("drain in progress", WAIT, || async {
        (env.record_phase(&bad).await.as_deref() == Some("draining")).then_some(())
    })
    .await;
    eventually("an eviction refused with 429", WAIT, || async {
        (env.evictions(&api, Some(429)) > 0).then_some(())
    })
    .await;
    if env.cluster.real() {
        assert_eq!(
            env.pdb_status(&pdb).await,
            (0, 1),
            "the disruption controller counts the Ready pod and allows nothing"
        );
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(
        env.pod_exists("default", &api).await,
        "protected while the budget allows nothing"
    );
    env.free_pdb(&pdb).await;
    eventually("pod evicted once the budget allows", WAIT, || async {
        (!env.pod_exists("default", &api).await).then_some(())
    })
    .await;
    env.wait_drained(&bad).await;
    running.shutdown().await;
    env.cleanup().await;
}

#[tokio::test]
async fn a_drain_that_cannot_finish_fails_is_reported_and_is_retried_later() {
    let env = Env::new().await;
    let bad = env.node("bad", "True", 3600, json!({})).await;
    let api = env.pod("default", "api", &bad, json!({})).await;
    env.blocking_pdb(&api).await;
    let mut cfg = env.config(Duration::from_secs(1));
    cfg.max_grace_period = Duration::from_secs(1);
    cfg.eviction_headroom = Duration::from_secs(1);
    cfg.retry_base = Duration::from_secs(600);
    let running = env.start(cfg, "a").await;
    eventually("drain failed", WAIT, || async {
        (env.record_phase(&bad).await.as_deref() == Some("failed")).then_some(())
    })
    .await;
    let msg = env.drain_scheduled(&bad).await.unwrap();
    assert!(msg.contains(" | Failed: "), "{msg}");
    assert!(
        env.event_reasons(&bad)
            .await
            .contains(&"DrainFailed".to_string())
    );
    let node = env.get_node(&bad).await;
    let record: Value = serde_json::from_str(
        node["metadata"]["annotations"][keys::DRAIN_RECORD_ANNOTATION]
            .as_str()
            .unwrap(),
    )
    .unwrap();
    assert_eq!(record["attempts"], 1);
    assert!(record["retryAt"].is_string(), "{record}");
    assert!(
        env.cordoned(&bad).await,
        "a failed drain leaves the node cordoned"
    );
    running.shutdown().await;
    env.cleanup().await;
}

#[tokio::test]
async fn recovery_during_the_buffer_cancels_the_drain_and_uncordons() {
    let env = Env::new().await;
    let bad = env.node("bad", "True", 3600, json!({})).await;
    let web = env.pod("default", "web", &bad, json!({})).await;
    let running = env.start(env.config(Duration::from_secs(600)), "a").await;
    eventually("cordoned", WAIT, || async {
        env.cordoned(&bad).await.then_some(())
    })
    .await;
    env.set_condition(&bad, "KernelDeadlock", "False", 700)
        .await;
    eventually("uncordoned", WAIT, || async {
        (!env.cordoned(&bad).await).then_some(())
    })
    .await;
    eventually("record and DrainScheduled removed", WAIT, || async {
        (env.record_phase(&bad).await.is_none() && env.drain_scheduled(&bad).await.is_none())
            .then_some(())
    })
    .await;
    assert!(env.pod_exists("default", &web).await, "never drained");
    let reasons = env.event_reasons(&bad).await;
    assert!(
        reasons.contains(&"UncordonSucceeded".to_string()),
        "{reasons:?}"
    );
    assert!(
        !reasons.contains(&"DrainStarting".to_string()),
        "{reasons:?}"
    );
    running.shutdown().await;
    env.cleanup().await;
}

#[tokio::test]
async fn a_manual_uncordon_is_respected_for_the_episode() {
    let env = Env::new().await;
    let bad = env.node("bad", "True", 3600, json!({})).await;
    let running = env.start(env.config(Duration::from_secs(600)), "a").await;
    eventually("cordoned", WAIT, || async {
        env.cordoned(&bad).await.then_some(())
    })
    .await;
    let nodes: Api<Node> = Api::all(env.cluster.client.clone());
    nodes
        .patch(
            &bad,
            &PatchParams::default(),
            &Patch::Strategic(json!({"spec": {"unschedulable": false}})),
        )
        .await
        .unwrap();
    eventually("released", WAIT, || async {
        (env.record_phase(&bad).await.as_deref() == Some("released")).then_some(())
    })
    .await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(
        !env.cordoned(&bad).await,
        "not cordoned again for the same episode"
    );
    running.shutdown().await;
    env.cleanup().await;
}

#[tokio::test]
async fn dry_run_logs_and_emits_events_but_changes_nothing() {
    let env = Env::new().await;
    let bad = env.node("bad", "True", 3600, json!({})).await;
    let mut cfg = env.config(Duration::from_secs(1));
    cfg.dry_run = true;
    let running = env.start(cfg, "a").await;
    eventually("CordonStarting event", WAIT, || async {
        env.event_reasons(&bad)
            .await
            .contains(&"CordonStarting".to_string())
            .then_some(())
    })
    .await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(!env.cordoned(&bad).await);
    assert!(env.record_phase(&bad).await.is_none());
    assert!(env.drain_scheduled(&bad).await.is_none());
    running.shutdown().await;
    env.cleanup().await;
}

#[tokio::test]
async fn a_budget_of_one_takes_three_bad_nodes_one_at_a_time() {
    let env = Env::new().await;
    let mut names = Vec::new();
    for (n, since) in [("n1", 3000), ("n2", 2000), ("n3", 1000)] {
        names.push(env.node(n, "True", since, json!({})).await);
    }
    let mut cfg = env.config(Duration::from_secs(1));
    cfg.max_cordoned = Budget::Count(1);
    let running = env.start(cfg, "a").await;
    env.wait_drained(&names[0]).await;
    tokio::time::sleep(Duration::from_millis(600)).await;
    let mut count = 0;
    for n in &names {
        count += env.cordoned(n).await as usize;
    }
    assert_eq!(count, 1, "only one node cordoned at a time");
    env.set_condition(&names[0], "KernelDeadlock", "False", 700)
        .await;
    eventually("n2 cordoned after n1 recovered", WAIT, || async {
        (!env.cordoned(&names[0]).await && env.cordoned(&names[1]).await).then_some(())
    })
    .await;
    assert!(!env.cordoned(&names[2]).await);
    let waiting: Vec<Event> = env
        .drainer_events(&names[2])
        .await
        .into_iter()
        .filter(|e| e.reason.as_deref() == Some("WaitingForBudget"))
        .collect();
    assert_eq!(
        waiting.len(),
        1,
        "a waiting node says so, with one Event for its wait, not one per round: {waiting:?}"
    );
    assert_eq!(
        waiting[0].message.as_deref(),
        Some("waiting for the cordon budget (--max-cordoned) to free a slot")
    );
    running.shutdown().await;
    env.cleanup().await;
}

#[tokio::test]
async fn two_replicas_one_leader_and_failover_continues_the_drain() {
    let env = Env::new().await;
    let bad = env.node("bad", "True", 3600, json!({})).await;
    let api = env.pod("default", "api", &bad, json!({})).await;
    let pdb = env.blocking_pdb(&api).await;
    let a = env
        .start(env.config(Duration::from_secs(1)), "replica-a")
        .await;
    eventually("a leads", WAIT, || async {
        (*a.leader.borrow()).then_some(())
    })
    .await;
    let b = env
        .start(env.config(Duration::from_secs(1)), "replica-b")
        .await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(!*b.leader.borrow(), "only one leader");
    eventually("drain in progress (blocked by the PDB)", WAIT, || async {
        (env.record_phase(&bad).await.as_deref() == Some("draining")).then_some(())
    })
    .await;
    let starts_before = env
        .event_reasons(&bad)
        .await
        .iter()
        .filter(|r| *r == "DrainStarting")
        .count();
    a.shutdown().await;
    eventually("b takes over", WAIT, || async {
        (*b.leader.borrow()).then_some(())
    })
    .await;
    let leases: Api<k8s_openapi::api::coordination::v1::Lease> =
        Api::namespaced(env.cluster.client.clone(), "kube-system");
    let lease = leases
        .get(&format!("nodemedic-drainer-test-{}", env.id))
        .await
        .unwrap()
        .spec
        .unwrap();
    assert_eq!(lease.holder_identity.as_deref(), Some("replica-b"));
    assert_eq!(lease.lease_transitions, Some(1));
    env.free_pdb(&pdb).await;
    env.wait_drained(&bad).await;
    assert!(!env.pod_exists("default", &api).await);
    let starts = env
        .event_reasons(&bad)
        .await
        .iter()
        .filter(|r| *r == "DrainStarting")
        .count();
    assert_eq!(
        starts,
        starts_before + 1,
        "b resumed the drain once; a's drain stopped with its leadership"
    );
    b.shutdown().await;
    env.cleanup().await;
}

#[tokio::test]
async fn two_drainers_with_disjoint_selectors_never_touch_each_others_nodes() {
    let env = Env::new().await;
    let a = env.node("pool-a", "True", 3600, json!({"pool": "a"})).await;
    let b = env.node("pool-b", "True", 3000, json!({"pool": "b"})).await;
    let pa = env.pod("default", "pa", &a, json!({})).await;
    let pb = env.pod("default", "pb", &b, json!({})).await;
    let (lease_a, lease_b) = (
        format!("nodemedic-drainer-a-{}", env.id),
        format!("nodemedic-drainer-b-{}", env.id),
    );
    let drainer = |pool: &str| {
        let mut cfg = env.config(Duration::from_secs(1));
        cfg.selector = Selector::labels(&format!("{LABEL}={},pool={pool}", env.id)).unwrap();
        // A budget of one each: before records named their drainer, each counted the other's
        // cordon and waited forever ("cordon budget full: 2 of 1").
        cfg.max_cordoned = Budget::Count(1);
        cfg
    };
    let ra = env.start_with_lease(drainer("a"), "a-1", &lease_a).await;
    let rb = env.start_with_lease(drainer("b"), "b-1", &lease_b).await;
    env.wait_drained(&a).await;
    env.wait_drained(&b).await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    for (node, lease) in [(&a, &lease_a), (&b, &lease_b)] {
        let n = env.get_node(node).await;
        let record: Value = serde_json::from_str(
            n["metadata"]["annotations"][keys::DRAIN_RECORD_ANNOTATION]
                .as_str()
                .unwrap(),
        )
        .unwrap();
        assert_eq!(record["owner"], json!(lease), "{node}: {record}");
        let starts = env
            .event_reasons(node)
            .await
            .iter()
            .filter(|r| *r == "DrainStarting" || *r == "DrainSucceeded")
            .count();
        assert_eq!(
            starts, 2,
            "{node}: one DrainStarting and one DrainSucceeded"
        );
    }
    assert_eq!(env.evictions(&pa, None), 1, "one eviction of {pa}");
    assert_eq!(env.evictions(&pb, None), 1, "one eviction of {pb}");
    if let Some(plane) = env.cluster.plane {
        // Counted at the API server: each drainer wrote only its own node.
        let agent = |lease: &str| format!("nodemedic-test-{lease}-{}", env.cluster.id);
        let wrote = |lease: &str, node: &str| {
            plane
                .audit()
                .iter()
                .filter(|e| {
                    e.user_agent == agent(lease)
                        && e.resource == "nodes"
                        && e.name == node
                        && e.verb != "get"
                })
                .count()
        };
        assert!(wrote(&lease_a, &a) > 0 && wrote(&lease_b, &b) > 0);
        assert_eq!(wrote(&lease_a, &b), 0, "drainer a never wrote b's node");
        assert_eq!(wrote(&lease_b, &a), 0, "drainer b never wrote a's node");
    }
    ra.shutdown().await;
    rb.shutdown().await;
    env.cleanup().await;
}

#[tokio::test]
async fn the_lease_is_released_on_shutdown() {
    let env = Env::new().await;
    let a = env
        .start(env.config(Duration::from_secs(1)), "replica-a")
        .await;
    eventually("a leads", WAIT, || async {
        (*a.leader.borrow()).then_some(())
    })
    .await;
    a.shutdown().await;
    let leases: Api<k8s_openapi::api::coordination::v1::Lease> =
        Api::namespaced(env.cluster.client.clone(), "kube-system");
    let spec = leases
        .get(&format!("nodemedic-drainer-test-{}", env.id))
        .await
        .unwrap()
        .spec
        .unwrap();
    assert_eq!(
        spec.holder_identity.as_deref(),
        Some(""),
        "released, so the next replica need not wait a lease duration"
    );
    assert_eq!(spec.lease_duration_seconds, Some(1));
    if env.cluster.real() {
        let _ = leases
            .delete(
                &format!("nodemedic-drainer-test-{}", env.id),
                &DeleteParams::default(),
            )
            .await;
    }
    env.cleanup().await;
}

/// Apply the shipped drainer RBAC (deploy/base/drainer-rbac.yaml) to the control plane.
async fn apply_shipped_rbac(client: &kube::Client) {
    use k8s_openapi::api::core::v1::ServiceAccount;
    use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../deploy/base/drainer-rbac.yaml"
    ))
    .unwrap();
    async fn create<K>(client: &kube::Client, ns: Option<&str>, v: Value)
    where
        K: kube::Resource<DynamicType = ()>,
    {
        use kube::core::{ApiResource, DynamicObject};
        let ar = ApiResource::erase::<K>(&());
        let api: Api<DynamicObject> = match ns {
            Some(ns) => Api::namespaced_with(client.clone(), ns, &ar),
            None => Api::all_with(client.clone(), &ar),
        };
        let obj: DynamicObject = serde_json::from_value(v).unwrap();
        match api.create(&PostParams::default(), &obj).await {
            Ok(_) => {}
            Err(kube::Error::Api(e)) if e.code == 409 => {}
            Err(e) => panic!("apply {obj:?}: {e}"),
        }
    }
    for doc in text.split("\n---") {
        let v: Value = serde_saphyr::from_str(doc).unwrap();
        match v["kind"].as_str().unwrap() {
            "ServiceAccount" => create::<ServiceAccount>(client, Some("kube-system"), v).await,
            "ClusterRole" => create::<ClusterRole>(client, None, v).await,
            "ClusterRoleBinding" => create::<ClusterRoleBinding>(client, None, v).await,
            "Role" => create::<Role>(client, Some("kube-system"), v).await,
            "RoleBinding" => create::<RoleBinding>(client, Some("kube-system"), v).await,
            other => panic!("unexpected {other} in the drainer RBAC"),
        }
    }
}

#[tokio::test]
async fn the_shipped_rbac_grants_every_call_the_drainer_makes() {
    let env = Env::new().await;
    let Some(plane) = env.cluster.plane else {
        nodemedic_tests::envtest::say_skipped(
            "the_shipped_rbac_grants_every_call_the_drainer_makes",
        );
        return;
    };
    apply_shipped_rbac(&env.cluster.client).await;
    const SA: &str = "system:serviceaccount:kube-system:nodemedic-drainer";
    let client = plane.client_impersonating_groups(
        SA,
        &[
            "system:serviceaccounts",
            "system:serviceaccounts:kube-system",
            "system:authenticated",
        ],
    );
    // Cordon, schedule, drain (evict, wait), a node waiting for the budget whose Event count grows,
    // and the Lease: every kind of call.
    let bad = env.node("rbac-bad", "True", 3000, json!({})).await;
    let waiting = env.node("rbac-waiting", "True", 1000, json!({})).await;
    env.pod("default", "rbac-web", &bad, json!({})).await;
    let mut cfg = env.config(Duration::from_secs(1));
    cfg.max_cordoned = Budget::Count(1);
    cfg.event_refresh = Duration::from_secs(1);
    let mut opts_cfg = cfg;
    opts_cfg.owner = format!("nodemedic-drainer-test-{}", env.id);
    let running = run::start(
        Options {
            config: opts_cfg,
            listen: "127.0.0.1:0".parse().unwrap(),
            lease: LeaseConfig {
                namespace: "kube-system".into(),
                name: format!("nodemedic-drainer-test-{}", env.id),
                identity: "rbac".into(),
                duration: Duration::from_secs(2),
                renew_deadline: Duration::from_millis(1500),
                retry_period: Duration::from_millis(200),
            },
            tick: Duration::from_millis(200),
            guard: None,
        },
        client,
    )
    .await
    .unwrap();
    env.wait_drained(&bad).await;
    eventually("the waiting node's Event count grew", WAIT, || async {
        env.drainer_events(&waiting)
            .await
            .into_iter()
            .find(|e| e.reason.as_deref() == Some("WaitingForBudget") && e.count >= Some(2))
    })
    .await;
    let forbidden: Vec<String> = plane
        .audit()
        .iter()
        .filter(|e| e.user == SA && e.code == 403)
        .map(|e| format!("{} {}/{}", e.verb, e.resource, e.subresource))
        .collect();
    assert!(
        forbidden.is_empty(),
        "calls the shipped RBAC refused: {forbidden:?}"
    );
    running.shutdown().await;
    env.cleanup().await;
}
