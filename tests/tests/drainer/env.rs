//! The scenarios' environment: a drainer confined by a label selector to the nodes it made, its
//! nodes, pods (with real owners and a kubelet-like status), PDBs, and what it wrote.

use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use k8s_openapi::api::core::v1::{Event, Node, Pod};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::Api;
use kube::api::{Patch, PatchParams, PostParams};
use nodemedic_common::keys;
use nodemedic_drainer::config::select::Selector;
use nodemedic_drainer::config::{Budget, Config};
use nodemedic_drainer::leader::LeaseConfig;
use nodemedic_drainer::run::{self, Options, Running};
use nodemedic_tests::cluster::{Cluster, eventually};
use serde_json::{Value, json};

/// The bound of every wait for something the drainer does: generous, so a busy machine (CI runs
/// the suite beside other work) is not a failure; a passing wait returns as soon as it sees it.
pub const WAIT: Duration = Duration::from_secs(60);
pub const LABEL: &str = "nodemedic.test/run";
static RUN: AtomicU32 = AtomicU32::new(0);

pub struct Env {
    pub cluster: Cluster,
    pub id: String,
    namespaces: Vec<&'static str>,
}

pub fn ago(secs: i64) -> String {
    (k8s_openapi::jiff::Timestamp::now() - Duration::from_secs(secs as u64))
        .strftime("%Y-%m-%dT%H:%M:%SZ")
        .to_string()
}

pub fn merge(a: &mut Value, b: &Value) {
    match (a, b) {
        (Value::Object(a), Value::Object(b)) => b
            .iter()
            .for_each(|(k, v)| merge(a.entry(k.clone()).or_insert(Value::Null), v)),
        (a, b) => *a = b.clone(),
    }
}

