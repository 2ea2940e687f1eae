//! The shipped RBAC grants every call the drainer makes, on the real API server.

use std::time::Duration;

use k8s_openapi::api::core::v1::Secret;
use kube::Api;
use kube::api::PostParams;
use nodemedic_drainer::config::Budget;
use nodemedic_drainer::leader::LeaseConfig;
use nodemedic_drainer::run::{self, Options};
use nodemedic_tests::cluster::eventually;
use serde_json::{Value, json};

use crate::env::{Env, WAIT};

/// The shipped drainer's Lease name, which its Role names.
const LEASE: &str = "nodemedic-drainer";

/// Apply the shipped drainer RBAC (deploy/base/drainer-rbac.yaml) to the control plane.
pub(super) async fn apply_shipped_rbac(client: &kube::Client) {
    use k8s_openapi::api::coordination::v1::Lease;
    use k8s_openapi::api::core::v1::{ConfigMap, ServiceAccount};
    use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
    // The RBAC and the objects the drainer keeps, which its Role names and never creates.
    let text = ["drainer-rbac.yaml", "drainer-objects.yaml"]
        .iter()
        .map(|f| {
            std::fs::read_to_string(format!("{}/../deploy/base/{f}", env!("CARGO_MANIFEST_DIR")))
                .unwrap()
        })
        .collect::<Vec<_>>()
        .join("\n---\n");
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
            "Lease" => create::<Lease>(client, Some("kube-system"), v).await,
            "ConfigMap" => create::<ConfigMap>(client, Some("kube-system"), v).await,
            "ClusterRole" => create::<ClusterRole>(client, None, v).await,
            "ClusterRoleBinding" => create::<ClusterRoleBinding>(client, None, v).await,
            "Role" => create::<Role>(client, Some("kube-system"), v).await,
            "RoleBinding" => create::<RoleBinding>(client, Some("kube-system"), v).await,
            other => panic!("unexpected {other} in the drainer RBAC"),
        }
    }
}

/// Wait until a SelfSubjectAccessReview as `client`'s user allows `verb` on `resource`.
pub(super) async fn wait_authorized(
    client: &kube::Client,
    verb: &str,
    group: &str,
    resource: &str,
    namespace: Option<&str>,
    name: Option<&str>,
) {
    use k8s_openapi::api::authorization::v1::{
        ResourceAttributes, SelfSubjectAccessReview, SelfSubjectAccessReviewSpec,
    };
    let api: Api<SelfSubjectAccessReview> = Api::all(client.clone());
    let review = SelfSubjectAccessReview {
        spec: SelfSubjectAccessReviewSpec {
            resource_attributes: Some(ResourceAttributes {
                verb: Some(verb.into()),
                group: Some(group.into()),
                resource: Some(resource.into()),
                namespace: namespace.map(String::from),
                name: name.map(String::from),
                ..Default::default()
            }),
            ..Default::default()
        },
        ..Default::default()
    };
    eventually(&format!("RBAC allows {verb} {resource}"), WAIT, || async {
        let r = api.create(&PostParams::default(), &review).await.ok()?;
        r.status.filter(|s| s.allowed)
    })
    .await;
}

#[tokio::test]
async fn the_shipped_rbac_grants_every_call_the_drainer_makes() {
    for env in Env::each_release().await {
        the_shipped_rbac_grants_every_call_the_drainer_makes_on(env).await;
    }
}

