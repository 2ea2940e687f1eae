//! `explain NODE`: the whole chain for one node now, pure. What the plan decides for it (the same
//! `decide` over the same snapshot), and everything the decision read, with its numbers: each
//! condition against the configured ones, the selection, every gate, the drain record and the
//! drainer's Events about the node, each pod and the rule or PDB that holds it; and what happens
//! next, and when.

use std::time::Duration;

use k8s_openapi::api::core::v1::{Event, Node};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::jiff::Timestamp;
use serde::Serialize;

use super::conditions::{ConditionLine, conditions};
use crate::config::Config;
use crate::config::select::Selector;
use crate::decide::gates::snapshot::{Recorded, fleet_health};
use crate::decide::gates::{breaker, outage, window};
use crate::decide::problem::fmt_d;
use crate::decide::{self, Action, Effect, NodeDecision, PodPlan, Why};
use crate::model::node::NodeView;
use crate::model::pod::PodInfo;
use crate::model::record::Record;

/// One node, explained.
#[derive(Debug, Clone, Serialize)]
pub struct Explanation {
    pub(crate) node: String,
    pub(crate) now: Timestamp,
    pub(crate) conditions: Vec<ConditionLine>,
    pub(crate) selection: Selection,
    pub(crate) gates: Vec<GateLine>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) record: Option<Record>,
    /// Whether the record's seal was checked (only with the drainer's key).
    #[serde(skip)]
    pub(crate) record_checked: bool,
    /// The drainer's Events about the node, oldest first.
    pub(crate) history: Vec<HistoryLine>,
    pub(crate) decision: DecisionLine,
    pub(crate) pods: Vec<PodPlan>,
    /// Its remediation ladder, if its problem or its record names one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) ladder: Option<super::ladder::LadderLine>,
    pub(crate) next: Next,
}

#[derive(Debug, Clone, Serialize)]
pub(crate) struct Selection {
    pub(crate) selected: bool,
    /// Which selector term admitted or excluded it, in words.
    pub(crate) how: Vec<String>,
}

#[derive(Debug, Clone, Serialize)]
pub(crate) struct GateLine {
    pub(crate) gate: &'static str,
    /// Holds this node now.
    pub(crate) holds: bool,
    pub(crate) detail: String,
}

#[derive(Debug, Clone, Serialize)]
pub(crate) struct HistoryLine {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) at: Option<Timestamp>,
    pub(crate) reason: String,
    pub(crate) message: String,
    pub(crate) count: i32,
}

#[derive(Debug, Clone, Serialize)]
pub(crate) struct DecisionLine {
    pub(crate) action: Action,
    /// Under a dry run: the action is what the drainer would do, and does not.
    #[serde(rename = "dryRun", skip_serializing_if = "std::ops::Not::not")]
    pub(crate) dry_run: bool,
    pub(crate) reason: String,
}

impl DecisionLine {
    pub(crate) fn of(d: &NodeDecision, dry_run: bool) -> DecisionLine {
        DecisionLine {
            action: d.action(),
            dry_run,
            reason: d.reason(),
        }
    }
}

/// The next thing that will happen to the node: `at` None is now (or never, for `what` that says
/// nothing will).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct Next {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) at: Option<Timestamp>,
    /// The action then (None: nothing is planned).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) action: Option<Action>,
    pub(crate) what: String,
}

/// What `explain` reads: the snapshot `drainer plan` reads, the node's full object (for its
/// conditions' messages) and the drainer's Events about it.
pub(crate) struct Snapshot<'a> {
    pub(crate) views: &'a [NodeView],
    pub(crate) node: &'a Node,
    pub(crate) pods: &'a [PodInfo],
    pub(crate) pdbs: &'a [PodDisruptionBudget],
    pub(crate) events: &'a [Event],
    pub(crate) recorded: &'a Recorded,
}

