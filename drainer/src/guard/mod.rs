//! The Kosmos eviction guard: a validating admission webhook that stops the node lifecycle controller
//! from deleting (or evicting) pods of a Kosmos leaf node while that node is not Ready, since Kosmos
//! would propagate those deletions into the member cluster during a mere network flap.
//!
//! [`read_review`] and [`decide`] are pure: the request's body and Content-Type, then the extracted
//! request, what the node cache knows, and the configuration. The HTTPS server around them is in
//! `server`.

pub mod limit;
pub(crate) mod machine_tie;
pub(crate) mod machines;
pub mod server;

use kube::core::DynamicObject;
use kube::core::admission::{AdmissionRequest, AdmissionReview, Operation};

/// The one AdmissionReview version the webhook declares (`admissionReviewVersions: [v1]`).
pub(crate) const REVIEW_API_VERSION: &str = "admission.k8s.io/v1";

/// Why a request to the guard is not an AdmissionReview it answers: the HTTP status and what to say.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Malformed {
    pub(crate) status: u16,
    pub(crate) message: String,
}

impl Malformed {
    fn bad(message: String) -> Self {
        Malformed {
            status: 400,
            message,
        }
    }
}

/// The admission request in a POST to the guard: JSON (`Content-Type: application/json`, as the API
/// server sends it), an `admission.k8s.io/v1` `AdmissionReview` (the only version the webhook
/// declares), and a request in it. Anything else is refused before it is looked at further: 415 for
/// another media type, 400 for the rest.
pub fn read_review(
    content_type: Option<&str>,
    body: &[u8],
) -> Result<AdmissionRequest<DynamicObject>, Malformed> {
    let media = content_type.map(|c| c.split(';').next().unwrap_or_default().trim());
    if !media.is_some_and(|m| m.eq_ignore_ascii_case("application/json")) {
        return Err(Malformed {
            status: 415,
            message: format!(
                "expected Content-Type: application/json, got {}",
                content_type.map_or_else(|| "none".to_string(), |c| format!("{c:?}"))
            ),
        });
    }
    let review: AdmissionReview<DynamicObject> = serde_json::from_slice(body).map_err(|e| {
        Malformed::bad(format!(
            "malformed AdmissionReview (expected {REVIEW_API_VERSION} JSON): {e}"
        ))
    })?;
    if review.types.api_version != REVIEW_API_VERSION || review.types.kind != "AdmissionReview" {
        return Err(Malformed::bad(format!(
            "malformed AdmissionReview: apiVersion {:?}, kind {:?}; expected {REVIEW_API_VERSION}, AdmissionReview",
            review.types.api_version, review.types.kind
        )));
    }
    review
        .try_into()
        .map_err(|_| Malformed::bad("malformed AdmissionReview: it has no request".to_string()))
}

/// What the guard is configured with.
#[derive(Debug, Clone)]
pub struct GuardConfig {
    /// Requesters whose deletions are guarded (default: [`DEFAULT_USERS`]).
    pub users: Vec<String>,
    /// The label marking leaf nodes, `(key, value)`.
    pub node_label: (String, String),
    /// A node's PodDeletionBlocked Event is updated at most this often (the count is never lost).
    pub event_interval: std::time::Duration,
    /// A connection that has not sent a request's headers within this time is closed (slowloris).
    pub header_timeout: std::time::Duration,
    /// A request (body included) that is not answered within this time gets 408.
    pub request_timeout: std::time::Duration,
    /// Connections served at once; more are closed at accept (each costs memory in the drainer).
    pub max_connections: usize,
    /// Bytes of request bodies held at once, over every connection; a request that would go over is
    /// shed with 503 before its body is read (the API server's `failurePolicy: Ignore` then admits
    /// the deletion: the guard fails open), and counted.
    pub max_bytes_in_flight: usize,
    /// The longest AdmissionReview taken (a Pod of etcd's 1.5 MiB limit, twice, with room).
    pub max_request_bytes: usize,
}

