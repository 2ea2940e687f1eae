//! The objects the drainer keeps in its namespace: its Lease, its record key Secret, the ConfigMaps
//! of its record memory, its reboot requests and its published settings. I/O, once at start.
//!
//! The manifests ship each of them, and the drainer's Role grants `get` and `update` on those names
//! only, never `create`: RBAC cannot name what a create makes, so a create grant in `kube-system`
//! would let the drainer's token make any ConfigMap or Lease there, including ones other components
//! trust (EKS's `aws-auth`, AKS's `coredns-custom`). Where one is missing, a drainer whose credential
//! may create it (a cluster-admin kubeconfig, a draino Deployment's broad role) makes it and says
//! so; otherwise it stops, naming the object and the manifest that ships it.

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::Api;
use kube::api::PostParams;

/// A kind of object the drainer keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Lease,
    Secret,
    ConfigMap,
}

impl Kind {
    fn word(self) -> &'static str {
        match self {
            Kind::Lease => "Lease",
            Kind::Secret => "Secret",
            Kind::ConfigMap => "ConfigMap",
        }
    }
}

/// One object the drainer keeps: its kind, name, and what it holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Owned {
    pub kind: Kind,
    pub name: String,
    pub holds: &'static str,
}

/// Every object the drainer with Lease `lease` keeps; the settings' ConfigMap when `publishing`;
/// its record key Secret when it reads the key through the API (`key_secret`: no
/// `--record-key-file`; with the file, the Secret is the pod's, made at install, and none of the
/// drainer's business).
pub fn owned(lease: &str, publishing: bool, key_secret: bool) -> Vec<Owned> {
    let mut all = vec![Owned {
        kind: Kind::Lease,
        name: lease.to_string(),
        holds: "its leader election",
    }];
    if key_secret {
        all.push(Owned {
            kind: Kind::Secret,
            name: crate::act::key::default_secret(lease),
            holds: "its drain record key",
        });
    }
    all.extend([Owned {
        kind: Kind::ConfigMap,
        name: nodemedic_common::reboot::configmap_name(lease),
        holds: "its reboot requests",
    }]);
    if publishing {
        all.push(Owned {
            kind: Kind::ConfigMap,
            name: crate::config::published::configmap_name(lease),
            holds: "its settings for kubectl nodemedic",
        });
    }
    all.extend((0..crate::decide::fleet::seen::SHARDS).map(|i| Owned {
        kind: Kind::ConfigMap,
        name: crate::act::recall::configmap_name(lease, i),
        holds: "its record memory",
    }));
    all
}

/// An object the drainer needs that is missing and that it may not make.
#[derive(Debug, thiserror::Error)]
pub enum ObjectError {
    #[error(
        "the {} {namespace}/{name} ({holds}) does not exist, and this drainer's credential may not create it ({}); the shipped manifests create it (deploy/base/drainer-objects.yaml, or the Helm chart): apply them, or create it by hand",
        kind.word(), nodemedic_common::client::said(.source)
    )]
    Missing {
        kind: Kind,
        namespace: String,
        name: String,
        holds: &'static str,
        #[source]
        source: kube::Error,
    },
    #[error("cannot read the {} {namespace}/{name} ({holds}): {}{}", kind.word(),
        nodemedic_common::client::said(.source), rbac_hint(.source))]
    Api {
        kind: Kind,
        namespace: String,
        name: String,
        holds: &'static str,
        #[source]
        source: kube::Error,
    },
}

impl ObjectError {
    /// The API server could not be reached or was not serving (worth waiting for).
    pub fn unreachable(&self) -> bool {
        let (ObjectError::Missing { source, .. } | ObjectError::Api { source, .. }) = self;
        nodemedic_common::client::unreachable(source)
    }
}

/// For a refusal to read (403), where the grant is shipped: a credential made for draino (its
/// ClusterRole reads no Lease, Secret or ConfigMap) needs the drainer's Role beside it.
fn rbac_hint(e: &kube::Error) -> &'static str {
    match e {
        kube::Error::Api(s) if s.code == 403 => {
            "; the drainer's Role grants it by name (deploy/base/drainer-rbac.yaml, or the Helm chart): a credential made for draino lacks it"
        }
        _ => "",
    }
}