/// Explain `s.node` at `now` (None when the snapshot has no view of it).
pub(crate) fn explain(s: &Snapshot, cfg: &Config, now: Timestamp) -> Option<Explanation> {
    let name = s.node.metadata.name.as_deref()?;
    let decisions = decide::decide_views(s.views, s.pods, cfg, s.recorded, now);
    let mut d = decisions.into_iter().find(|d| d.node.as_str() == name)?;
    if d.pods.is_empty() {
        // Not cordoned or drained now: how a drain would treat each pod all the same.
        d.pods = s
            .pods
            .iter()
            .filter(|p| p.node.as_deref() == Some(name))
            .map(|p| decide::evictions::decide(p, cfg))
            .collect();
    }
    super::annotate_pdbs(std::slice::from_mut(&mut d), s.pods, s.pdbs);
    let view = s.views.iter().find(|v| v.name.as_str() == name)?;
    let record = Record::of(view, &cfg.records, &cfg.owner);
    Some(Explanation {
        // Offline, the reboots of the last day are not known (the memory is the live drainer's):
        // counted as none, as `decide_views` counts them.
        ladder: super::ladder::ladder(view, record.as_ref(), &d, (0, 0), cfg),
        node: name.to_string(),
        now,
        conditions: conditions(s.node, cfg, now),
        selection: selection(view, cfg),
        gates: gates(s, view, cfg, now),
        record,
        record_checked: cfg.records.is_checked(),
        history: history(s.events, name),
        next: next(&d, cfg.dry_run, now),
        decision: DecisionLine::of(&d, cfg.dry_run),
        pods: d.pods,
    })
}

fn selection(view: &NodeView, cfg: &Config) -> Selection {
    let mut how = Vec::new();
    let selected = cfg.selector.matches(view).unwrap_or(false);
    match &cfg.selector {
        Selector::All => how.push("no selector: every node is selected".to_string()),
        Selector::Cel { source, .. } => {
            let r = match cfg.selector.matches(view) {
                Ok(true) => "true".to_string(),
                Ok(false) => "false".to_string(),
                Err(e) => format!("an error ({e}), which counts as false"),
            };
            how.push(format!("--node-label-expr {source:?} is {r}"));
        }
        Selector::Labels { selector, .. } => {
            let text = selector.to_string();
            for term in crate::config::select::split_terms(&text) {
                let ok = Selector::labels(term)
                    .ok()
                    .and_then(|t| t.matches(view).ok())
                    .unwrap_or(false);
                let verdict = if ok { "matches" } else { "does not match" };
                how.push(format!("--node-selector term {:?} {verdict}", term.trim()));
            }
        }
    }
    let (k, v) = &cfg.exclude_label;
    if view.label(k) == Some(v.as_str()) {
        how.push(format!("opted out by the label {k}={v}"));
    }
    let (k, v) = &cfg.kosmos_label;
    if view.label(k) == Some(v.as_str()) {
        how.push(format!(
            "a Kosmos leaf node ({k}={v}): never drained for Ready{}",
            if cfg.kosmos_other_conditions {
                ""
            } else {
                " nor any other condition"
            }
        ));
    }
    Selection { selected, how }
}

