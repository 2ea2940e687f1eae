//! What a scenario talks to, in this order of preference:
//! 1. the real control plane of this test binary ([`crate::envtest::shared`]) when `KUBEBUILDER_ASSETS`
//!    is set (CI sets it);
//! 2. the cluster `KUBECONFIG` points at, with `NODEMEDIC_E2E=1`;
//! 3. otherwise the test API server ([`crate::server`]), which also serves the scenarios that need
//!    injected faults.
//!
//! On a real cluster names get a unique suffix, Nodes a stand-in kubelet ([`Kubelet`]: node Lease
//! heartbeats, finishing pod deletions), and [`Cluster::cleanup`] deletes what the scenario made.

use std::collections::BTreeSet;
use std::future::Future;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Event, Node, Pod};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use serde_json::json;

use crate::envtest::{self, ControlPlane};
use crate::server::TestApiServer;

/// True when scenarios should run against the cluster in KUBECONFIG.
pub fn e2e() -> bool {
    std::env::var("NODEMEDIC_E2E").is_ok_and(|v| v == "1" || v == "true")
}

static RUN: AtomicU32 = AtomicU32::new(0);

pub struct Cluster {
    pub client: kube::Client,
    /// The test server, when not running against a real cluster.
    pub fake: Option<TestApiServer>,
    /// The real control plane, when `KUBEBUILDER_ASSETS` is set.
    pub plane: Option<&'static ControlPlane>,
    /// Unique per scenario on a real cluster (`<pid>-<n>`), empty on the test server.
    pub id: String,
    pub kubelet: Kubelet,
}

/// The Events a scenario left on its test API server must read as operators' words: one with a Rust
/// `Debug` dump in its reason or message fails the scenario (`debug_dump`).
impl Drop for Cluster {
    fn drop(&mut self) {
        if std::thread::panicking() {
            return;
        }
        // What the code under test logged in this process (any scenario of this binary).
        let logged = crate::debug_dump::take_found();
        assert!(
            logged.is_empty(),
            "logged at INFO or above with Rust Debug dumps:\n{}",
            logged.join("\n")
        );
        let Some(fake) = &self.fake else { return };
        let mut dumps = Vec::new();
        for api in ["v1", "events.k8s.io/v1"] {
            for ev in fake.objects(api, "events") {
                for field in ["reason", "message", "note"] {
                    let text = ev[field].as_str().unwrap_or("");
                    if let Some(d) = crate::debug_dump::find(text) {
                        dumps.push(format!("`{d}` in the Event {field}: {text}"));
                    }
                }
            }
        }
        assert!(
            dumps.is_empty(),
            "Events with Rust Debug dumps:\n{}",
            dumps.join("\n")
        );
    }
}

impl Cluster {
    pub async fn new() -> Cluster {
        crate::debug_dump::watch_logs();
        let n = RUN.fetch_add(1, Ordering::Relaxed);
        let id = format!("{}-{n}", std::process::id());
        if let Some(plane) = envtest::shared() {
            let client = plane.client();
            let kubelet = Kubelet::start(client.clone());
            return Cluster {
                client,
                fake: None,
                plane: Some(plane),
                id,
                kubelet,
            };
        }
        if e2e() {
            // The binaries' own client (no kube retry layer): a PDB's 429 must reach the scenario.
            let client = nodemedic_common::client::infer("nodemedic-tests")
                .await
                .expect("NODEMEDIC_E2E=1 needs a reachable cluster in KUBECONFIG");
            let kubelet = Kubelet::start(client.clone());
            return Cluster {
                client,
                fake: None,
                plane: None,
                id,
                kubelet,
            };
        }
        static ONCE: std::sync::Once = std::sync::Once::new();
        ONCE.call_once(|| {
            envtest::say(&format!(
                "note: scenarios run against the test API server, not a real control plane: set {} \
                 or run build/kubernetes.sh to run them on a real kube-apiserver",
                envtest::ASSETS_ENV
            ))
        });
        Cluster::fake().await
    }

    /// One cluster per supported release built here (newest first), for the scenarios that prove a
    /// safety or security claim: each runs its attack on every one. The test API server alone where no
    /// real control plane is built (outside CI).
    pub async fn each_release() -> Vec<Cluster> {
        let planes = envtest::shared_planes();
        if planes.is_empty() {
            return vec![Cluster::new().await];
        }
        crate::debug_dump::watch_logs();
        planes.into_iter().map(Cluster::on).collect()
    }

