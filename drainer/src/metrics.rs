//! The drainer's metrics: draino's names (dashboards keep working) plus our own, with typed labels.
//! I/O in the sense that counting is a side effect; registering is done once, by `run`.

use nodemedic_common::label_value;
pub(crate) use nodemedic_common::labels::{Eviction, Outcome, Reload};
use nodemedic_common::labels::{EvictionLabel, OutcomeLabel, ReloadLabel};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

label_value!(pub Budget { Cordons => "cordons", Drains => "drains" });
label_value!(pub NotifyResult { Sent => "sent", Failed => "failed", Dropped => "dropped" });
label_value!(pub SafetyEvent {
    BreakerOpened => "breaker_opened",
    BreakerClosed => "breaker_closed",
    OutageStarted => "outage_started",
    OutageEnded => "outage_ended",
    NodeFlapping => "node_flapping",
    DetectorSilent => "detector_silent",
    DetectorHeard => "detector_heard",
    CommonCause => "common_cause",
    SlowStartWidened => "slow_start_widened",
    SlowStartNarrowed => "slow_start_narrowed",
    DomainKept => "failure_domain_kept",
    LeftToPeer => "left_to_peer",
});
label_value!(pub PolicyOutcome {
    Skipped => "skipped",
    Waited => "waited",
    WaitedOut => "evicted_after_wait",
    Deleted => "deleted",
});
label_value!(pub ObjectKind { Pod => "pod" });
label_value!(pub LadderStep { Restart => "restart", Reboot => "reboot", PowerCycle => "power-cycle", Replace => "replace", Person => "person" });
label_value!(pub StepResult { Started => "started", Proven => "proven", Failed => "failed" });
label_value!(pub AttemptOutcome { Succeeded => "succeeded", TransientFailure => "transient_failure", PermanentFailure => "permanent_failure", Superseded => "superseded", Cancelled => "cancelled", Withheld => "withheld" });
label_value!(pub GuardDecision {
    Allowed => "allowed",
    AllowedNotSynced => "allowed_not_synced",
    Denied => "denied",
    Malformed => "malformed",
});

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct BudgetLabel {
    budget: Budget,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct NotifyLabel {
    result: NotifyResult,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct SafetyLabel {
    event: SafetyEvent,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct PolicyLabel {
    outcome: PolicyOutcome,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct RemediationLabel {
    step: LadderStep,
    result: StepResult,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct AttemptLabel {
    step: LadderStep,
    outcome: AttemptOutcome,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct DomainLabel {
    domain: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct ConditionLabel {
    condition: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct KindLabel {
    kind: ObjectKind,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct DecisionLabel {
    decision: GuardDecision,
}

#[derive(Clone)]
pub struct Metrics {
    cordoned: Family<OutcomeLabel, Counter>,
    uncordoned: Family<OutcomeLabel, Counter>,
    drained: Family<OutcomeLabel, Counter>,
    drain_scheduled: Family<OutcomeLabel, Counter>,
    budget_waits: Family<BudgetLabel, Counter>,
    evictions: Family<EvictionLabel, Counter>,
    guard_requests: Family<DecisionLabel, Counter>,
    guard_cert_reloads: Family<ReloadLabel, Counter>,
    /// Times the guard's certificate files were looked at after an event on disk, changed or not.
    pub(crate) guard_cert_checks: Counter,
    /// Times the config file was looked at after an event on disk, changed or not.
    pub(crate) config_checks: Counter,
    config_reloads: Family<ReloadLabel, Counter>,
    notifications: Family<NotifyLabel, Counter>,
    safety_events: Family<SafetyLabel, Counter>,
    /// 1 while the circuit breaker is open.
    pub(crate) breaker_open: Gauge,
    /// Failure domains in an outage now.
    pub(crate) domain_outages: Gauge,
    /// Nodes a safety gate holds (breaker, outage, flapping, pause), as of the last round.
    pub(crate) held: Gauge,
    /// 1 while a pause on the drainer's Lease is in force.
    pub(crate) paused: Gauge,
    pub(crate) drain_duration: Histogram,
    pub(crate) leader: Gauge,
    pub(crate) stale_pods: Gauge,
    pub(crate) stale_reported: Counter,
    /// Node decisions made (rounds decide only what changed; this grows with changes, not size).
    pub(crate) decided: Counter,
    /// Node views the selector failed on (counted as not selected).
    pub(crate) selector_errors: Counter,
    stale_evictions: Family<EvictionLabel, Counter>,
    malformed: Family<KindLabel, Counter>,
    /// Probations started (`--uncordon-after`).
    pub(crate) probations: Counter,
    /// Drain records found on nodes that this drainer did not write for them (ignored).
    pub(crate) records_rejected: Counter,
    /// Starts with settings looser than the ones last published.
    pub(crate) looser_starts: Counter,
    /// Nodes whose PodsNotStarting / PodsNotTerminating condition the drainer set True.
    symptoms: Family<ConditionLabel, Gauge>,
    /// Guard requests shed because its bytes in flight were at their cap (admitted: fail open).
    pub(crate) guard_shed: Counter,
    /// Selected nodes whose detector is silent, as of the last resync.
    pub(crate) silent_detectors: Gauge,
    pod_policies: Family<PolicyLabel, Counter>,
    /// Remediation ladder steps past the drain: started, proven, failed (person: started only).
    remediations: Family<RemediationLabel, Counter>,
    attempts: Family<AttemptLabel, Counter>,
    /// Nodes whose ladder ended with a person, as of the last round that changed one.
    pub(crate) needs_person: Gauge,
    /// Each failure domain's slow-start width (remediations allowed at once).
    slow_start: Family<DomainLabel, Gauge>,
}

impl Metrics {
    /// The drainer's metrics, registered in `registry`; every series with a closed set of label
    /// values exists from the start at 0.
    pub fn register(registry: &mut Registry) -> Metrics {
        let m = Metrics::new();
        m.register_actions(registry);
        m.register_safety(registry);
        m.register_inputs(registry);
        m.zero();
        m
    }

    fn new() -> Metrics {
        Metrics {
            cordoned: Family::default(),
            uncordoned: Family::default(),
            drained: Family::default(),
            drain_scheduled: Family::default(),
            budget_waits: Family::default(),
            evictions: Family::default(),
            guard_requests: Family::default(),
            guard_cert_reloads: Family::default(),
            guard_cert_checks: Counter::default(),
            config_checks: Counter::default(),
            config_reloads: Family::default(),
            malformed: Family::default(),
            notifications: Family::default(),
            safety_events: Family::default(),
            breaker_open: Gauge::default(),
            domain_outages: Gauge::default(),
            held: Gauge::default(),
            paused: Gauge::default(),
            drain_duration: Histogram::new([10.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1200.0]),
            leader: Gauge::default(),
            stale_pods: Gauge::default(),
            stale_reported: Counter::default(),
            decided: Counter::default(),
            selector_errors: Counter::default(),
            stale_evictions: Family::default(),
            probations: Counter::default(),
            records_rejected: Counter::default(),
            looser_starts: Counter::default(),
            symptoms: Family::default(),
            guard_shed: Counter::default(),
            silent_detectors: Gauge::default(),
            pod_policies: Family::default(),
            remediations: Family::default(),
            attempts: Family::default(),
            needs_person: Gauge::default(),
            slow_start: Family::default(),
        }
    }

    /// What the drainer did to nodes and pods (draino's names first).
    fn register_actions(&self, registry: &mut Registry) {
        let families: [(&str, &str, Family<OutcomeLabel, Counter>); 4] = [
            (
                "draino_cordoned_nodes",
                "Nodes cordoned, by result (draino name)",
                self.cordoned.clone(),
            ),
            (
                "draino_uncordoned_nodes",
                "Nodes uncordoned, by result (draino name)",
                self.uncordoned.clone(),
            ),
            (
                "draino_drained_nodes",
                "Node drains, by result (draino name)",
                self.drained.clone(),
            ),
            (
                "draino_drain_scheduled_nodes",
                "Drains scheduled, by result (draino name)",
                self.drain_scheduled.clone(),
            ),
        ];
        for (name, help, f) in families {
            registry.register(name, help, f);
        }
        registry.register(
            "nodemedic_drainer_budget_waits",
            "Plan rounds in which a node waited for a budget, by budget",
            self.budget_waits.clone(),
        );
        registry.register(
            "nodemedic_drainer_evictions",
            "Pod evictions, by result",
            self.evictions.clone(),
        );
        registry.register(
            "nodemedic_drainer_drain_duration_seconds",
            "Time from drain start to its end",
            self.drain_duration.clone(),
        );
        registry.register(
            "nodemedic_drainer_is_leader",
            "1 while this replica holds the lease",
            self.leader.clone(),
        );
        registry.register(
            "nodemedic_drainer_node_decisions",
            "Node decisions made by the controller (only nodes that changed, woke or wait are decided)",
            self.decided.clone(),
        );
        registry.register(
            "nodemedic_drainer_selector_errors",
            "Node views the selector could not evaluate (the node counts as not selected; logged once per view)",
            self.selector_errors.clone(),
        );
    }

    /// The safety states and stale pod readiness.
    fn register_safety(&self, registry: &mut Registry) {
        registry.register(
            "nodemedic_drainer_safety_events",
            "Changes of the fleet safety states: breaker opened/closed, outage started/ended, node flapping",
            self.safety_events.clone(),
        );
        registry.register(
            "nodemedic_drainer_breaker_open",
            "1 while the circuit breaker is open (nothing new is cordoned or drained)",
            self.breaker_open.clone(),
        );
        registry.register(
            "nodemedic_drainer_domain_outages",
            "Failure domains in an outage now (nothing in them is cordoned or drained)",
            self.domain_outages.clone(),
        );
        registry.register(
            "nodemedic_drainer_held_nodes",
            "Nodes held back by a safety gate (breaker, outage, flapping, pause) as of the last round",
            self.held.clone(),
        );
        registry.register(
            "nodemedic_drainer_paused",
            "Whether a pause on the drainer's Lease (the nodemedic.io/pause annotation) is in force (1) or not (0)",
            self.paused.clone(),
        );
        registry.register(
            "nodemedic_drainer_stale_pods",
            "Pods whose readiness is stale now (Ready=False, containers ready, node Ready a while)",
            self.stale_pods.clone(),
        );
        registry.register(
            "nodemedic_drainer_stale_pods_reported",
            "PodReadinessStale reports (one per pod per 10 minutes at most)",
            self.stale_reported.clone(),
        );
        registry.register(
            "nodemedic_drainer_stale_evictions",
            "Evictions of stale pods, by result",
            self.stale_evictions.clone(),
        );
        registry.register(
            "nodemedic_guard_shed",
            "Guard requests shed unread because the request bodies held at once reached --guard's cap; the API server admits them (failurePolicy Ignore)",
            self.guard_shed.clone(),
        );
        registry.register(
            "nodemedic_drainer_records_rejected",
            "Drain records found on nodes that this drainer did not write for that Node (forged, altered, copied from another node, an older one written back, or unsealed from a release before records were sealed): ignored, the node decided as if it had none",
            self.records_rejected.clone(),
        );
        registry.register(
            "nodemedic_drainer_looser_starts",
            "Starts with safety limits looser than the ones the drainer last published (a restart took an edit a reload would have refused, or a rollout loosened them); each also a StartedLooser Event on the Lease, and refused with --refuse-looser-start",
            self.looser_starts.clone(),
        );
        registry.register(
            "nodemedic_drainer_symptom_nodes",
            "Nodes whose pods say they are broken: the PodsNotStarting or PodsNotTerminating condition the drainer set True (--pods-not-starting-after, --pods-not-terminating-after)",
            self.symptoms.clone(),
        );
        registry.register(
            "nodemedic_drainer_remediations",
            "Remediation ladder steps past the drain, by step (reboot, replace, person) and result (started; proven: a new bootID, Ready and the problem clear, or the Node gone; failed: no proof by the step's deadline)",
            self.remediations.clone(),
        );
        registry.register(
            "nodemedic_drainer_remediation_attempts",
            "How remediation ladder attempts ended, by step and outcome (succeeded; transient_failure: the provider unreachable within its retries, the step waits out its deadline; permanent_failure: refused, given up or not proven by the deadline, the next step now; superseded; cancelled: a veto or a person)",
            self.attempts.clone(),
        );
        registry.register(
            "nodemedic_drainer_needs_person_nodes",
            "Nodes whose remediation ladder ended: cordoned and drained, waiting for a person",
            self.needs_person.clone(),
        );
        registry.register(
            "nodemedic_drainer_slow_start_width",
            "Remediations (reboots, replacements) a failure domain may have under way at once: 1 at first and after a failure, doubling as remediated nodes stay healthy (domain \"\" is the nodes without one); only domains that have had one",
            self.slow_start.clone(),
        );
        registry.register(
            "nodemedic_drainer_probations",
            "Probations started: recovered nodes kept until they stayed healthy --uncordon-after",
            self.probations.clone(),
        );
        registry.register(
            "nodemedic_drainer_silent_detectors",
            "Selected nodes whose detector has not refreshed its conditions within --detector-silent-after (or never reported although its DaemonSet places a pod there), as of the last resync",
            self.silent_detectors.clone(),
        );
        registry.register(
            "nodemedic_drainer_pod_policy_actions",
            "What drains did to pods under a pod policy: skipped, waited for (finished in time), evicted after the wait, deleted after budget refusals",
            self.pod_policies.clone(),
        );
    }

    /// What comes in and goes out besides the cluster: the guard, the config file, undecodable
    /// objects, notifications.
    fn register_inputs(&self, registry: &mut Registry) {
        registry.register(
            "nodemedic_guard_requests",
            "Admission requests to the Kosmos guard, by decision",
            self.guard_requests.clone(),
        );
        registry.register(
            "nodemedic_guard_certificate_reloads",
            "Reloads of the guard's serving certificate after its files changed, by result",
            self.guard_cert_reloads.clone(),
        );
        registry.register(
            "nodemedic_guard_certificate_checks",
            "Times the guard's certificate files were looked at after an event on disk; only a changed content counts as a reload",
            self.guard_cert_checks.clone(),
        );
        registry.register(
            "nodemedic_drainer_config_checks",
            "Times the config file was looked at after an event on disk; only a changed content counts as a reload",
            self.config_checks.clone(),
        );
        registry.register(
            "nodemedic_drainer_config_reloads",
            "Reloads of the drainer's config file after it changed, by result (a failure keeps the running settings)",
            self.config_reloads.clone(),
        );
        registry.register(
            "nodemedic_drainer_malformed_objects",
            "Nodes and pods the watches could not decode (left out of the caches; the rest of the list is used)",
            self.malformed.clone(),
        );
        registry.register(
            "nodemedic_drainer_notifications",
            "Notifications to --notify-url endpoints, by result (failed: given up after retries; dropped: queue full)",
            self.notifications.clone(),
        );
    }

    fn zero(&self) {
        // Every series with a closed set of label values exists from the start at 0, so that
        // `increase()` in alerts and dashboards sees the first failure (a series born at 1 has no
        // increase to show).
        for &result in Outcome::ALL {
            for f in [
                &self.cordoned,
                &self.uncordoned,
                &self.drained,
                &self.drain_scheduled,
            ] {
                let _ = f.get_or_create(&OutcomeLabel { result });
            }
        }
        for &budget in Budget::ALL {
            let _ = self.budget_waits.get_or_create(&BudgetLabel { budget });
        }
        for &result in Eviction::ALL {
            let _ = self.evictions.get_or_create(&EvictionLabel { result });
            let _ = self
                .stale_evictions
                .get_or_create(&EvictionLabel { result });
        }
        for &kind in ObjectKind::ALL {
            let _ = self.malformed.get_or_create(&KindLabel { kind });
        }
        for (condition, ..) in crate::model::symptom::CONDITIONS {
            let condition = condition.to_string();
            let _ = self.symptoms.get_or_create(&ConditionLabel { condition });
        }
        for &result in NotifyResult::ALL {
            let _ = self.notifications.get_or_create(&NotifyLabel { result });
        }
        for &step in LadderStep::ALL {
            for &result in StepResult::ALL {
                if step != LadderStep::Person || result == StepResult::Started {
                    let label = RemediationLabel { step, result };
                    let _ = self.remediations.get_or_create(&label);
                }
            }
        }
        for &step in LadderStep::ALL.iter().filter(|s| **s != LadderStep::Person) {
            for &outcome in AttemptOutcome::ALL {
                let _ = self.attempts.get_or_create(&AttemptLabel { step, outcome });
            }
        }
        for &outcome in PolicyOutcome::ALL {
            let _ = self.pod_policies.get_or_create(&PolicyLabel { outcome });
        }
        for &event in SafetyEvent::ALL {
            let _ = self.safety_events.get_or_create(&SafetyLabel { event });
        }
        for &decision in GuardDecision::ALL {
            let _ = self
                .guard_requests
                .get_or_create(&DecisionLabel { decision });
        }
        for &result in Reload::ALL {
            let _ = self
                .guard_cert_reloads
                .get_or_create(&ReloadLabel { result });
            let _ = self.config_reloads.get_or_create(&ReloadLabel { result });
        }
    }
    /// `n` nodes have the symptom `condition` True, as of the last pass.
    /// A failure domain's slow-start width.
    pub(crate) fn slow_start_width(&self, domain: &str, width: u32) {
        let label = DomainLabel {
            domain: domain.to_string(),
        };
        self.slow_start.get_or_create(&label).set(i64::from(width));
    }

    /// A ladder step started, was proven or failed.
    pub(crate) fn remediation(&self, step: LadderStep, result: StepResult) {
        self.remediations
            .get_or_create(&RemediationLabel { step, result })
            .inc();
    }

    /// A ladder attempt ended.
    pub(crate) fn attempt(&self, a: &crate::model::attempt::Attempt) {
        use crate::model::attempt::Outcome as O;
        use crate::model::ladder::Step as S;
        let step = match a.step {
            S::RestartKubelet | S::RestartContainerd => LadderStep::Restart,
            S::Reboot | S::Drain => LadderStep::Reboot,
            S::PowerCycle => LadderStep::PowerCycle,
            S::Replace => LadderStep::Replace,
        };
        let outcome = match a.outcome {
            O::Succeeded => AttemptOutcome::Succeeded,
            O::TransientFailure => AttemptOutcome::TransientFailure,
            O::PermanentFailure => AttemptOutcome::PermanentFailure,
            O::Superseded => AttemptOutcome::Superseded,
            O::Cancelled => AttemptOutcome::Cancelled,
            O::Withheld => AttemptOutcome::Withheld,
        };
        self.attempts
            .get_or_create(&AttemptLabel { step, outcome })
            .inc();
    }

    pub(crate) fn symptom_nodes(&self, condition: &str, n: usize) {
        let label = ConditionLabel {
            condition: condition.to_string(),
        };
        self.symptoms.get_or_create(&label).set(n as i64);
    }

    pub(crate) fn malformed_object(&self, kind: ObjectKind) {
        self.malformed.get_or_create(&KindLabel { kind }).inc();
    }

    pub(crate) fn cordoned(&self, result: Outcome) {
        self.cordoned.get_or_create(&OutcomeLabel { result }).inc();
    }
    pub(crate) fn uncordoned(&self, result: Outcome) {
        self.uncordoned
            .get_or_create(&OutcomeLabel { result })
            .inc();
    }
    pub(crate) fn drained(&self, result: Outcome) {
        self.drained.get_or_create(&OutcomeLabel { result }).inc();
    }
    pub(crate) fn drain_scheduled(&self, result: Outcome) {
        self.drain_scheduled
            .get_or_create(&OutcomeLabel { result })
            .inc();
    }
    pub(crate) fn budget_wait(&self, budget: Budget) {
        self.budget_waits
            .get_or_create(&BudgetLabel { budget })
            .inc();
    }
    pub(crate) fn guard_request(&self, decision: GuardDecision) {
        self.guard_requests
            .get_or_create(&DecisionLabel { decision })
            .inc();
    }
    pub(crate) fn guard_cert_reload(&self, result: Reload) {
        self.guard_cert_reloads
            .get_or_create(&ReloadLabel { result })
            .inc();
    }
    pub(crate) fn config_reload(&self, result: Reload) {
        self.config_reloads
            .get_or_create(&ReloadLabel { result })
            .inc();
    }
    pub(crate) fn notification(&self, result: NotifyResult) {
        self.notifications
            .get_or_create(&NotifyLabel { result })
            .inc();
    }
    pub(crate) fn safety_event(&self, event: SafetyEvent) {
        self.safety_events
            .get_or_create(&SafetyLabel { event })
            .inc();
    }
    pub(crate) fn stale_eviction(&self, result: Eviction) {
        self.stale_evictions
            .get_or_create(&EvictionLabel { result })
            .inc();
    }
    pub(crate) fn pod_policy(&self, outcome: PolicyOutcome) {
        self.pod_policies
            .get_or_create(&PolicyLabel { outcome })
            .inc();
    }
    pub(crate) fn eviction(&self, result: Eviction) {
        self.evictions
            .get_or_create(&EvictionLabel { result })
            .inc();
    }
}
