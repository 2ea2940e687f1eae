//! The controller's chores besides decisions, I/O: one WaitingForBudget Event per wait (its count
//! refreshed), stale pod readiness reported and, when configured, evicted, the detector
//! watchdog's walk over the selected nodes (its placement read at each resync, off the loop), and
//! which rounds do the periodic chores: one taking a change that woke the controller decides it
//! first. When is decided by `decide::schedule` and `decide::silence` (pure); this reads and writes
//! what they say.

use k8s_openapi::jiff::Timestamp;
use nodemedic_common::events::{NodeEvent, Severity};

use super::tail::WaitNote;
use super::{Controller, RESYNC};
use crate::decide::silence::Placement;
use crate::model::cluster::Cluster;
use crate::model::intern::ArcStr;
use crate::model::occurrence::{SOURCE, reason};
use nodemedic_common::time::add;
use std::time::Duration;

/// A periodic chore pending this long is done whole in the next round.
const CHORES_WAIT: Duration = Duration::from_secs(5);

/// What a round does with the periodic chores ([`Controller::chores_now`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Chores {
    /// Not this round: it decides its changes first.
    Later,
    /// Stopping for a change that comes in meanwhile (and going on at the next round).
    GivingWay,
    /// To the end, whatever comes in.
    Whole,
}

/// How often the watchdog checks: a third of `--detector-silent-after`, at most every resync period
/// and at least every second (a silence is noticed within a third of its limit).
pub(super) fn watchdog_every(silent_after: std::time::Duration) -> std::time::Duration {
    (silent_after / 3).clamp(std::time::Duration::from_secs(1), RESYNC)
}

impl<C: Cluster> Controller<C> {
    pub(super) fn resync_due(&self, now: Timestamp) -> bool {
        (self.chores.last_resync).is_none_or(|t| add(t, RESYNC) <= now)
    }

    /// What this round does with the periodic chores (the resync, the watchdog's walk), one of
    /// which is due or under way. A round taking a change that woke the controller decides it first
    /// and leaves them to the next round, woken at once: at 50,000 nodes a resync begun in such a
    /// round held its change's cordon up to 100 ms. Otherwise they give way to such a change that
    /// comes in meanwhile. A chore pending for [`CHORES_WAIT`] is done whole, whatever comes in, so
    /// changes in every round cannot hold it off. A simulation does them whole.
    pub(super) fn chores_now(&mut self, urgent: bool, now: Timestamp) -> Chores {
        if !self.mode.resync_gives_way {
            return Chores::Whole;
        }
        let due =
            self.resync_due(now) || !self.chores.resync_left.is_empty() || self.watchdog_due(now);
        if !due {
            self.chores.chores_waiting = None;
            return Chores::GivingWay;
        }
        let since = *self.chores.chores_waiting.get_or_insert(now);
        if add(since, CHORES_WAIT) <= now {
            self.chores.chores_waiting = None;
            return Chores::Whole;
        }
        if urgent {
            self.observed.changed.notify_one();
            return Chores::Later;
        }
        Chores::GivingWay
    }

    /// The watchdog's walk is under way, or due to begin.
    pub(super) fn watchdog_due(&self, now: Timestamp) -> bool {
        let every = self.cfg.watchdog.silent_after.map(watchdog_every);
        self.chores.watchdog_walk.is_some()
            || every.is_some_and(|e| self.chores.last_watchdog.is_none_or(|t| add(t, e) <= now))
    }

