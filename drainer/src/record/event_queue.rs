//! New Events written behind the decisions, I/O: a few lanes, each a task writing its Events one
//! after another, so an Event never holds up the write it tells of (a burst of 500 cordons would
//! otherwise wait for 1,500 Events, three round trips per node). An object's Events always take the
//! same lane: they reach the API server in the order they happened. A full lane makes the writer
//! wait (nothing dropped); Events still queued when the drainer stops are lost with it, as
//! client-go's broadcaster loses its own (Events are best-effort in Kubernetes).

use std::hash::{DefaultHasher, Hash, Hasher};

use nodemedic_common::events::NodeEvent;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use crate::model::cluster::{ApiError, Cluster, EventTarget, Gated};

/// Lanes: Events written at once (the round's own writes go 16 at a time).
const LANES: usize = 4;
/// Events waiting per lane before a writer waits.
const LANE_QUEUE: usize = 512;

/// One Event to create.
struct Queued {
    target: EventTarget,
    ev: NodeEvent,
}

/// The sending end of the lanes. Cheap to clone.
#[derive(Clone)]
pub(crate) struct EventQueue {
    lanes: std::sync::Arc<[mpsc::Sender<Queued>]>,
}

impl EventQueue {
    /// Start the lanes writing through `cluster` (the leadership gate applies when each is sent).
    pub(crate) fn start<C: Cluster>(cluster: Gated<C>) -> (EventQueue, Vec<JoinHandle<()>>) {
        let (lanes, tasks): (Vec<_>, Vec<_>) = (0..LANES)
            .map(|_| {
                let (tx, rx) = mpsc::channel(LANE_QUEUE);
                (tx, tokio::spawn(lane(cluster.clone(), rx)))
            })
            .unzip();
        let lanes = lanes.into();
        (EventQueue { lanes }, tasks)
    }

    /// Queue `ev` about `target` on its object's lane; waits only while that lane is full.
    pub(crate) async fn send(&self, target: EventTarget, ev: NodeEvent) {
        let lane = &self.lanes[lane_of(&target, self.lanes.len())];
        // Closed only once the drainer stops (its lanes aborted): the Event goes with it.
        let _ = lane.send(Queued { target, ev }).await;
    }
}

/// The lane of `target`'s object: a node's Events and its pods' share one.
fn lane_of(target: &EventTarget, lanes: usize) -> usize {
    let key = match target {
        EventTarget::Node(node) => node.as_str(),
        EventTarget::Object { host, .. } if !host.is_empty() => host.as_str(),
        EventTarget::Object { regarding, .. } => regarding.name.as_deref().unwrap_or(""),
    };
    let mut h = DefaultHasher::new();
    key.hash(&mut h);
    (h.finish() % lanes as u64) as usize
}

async fn lane<C: Cluster>(cluster: Gated<C>, mut rx: mpsc::Receiver<Queued>) {
    while let Some(Queued { target, ev }) = rx.recv().await {
        write(&cluster, &target, &ev).await;
    }
}

/// Create one Event; a failure is logged (a replica that lost the Lease writes none, silently).
pub(super) async fn write<C: Cluster>(cluster: &Gated<C>, target: &EventTarget, ev: &NodeEvent) {
    match cluster.event(target, ev, None).await {
        Ok(_) | Err(ApiError::NotLeading) => {}
        Err(e) => {
            let reason = &ev.reason;
            tracing::warn!(%target, %reason, error = %e, "cannot write event")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_node_and_its_pods_share_a_lane_and_nodes_spread_over_all() {
        let node = EventTarget::Node("n1".into());
        let pod = EventTarget::Object {
            regarding: k8s_openapi::api::core::v1::ObjectReference {
                kind: Some("Pod".into()),
                name: Some("p".into()),
                ..Default::default()
            },
            host: "n1".into(),
        };
        assert_eq!(lane_of(&node, LANES), lane_of(&pod, LANES));
        let used: std::collections::HashSet<usize> = (0..64)
            .map(|i| lane_of(&EventTarget::Node(format!("node-{i}")), LANES))
            .collect();
        assert_eq!(used.len(), LANES);
    }
}
