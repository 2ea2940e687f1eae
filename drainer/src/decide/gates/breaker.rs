//! The circuit breaker, pure: it opens when too many selected nodes are unhealthy at once, or too
//! many became unhealthy within a window; then nothing new is cordoned and no drain starts (drains
//! already evicting finish, recovered nodes are still uncordoned). It closes once the counts have
//! stayed at or under the thresholds for the cooldown.
//!
//! Settings: `config::safety` (`max_unhealthy`, `breaker_new`, `breaker_window`,
//! `breaker_cooldown`). State: [`Breaker`], kept by the fleet from the running counts. Persists: the
//! breaker, on the drainer's Lease ([`BREAKER_ANNOTATION`]), so a restart or a new leader neither
//! forgets an open breaker nor cuts its cooldown short.

use std::time::Duration;

use k8s_openapi::jiff::Timestamp;

use super::gate::Gate;
use crate::config::safety::Safety;
use crate::decide::candidate::Candidate;
use crate::decide::decision::Why;
use crate::decide::facts::Trip;

pub(crate) use crate::model::keys::BREAKER_ANNOTATION;

/// What the breaker reads.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Health {
    pub(crate) selected: usize,
    pub(crate) unhealthy: usize,
    /// Unhealthy nodes that became so within the breaker window.
    pub(crate) newly: usize,
}

/// The thresholds test alone (what a plan over a snapshot can say).
pub(crate) fn trip(h: &Health, s: &Safety) -> Option<Trip> {
    if h.selected == 0 {
        return None;
    }
    if h.unhealthy > s.max_unhealthy.limit(h.selected) {
        return Some(Trip::Unhealthy {
            count: h.unhealthy,
            of: h.selected,
            limit: s.max_unhealthy,
        });
    }
    if h.newly > s.breaker_new.limit(h.selected) {
        return Some(Trip::Newly {
            count: h.newly,
            of: h.selected,
            limit: s.breaker_new,
            window: s.breaker_window,
        });
    }
    None
}

/// The breaker's state, as kept on the Lease (`BREAKER_ANNOTATION`) so that a restart or a new
/// leader neither forgets an open breaker nor cuts its cooldown short.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Breaker {
    /// Open since (None: closed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) open_since: Option<Timestamp>,
    /// Why it opened, kept as the trip's text (`reason`, the format earlier versions wrote).
    #[serde(
        default,
        rename = "reason",
        skip_serializing_if = "Option::is_none",
        with = "trip_text"
    )]
    pub(crate) trip: Option<Trip>,
    /// While open: since when the counts have been at or under the thresholds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) calm_since: Option<Timestamp>,
}

/// A change of the breaker's state.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum BreakerChange {
    Opened(Trip),
    Closed { open_for: Duration },
}

impl Breaker {
    pub(crate) fn is_open(&self) -> bool {
        self.open_since.is_some()
    }

    /// Take the counts at `now`; returns a change when the state changed.
    pub(crate) fn observe(
        &mut self,
        h: &Health,
        s: &Safety,
        now: Timestamp,
    ) -> Option<BreakerChange> {
        match (trip(h, s), self.open_since) {
            (Some(t), None) => {
                *self = Breaker {
                    open_since: Some(now),
                    trip: Some(t.clone()),
                    calm_since: None,
                };
                Some(BreakerChange::Opened(t))
            }
            (Some(t), Some(_)) => {
                self.trip = Some(t);
                self.calm_since = None;
                None
            }
            (None, None) => None,
            (None, Some(since)) => {
                let calm = *self.calm_since.get_or_insert(now);
                if nodemedic_common::time::add(calm, s.breaker_cooldown) <= now {
                    *self = Breaker::default();
                    Some(BreakerChange::Closed {
                        open_for: super::super::problem::elapsed(since, now),
                    })
                } else {
                    None
                }
            }
        }
    }

    /// When the clock alone may close it.
    pub(crate) fn wake(&self, s: &Safety) -> Option<Timestamp> {
        self.calm_since
            .filter(|_| self.is_open())
            .map(|c| nodemedic_common::time::add(c, s.breaker_cooldown))
    }

    /// What holds decisions while it is open: the trip, and when it is calm, when it may close.
    pub(crate) fn hold(&self, s: &Safety) -> Option<BreakerGate> {
        self.open_since?;
        Some(BreakerGate {
            trip: self.trip.clone()?,
            closing_at: self.wake(s),
            cause: None,
        })
    }

    /// Read back from the Lease annotation (anything unreadable is a closed breaker, logged by the
    /// caller).
    pub(crate) fn from_annotation(raw: &str) -> Result<Breaker, serde_json::Error> {
        serde_json::from_str(raw)
    }