impl Env {
    pub async fn new() -> Env {
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

    /// One per supported release built here, newest first: a scenario that proves a safety or
    /// security claim runs on each (`Cluster::each_release`).
    pub async fn each_release() -> Vec<Env> {
        Cluster::each_release()
            .await
            .into_iter()
            .map(Env::on)
            .collect()
    }

    /// On a cluster of the scenario's own (a private control plane it restarts, or the test API
    /// server for injected faults).
    pub fn on(cluster: Cluster) -> Env {
        let id = cluster.id_label();
        Env {
            cluster,
            id,
            namespaces: vec!["default", "kube-system"],
        }
    }

    pub fn name(&self, hint: &str) -> String {
        self.cluster.name(hint)
    }

    /// The scenario's drainer; the fleet safety gates are off (a scenario's few nodes would trip the
    /// breaker): the safety scenarios turn them on.
    pub fn config(&self, buffer: Duration) -> Config {
        Config {
            safety: nodemedic_drainer::config::safety::Safety::off(),
            selector: Selector::labels(&format!("{LABEL}={}", self.id)).unwrap(),
            conditions: vec!["KernelDeadlock=True,10m".parse().unwrap()],
            drain_buffer: buffer,
            max_cordoned: Budget::Count(10),
            max_grace_period: Duration::from_secs(30),
            eviction_headroom: Duration::from_secs(30),
            ..Default::default()
        }
    }

    pub async fn start(&self, cfg: Config, identity: &str) -> Running {
        self.start_with_lease(
            cfg,
            identity,
            &format!("nodemedic-drainer-test-{}", self.id),
        )
        .await
    }

    pub async fn start_with_lease(&self, cfg: Config, identity: &str, lease: &str) -> Running {
        self.start_opts(cfg, identity, lease, None).await
    }

    /// A drainer as `drainer run` starts it: its settings built from `args` (a config file and
    /// flags), and edits to that file applied in place.
    pub async fn start_reloading(
        &self,
        args: nodemedic_drainer::config::flags::PolicyArgs,
    ) -> Running {
        let cfg = nodemedic_drainer::config::build::build(&args).unwrap();
        let lease = format!("nodemedic-drainer-test-{}", self.id);
        self.start_opts(cfg, "a", &lease, Some(args)).await
    }

    /// [`Env::start_reloading`] started with `cfg`, as built from the file before it changed.
    pub async fn start_reloading_from(
        &self,
        cfg: Config,
        args: nodemedic_drainer::config::flags::PolicyArgs,
    ) -> Running {
        let lease = format!("nodemedic-drainer-test-{}", self.id);
        self.start_opts(cfg, "a", &lease, Some(args)).await
    }

    /// A drainer as `drainer run` starts it, publishing its settings (`args` and the file's
    /// `text`) while it leads, refusing to start looser than the ones last published when `refuse`.
    pub async fn try_start_published(
        &self,
        args: nodemedic_drainer::config::flags::PolicyArgs,
        text: Option<String>,
        refuse: bool,
    ) -> Result<Running, nodemedic_drainer::error::Error> {
        let lease = format!("nodemedic-drainer-test-{}", self.id);
        let mut opts = self.options(
            nodemedic_drainer::config::build::build(&args).unwrap(),
            "a",
            &lease,
            Some(args.clone()),
        );
        opts.settings = Some(nodemedic_drainer::config::published::Published::new(
            &args, text,
        ));
        opts.refuse_looser_start = refuse;
        let run = self.cluster.id_label();
        nodemedic_tests::drainer_objects(&self.cluster.client, "kube-system", &lease, Some(&run))
            .await;
        run::start(opts, self.cluster.client_for(&lease)).await
    }

    /// A drainer sealing its records with the key in the file `key`, trusting also `previous`'s
    /// (a rotation), as the shipped manifests mount them.
    pub async fn start_keyed(
        &self,
        cfg: Config,
        key: &std::path::Path,
        previous: Option<&std::path::Path>,
    ) -> Running {
        let lease = format!("nodemedic-drainer-test-{}", self.id);
        let mut opts = self.options(cfg, "a", &lease, None);
        opts.record_key_file = Some(key.to_path_buf());
        opts.record_key_previous_file = previous.map(|p| p.to_path_buf());
        let run = self.cluster.id_label();
        nodemedic_tests::drainer_objects(&self.cluster.client, "kube-system", &lease, Some(&run))
            .await;
        run::start(opts, self.cluster.client_for(&lease))
            .await
            .unwrap()
    }

    async fn start_opts(
        &self,
        cfg: Config,
        identity: &str,
        lease: &str,
        reload: Option<nodemedic_drainer::config::flags::PolicyArgs>,
    ) -> Running {
        let opts = self.options(cfg, identity, lease, reload);
        let run = self.cluster.id_label();
        nodemedic_tests::drainer_objects(&self.cluster.client, "kube-system", lease, Some(&run))
            .await;
        run::start(opts, self.cluster.client_for(lease))
            .await
            .unwrap()
    }

    fn options(
        &self,
        cfg: Config,
        identity: &str,
        lease: &str,
        reload: Option<nodemedic_drainer::config::flags::PolicyArgs>,
    ) -> Options {
        Options {
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
            reload,
            reboot_signing_key: None,
            record_key_file: None,
            record_key_previous_file: None,
            refuse_looser_start: false,
            settings: None,
        }
    }

    /// A selected node with Ready=True and KernelDeadlock=`status` since `since_secs` ago.
    pub async fn node(&self, hint: &str, status: &str, since_secs: i64, labels: Value) -> String {
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

    pub async fn set_condition(&self, node: &str, type_: &str, status: &str, since_secs: i64) {
        let body = json!({"status": {"conditions": [{"type": type_, "status": status, "reason": "Test", "message": "m",
            "lastHeartbeatTime": ago(0), "lastTransitionTime": ago(since_secs)}]}});
        Api::<Node>::all(self.cluster.client.clone())
            .patch_status(node, &PatchParams::default(), &Patch::Strategic(body))
            .await
            .unwrap();
    }

    /// A Running, Ready pod on `node` owned by a real (empty) ReplicaSet; `extra` is merged in (an
    /// `ownerReferences` there replaces the ReplicaSet).
    pub async fn pod(&self, ns: &str, hint: &str, node: &str, extra: Value) -> String {
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
    pub async fn blocking_pdb(&self, app: &str) -> String {
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
    pub async fn free_pdb(&self, name: &str) {
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
    pub async fn pdb_status(&self, name: &str) -> (i32, i32) {
        let api: Api<PodDisruptionBudget> = Api::namespaced(self.cluster.client.clone(), "default");
        let st = api.get(name).await.unwrap().status.unwrap_or_default();
        (st.disruptions_allowed, st.current_healthy)
    }

    /// Eviction requests the API server answered with `code` for `pod` (any pod when empty).
    pub fn evictions(&self, pod: &str, code: Option<u16>) -> usize {
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

    pub async fn get_node(&self, name: &str) -> Value {
        serde_json::to_value(
            Api::<Node>::all(self.cluster.client.clone())
                .get(name)
                .await
                .unwrap(),
        )
        .unwrap()
    }

    pub async fn cordoned(&self, name: &str) -> bool {
        self.get_node(name).await["spec"]["unschedulable"] == json!(true)
    }

    pub async fn pod_exists(&self, ns: &str, name: &str) -> bool {
        Api::<Pod>::namespaced(self.cluster.client.clone(), ns)
            .get_opt(name)
            .await
            .unwrap()
            .is_some()
    }

    /// Reasons of the drainer's Events about the node (a real cluster's controllers write their own).
    pub async fn event_reasons(&self, node: &str) -> Vec<String> {
        self.drainer_events(node)
            .await
            .into_iter()
            .filter_map(|e| e.reason)
            .collect()
    }

    pub async fn drainer_events(&self, node: &str) -> Vec<Event> {
        self.cluster
            .node_events_from(node, &["nodemedic-drainer"])
            .await
    }

    pub async fn drain_scheduled(&self, node: &str) -> Option<String> {
        let n = self.get_node(node).await;
        n["status"]["conditions"]
            .as_array()?
            .iter()
            .find(|c| c["type"] == keys::DRAIN_SCHEDULED_CONDITION)
            .map(|c| c["message"].as_str().unwrap_or("").to_string())
    }

    pub async fn record_phase(&self, node: &str) -> Option<String> {
        let n = self.get_node(node).await;
        let raw = n["metadata"]["annotations"][keys::DRAIN_RECORD_ANNOTATION]
            .as_str()?
            .to_string();
        serde_json::from_str::<Value>(&raw).ok()?["phase"]
            .as_str()
            .map(String::from)
    }

    /// Until the drain is recorded as completed everywhere: DrainScheduled says so and the
    /// DrainSucceeded Event is there (written in that order after the record).
    pub async fn wait_drained(&self, node: &str) {
        eventually(&format!("{node} drain completed"), WAIT, || async {
            self.drain_scheduled(node)
                .await
                .filter(|m| m.contains(" | Completed: "))
        })
        .await;
        eventually(&format!("{node}: a DrainSucceeded Event"), WAIT, || async {
            self.event_reasons(node)
                .await
                .contains(&"DrainSucceeded".to_string())
                .then_some(())
        })
        .await;
    }

    pub async fn cleanup(self) {
        self.cluster.cleanup(&self.namespaces).await;
    }

    /// Wait until the scenario's drainer has decided every node change made before this call, so
    /// that what it has *not* done can be asserted without waiting a fixed time: a barrier node
    /// (selected, `labels` merged in, `condition` True for an hour) is made after those changes;
    /// node changes reach the drainer in order through one watch and a round decides every node
    /// that changed, so once it has written an Event about the barrier (a cordon, a dry run's
    /// CordonStarting, a WaitingForBudget) it has decided everything before it. The barrier goes
    /// again (and with it, its cordon).
    pub async fn barrier(&self, condition: &str, labels: Value) {
        static N: AtomicU32 = AtomicU32::new(0);
        let hint = format!("barrier-{}", N.fetch_add(1, Ordering::Relaxed));
        let name = self.node(&hint, "False", 3600, labels).await;
        self.set_condition(&name, condition, "True", 3600).await;
        eventually(
            &format!("the drainer decided the barrier {name}"),
            WAIT,
            || async { (!self.event_reasons(&name).await.is_empty()).then_some(()) },
        )
        .await;
        self.cluster.delete_node(&name).await;
    }

    /// Writes the scenario's drainer made to the Node `name` (its status included).
    pub fn drainer_writes_to(&self, name: &str) -> usize {
        let lease = format!("nodemedic-drainer-test-{}", self.id);
        ["create", "patch", "update", "delete"]
            .iter()
            .flat_map(|v| [(v, ""), (v, "status")])
            .map(|(v, sub)| {
                self.cluster
                    .requests_named_from(&lease, v, "nodes", sub, name)
            })
            .sum()
    }
}
