//! Problem state of one monitor: a pure function of (rules, matched lines, clock).
//!
//! A temporary rule's hit is an Event. A permanent rule's hit sets its condition True (reason and
//! message from the rule); a change of status or reason also yields an Event in NPD's wording. A
//! condition with a recovery pattern returns to its healthy default when that pattern matches; one with
//! a quiet period (`recovery.after`) returns when no problem line was seen for that long. Without
//! either it stays True, as in NPD.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::jiff::Timestamp;
use nodemedic_common::events::Severity;

use crate::config::{Input, Monitor, RuleKind};
use crate::matcher::{Hit, Matcher, Target};
use crate::source::SourceEvent;

pub use nodemedic_common::status::Status;

/// The state of one condition.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Condition {
    #[serde(rename = "type")]
    pub(crate) type_: String,
    pub status: Status,
    pub reason: String,
    pub message: String,
    #[serde(rename = "lastTransitionTime")]
    pub(crate) transition: Timestamp,
}

impl Condition {
    /// The True conditions on `node` as the API server has them: a restarted detector keeps the
    /// problems it reported (NPD would reset them to False). A missing transition time counts as now.
    /// The conditions True on `node` that were set during this boot (`booted`: when the machine
    /// booted, if known): a problem found before a reboot is about the kernel and processes that
    /// reboot ended, so it starts again from the rules' default, as NPD starts every time.
    pub(crate) fn true_this_boot(
        node: &k8s_openapi::api::core::v1::Node,
        booted: Option<Timestamp>,
    ) -> (Vec<Condition>, Vec<Condition>) {
        Condition::true_on(node)
            .into_iter()
            .partition(|c| booted.is_none_or(|b| c.transition >= b))
    }

    pub(crate) fn true_on(node: &k8s_openapi::api::core::v1::Node) -> Vec<Condition> {
        node.status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .into_iter()
            .flatten()
            .filter(|c| Status::parse(&c.status) == Status::True)
            .map(|c| Condition {
                status: Status::True,
                reason: c.reason.clone().unwrap_or_default(),
                message: c.message.clone().unwrap_or_default(),
                transition: c
                    .last_transition_time
                    .as_ref()
                    .map(|t| t.0)
                    .unwrap_or_else(Timestamp::now),
                type_: c.type_.clone(),
            })
            .collect()
    }
}

/// Something to report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Report {
    /// A temporary problem, seen in a line of time `at`: a Warning Event with the rule's reason.
    Problem {
        reason: String,
        message: String,
        at: Timestamp,
    },
    /// A condition changed (status, reason or message) at `at`; `transition` says whether the status
    /// or reason changed, which also warrants an Event in NPD's wording.
    Condition {
        condition: Condition,
        transition: bool,
        at: Timestamp,
    },
}

/// An Event as it is to be written: NPD's severity and wording, and the time of the line (or of the
/// quiet period's end) that caused it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    pub(crate) severity: Severity,
    pub(crate) reason: String,
    pub(crate) message: String,
    pub(crate) at: Timestamp,
    /// It reports a problem (a temporary one, or a condition turning True): counted in NPD's metrics.
    pub(crate) problem: bool,
}

impl Report {
    /// The Event this report warrants, if any (a condition whose message alone changed needs none).
    pub fn event(&self) -> Option<Event> {
        match self {
            Report::Problem {
                reason,
                message,
                at,
            } => Some(Event {
                severity: Severity::Warning,
                reason: reason.clone(),
                message: message.clone(),
                at: *at,
                problem: true,
            }),
            Report::Condition {
                condition,
                transition: true,
                at,
            } => {
                let problem = condition.status == Status::True;
                Some(Event {
                    severity: if problem {
                        Severity::Warning
                    } else {
                        Severity::Normal
                    },
                    reason: condition.reason.clone(),
                    message: Report::transition_message(condition),
                    at: *at,
                    problem,
                })
            }
            Report::Condition { .. } => None,
        }
    }

    /// NPD's condition-change Event text.
    pub(crate) fn transition_message(c: &Condition) -> String {
        format!(
            "Node condition {} is now: {}, reason: {}, message: {:?}",
            c.type_,
            c.status.as_str(),
            c.reason,
            c.message
        )
    }
}