    /// The release this cluster runs (`v1.37.2`), or `test API server`.
    pub fn release(&self) -> &str {
        match self.plane {
            Some(p) => &p.release,
            None => "test API server",
        }
    }

    /// On a control plane of the scenario's own (e.g. one whose controller manager it restarts).
    pub fn on(plane: &'static ControlPlane) -> Cluster {
        let n = RUN.fetch_add(1, Ordering::Relaxed);
        let client = plane.client();
        Cluster {
            kubelet: Kubelet::start(client.clone()),
            client,
            fake: None,
            plane: Some(plane),
            id: format!("{}-{n}", std::process::id()),
        }
    }

    /// Always the test API server: for scenarios that inject faults a real one cannot produce.
    pub async fn fake() -> Cluster {
        Cluster::fake_on(TestApiServer::start().await)
    }

    /// On `server`, a test API server the scenario set up.
    pub fn fake_on(server: TestApiServer) -> Cluster {
        crate::debug_dump::watch_logs();
        Cluster {
            client: server.client(),
            kubelet: Kubelet::idle(),
            fake: Some(server),
            plane: None,
            id: String::new(),
        }
    }

    /// Write a kubeconfig for this cluster (for a binary run as its own process): the real control
    /// plane's, or one naming the test API server.
    pub fn write_kubeconfig(&self, path: &std::path::Path) {
        match (&self.plane, &self.fake) {
            (Some(plane), _) => plane.write_kubeconfig(path),
            (None, Some(server)) => server.write_kubeconfig(path),
            (None, None) => panic!("no kubeconfig to write for a cluster from KUBECONFIG"),
        }
    }

    /// Create namespace `name` unless it exists (the test server needs none).
    pub async fn ensure_namespace(&self, name: &str, labels: serde_json::Value) {
        if !self.real() {
            return;
        }
        let api: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(self.client.clone());
        let ns =
            serde_json::from_value(json!({"metadata": {"name": name, "labels": labels}})).unwrap();
        match api.create(&PostParams::default(), &ns).await {
            Ok(_) => {}
            Err(kube::Error::Api(e)) if e.code == 409 => {}
            Err(e) => panic!("create namespace {name}: {e}"),
        }
    }

    /// Set a pod's status as its kubelet would (there is no kubelet): `status` is merged in.
    pub async fn set_pod_status(&self, ns: &str, name: &str, status: serde_json::Value) {
        if let Some(fake) = &self.fake {
            let mut stored = fake
                .object("v1", "pods", Some(ns), name)
                .expect("pod exists");
            stored["status"] = status;
            fake.put_object("v1", "pods", Some(ns), stored);
            return;
        }
        Api::<Pod>::namespaced(self.client.clone(), ns)
            .patch_status(
                name,
                &PatchParams::default(),
                &Patch::Merge(json!({ "status": status })),
            )
            .await
            .expect("set pod status");
    }

    /// A ReplicaSet with no replicas to own a scenario's pods (the garbage collector deletes pods
    /// whose owner does not exist; no replicaset controller runs to manage them). Returns the
    /// ownerReferences value. On the test server, a made-up owner.
    pub async fn owner(&self, ns: &str, hint: &str) -> serde_json::Value {
        self.owner_of_kind(ns, "ReplicaSet", hint).await
    }

