//! Stale pod readiness after a node flap, found by the drainer (it holds every node and pod): the real
//! controller against the real control plane when KUBEBUILDER_ASSETS is set (else the test API
//! server). Stale pods get a PodReadinessStale Event (mirror pods too), healthy and gated pods do not;
//! with eviction on, stale pods are evicted, a PodDisruptionBudget's refusal is retried, exempt pods
//! stay. The Kosmos flap scenario (`kosmos.rs`) shows the same report after a real node lifecycle
//! controller marked pods NotReady.

use std::time::Duration;

use k8s_openapi::api::core::v1::{Event, Node, Pod};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::Api;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use nodemedic_drainer::config::Config;
use nodemedic_drainer::config::select::Selector;
use nodemedic_drainer::leader::LeaseConfig;
use nodemedic_drainer::run::{self, Options, Running};
use nodemedic_tests::cluster::{Cluster, eventually};
use serde_json::{Value, json};

/// Generous: a busy machine is not a failure; a passing wait returns as soon as it sees it.
const WAIT: Duration = Duration::from_secs(60);

fn ago(secs: u64) -> String {
    (k8s_openapi::jiff::Timestamp::now() - Duration::from_secs(secs))
        .strftime("%Y-%m-%dT%H:%M:%SZ")
        .to_string()
}

struct Env {
    cluster: Cluster,
    node: String,
    ns: String,
}

