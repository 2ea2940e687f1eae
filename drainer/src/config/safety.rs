//! The settings of the fleet safety gates: the breaker's thresholds, failure domains and their
//! outages, flap damping and drain windows. Pure data.

use std::time::Duration;

use super::budget::Budget;
use super::drain_window::DrainWindow;

/// The settings of the fleet safety gates (`decide::safety`), pure data.
#[derive(Debug, Clone, PartialEq)]
pub struct Safety {
    /// The breaker opens when more than this many (or share of) selected nodes are unhealthy.
    pub max_unhealthy: Budget,
    /// ... or when more than this many became unhealthy within `breaker_window`.
    pub breaker_new: Budget,
    pub breaker_window: Duration,
    /// It closes after the counts stayed at or under both thresholds this long.
    pub breaker_cooldown: Duration,
    /// The node label naming a node's failure domain (Kosmos leaf nodes: their member cluster).
    pub failure_domain: String,
    /// The label of a Kosmos leaf node naming its member cluster (empty: each leaf node stands
    /// for a member cluster of its own, Kosmos' usual layout).
    pub kosmos_cluster_label: String,
    /// Nodes cordoned at once per domain (None: no per-domain budget).
    pub max_cordoned_per_domain: Option<Budget>,
    /// A domain with more than this percentage of its nodes unhealthy is an outage.
    pub domain_outage_percent: f64,
    /// ... if it has at least this many selected nodes (a 1-node "domain" is not a partition).
    pub domain_outage_min_nodes: usize,
    /// Flapping: at least this many state changes of watched conditions within `flap_window`.
    pub flap_threshold: usize,
    pub flap_window: Duration,
    /// Common cause: more than this many nodes gaining the same condition type and reason within
    /// `correlate_window` are compared with the rest of the fleet.
    pub correlate_min: usize,
    pub correlate_window: Duration,
    /// Drains start only inside one of these (empty: any time).
    pub drain_windows: Vec<DrainWindow>,
}

impl Default for Safety {
    fn default() -> Self {
        Safety {
            max_unhealthy: Budget::Percent(30.0),
            breaker_new: Budget::Percent(20.0),
            breaker_window: Duration::from_secs(300),
            breaker_cooldown: Duration::from_secs(600),
            failure_domain: "topology.kubernetes.io/zone".into(),
            kosmos_cluster_label: String::new(),
            max_cordoned_per_domain: None,
            domain_outage_percent: 50.0,
            domain_outage_min_nodes: 3,
            flap_threshold: 4,
            correlate_min: 3,
            correlate_window: Duration::from_secs(600),
            flap_window: Duration::from_secs(600),
            drain_windows: Vec::new(),
        }
    }
}

impl Safety {
    /// Every gate open: no breaker, no outages, no flap damping (for tests of everything else).
    pub fn off() -> Safety {
        Safety {
            max_unhealthy: Budget::Percent(100.0),
            breaker_new: Budget::Percent(100.0),
            domain_outage_percent: 100.0,
            flap_threshold: 0,
            ..Safety::default()
        }
    }
}