/// One monitor's matcher and condition states.
pub struct MonitorState {
    monitor: Arc<Monitor>,
    matcher: Matcher,
    conditions: Vec<Condition>,
    /// When the last problem line for each condition was seen (for quiet-period recovery).
    last_problem: Vec<Option<Timestamp>>,
    hits: Vec<Hit>,
    /// A resources monitor's gauges.
    gauges: gauge::Gauges,
}

impl MonitorState {
    /// Start with each condition at its healthy default, except where `restored` (read back from the
    /// Node) has it: a True condition stays True across a restart.
    pub fn new(monitor: Arc<Monitor>, restored: &[Condition], now: Timestamp) -> Self {
        let conditions = monitor
            .conditions
            .iter()
            .map(|def| match restored.iter().find(|c| c.type_ == def.type_) {
                Some(c) if c.status == Status::True => c.clone(),
                _ => Condition {
                    type_: def.type_.clone(),
                    status: Status::False,
                    reason: def.healthy_reason.clone(),
                    message: def.healthy_message.clone(),
                    transition: now,
                },
            })
            .collect::<Vec<_>>();
        // A restored True condition with a quiet period counts from the restart, not from the epoch.
        let last_problem = conditions
            .iter()
            .map(|c| (c.status == Status::True).then_some(now))
            .collect();
        let mut state = MonitorState {
            matcher: Matcher::new(monitor.compiled.clone()),
            monitor,
            conditions,
            last_problem,
            hits: Vec::new(),
            gauges: gauge::Gauges::default(),
        };
        state.start_gauges();
        state
    }

    /// The gauges as the conditions now stand (True ones keep theirs firing).
    fn start_gauges(&mut self) {
        let standing: Vec<gauge::Standing> = self
            .conditions
            .iter()
            .map(|c| gauge::Standing {
                problem: c.status == Status::True,
                reason: &c.reason,
                message: &c.message,
            })
            .collect();
        self.gauges = gauge::Gauges::start(&self.monitor.gauges, &standing);
    }

    /// Fold a reading of the node's resources in: each condition set by gauges becomes what they
    /// want (True with the first firing gauge's reason, or healthy). Reports go to `out`.
    pub(crate) fn sample(
        &mut self,
        sample: &crate::parse::resources::Sample,
        out: &mut Vec<Report>,
    ) {
        let monitor = self.monitor.clone();
        self.gauges.sample(&monitor.gauges, sample);
        for c in 0..self.conditions.len() {
            match self.gauges.verdict(&monitor.gauges, c) {
                None => {}
                Some(gauge::Verdict::Clear) => self.recover(c, sample.at, out),
                Some(gauge::Verdict::Firing { reason, message }) => {
                    let current = &self.conditions[c];
                    if current.status != Status::True || current.reason != reason {
                        let (reason, message) = (reason.to_string(), message.to_string());
                        self.last_problem[c] = Some(sample.at);
                        self.set(c, Status::True, reason, message, sample.at, out);
                    }
                }
            }
        }
    }

    /// Swap in reloaded rules, keeping the state of conditions whose type still exists.
    pub(crate) fn reconfigure(&mut self, monitor: Arc<Monitor>, now: Timestamp) {
        let old = std::mem::take(&mut self.conditions);
        let old_last = std::mem::take(&mut self.last_problem);
        let same_gauges = self.monitor.gauges == monitor.gauges;
        let old_gauges = std::mem::take(&mut self.gauges);
        let mut next = MonitorState::new(monitor, &[], now);
        for (i, c) in next.conditions.iter_mut().enumerate() {
            if let Some(j) = old.iter().position(|o| o.type_ == c.type_) {
                // A problem stays; a healthy condition whose default text is unchanged keeps its
                // transition time (a new one would be a node write for nothing on every reload).
                let same_default = old[j].status == c.status
                    && old[j].reason == c.reason
                    && old[j].message == c.message;
                if old[j].status == Status::True || same_default {
                    *c = old[j].clone();
                    next.last_problem[i] = old_last[j];
                }
            }
        }
        // Unchanged gauges keep their windows; changed ones start from the conditions kept.
        if same_gauges {
            next.gauges = old_gauges;
        } else {
            next.start_gauges();
        }
        *self = next;
    }

    pub(crate) fn monitor(&self) -> &Arc<Monitor> {
        &self.monitor
    }

    pub fn conditions(&self) -> &[Condition] {
        &self.conditions
    }