impl Env {
    /// A node Ready since `ready_for` seconds, and the scenario's namespace.
    async fn new(hint: &str, ready_for: u64) -> Env {
        let cluster = Cluster::new().await;
        let node = cluster.name(hint);
        let ns = cluster.name("app");
        cluster.ensure_namespace(&ns, json!({})).await;
        let n: Node = serde_json::from_value(json!({"metadata": {"name": node,
            "labels": {"nodemedic.test/run": cluster.id_label()}}}))
        .unwrap();
        Api::<Node>::all(cluster.client.clone())
            .create(&PostParams::default(), &n)
            .await
            .unwrap();
        cluster.kubelet.adopt(&node);
        let body = json!({"status": {"conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "m",
            "lastHeartbeatTime": ago(0), "lastTransitionTime": ago(ready_for)}]}});
        Api::<Node>::all(cluster.client.clone())
            .patch_status(&node, &PatchParams::default(), &Patch::Strategic(body))
            .await
            .unwrap();
        Env { cluster, node, ns }
    }

    async fn pod(&self, name: &str, ready: &str, containers_ready: &str, extra: Value) {
        let mut v = json!({"metadata": {"name": name, "namespace": self.ns, "labels": {"app": name}},
            "spec": {"nodeName": self.node, "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.9"}]}});
        for (k, x) in extra.as_object().unwrap() {
            for (k2, y) in x.as_object().unwrap() {
                v[k.as_str()][k2.as_str()] = y.clone();
            }
        }
        let p: Pod = serde_json::from_value(v).unwrap();
        Api::<Pod>::namespaced(self.cluster.client.clone(), &self.ns)
            .create(&PostParams::default(), &p)
            .await
            .unwrap();
        // the kubelet's (stale) status
        self.cluster
            .set_pod_status(
                &self.ns,
                name,
                json!({"phase": "Running", "conditions": [{"type": "Ready", "status": ready}, {"type": "ContainersReady", "status": containers_ready}]}),
            )
            .await;
    }

    /// A critical pod: by priority class (the Priority admission fills in spec.priority and
    /// rejects a bare one, on the real API server and on the test server alike).
    fn critical(&self) -> Value {
        json!({"spec": {"priorityClassName": "system-node-critical"}})
    }

    /// The drainer, selecting only this scenario's node, reporting stale pods after 60 s of Ready.
    async fn start(&self, evict: bool) -> Running {
        let opts = Options {
            config: Config {
                selector: Selector::labels(&format!(
                    "nodemedic.test/run={}",
                    self.cluster.id_label()
                ))
                .unwrap(),
                conditions: vec!["KernelDeadlock=True,10m".parse().unwrap()],
                stale_readiness: Some(Duration::from_secs(60)),
                evict_stale_pods: evict,
                ..Default::default()
            },
            listen: "127.0.0.1:0".parse().unwrap(),
            lease: LeaseConfig {
                namespace: "kube-system".into(),
                name: self.cluster.name("stale"),
                identity: "d".into(),
                duration: Duration::from_secs(2),
                renew_deadline: Duration::from_millis(1500),
                retry_period: Duration::from_millis(200),
            },
            tick: Duration::from_millis(200),
            reload: None,
            reboot_signing_key: None,
            record_key_file: None,
            record_key_previous_file: None,
            refuse_looser_start: false,
            settings: None,
            guard: None,
        };
        let run = self.cluster.id_label();
        let client = &self.cluster.client;
        nodemedic_tests::drainer_objects(client, "kube-system", &opts.lease.name, Some(&run)).await;
        run::start(opts, self.cluster.client_for("drainer"))
            .await
            .unwrap()
    }

    async fn events(&self) -> Vec<Event> {
        Api::<Event>::namespaced(self.cluster.client.clone(), &self.ns)
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
    }

    async fn stale_events(&self) -> Vec<String> {
        let mut v: Vec<String> = self
            .events()
            .await
            .into_iter()
            .filter(|e| e.reason.as_deref() == Some("PodReadinessStale"))
            .filter_map(|e| e.involved_object.name)
            .collect();
        v.sort();
        v
    }

    async fn pod_exists(&self, name: &str) -> bool {
        Api::<Pod>::namespaced(self.cluster.client.clone(), &self.ns)
            .get_opt(name)
            .await
            .unwrap()
            .is_some()
    }

    fn evictions(&self, pod: &str, code: Option<u16>) -> usize {
        if let Some(plane) = self.cluster.plane {
            return plane
                .audit()
                .iter()
                .filter(|e| {
                    e.verb == "create"
                        && e.subresource == "eviction"
                        && e.namespace == self.ns
                        && e.name == pod
                        && code.is_none_or(|c| e.code == c)
                })
                .count();
        }
        self.cluster
            .fake
            .as_ref()
            .unwrap()
            .log()
            .iter()
            .filter(|l| {
                l.path.ends_with(&format!("/pods/{pod}/eviction"))
                    && code.is_none_or(|c| l.status == c)
            })
            .count()
    }

    async fn finish(self, running: Running) {
        running.shutdown().await;
        if self.cluster.real() {
            let pods: Api<Pod> = Api::namespaced(self.cluster.client.clone(), &self.ns);
            let _ = pods
                .delete_collection(
                    &DeleteParams::default().grace_period(0),
                    &ListParams::default(),
                )
                .await;
        }
        self.cluster.cleanup(&[]).await;
    }
}

#[tokio::test]
async fn stale_pods_are_reported_and_others_are_not() {
    let env = Env::new("stale", 600).await;
    env.pod("stale", "False", "True", json!({})).await;
    env.pod("healthy", "True", "True", json!({})).await;
    env.pod("starting", "False", "False", json!({})).await;
    env.pod(
        "gated",
        "False",
        "True",
        json!({"spec": {"readinessGates": [{"conditionType": "example.com/lb"}]}}),
    )
    .await;
    env.pod(
        "static",
        "False",
        "True",
        json!({"metadata": {"annotations": {"kubernetes.io/config.mirror": "x"}}}),
    )
    .await;
    let running = env.start(false).await;
    eventually("two PodReadinessStale events", WAIT, || async {
        (env.stale_events().await.len() == 2).then_some(())
    })
    .await;
    // A stale pod made now is reported in a later round: by then a second report of the first
    // two would have been written.
    env.pod("later", "False", "True", json!({})).await;
    eventually("the later stale pod reported", WAIT, || async {
        env.stale_events()
            .await
            .contains(&"later".to_string())
            .then_some(())
    })
    .await;
    assert_eq!(
        env.stale_events().await,
        vec!["later", "stale", "static"],
        "one Event per stale pod, once"
    );
    for e in env.events().await {
        assert_eq!(e.count.unwrap_or(1), 1, "reported once: {e:?}");
    }
    let ev = env
        .events()
        .await
        .into_iter()
        .find(|e| e.involved_object.name.as_deref() == Some("stale"))
        .unwrap();
    assert_eq!(ev.involved_object.kind.as_deref(), Some("Pod"));
    assert_eq!(ev.type_.as_deref(), Some("Warning"));
    assert!(
        ev.message.as_deref().unwrap().contains("not evicted"),
        "{ev:?}"
    );
    assert_eq!(
        env.evictions("stale", None),
        0,
        "eviction is off by default"
    );
    env.finish(running).await;
}

