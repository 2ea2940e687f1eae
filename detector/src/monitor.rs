//! One monitor at run time: its input feeds its problem state; what it reports goes, in order, to the
//! reporter as [`Outcome`]s. Progress (the input position) is sent after the outcomes of the lines it
//! covers, so the reporter can checkpoint a position only once everything before it was written.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::jiff::Timestamp;
use nodemedic_common::events::Severity;
use nodemedic_common::health::Health;
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;

use crate::checkpoint::Position;
use crate::config::{Input, Monitor};
use crate::metrics::Metrics;
use crate::occurrence::Occurrence;
use crate::problem::{Condition, MonitorState, Report};
use crate::source::{self, SourceEvent};

/// What a monitor tells the reporter.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// The monitor's full condition list (sent at start and after every change).
    Conditions {
        monitor: String,
        conditions: Vec<Condition>,
    },
    /// An Event to write (aggregated by the reporter); covered by the monitor's next Progress.
    Event {
        monitor: String,
        source: String,
        severity: Severity,
        reason: String,
        message: String,
        at: Timestamp,
    },
    /// Everything up to this position has been sent.
    Progress { monitor: String, position: Position },
    /// The monitor was added by a reload (its conditions are coming).
    Added { monitor: String },
    /// The monitor was removed by a reload.
    Removed { monitor: String },
}

/// What every monitor needs from the process.
#[derive(Clone)]
pub struct Context {
    pub kmsg_path: PathBuf,
    pub journalctl: PathBuf,
    pub journal_dir: Option<PathBuf>,
    pub boot_id: String,
    pub health: Health,
    pub metrics: Metrics,
    /// The time the problem state ticks and reconfigures at.
    pub clock: nodemedic_common::clock::Clock,
}

/// Default lookback when a rule file gives none (NPD's kernel monitor default).
pub const DEFAULT_LOOKBACK: Duration = Duration::from_secs(300);
/// Lines handled before yielding progress and checking other work.
const BATCH: usize = 512;

/// A running monitor.
pub struct Handle {
    pub monitor: Arc<Monitor>,
    config: watch::Sender<Arc<Monitor>>,
    stop: watch::Sender<bool>,
    task: JoinHandle<()>,
}

impl Handle {
    /// Swap in new rules (same input).
    pub fn reconfigure(&mut self, monitor: Arc<Monitor>) {
        self.monitor = monitor.clone();
        let _ = self.config.send(monitor);
    }

    /// Stop the monitor and its input, and wait for it.
    pub async fn stop(self) {
        let _ = self.stop.send(true);
        let _ = self.task.await;
    }
}

/// Start a monitor whose conditions begin from `restored` and whose input resumes at `checkpoint`.
pub fn spawn(
    monitor: Arc<Monitor>,
    ctx: &Context,
    restored: Vec<Condition>,
    checkpoint: Option<Position>,
    outcomes: mpsc::Sender<Outcome>,
) -> Handle {
    let (config_tx, config_rx) = watch::channel(monitor.clone());
    let (stop_tx, stop_rx) = watch::channel(false);
    let ctx2 = ctx.clone();
    let m = monitor.clone();
    let task = if let Input::Exec(settings) = &monitor.input {
        let (tx, rx) = mpsc::channel(64);
        source::exec::start(&monitor, settings, &ctx.health, tx, stop_rx.clone());
        let runs = match checkpoint {
            Some(Position::Exec { runs }) => runs,
            _ => 0,
        };
        tokio::spawn(async move {
            run_checks(m, ctx2, restored, runs, rx, config_rx, stop_rx, outcomes).await
        })
    } else {
        let (src_tx, src_rx) = mpsc::channel(1024);
        start_input(&monitor, ctx, checkpoint, src_tx, stop_rx.clone());
        tokio::spawn(
            async move { run(m, ctx2, restored, src_rx, config_rx, stop_rx, outcomes).await },
        )
    };
    Handle {
        monitor,
        config: config_tx,
        stop: stop_tx,
        task,
    }
}

