//! What the drainer did to a node, kept as JSON in the node annotation `nodemedic.io/drain`. It is the
//! drainer's only state: a restarted or new leader reads it back from the Nodes.

use k8s_openapi::api::core::v1::Node;
use k8s_openapi::jiff::Timestamp;
use nodemedic_common::keys::DRAIN_RECORD_ANNOTATION;

#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Phase {
    /// Cordoned; the drain waits for its time.
    Cordoned,
    /// Evicting pods.
    Draining,
    /// All evictable pods are gone.
    Drained,
    /// The last drain failed; retried after `retry_at`.
    Failed,
    /// A person uncordoned the node during this episode: not cordoned again until the problem changes.
    Released,
}

#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Record {
    /// The drainer that owns the record (its Lease name): two drainers with disjoint selectors never
    /// act on, or count, each other's nodes. Empty in records written before owners were recorded:
    /// those belong to whichever drainer selects the node.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub owner: String,
    /// Identity of the problem episode: the matched conditions with their transition times.
    pub episode: String,
    /// Human-readable: which conditions, since when.
    pub reason: String,
    pub phase: Phase,
    pub cordoned_at: Timestamp,
    /// Not drained before this time (cordon time + drain buffer).
    pub drain_at: Timestamp,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub drain_started: Option<Timestamp>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished_at: Option<Timestamp>,
    #[serde(default)]
    pub attempts: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_at: Option<Timestamp>,
}

impl Record {
    /// Read from a node; an unparsable record is reported and ignored.
    pub fn of(node: &Node) -> Option<Record> {
        let raw = node
            .metadata
            .annotations
            .as_ref()?
            .get(DRAIN_RECORD_ANNOTATION)?;
        match serde_json::from_str(raw) {
            Ok(r) => Some(r),
            Err(e) => {
                tracing::warn!(node = node.metadata.name.as_deref().unwrap_or(""), error = %e, "ignoring an unreadable drain record");
                None
            }
        }
    }

    pub fn to_annotation(&self) -> String {
        serde_json::to_string(self).expect("record serialises")
    }

    /// Whether a drainer named `owner` may act on this record of a node it does (`selected`) or does
    /// not select.
    pub fn owned_by(&self, owner: &str, selected: bool) -> bool {
        if self.owner.is_empty() {
            selected
        } else {
            self.owner == owner
        }
    }

    /// Still cordoned by us (not released to a person).
    pub fn holds_cordon(&self) -> bool {
        self.phase != Phase::Released
    }
}
