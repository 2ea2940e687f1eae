//! The reboot requests' ConfigMap (`nodemedic_common::reboot`): while leading, kept equal to the
//! requests the controller derives from its records, each signed with `--reboot-signing-key`,
//! through the cluster seam's one ConfigMap writer (`Cluster::keep_configmap`, behind the
//! leadership gate): written only when it differs, created on the first request. A failed write is
//! tried again 10 seconds later. I/O.

use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use nodemedic_common::reboot::Requests as Reboots;

use crate::model::cluster::{Cluster, Data, Gated, Kept};

/// How long after a failed write it is tried again.
const RETRY: Duration = Duration::from_secs(10);

/// Keep the requests ConfigMap beside the Lease `lease` while leading, through the leadership
/// gate in front of the cluster (`model::cluster::Gated`).
pub(crate) fn spawn<C: Cluster>(
    cluster: Gated<C>,
    lease: &str,
    mut requests: watch::Receiver<Reboots>,
    signing: Option<nodemedic_common::reboot::SigningKey>,
) -> JoinHandle<()> {
    let name = nodemedic_common::reboot::configmap_name(lease);
    let mut leader = cluster.leader();
    tokio::spawn(async move {
        let mut failed = false;
        loop {
            let wanted = signed(requests.borrow_and_update().clone(), signing.as_ref());
            if *leader.borrow_and_update() {
                let data = nodemedic_common::reboot::to_data(&wanted);
                failed = match cluster.keep_configmap(&name, &data, Data::eq).await {
                    Ok(Kept::Written) => {
                        tracing::info!(configmap = %name, requests = wanted.len(), "reboot requests written");
                        false
                    }
                    Ok(Kept::Unchanged) => false,
                    Err(e) => {
                        tracing::warn!(configmap = %name, error = %e, requests = wanted.len(),
                            "cannot write the reboot requests; trying again in 10s");
                        true
                    }
                };
            }
            let retry = async {
                if failed {
                    tokio::time::sleep(RETRY).await
                } else {
                    std::future::pending().await
                }
            };
            tokio::select! {
                r = leader.changed() => if r.is_err() { return },
                r = requests.changed() => if r.is_err() { return },
                () = retry => {}
            }
        }
    })
}

/// The requests, each signed with `key` (Ed25519 is deterministic: the same request, the same
/// signature, so an unchanged request writes nothing).
fn signed(requests: Reboots, key: Option<&nodemedic_common::reboot::SigningKey>) -> Reboots {
    let Some(key) = key else {
        return requests;
    };
    requests
        .into_iter()
        .map(|(n, r)| (n, r.signed(key)))
        .collect()
}

/// A ConfigMap of the drainer's own (its settings, its reboot requests): `name` with the drainer's
/// labels and `data`.
pub(crate) fn drainer_configmap(
    name: &str,
    data: std::collections::BTreeMap<String, String>,
) -> ConfigMap {
    ConfigMap {
        metadata: drainer_meta(name),
        data: Some(data),
        ..Default::default()
    }
}

/// The metadata of an object of the drainer's own: `name` with the drainer's labels.
pub(crate) fn drainer_meta(name: &str) -> kube::api::ObjectMeta {
    let labels = [
        ("app.kubernetes.io/name", "nodemedic"),
        ("app.kubernetes.io/component", "drainer"),
    ];
    kube::api::ObjectMeta {
        name: Some(name.to_string()),
        labels: Some(
            labels
                .into_iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        ),
        ..Default::default()
    }
}
