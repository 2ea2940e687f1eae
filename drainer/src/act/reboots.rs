//! The reboot requests' ConfigMap (`nodemedic_common::reboot`): while leading, kept equal to the
//! requests the controller derives from its records, each signed with `--reboot-signing-key`, written only when it differs (no write that
//! changes nothing), created on the first request. A failed write is tried again 10 seconds later.
//! I/O.

use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use kube::api::PostParams;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use nodemedic_common::reboot::Requests as Reboots;

/// How long after a failed write it is tried again.
const RETRY: Duration = Duration::from_secs(10);

/// Keep the requests ConfigMap beside the Lease `namespace/lease` while leading.
pub(crate) fn spawn(
    client: kube::Client,
    (namespace, lease): (&str, &str),
    mut leader: watch::Receiver<bool>,
    mut requests: watch::Receiver<Reboots>,
    signing: Option<nodemedic_common::reboot::SigningKey>,
) -> JoinHandle<()> {
    let api: Api<ConfigMap> = Api::namespaced(client, namespace);
    let name = nodemedic_common::reboot::configmap_name(lease);
    let at = format!("{namespace}/{name}");
    tokio::spawn(async move {
        let mut failed = false;
        loop {
            let wanted = signed(requests.borrow_and_update().clone(), signing.as_ref());
            if *leader.borrow_and_update() {
                failed = match write(&api, &name, &wanted).await {
                    Ok(()) => false,
                    Err(e) => {
                        let error = nodemedic_common::client::said(&e);
                        tracing::warn!(configmap = %at, %error, requests = wanted.len(),
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

/// Make the ConfigMap hold `wanted` unless it already does.
async fn write(api: &Api<ConfigMap>, name: &str, wanted: &Reboots) -> Result<(), kube::Error> {
    let data = nodemedic_common::reboot::to_data(wanted);
    match api.get_opt(name).await? {
        Some(cm) if cm.data.clone().unwrap_or_default() == data => Ok(()),
        Some(mut cm) => {
            cm.data = Some(data);
            api.replace(name, &PostParams::default(), &cm).await?;
            tracing::info!(configmap = %name, requests = wanted.len(), "reboot requests written");
            Ok(())
        }
        None if data.is_empty() => Ok(()),
        None => {
            let cm = drainer_configmap(name, data);
            api.create(&PostParams::default(), &cm).await?;
            tracing::info!(configmap = %name, requests = wanted.len(), "reboot requests written");
            Ok(())
        }
    }
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
