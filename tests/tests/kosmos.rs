//! The seeds' Kosmos flap, end to end on a real control plane of its own (its controller manager is
//! restarted with the other identity): a Kosmos leaf node with pods stops heartbeating; the real node
//! lifecycle controller marks it Unknown, taints it `unreachable:NoExecute`, marks its pods NotReady,
//! and its taint manager deletes them after their `tolerationSeconds`.
//!
//! - With the guard registered (a real ValidatingWebhookConfiguration the API server calls), those
//!   deletions are denied under both identities kube-controller-manager may use
//!   (`--use-service-account-credentials=false`: `system:kube-controller-manager`; `=true`: the
//!   node-controller service account) and the pods survive. When the node is Ready again, the
//!   drainer reports the pods the controller left `Ready=False` (`PodReadinessStale`).
//! - Without the guard, the same flap loses the pods.

use std::sync::OnceLock;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Event, Pod};
use kube::Api;
use kube::api::{DeleteParams, ListParams, PostParams};
use nodemedic_drainer::config::Config;
use nodemedic_drainer::config::select::Selector;
use nodemedic_drainer::guard::GuardConfig;
use nodemedic_drainer::guard::server::GuardOptions;
use nodemedic_drainer::leader::LeaseConfig;
use nodemedic_tests::cluster::{Cluster, eventually, now_rfc3339};
use nodemedic_tests::envtest::{self, ControlPlane, KCM_USER, KcmOptions};
use nodemedic_tests::webhook::{register_guard, write_cert};
use serde_json::json;

const NC: &str = "system:serviceaccount:kube-system:node-controller";
const WAIT: Duration = Duration::from_secs(60);

fn kcm(service_account_credentials: bool) -> KcmOptions {
    KcmOptions {
        // Since 1.29 the taint manager is a controller of its own (it acts as the node-controller).
        controllers: "nodelifecycle,taint-eviction-controller".into(),
        service_account_credentials,
        node_monitor_period: Duration::from_secs(1),
        node_monitor_grace_period: Duration::from_secs(4),
    }
}

fn plane() -> Option<&'static ControlPlane> {
    static PLANE: OnceLock<Option<ControlPlane>> = OnceLock::new();
    PLANE
        .get_or_init(|| envtest::assets().map(|a| ControlPlane::start(&a, Some(kcm(false)))))
        .as_ref()
}

struct Flap<'a> {
    cluster: &'a Cluster,
    node: String,
    ns: String,
    pods: Vec<String>,
}

impl<'a> Flap<'a> {
    /// A heartbeating Kosmos leaf node in a zone of its own (a member cluster is its own failure
    /// domain), with `n` Running, Ready pods that tolerate unreachability for 2 s.
    async fn new(cluster: &'a Cluster, hint: &str, guarded: bool) -> Flap<'a> {
        let node = cluster
            .create_node_with(
                hint,
                json!({"kosmos.io/node": "true", "topology.kubernetes.io/zone": format!("kosmos-{hint}")}),
            )
            .await;
        let ns = cluster.name(&format!("{hint}-app"));
        let labels = if guarded {
            json!({"nodemedic.test/guard": cluster.id})
        } else {
            json!({})
        };
        cluster.ensure_namespace(&ns, labels).await;
        let mut pods = Vec::new();
        for i in 0..3 {
            let name = format!("web-{i}");
            let pod: Pod = serde_json::from_value(json!({
                "metadata": {"name": name, "namespace": ns},
                "spec": {"nodeName": node, "terminationGracePeriodSeconds": 0,
                    "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.9"}],
                    "tolerations": [
                        {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 2},
                        {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 2}]}
            }))
            .unwrap();
            Api::<Pod>::namespaced(cluster.client.clone(), &ns)
                .create(&PostParams::default(), &pod)
                .await
                .unwrap();
            let now = now_rfc3339();
            cluster
                .set_pod_status(
                    &ns,
                    &name,
                    json!({"phase": "Running", "conditions": [
                        {"type": "Ready", "status": "True", "lastTransitionTime": now},
                        {"type": "ContainersReady", "status": "True", "lastTransitionTime": now}]}),
                )
                .await;
            pods.push(name);
        }
        Flap {
            cluster,
            node,
            ns,
            pods,
        }
    }

    /// Stop the node's heartbeat and wait until the node lifecycle controller has tainted it.
    async fn cut(&self) {
        self.cluster.kubelet.pause(&self.node);
        eventually("the node tainted unreachable:NoExecute", WAIT, || async {
            let n = self.cluster.node(&self.node).await;
            n.spec?
                .taints?
                .iter()
                .any(|t| t.key == "node.kubernetes.io/unreachable" && t.effect == "NoExecute")
                .then_some(())
        })
        .await;
    }

    /// Heartbeat again, Ready as the kubelet posts it.
    async fn restore(&self) {
        self.cluster.kubelet.resume(&self.node);
        self.cluster.set_ready(&self.node, "True").await;
    }

    async fn surviving(&self) -> usize {
        let api: Api<Pod> = Api::namespaced(self.cluster.client.clone(), &self.ns);
        let mut n = 0;
        for p in &self.pods {
            if api
                .get_opt(p)
                .await
                .unwrap()
                .is_some_and(|p| p.metadata.deletion_timestamp.is_none())
            {
                n += 1;
            }
        }
        n
    }

    /// Pod DELETEs by `user` the API server answered for this flap's pods: (denied, succeeded).
    fn deletions_by(&self, user: &str) -> (usize, usize) {
        let audit = self.cluster.plane.unwrap().audit();
        let mine = audit.iter().filter(|e| {
            e.verb == "delete"
                && e.resource == "pods"
                && e.subresource.is_empty()
                && e.namespace == self.ns
                && e.user == user
        });
        let (mut denied, mut ok) = (0, 0);
        for e in mine {
            if e.code >= 400 {
                denied += 1;
            } else {
                ok += 1;
            }
        }
        (denied, ok)
    }

    /// Wait until `user` tried to delete every pod and was denied each time; the pods survive.
    async fn assert_guarded_against(&self, user: &str) {
        eventually(
            &format!("{user} tried to delete the leaf's pods and was denied"),
            WAIT,
            || async {
                let (denied, _) = self.deletions_by(user);
                (denied >= self.pods.len()).then_some(())
            },
        )
        .await;
        assert_eq!(
            self.deletions_by(user).1,
            0,
            "no deletion by {user} got through"
        );
        assert_eq!(
            self.surviving().await,
            self.pods.len(),
            "every pod survived"
        );
    }
}

