//! The monitors' supervisor: it owns the running monitors (one per rule file), what they are started
//! with (the context, the restored conditions, the checkpoint) and where they report (the writer's
//! channel). It starts them, and on hot reload applies a new rule set: removed files stop their
//! monitor (their conditions leave the Node, their metric series go), changed inputs restart it, other
//! changes reconfigure it in place. I/O shell; the reload decision (`changes`) is pure.
//!
//! The rule paths are watched as directories (a ConfigMap volume swaps its `..data` symlink, which a
//! watch on the file would not survive), for content changes only (`common::filewatch`: reads,
//! including our own, are not changes). A bad set is logged precisely and the last good rules stay.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::{mpsc, watch};

use crate::checkpoint::Checkpoint;
use crate::config::{self, Monitor, RuleSet};
use crate::monitor::{self, Context, Handle, Outcome};
use crate::occurrence::Occurrence;
use crate::problem::Condition;
use crate::report::writer::Snapshot;

/// Wait after a change so a burst of writes (an editor, a symlink swap) is read once.
const DEBOUNCE: Duration = Duration::from_millis(300);

/// The running monitors by name (shared with `Running::shutdown`).
pub(crate) type Monitors = Arc<tokio::sync::Mutex<BTreeMap<String, Handle>>>;

pub(crate) struct Supervisor {
    pub(crate) monitors: Monitors,
    ctx: Context,
    snapshot: Snapshot,
    checkpoint: Arc<Mutex<Checkpoint>>,
    outcomes: mpsc::Sender<Outcome>,
    current: RuleSet,
}

impl Supervisor {
    pub(crate) fn new(
        ctx: Context,
        snapshot: Snapshot,
        checkpoint: Arc<Mutex<Checkpoint>>,
        outcomes: mpsc::Sender<Outcome>,
    ) -> Supervisor {
        Supervisor {
            monitors: Arc::default(),
            ctx,
            snapshot,
            checkpoint,
            outcomes,
            current: RuleSet::default(),
        }
    }

    /// Start a monitor per file of `rules`, their conditions beginning from `restored` (what the Node
    /// said at start) and their inputs from the checkpoint.
    pub(crate) async fn start(&mut self, rules: RuleSet, restored: &[Condition]) {
        let mut map = self.monitors.lock().await;
        for m in &rules.monitors {
            self.ctx.metrics.declare_monitor(m);
            if let Some(h) = self.spawn(m, restored.to_vec()) {
                map.insert(m.name.clone(), h);
            }
        }
        drop(map);
        let revision = rules.revision.clone();
        let _ = self.outcomes.send(Outcome::Rules { revision }).await;
        self.current = rules;
    }

    /// Start one monitor; `None` (logged) when its input cannot be started: its health entry then
    /// stays silent and `/healthz` names it.
    fn spawn(&self, m: &Monitor, restored: Vec<Condition>) -> Option<Handle> {
        let cp = self
            .checkpoint
            .lock()
            .unwrap()
            .monitors
            .get(&m.name)
            .cloned();
        let spawned = monitor::spawn(
            Arc::new(m.clone()),
            &self.ctx,
            restored,
            cp,
            self.outcomes.clone(),
        );
        spawned
            .map_err(|error| Occurrence::InputFailed { error: &error }.emit(&self.ctx.metrics))
            .ok()
    }

    /// Reload `paths` whenever their content changes, until `stop`.
    pub(crate) async fn watch(mut self, paths: Vec<PathBuf>, mut stop: watch::Receiver<bool>) {
        let mut watch = match nodemedic_common::filewatch::ContentWatch::new(&paths, DEBOUNCE) {
            Ok(w) => {
                let checks = self.ctx.metrics.rule_file_checks.clone();
                w.on_check(move || {
                    checks.inc();
                })
            }
            Err(e) => {
                tracing::error!(error = %e, "cannot watch the rule files; hot reload is off");
                return;
            }
        };
        loop {
            tokio::select! {
                _ = stop.changed() => return,
                r = watch.changed() => if r.is_none() { return },
            }
            match config::load_paths(&paths) {
                Err(errors) => {
                    Occurrence::ReloadRejected { errors: &errors }.emit(&self.ctx.metrics)
                }
                Ok(next) => {
                    self.apply(next).await;
                    let monitors = self.current.monitors.len();
                    Occurrence::Reloaded { monitors }.emit(&self.ctx.metrics);
                }
            }
            // Parsing and compiling freed what the old rules held and what compiling took.
            give_back_memory("rules reloaded");
        }
    }