    /// Every [`watchdog_every`] check every selected node's detector against the latest views
    /// (the fleet reports those that fell silent or were heard again), having read where the
    /// detector DaemonSet runs (at most once a resync period). A DaemonSet that cannot be read
    /// leaves only the nodes whose detector reported before watched; said once.
    ///
    /// The latest views are gathered [`YIELD_EVERY`] nodes at a time, as the periodic resync
    /// takes them, and the gathering gives way to a change that comes in meanwhile (it goes on at
    /// the next round): at 50,000 nodes the whole walk held the loop's thread 45-100 ms once a
    /// minute, and a cordon decided in that time waited for it. The silences are judged as of
    /// when the walk began.
    pub(super) async fn watch_detectors(&mut self, now: Timestamp, chores: Chores) {
        if self.cfg.watchdog.silent_after.is_none() {
            self.chores.watchdog_walk = None; // turned off by a reload
            return;
        }
        // A walk begun a resync period ago (leadership was lost meanwhile) would judge old
        // views: it begins anew. (A walk that gives way still takes 256 nodes a round.)
        if (self.chores.watchdog_walk.as_ref()).is_some_and(|w| add(w.at, RESYNC) <= now) {
            self.chores.watchdog_walk = None;
        }
        if self.chores.watchdog_walk.is_none() {
            if !self.watchdog_due(now) || !self.placement_read(now).await {
                return;
            }
            self.chores.last_watchdog = Some(now);
            self.chores.watchdog_walk = Some(super::state::Walk {
                at: now,
                left: self.fleet.selected_names().cloned().collect(),
                latest: Vec::new(),
            });
        }
        let Some(mut walk) = self.chores.watchdog_walk.take() else {
            return;
        };
        while let Some(n) = walk.left.pop() {
            walk.latest.extend(self.observed.node(&n));
            if self.give_way(walk.left.len(), chores).await {
                self.chores.watchdog_walk = Some(walk);
                return;
            }
        }
        self.fleet.watch_detectors(&walk.latest, walk.at);
        self.record
            .metrics()
            .silent_detectors
            .set(self.fleet.silent_count() as i64);
    }

    /// Append the transitions the fleet saw to `--history-file` (a failure is said once while it
    /// lasts; those transitions are lost, the drainer goes on).
    pub(super) fn record_history(&mut self) {
        let Some(path) = self.cfg.history_file.clone() else {
            return;
        };
        let seen = self.fleet.take_transitions();
        if seen.is_empty() {
            return;
        }
        let max = crate::record::history_file::MAX_SIZE;
        match crate::record::history_file::append(&path, &seen, max) {
            Ok(()) => self.chores.history_failing = false,
            Err(e) if !self.chores.history_failing => {
                self.chores.history_failing = true;
                tracing::warn!(file = %path.display(), error = %e, "cannot record the conditions' history");
            }
            Err(_) => {}
        }
    }

    /// Whether where the detector DaemonSet runs is read, for a walk to begin: read at most once
    /// a resync period, off the loop (inline in a simulation), like the symptoms. A read under way
    /// holds the walk back, never the round: a cordon decided meanwhile does not wait for an API
    /// server slow to answer it. The read wakes the loop when it is done.
    async fn placement_read(&mut self, now: Timestamp) -> bool {
        if let Some(task) = self.chores.placement_task.take_if(|t| t.is_finished()) {
            match task.await {
                // Fresh however long the read took (the next is due a resync period after this
                // one began), but not one that ended a resync period ago and was left (the
                // watchdog turned off meanwhile, or leadership lost): read again.
                Ok((_, _, ended)) if ended.elapsed() >= RESYNC => self.chores.last_placement = None,
                // A reload named another DaemonSet while this one was read.
                Ok((daemonset, _, _))
                    if self.cfg.watchdog.daemonset.as_ref() != Some(&daemonset) =>
                {
                    self.chores.last_placement = None
                }
                Ok((daemonset, read, _)) => {
                    self.take_placement(&daemonset, read);
                    return true;
                }
                Err(e) => tracing::error!("reading the detector DaemonSet failed: {e}"),
            }
        }
        if self.chores.placement_task.is_some() {
            return false;
        }
        if self
            .chores
            .last_placement
            .is_some_and(|t| add(t, RESYNC) > now)
        {
            return true;
        }
        self.chores.last_placement = Some(now);
        let Some(daemonset) = self.cfg.watchdog.daemonset.clone() else {
            self.placed(Placement::Everywhere);
            return true;
        };
        let cluster = self.exec.cluster().clone();
        let read = async move {
            let read = cluster.daemon_set(&daemonset.0, &daemonset.1).await;
            (daemonset, read)
        };
        if !self.mode.offload {
            let (daemonset, read) = read.await;
            self.take_placement(&daemonset, read);
            return true;
        }
        let observed = self.observed.clone();
        self.chores.placement_task = Some(tokio::spawn(async move {
            let (daemonset, read) = read.await;
            observed.changed.notify_one();
            (daemonset, read, tokio::time::Instant::now())
        }));
        false
    }

