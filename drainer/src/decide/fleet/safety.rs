//! The fleet-wide safety states kept over time, beside the nodes: the breaker, the outages in
//! force, the pause, each node's recent condition changes (flaps), the detectors heard or silent,
//! and the groups of nodes gaining one condition together (their common cause). Pure data; each
//! round brings them up to date from the running totals and derives the gates from them (`due`),
//! and reports what changed as `FleetEvent`s.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::jiff::Timestamp;

use crate::decide::facts::Pause;
use crate::decide::gates::breaker::Breaker;
use crate::decide::gates::flap::Flaps;
use crate::model::intern::ArcStr;
use crate::model::intern::ByName as ByNode;

#[derive(Default)]
pub(super) struct Safety {
    pub(super) breaker: Breaker,
    /// Domains in an outage now.
    pub(super) outages: BTreeSet<String>,
    pub(super) paused: Option<Pause>,
    /// While a new leader's pod list is still coming (see
    /// [`crate::decide::gates::Gates::pods_listed`]).
    pub(super) pods_pending: bool,
    /// While the breaker is open: when the oldest start within its window leaves it (the "newly"
    /// count drops then, which may let it calm down); never in the past.
    pub(super) newly_wake: Option<Timestamp>,
    /// Recent condition changes of nodes that had any.
    pub(super) flaps: ByNode<Flaps>,
    /// Nodes flapping now whose episode was reported.
    pub(super) flapping: BTreeSet<ArcStr>,
    /// Nodes held as another remediator's now, whose taking was reported.
    pub(super) left_to_peer: BTreeSet<ArcStr>,
    /// What the other remediators say beyond their taints (kured's lock), as last read.
    pub(super) peers: crate::decide::gates::peer::PeerGate,
    /// Where the detector DaemonSet places its pods, and the nodes whose detector is silent.
    pub(super) placement: crate::decide::silence::Placement,
    pub(super) silent: ByNode<crate::decide::silence::Silence>,
    /// Recent gains of watched conditions, the groups reported, and the latest cause reported
    /// while its group lasts (named by the breaker's and outages' reasons).
    pub(super) gains: Vec<crate::decide::common_cause::Gain>,
    pub(super) causes: BTreeMap<(ArcStr, Option<ArcStr>), usize>,
    pub(super) cause: Option<String>,
    /// The symptom conditions (PodsNotStarting, PodsNotTerminating) the drainer's own last look at
    /// the pods found, by node: only those count as a problem (`symptoms`).
    /// Each with when a pass first found it.
    pub(super) symptoms: ByNode<Vec<(&'static str, Timestamp)>>,
}

impl Safety {
    /// The node is gone: its flaps and silence with it.
    pub(super) fn forget(&mut self, name: &str) {
        self.flaps.remove(name);
        self.flapping.remove(name);
        self.silent.remove(name);
        self.symptoms.remove(name);
    }
}
