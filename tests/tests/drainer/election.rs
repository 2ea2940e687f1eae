//! Leader election: one leader of two replicas, failover resuming the drain, the Lease released on
//! shutdown.

use std::time::Duration;

use kube::Api;
use kube::api::DeleteParams;
use nodemedic_tests::cluster::eventually;
use serde_json::json;

use crate::env::{Env, WAIT};

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
    eventually("drain in progress (blocked by the PDB)", WAIT, || async {
        (env.record_phase(&bad).await.as_deref() == Some("draining")).then_some(())
    })
    .await;
    // b tried from its start on and never led, not even for a moment (its leadership channel
    // never changed); the Lease's single transition below says the same from the API server.
    assert!(
        !*b.leader.borrow() && !b.leader.has_changed().unwrap_or(true),
        "only one leader"
    );
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
    let lease = lease_spec(&env).await;
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
    let spec = lease_spec(&env).await;
    assert_eq!(
        spec.holder_identity.as_deref(),
        Some(""),
        "released, so the next replica need not wait a lease duration"
    );
    assert_eq!(spec.lease_duration_seconds, Some(1));
    if env.cluster.real() {
        let leases: Api<k8s_openapi::api::coordination::v1::Lease> =
            Api::namespaced(env.cluster.client.clone(), "kube-system");
        let _ = leases
            .delete(
                &format!("nodemedic-drainer-test-{}", env.id),
                &DeleteParams::default(),
            )
            .await;
    }
    env.cleanup().await;
}

/// The scenario's drainer Lease as the API server has it.
async fn lease_spec(env: &Env) -> k8s_openapi::api::coordination::v1::LeaseSpec {
    let leases: Api<k8s_openapi::api::coordination::v1::Lease> =
        Api::namespaced(env.cluster.client.clone(), "kube-system");
    leases
        .get(&format!("nodemedic-drainer-test-{}", env.id))
        .await
        .unwrap()
        .spec
        .unwrap()
}