#[tokio::test]
async fn nothing_is_stale_until_the_node_has_been_ready_for_the_threshold() {
    let env = Env::new("young", 10).await;
    env.pod("stale", "False", "True", json!({})).await;
    let running = env.start(true).await;
    // The first round after the caches synced looked at every pod (the pod was there before the
    // drainer started) and decided the node.
    let metrics = format!("http://{}/metrics", running.addr);
    eventually("the drainer's first round", WAIT, || async {
        nodemedic_tests::http_get(&metrics)
            .await
            .lines()
            .find_map(|l| l.strip_prefix("nodemedic_drainer_node_decisions_total "))
            .and_then(|v| v.trim().parse::<u64>().ok())
            .filter(|n| *n >= 1)
    })
    .await;
    assert!(env.stale_events().await.is_empty());
    assert!(env.pod_exists("stale").await);
    env.finish(running).await;
}

#[tokio::test]
async fn with_eviction_on_stale_pods_are_evicted_honouring_pdbs_and_exemptions() {
    let env = Env::new("evict", 600).await;
    env.pod("stale", "False", "True", json!({})).await;
    env.pod("guarded", "False", "True", json!({})).await;
    env.pod(
        "static",
        "False",
        "True",
        json!({"metadata": {"annotations": {"kubernetes.io/config.mirror": "x"}}}),
    )
    .await;
    env.pod("critical", "False", "True", env.critical()).await;
    let pdbs: Api<PodDisruptionBudget> = Api::namespaced(env.cluster.client.clone(), &env.ns);
    let pdb = json!({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "guarded", "namespace": env.ns},
        "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "guarded"}}}});
    pdbs.create(
        &PostParams::default(),
        &serde_json::from_value(pdb).unwrap(),
    )
    .await
    .unwrap();
    if let Some(fake) = &env.cluster.fake {
        // What the disruption controller computes for one unhealthy pod that must stay.
        let mut stored = fake
            .object(
                "policy/v1",
                "poddisruptionbudgets",
                Some(&env.ns),
                "guarded",
            )
            .unwrap();
        stored["status"] = json!({"disruptionsAllowed": 0});
        fake.put_object("policy/v1", "poddisruptionbudgets", Some(&env.ns), stored);
    }
    let running = env.start(true).await;
    eventually("the stale pod evicted", WAIT, || async {
        (!env.pod_exists("stale").await).then_some(())
    })
    .await;
    eventually(
        "the PDB refused the guarded pod's eviction",
        WAIT,
        || async { (env.evictions("guarded", Some(429)) > 0).then_some(()) },
    )
    .await;
    assert!(env.pod_exists("guarded").await);
    // Free it: without the PDB the eviction goes through (a stale pod is not Ready, so on a real
    // cluster minAvailable 0 would still leave 0 disruptions allowed).
    pdbs.delete("guarded", &DeleteParams::default())
        .await
        .unwrap();
    eventually(
        "retried and evicted once the budget allows",
        WAIT,
        || async { (!env.pod_exists("guarded").await).then_some(()) },
    )
    .await;
    for p in ["static", "critical"] {
        assert!(env.pod_exists(p).await, "{p} is never evicted");
        assert_eq!(env.evictions(p, None), 0, "{p}: no eviction attempted");
    }
    env.finish(running).await;
}