fn start_input(
    monitor: &Monitor,
    ctx: &Context,
    checkpoint: Option<Position>,
    tx: mpsc::Sender<SourceEvent>,
    stop: watch::Receiver<bool>,
) {
    let lookback = monitor.lookback.unwrap_or(DEFAULT_LOOKBACK);
    let beat = ctx
        .health
        .register(format!("input:{}", monitor.name), source::MAX_SILENCE);
    match &monitor.input {
        Input::Kmsg => {
            let start = source::kmsg::Start {
                boot_id: ctx.boot_id.clone(),
                checkpoint,
                lookback,
            };
            let path = ctx.kmsg_path.clone();
            std::thread::Builder::new()
                .name(format!("kmsg-{}", monitor.name))
                .spawn(move || source::kmsg::follow(path, start, tx, beat, stop))
                .expect("spawn kmsg thread");
        }
        Input::File { path, format } => {
            let (path, format) = (path.clone(), *format);
            std::thread::Builder::new()
                .name(format!("file-{}", monitor.name))
                .spawn(move || source::file::follow(path, format, checkpoint, tx, beat, stop))
                .expect("spawn file thread");
        }
        Input::Journal {
            identifiers,
            units,
            directory,
        } => {
            let spec = source::journal::JournalSpec {
                journalctl: ctx.journalctl.clone(),
                directory: directory.clone().or_else(|| ctx.journal_dir.clone()),
                identifiers: identifiers.clone(),
                units: units.clone(),
                lookback,
            };
            tokio::spawn(source::journal::follow(spec, checkpoint, tx, beat, stop));
        }
        // Started by `spawn` (checks, not lines).
        Input::Exec(_) => {}
    }
}

/// A monitor's state from its restored conditions, sent to the writer first: a node's conditions
/// are set from start, before any input. None when the writer is gone (shutting down).
async fn start(
    monitor: Arc<Monitor>,
    ctx: &Context,
    restored: &[Condition],
    outcomes: &mpsc::Sender<Outcome>,
) -> Option<MonitorState> {
    let name = monitor.name.clone();
    let state = MonitorState::new(monitor, restored, ctx.clock.now());
    let first = Outcome::Conditions {
        monitor: name,
        conditions: state.conditions().to_vec(),
    };
    outcomes.send(first).await.ok()?;
    Some(state)
}

/// An exec monitor: check results in, reports out. `runs` counts results handled (its Progress, so
/// the writer confirms the Events they caused).
#[allow(clippy::too_many_arguments)]
async fn run_checks(
    monitor: Arc<Monitor>,
    ctx: Context,
    restored: Vec<Condition>,
    mut runs: u64,
    mut results: mpsc::Receiver<source::exec::CheckResult>,
    mut config: watch::Receiver<Arc<Monitor>>,
    mut stop: watch::Receiver<bool>,
    outcomes: mpsc::Sender<Outcome>,
) {
    let name = monitor.name.clone();
    let names = source::exec::health_names(&monitor);
    let Some(mut state) = start(monitor, &ctx, &restored, &outcomes).await else {
        return;
    };
    // Consecutive runs that could not say (crash loops show in /healthz).
    let mut unknown_in_a_row = vec![0u32; names.len()];
    let mut reports = Vec::new();
    loop {
        tokio::select! {
            _ = stop.changed() => return,
            changed = config.changed() => {
                if changed.is_err() || !reconfigure(&mut state, &mut config, &ctx, &outcomes).await {
                    return;
                }
            }
            r = results.recv() => {
                let Some(r) = r else { return };
                let check = names.get(r.check).map(String::as_str).unwrap_or("check");
                let n = unknown_in_a_row.get_mut(r.check);
                let streak = match (n, r.exit) {
                    (Some(n), crate::problem::exec::Exit::Unknown) => { *n = n.saturating_add(1); *n }
                    (Some(n), _) => { *n = 0; 0 }
                    (None, _) => 0,
                };
                Occurrence::CheckRan { monitor: &name, check, result: &r, unknown_in_a_row: streak, health: &ctx.health }.emit(&ctx.metrics);
                state.check_result(r.check, r.exit, &r.message, r.at, &mut reports);
                runs = runs.saturating_add(1);
            }
        }
        if !reports.is_empty() && !send_reports(&state, &ctx, &mut reports, &outcomes).await {
            return;
        }
        if outcomes
            .send(Outcome::Progress {
                monitor: name.clone(),
                position: Position::Exec { runs },
            })
            .await
            .is_err()
        {
            return;
        }
    }
}

