//! The monitors' supervisor: it owns the running monitors (one per rule file), what they are started
//! with (the context, the restored conditions, the checkpoint) and where they report (the writer's
//! channel). It starts them, and on hot reload applies a new rule set: removed files stop their
//! monitor (their conditions leave the Node, their metric series go), changed inputs restart it, other
//! changes reconfigure it in place.
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
pub type Monitors = Arc<tokio::sync::Mutex<BTreeMap<String, Handle>>>;

pub struct Supervisor {
    pub monitors: Monitors,
    ctx: Context,
    snapshot: Snapshot,
    checkpoint: Arc<Mutex<Checkpoint>>,
    outcomes: mpsc::Sender<Outcome>,
    current: RuleSet,
}

impl Supervisor {
    pub fn new(
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
    pub async fn start(&mut self, rules: RuleSet, restored: &[Condition]) {
        let mut map = self.monitors.lock().await;
        for m in &rules.monitors {
            map.insert(m.name.clone(), self.spawn(m, restored.to_vec()));
        }
        drop(map);
        self.current = rules;
    }

    fn spawn(&self, m: &Monitor, restored: Vec<Condition>) -> Handle {
        let cp = self
            .checkpoint
            .lock()
            .unwrap()
            .monitors
            .get(&m.name)
            .cloned();
        monitor::spawn(
            Arc::new(m.clone()),
            &self.ctx,
            restored,
            cp,
            self.outcomes.clone(),
        )
    }

    /// Reload `paths` whenever their content changes, until `stop`.
    pub async fn watch(mut self, paths: Vec<PathBuf>, mut stop: watch::Receiver<bool>) {
        let mut watch = match nodemedic_common::filewatch::ContentWatch::new(&paths, DEBOUNCE) {
            Ok(w) => w,
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
        }
    }

    /// Move from the current rule set to `next`.
    async fn apply(&mut self, next: RuleSet) {
        let mut map = self.monitors.lock().await;
        let restored = self.snapshot.lock().unwrap().clone();
        for old in &self.current.monitors {
            if next.monitors.iter().any(|m| m.name == old.name) {
                continue;
            }
            if let Some(h) = map.remove(&old.name) {
                h.stop().await;
            }
            self.ctx.metrics.forget_monitor(old);
            tracing::info!(monitor = %old.name, "monitor removed");
            let _ = self
                .outcomes
                .send(Outcome::Removed {
                    monitor: old.name.clone(),
                })
                .await;
        }
        for m in &next.monitors {
            match map.get_mut(&m.name) {
                Some(h) if h.monitor.input == m.input => h.reconfigure(Arc::new(m.clone())),
                _ => {
                    if let Some(h) = map.remove(&m.name) {
                        h.stop().await;
                        tracing::info!(monitor = %m.name, "input changed; restarting the monitor");
                    } else {
                        tracing::info!(monitor = %m.name, "monitor added");
                    }
                    let _ = self
                        .outcomes
                        .send(Outcome::Added {
                            monitor: m.name.clone(),
                        })
                        .await;
                    map.insert(m.name.clone(), self.spawn(m, restored.clone()));
                }
            }
        }
        drop(map);
        self.current = next;
    }
}