/// Who deletes pods of an unreachable node: the node lifecycle controller (its taint manager) as its
/// own service account when kube-controller-manager runs with `--use-service-account-credentials`
/// (kubeadm's setting), else as the controller manager's own user (the flag's default).
pub const DEFAULT_USERS: [&str; 2] = [
    "system:serviceaccount:kube-system:node-controller",
    "system:kube-controller-manager",
];

impl Default for GuardConfig {
    fn default() -> Self {
        GuardConfig {
            users: DEFAULT_USERS.iter().map(|u| u.to_string()).collect(),
            node_label: (
                nodemedic_common::keys::KOSMOS_NODE_LABEL.into(),
                nodemedic_common::keys::KOSMOS_NODE_VALUE.into(),
            ),
            event_interval: std::time::Duration::from_secs(60),
            // The API server gives a webhook 10 s at most (timeoutSeconds): nothing legitimate is slower.
            header_timeout: std::time::Duration::from_secs(5),
            request_timeout: std::time::Duration::from_secs(10),
            max_connections: 512,
            max_bytes_in_flight: 32 << 20,
            max_request_bytes: 4 << 20,
        }
    }
}

/// The parts of an AdmissionRequest the guard reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    /// Pod DELETE, or CREATE of pods/eviction; anything else is allowed untouched.
    pub(crate) guarded_operation: bool,
    pub(crate) user: String,
    pub(crate) namespace: String,
    pub(crate) pod: String,
    /// The pod's node, when the request carries the pod (DELETE's oldObject).
    pub(crate) node: Option<String>,
}

impl Request {
    pub fn from_admission(req: &AdmissionRequest<DynamicObject>) -> Request {
        let pods = req.resource.group.is_empty() && req.resource.resource == "pods";
        let sub = req.sub_resource.as_deref().unwrap_or("");
        let guarded_operation = pods
            && ((req.operation == Operation::Delete && sub.is_empty())
                || (req.operation == Operation::Create && sub == "eviction"));
        let node = req
            .old_object
            .as_ref()
            .and_then(|o| o.data.get("spec"))
            .and_then(|s| s.get("nodeName"))
            .and_then(|n| n.as_str())
            .map(String::from);
        Request {
            guarded_operation,
            user: req.user_info.username.clone().unwrap_or_default(),
            namespace: req.namespace.clone().unwrap_or_default(),
            pod: req.name.clone(),
            node,
        }
    }
}

/// What the node cache says about the pod's node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NodeState {
    /// The cache has not synced yet: allow (fail open, like `failurePolicy: Ignore`).
    NotSynced,
    /// The pod's node is not known (pod unknown, or node gone): allow.
    Unknown,
    Known {
        name: String,
        /// The node's labels, shared with the cache (no copy per request).
        labels: crate::model::intern::Map,
        ready: Option<String>,
        /// A `NoExecute` taint the node lifecycle controller puts on an unreachable or not-ready node
        /// ([`FLAP_TAINTS`](crate::model::node::FLAP_TAINTS)), while it is still there. Its taint manager keeps deleting the node's
        /// pods until it removes the taint, which it does only a moment after the node is Ready
        /// again: the guard must not let those deletions through in between.
        flap_taint: Option<crate::model::intern::ArcStr>,
    },
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    Allow(&'static str),
    Deny(String),
}

impl Decision {
    /// Metric label.
    pub(crate) fn label(&self) -> crate::metrics::GuardDecision {
        use crate::metrics::GuardDecision;
        match self {
            Decision::Allow("cache not synced") => GuardDecision::AllowedNotSynced,
            Decision::Allow(_) => GuardDecision::Allowed,
            Decision::Deny(_) => GuardDecision::Denied,
        }
    }
}

