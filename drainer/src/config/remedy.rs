//! How a problem node is held and let go, and how a silent detector is noticed: the settings of
//! cordon and taints while a node has a problem, probation before it is uncordoned, and the
//! detector watchdog (built and checked by `build::remedy_and_watchdog`). Pure.

use std::time::Duration;

use super::taint::Taint;
use crate::model::node::NodeTaint;

/// What a problem node gets and what a recovered one goes through.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Remedy {
    /// Cordon (`spec.unschedulable`) while a node has a problem (`--cordon`, default true).
    pub(crate) cordon: bool,
    /// Taints put on while a node has a problem (`--problem-taint`), removed on recovery.
    pub(crate) taints: Vec<Taint>,
    /// A node whose problem cleared is uncordoned only once it has stayed healthy this long
    /// (`--uncordon-after`; 0: at once).
    pub(crate) uncordon_after: Duration,
    /// During probation the node carries this `PreferNoSchedule` taint instead of the cordon, so
    /// it takes work back gradually (`--probation-taint`).
    pub(crate) probation_taint: Option<Taint>,
}

impl Default for Remedy {
    fn default() -> Remedy {
        Remedy {
            cordon: true,
            taints: Vec::new(),
            uncordon_after: Duration::ZERO,
            probation_taint: None,
        }
    }
}

impl Remedy {
    /// The problem taints as a node carries them.
    pub(crate) fn node_taints(&self) -> Vec<NodeTaint> {
        self.taints.iter().map(Taint::node_taint).collect()
    }

    /// A problem taint evicts what does not tolerate it (NoExecute).
    pub(crate) fn evicts(&self) -> bool {
        self.taints.iter().any(|t| t.effect == "NoExecute")
    }
}

/// The detector watchdog: a selected node whose detector stopped refreshing its conditions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Watchdog {
    /// Silent once the detector's conditions have not been refreshed this long
    /// (`--detector-silent-after`, default three heartbeat periods; None: the watchdog is off).
    pub(crate) silent_after: Option<Duration>,
    /// The detector DaemonSet, `(namespace, name)`: a node it does not place a pod on is exempt
    /// (`--detector-daemonset`; None: every selected node but Kosmos leaf nodes should run one).
    pub(crate) daemonset: Option<(String, String)>,
    /// Condition types a detector writes without naming them in the ownership annotation (NPD's,
    /// e.g. KernelDeadlock): their heartbeats count too (`--detector-conditions`).
    pub(crate) conditions: Vec<String>,
}

/// The detector's default heartbeat period is 5m: three of them.
pub(crate) const DEFAULT_SILENT_AFTER: Duration = Duration::from_secs(15 * 60);

impl Default for Watchdog {
    fn default() -> Watchdog {
        Watchdog {
            silent_after: Some(DEFAULT_SILENT_AFTER),
            daemonset: Some(("kube-system".into(), "nodemedic-detector".into())),
            conditions: Vec::new(),
        }
    }
}
