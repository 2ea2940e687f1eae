//! Where a pod bound to a node stands in starting or stopping, when that may say something about the
//! node ([`Progress`]): a pod that waits to start, or one deleted that does not go. Projected once
//! when the pod is cached, and absent (no allocation) for the pods that simply run or have finished.
//! Also the latest time a pod's container started, which the pod index keeps per node. Pure.

use k8s_openapi::jiff::Timestamp;

use super::intern::{ArcStr, intern};
use super::pod_lite::PodLite;
use super::uid::Uid;

/// A pod's trouble starting or stopping.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Progress {
    /// Bound to its node and not yet running: since it was bound (PodScheduled's transition, else
    /// its creation).
    pub(crate) waiting_since: Option<Timestamp>,
    /// What its first waiting container waits for, as the kubelet says (`ContainerCreating`,
    /// `ImagePullBackOff`, ...); none before the kubelet has said anything.
    pub(crate) waiting_reason: Option<ArcStr>,
    /// Deleted and still there: when its grace period ended (`deletionTimestamp`).
    pub(crate) deleting_after: Option<Timestamp>,
    /// Deleted and a container of it still reported running: the kubelet has not stopped it. A
    /// deleted pod whose containers stopped is held by a finalizer, its owner's doing, not the
    /// node's.
    pub(crate) still_running: bool,
    /// A volume of it is on a server its own spec names (an inline NFS, iSCSI, CSI, ... volume):
    /// when that server goes, its processes hang where the kubelet cannot stop them, by its owner's
    /// doing ([`super::pod_lite::VolumeLite::own_server`]).
    pub(crate) own_server: bool,
    /// Its controlling owner: an owner whose pods wait on several nodes is the owner's problem (an
    /// image that does not exist), not a node's.
    pub(crate) owner: Option<Uid>,
}

/// The pod's progress, when it is waiting on its node or being deleted; `None` otherwise.
pub(crate) fn progress(pod: &PodLite) -> Option<Box<Progress>> {
    let spec = pod.spec.as_ref()?;
    spec.node_name.as_ref()?;
    let status = pod.status.as_ref();
    let phase = status.and_then(|s| s.phase.as_deref());
    let deleting_after = pod.metadata.deletion_timestamp.as_ref().map(|t| t.0);
    let waiting = phase.is_none_or(|p| p == "Pending") && deleting_after.is_none();
    if !waiting && deleting_after.is_none() {
        return None;
    }
    let bound = status
        .and_then(|s| s.conditions.as_ref())
        .and_then(|cs| {
            cs.iter()
                .find(|c| c.type_ == "PodScheduled" && c.status == "True")
        })
        .and_then(|c| c.last_transition_time.as_ref())
        .or(pod.metadata.creation_timestamp.as_ref())
        .map(|t| t.0);
    let waiting_reason = status
        .and_then(|s| {
            s.init_container_statuses
                .iter()
                .chain(&s.container_statuses)
                .flatten()
                .find_map(|c| c.state.as_ref()?.waiting.as_ref()?.reason.as_deref())
        })
        .map(intern);
    let still_running = deleting_after.is_some()
        && status.is_some_and(|s| {
            s.init_container_statuses
                .iter()
                .chain(&s.container_statuses)
                .flatten()
                .any(|c| c.state.as_ref().is_some_and(|st| st.running.is_some()))
        });
    let own_server = spec.volumes.iter().flatten().any(|v| v.own_server);
    let owner = pod
        .metadata
        .owner_references
        .as_ref()
        .and_then(|o| o.iter().find(|o| o.controller == Some(true)))
        .map(|o| Uid::parse(&o.uid));
    Some(Box::new(Progress {
        waiting_since: if waiting { bound } else { None },
        waiting_reason: waiting.then_some(waiting_reason).flatten(),
        deleting_after,
        still_running,
        own_server,
        owner,
    }))
}