/// Make sure every object in `objects` exists in `namespace`, creating (empty, as the manifests
/// ship them) those missing where the credential allows.
pub async fn ensure(
    client: &kube::Client,
    namespace: &str,
    objects: &[Owned],
) -> Result<(), ObjectError> {
    let mut made = Vec::new();
    for o in objects {
        let meta = drainer_meta(&o.name);
        let outcome = match o.kind {
            Kind::Lease => {
                let empty = Lease {
                    metadata: meta,
                    spec: Some(LeaseSpec::default()),
                };
                one(Api::namespaced(client.clone(), namespace), &o.name, empty).await
            }
            Kind::Secret => {
                let empty = Secret {
                    metadata: meta,
                    type_: Some("Opaque".into()),
                    ..Default::default()
                };
                one(Api::namespaced(client.clone(), namespace), &o.name, empty).await
            }
            Kind::ConfigMap => {
                let empty = ConfigMap {
                    metadata: meta,
                    ..Default::default()
                };
                one(Api::namespaced(client.clone(), namespace), &o.name, empty).await
            }
        };
        match outcome {
            Ok(false) => {}
            Ok(true) => made.push(format!("{} {}", o.kind.word(), o.name)),
            Err(Failed::Create(source)) => {
                return Err(ObjectError::Missing {
                    kind: o.kind,
                    namespace: namespace.into(),
                    name: o.name.clone(),
                    holds: o.holds,
                    source,
                });
            }
            Err(Failed::Read(source)) => {
                return Err(ObjectError::Api {
                    kind: o.kind,
                    namespace: namespace.into(),
                    name: o.name.clone(),
                    holds: o.holds,
                    source,
                });
            }
        }
    }
    if !made.is_empty() {
        tracing::warn!(%namespace, made = %made.join(", "),
            "created the drainer's missing objects (its credential may create them; the shipped manifests make them and grant no create)");
    }
    Ok(())
}

enum Failed {
    Read(kube::Error),
    Create(kube::Error),
}

/// Whether `name` had to be created (as `empty`).
async fn one<K>(api: Api<K>, name: &str, empty: K) -> Result<bool, Failed>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + serde::Serialize + std::fmt::Debug,
{
    if api.get_opt(name).await.map_err(Failed::Read)?.is_some() {
        return Ok(false);
    }
    match api.create(&PostParams::default(), &empty).await {
        Ok(_) => Ok(true),
        // Another replica made it first.
        Err(kube::Error::Api(s)) if s.code == 409 => Ok(false),
        Err(e) => Err(Failed::Create(e)),
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

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(code: u16, message: &str, reason: &str) -> kube::Error {
        kube::Error::Api(
            kube::core::Status::failure(message, reason)
                .with_code(code)
                .boxed(),
        )
    }

    fn lease_unread(source: kube::Error) -> ObjectError {
        ObjectError::Api {
            kind: Kind::Lease,
            namespace: "kube-system".into(),
            name: "draino".into(),
            holds: "its leader election",
            source,
        }
    }

    #[test]
    fn a_refusal_to_read_names_the_api_servers_words_and_the_role_that_grants_it() {
        // kube-apiserver's own 403 names the user, verb, resource and namespace.
        let e = lease_unread(refused(
            403,
            "leases.coordination.k8s.io \"draino\" is forbidden: User \"system:serviceaccount:kube-system:draino\" cannot get resource \"leases\" in API group \"coordination.k8s.io\" in the namespace \"kube-system\"",
            "Forbidden",
        ));
        let said = e.to_string();
        assert!(said.starts_with("cannot read the Lease kube-system/draino (its leader election): leases.coordination.k8s.io \"draino\" is forbidden: User \"system:serviceaccount:kube-system:draino\" cannot get resource \"leases\""), "{said}");
        assert!(said.contains("(Forbidden, HTTP 403)"), "{said}");
        assert!(said.contains("deploy/base/drainer-rbac.yaml"), "{said}");
        assert!(!e.unreachable(), "a refusal is not waited for");
    }

    #[test]
    fn an_api_server_not_serving_is_waited_for_and_says_no_rbac_hint() {
        for code in [500, 503, 429] {
            let e = lease_unread(refused(code, "etcdserver: leader changed", "InternalError"));
            assert!(e.unreachable(), "{code}");
            assert!(!e.to_string().contains("drainer-rbac"), "{code}");
        }
        for code in [401, 404, 409, 422] {
            assert!(
                !lease_unread(refused(code, "m", "r")).unreachable(),
                "{code}"
            );
        }
    }
}
