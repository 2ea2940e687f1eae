//! The fleet safety gates, pure: what holds remediation back when acting would hurt more than help.
//! Each gate is one module of the same shape: its settings (in `config::safety`), its state (kept
//! by the fleet, or read from the cluster), what it persists, and a [`Gate`] that says, for one
//! candidate at one round, whether it holds it back and why ([`Why`], with the facts as values).
//! [`Gates`] is every gate of a round, asked in order: the first that holds, holds. A new hold is a
//! new module and one field here.
//!
//! - `pause`: an annotation on the drainer's Lease holds everything;
//! - `flap`: a node whose conditions flap is held until stable;
//! - `outage`: a failure domain with too many unhealthy nodes is a partition, held whole;
//! - `breaker`: too many unhealthy nodes, or too many new ones, hold everything new;
//! - `window`: drains start only inside the drain windows (cordons do not wait for them).

pub mod breaker;
pub mod flap;
pub mod gate;
pub mod outage;
pub mod pause;
pub mod slow_start;
pub mod snapshot;
pub mod window;

use std::collections::BTreeMap;

use k8s_openapi::jiff::Timestamp;

use crate::decide::candidate::Candidate;
use crate::decide::decision::Why;
use crate::decide::facts::Pause;
use crate::model::intern::ArcStr;
use breaker::BreakerGate;
use flap::FlapGate;
use gate::Gate;
use outage::{DomainTotals, OutageGate};

/// The fleet-wide holds a round's decisions read.
#[derive(Debug, Clone)]
pub struct Gates {
    pub(crate) pause: Option<Pause>,
    pub(crate) flap: FlapGate,
    pub(crate) outage: OutageGate,
    /// The breaker while it is open.
    pub(crate) breaker: Option<BreakerGate>,
    /// Per-domain totals (for the per-domain cordon budget), by the fleet's shared names: a round
    /// copies no name.
    pub(crate) domains: BTreeMap<ArcStr, DomainTotals>,
    /// `Err(next)` outside the drain windows (drain starts wait; `None`: none opens within a week).
    pub(crate) window: Result<(), Option<Timestamp>>,
    /// When the ladder replaced Nodes in the last hour (the replacement budget; the controller's
    /// memory, none for a snapshot).
    pub(crate) replaced: Vec<Timestamp>,
    /// The slow start: each failure domain's width ("" for nodes without one; one when absent),
    /// and its ladder steps under way.
    pub(crate) pace: BTreeMap<String, u32>,
    pub(crate) remediating: BTreeMap<String, usize>,
    /// Whether every pod is known: false while a new leader's pod list is still coming, when
    /// only the holds that evict nothing go ahead (drains and the steps after them wait).
    pub(crate) pods_listed: bool,
}

impl Gates {
    /// Every gate open (`flap_window` only names the window in a flapping node's reason).
    pub fn open(flap_window: std::time::Duration) -> Gates {
        Gates {
            pause: None,
            flap: FlapGate {
                window: flap_window,
            },
            outage: OutageGate::default(),
            breaker: None,
            domains: BTreeMap::new(),
            window: Ok(()),
            replaced: Vec::new(),
            pace: BTreeMap::new(),
            remediating: BTreeMap::new(),
            pods_listed: true,
        }
    }

    /// The gate holding new cordons and drain starts of `c`, if one does, asked in order: the
    /// pause, flapping, the domain's outage, the breaker.
    pub(crate) fn hold(&self, c: &Candidate) -> Option<Why> {
        let order: [&dyn Gate; 4] = [&self.pause, &self.flap, &self.outage, &self.breaker];
        order.iter().find_map(|g| g.hold(c))
    }
}
