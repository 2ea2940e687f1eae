//! Well-known names. Keeping them in one place means the detector, the drainer, the manifests and the
//! tests cannot disagree about a spelling.

/// Annotation on a Node listing, comma-separated and sorted, the condition types the detector owns.
/// The detector removes an owned type that no rule file declares any more, and never touches a type
/// that is not listed (kubelet's Ready, MemoryPressure, ... or another tool's).
pub const OWNED_CONDITIONS_ANNOTATION: &str = "nodemedic.io/detector-conditions";
/// The revision of the detector's rules that set the node's conditions (a short SHA-256 of the
/// rule files), written with them; the drainer's common-cause report compares it.
pub const RULES_REVISION_ANNOTATION: &str = "nodemedic.io/detector-rules";

/// Label of Kosmos leaf nodes (virtual nodes standing for member clusters).
pub const KOSMOS_NODE_LABEL: &str = "kosmos.io/node";
/// Value of [`KOSMOS_NODE_LABEL`] that marks a leaf node.
pub const KOSMOS_NODE_VALUE: &str = "true";

/// Annotation that exempts a kube-system pod from eviction (value must be empty).
pub const NOT_EVICTED_POD_ANNOTATION: &str = "scheduler.alpha.kubernetes.io/not-evicted-pod";
/// Legacy annotation marking a critical pod.
pub const CRITICAL_POD_ANNOTATION: &str = "scheduler.alpha.kubernetes.io/critical-pod";
/// Pods at or above this priority are system-critical and never evicted.
pub const CRITICAL_PRIORITY: i32 = 2_000_000_000;

/// Field manager / user agent prefix of the detector's writes.
pub const DETECTOR_MANAGER: &str = "nodemedic-detector";

/// Annotation on a Node the drainer cordoned: a JSON record of why and how far it got. All drainer
/// state lives here, so a new leader continues where the old one stopped.
pub const DRAIN_RECORD_ANNOTATION: &str = "nodemedic.io/drain";
/// draino's annotation listing the conditions a node was cordoned for (kept for existing tooling).
pub const DRAINO_CONDITIONS_ANNOTATION: &str = "draino.planet.com/conditions";
/// Opt-out label: `nodemedic.io/exclude=true` pauses every drainer action on the node.
pub const EXCLUDE_LABEL: &str = "nodemedic.io/exclude";
/// Annotation on a Node that vetoes its remediation past the drain (reboot, replace): the ladder
/// stops where it is and the node waits for a person. Anyone who may annotate the Node may set it,
/// the node itself included: a veto only ever makes the drainer do less.
pub const DO_NOT_REMEDIATE_ANNOTATION: &str = "nodemedic.io/do-not-remediate";
/// The drainer's node condition (draino's name).
pub const DRAIN_SCHEDULED_CONDITION: &str = "DrainScheduled";
/// Field manager / user agent of the drainer's writes.
pub const DRAINER_MANAGER: &str = "nodemedic-drainer";
/// Annotation of mirror (static) pods.
pub const MIRROR_POD_ANNOTATION: &str = "kubernetes.io/config.mirror";
/// cluster-autoscaler's opt-out annotation; `false` always protects a pod.
pub const SAFE_TO_EVICT_ANNOTATION: &str = "cluster-autoscaler.kubernetes.io/safe-to-evict";
/// Karpenter's opt-out annotation on a pod (or a node); `true` always protects a pod, as Karpenter
/// never disrupts it voluntarily.
pub const DO_NOT_DISRUPT_ANNOTATION: &str = "karpenter.sh/do-not-disrupt";