    pub(crate) fn to_annotation(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }
}

/// The trip as its text on the Lease.
mod trip_text {
    use crate::decide::facts::Trip;

    pub(crate) fn serialize<S: serde::Serializer>(
        t: &Option<Trip>,
        s: S,
    ) -> Result<S::Ok, S::Error> {
        match t {
            Some(t) => s.serialize_str(&t.to_string()),
            None => s.serialize_none(),
        }
    }

    pub(crate) fn deserialize<'de, D: serde::Deserializer<'de>>(
        d: D,
    ) -> Result<Option<Trip>, D::Error> {
        let text: Option<String> = serde::Deserialize::deserialize(d)?;
        text.filter(|t| !t.is_empty())
            .map(|t| t.parse().map_err(serde::de::Error::custom))
            .transpose()
    }
}

/// The open breaker, as a round reads it: why, and when it may close.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct BreakerGate {
    pub(crate) trip: Trip,
    /// Counts back under the thresholds: it closes then (unless they rise again).
    pub(crate) closing_at: Option<Timestamp>,
    /// The common cause reported for the nodes failing now, if one was (`decide::common_cause`).
    pub(crate) cause: Option<String>,
}

impl Gate for Option<BreakerGate> {
    fn hold(&self, _: &Candidate) -> Option<Why> {
        let b = self.as_ref()?;
        Some(Why::BreakerOpen {
            trip: b.trip.clone(),
            closing_at: b.closing_at,
            cause: b.cause.clone(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Budget;

    fn t(s: &str) -> Timestamp {
        s.parse().unwrap()
    }

    fn safety() -> Safety {
        Safety::default()
    }

    #[test]
    fn the_breaker_opens_over_either_threshold_and_closes_after_a_calm_cooldown() {
        let s = safety();
        let mut b = Breaker::default();
        let now = t("2026-11-24T10:00:00Z");
        // 30% of 120 is 36: 36 unhealthy holds, 37 trips.
        let h = |unhealthy, newly| Health {
            selected: 120,
            unhealthy,
            newly,
        };
        assert_eq!(b.observe(&h(36, 0), &s, now), None);
        let opened = b.observe(&h(41, 0), &s, now).unwrap();
        assert_eq!(
            opened,
            BreakerChange::Opened(Trip::Unhealthy {
                count: 41,
                of: 120,
                limit: Budget::Percent(30.0)
            })
        );
        assert_eq!(
            b.hold(&s).unwrap().trip.to_string(),
            "41 of 120 nodes unhealthy > 30%"
        );
        // Calm for less than the cooldown: still open; a relapse restarts the cooldown.
        let later = |secs: u64| nodemedic_common::time::add(now, Duration::from_secs(secs));
        assert_eq!(b.observe(&h(10, 0), &s, later(60)), None);
        assert_eq!(b.hold(&s).unwrap().closing_at, Some(later(660)));
        assert_eq!(b.observe(&h(40, 0), &s, later(120)), None);
        assert_eq!(b.calm_since, None);
        assert_eq!(b.observe(&h(10, 0), &s, later(180)), None);
        assert_eq!(b.wake(&s), Some(later(780)));
        assert_eq!(b.observe(&h(10, 0), &s, later(779)), None);
        assert_eq!(
            b.observe(&h(10, 0), &s, later(780)),
            Some(BreakerChange::Closed {
                open_for: Duration::from_secs(780)
            })
        );
        assert!(!b.is_open());
        // Many new at once trips it too (20% of 120 = 24).
        let opened = b.observe(&h(30, 25), &s, later(800)).unwrap();
        assert_eq!(
            opened.clone(),
            BreakerChange::Opened(Trip::Newly {
                count: 25,
                of: 120,
                limit: Budget::Percent(20.0),
                window: Duration::from_secs(300)
            })
        );
        // It survives a restart through its annotation.
        let back = Breaker::from_annotation(&b.to_annotation()).unwrap();
        assert_eq!(back, b);
        assert!(Breaker::from_annotation("{nope").is_err());
    }

    #[test]
    fn a_trip_reads_back_from_its_text_as_earlier_versions_wrote_it() {
        let old = r#"{"openSince":"2026-11-24T10:00:00Z","reason":"2 of 5 nodes became unhealthy within 5m > 20%"}"#;
        let b = Breaker::from_annotation(old).unwrap();
        assert_eq!(
            b.trip,
            Some(Trip::Newly {
                count: 2,
                of: 5,
                limit: Budget::Percent(20.0),
                window: Duration::from_secs(300)
            })
        );
        assert_eq!(b.to_annotation(), old);
        assert!("nonsense".parse::<Trip>().is_err());
    }
}
