//! The gates a snapshot of the objects shows on its own (`drainer plan`, pure): the breaker by its
//! thresholds alone (no cooldown is known), the outages, the windows, and what the cluster recorded
//! besides the objects (a pause on the drainer's Lease, the nodes the drainer reported flapping).

use std::collections::BTreeMap;

use k8s_openapi::jiff::Timestamp;

use super::Gates;
use super::breaker::{BreakerGate, Health, trip};
use super::flap::FlapGate;
use super::outage::{DomainTotals, OutageGate, domain_of, outage, unhealthy_since};
use super::window::next_window;
use crate::config::Config;
use crate::config::safety::Safety;
use crate::decide::facts::{Flapping, Pause};
use crate::model::intern::{ArcStr, intern};
use crate::model::node::NodeView;

/// What a snapshot of the objects cannot show but the cluster recorded: a pause on the drainer's
/// Lease, and nodes the drainer reported flapping (its NodeFlapping Events).
#[derive(Debug, Clone, Default)]
pub struct Recorded {
    pub(crate) paused: Option<Pause>,
    pub(crate) flapping: std::collections::HashMap<String, Flapping>,
    /// Where the detector DaemonSet places its pods (the watchdog's exemptions).
    pub(crate) placement: crate::decide::silence::Placement,
}

/// Nodes flapping at `now` by the drainer's NodeFlapping Events: an episode reported within the
/// flap window lasts at least until a window after its report (its last change may be later;
/// the controller, which saw every change, knows better).
pub(crate) fn flapping_from_events(
    events: &[k8s_openapi::api::core::v1::Event],
    s: &Safety,
    now: Timestamp,
) -> std::collections::HashMap<String, Flapping> {
    let mut out = std::collections::HashMap::new();
    for e in events {
        let ours = e.source.as_ref().and_then(|s| s.component.as_deref())
            == Some(crate::model::occurrence::SOURCE);
        if !ours || e.reason.as_deref() != Some(crate::model::occurrence::reason::NODE_FLAPPING) {
            continue;
        }
        let (Some(node), Some(at)) = (
            e.involved_object.name.clone(),
            e.last_timestamp.as_ref().map(|t| t.0),
        ) else {
            continue;
        };
        let stable_at = nodemedic_common::time::add(at, s.flap_window);
        if stable_at <= now {
            continue;
        }
        let changes = e
            .message
            .as_deref()
            .and_then(|m| m.split("changed ").nth(1))
            .and_then(|m| m.split(' ').next())
            .and_then(|n| n.parse().ok())
            .unwrap_or(s.flap_threshold);
        let f = Flapping { changes, stable_at };
        out.entry(node)
            .and_modify(|old: &mut Flapping| {
                if f.stable_at > old.stable_at {
                    *old = f;
                }
            })
            .or_insert(f);
    }
    out
}

/// The gates a snapshot shows on its own (`drainer plan`): the breaker by its thresholds alone (no
/// cooldown known), the outages, the windows, and a pause if one was read.
pub(crate) fn gates_of_snapshot(
    views: &[(&NodeView, bool)],
    cfg: &Config,
    paused: Option<Pause>,
    now: Timestamp,
) -> Gates {
    let s = &cfg.safety;
    let (health, domains) = fleet_health(views, cfg, now);
    Gates {
        pause: paused,
        peers: super::peer::PeerGate::default(),
        flap: FlapGate {
            window: s.flap_window,
        },
        breaker: trip(&health, s).map(|trip| BreakerGate {
            trip,
            closing_at: None,
            cause: None,
        }),
        outage: OutageGate {
            outages: domains
                .iter()
                .filter_map(|(d, t)| outage(d, t, s).map(|o| (d.to_string(), o)))
                .collect(),
        },
        domains,
        window: next_window(&s.drain_windows, now),
        replaced: Vec::new(),
        pace: BTreeMap::new(),
        remediating: BTreeMap::new(),
        under_way: super::resume::UnderWay::default(),
        pods_listed: true,
    }
}

/// What the breaker and the outage rule count over the selected nodes of a snapshot: unhealthy
/// nodes (overall and newly, within the breaker window) and each failure domain's totals.
pub(crate) fn fleet_health(
    views: &[(&NodeView, bool)],
    cfg: &Config,
    now: Timestamp,
) -> (Health, BTreeMap<ArcStr, DomainTotals>) {
    let s = &cfg.safety;
    let mut health = Health::default();
    let mut domains: BTreeMap<ArcStr, DomainTotals> = BTreeMap::new();
    let window_start = nodemedic_common::time::sub(now, s.breaker_window);
    for (v, selected) in views {
        if !*selected {
            continue;
        }
        let since = unhealthy_since(v, cfg, None);
        health.selected += 1;
        health.unhealthy += since.is_some() as usize;
        health.newly += since.is_some_and(|t| t >= window_start) as usize;
        if let Some(d) = domain_of(v, cfg) {
            // Shared: a zone's name is one string for all its nodes, as in the fleet.
            let t = domains.entry(intern(&d)).or_default();
            t.size += 1;
            t.unhealthy += since.is_some() as usize;
            t.cordoned += crate::model::record::Record::of(v, &cfg.records, &cfg.owner)
                .is_some_and(|r| r.owned_by(&cfg.owner, true) && r.holds_cordon())
                as usize;
        }
    }
    (health, domains)
}
