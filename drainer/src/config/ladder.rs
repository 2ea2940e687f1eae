//! The remediation ladder of a problem condition (`KernelDeadlock=True,10m: drain, reboot,
//! replace`) and the limits every ladder runs within. Pure.
//!
//! The steps come in one order, each stronger than the one before: the drain (what a condition
//! without a ladder gets, as draino does), a reboot proven by a new `bootID`, the replacement of
//! the Node. Every ladder starts with the drain (nothing is rebooted with work on it) and ends with
//! *needs a person*: the node stays cordoned and people are told. A condition written without a
//! ladder keeps draino's behaviour: cordon, drain, then wait for the problem to clear.

use std::time::Duration;

pub use crate::model::ladder::{Ladder, LadderError, Step};

/// What every ladder runs within (flags and `--config`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limits {
    /// A reboot is proven when the node comes back with a new `bootID`, Ready, the problem clear,
    /// within this long of the request (`--reboot-deadline`, default 20m).
    pub(crate) reboot_deadline: Duration,
    /// A restart (`restart kubelet`, `restart containerd`) is proven when the node is Ready and the
    /// problem clear within this long of the request (`--restart-deadline`, default 5m); otherwise
    /// the node is cordoned and drained as the ladder goes on.
    pub(crate) restart_deadline: Duration,
    /// A replacement is proven when the Node is gone within this long (`--replace-deadline`,
    /// default 30m).
    pub(crate) replace_deadline: Duration,
    /// At most this many reboots of one node in 24 hours (`--max-reboots-per-node-per-day`,
    /// default 1); past it the ladder goes on to its next step.
    pub(crate) max_reboots_per_day: u32,
    /// At most this many Nodes replaced in any hour, over the whole fleet
    /// (`--max-replacements-per-hour`, default 2, as draino's DataDog fork).
    pub(crate) max_replacements_per_hour: u32,
    /// How each failure domain earns the width of its slow start (`decide::gates::slow_start`).
    pub(crate) pacing: Pacing,
    /// Where a `power-cycle` step asks (`--power-cycle-url`; None: no ladder may name the step).
    pub(crate) power_cycle: Option<PowerCycle>,
    /// A control-plane node may be rebooted or power-cycled (`--remediate-control-plane`, flags
    /// only; default no: it goes to a person).
    pub(crate) control_plane: bool,
    /// kured's DaemonSet, whose reboot lock our reboots honour (`--kured-daemonset NAMESPACE/NAME`,
    /// flags only; None: kured is not looked at).
    pub(crate) kured: Option<(String, String)>,
}

/// The out-of-band reboot provider (docs/operator-guide.md says what each is asked).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PowerCycle {
    /// An HTTP endpoint: its URL (shown only as scheme and host: the path or query may carry a
    /// credential), the bearer token's file and the CA file trusted instead of the system's, each
    /// read at each request.
    Http {
        url: super::url::NotifyUrl,
        token_file: Option<std::path::PathBuf>,
        ca_file: Option<std::path::PathBuf>,
    },
    /// Metal3: the reboot annotation of the BareMetalHost behind the node's Cluster API Machine.
    Metal3,
    /// medik8s: a remediation object made from this template (`--remediation-template`).
    Medik8s(crate::model::medik8s::Template),
}

impl std::fmt::Display for PowerCycle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PowerCycle::Http { url, .. } => write!(f, "the power-cycle endpoint {url}"),
            PowerCycle::Metal3 => f.write_str("Metal3 (the node's BareMetalHost)"),
            PowerCycle::Medik8s(t) => write!(f, "medik8s ({t})"),
        }
    }
}

/// How a failure domain earns width: a remediated node must stay healthy `dwell` after its proof
/// (`--slow-start-dwell`, default 5m), and widenings are `cooldown` apart (`--slow-start-cooldown`,
/// default 5m).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pacing {
    pub(crate) dwell: Duration,
    pub(crate) cooldown: Duration,
}

impl Default for Pacing {
    fn default() -> Pacing {
        Pacing {
            dwell: Duration::from_secs(300),
            cooldown: Duration::from_secs(300),
        }
    }
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            reboot_deadline: Duration::from_secs(20 * 60),
            restart_deadline: Duration::from_secs(5 * 60),
            replace_deadline: Duration::from_secs(30 * 60),
            max_reboots_per_day: 1,
            max_replacements_per_hour: 2,
            pacing: Pacing::default(),
            power_cycle: None,
            control_plane: false,
            kured: None,
        }
    }
}
