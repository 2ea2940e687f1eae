//! Which nodes the next rounds decide, and when: those that changed, those whose time comes (the
//! clock's wake-ups), those waiting for a budget (every round: a freed slot may be theirs), and
//! those a safety gate holds (again when the gates change). Pure data; the fleet fills it as nodes
//! change and decisions are made, and a round takes what is due.

use std::collections::BTreeSet;

use k8s_openapi::jiff::Timestamp;

use crate::decide::schedule::BudgetWaits;
use crate::model::intern::ArcStr;

#[derive(Default)]
pub(super) struct Queue {
    /// Decided at the next round.
    pub(super) dirty: BTreeSet<ArcStr>,
    /// Clock wake-ups: (when, node).
    pub(super) wakes: BTreeSet<(Timestamp, ArcStr)>,
    /// Waiting for a budget, with their WaitingForBudget notes: decided every round, as a freed
    /// slot may be theirs.
    pub(super) waiting: BudgetWaits,
    /// Held by a safety gate: decided again when the gates change.
    pub(super) held: BTreeSet<ArcStr>,
    /// The gates of the last round (what a change is detected against).
    pub(super) last_gates: Option<GatesKey>,
}

/// What of the gates a held decision depends on.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct GatesKey {
    pub(super) paused: bool,
    pub(super) breaker: bool,
    pub(super) outages: BTreeSet<String>,
    pub(super) window: bool,
    pub(super) pods_listed: bool,
    /// kured's lock as read (its holders, or why it is unknown).
    pub(super) kured: Option<crate::decide::gates::reboot_lock::KuredLock>,
}

impl Queue {
    /// Forget everything queued (a reload decides every node again) but the waits, whose Events
    /// go on.
    pub(super) fn clear(&mut self) {
        let waiting = std::mem::take(&mut self.waiting);
        *self = Queue {
            waiting,
            ..Queue::default()
        };
    }

    /// The node is gone: nothing of it is due any more (its wake-up is taken off by the fleet,
    /// which knows when it was).
    pub(super) fn forget(&mut self, name: &str) {
        self.dirty.remove(name);
        self.waiting.end(name);
        self.held.remove(name);
    }
}