async fn run(
    monitor: Arc<Monitor>,
    ctx: Context,
    restored: Vec<Condition>,
    mut input: mpsc::Receiver<SourceEvent>,
    mut config: watch::Receiver<Arc<Monitor>>,
    mut stop: watch::Receiver<bool>,
    outcomes: mpsc::Sender<Outcome>,
) {
    let name = monitor.name.clone();
    let counters = ctx.metrics.monitor(&name);
    let Some(mut state) = start(monitor, &ctx, &restored, &outcomes).await else {
        return;
    };
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    let mut reports = Vec::new();
    loop {
        let mut progress = None;
        tokio::select! {
            _ = stop.changed() => return,
            _ = tick.tick() => state.tick(ctx.clock.now(), &mut reports),
            changed = config.changed() => {
                if changed.is_err() || !reconfigure(&mut state, &mut config, &ctx, &outcomes).await {
                    return;
                }
            }
            ev = input.recv() => {
                let Some(ev) = ev else { return };
                let mut next = Some(ev);
                let mut n = 0;
                while let Some(ev) = next.take() {
                    match ev {
                        SourceEvent::Line { text, at, position } => {
                            counters.lines.inc();
                            state.process(&text, at, &mut reports);
                            progress = Some(position);
                        }
                        SourceEvent::Malformed { why } => {
                            counters.parse_errors.inc();
                            tracing::debug!(monitor = %name, %why, "malformed record skipped");
                        }
                        SourceEvent::Overrun => {
                            Occurrence::Overrun { monitor: &name }.emit(&ctx.metrics)
                        }
                    }
                    n += 1;
                    if n < BATCH {
                        next = input.try_recv().ok();
                    }
                }
            }
        }
        if !reports.is_empty() && !send_reports(&state, &ctx, &mut reports, &outcomes).await {
            return;
        }
        if let Some(position) = progress
            && outcomes
                .send(Outcome::Progress {
                    monitor: name.clone(),
                    position,
                })
                .await
                .is_err()
        {
            return;
        }
    }
}

/// Swap in reloaded rules and send the conditions; false when the reporter is gone.
async fn reconfigure(
    state: &mut MonitorState,
    config: &mut watch::Receiver<Arc<Monitor>>,
    ctx: &Context,
    outcomes: &mpsc::Sender<Outcome>,
) -> bool {
    let m = config.borrow_and_update().clone();
    let monitor = m.name.clone();
    tracing::info!(%monitor, "rules reloaded");
    state.reconfigure(m, ctx.clock.now());
    let conditions = state.conditions().to_vec();
    outcomes
        .send(Outcome::Conditions {
            monitor,
            conditions,
        })
        .await
        .is_ok()
}

/// Turn reports into outcomes; false when the reporter is gone.
async fn send_reports(
    state: &MonitorState,
    ctx: &Context,
    reports: &mut Vec<Report>,
    outcomes: &mpsc::Sender<Outcome>,
) -> bool {
    let m = state.monitor();
    let mut conditions_changed = false;
    for r in reports.drain(..) {
        let ev = r.event();
        match &r {
            Report::Problem {
                reason, message, ..
            } => Occurrence::TemporaryProblem {
                monitor: &m.name,
                reason,
                message,
            }
            .emit(&ctx.metrics),
            Report::Condition { condition, .. } => {
                conditions_changed = true;
                Occurrence::ConditionChanged {
                    monitor: &m.name,
                    condition,
                    problem: ev.as_ref().is_some_and(|e| e.problem),
                }
                .emit(&ctx.metrics)
            }
        }
        let Some(ev) = ev else {
            continue;
        };
        let out = Outcome::Event {
            monitor: m.name.clone(),
            source: m.source.clone(),
            severity: ev.severity,
            reason: ev.reason,
            message: ev.message,
            at: ev.at,
        };
        if outcomes.send(out).await.is_err() {
            return false;
        }
    }
    if conditions_changed {
        let c = state.conditions().to_vec();
        return outcomes
            .send(Outcome::Conditions {
                monitor: m.name.clone(),
                conditions: c,
            })
            .await
            .is_ok();
    }
    true
}
