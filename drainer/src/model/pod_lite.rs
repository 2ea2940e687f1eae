//! A Pod as the drainer's watch decodes it, pure: only the fields a [`super::pod::PodInfo`] is
//! projected from, under the names and in the shapes of k8s-openapi's `Pod` (so the projection reads
//! both alike). A kubelet's Pod is mostly what the drainer never reads: `managedFields` (a third of
//! it, each entry a JSON tree), the containers' specs, images, ports, probes, environment and
//! mounts, the volumes' sources, the statuses' images and IDs. Here those are skipped while the
//! text is read, not decoded into objects dropped a moment later: 650,000 pods listed by a new leader
//! cost their text and the kept fields, not a full `Pod` each.
//!
//! Fields decode as k8s-openapi decodes them (a required string absent is empty, times are its
//! `Time`), so a Pod this refuses is one a full decode would refuse as well (it is left out as
//! malformed).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Pod, Toleration};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference, Time};
use serde::Deserialize;
use serde::de::IgnoredAny;

/// What the watch keeps of a Pod. `metadata` holds only the fields read (never `managedFields`).
#[derive(Debug, Clone, Default, Deserialize)]
pub struct PodLite {
    #[serde(default, deserialize_with = "metadata")]
    pub(crate) metadata: ObjectMeta,
    pub(crate) spec: Option<SpecLite>,
    pub(crate) status: Option<StatusLite>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct SpecLite {
    pub(crate) node_name: Option<String>,
    pub(crate) priority: Option<i32>,
    pub(crate) priority_class_name: Option<String>,
    pub(crate) termination_grace_period_seconds: Option<i64>,
    pub(crate) readiness_gates: Option<Vec<GateLite>>,
    pub(crate) tolerations: Option<Vec<Toleration>>,
    pub(crate) volumes: Option<Vec<VolumeLite>>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct GateLite {
    #[serde(default)]
    pub(crate) condition_type: String,
}

/// A volume: whether it is an emptyDir, and whether the pod's own spec names the server its data is
/// on (its source's fields are skipped).
#[derive(Debug, Clone, Default)]
pub(crate) struct VolumeLite {
    pub(crate) empty_dir: Option<IgnoredAny>,
    /// A source other than [`NODE_LOCAL_SOURCES`]: an inline NFS, iSCSI, CephFS, CSI (its driver
    /// and attributes as the pod says), ... volume. A tenant can point one at a server it runs and
    /// then stop that server: the pod's processes hang in the kernel where no kubelet can kill them.
    pub(crate) own_server: bool,
}

/// The volume sources whose data the pod's spec cannot put on a server of its choosing: the node's
/// own (an emptyDir, a host path, an image), the API server's (a Secret, a ConfigMap, the downward
/// API, projected), and a claim (its volume is the cluster operators' PersistentVolume or their
/// provisioner's). Any other key a volume carries, including a kind added to Kubernetes later, is a
/// source the pod names itself.
pub(crate) const NODE_LOCAL_SOURCES: [&str; 10] = [
    "name",
    "emptyDir",
    "hostPath",
    "image",
    "secret",
    "configMap",
    "downwardAPI",
    "projected",
    "persistentVolumeClaim",
    "ephemeral",
];

impl<'de> Deserialize<'de> for VolumeLite {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Keys;
        impl<'de> serde::de::Visitor<'de> for Keys {
            type Value = VolumeLite;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a volume")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<VolumeLite, A::Error> {
                let mut v = VolumeLite::default();
                while let Some(key) = map.next_key::<Source>()? {
                    let value: Option<IgnoredAny> = map.next_value()?;
                    match key {
                        Source::EmptyDir => v.empty_dir = value,
                        Source::Local => {}
                        Source::Other => v.own_server |= value.is_some(),
                    }
                }
                Ok(v)
            }
        }
        d.deserialize_map(Keys)
    }
}

/// A volume's key, classified as it is read (no string kept).
enum Source {
    EmptyDir,
    Local,
    Other,
}

