//! The record memory off the Lease (issue 64, point 2), and the objects the drainer keeps, shipped
//! by the manifests rather than created (point 4).
//!
//! Kept on the Lease's annotations, the memory of 3,300 nodes with records passed the API server's
//! 256 KiB limit: every renewal was refused (422) and a lone replica never led again.

use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use nodemedic_drainer::config::Budget;
use nodemedic_drainer::leader::LeaseConfig;
use nodemedic_drainer::run::{self, Options};
use nodemedic_tests::cluster::eventually;
use serde_json::{Value, json};

use crate::env::{Env, WAIT};

/// How many nodes of the memory's ConfigMaps for `lease` hold an entry.
async fn remembered(env: &Env, lease: &str) -> usize {
    let api: Api<ConfigMap> = Api::namespaced(env.cluster.client.clone(), "kube-system");
    let mut n = 0;
    for i in 0..nodemedic_drainer::decide::fleet::seen::SHARDS {
        let name = nodemedic_drainer::act::recall::configmap_name(lease, i);
        let Ok(cm) = api.get(&name).await else {
            continue;
        };
        let Some(text) = cm.data.and_then(|mut d| d.remove("memory")) else {
            continue;
        };
        let v: Value = serde_json::from_str(&text).unwrap();
        n += v["nodes"].as_object().map_or(0, |m| m.len());
    }
    n
}

#[tokio::test]
async fn the_memory_of_3300_nodes_with_records_never_stops_the_lease_renewing() {
    const NODES: usize = 3_300;
    let env = Env::new().await;
    // Names as long as cloud nodes' (`ip-10-0-123-45.us-west-2.compute.internal`): on the Lease,
    // their entries passed 256 KiB.
    let hints: Vec<String> = (0..NODES)
        .map(|i| format!("ip-10-0-{}-{}.eu-west-3.compute.internal", i / 250, i % 250))
        .collect();
    let made: Vec<String> = futures::stream::iter(&hints)
        .map(|h| env.node(h, "True", 3600, json!({})))
        .buffer_unordered(8)
        .collect()
        .await;
    assert_eq!(made.len(), NODES);
    let mut cfg = env.config(Duration::from_secs(3600));
    cfg.max_cordoned = Budget::Count(NODES);
    let lease = format!("nodemedic-drainer-test-{}", env.id);
    let running = env.start(cfg, "memory").await;
    eventually(
        "every node's record remembered",
        Duration::from_secs(240),
        || async {
            let n = remembered(&env, &lease).await;
            (n >= NODES).then_some(())
        },
    )
    .await;
    // The Lease goes on being renewed by the same holder, and carries none of it.
    let leases: Api<Lease> = Api::namespaced(env.cluster.client.clone(), "kube-system");
    let renewed = |l: &Lease| {
        l.spec
            .as_ref()
            .and_then(|s| s.renew_time.clone())
            .map(|t| t.0)
    };
    let first = leases.get(&lease).await.unwrap();
    let mut since = renewed(&first).unwrap();
    for _ in 0..3 {
        let at = eventually("the Lease renewed again", WAIT, || async {
            let l = leases.get(&lease).await.ok()?;
            renewed(&l).filter(|t| *t > since)
        })
        .await;
        let l = leases.get(&lease).await.unwrap();
        assert_eq!(
            l.spec.as_ref().unwrap().holder_identity.as_deref(),
            Some("memory")
        );
        since = at;
    }
    let l = leases.get(&lease).await.unwrap();
    let bytes: usize = l
        .metadata
        .annotations
        .unwrap_or_default()
        .iter()
        .map(|(k, v)| k.len() + v.len())
        .sum();
    assert!(bytes < 4096, "the Lease's annotations hold {bytes} bytes");
    // Leading (a renewal a busy machine misses is taken again at once: the Lease never refuses it).
    eventually("leading", WAIT, || async {
        (*running.leader.borrow()).then_some(())
    })
    .await;
    running.shutdown().await;
    env.cleanup().await;
}