    /// Take what reading the DaemonSet `namespace/name` gave: a DaemonSet missing or unreadable
    /// leaves only the nodes whose detector reported before watched, said once while it lasts.
    fn take_placement(&mut self, daemonset: &(String, String), read: super::state::PlacementRead) {
        let (ns, name) = daemonset;
        let placement = match read {
            Ok(Some(ds)) => Placement::of(&ds),
            Ok(None) => {
                if self.fleet.placement() != &Placement::Unknown || !self.chores.placement_said {
                    tracing::warn!(daemonset = %format!("{ns}/{name}"), "the detector DaemonSet does not exist: only nodes whose detector reported before are watched for silence (set --detector-daemonset)");
                }
                Placement::Unknown
            }
            Err(e) => {
                if self.fleet.placement() != &Placement::Unknown || !self.chores.placement_said {
                    tracing::warn!(daemonset = %format!("{ns}/{name}"), error = %e, "cannot read the detector DaemonSet: only nodes whose detector reported before are watched for silence");
                }
                Placement::Unknown
            }
        };
        self.placed(placement);
    }

    fn placed(&mut self, placement: Placement) {
        self.chores.placement_said = true;
        if self.fleet.set_placement(placement) {
            tracing::info!(placement = %self.fleet.placement(), "detector placement read");
        }
    }

    /// The WaitingForBudget Events the round's waits call for (written by the round's tail, after
    /// its own writes).
    pub(super) fn wait_notes(&mut self, now: Timestamp) -> Vec<WaitNote> {
        let notes = self.fleet.take_wait_notes();
        let note = |(node, note): (ArcStr, crate::decide::schedule::Note)| {
            let ev = NodeEvent {
                source: SOURCE.into(),
                severity: Severity::Normal,
                reason: reason::WAITING_FOR_BUDGET.into(),
                message: note.message().into(),
                count: note.count,
                first_seen: note.first_seen,
                last_seen: now,
            };
            (node, note.existing, ev)
        };
        notes.into_iter().map(note).collect()
    }

    /// Take the names of the budget waits' Events written since the last round (by the rounds'
    /// tails), so the next note of each wait updates its Event.
    pub(super) fn take_noted(&mut self) {
        while let Ok((node, name)) = self.tails.noted.1.try_recv() {
            self.fleet.wait_noted(&node, name);
        }
    }

    /// Report pods whose readiness a node flap left stale, and evict them when configured, as
    /// [`StaleSchedule`](crate::decide::schedule::StaleSchedule) says. Looks only at pods whose own
    /// readiness is stale (kept apart by the cache), on nodes this drainer selects (another drainer
    /// has its own).
    pub(super) async fn stale_readiness(&mut self, now: Timestamp) {
        let Some(threshold) = self.cfg.stale_readiness else {
            return;
        };
        if !self.observed.synced() {
            return;
        }
        let candidates = self.observed.stale_pods();
        let fleet = &self.fleet;
        let stale = crate::decide::stale::stale_among(
            candidates.iter().map(|p| &**p),
            |n| {
                fleet
                    .view(n)
                    .filter(|_| fleet.selected(n))
                    .and_then(|v| v.ready_since())
            },
            threshold,
            now,
        );
        self.record.metrics().stale_pods.set(stale.len() as i64);
        let evict = self.cfg.evict_stale_pods;
        let due = self
            .chores
            .stale
            .plan(stale, now, evict, crate::act::PDB_RETRY);
        for d in due {
            if d.evict {
                self.exec.evict_stale(&d.stale).await;
            }
            if !d.report {
                continue;
            }
            self.record.metrics().stale_reported.inc();
            let action = match (&d.stale.exempt, evict) {
                (Some(why), _) => format!("never evicted ({why})"),
                (None, true) => "evicting it so its controller recreates it".to_string(),
                (None, false) => "not evicted (enable with --evict-stale-pods)".to_string(),
            };
            let message = format!(
                "Pod is Ready=False although all its containers are ready, and its node {} has been Ready for over {}: \
                 the readiness is stale (left from a node flap) and Services exclude the pod; {action}",
                d.stale.node,
                humantime::format_duration(threshold)
            );
            self.record.stale(&d.stale, message).await;
        }
    }
}