impl<'de> Deserialize<'de> for Source {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_identifier(super::intern::TextVisitor(|k: &str| match k {
            "emptyDir" => Source::EmptyDir,
            k if NODE_LOCAL_SOURCES.contains(&k) => Source::Local,
            _ => Source::Other,
        }))
    }
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct StatusLite {
    pub(crate) phase: Option<String>,
    pub(crate) conditions: Option<Vec<ConditionLite>>,
    pub(crate) init_container_statuses: Option<Vec<ContainerLite>>,
    pub(crate) container_statuses: Option<Vec<ContainerLite>>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ConditionLite {
    #[serde(rename = "type", default)]
    pub(crate) type_: String,
    #[serde(default)]
    pub(crate) status: String,
    pub(crate) last_transition_time: Option<Time>,
}

/// A container's status: only its state (name, image, IDs, restarts and the last state skipped).
#[derive(Debug, Clone, Default, Deserialize)]
pub(crate) struct ContainerLite {
    pub(crate) state: Option<StateLite>,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub(crate) struct StateLite {
    pub(crate) waiting: Option<WaitingLite>,
    pub(crate) running: Option<RunningLite>,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub(crate) struct WaitingLite {
    pub(crate) reason: Option<String>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct RunningLite {
    pub(crate) started_at: Option<Time>,
}

/// The metadata fields read: the identity (kube's watcher reads the resourceVersion), the times, the
/// controlling owner, labels and annotations.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct MetaLite {
    name: Option<String>,
    namespace: Option<String>,
    uid: Option<String>,
    resource_version: Option<String>,
    creation_timestamp: Option<Time>,
    deletion_timestamp: Option<Time>,
    labels: Option<BTreeMap<String, String>>,
    annotations: Option<BTreeMap<String, String>>,
    owner_references: Option<Vec<OwnerReference>>,
}

fn metadata<'de, D: serde::Deserializer<'de>>(d: D) -> Result<ObjectMeta, D::Error> {
    let m = Option::<MetaLite>::deserialize(d)?;
    Ok(m.map(|m| ObjectMeta {
        name: m.name,
        namespace: m.namespace,
        uid: m.uid,
        resource_version: m.resource_version,
        creation_timestamp: m.creation_timestamp,
        deletion_timestamp: m.deletion_timestamp,
        labels: m.labels,
        annotations: m.annotations,
        owner_references: m.owner_references,
        ..Default::default()
    })
    .unwrap_or_default())
}

impl From<&Pod> for PodLite {
    /// The same fields taken from a full Pod (`drainer plan`'s files, tests, the in-memory cluster).
    fn from(pod: &Pod) -> PodLite {
        let m = &pod.metadata;
        let containers = |cs: &Option<Vec<k8s_openapi::api::core::v1::ContainerStatus>>| {
            cs.as_ref().map(|cs| {
                cs.iter()
                    .map(|c| ContainerLite {
                        state: c.state.as_ref().map(|s| StateLite {
                            waiting: s.waiting.as_ref().map(|w| WaitingLite {
                                reason: w.reason.clone(),
                            }),
                            running: s.running.as_ref().map(|r| RunningLite {
                                started_at: r.started_at.clone(),
                            }),
                        }),
                    })
                    .collect()
            })
        };
        PodLite {
            metadata: ObjectMeta {
                name: m.name.clone(),
                namespace: m.namespace.clone(),
                uid: m.uid.clone(),
                resource_version: m.resource_version.clone(),
                creation_timestamp: m.creation_timestamp.clone(),
                deletion_timestamp: m.deletion_timestamp.clone(),
                labels: m.labels.clone(),
                annotations: m.annotations.clone(),
                owner_references: m.owner_references.clone(),
                ..Default::default()
            },
            spec: pod.spec.as_ref().map(|s| SpecLite {
                node_name: s.node_name.clone(),
                priority: s.priority,
                priority_class_name: s.priority_class_name.clone(),
                termination_grace_period_seconds: s.termination_grace_period_seconds,
                readiness_gates: s.readiness_gates.as_ref().map(|gs| {
                    gs.iter()
                        .map(|g| GateLite {
                            condition_type: g.condition_type.clone(),
                        })
                        .collect()
                }),
                tolerations: s.tolerations.clone(),
                volumes: s.volumes.as_ref().map(|vs| {
                    vs.iter()
                        .map(|v| {
                            // Read through JSON as the watch reads it: one list of sources.
                            serde_json::to_value(v)
                                .ok()
                                .and_then(|v| serde_json::from_value(v).ok())
                                .unwrap_or_default()
                        })
                        .collect()
                }),
            }),
            status: pod.status.as_ref().map(|s| StatusLite {
                phase: s.phase.clone(),
                conditions: s.conditions.as_ref().map(|cs| {
                    cs.iter()
                        .map(|c| ConditionLite {
                            type_: c.type_.clone(),
                            status: c.status.clone(),
                            last_transition_time: c.last_transition_time.clone(),
                        })
                        .collect()
                }),
                init_container_statuses: containers(&s.init_container_statuses),
                container_statuses: containers(&s.container_statuses),
            }),
        }
    }
}

impl kube::Resource for PodLite {
    type DynamicType = ();
    type Scope = k8s_openapi::NamespaceResourceScope;

    fn kind(_: &()) -> std::borrow::Cow<'_, str> {
        "Pod".into()
    }
    fn group(_: &()) -> std::borrow::Cow<'_, str> {
        "".into()
    }
    fn version(_: &()) -> std::borrow::Cow<'_, str> {
        "v1".into()
    }
    fn plural(_: &()) -> std::borrow::Cow<'_, str> {
        "pods".into()
    }
    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }
    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

#[cfg(test)]
mod tests;