/// The drainer's objects are made by the manifests; a drainer whose credential may create them
/// (here the administrator's) makes those missing, once, and leads.
#[tokio::test]
async fn a_drainer_that_may_create_its_objects_makes_those_missing() {
    let env = Env::new().await;
    let lease = env.name("made-here");
    // The names the tests' helper makes are the drainer's own.
    let theirs: Vec<(String, String)> = nodemedic_drainer::act::objects::owned(&lease, true, true)
        .into_iter()
        .map(|o| (format!("{:?}", o.kind), o.name))
        .collect();
    let ours: Vec<(String, String)> = nodemedic_tests::drainer_object_names(&lease)
        .into_iter()
        .map(|(k, n)| (k.to_string(), n))
        .collect();
    assert_eq!(theirs, ours);
    let running = run::start(options(&env, &lease), env.cluster.client.clone())
        .await
        .unwrap();
    eventually("leading", WAIT, || async {
        (*running.leader.borrow()).then_some(())
    })
    .await;
    let configmaps: Api<ConfigMap> = Api::namespaced(env.cluster.client.clone(), "kube-system");
    for (kind, name) in &ours {
        if kind == "ConfigMap" {
            assert!(
                configmaps.get_opt(name).await.unwrap().is_some(),
                "{name} made"
            );
        }
    }
    running.shutdown().await;
    // Made by hand for this test: removed by hand.
    for (kind, name) in &ours {
        let dp = Default::default();
        let _ = match kind.as_str() {
            "ConfigMap" => configmaps.delete(name, &dp).await.map(drop),
            "Lease" => Api::<Lease>::namespaced(env.cluster.client.clone(), "kube-system")
                .delete(name, &dp)
                .await
                .map(drop),
            _ => Api::<k8s_openapi::api::core::v1::Secret>::namespaced(
                env.cluster.client.clone(),
                "kube-system",
            )
            .delete(name, &dp)
            .await
            .map(drop),
        };
    }
    env.cleanup().await;
}

/// Where the credential may not create a missing object, the drainer stops at start with a message
/// naming it and the manifest that ships it (the refusal injected on the test API server; on a
/// real control plane the shipped RBAC refuses it: `rbac.rs`).
#[tokio::test]
async fn a_missing_object_the_drainer_may_not_create_stops_it_naming_the_object() {
    let env = Env::new().await;
    let Some(server) = env
        .cluster
        .fake_or_skip("a_missing_object_the_drainer_may_not_create_stops_it_naming_the_object")
    else {
        return;
    };
    let lease = env.name("not-made");
    server.fail_next("POST", "/configmaps", 403, 1);
    let refused = run::start(options(&env, &lease), env.cluster.client.clone()).await;
    let said = match refused {
        Ok(_) => panic!("the drainer started without its ConfigMap"),
        Err(e) => e.to_string(),
    };
    let first_configmap = format!("{lease}-reboots");
    assert!(
        said.contains(&format!("ConfigMap kube-system/{first_configmap}")),
        "{said}"
    );
    assert!(said.contains("deploy/base/drainer-objects.yaml"), "{said}");
    assert!(
        !said.contains("Api(") && !said.contains("ErrorResponse"),
        "no Debug dump: {said}"
    );
    env.cleanup().await;
}

fn options(env: &Env, lease: &str) -> Options {
    Options {
        config: env.config(Duration::from_secs(1)),
        listen: "127.0.0.1:0".parse().unwrap(),
        lease: LeaseConfig {
            namespace: "kube-system".into(),
            name: lease.into(),
            identity: "objects".into(),
            duration: Duration::from_secs(2),
            renew_deadline: Duration::from_millis(1500),
            retry_period: Duration::from_millis(200),
        },
        tick: Duration::from_millis(200),
        guard: None,
        reload: None,
        reboot_signing_key: None,
        record_key_file: None,
        record_key_previous_file: None,
        refuse_looser_start: false,
        settings: Some(nodemedic_drainer::config::published::Published::new(
            &Default::default(),
            None,
        )),
    }
}
