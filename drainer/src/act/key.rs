//! The drainer's record key (see [`crate::model::seal`]), I/O: kept in a Secret in the drainer's
//! namespace, `<lease name>-record-key` by default, that the manifests ship empty. The first
//! drainer to start fills it with a random key (an update with the Secret's resourceVersion, so two
//! replicas starting together agree on one key); every later start reads it.
//!
//! Why the manifests make the Secret and the drainer only fills it: creating Secrets cannot be
//! limited to one name by RBAC, and whoever may create Secrets in `kube-system` can mint a token for
//! any ServiceAccount there (a `kubernetes.io/service-account-token` Secret). With `get` and
//! `update` on this one name, the drainer holds no more than its own key.

use std::collections::BTreeMap;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use kube::Api;
use kube::api::PostParams;

use crate::model::seal::{KeyTooShort, SealKey, random_bytes};

/// The Secret's data key that holds the record key.
pub(crate) const DATA_KEY: &str = "key";

/// The Secret's default name for a drainer with Lease `lease`.
pub(crate) fn default_secret(lease: &str) -> String {
    format!("{lease}-record-key")
}

/// Why the record key could not be had.
#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    #[error(
        "the drain record key Secret {namespace}/{name} does not exist; the shipped manifests create it empty (the drainer fills it): `kubectl -n {namespace} create secret generic {name}`"
    )]
    Missing { namespace: String, name: String },
    #[error("cannot read or fill the drain record key Secret {namespace}/{name}: {}", nodemedic_common::client::said(.source))]
    Api {
        namespace: String,
        name: String,
        #[source]
        source: kube::Error,
    },
    #[error("the drain record key Secret {namespace}/{name}: {source}")]
    TooShort {
        namespace: String,
        name: String,
        #[source]
        source: KeyTooShort,
    },
    #[error(
        "the drain record key Secret {namespace}/{name} kept changing while it was being filled"
    )]
    Contended { namespace: String, name: String },
}

impl KeyError {
    /// The API server could not be reached or was not serving (worth waiting for).
    pub fn unreachable(&self) -> bool {
        matches!(self, KeyError::Api { source, .. } if nodemedic_common::client::unreachable(source))
    }
}

/// The record key from Secret `namespace/name`, filled with a new random key if it holds none.
pub(crate) async fn load(
    client: kube::Client,
    namespace: &str,
    name: &str,
) -> Result<SealKey, KeyError> {
    let api: Api<Secret> = Api::namespaced(client, namespace);
    let api_error = |source| KeyError::Api {
        namespace: namespace.into(),
        name: name.into(),
        source,
    };
    for _ in 0..5 {
        let Some(mut secret) = api.get_opt(name).await.map_err(api_error)? else {
            return Err(KeyError::Missing {
                namespace: namespace.into(),
                name: name.into(),
            });
        };
        if let Some(key) = secret.data.as_ref().and_then(|d| d.get(DATA_KEY)) {
            return SealKey::new(&key.0).map_err(|source| KeyError::TooShort {
                namespace: namespace.into(),
                name: name.into(),
                source,
            });
        }
        secret
            .data
            .get_or_insert_with(BTreeMap::new)
            .insert(DATA_KEY.into(), ByteString(random_bytes().to_vec()));
        match api.replace(name, &PostParams::default(), &secret).await {
            Ok(_) => tracing::info!(%namespace, %name, "made the drain record key"),
            // Another replica filled it first: read theirs.
            Err(kube::Error::Api(e)) if e.code == 409 => {}
            Err(e) => return Err(api_error(e)),
        }
    }
    Err(KeyError::Contended {
        namespace: namespace.into(),
        name: name.into(),
    })
}