    /// [`Cluster::owner`] of kind `ReplicaSet`, `DaemonSet` or `Job` (inert: no controller for
    /// them runs, and the Job is suspended).
    pub async fn owner_of_kind(&self, ns: &str, kind: &str, hint: &str) -> serde_json::Value {
        let name = self.name(hint);
        let api_version = if kind == "Job" { "batch/v1" } else { "apps/v1" };
        if !self.real() {
            // No controller runs on the test API server: the owner is named, not made, with a uid
            // of its own (pods of one owner share it, pods of two owners do not).
            let hash = name.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
                (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
            });
            let uid = format!("00000000-0000-4000-8000-{:012x}", hash & 0xffff_ffff_ffff);
            return json!([{"apiVersion": api_version, "kind": kind, "name": name,
                "uid": uid, "controller": true}]);
        }
        if kind == "Job" {
            let obj = json!({"apiVersion": "batch/v1", "kind": "Job",
                "metadata": {"name": name, "namespace": ns, "labels": {"nodemedic.test/run": self.id_label()}},
                "spec": {"suspend": true, "template": {"spec": {"restartPolicy": "Never",
                    "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.9"}]}}}});
            let uid =
                create_or_get::<k8s_openapi::api::batch::v1::Job>(&self.client, ns, obj).await;
            return json!([{"apiVersion": "batch/v1", "kind": "Job", "name": name, "uid": uid, "controller": true}]);
        }
        let mut spec = json!({"selector": {"matchLabels": {"nodemedic.test/owner": name}},
            "template": {"metadata": {"labels": {"nodemedic.test/owner": name}},
                "spec": {"containers": [{"name": "c", "image": "registry.k8s.io/pause:3.9"}]}}});
        if kind == "ReplicaSet" {
            spec["replicas"] = json!(0);
        }
        let obj = json!({"apiVersion": "apps/v1", "kind": kind,
            "metadata": {"name": name, "namespace": ns, "labels": {"nodemedic.test/run": self.id_label()}},
            "spec": spec});
        let uid = match kind {
            "ReplicaSet" => {
                create_or_get::<k8s_openapi::api::apps::v1::ReplicaSet>(&self.client, ns, obj).await
            }
            "DaemonSet" => {
                create_or_get::<k8s_openapi::api::apps::v1::DaemonSet>(&self.client, ns, obj).await
            }
            other => panic!("no owner of kind {other}"),
        };
        json!([{"apiVersion": "apps/v1", "kind": kind, "name": name, "uid": uid, "controller": true}])
    }

    /// True on a real API server (names must be unique, controllers run, nothing is injected).
    pub fn real(&self) -> bool {
        self.fake.is_none()
    }

    /// `hint` on the test server; `hint-<id>` on a real cluster.
    pub fn name(&self, hint: &str) -> String {
        if self.real() {
            format!("{hint}-{}", self.id)
        } else {
            hint.to_string()
        }
    }

    /// The fake server, or `None` with a printed reason (for fault-injection scenarios). Call it
    /// before creating anything, so a skipped scenario leaves nothing behind.
    pub fn fake_or_skip(&self, scenario: &str) -> Option<&TestApiServer> {
        if self.fake.is_none() {
            envtest::say(&format!(
                "skipped {scenario} on the real control plane: it needs fault injection, which only the test API server offers"
            ));
        }
        self.fake.as_ref()
    }

    /// Create a Node with a kubelet-like Ready condition and a heartbeat; returns its name.
    pub async fn create_node(&self, hint: &str) -> String {
        self.create_node_with(hint, json!({})).await
    }

    /// [`Cluster::create_node`] with extra labels.
    pub async fn create_node_with(&self, hint: &str, labels: serde_json::Value) -> String {
        let name = self.name(hint);
        let mut l = json!({"kubernetes.io/hostname": name, "nodemedic.test/run": self.id_label()});
        if let (Some(l), Some(extra)) = (l.as_object_mut(), labels.as_object()) {
            l.extend(extra.clone());
        }
        let node: Node = serde_json::from_value(json!({
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": name, "labels": l},
        }))
        .unwrap();
        Api::<Node>::all(self.client.clone())
            .create(&PostParams::default(), &node)
            .await
            .expect("create node");
        self.kubelet.adopt(&name);
        self.set_ready(&name, "True").await;
        name
    }

    /// The label value that marks this scenario's objects (`nodemedic.test/run`).
    pub fn id_label(&self) -> String {
        if self.id.is_empty() {
            "fake".into()
        } else {
            self.id.clone()
        }
    }

    /// Post the node's Ready condition as its kubelet would (heartbeat now, transition now).
    pub async fn set_ready(&self, node: &str, status: &str) {
        let now = now_rfc3339();
        let reason = if status == "True" {
            "KubeletReady"
        } else {
            "KubeletNotReady"
        };
        let ready = json!({"status": {"conditions": [{
            "type": "Ready", "status": status, "reason": reason, "message": "kubelet is posting ready status",
            "lastHeartbeatTime": now, "lastTransitionTime": now
        }]}});
        Api::<Node>::all(self.client.clone())
            .patch_status(node, &PatchParams::default(), &Patch::Strategic(ready))
            .await
            .expect("set Ready");
    }

    pub async fn node(&self, name: &str) -> Node {
        Api::<Node>::all(self.client.clone())
            .get(name)
            .await
            .expect("get node")
    }

    /// The node's condition of `type_` as (status, reason, message).
    pub async fn condition(&self, node: &str, type_: &str) -> Option<(String, String, String)> {
        let n = self.node(node).await;
        n.status?
            .conditions?
            .into_iter()
            .find(|c| c.type_ == type_)
            .map(|c| {
                (
                    c.status,
                    c.reason.unwrap_or_default(),
                    c.message.unwrap_or_default(),
                )
            })
    }

    /// Events about the node (core/v1, namespace default), from every source.
    pub async fn node_events(&self, node: &str) -> Vec<Event> {
        let api: Api<Event> = Api::namespaced(self.client.clone(), "default");
        api.list(&ListParams::default().fields(&format!("involvedObject.name={node}")))
            .await
            .expect("list events")
            .items
    }

    /// Events about the node from one source component only (a real cluster's controllers write
    /// their own, e.g. the node lifecycle controller's `RegisteredNode`).
    pub async fn node_events_from(&self, node: &str, components: &[&str]) -> Vec<Event> {
        self.node_events(node)
            .await
            .into_iter()
            .filter(|e| {
                let c = e.source.as_ref().and_then(|s| s.component.as_deref());
                c.is_some_and(|c| components.contains(&c))
            })
            .collect()
    }

    /// A client for one component under test: on the real control plane its requests carry their own
    /// user agent `nodemedic-test-<hint>-<id>` (see [`Cluster::requests_from`]).
    pub fn client_for(&self, hint: &str) -> kube::Client {
        match self.plane {
            Some(plane) => plane.client_with_agent(&self.agent(hint)),
            None => self.client.clone(),
        }
    }

    fn agent(&self, hint: &str) -> String {
        format!("nodemedic-test-{hint}-{}", self.id)
    }

    /// [`Cluster::requests`] made by the client of [`Cluster::client_for`]`(hint)` only (on the test
    /// server, which serves one scenario, every request counts).
    pub fn requests_from(
        &self,
        hint: &str,
        verb: &str,
        resource: &str,
        subresource: &str,
    ) -> usize {
        let Some(plane) = self.plane else {
            return self.requests(verb, resource, subresource, "");
        };
        let agent = self.agent(hint);
        plane
            .audit()
            .iter()
            .filter(|e| {
                !e.dry_run
                    && e.user_agent == agent
                    && e.verb == verb
                    && e.resource == resource
                    && e.subresource == subresource
            })
            .count()
    }

    /// [`Cluster::requests_from`] on the object `name` only.
    pub fn requests_named_from(
        &self,
        hint: &str,
        verb: &str,
        resource: &str,
        subresource: &str,
        name: &str,
    ) -> usize {
        let Some(plane) = self.plane else {
            return self.requests(verb, resource, subresource, name);
        };
        let agent = self.agent(hint);
        plane
            .audit()
            .iter()
            .filter(|e| {
                !e.dry_run
                    && e.user_agent == agent
                    && e.verb == verb
                    && e.resource == resource
                    && e.subresource == subresource
                    && e.name == name
            })
            .count()
    }

    /// How many requests the API server answered for `verb` (get, create, patch, update, delete) on
    /// `resource[/subresource]` named `name` (empty: any). On the real control plane from its audit
    /// log; on the test server from its request log. Dry runs (`?dryRun=All`) store nothing and are
    /// not counted.
    pub fn requests(&self, verb: &str, resource: &str, subresource: &str, name: &str) -> usize {
        if let Some(plane) = self.plane {
            return plane
                .audit()
                .iter()
                .filter(|e| {
                    !e.dry_run
                        && e.verb == verb
                        && e.resource == resource
                        && e.subresource == subresource
                        && (name.is_empty() || e.name == name)
                })
                .count();
        }
        let Some(fake) = &self.fake else {
            panic!("requests() needs the control plane's audit log or the test server's log");
        };
        let method = match verb {
            "get" => "GET",
            "create" => "POST",
            "patch" => "PATCH",
            "update" => "PUT",
            "delete" => "DELETE",
            other => panic!("no HTTP method for verb {other}"),
        };
        fake.log()
            .iter()
            .filter(|l| {
                let path = l.path.split('?').next().unwrap_or("");
                let mut tail = format!("/{resource}");
                if !name.is_empty() {
                    tail.push('/');
                    tail.push_str(name);
                }
                let hit = if subresource.is_empty() {
                    if name.is_empty() {
                        path.ends_with(&tail) || path.contains(&format!("{tail}/"))
                    } else {
                        path.ends_with(&tail)
                    }
                } else {
                    path.contains(&tail) && path.ends_with(&format!("/{subresource}"))
                };
                l.method == method && hit && !l.path.contains("dryRun=All")
            })
            .count()
    }

    pub async fn delete_node(&self, name: &str) {
        self.kubelet.forget(name);
        let _ = Api::<Node>::all(self.client.clone())
            .delete(name, &DeleteParams::default())
            .await;
    }

    /// Delete what the scenario made on a real cluster: Nodes, and Pods / PDBs / ReplicaSets labelled
    /// with this run in `namespaces`.
    pub async fn cleanup(&self, namespaces: &[&str]) {
        if !self.real() {
            return;
        }
        let sel = ListParams::default().labels(&format!("nodemedic.test/run={}", self.id_label()));
        for ns in namespaces {
            let pods: Api<Pod> = Api::namespaced(self.client.clone(), ns);
            let _ = pods
                .delete_collection(&DeleteParams::default().grace_period(0), &sel)
                .await;
            let pdbs: Api<k8s_openapi::api::policy::v1::PodDisruptionBudget> =
                Api::namespaced(self.client.clone(), ns);
            let _ = pdbs.delete_collection(&DeleteParams::default(), &sel).await;
            let rs: Api<k8s_openapi::api::apps::v1::ReplicaSet> =
                Api::namespaced(self.client.clone(), ns);
            let _ = rs.delete_collection(&DeleteParams::default(), &sel).await;
            let ds: Api<k8s_openapi::api::apps::v1::DaemonSet> =
                Api::namespaced(self.client.clone(), ns);
            let _ = ds.delete_collection(&DeleteParams::default(), &sel).await;
            let secrets: Api<k8s_openapi::api::core::v1::Secret> =
                Api::namespaced(self.client.clone(), ns);
            let _ = secrets
                .delete_collection(&DeleteParams::default(), &sel)
                .await;
            let configmaps: Api<k8s_openapi::api::core::v1::ConfigMap> =
                Api::namespaced(self.client.clone(), ns);
            let _ = configmaps
                .delete_collection(&DeleteParams::default(), &sel)
                .await;
            let leases: Api<k8s_openapi::api::coordination::v1::Lease> =
                Api::namespaced(self.client.clone(), ns);
            let _ = leases
                .delete_collection(&DeleteParams::default(), &sel)
                .await;
        }
        for n in self.kubelet.nodes() {
            self.delete_node(&n).await;
        }
    }
}

