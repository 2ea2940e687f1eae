//! A fleet-wide change (breaker, outage) or a node starting to flap, as the values its log line,
//! metric, Event and notification are made of. Pure (the [`Recorder`](super::Recorder) writes them).

use std::time::Duration;

use nodemedic_common::events::Severity;

use crate::decide::fleet::FleetEvent;
use crate::decide::gates::slow_start::Change;
use crate::model::occurrence::reason;
use crate::notify::NotifyKind;

/// A fleet-wide change, or a node starting to flap, as one log line, metric, Event and
/// notification.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SafetyOccurrence {
    pub(crate) reason: &'static str,
    pub(crate) severity: Severity,
    pub(crate) message: String,
    pub(crate) metric: crate::metrics::SafetyEvent,
    pub(crate) notify: NotifyKind,
    pub(crate) node: Option<String>,
    pub(crate) domain: Option<String>,
}

impl SafetyOccurrence {
    pub(crate) fn of(ev: &FleetEvent) -> SafetyOccurrence {
        use crate::metrics::SafetyEvent as M;
        use FleetEvent::*;
        let (reason, severity, message, metric, notify, node, domain) = match ev {
            BreakerOpened { trip: why, cause } => (
                reason::BREAKER_OPENED,
                Severity::Warning,
                breaker_opened(why, cause.as_deref()),
                M::BreakerOpened,
                NotifyKind::BreakerOpened,
                None,
                None,
            ),
            BreakerClosed { open_for } => (
                reason::BREAKER_CLOSED,
                Severity::Normal,
                format!(
                    "Circuit breaker closed after {}: remediation resumes",
                    humantime::format_duration(Duration::from_secs(open_for.as_secs()))
                ),
                M::BreakerClosed,
                NotifyKind::BreakerClosed,
                None,
                None,
            ),
            OutageStarted(o) => (
                reason::OUTAGE_STARTED,
                Severity::Warning,
                format!("Domain {o}: treated as a partition, nothing in it is cordoned or drained"),
                M::OutageStarted,
                NotifyKind::OutageStarted,
                None,
                Some(o.domain.clone()),
            ),
            OutageEnded { domain } => (
                reason::OUTAGE_ENDED,
                Severity::Normal,
                format!("Outage in {domain} ended: its nodes are decided one by one again"),
                M::OutageEnded,
                NotifyKind::OutageEnded,
                None,
                Some(domain.clone()),
            ),
            DetectorSilent { node, silence } => (
                reason::DETECTOR_SILENT,
                Severity::Warning,
                silent_message(silence),
                M::DetectorSilent,
                NotifyKind::DetectorSilent,
                Some(node.clone()),
                None,
            ),
            DetectorHeard { node, silent_for } => (
                reason::DETECTOR_HEARD,
                Severity::Normal,
                format!(
                    "The node's detector refreshed its conditions again after being silent for {}: its conditions can be trusted again",
                    humantime::format_duration(Duration::from_secs(silent_for.as_secs()))
                ),
                M::DetectorHeard,
                NotifyKind::DetectorHeard,
                Some(node.clone()),
                None,
            ),
            CommonCause(c) => (
                reason::COMMON_CAUSE,
                Severity::Warning,
                format!("Common cause? {c}"),
                M::CommonCause,
                NotifyKind::CommonCause,
                None,
                None,
            ),
            SlowStart(change) => return slow_start(change),
            DomainKept {
                node,
                kept,
                labels_say,
            } => return domain_kept(node, kept.as_deref(), labels_say.as_deref()),
            Flapping { node, changes } => return flapping(node, *changes),
            LeftToPeer(t) => return left_to_peer(&t.node, t.peer, &t.how),
        };
        SafetyOccurrence {
            reason,
            severity,
            message,
            metric,
            notify,
            node,
            domain,
        }
    }
}