    /// Apply one input event: a line is matched at its time, a check's result or a resources
    /// reading folded in; a
    /// malformed record or an overrun changes nothing (the shell counts them). Reports are appended
    /// to `out`. The daemon and `detector check` both feed their monitors through here.
    pub(crate) fn apply(&mut self, event: &SourceEvent, out: &mut Vec<Report>) {
        match event {
            SourceEvent::Line { text, at, user, .. } => self.process_line(text, *at, *user, out),
            SourceEvent::Check { result, .. } => {
                self.check_result(result.check, result.exit, &result.message, result.at, out)
            }
            SourceEvent::Sample(sample) => self.sample(sample, out),
            SourceEvent::Malformed { .. } | SourceEvent::Overrun => {}
        }
    }

    /// Process one line seen at `at`; reports are appended to `out`.
    pub fn process(&mut self, line: &str, at: Timestamp, out: &mut Vec<Report>) {
        self.process_line(line, at, false, out);
    }

    /// [`Self::process`] of a line that may have been written from user space (`user`: a
    /// /dev/kmsg record of a facility other than the kernel's, which any root process on the node
    /// can write): it may raise an Event (a temporary rule), but set or clear a condition (and so
    /// move a drain or a ladder) only where its monitor says `input.userSpace: true` (issue 76).
    pub(crate) fn process_line(
        &mut self,
        line: &str,
        at: Timestamp,
        user: bool,
        out: &mut Vec<Report>,
    ) {
        let conditions = !user || matches!(self.monitor.input, Input::Kmsg { user_space: true });
        self.hits.clear();
        self.matcher.match_line(line, &mut self.hits);
        if self.hits.is_empty() {
            return;
        }
        let hits = std::mem::take(&mut self.hits);
        for hit in &hits {
            match hit.target {
                Target::Rule(i) => {
                    let rule = &self.monitor.rules[i];
                    match rule.kind {
                        RuleKind::Temporary => out.push(Report::Problem {
                            reason: hit.reason.clone().unwrap_or_else(|| rule.reason.clone()),
                            message: hit.message.clone(),
                            at,
                        }),
                        RuleKind::Permanent { .. } if !conditions => {}
                        RuleKind::Permanent { condition } => {
                            let reason = hit.reason.clone().unwrap_or_else(|| rule.reason.clone());
                            self.last_problem[condition] = Some(at);
                            self.set(
                                condition,
                                Status::True,
                                reason,
                                hit.message.clone(),
                                at,
                                out,
                            );
                        }
                    }
                }
                Target::Recovery(_) if !conditions => {}
                Target::Recovery(c) => self.recover(c, at, out),
            }
        }
        self.hits = hits;
    }

    /// Apply quiet-period recoveries due at `now`.
    pub fn tick(&mut self, now: Timestamp, out: &mut Vec<Report>) {
        for i in 0..self.conditions.len() {
            let Some(after) = self.monitor.conditions[i].recovery_after else {
                continue;
            };
            if self.conditions[i].status != Status::True {
                continue;
            }
            let since = self.last_problem[i].unwrap_or(self.conditions[i].transition);
            if elapsed(since, now) >= after {
                self.recover(i, now, out);
            }
        }
    }

    fn recover(&mut self, i: usize, at: Timestamp, out: &mut Vec<Report>) {
        if self.conditions[i].status != Status::True {
            return;
        }
        let def = &self.monitor.conditions[i];
        let (reason, message) = (def.healthy_reason.clone(), def.healthy_message.clone());
        self.last_problem[i] = None;
        self.set(i, Status::False, reason, message, at, out);
    }

    fn set(
        &mut self,
        i: usize,
        status: Status,
        reason: String,
        message: String,
        at: Timestamp,
        out: &mut Vec<Report>,
    ) {
        let c = &mut self.conditions[i];
        let transition = c.status != status || c.reason != reason;
        if !transition && c.message == message {
            return;
        }
        if c.status != status {
            c.transition = at;
        }
        c.status = status;
        c.reason = reason;
        c.message = message;
        out.push(Report::Condition {
            condition: c.clone(),
            transition,
            at,
        });
    }
}

fn elapsed(since: Timestamp, now: Timestamp) -> Duration {
    let d = now.as_millisecond() - since.as_millisecond();
    Duration::from_millis(d.max(0) as u64)
}

pub mod exec;
pub(crate) mod gauge;

#[cfg(test)]
mod tests;
