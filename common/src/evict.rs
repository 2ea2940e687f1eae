//! Evicting a pod through the `policy/v1` Eviction subresource: the one way the drainer and the
//! detector remove pods, so PodDisruptionBudgets are honoured by the API server.
//!
//! The Eviction body is built here by hand on purpose: kube-core 5's `Api::evict` serialises its
//! `delete_options` under the snake_case key, which the API server does not know, so the grace period
//! would be silently dropped and every pod would get its own (possibly very long) one.

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::policy::v1::Eviction;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{DeleteOptions, ObjectMeta, Status};
use kube::api::{Api, PostParams};

/// What the API server said to an eviction.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Evicted {
    /// Accepted: the pod is being deleted.
    Accepted,
    /// The pod is already gone (404).
    Gone,
    /// Refused by a PodDisruptionBudget (429), with the server's message; retry later.
    Refused(String),
}

/// Ask the API server to evict `namespace/name`, with `grace_seconds` when given.
pub async fn evict(
    client: &kube::Client,
    namespace: &str,
    name: &str,
    grace_seconds: Option<i64>,
) -> Result<Evicted, kube::Error> {
    let api: Api<Pod> = Api::namespaced(client.clone(), namespace);
    let eviction = Eviction {
        metadata: ObjectMeta {
            name: Some(name.to_string()),
            namespace: Some(namespace.to_string()),
            ..Default::default()
        },
        delete_options: grace_seconds.map(|g| DeleteOptions {
            grace_period_seconds: Some(g),
            ..Default::default()
        }),
    };
    match api
        .create_subresource::<Eviction, Status>("eviction", name, &PostParams::default(), &eviction)
        .await
    {
        Ok(_) => Ok(Evicted::Accepted),
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(Evicted::Gone),
        Err(kube::Error::Api(s)) if s.code == 429 => Ok(Evicted::Refused(s.message)),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_grace_period_is_sent_under_the_key_the_api_server_reads() {
        let e = Eviction {
            metadata: ObjectMeta::default(),
            delete_options: Some(DeleteOptions {
                grace_period_seconds: Some(7),
                ..Default::default()
            }),
        };
        let v = serde_json::to_value(&e).unwrap();
        assert_eq!(v["deleteOptions"]["gracePeriodSeconds"], 7, "{v}");
    }
}