/// A failure domain's slow start widened or fell back to one.
fn slow_start(change: &Change) -> SafetyOccurrence {
    use crate::metrics::SafetyEvent as M;
    let (reason, severity, message, metric, domain) = match change {
        Change::Widened { domain, width } => (
            reason::SLOW_START_WIDENED,
            Severity::Normal,
            format!(
                "Slow start: {} allows {width} remediations (reboots, replacements) at once, its last ones having stayed healthy",
                domain_words(domain)
            ),
            M::SlowStartWidened,
            domain,
        ),
        Change::Narrowed { domain, from, why } => (
            reason::SLOW_START_NARROWED,
            Severity::Warning,
            format!(
                "Slow start: {} is back to one remediation at once (was {from}): {why}",
                domain_words(domain)
            ),
            M::SlowStartNarrowed,
            domain,
        ),
    };
    SafetyOccurrence {
        reason,
        severity,
        message,
        metric,
        notify: NotifyKind::SlowStart,
        node: None,
        domain: Some(domain.clone()),
    }
}

/// A failure domain as people read it ("" is every node without one).
fn domain_words(domain: &str) -> String {
    if domain.is_empty() {
        "the nodes without a failure domain".into()
    } else {
        format!("domain {domain}")
    }
}

/// A node started flapping.
fn flapping(node: &str, changes: usize) -> SafetyOccurrence {
    SafetyOccurrence {
        reason: reason::NODE_FLAPPING,
        severity: Severity::Warning,
        message: format!(
            "Node conditions changed {changes} times in a short while: not cordoned or drained until stable"
        ),
        metric: crate::metrics::SafetyEvent::NodeFlapping,
        notify: NotifyKind::NodeFlapping,
        node: Some(node.to_string()),
        domain: None,
    }
}

/// A node another remediator took, left to it.
fn left_to_peer(node: &str, peer: crate::decide::facts::Peer, how: &str) -> SafetyOccurrence {
    SafetyOccurrence {
        reason: reason::LEFT_TO_PEER,
        severity: Severity::Normal,
        message: format!(
            "Left to {peer}, which is {how}: the drainer starts nothing on this node until {peer} lets go"
        ),
        metric: crate::metrics::SafetyEvent::LeftToPeer,
        notify: NotifyKind::LeftToPeer,
        node: Some(node.to_string()),
        domain: None,
    }
}

/// A known node's labels name another failure domain than the one it is kept in.
fn domain_kept(node: &str, kept: Option<&str>, labels_say: Option<&str>) -> SafetyOccurrence {
    SafetyOccurrence {
        reason: reason::DOMAIN_KEPT,
        severity: Severity::Warning,
        message: format!(
            "The node's labels now put it in {}, but it stays in {} for outages and slow start: a node may set its own zone label, so a node's domain is the one it had when the drainer first saw it (a restart of the drainer, or the Node made again, reads it afresh)",
            one_domain(labels_say),
            one_domain(kept)
        ),
        metric: crate::metrics::SafetyEvent::DomainKept,
        notify: NotifyKind::DomainKept,
        node: Some(node.to_string()),
        domain: kept.map(String::from),
    }
}

/// One node's failure domain as people read it.
fn one_domain(domain: Option<&str>) -> String {
    domain.map_or_else(|| "no failure domain".into(), |d| format!("domain {d}"))
}

/// What a silent detector's Event says: since when, and what it means for the node's conditions.
fn silent_message(s: &crate::decide::silence::Silence) -> String {
    let when = nodemedic_common::time::rfc3339(s.last_heard);
    let what = if s.never {
        format!(
            "The node's detector has never reported although its DaemonSet places a pod here and the node exists since {when}"
        )
    } else {
        format!("The node's detector has not refreshed its conditions since {when}")
    };
    format!(
        "{what}: it may have died, hung or lost its input, so the node's conditions may be stale (not cordoned or drained for this unless DetectorSilent is a configured condition)"
    )
}

fn breaker_opened(why: &crate::decide::facts::Trip, cause: Option<&str>) -> String {
    let cause = cause.map(|c| format!("; likely common cause: {c}"));
    format!(
        "Circuit breaker opened ({why}): nothing new is cordoned or drained until it closes{}",
        cause.unwrap_or_default()
    )
}