fn gates(s: &Snapshot, view: &NodeView, cfg: &Config, now: Timestamp) -> Vec<GateLine> {
    let selected: Vec<(&NodeView, bool)> = s
        .views
        .iter()
        .map(|v| (v, cfg.selector.matches(v).unwrap_or(false)))
        .collect();
    let (health, domains) = fleet_health(&selected, cfg, now);
    let records: Vec<Option<Record>> = selected
        .iter()
        .map(|(v, _)| Record::of(v, &cfg.records, &cfg.owner))
        .collect();
    let totals = decide::Totals::of(
        selected
            .iter()
            .zip(&records)
            .map(|((_, sel), r)| (*sel, r.as_ref().filter(|r| r.owned_by(&cfg.owner, *sel)))),
    );
    let sf = &cfg.safety;
    let mut out = Vec::new();
    let limit = cfg.max_cordoned.limit(totals.selected);
    let ours = Record::of(view, &cfg.records, &cfg.owner).filter(|r| r.owned_by(&cfg.owner, true));
    let awaiting_drain = ours
        .as_ref()
        .is_some_and(|r| r.phase == crate::model::record::Phase::Cordoned);
    out.push(GateLine {
        gate: "cordon budget",
        holds: ours.is_none() && totals.cordoned >= limit,
        detail: format!(
            "{} cordoned by this drainer, at most {limit} at once (--max-cordoned {} of {} selected nodes)",
            totals.cordoned, cfg.max_cordoned, totals.selected
        ),
    });
    let spacing = totals
        .last_drain_start
        .map(|t| {
            format!(
                "; last drain started {t}, the next not before {}",
                nodemedic_common::time::add(t, cfg.drain_buffer)
            )
        })
        .unwrap_or_default();
    out.push(GateLine {
        gate: "drain budget",
        holds: awaiting_drain && totals.draining >= cfg.max_drains_in_flight,
        detail: format!(
            "{} of {} drains in flight{spacing}",
            totals.draining, cfg.max_drains_in_flight
        ),
    });
    let trip = breaker::trip(&health, sf);
    out.push(GateLine {
        gate: "circuit breaker",
        holds: trip.is_some(),
        detail: format!(
            "{} of {} selected nodes unhealthy (opens above {}); {} became unhealthy within {} (opens above {}){}",
            health.unhealthy,
            health.selected,
            sf.max_unhealthy.limit(health.selected),
            health.newly,
            fmt_d(sf.breaker_window),
            sf.breaker_new.limit(health.selected),
            trip.map(|t| format!(": open ({t})")).unwrap_or_default()
        ),
    });
    if let Some(d) = outage::domain_of(view, cfg) {
        let t = domains.get(d.as_str()).cloned().unwrap_or_default();
        let o = outage::outage(&d, &t, sf);
        let share = if t.size == 0 {
            0.0
        } else {
            100.0 * t.unhealthy as f64 / t.size as f64
        };
        out.push(GateLine {
            gate: "failure domain",
            holds: o.is_some(),
            detail: format!(
                "{d}: {} of {} unhealthy ({share:.0}%; an outage above {}% with at least {} nodes), {} cordoned{}",
                t.unhealthy,
                t.size,
                sf.domain_outage_percent,
                sf.domain_outage_min_nodes,
                t.cordoned,
                sf.max_cordoned_per_domain
                    .map(|b| format!(" (per-domain budget {})", b.limit(t.size)))
                    .unwrap_or_default()
            ),
        });
    }
    out.extend(timing_gates(s, view, cfg, now));
    out
}

/// The gates of time and of people: flap damping, the pause, the drain windows.
fn timing_gates(s: &Snapshot, view: &NodeView, cfg: &Config, now: Timestamp) -> Vec<GateLine> {
    let sf = &cfg.safety;
    let mut out = Vec::new();
    let flap = s.recorded.flapping.get(view.name.as_str());
    out.push(GateLine {
        gate: "flap damping",
        holds: flap.is_some(),
        detail: match (flap, sf.flap_threshold) {
            (_, 0) => "off (--flap-threshold 0)".to_string(),
            (Some(f), _) => format!(
                "flapping: {} changes reported, stable at {}",
                f.changes, f.stable_at
            ),
            (None, n) => format!(
                "not reported flapping ({n} changes within {} would be)",
                fmt_d(sf.flap_window)
            ),
        },
    });
    out.push(GateLine {
        gate: "pause",
        holds: s.recorded.paused.is_some(),
        detail: match &s.recorded.paused {
            Some(p) => format!("paused {p}"),
            None => "not paused".to_string(),
        },
    });
    let w = window::next_window(&sf.drain_windows, now);
    out.push(GateLine {
        gate: "drain window",
        holds: w.is_err(),
        detail: match w {
            Ok(()) if sf.drain_windows.is_empty() => "drains may start any time".to_string(),
            Ok(()) => "inside a drain window now".to_string(),
            Err(Some(t)) => format!("outside the drain windows; the next opens at {t}"),
            Err(None) => "outside the drain windows; none opens within a week".to_string(),
        },
    });
    out
}

