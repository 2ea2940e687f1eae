//! The detector's Prometheus metrics. NPD's `problem_counter{reason}` and `problem_gauge{type,reason}`
//! keep their exact names (dashboards and alerts use them); our own carry the `nodemedic_detector_`
//! prefix. Hot-path counters are resolved once per monitor, so counting a line is one atomic add.
//! Shell (a registry of atomics; no decisions).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use nodemedic_common::label_value;
pub(crate) use nodemedic_common::labels::Reload;
use nodemedic_common::labels::ReloadLabel;
use prometheus_client::encoding::{EncodeLabelSet, EncodeMetric, MetricEncoder};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::{MetricType, TypedMetric};
use prometheus_client::registry::Registry;

label_value!(pub Dropped { Overrun => "overrun" });
label_value!(pub Report { Conditions => "conditions", Events => "events" });
label_value!(pub CheckOutcome { Healthy => "healthy", Problem => "problem", Unknown => "unknown", Timeout => "timeout" });

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub(crate) struct CheckLabels {
    pub(crate) monitor: String,
    pub(crate) result: CheckOutcome,
}

/// `{reason}` (NPD's problem_counter)
#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub(crate) struct ReasonLabel {
    pub(crate) reason: String,
}

/// `{type, reason}` (NPD's problem_gauge)
#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub(crate) struct ConditionLabels {
    pub(crate) r#type: String,
    pub(crate) reason: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub(crate) struct MonitorLabel {
    pub(crate) monitor: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub(crate) struct DroppedLabels {
    pub(crate) monitor: String,
    pub(crate) why: Dropped,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub(crate) struct MatchLabels {
    pub(crate) monitor: String,
    pub(crate) reason: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub(crate) struct LoopLabel {
    pub(crate) r#loop: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub(crate) struct KindLabel {
    pub(crate) kind: Report,
}

/// A monotonic count exposed without the OpenMetrics `_total` suffix, as NPD's `problem_counter` is.
#[derive(Debug, Clone, Default)]
pub(crate) struct NpdCounter(Arc<AtomicU64>);

impl NpdCounter {
    pub(crate) fn inc(&self) {
        self.0.fetch_add(1, Ordering::Relaxed);
    }
    pub(crate) fn get(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

impl TypedMetric for NpdCounter {
    const TYPE: MetricType = MetricType::Unknown;
}

impl EncodeMetric for NpdCounter {
    fn encode(&self, mut encoder: MetricEncoder) -> Result<(), std::fmt::Error> {
        encoder.encode_gauge(&(self.get() as i64))
    }
    fn metric_type(&self) -> MetricType {
        MetricType::Unknown
    }
}

#[derive(Clone)]
pub struct Metrics {
    pub(crate) problem_counter: Family<ReasonLabel, NpdCounter>,
    pub(crate) problem_gauge: Family<ConditionLabels, Gauge>,
    pub(crate) lines_read: Family<MonitorLabel, Counter>,
    pub(crate) lines_dropped: Family<DroppedLabels, Counter>,
    pub(crate) parse_errors: Family<MonitorLabel, Counter>,
    pub(crate) rule_matches: Family<MatchLabels, Counter>,
    pub(crate) report_errors: Family<KindLabel, Counter>,
    pub(crate) reports_given_up: Family<KindLabel, Counter>,
    pub(crate) events_dropped: Counter,
    pub(crate) reloads: Family<ReloadLabel, Counter>,
    /// Times the rule files were looked at after an event on disk, changed or not.
    pub(crate) rule_file_checks: Counter,
    pub(crate) stalls: Family<LoopLabel, Counter>,
    pub(crate) check_runs: Family<CheckLabels, Counter>,
}

/// Counters one monitor bumps per line, resolved once.
#[derive(Clone)]
pub struct MonitorCounters {
    pub lines: Counter,
    pub parse_errors: Counter,
    /// Created at start so the series exists at 0; counted through [`Metrics::overrun`].
    pub overruns: Counter,
}

fn monitor(m: &str) -> MonitorLabel {
    MonitorLabel {
        monitor: m.to_string(),
    }
}

fn overrun(m: &str) -> DroppedLabels {
    DroppedLabels {
        monitor: m.to_string(),
        why: Dropped::Overrun,
    }
}

fn matched(m: &str, reason: &str) -> MatchLabels {
    MatchLabels {
        monitor: m.to_string(),
        reason: reason.to_string(),
    }
}

fn condition(type_: &str, reason: &str) -> ConditionLabels {
    ConditionLabels {
        r#type: type_.to_string(),
        reason: reason.to_string(),
    }
}

impl Metrics {
    pub fn register(registry: &mut Registry) -> Metrics {
        let m = Metrics {
            problem_counter: Family::default(),
            problem_gauge: Family::default(),
            lines_read: Family::default(),
            lines_dropped: Family::default(),
            parse_errors: Family::default(),
            rule_matches: Family::default(),
            report_errors: Family::default(),
            reports_given_up: Family::default(),
            events_dropped: Counter::default(),
            reloads: Family::default(),
            rule_file_checks: Counter::default(),
            stalls: Family::default(),
            check_runs: Family::default(),
        };
        registry.register(
            "nodemedic_detector_check_runs",
            "Exec check runs, by monitor and result (healthy, problem, unknown, timeout)",
            m.check_runs.clone(),
        );
        registry.register(
            "nodemedic_detector_stalls",
            "Times a loop (an input, the writer) stopped making progress, by loop",
            m.stalls.clone(),
        );
        registry.register(
            "problem_counter",
            "Number of times a specific type of problem have occurred (NPD-compatible)",
            m.problem_counter.clone(),
        );
        registry.register(
            "problem_gauge",
            "Whether a specific type of problem is affecting the node or not (NPD-compatible)",
            m.problem_gauge.clone(),
        );
        registry.register(
            "nodemedic_detector_lines_read",
            "Log lines (records) read, by monitor",
            m.lines_read.clone(),
        );
        registry.register(
            "nodemedic_detector_lines_dropped",
            "Log records lost before matching (kmsg ring buffer overruns), by monitor",
            m.lines_dropped.clone(),
        );
        registry.register(
            "nodemedic_detector_parse_errors",
            "Malformed records counted and skipped, by monitor",
            m.parse_errors.clone(),
        );
        registry.register(
            "nodemedic_detector_rule_matches",
            "Pattern matches, by monitor and reason",
            m.rule_matches.clone(),
        );
        registry.register(
            "nodemedic_detector_report_errors",
            "Failed writes to the API server, by kind (conditions, events)",
            m.report_errors.clone(),
        );
        registry.register(
            "nodemedic_detector_reports_given_up",
            "Writes given up after failing again and again: an Event dropped, or the checkpoint moving on without the conditions",
            m.reports_given_up.clone(),
        );
        registry.register(
            "nodemedic_detector_events_dropped",
            "Event occurrences dropped by the aggregator's key limit",
            m.events_dropped.clone(),
        );
        registry.register(
            "nodemedic_detector_reloads",
            "Rule file reloads, by result",
            m.reloads.clone(),
        );
        registry.register(
            "nodemedic_detector_rule_file_checks",
            "Times the rule files were looked at after an event on disk; only a changed content counts as a reload",
            m.rule_file_checks.clone(),
        );
        // Series with a closed set of label values exist from the start at 0 (see the drainer's).
        for &kind in Report::ALL {
            let _ = m.report_errors.get_or_create(&KindLabel { kind });
            let _ = m.reports_given_up.get_or_create(&KindLabel { kind });
        }
        for &result in Reload::ALL {
            let _ = m.reloads.get_or_create(&ReloadLabel { result });
        }
        m
    }

    pub fn monitor(&self, name: &str) -> MonitorCounters {
        MonitorCounters {
            lines: self.lines_read.get_or_create(&self::monitor(name)).clone(),
            parse_errors: self
                .parse_errors
                .get_or_create(&self::monitor(name))
                .clone(),
            overruns: self.lines_dropped.get_or_create(&overrun(name)).clone(),
        }
    }

    pub fn matched(&self, monitor: &str, reason: &str) {
        self.rule_matches
            .get_or_create(&matched(monitor, reason))
            .inc();
    }

    pub fn problem(&self, reason: &str) {
        self.problem_counter
            .get_or_create(&ReasonLabel {
                reason: reason.to_string(),
            })
            .inc();
    }

    pub fn set_problem_gauge(&self, type_: &str, reason: &str, value: i64) {
        self.problem_gauge
            .get_or_create(&condition(type_, reason))
            .set(value);
    }

    pub(crate) fn forget_problem_gauge(&self, type_: &str, reason: &str) {
        self.problem_gauge.remove(&condition(type_, reason));
    }

    pub(crate) fn overrun(&self, monitor: &str) {
        self.lines_dropped.get_or_create(&overrun(monitor)).inc();
    }

    pub fn stall(&self, name: &str) {
        self.stalls
            .get_or_create(&LoopLabel {
                r#loop: name.to_string(),
            })
            .inc();
    }

    pub(crate) fn report_given_up(&self, kind: Report) {
        self.reports_given_up
            .get_or_create(&KindLabel { kind })
            .inc();
    }

    pub(crate) fn report_error(&self, kind: Report) {
        self.report_errors.get_or_create(&KindLabel { kind }).inc();
    }

    /// Drop the series of a monitor whose rule file is gone: its line counters, its rule matches and
    /// the problem gauges of its condition types (`problem_counter` is by reason alone, as in NPD, and
    /// stays).
    /// NPD's series for a monitor's rules, at 0 from the start (NPD's `initializeProblemMetricsOrDie`):
    /// `problem_counter` for every rule's reason and `problem_gauge` for every permanent rule's
    /// (condition, reason), so `increase()` alerts see the first problem.
    pub(crate) fn declare_monitor(&self, m: &crate::config::Monitor) {
        if let crate::config::Input::Exec(_) = m.input {
            for &result in CheckOutcome::ALL {
                let _ = self.check_runs.get_or_create(&CheckLabels {
                    monitor: m.name.clone(),
                    result,
                });
            }
        }
        for (kind, reason) in m.reasons() {
            let _ = self.problem_counter.get_or_create(&ReasonLabel {
                reason: reason.to_string(),
            });
            if let crate::config::RuleKind::Permanent { condition: i } = kind
                && let Some(c) = m.conditions.get(i)
            {
                let _ = self
                    .problem_gauge
                    .get_or_create(&condition(&c.type_, reason));
            }
        }
    }

    pub(crate) fn forget_monitor(&self, m: &crate::config::Monitor) {
        let name = m.name.as_str();
        self.lines_read.remove(&monitor(name));
        self.parse_errors.remove(&monitor(name));
        self.lines_dropped.remove(&overrun(name));
        for &result in CheckOutcome::ALL {
            self.check_runs.remove(&CheckLabels {
                monitor: name.to_string(),
                result,
            });
        }
        for (_, reason) in m.reasons() {
            self.rule_matches.remove(&matched(name, reason));
        }
        for c in &m.conditions {
            let reasons = m
                .reasons()
                .filter(|(kind, _)| {
                    matches!(kind, crate::config::RuleKind::Permanent { condition } if m.conditions.get(*condition).is_some_and(|d| d.type_ == c.type_))
                })
                .map(|(_, reason)| reason)
                .chain([c.healthy_reason.as_str()]);
            for reason in reasons {
                self.problem_gauge.remove(&condition(&c.type_, reason));
            }
        }
    }

    pub(crate) fn check_ran(&self, monitor: &str, result: CheckOutcome) {
        self.check_runs
            .get_or_create(&CheckLabels {
                monitor: monitor.to_string(),
                result,
            })
            .inc();
    }

    pub(crate) fn reload(&self, result: Reload) {
        self.reloads.get_or_create(&ReloadLabel { result }).inc();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn npd_names_are_exposed_unchanged() {
        let mut r = Registry::default();
        let m = Metrics::register(&mut r);
        m.problem("OOMKilling");
        m.problem("OOMKilling");
        m.set_problem_gauge("KernelDeadlock", "DockerHung", 1);
        m.monitor("kernel-monitor").lines.inc();
        let mut out = String::new();
        prometheus_client::encoding::text::encode(&mut out, &r).unwrap();
        assert!(
            out.contains("problem_counter{reason=\"OOMKilling\"} 2\n"),
            "{out}"
        );
        assert!(
            out.contains("problem_gauge{type=\"KernelDeadlock\",reason=\"DockerHung\"} 1\n"),
            "{out}"
        );
        assert!(
            out.contains("nodemedic_detector_lines_read_total{monitor=\"kernel-monitor\"} 1\n"),
            "{out}"
        );
    }
}
