//! One node as a round decides it (pure): its view, whether it is selected, its record, its pods,
//! its failure domain, and whether it is flapping.

use super::facts::Flapping;
use crate::model::node::NodeView;
use crate::model::pod::PodInfo;
use crate::model::record::Record;

/// One node to decide, with what the decision reads besides the node.
#[derive(Clone)]
pub struct Candidate<'a> {
    pub(crate) node: &'a NodeView,
    /// Whether the selector selects it.
    pub(crate) selected: bool,
    /// The record on the node, whichever drainer owns it.
    pub(crate) record: Option<&'a Record>,
    /// Its pods.
    pub(crate) pods: Vec<&'a PodInfo>,
    /// Its failure domain, if it has one.
    pub(crate) domain: Option<&'a str>,
    /// Flapping now (known to the controller, which sees every change; a snapshot cannot tell).
    pub(crate) flapping: Option<Flapping>,
    /// When its detector was deemed silent, if it is (the `DetectorSilent` condition).
    pub(crate) silent: Option<k8s_openapi::jiff::Timestamp>,
    /// The symptom conditions the drainer's own pods pass found on it, each with when it first
    /// did (`Some`: only those of PodsNotStarting and PodsNotTerminating count, whoever wrote the
    /// condition, each held from then at the earliest), or `None` in a preview of one snapshot,
    /// which takes them as written.
    pub(crate) symptoms: Option<&'a [(&'static str, k8s_openapi::jiff::Timestamp)]>,
    /// The newest of our records seen on this Node (the controller's memory): a record written now
    /// is later still, so an older one written back is told from it.
    pub(crate) newest: Option<k8s_openapi::jiff::Timestamp>,
    /// Its reboots by the remediation ladder in the last 24 hours (the controller's memory): its
    /// own, and power-cycles.
    pub(crate) reboots_today: (u32, u32),
    /// What its remediator said when it gave up on its power-cycle under way, if it did.
    pub(crate) gave_up: Option<&'a str>,
}