/// Create the namespaced object (or find it); returns its uid.
async fn create_or_get<K>(client: &kube::Client, ns: &str, obj: serde_json::Value) -> String
where
    K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope>
        + Clone
        + serde::de::DeserializeOwned
        + serde::Serialize
        + std::fmt::Debug,
    K::DynamicType: Default,
{
    let api: Api<K> = Api::namespaced(client.clone(), ns);
    let k: K = serde_json::from_value(obj).expect("a valid object");
    let name = k.meta().name.clone().unwrap_or_default();
    let got = match api.create(&PostParams::default(), &k).await {
        Ok(c) => c,
        Err(kube::Error::Api(e)) if e.code == 409 => api.get(&name).await.expect("get owner"),
        Err(e) => panic!("create {name}: {e}"),
    };
    got.meta().uid.clone().unwrap_or_default()
}

/// RFC 3339 "now", seconds precision (what the API server stores).
pub fn now_rfc3339() -> String {
    k8s_openapi::jiff::Timestamp::now()
        .strftime("%Y-%m-%dT%H:%M:%SZ")
        .to_string()
}

/// A stand-in for the kubelets of a scenario's Nodes on a real cluster: renews each node's Lease in
/// `kube-node-lease` every second (so the node lifecycle controller sees it alive), and finishes the
/// deletion of their pods (a pod with a deletionTimestamp is removed with grace period 0, as the
/// kubelet does once the containers stopped). [`Kubelet::pause`] stops a node's heartbeat.
pub struct Kubelet {
    state: Arc<Mutex<KubeletState>>,
    task: Option<tokio::task::JoinHandle<()>>,
}

