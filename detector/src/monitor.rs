//! One monitor at run time: its input feeds its problem state; what it reports goes, in order, to the
//! reporter as [`Outcome`]s. Progress (the input position) is sent after the outcomes of the lines it
//! covers, so the reporter can checkpoint a position only once everything before it was written.
//! I/O shell around the pure problem state: one task per monitor.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::jiff::Timestamp;
use nodemedic_common::events::Severity;
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;

use crate::checkpoint::Position;
use crate::config::Monitor;
use crate::metrics::Metrics;
use crate::occurrence::Occurrence;
use crate::problem::{Condition, MonitorState, Report};
use crate::source::exec::Exit;
use crate::source::{self, SourceEvent};

/// What a monitor tells the reporter.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Outcome {
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
    /// The rules in force now (at start and after each reload) have this revision.
    Rules { revision: String },
}

/// What every monitor needs from the process.
#[derive(Clone)]
pub(crate) struct Context {
    /// What the inputs need (devices, journalctl, boot id, health).
    pub(crate) inputs: source::Context,
    pub(crate) metrics: Metrics,
    /// The time the problem state ticks and reconfigures at.
    pub(crate) clock: nodemedic_common::clock::Clock,
}

/// Events handled before yielding progress and checking other work.
const BATCH: usize = 512;

/// A running monitor.
pub(crate) struct Handle {
    pub(crate) monitor: Arc<Monitor>,
    config: watch::Sender<Arc<Monitor>>,
    stop: watch::Sender<bool>,
    task: JoinHandle<()>,
}

impl Handle {
    /// Swap in new rules (same input).
    pub(crate) fn reconfigure(&mut self, monitor: Arc<Monitor>) {
        self.monitor = monitor.clone();
        let _ = self.config.send(monitor);
    }

    /// Stop the monitor and its input, and wait for it.
    pub(crate) async fn stop(self) {
        let _ = self.stop.send(true);
        let _ = self.task.await;
    }
}

/// Start a monitor whose conditions begin from `restored` and whose input resumes at `checkpoint`.
/// Its input is started here; the error says why it could not be.
pub(crate) fn spawn(
    monitor: Arc<Monitor>,
    ctx: &Context,
    restored: Vec<Condition>,
    checkpoint: Option<Position>,
    outcomes: mpsc::Sender<Outcome>,
) -> Result<Handle, source::SpawnError> {
    let (config_tx, config_rx) = watch::channel(monitor.clone());
    let (stop_tx, stop_rx) = watch::channel(false);
    let input = source::spawn(&monitor, &ctx.inputs, checkpoint, stop_rx.clone())?;
    let (ctx2, m) = (ctx.clone(), monitor.clone());
    let task =
        tokio::spawn(
            async move { run(m, ctx2, restored, input, config_rx, stop_rx, outcomes).await },
        );
    Ok(Handle {
        monitor,
        config: config_tx,
        stop: stop_tx,
        task,
    })
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

/// The monitor's loop: input events in (lines and check results alike), reports and progress out;
/// a tick every second for quiet-period recoveries; reloaded rules swapped in.
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
    let mut counted = Counted::new(&monitor, &ctx);
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
                    counted.count(&ev);
                    state.apply(&ev, &mut reports);
                    if let SourceEvent::Line { position, .. } | SourceEvent::Check { position, .. } = ev {
                        progress = Some(position);
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
        if let Some(position) = progress {
            let monitor = name.clone();
            if outcomes
                .send(Outcome::Progress { monitor, position })
                .await
                .is_err()
            {
                return;
            }
        }
    }
}

/// What the monitor counts and says about its input events (the problem state does not see this).
struct Counted<'a> {
    ctx: &'a Context,
    name: String,
    counters: crate::metrics::MonitorCounters,
    /// Each check's health name, and its consecutive runs that could not say (crash loops show in
    /// /healthz).
    checks: Vec<(String, u32)>,
}

impl<'a> Counted<'a> {
    fn new(monitor: &Monitor, ctx: &'a Context) -> Self {
        let checks = source::exec::health_names(monitor)
            .into_iter()
            .map(|n| (n, 0))
            .collect();
        Counted {
            ctx,
            name: monitor.name.clone(),
            counters: ctx.metrics.monitor(&monitor.name),
            checks,
        }
    }

    fn count(&mut self, ev: &SourceEvent) {
        let name = self.name.as_str();
        match ev {
            SourceEvent::Line { .. } => {
                self.counters.lines.inc();
            }
            SourceEvent::Sample(_) => {
                self.counters.lines.inc();
            }
            SourceEvent::Malformed { why } => {
                self.counters.parse_errors.inc();
                tracing::debug!(monitor = %name, %why, "malformed record skipped");
            }
            SourceEvent::Overrun => Occurrence::Overrun { monitor: name }.emit(&self.ctx.metrics),
            SourceEvent::Check { result, .. } => {
                let (check, streak) = match self.checks.get_mut(result.check) {
                    Some((check, n)) => {
                        *n = match result.exit {
                            Exit::Unknown => n.saturating_add(1),
                            _ => 0,
                        };
                        (check.as_str(), *n)
                    }
                    None => ("check", 0),
                };
                Occurrence::CheckRan {
                    monitor: name,
                    check,
                    result,
                    unknown_in_a_row: streak,
                    health: &self.ctx.inputs.health,
                }
                .emit(&self.ctx.metrics)
            }
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
