//! Integration-test support for nodemedic.
//!
//! - [`envtest`]: a real etcd + kube-apiserver + kube-controller-manager on loopback, from the binaries
//!   `KUBEBUILDER_ASSETS` names; the truth every scenario runs against when it is set (CI sets it).
//! - [`cluster`]: what a scenario talks to: that control plane, a cluster in `KUBECONFIG` with
//!   `NODEMEDIC_E2E=1`, or else the test server; plus a stand-in kubelet for the scenario's nodes.
//! - [`server`]: our own API server stand-in, kept for what a real one cannot do on demand: injected
//!   500s/429s, cut watches, exact request logs without audit plumbing. It answers like the exchanges
//!   recorded under `shared/reference/apiserver/`, which `tests/recorded.rs` checks.
//! - [`node`]: a real node on this machine (containerd, runc, the kubelet of the plane's release).
//! - [`process`]: CPU time and memory of another process, for benchmarks.
//! - [`tmpfs`]: a size-limited filesystem that really fills, with a detector watching it.
//! - [`webhook`]: a certificate and a ValidatingWebhookConfiguration for serving the guard to a real
//!   API server.

pub mod admission;
pub mod bench;
pub mod bins;
pub mod cluster;
pub mod debug_dump;
pub mod docs;
pub mod envtest;
pub mod fleet;
pub mod kwok;
pub mod node;
pub mod process;
pub mod server;
pub mod tmpfs;
pub mod webhook;

/// A plain HTTP GET over loopback (tests read /metrics and /healthz with it); returns the body.
pub async fn http_get(url: &str) -> String {
    try_http_get(url)
        .await
        .unwrap_or_else(|e| panic!("GET {url}: {e}"))
}

/// [`http_get`] for a server that may not be listening yet (a process just started): the error
/// instead of a panic.
pub async fn try_http_get(url: &str) -> Result<String, String> {
    use http_body_util::{BodyExt, Empty};
    let client = hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
        .build_http::<Empty<bytes::Bytes>>();
    let uri = url
        .parse()
        .map_err(|e| format!("not an http:// URL: {e}"))?;
    let response = client.get(uri).await.map_err(|e| e.to_string())?;
    let body = response
        .into_body()
        .collect()
        .await
        .map_err(|e| format!("reading the body: {e}"))?
        .to_bytes();
    Ok(String::from_utf8_lossy(&body).into_owned())
}

/// The objects the drainer with Lease `lease` keeps in `namespace` (`act::objects`: its Lease, record
/// key Secret, and ConfigMaps), made empty as the shipped manifests make them (the drainer never
/// creates them under its shipped Role); one that exists already is kept. `run`: the scenario's
/// `nodemedic.test/run` label, so its cleanup removes them.
pub async fn drainer_objects(
    client: &kube::Client,
    namespace: &str,
    lease: &str,
    run: Option<&str>,
) {
    let labels = match run {
        Some(run) => serde_json::json!({"nodemedic.test/run": run}),
        None => serde_json::json!({}),
    };
    for (kind, name) in drainer_object_names(lease) {
        let meta = serde_json::json!({"name": name, "namespace": namespace, "labels": labels});
        let made = match kind {
            "Lease" => {
                let v = serde_json::json!({"metadata": meta, "spec": {}});
                create::<k8s_openapi::api::coordination::v1::Lease>(client, namespace, v).await
            }
            "Secret" => {
                let v = serde_json::json!({"metadata": meta, "type": "Opaque"});
                create::<k8s_openapi::api::core::v1::Secret>(client, namespace, v).await
            }
            _ => {
                let v = serde_json::json!({"metadata": meta});
                create::<k8s_openapi::api::core::v1::ConfigMap>(client, namespace, v).await
            }
        };
        if let Err(e) = made {
            panic!("cannot make {kind} {name} for the drainer {lease}: {e}");
        }
    }
}

/// The kinds and names of what the drainer with Lease `lease` keeps, as `act::objects::owned` lists
/// them (this crate cannot depend on the drainer's: `drainer_objects_are_those_the_drainer_keeps`
/// checks they agree).
pub fn drainer_object_names(lease: &str) -> Vec<(&'static str, String)> {
    let mut all = vec![
        ("Lease", lease.to_string()),
        ("Secret", format!("{lease}-record-key")),
        ("ConfigMap", format!("{lease}-reboots")),
        ("ConfigMap", format!("{lease}-settings")),
    ];
    all.extend((0..32).map(|i| ("ConfigMap", format!("{lease}-records-{i:02}"))));
    all
}

/// Create the object `v` in `namespace` unless it exists.
async fn create<K>(
    client: &kube::Client,
    namespace: &str,
    v: serde_json::Value,
) -> Result<(), kube::Error>
where
    K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>
        + Clone
        + serde::de::DeserializeOwned
        + serde::Serialize
        + std::fmt::Debug,
{
    let api: kube::Api<K> = kube::Api::namespaced(client.clone(), namespace);
    let obj: K = serde_json::from_value(v).expect("a valid object");
    match api.create(&Default::default(), &obj).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(e)) if e.code == 409 => Ok(()),
        Err(e) => Err(e),
    }
}
