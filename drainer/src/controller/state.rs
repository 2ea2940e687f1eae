//! The controller loop's state besides the fleet's, pure data, each part with one owner: the
//! periodic chores', the drains running, and what is handed on to the tasks that keep the Lease
//! and the drainer's own ConfigMaps. The code that changes each lives beside it (`chores`,
//! `drains`, `publish`).

use std::collections::HashMap;
use std::sync::Arc;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::jiff::Timestamp;
use nodemedic_common::reboot::Requests as Reboots;
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;

use crate::act::DrainRun;
use crate::act::recall::Memory;
use crate::decide::schedule::StaleSchedule;
use crate::model::intern::ArcStr;
use crate::model::node::NodeView;

/// When the periodic chores were last done and what of them is under way, and what is said once.
#[derive(Default)]
pub(super) struct Periodic {
    /// Stale pods' reports and eviction attempts.
    pub(super) stale: StaleSchedule,
    pub(super) last_resync: Option<Timestamp>,
    /// The nodes the periodic resync has yet to take again (it gives way to changes).
    pub(super) resync_left: Vec<ArcStr>,
    /// When the watchdog last checked.
    pub(super) last_watchdog: Option<Timestamp>,
    /// The watchdog's walk under way (it gives way to changes, as the resync does).
    pub(super) watchdog_walk: Option<Walk>,
    /// Since when rounds with changes have left the periodic chores (the resync, the watchdog's
    /// walk) to the next round.
    pub(super) chores_waiting: Option<Timestamp>,
    /// When our medik8s remediation objects were last listed, and whether that list found any.
    pub(super) last_follow: Option<Timestamp>,
    pub(super) remediations_left: bool,
    /// When the pods' symptoms were last assessed.
    pub(super) last_symptoms: Option<Timestamp>,
    /// The assessment under way on the blocking pool.
    pub(super) symptoms: Option<JoinHandle<crate::decide::symptoms::Found>>,
    /// When the detector DaemonSet was last read.
    pub(super) last_placement: Option<Timestamp>,
    /// The read of the detector DaemonSet under way: which it is, what it gave, when it ended.
    pub(super) placement_task: Option<PlacementTask>,
    /// The detector placement's first reading was logged.
    pub(super) placement_said: bool,
    /// Writing `--history-file` fails (said once).
    pub(super) history_failing: bool,
    /// The settings' summary is to be logged after the next round (at start, after a reload).
    pub(super) summary_due: bool,
    /// The nodes-listed-pods-coming line was logged.
    pub(super) said_nodes_only: bool,
}

/// What reading the detector DaemonSet gave.
pub(super) type PlacementRead =
    Result<Option<k8s_openapi::api::apps::v1::DaemonSet>, crate::model::cluster::ApiError>;
type PlacementTask = JoinHandle<((String, String), PlacementRead, tokio::time::Instant)>;

/// The watchdog's walk over the selected nodes while it is under way: the walk gives way to
/// changes and goes on over several rounds, so what it has gathered is kept here between them.
/// Begun `at`, the names `left`, and the latest views gathered so far.
pub(super) struct Walk {
    pub(super) at: Timestamp,
    pub(super) left: Vec<ArcStr>,
    pub(super) latest: Vec<Arc<NodeView>>,
}

/// The drains (and the writing of how they ended) running in this process, by node, and where
/// those whose evictions ended come back.
pub(super) struct Drains {
    pub(super) running: HashMap<String, JoinHandle<()>>,
    pub(super) ended: (
        mpsc::UnboundedSender<DrainRun>,
        mpsc::UnboundedReceiver<DrainRun>,
    ),
}

impl Default for Drains {
    fn default() -> Drains {
        Drains {
            running: HashMap::new(),
            ended: mpsc::unbounded_channel(),
        }
    }
}

/// Where what the controller keeps outside itself goes, and what was last handed on.
#[derive(Default)]
pub(super) struct Publisher {
    /// The drainer's Lease as the election last read it (the pause, the breaker kept there).
    pub(super) lease: Option<watch::Receiver<Option<Lease>>>,
    /// The breaker state for the election to keep on the Lease (see `leader::LeaseData`).
    pub(super) breaker_out: Option<watch::Sender<Option<Option<String>>>>,
    /// What was last handed to `breaker_out`.
    pub(super) published_breaker: Option<Option<String>>,
    /// The record memory's ConfigMaps: read back when leadership begins, then kept.
    pub(super) memory: Option<Memory>,
    /// Where the reboot requests go (`act::publisher` writes them to their ConfigMap while leading).
    pub(super) reboots_out: Option<watch::Sender<Reboots>>,
    /// kured's DaemonSet (`NAMESPACE/NAME`) and its lock as last read (`--kured-daemonset`).
    pub(super) kured: Option<(
        String,
        watch::Receiver<crate::observe::reboot_lock::LockText>,
    )>,
}
