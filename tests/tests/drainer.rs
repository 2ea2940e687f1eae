//! Drainer scenarios: the real controller (`run::start`) with a real kube::Client over HTTP against the
//! test API server, or a real cluster with NODEMEDIC_E2E=1 (names get a unique suffix, the drainer is
//! restricted by a label selector to the nodes the test made, and everything is deleted afterwards).

use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use k8s_openapi::api::core::v1::{Event, Node, Pod};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::Api;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use nodemedic_common::keys;
use nodemedic_drainer::config::{Budget, Config};
use nodemedic_drainer::leader::LeaseConfig;
use nodemedic_drainer::run::{self, Options, Running};
use nodemedic_drainer::select::Selector;
use nodemedic_tests::cluster::{Cluster, e2e, eventually};
use serde_json::{Value, json};

const WAIT: Duration = Duration::from_secs(30);
const LABEL: &str = "nodemedic.test/run";
static RUN: AtomicU32 = AtomicU32::new(0);

struct Env {
    cluster: Cluster,
    id: String,
    nodes: std::sync::Mutex<Vec<String>>,
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
        Env {
            cluster: Cluster::new().await,
            id: format!("{}-{n}", std::process::id()),
            nodes: Default::default(),
            namespaces: vec!["default", "kube-system"],
        }
    }

    fn name(&self, hint: &str) -> String {
        if e2e() {
            format!("nm-e2e-{hint}-{}", self.id)
        } else {
            hint.to_string()
        }
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
        let opts = Options {
            config: cfg,
            listen: "127.0.0.1:0".parse().unwrap(),
            lease: LeaseConfig {
                namespace: "kube-system".into(),
                name: format!("nodemedic-drainer-test-{}", self.id),
                identity: identity.into(),
                duration: Duration::from_secs(2),
                renew_deadline: Duration::from_millis(1500),
                retry_period: Duration::from_millis(200),
            },
            tick: Duration::from_millis(200),
            guard: None,
        };
        run::start(opts, self.cluster.client.clone()).await.unwrap()
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
        self.nodes.lock().unwrap().push(name.clone());
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

    async fn pod(&self, ns: &str, hint: &str, node: &str, extra: Value) -> String {
        let name = self.name(hint);
        let mut v = json!({
            "metadata": {"name": name, "namespace": ns, "labels": {"app": name, LABEL: self.id},
                "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs", "uid": "00000000-0000-4000-8000-000000000001", "controller": true}]},
            "spec": {"nodeName": node, "terminationGracePeriodSeconds": 0, "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.9"}]},
        });
        merge(&mut v, &extra);
        let p: Pod = serde_json::from_value(v).unwrap();
        Api::<Pod>::namespaced(self.cluster.client.clone(), ns)
            .create(&PostParams::default(), &p)
            .await
            .unwrap();
        if let Some(fake) = &self.cluster.fake {
            // No kubelet: mark it Running as the kubelet would.
            let mut stored = fake.object("v1", "pods", Some(ns), &name).unwrap();
            stored["status"] = json!({"phase": "Running"});
            fake.put_object("v1", "pods", Some(ns), stored);
        }
        name
    }

    /// A PodDisruptionBudget that allows no disruption of `app` (free it with [`Env::delete_pdb`]).
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

    async fn delete_pdb(&self, name: &str) {
        let api: Api<PodDisruptionBudget> = Api::namespaced(self.cluster.client.clone(), "default");
        api.delete(name, &DeleteParams::default()).await.unwrap();
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

    async fn event_reasons(&self, node: &str) -> Vec<String> {
        let api: Api<Event> = Api::namespaced(self.cluster.client.clone(), "default");
        let list = api
            .list(&ListParams::default().fields(&format!("involvedObject.name={node}")))
            .await
            .unwrap();
        list.items.into_iter().filter_map(|e| e.reason).collect()
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
        if self.cluster.fake.is_some() {
            return;
        }
        for n in self.nodes.lock().unwrap().clone() {
            self.cluster.delete_node(&n).await;
        }
        let pdbs: Api<PodDisruptionBudget> =
            Api::namespaced(self.cluster.client.clone(), "default");
        let _ = pdbs
            .delete_collection(
                &DeleteParams::default(),
                &ListParams::default().labels(&format!("{LABEL}={}", self.id)),
            )
            .await;
        for ns in &self.namespaces {
            let pods: Api<Pod> = Api::namespaced(self.cluster.client.clone(), ns);
            // Only this run's pods: they carry the run label.
            let _ = pods
                .delete_collection(
                    &DeleteParams::default(),
                    &ListParams::default().labels(&format!("{LABEL}={}", self.id)),
                )
                .await;
        }
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
    let ds = env.pod("kube-system", "ds", &bad, json!({"metadata": {"ownerReferences": [{"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "d", "uid": "00000000-0000-4000-8000-000000000002", "controller": true}]}})).await;
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
    if let Some(fake) = &env.cluster.fake {
        let evictions: Vec<String> = fake
            .log()
            .iter()
            .filter(|l| l.path.ends_with("/eviction"))
            .map(|l| l.path.clone())
            .collect();
        assert_eq!(
            evictions,
            vec![format!("/api/v1/namespaces/default/pods/{web}/eviction")],
            "exactly one eviction"
        );
    }
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
    let writes_before = env
        .cluster
        .fake
        .as_ref()
        .map(|f| f.count("PATCH", "/api/v1/nodes/"));
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
    if let (Some(fake), Some(before)) = (&env.cluster.fake, writes_before) {
        assert_eq!(
            fake.count("PATCH", "/api/v1/nodes/"),
            before,
            "the drainer wrote no node"
        );
    }
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
    if let Some(fake) = &env.cluster.fake {
        eventually("an eviction refused with 429", WAIT, || async {
            fake.log()
                .iter()
                .any(|l| l.path.ends_with(&format!("/pods/{api}/eviction")) && l.status == 429)
                .then_some(())
        })
        .await;
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(
        env.pod_exists("default", &api).await,
        "protected while the budget allows nothing"
    );
    env.delete_pdb(&pdb).await;
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
    let reasons = env.event_reasons(&names[2]).await;
    assert!(
        reasons.contains(&"WaitingForBudget".to_string()),
        "a waiting node says so: {reasons:?}"
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
    env.delete_pdb(&pdb).await;
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