#[tokio::test]
async fn a_kosmos_leaf_flap_keeps_its_pods_with_the_guard_and_loses_them_without() {
    let Some(plane) = plane() else {
        envtest::say_skipped(
            "a_kosmos_leaf_flap_keeps_its_pods_with_the_guard_and_loses_them_without",
            "kube-controller-manager's node lifecycle controller (it taints and evicts a NotReady node's pods)",
        );
        return;
    };
    let cluster = Cluster::on(plane);
    // A healthy node elsewhere: with every node unreachable the controller enters "master
    // disruption mode" and evicts nothing, which is not the case under test.
    cluster
        .create_node_with("anchor", json!({"topology.kubernetes.io/zone": "zone-a"}))
        .await;

    // The guard, in the drainer, registered with the API server for guarded namespaces.
    let dir = tempfile::tempdir().unwrap();
    let ca = write_cert(dir.path(), "guard");
    let lease = cluster.name("guard");
    let run = cluster.id_label();
    nodemedic_tests::drainer_objects(&cluster.client, "kube-system", &lease, Some(&run)).await;
    let drainer = nodemedic_drainer::run::start(
        nodemedic_drainer::run::Options {
            // Selects the scenario's nodes: no condition of theirs is a problem, but it reports
            // stale readiness on them.
            config: Config {
                selector: Selector::labels(&format!("nodemedic.test/run={}", cluster.id_label()))
                    .unwrap(),
                conditions: vec!["KernelDeadlock".parse().unwrap()],
                stale_readiness: Some(Duration::from_secs(2)),
                ..Default::default()
            },
            listen: "127.0.0.1:0".parse().unwrap(),
            lease: LeaseConfig {
                namespace: "kube-system".into(),
                name: lease,
                identity: "g".into(),
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
            guard: Some(GuardOptions {
                listen: "127.0.0.1:0".parse().unwrap(),
                cert: dir.path().join("tls.crt"),
                key: dir.path().join("tls.key"),
                config: GuardConfig::default(),
            }),
        },
        cluster.client.clone(),
    )
    .await
    .unwrap();
    let webhook = register_guard(&cluster, drainer.guard_addr.unwrap(), &ca).await;
    let webhooks: Api<k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration> =
        Api::all(cluster.client.clone());
    eventually("the guard's node cache synced", WAIT, || async {
        (*drainer.leader.borrow()).then_some(())
    })
    .await;

    // 1. --use-service-account-credentials=false (the flag's default): the taint manager deletes as
    //    system:kube-controller-manager. Denied; the pods survive; the drainer reports their stale
    //    readiness once the node is Ready again.
    let one = Flap::new(&cluster, "leaf-one", true).await;
    one.cut().await;
    one.assert_guarded_against(KCM_USER).await;
    // The controller marked them NotReady; nothing (no kubelet) marks them Ready again.
    eventually("pods marked NotReady by the controller", WAIT, || async {
        let pods = Api::<Pod>::namespaced(cluster.client.clone(), &one.ns)
            .list(&ListParams::default())
            .await
            .ok()?;
        pods.items
            .iter()
            .all(|p| {
                p.status
                    .as_ref()
                    .and_then(|s| s.conditions.as_ref())
                    .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "False"))
            })
            .then_some(())
    })
    .await;
    one.restore().await;
    let stale = eventually("PodReadinessStale for every pod", WAIT, || async {
        let events = Api::<Event>::namespaced(cluster.client.clone(), &one.ns)
            .list(&ListParams::default())
            .await
            .ok()?;
        let mut names: Vec<String> = events
            .items
            .into_iter()
            .filter(|e| e.reason.as_deref() == Some("PodReadinessStale"))
            .filter_map(|e| e.involved_object.name)
            .collect();
        names.sort();
        (names == one.pods).then_some(names)
    })
    .await;
    assert_eq!(stale.len(), 3);

    // 2. --use-service-account-credentials=true (kubeadm): the node-controller service account.
    plane.start_kcm(&kcm(true));
    let two = Flap::new(&cluster, "leaf-two", true).await;
    two.cut().await;
    two.assert_guarded_against(NC).await;
    two.restore().await;

    // 3. Without the guard the same flap loses the pods.
    webhooks
        .delete(&webhook, &DeleteParams::default())
        .await
        .unwrap();
    let three = Flap::new(&cluster, "leaf-three", false).await;
    three.cut().await;
    eventually("the unguarded leaf's pods deleted", WAIT, || async {
        (three.surviving().await == 0).then_some(())
    })
    .await;
    assert!(
        three.deletions_by(NC).1 >= three.pods.len(),
        "deleted by the node lifecycle controller"
    );

    drainer.shutdown().await;
    plane.start_kcm(&kcm(false));
}
