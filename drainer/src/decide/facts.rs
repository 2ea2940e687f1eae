//! What the safety gates found, as values (pure): why the breaker opened, a domain's outage, a
//! pause, a node's flapping. A held decision carries them ([`super::decision::Why`]); their
//! `Display` is what `drainer plan`, the logs and the Events say.

use std::str::FromStr;
use std::time::Duration;

use k8s_openapi::jiff::Timestamp;

use crate::config::Budget;

fn ts(t: Timestamp) -> String {
    nodemedic_common::time::rfc3339(t)
}

/// Why the breaker is open, with the numbers (its `Display` is what the plan and the log say, and
/// what is kept on the Lease: [`Trip::from_str`] reads it back).
#[derive(Debug, Clone, PartialEq)]
pub enum Trip {
    Unhealthy {
        count: usize,
        of: usize,
        limit: Budget,
    },
    Newly {
        count: usize,
        of: usize,
        limit: Budget,
        window: Duration,
    },
}

impl std::fmt::Display for Trip {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Trip::Unhealthy { count, of, limit } => {
                write!(f, "{count} of {of} nodes unhealthy > {limit}")
            }
            Trip::Newly {
                count,
                of,
                limit,
                window,
            } => write!(
                f,
                "{count} of {of} nodes became unhealthy within {} > {limit}",
                humantime::format_duration(*window)
            ),
        }
    }
}

impl FromStr for Trip {
    type Err = TripError;

    /// The text [`Trip`]'s `Display` writes (what the Lease keeps).
    fn from_str(s: &str) -> Result<Trip, TripError> {
        let bad = || TripError(s.to_string());
        let (counts, limit) = s.rsplit_once(" > ").ok_or_else(bad)?;
        let limit: Budget = limit.parse().map_err(|_| bad())?;
        let (count, rest) = counts.split_once(" of ").ok_or_else(bad)?;
        let count: usize = count.parse().map_err(|_| bad())?;
        if let Some(of) = rest.strip_suffix(" nodes unhealthy") {
            let of = of.parse().map_err(|_| bad())?;
            return Ok(Trip::Unhealthy { count, of, limit });
        }
        let (of, window) = rest
            .split_once(" nodes became unhealthy within ")
            .ok_or_else(bad)?;
        Ok(Trip::Newly {
            count,
            of: of.parse().map_err(|_| bad())?,
            limit,
            window: nodemedic_common::time::parse_duration(window).map_err(|_| bad())?,
        })
    }
}

/// A breaker reason on the Lease that is not a trip's text.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("not a breaker trip: {0:?}")]
pub struct TripError(pub String);

/// An outage: more than the configured share of a large enough domain unhealthy.
#[derive(Debug, Clone, PartialEq)]
pub struct Outage {
    pub(crate) domain: String,
    pub(crate) unhealthy: usize,
    pub(crate) size: usize,
    pub(crate) percent: f64,
    /// The common cause reported for the nodes failing now, if one was (`decide::common_cause`).
    pub(crate) cause: Option<String>,
}

impl std::fmt::Display for Outage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "outage in {}: {} of {} nodes unhealthy > {}%",
            self.domain, self.unhealthy, self.size, self.percent
        )?;
        match &self.cause {
            Some(c) => write!(f, "; likely common cause: {c}"),
            None => Ok(()),
        }
    }
}

/// A pause requested on the drainer's Lease.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pause {
    /// Who set it, as the API says: the field manager of the annotation (e.g. `kubectl-annotate`).
    pub(crate) by: String,
    pub(crate) since: Option<Timestamp>,
    /// The annotation's value.
    pub(crate) reason: String,
}

impl std::fmt::Display for Pause {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "paused by {}",
            if self.by.is_empty() {
                "someone"
            } else {
                &self.by
            }
        )?;
        if let Some(t) = self.since {
            write!(f, " since {}", ts(t))?;
        }
        if !self.reason.is_empty() {
            write!(f, ": {}", self.reason)?;
        }
        write!(
            f,
            " (remove the {} annotation of the drainer's Lease to resume)",
            crate::model::keys::PAUSE_ANNOTATION
        )
    }
}

/// A node flapping now: how many changes within the window, and when it counts as stable.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Flapping {
    pub(crate) changes: usize,
    pub(crate) stable_at: Timestamp,
}

/// Another remediator that may take a node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Peer {
    ClusterAutoscaler,
    Karpenter,
    Kured,
}

impl std::fmt::Display for Peer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Peer::ClusterAutoscaler => "cluster-autoscaler",
            Peer::Karpenter => "Karpenter",
            Peer::Kured => "kured",
        })
    }
}

/// A node another remediator has taken: which one, and how it says so.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Taken {
    pub(crate) node: String,
    pub(crate) peer: Peer,
    pub(crate) how: String,
}