/// Deny when all hold: a guarded operation, by a guarded user, on a pod of a leaf node, that node not
/// Ready=True or still tainted `NoExecute` for it. Everything else is allowed.
pub fn decide(req: &Request, node: &NodeState, cfg: &GuardConfig) -> Decision {
    if !req.guarded_operation {
        return Decision::Allow("not a pod deletion or eviction");
    }
    if !cfg.users.iter().any(|u| u == &req.user) {
        return Decision::Allow("requester not guarded");
    }
    match node {
        NodeState::NotSynced => Decision::Allow("cache not synced"),
        NodeState::Unknown => Decision::Allow("node unknown"),
        NodeState::Known {
            name,
            labels,
            ready,
            flap_taint,
        } => {
            if labels.get(&cfg.node_label.0) != Some(cfg.node_label.1.as_str()) {
                return Decision::Allow("not a leaf node");
            }
            let state = match (ready.as_deref(), flap_taint) {
                (Some("True"), None) => return Decision::Allow("node Ready"),
                (Some("True"), Some(taint)) => {
                    format!("is Ready again but still tainted {taint}:NoExecute")
                }
                (r, _) => format!("is not Ready (Ready={})", r.unwrap_or("missing")),
            };
            Decision::Deny(format!(
                "nodemedic guard: deleting pod {}/{} is denied: its node {name} carries {}={} and {state}, and the request comes from {}; \
                 Kosmos would propagate this deletion to the member cluster during a network flap (rule: kosmos-leaf-not-ready)",
                req.namespace, req.pod, cfg.node_label.0, cfg.node_label.1, req.user
            ))
        }
    }
}

/// The PodDeletionBlocked Events, pure: one Event object per node whose count grows. The first
/// denial on a node is due at once, later ones at most every `interval` per node, each time with the
/// whole count, so held-back denials are never lost.
#[derive(Debug, Default)]
pub(crate) struct BlockedEvents {
    nodes: std::collections::HashMap<String, Blocked>,
    /// Nodes with denials not yet handed out: what [`BlockedEvents::due`] looks at, so a flush
    /// costs what is pending, not every node ever denied.
    pending: std::collections::BTreeSet<String>,
}

#[derive(Debug, Default)]
struct Blocked {
    /// The Event's name once written, and what was last handed out for it.
    name: Option<String>,
    event: Option<nodemedic_common::events::NodeEvent>,
    /// Denials not yet handed out.
    unwritten: u32,
    latest: String,
    handed_out: Option<k8s_openapi::jiff::Timestamp>,
}

/// An Event write that is due.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct DueEvent {
    pub(crate) node: String,
    /// Update this Event (its count grows) rather than create one.
    pub(crate) existing: Option<String>,
    pub(crate) event: nodemedic_common::events::NodeEvent,
}

impl BlockedEvents {
    /// One more denial on `node`; `latest` names the pod and the requester.
    pub(crate) fn denied(&mut self, node: &str, latest: String) {
        let b = self.nodes.entry(node.to_string()).or_default();
        b.unwritten += 1;
        b.latest = latest;
        self.pending.insert(node.to_string());
    }

    /// The writes due at `now`, at most `limit` of them (the rest stay pending for the next call:
    /// a partition that makes thousands of leaf nodes deny at once does not become an Event storm).
    /// The counts handed out are kept even if a write then fails: the next one carries them.
    pub(crate) fn due(
        &mut self,
        now: k8s_openapi::jiff::Timestamp,
        interval: std::time::Duration,
        limit: usize,
    ) -> Vec<DueEvent> {
        let mut out = Vec::new();
        let mut handed = Vec::new();
        for node in &self.pending {
            if out.len() >= limit {
                break;
            }
            let Some(b) = self.nodes.get_mut(node) else {
                continue;
            };
            let waited = b
                .handed_out
                .is_none_or(|t| now.duration_since(t).unsigned_abs() >= interval);
            if b.unwritten == 0 || !waited {
                continue;
            }
            let count = b.event.as_ref().map_or(0, |e| e.count) + b.unwritten as i32;
            let first_seen = b.event.as_ref().map_or(now, |e| e.first_seen);
            let event = nodemedic_common::events::NodeEvent {
                source: "nodemedic-guard".into(),
                severity: nodemedic_common::events::Severity::Warning,
                reason: crate::model::occurrence::reason::POD_DELETION_BLOCKED.into(),
                message: format!(
                    "pod deletions blocked while the Kosmos leaf node is not Ready (latest: {})",
                    b.latest
                ),
                count,
                first_seen,
                last_seen: now,
            };
            b.unwritten = 0;
            b.handed_out = Some(now);
            b.event = Some(event.clone());
            out.push(DueEvent {
                node: node.clone(),
                existing: b.name.clone(),
                event,
            });
            handed.push(node.clone());
        }
        for n in handed {
            self.pending.remove(&n);
        }
        out
    }