async fn the_shipped_rbac_grants_every_call_the_drainer_makes_on(env: Env) {
    let Some(plane) = env.cluster.plane else {
        nodemedic_tests::envtest::say_skipped(
            "the_shipped_rbac_grants_every_call_the_drainer_makes",
            "kube-apiserver's RBAC authorizer (SubjectAccessReviews against the shipped Roles)",
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
    // The API server's RBAC authorizer reads bindings through informers: calls made right after the
    // bindings are created can still be refused. Wait until it knows both bindings, so that a 403
    // below means the shipped RBAC lacks a rule, not that the cache was behind.
    wait_authorized(&client, "list", "", "nodes", None, None).await;
    // The record key Secret, made at install as the README says (by an administrator: the
    // drainer's token has no grant on it), and mounted as a file into the drainer's pod.
    let key = tempfile::tempdir().unwrap();
    let bytes: Vec<u8> = (0..32).map(|i| (i * 7 + 3) as u8).collect();
    std::fs::write(key.path().join("key"), &bytes).unwrap();
    let admin_secrets: Api<Secret> = Api::namespaced(env.cluster.client.clone(), "kube-system");
    let _ = admin_secrets
        .delete(&format!("{LEASE}-record-key"), &Default::default())
        .await;
    admin_secrets
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({
                "metadata": {"name": format!("{LEASE}-record-key")},
                "data": {"key": nodemedic_tests::webhook::base64(&bytes)}}))
            .unwrap(),
        )
        .await
        .unwrap();
    // The shipped Role names the Lease: the drainer runs under that name here, as deployed.
    wait_authorized(
        &client,
        "get",
        "coordination.k8s.io",
        "leases",
        Some("kube-system"),
        Some(LEASE),
    )
    .await;
    // Cordon, schedule, drain (evict, wait), a node waiting for the budget whose Event count grows,
    // and the Lease: every kind of call.
    let bad = env.node("rbac-bad", "True", 3000, json!({})).await;
    let waiting = env.node("rbac-waiting", "True", 1000, json!({})).await;
    env.pod("default", "rbac-web", &bad, json!({})).await;
    let mut cfg = env.config(Duration::from_secs(1));
    cfg.max_cordoned = Budget::Count(1);
    cfg.event_refresh = Duration::from_secs(1);
    let mut opts_cfg = cfg;
    opts_cfg.owner = LEASE.into();
    let running = run::start(
        Options {
            config: opts_cfg,
            listen: "127.0.0.1:0".parse().unwrap(),
            lease: LeaseConfig {
                namespace: "kube-system".into(),
                name: LEASE.into(),
                identity: "rbac".into(),
                duration: Duration::from_secs(2),
                renew_deadline: Duration::from_millis(1500),
                retry_period: Duration::from_millis(200),
            },
            tick: Duration::from_millis(200),
            guard: None,
            reload: None,
            // Published under the shipped Role too (its ConfigMap by name).
            reboot_signing_key: None,
            record_key_file: Some(key.path().join("key")),
            record_key_previous_file: None,
            refuse_looser_start: false,
            settings: Some(nodemedic_drainer::config::published::Published::new(
                &Default::default(),
                None,
            )),
        },
        client.clone(),
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
    // With the drainer's token, no ConfigMap or Lease others trust can be made (issue 64, point 4:
    // `aws-auth` maps cloud roles to cluster-admin on EKS, `coredns-custom` steers DNS on AKS).
    for (name, made) in [
        ("aws-auth", make_configmap(&client, "aws-auth").await),
        (
            "coredns-custom",
            make_configmap(&client, "coredns-custom").await,
        ),
        (
            "a Lease",
            make_lease(&client, "kube-controller-manager-forged").await,
        ),
    ] {
        assert!(
            matches!(made, Err(kube::Error::Api(ref e)) if e.code == 403),
            "{name}: {made:?}"
        );
    }
    // Nor can it read the record key (issue 76, point 1: with it, a stolen token sealed records
    // the drainer signed reboots for), or any Secret.
    let secrets: Api<Secret> = Api::namespaced(client.clone(), "kube-system");
    for read in [
        secrets.get(&format!("{LEASE}-record-key")).await.map(drop),
        secrets.list(&Default::default()).await.map(drop),
        Api::<Secret>::all(client.clone())
            .list(&Default::default())
            .await
            .map(drop),
    ] {
        assert!(
            matches!(read, Err(kube::Error::Api(ref e)) if e.code == 403),
            "the drainer's token reads Secrets: {read:?}"
        );
    }
    let forbidden: Vec<String> = plane
        .audit()
        .iter()
        .filter(|e| e.user == SA && e.code == 403)
        // The attempts above, refused as they must be.
        .filter(|e| {
            !(e.verb == "create" && ["configmaps", "leases"].contains(&e.resource.as_str()))
                && e.resource != "secrets"
        })
        .map(|e| format!("{} {}/{}", e.verb, e.resource, e.subresource))
        .collect();
    assert!(
        forbidden.is_empty(),
        "calls the shipped RBAC refused: {forbidden:?}"
    );
    running.shutdown().await;
    env.cleanup().await;
}

async fn make_configmap(client: &kube::Client, name: &str) -> Result<(), kube::Error> {
    let api: Api<k8s_openapi::api::core::v1::ConfigMap> =
        Api::namespaced(client.clone(), "kube-system");
    let cm =
        serde_json::from_value(json!({"metadata": {"name": name}, "data": {"k": "v"}})).unwrap();
    api.create(&PostParams::default(), &cm).await.map(drop)
}

async fn make_lease(client: &kube::Client, name: &str) -> Result<(), kube::Error> {
    let api: Api<k8s_openapi::api::coordination::v1::Lease> =
        Api::namespaced(client.clone(), "kube-system");
    let lease = serde_json::from_value(json!({"metadata": {"name": name}, "spec": {}})).unwrap();
    api.create(&PostParams::default(), &lease).await.map(drop)
}