fn history(events: &[Event], node: &str) -> Vec<HistoryLine> {
    let mut out: Vec<HistoryLine> = events
        .iter()
        .filter(|e| e.involved_object.name.as_deref() == Some(node))
        .filter(|e| {
            e.source.as_ref().and_then(|s| s.component.as_deref())
                == Some(crate::model::occurrence::SOURCE)
                || e.reporting_component.as_deref() == Some(crate::model::occurrence::SOURCE)
        })
        .map(|e| HistoryLine {
            at: e
                .first_timestamp
                .as_ref()
                .map(|t| t.0)
                .or(e.event_time.as_ref().map(|t| t.0)),
            reason: e.reason.clone().unwrap_or_default(),
            message: e.message.clone().unwrap_or_default(),
            count: e.count.unwrap_or(1),
        })
        .collect();
    out.sort_by_key(|h| h.at);
    out
}

/// What happens next, from the decision: now when it writes something, else when the clock
/// changes it (and to what), else nothing until the node changes.
pub(crate) fn next(d: &NodeDecision, dry_run: bool, now: Timestamp) -> Next {
    let at_wake = |what: String, action: Option<Action>| Next {
        at: d.wake,
        action,
        what,
    };
    if let (Effect::Nothing, Some((at, action, what))) = (&d.effect, super::ladder::next(d)) {
        return Next { at, action, what };
    }
    if !matches!(d.effect, Effect::Nothing) {
        return Next {
            at: None,
            action: Some(d.action()),
            what: {
                let said = d.said(dry_run);
                format!("now: {} ({})", said.action, said.reason)
            },
        };
    }
    match &d.why {
        Why::NotHeldLongEnough { pending } => at_wake(
            format!(
                "cordon at {} if {} still holds (gates and budgets permitting)",
                when(d.wake),
                pending
                    .iter()
                    .map(|p| p.split(" for ").next().unwrap_or(p))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            Some(Action::Cordon),
        ),
        Why::DrainScheduled { at, problem } => Next {
            at: Some(*at),
            action: Some(Action::Drain),
            what: format!("drain starts at {at} if {problem} still holds"),
        },
        Why::RetryScheduled { at, .. } => Next {
            at: Some(*at),
            action: Some(Action::Drain),
            what: format!("the failed drain is tried again at {at}"),
        },
        Why::Recovering { left } => Next {
            at: Some(nodemedic_common::time::add(now, *left)),
            action: Some(Action::Uncordon),
            what: format!("uncordon in {} if its conditions stay cleared", fmt_d(*left)),
        },
        Why::Probation { until } | Why::StartProbation { until } => Next {
            at: Some(*until),
            action: Some(Action::Uncordon),
            what: format!("uncordon at {until} if it stays healthy (probation)"),
        },
        Why::DrainSpacing { next } => Next {
            at: Some(*next),
            action: Some(Action::Drain),
            what: format!("drain starts at {next} (drain starts are spaced by the buffer)"),
        },
        Why::OutsideDrainWindow { next: Some(t), .. } => Next {
            at: Some(*t),
            action: Some(Action::Drain),
            what: format!("drain starts at {t}, when the next drain window opens"),
        },
        Why::Flapping { stable_at, .. } => Next {
            at: Some(*stable_at),
            action: None,
            what: format!("decided again at {stable_at}, if its conditions stop changing"),
        },
        Why::CordonBudget { used, limit, .. } => at_wake(
            format!("cordon when a slot frees ({used} of {limit} used)"),
            Some(Action::Cordon),
        ),
        Why::DrainBudget { used, limit } => at_wake(
            format!("drain when a slot frees ({used} of {limit} in flight)"),
            Some(Action::Drain),
        ),
        Why::BreakerOpen { closing_at, .. } => Next {
            at: *closing_at,
            action: None,
            what: match closing_at {
                Some(t) => format!("held until the breaker closes (at {t} if the counts stay under)"),
                None => "held until the breaker closes (when the unhealthy counts drop under its thresholds)".to_string(),
            },
        },
        _ => match d.wake {
            Some(t) => Next {
                at: Some(t),
                action: None,
                what: format!("decided again at {t}: {}", d.reason()),
            },
            None => Next {
                at: None,
                action: None,
                what: format!("nothing until the node changes: {}", d.reason()),
            },
        },
    }
}

fn when(t: Option<Timestamp>) -> String {
    t.map_or_else(|| "once held long enough".to_string(), |t| t.to_string())
}

/// `explain`'s decision line.
pub(crate) fn decision_text(d: &DecisionLine) -> String {
    format!("Decision: {} — {}", d.action.said(d.dry_run), d.reason)
}

/// The explanation for people.
pub fn print(e: &Explanation, out: &mut impl std::io::Write) -> std::io::Result<()> {
    writeln!(out, "Node {} at {}", e.node, e.now)?;
    writeln!(out, "\nConditions:")?;
    for c in &e.conditions {
        let since = c.since.map(|t| format!(" since {t}")).unwrap_or_default();
        // What anyone who may write the node's status wrote: one line, nothing that drives a
        // terminal.
        let p = nodemedic_common::events::printable;
        writeln!(
            out,
            "  {}={} ({}){since}: {}",
            p(&c.type_),
            c.status,
            p(&c.reason),
            p(&c.message)
        )?;
        if let Some(w) = &c.watched {
            writeln!(out, "    watched as {w}")?;
        }
    }
    writeln!(
        out,
        "\nSelection: {}",
        if e.selection.selected {
            "selected"
        } else {
            "not selected"
        }
    )?;
    for h in &e.selection.how {
        writeln!(out, "  {h}")?;
    }
    writeln!(out, "\nGates:")?;
    for g in &e.gates {
        let state = if g.holds { "HOLDS " } else { "passes" };
        writeln!(out, "  {state} {:<16} {}", g.gate, g.detail)?;
    }
    writeln!(out, "\nDrain record:")?;
    match &e.record {
        None => writeln!(out, "  none")?,
        Some(r) => {
            writeln!(out, "  {}", crate::live::describe(r))?;
            for attempt in &r.ended {
                writeln!(out, "  attempt: {attempt}")?;
            }
        }
    }
    if e.record.is_some() && !e.record_checked {
        writeln!(
            out,
            "  (its seal is not checked here: only the running drainer holds the key, and it ignores a record it did not write)"
        )?;
    }
    if let Some(l) = &e.ladder {
        super::ladder::print(l, out)?;
    }
    if !e.history.is_empty() {
        writeln!(out, "\nHistory (the drainer's Events):")?;
        for h in &e.history {
            let at = h.at.map(|t| t.to_string()).unwrap_or_else(|| "-".into());
            let count = if h.count > 1 {
                format!(" (x{})", h.count)
            } else {
                String::new()
            };
            let p = nodemedic_common::events::printable;
            writeln!(out, "  {at}  {}{count}: {}", p(&h.reason), p(&h.message))?;
        }
    }
    writeln!(out, "\n{}", decision_text(&e.decision))?;
    if !e.pods.is_empty() {
        writeln!(out, "\nPods (as a drain would treat them):")?;
        for p in &e.pods {
            writeln!(
                out,
                "  {:<6} {}/{}: {}",
                action_word_pod(p),
                p.namespace,
                p.name,
                p.reason
            )?;
        }
    }
    writeln!(out, "\nNext: {}", e.next.what)?;
    Ok(())
}

fn action_word_pod(p: &PodPlan) -> String {
    serde_json::to_value(p.action)
        .ok()
        .and_then(|v| v.as_str().map(String::from))
        .unwrap_or_default()
}

/// A duration as the explanation writes it (kept for the tests of its wording).
pub fn words(d: Duration) -> String {
    fmt_d(d)
}