    /// The Event for `node` was written as `name`.
    pub(crate) fn written(&mut self, node: &str, name: String) {
        if let Some(b) = self.nodes.get_mut(node) {
            b.name = Some(name);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::node::flap_taint;

    const REVIEW: &str = r#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{
        "uid":"u1","kind":{"group":"","version":"v1","kind":"Pod"},
        "resource":{"group":"","version":"v1","resource":"pods"},"name":"web-1","namespace":"app",
        "operation":"DELETE","userInfo":{"username":"system:serviceaccount:kube-system:node-controller"},
        "dryRun":false}}"#;

    #[test]
    fn only_v1_admission_reviews_sent_as_json_are_read() {
        let json = Some("application/json");
        assert_eq!(read_review(json, REVIEW.as_bytes()).unwrap().name, "web-1");
        for ct in ["application/json; charset=utf-8", "Application/JSON"] {
            assert!(read_review(Some(ct), REVIEW.as_bytes()).is_ok(), "{ct}");
        }
        for ct in [None, Some("text/plain"), Some("application/yaml"), Some("")] {
            let e = read_review(ct, REVIEW.as_bytes()).unwrap_err();
            assert_eq!(e.status, 415, "{ct:?}");
            assert!(
                e.message
                    .starts_with("expected Content-Type: application/json"),
                "{e:?}"
            );
        }
        let cases = [
            (
                REVIEW.replace("admission.k8s.io/v1", "admission.k8s.io/v1beta1"),
                "apiVersion \"admission.k8s.io/v1beta1\"",
            ),
            (
                REVIEW.replace("\"kind\":\"AdmissionReview\"", "\"kind\":\"Pod\""),
                "kind \"Pod\"",
            ),
            (
                "{not json".to_string(),
                "malformed AdmissionReview (expected admission.k8s.io/v1 JSON)",
            ),
            (
                r#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"}"#.to_string(),
                "it has no request",
            ),
        ];
        for (body, says) in cases {
            let e = read_review(json, body.as_bytes()).unwrap_err();
            assert_eq!(e.status, 400, "{body}");
            assert!(e.message.contains(says), "{e:?} should say {says}");
        }
    }

    fn req(op: bool, user: &str) -> Request {
        Request {
            guarded_operation: op,
            user: user.into(),
            namespace: "app".into(),
            pod: "web-1".into(),
            node: Some("kosmos-leaf".into()),
        }
    }

    fn leaf(ready: Option<&str>, kosmos: bool) -> NodeState {
        let labels = if kosmos {
            [("kosmos.io/node", "true")].into_iter().collect()
        } else {
            crate::model::intern::Map::default()
        };
        NodeState::Known {
            name: "kosmos-leaf".into(),
            labels,
            ready: ready.map(String::from),
            flap_taint: None,
        }
    }

    #[test]
    fn a_ready_leaf_still_tainted_for_its_flap_is_still_guarded() {
        let cfg = GuardConfig::default();
        let NodeState::Known {
            name,
            labels,
            ready,
            ..
        } = leaf(Some("True"), true)
        else {
            unreachable!()
        };
        let tainted = NodeState::Known {
            name,
            labels,
            ready,
            flap_taint: flap_taint([
                ("node.kubernetes.io/unschedulable", "NoSchedule"),
                ("node.kubernetes.io/unreachable", "NoExecute"),
            ]),
        };
        let Decision::Deny(msg) = decide(&req(true, NC), &tainted, &cfg) else {
            panic!()
        };
        assert!(
            msg.contains("Ready again but still tainted node.kubernetes.io/unreachable:NoExecute"),
            "{msg}"
        );
        assert_eq!(
            flap_taint([("node.kubernetes.io/unreachable", "NoSchedule")]),
            None,
            "only the NoExecute taint makes the taint manager delete pods"
        );
    }

