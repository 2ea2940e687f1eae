//! The budgets a round counts against (pure): the totals over the records this drainer owns, and
//! the running counts while a round decides, oldest problem first.

use std::collections::HashMap;

use k8s_openapi::jiff::Timestamp;

use crate::model::intern::ArcStr;
use crate::model::record::{Phase, Record};

/// The cluster-wide quantities budgets are counted from, over the records this drainer owns: kept as
/// running totals by the controller ([`Fleet`](super::fleet::Fleet)), summed over all nodes by a full plan.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Totals {
    /// Nodes the selector selects (what a percentage cordon budget is of).
    pub(crate) selected: usize,
    /// Nodes cordoned by us (records not released).
    pub(crate) cordoned: usize,
    /// Drains in flight (records draining).
    pub(crate) draining: usize,
    /// The latest drain start.
    pub(crate) last_drain_start: Option<Timestamp>,
}

impl Totals {
    /// Sum over (selected, the record we own) pairs.
    pub(crate) fn of<'a>(nodes: impl IntoIterator<Item = (bool, Option<&'a Record>)>) -> Totals {
        let mut t = Totals::default();
        for (selected, record) in nodes {
            t.selected += selected as usize;
            if let Some(r) = record {
                t.cordoned += r.holds_cordon() as usize;
                t.draining += (r.phase == Phase::Draining) as usize;
                t.last_drain_start = t.last_drain_start.max(r.drain_started);
            }
        }
        t
    }
}

/// Running totals while planning.
pub(crate) struct Budgets {
    pub(crate) cordoned: usize,
    pub(crate) cordon_limit: usize,
    pub(crate) draining: usize,
    pub(crate) last_drain_start: Option<Timestamp>,
    /// `last_drain_start` before this round's latest start (restored when that start is blocked).
    pub(crate) prior_drain_start: Option<Timestamp>,
    /// Cordoned by us, per domain (the per-domain budget).
    pub(crate) domain_cordoned: HashMap<ArcStr, usize>,
    /// Nodes the ladder replaced (recently, and in this round): the replacement budget.
    pub(crate) replaced: Vec<Timestamp>,
    /// Ladder steps under way by failure domain (the slow start's count).
    pub(crate) remediating: HashMap<String, usize>,
}

impl Budgets {
    pub(crate) fn uncordoned(&mut self, domain: Option<&str>) {
        self.cordoned -= 1;
        if let Some(n) = domain.and_then(|d| self.domain_cordoned.get_mut(d)) {
            *n = n.saturating_sub(1);
        }
    }
}