    /// Move from the current rule set to `next`, as [`changes`] says.
    async fn apply(&mut self, next: RuleSet) {
        let mut map = self.monitors.lock().await;
        let restored = self.snapshot.lock().unwrap().clone();
        for change in changes(&self.current, &next) {
            match change {
                Change::Remove(old) => {
                    if let Some(h) = map.remove(&old.name) {
                        h.stop().await;
                    }
                    self.ctx.metrics.forget_monitor(old);
                    tracing::info!(monitor = %old.name, "monitor removed");
                    let monitor = old.name.clone();
                    let _ = self.outcomes.send(Outcome::Removed { monitor }).await;
                }
                Change::Reconfigure(m) => {
                    self.ctx.metrics.declare_monitor(m);
                    if let Some(h) = map.get_mut(&m.name) {
                        h.reconfigure(Arc::new(m.clone()));
                    }
                }
                Change::Restart(m) | Change::Add(m) => {
                    self.ctx.metrics.declare_monitor(m);
                    if let Some(h) = map.remove(&m.name) {
                        h.stop().await;
                        tracing::info!(monitor = %m.name, "input changed; restarting the monitor");
                    } else {
                        tracing::info!(monitor = %m.name, "monitor added");
                    }
                    let monitor = m.name.clone();
                    let _ = self.outcomes.send(Outcome::Added { monitor }).await;
                    if let Some(h) = self.spawn(m, restored.clone()) {
                        map.insert(m.name.clone(), h);
                    }
                }
            }
        }
        drop(map);
        let revision = next.revision.clone();
        let _ = self.outcomes.send(Outcome::Rules { revision }).await;
        self.current = next;
    }
}

/// What a reload does to one monitor.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Change<'a> {
    /// Its file is gone: stop it, its conditions leave the Node.
    Remove(&'a Monitor),
    /// Same input, other rules: swap them in place (its input keeps its position).
    Reconfigure(&'a Monitor),
    /// Its input changed: stop it and start it anew.
    Restart(&'a Monitor),
    /// A new file.
    Add(&'a Monitor),
}

/// The changes from `current` to `next`, pure: removals first, then the new set in its order.
pub(crate) fn changes<'a>(current: &'a RuleSet, next: &'a RuleSet) -> Vec<Change<'a>> {
    let find = |set: &'a RuleSet, name: &str| set.monitors.iter().find(|m| m.name == name);
    let removed = current
        .monitors
        .iter()
        .filter(|old| find(next, &old.name).is_none())
        .map(Change::Remove);
    let kept = next.monitors.iter().map(|m| match find(current, &m.name) {
        // An exec monitor's checks are its input: a change restarts them.
        Some(old) if old.input == m.input && old.checks == m.checks => Change::Reconfigure(m),
        Some(_) => Change::Restart(m),
        None => Change::Add(m),
    });
    removed.chain(kept).collect()
}

/// Give the memory a burst of work (loading and compiling rules) freed back to the system
/// ([`nodemedic_common::alloc`]).
pub(crate) fn give_back_memory(after: &str) {
    if let Some(kib) = nodemedic_common::alloc::give_back() {
        tracing::debug!(after, kib, "gave freed memory back to the system");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(files: &[(&str, &str)]) -> RuleSet {
        let sources: Vec<(PathBuf, String)> = files
            .iter()
            .map(|(n, t)| (PathBuf::from(n), t.to_string()))
            .collect();
        config::load_sources(&sources).unwrap()
    }

    const KMSG: &str = "source: a\ninput: {kind: kmsg}\n";
    const FILE: &str = "source: a\ninput: {kind: file, path: /var/log/x.log}\n";

    #[test]
    fn a_reload_removes_reconfigures_restarts_and_adds() {
        let current = set(&[
            ("gone.yaml", KMSG),
            ("same.yaml", KMSG),
            ("moved.yaml", KMSG),
        ]);
        let next = set(&[
            ("same.yaml", &format!("{KMSG}lookback: 1m\n")),
            ("moved.yaml", FILE),
            ("new.yaml", KMSG),
        ]);
        let got: Vec<(&str, &str)> = changes(&current, &next)
            .into_iter()
            .map(|c| match c {
                Change::Remove(m) => ("remove", m.name.as_str()),
                Change::Reconfigure(m) => ("reconfigure", m.name.as_str()),
                Change::Restart(m) => ("restart", m.name.as_str()),
                Change::Add(m) => ("add", m.name.as_str()),
            })
            .collect();
        assert_eq!(
            got,
            [
                ("remove", "gone"),
                ("reconfigure", "same"),
                ("restart", "moved"),
                ("add", "new")
            ]
        );
        assert!(
            changes(&next, &next)
                .iter()
                .all(|c| matches!(c, Change::Reconfigure(_)))
        );
    }
}