#[derive(Default)]
struct KubeletState {
    nodes: BTreeSet<String>,
    paused: BTreeSet<String>,
}

impl Kubelet {
    fn idle() -> Kubelet {
        Kubelet {
            state: Default::default(),
            task: None,
        }
    }

    fn start(client: kube::Client) -> Kubelet {
        let state: Arc<Mutex<KubeletState>> = Default::default();
        let s = state.clone();
        let task = tokio::spawn(async move {
            let mut tick = 0u64;
            loop {
                let (nodes, paused) = {
                    let st = s.lock().unwrap();
                    (st.nodes.clone(), st.paused.clone())
                };
                for node in &nodes {
                    if tick.is_multiple_of(4) && !paused.contains(node) {
                        renew_lease(&client, node).await;
                    }
                    finish_deletions(&client, node).await;
                }
                tick += 1;
                tokio::time::sleep(Duration::from_millis(250)).await;
            }
        });
        Kubelet {
            state,
            task: Some(task),
        }
    }

    /// Start heartbeating `node` and finishing its pods' deletions.
    pub fn adopt(&self, node: &str) {
        if self.task.is_some() {
            self.state.lock().unwrap().nodes.insert(node.to_string());
        }
    }

    pub fn forget(&self, node: &str) {
        let mut st = self.state.lock().unwrap();
        st.nodes.remove(node);
        st.paused.remove(node);
    }