    const NC: &str = "system:serviceaccount:kube-system:node-controller";

    #[test]
    fn denies_only_when_every_condition_holds() {
        let cfg = GuardConfig::default();
        let d = decide(&req(true, NC), &leaf(Some("Unknown"), true), &cfg);
        let Decision::Deny(msg) = d else {
            panic!("{d:?}")
        };
        assert!(
            msg.contains("app/web-1")
                && msg.contains("kosmos-leaf")
                && msg.contains("kosmos-leaf-not-ready"),
            "{msg}"
        );
        assert!(matches!(
            decide(&req(true, NC), &leaf(Some("False"), true), &cfg),
            Decision::Deny(_)
        ));
        assert!(matches!(
            decide(&req(true, NC), &leaf(None, true), &cfg),
            Decision::Deny(_)
        ));
        // any one missing -> allowed
        assert_eq!(
            decide(&req(false, NC), &leaf(Some("Unknown"), true), &cfg),
            Decision::Allow("not a pod deletion or eviction")
        );
        assert_eq!(
            decide(&req(true, "alice"), &leaf(Some("Unknown"), true), &cfg),
            Decision::Allow("requester not guarded")
        );
        assert_eq!(
            decide(&req(true, NC), &leaf(Some("Unknown"), false), &cfg),
            Decision::Allow("not a leaf node")
        );
        assert_eq!(
            decide(&req(true, NC), &leaf(Some("True"), true), &cfg),
            Decision::Allow("node Ready")
        );
        assert_eq!(
            decide(&req(true, NC), &NodeState::Unknown, &cfg),
            Decision::Allow("node unknown")
        );
        assert_eq!(
            decide(&req(true, NC), &NodeState::NotSynced, &cfg).label(),
            crate::metrics::GuardDecision::AllowedNotSynced
        );
    }

    #[test]
    fn blocked_deletions_are_one_event_whose_count_holds_every_denial() {
        let t = |s: i64| k8s_openapi::jiff::Timestamp::from_second(1_800_000_000 + s).unwrap();
        let minute = std::time::Duration::from_secs(60);
        let mut b = BlockedEvents::default();
        b.denied("leaf", "app/a by nc".into());
        let first = b.due(t(0), minute, 100);
        assert_eq!(
            (first.len(), first[0].event.count, first[0].existing.clone()),
            (1, 1, None)
        );
        b.written("leaf", "leaf.1".into());
        for _ in 0..14 {
            b.denied("leaf", "app/b by nc".into());
        }
        assert!(
            b.due(t(30), minute, 100).is_empty(),
            "held back within the minute"
        );
        let later = b.due(t(61), minute, 100);
        assert_eq!(later[0].event.count, 15, "held-back denials are not lost");
        assert_eq!(
            later[0].existing.as_deref(),
            Some("leaf.1"),
            "the same Event, updated"
        );
        assert_eq!(later[0].event.first_seen, t(0));
        assert!(
            b.due(t(200), minute, 100).is_empty(),
            "nothing new, nothing written"
        );
    }

    #[test]
    fn a_partition_of_many_leaf_nodes_is_written_a_few_events_at_a_time() {
        let t = |s: i64| k8s_openapi::jiff::Timestamp::from_second(1_800_000_000 + s).unwrap();
        let minute = std::time::Duration::from_secs(60);
        let mut b = BlockedEvents::default();
        for i in 0..45 {
            b.denied(&format!("leaf-{i:02}"), "app/a by nc".into());
        }
        let sizes: Vec<usize> = (0..4).map(|s| b.due(t(s), minute, 20).len()).collect();
        assert_eq!(
            sizes,
            vec![20, 20, 5, 0],
            "every node gets its Event, 20 per flush"
        );
    }
}
