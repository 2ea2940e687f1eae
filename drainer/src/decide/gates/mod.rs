//! The fleet safety gates, pure: what holds remediation back when acting would hurt more than help.
//! Each gate is one module of the same shape: its settings (in `config::safety`), its state (kept
//! by the fleet, or read from the cluster), what it persists, and a [`Gate`] that says, for one
//! candidate at one round, whether it holds it back and why ([`Why`], with the facts as values).
//! [`Gates`] is every gate of a round, asked in order: the first that holds, holds. A new hold is a
//! new module and one field here.
//!
//! - `pause`: an annotation on the drainer's Lease holds everything;
//! - `peer`: a node another remediator has taken (cluster-autoscaler, Karpenter) is left to it;
//! - `flap`: a node whose conditions flap is held until stable;
//! - `outage`: a failure domain with too many unhealthy nodes is a partition, held whole;
//! - `breaker`: too many unhealthy nodes, or too many new ones, hold everything new;
//! - `window`: drains start only inside the drain windows (cordons do not wait for them);
//! - `resume`: a step under way keeps its request standing only while these would let it start.

pub mod breaker;
pub mod flap;
pub mod gate;
pub mod outage;
pub mod pause;
pub mod peer;
pub mod reboot_lock;
pub mod resume;
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
use peer::PeerGate;
use slow_start::NO_DOMAIN;

/// The fleet-wide holds a round's decisions read.
#[derive(Debug, Clone)]
pub struct Gates {
    pub(crate) pause: Option<Pause>,
    /// Nodes other remediators have taken.
    pub(crate) peers: PeerGate,
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
    /// The steps under way in their order, and the requests withheld ([`resume`]).
    pub(crate) under_way: resume::UnderWay,
    /// Whether every pod is known: false while a new leader's pod list is still coming, when
    /// only the holds that evict nothing go ahead (drains and the steps after them wait).
    pub(crate) pods_listed: bool,
}

impl Gates {
    /// Every gate open (`flap_window` only names the window in a flapping node's reason).
    pub fn open(flap_window: std::time::Duration) -> Gates {
        Gates {
            pause: None,
            peers: PeerGate::default(),
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
            under_way: resume::UnderWay::default(),
            pods_listed: true,
        }
    }

    /// The gate holding new cordons and drain starts of `c`, if one does, asked in order: the
    /// pause, a peer that took the node, flapping, the domain's outage, the breaker.
    pub(crate) fn hold(&self, c: &Candidate) -> Option<Why> {
        let order: [&dyn Gate; 5] = [
            &self.pause,
            &self.peers,
            &self.flap,
            &self.outage,
            &self.breaker,
        ];
        order.iter().find_map(|g| g.hold(c))
    }

    /// What holds `c`'s step under way back now, in an operator's words (`reboot`: a reboot, which the
    /// drain windows hold too; else a restart, which needs no cordon and no window). None: its request
    /// may stand.
    pub(crate) fn resume_hold(&self, c: &Candidate, reboot: bool) -> Option<String> {
        // The fleet's gates and a peer's taking; not the flap gate, which a node's own reboot may
        // set off.
        let fleet: [&dyn Gate; 4] = [&self.pause, &self.peers, &self.outage, &self.breaker];
        if let Some(why) = fleet.iter().find_map(|g| g.hold(c)) {
            return Some(why.to_string());
        }
        if let Some(why) = self.peers.reboot_waits(&c.node.name).filter(|_| reboot) {
            return Some(why);
        }
        if let (true, Err(next)) = (reboot, self.window) {
            let next = next.map_or("none within a week".to_string(), |t| {
                format!("the next opens {}", nodemedic_common::time::rfc3339(t))
            });
            return Some(format!("outside the drain windows ({next})"));
        }
        let domain = c.domain.unwrap_or(NO_DOMAIN);
        let width = self.pace.get(domain).copied().unwrap_or(1);
        let ahead = self.place(c)?;
        let shown = if domain.is_empty() {
            "nodes without a failure domain"
        } else {
            domain
        };
        (ahead >= width as usize).then(|| {
            format!(
                "the slow start of {shown} allows {width} step(s) at once and {ahead} started before it"
            )
        })
    }

    /// How many steps under way in `c`'s domain started before `c`'s, if it has one under way.
    pub(crate) fn place(&self, c: &Candidate) -> Option<usize> {
        let order = self.under_way.order.get(c.domain.unwrap_or(NO_DOMAIN))?;
        order.iter().position(|n| *n == c.node.name)
    }

    /// Whether `c`'s request was withheld at its last decision (a step withheld past its deadline
    /// starts again rather than counting as failed).
    pub(crate) fn was_withheld(&self, c: &Candidate) -> bool {
        self.under_way.withheld.contains(&c.node.name)
    }
}