/// The latest time one of the pod's containers started running, if one runs.
pub(crate) fn latest_start(pod: &PodLite) -> Option<Timestamp> {
    let status = pod.status.as_ref()?;
    status
        .container_statuses
        .iter()
        .flatten()
        .filter_map(|c| c.state.as_ref()?.running.as_ref()?.started_at.as_ref())
        .map(|t| t.0)
        .max()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Decoded as the watch decodes pods.
    fn pod(json: serde_json::Value) -> PodLite {
        serde_json::from_value(json).unwrap()
    }

    #[test]
    fn a_bound_pending_pod_waits_since_it_was_bound_with_the_kubelets_reason() {
        let p = pod(serde_json::json!({
            "metadata": {"name": "a", "namespace": "n", "creationTimestamp": "2026-11-27T09:00:00Z",
                "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs", "uid": "0b5e0f65-3c8e-4c0e-9a52-3f1a2d4c5e6f", "controller": true}]},
            "spec": {"nodeName": "n1", "containers": []},
            "status": {"phase": "Pending",
                "conditions": [{"type": "PodScheduled", "status": "True", "lastTransitionTime": "2026-11-27T09:01:00Z"}],
                "containerStatuses": [{"name": "c", "image": "i", "imageID": "", "ready": false, "restartCount": 0,
                    "state": {"waiting": {"reason": "ContainerCreating"}}}]}
        }));
        let got = progress(&p).unwrap();
        assert_eq!(
            got.waiting_since,
            Some("2026-11-27T09:01:00Z".parse().unwrap())
        );
        assert_eq!(got.waiting_reason.as_deref(), Some("ContainerCreating"));
        assert_eq!(got.deleting_after, None);
        assert_eq!(
            got.owner.unwrap().to_string(),
            "0b5e0f65-3c8e-4c0e-9a52-3f1a2d4c5e6f"
        );
    }

    #[test]
    fn running_unbound_and_finished_pods_have_none_and_a_deleted_one_says_when_it_should_be_gone() {
        let running = pod(serde_json::json!({
            "metadata": {"name": "a"}, "spec": {"nodeName": "n1", "containers": []},
            "status": {"phase": "Running", "containerStatuses": [{"name": "c", "image": "i", "imageID": "", "ready": true, "restartCount": 0,
                "state": {"running": {"startedAt": "2026-11-27T09:05:00Z"}}}]}
        }));
        assert_eq!(progress(&running), None);
        assert_eq!(
            latest_start(&running),
            Some("2026-11-27T09:05:00Z".parse().unwrap())
        );
        let unbound = pod(
            serde_json::json!({"metadata": {"name": "a"}, "spec": {"containers": []}, "status": {"phase": "Pending"}}),
        );
        assert_eq!(progress(&unbound), None);
        let done = pod(
            serde_json::json!({"metadata": {"name": "a"}, "spec": {"nodeName": "n1", "containers": []}, "status": {"phase": "Succeeded"}}),
        );
        assert_eq!(progress(&done), None);
        let deleting = pod(serde_json::json!({
            "metadata": {"name": "a", "deletionTimestamp": "2026-11-27T09:10:00Z"},
            "spec": {"nodeName": "n1", "containers": []}, "status": {"phase": "Running"}
        }));
        let got = progress(&deleting).unwrap();
        assert_eq!(
            (got.waiting_since, got.deleting_after),
            (None, Some("2026-11-27T09:10:00Z".parse().unwrap()))
        );
        assert!(
            !got.still_running,
            "no container reported running: a finalizer holds it"
        );
        let running_on = pod(serde_json::json!({
            "metadata": {"name": "a", "deletionTimestamp": "2026-11-27T09:10:00Z"},
            "spec": {"nodeName": "n1", "containers": []}, "status": {"phase": "Running",
                "containerStatuses": [{"name": "c", "image": "i", "imageID": "", "ready": true, "restartCount": 0,
                    "state": {"running": {"startedAt": "2026-11-27T09:05:00Z"}}}]}
        }));
        assert!(progress(&running_on).unwrap().still_running);
    }
}