    /// Stop renewing the node's Lease (the node lifecycle controller will find it unreachable).
    pub fn pause(&self, node: &str) {
        self.state.lock().unwrap().paused.insert(node.to_string());
    }

    /// Renew the node's Lease again.
    pub fn resume(&self, node: &str) {
        self.state.lock().unwrap().paused.remove(node);
    }

    pub fn nodes(&self) -> Vec<String> {
        self.state.lock().unwrap().nodes.iter().cloned().collect()
    }

    /// What a kubelet reports when its machine (re)booted as `boot_id`: `status.nodeInfo.bootID`,
    /// and Ready (True since an hour, as [`Cluster::set_ready`] writes it).
    pub async fn booted(client: &kube::Client, node: &str, boot_id: &str) {
        let body = serde_json::json!({"status": {"nodeInfo": {"bootID": boot_id}}});
        Api::<Node>::all(client.clone())
            .patch_status(node, &PatchParams::default(), &Patch::Strategic(body))
            .await
            .expect("report the bootID");
    }
}

impl Drop for Kubelet {
    fn drop(&mut self) {
        if let Some(t) = &self.task {
            t.abort();
        }
    }
}

async fn renew_lease(client: &kube::Client, node: &str) {
    let api: Api<Lease> = Api::namespaced(client.clone(), "kube-node-lease");
    let now = k8s_openapi::jiff::Timestamp::now()
        .strftime("%Y-%m-%dT%H:%M:%S%.6fZ")
        .to_string();
    let lease = json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
        "metadata": {"name": node, "namespace": "kube-node-lease"},
        "spec": {"holderIdentity": node, "leaseDurationSeconds": 40, "renewTime": now}});
    let pp = PatchParams::apply("nodemedic-test-kubelet").force();
    let _ = api.patch(node, &pp, &Patch::Apply(lease)).await;
}

async fn finish_deletions(client: &kube::Client, node: &str) {
    let pods: Api<Pod> = Api::all(client.clone());
    let Ok(list) = pods
        .list(&ListParams::default().fields(&format!("spec.nodeName={node}")))
        .await
    else {
        return;
    };
    for p in list.items {
        if p.metadata.deletion_timestamp.is_none() {
            continue;
        }
        let (Some(ns), Some(name), Some(uid)) = (
            p.metadata.namespace.as_deref(),
            p.metadata.name.as_deref(),
            p.metadata.uid.clone(),
        ) else {
            continue;
        };
        let api: Api<Pod> = Api::namespaced(client.clone(), ns);
        let dp = DeleteParams {
            grace_period_seconds: Some(0),
            preconditions: Some(kube::api::Preconditions {
                uid: Some(uid),
                resource_version: None,
            }),
            ..Default::default()
        };
        let _ = api.delete(name, &dp).await;
    }
}

/// Poll `check` until it returns `Some`, or panic naming `what` after `timeout`.
pub async fn eventually<T, F, Fut>(what: &str, timeout: Duration, check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    match within(timeout, check).await {
        Some(v) => v,
        None => panic!("timed out after {timeout:?} waiting for: {what}"),
    }
}

/// Poll `check` until it returns `Some`, or `None` after `timeout`: for a test that gathers what
/// explains a timeout (a pod's logs) before it fails.
pub async fn within<T, F, Fut>(timeout: Duration, mut check: F) -> Option<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        if let Some(v) = check().await {
            return Some(v);
        }
        if tokio::time::Instant::now() >= deadline {
            return None;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
