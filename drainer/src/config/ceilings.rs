//! What a config reload may not loosen: the safety limits in force when the drainer started. Pure.
//!
//! A flag given on the command line is already a ceiling the file may only tighten (`build`); the
//! shipped manifests set few of them, so without this an edit of the drainer's ConfigMap could
//! raise every budget to 100% and drain the fleet. The values the drainer started with are the
//! ceilings: a reload may tighten them, and loosening takes a restart, which is a rollout the
//! manifests make (and their owners review). A refused reload keeps the running settings and says
//! why with the `ConfigReloadRefused` Event.

use std::time::Duration;

use super::Config;
use super::budget::Budget;

/// The limits in force at start.
#[derive(Debug, Clone, PartialEq)]
pub struct Ceilings {
    max_cordoned: Budget,
    max_drains_in_flight: usize,
    max_unhealthy: Budget,
    breaker_new: Budget,
    max_cordoned_per_domain: Option<Budget>,
    domain_outage_percent: f64,
    /// The shortest min duration of a watched `Ready` condition (None: Ready not watched).
    ready_floor: Option<Duration>,
    max_reboots_per_day: u32,
    max_replacements_per_hour: u32,
}

/// The shortest min duration among `cfg`'s watched `Ready` conditions.
fn ready_floor(cfg: &Config) -> Option<Duration> {
    cfg.conditions
        .iter()
        .filter(|c| c.type_ == "Ready")
        .map(|c| c.min_duration)
        .min()
}

impl Ceilings {
    /// The limits of the settings the drainer started with.
    pub fn of(started: &Config) -> Ceilings {
        Ceilings {
            max_cordoned: started.max_cordoned,
            max_drains_in_flight: started.max_drains_in_flight,
            max_unhealthy: started.safety.max_unhealthy,
            breaker_new: started.safety.breaker_new,
            max_cordoned_per_domain: started.safety.max_cordoned_per_domain,
            domain_outage_percent: started.safety.domain_outage_percent,
            ready_floor: ready_floor(started),
            max_reboots_per_day: started.ladder.max_reboots_per_day,
            max_replacements_per_hour: started.ladder.max_replacements_per_hour,
        }
    }

    /// What `new` loosens, one line each in an operator's words (empty: nothing).
    pub fn loosened_by(&self, new: &Config) -> Vec<String> {
        let mut out = Vec::new();
        let mut budget = |key: &str, value: Budget, ceiling: Budget| {
            let why = match value.within(&ceiling) {
                Some(true) => return,
                Some(false) => "looser than",
                None => "not comparable (a count and a percentage) with",
            };
            out.push(said(key, &value.to_string(), why, &ceiling.to_string()));
        };
        budget("maxCordoned", new.max_cordoned, self.max_cordoned);
        budget("maxUnhealthy", new.safety.max_unhealthy, self.max_unhealthy);
        budget("breakerNew", new.safety.breaker_new, self.breaker_new);
        if let Some(ceiling) = self.max_cordoned_per_domain {
            match new.safety.max_cordoned_per_domain {
                Some(b) => budget("maxCordonedPerDomain", b, ceiling),
                None => out.push(said(
                    "maxCordonedPerDomain",
                    "no limit",
                    "looser than",
                    &ceiling.to_string(),
                )),
            }
        }
        let mut count = |key: &str, value: u64, ceiling: u64| {
            if value > ceiling {
                out.push(said(
                    key,
                    &value.to_string(),
                    "looser than",
                    &ceiling.to_string(),
                ));
            }
        };
        count(
            "maxDrainsInFlight",
            new.max_drains_in_flight as u64,
            self.max_drains_in_flight as u64,
        );
        let limits = &new.ladder;
        count(
            "maxRebootsPerNodePerDay",
            limits.max_reboots_per_day.into(),
            self.max_reboots_per_day.into(),
        );
        count(
            "maxReplacementsPerHour",
            limits.max_replacements_per_hour.into(),
            self.max_replacements_per_hour.into(),
        );
        if new.safety.domain_outage_percent > self.domain_outage_percent {
            out.push(said(
                "domainOutage",
                &format!("{}%", new.safety.domain_outage_percent),
                "looser than",
                &format!("{}%", self.domain_outage_percent),
            ));
        }
        if let Some(floor) = self.ready_floor {
            for c in new.conditions.iter().filter(|c| c.type_ == "Ready") {
                if c.min_duration < floor {
                    out.push(format!(
                        "{c} acts on Ready sooner than {} in force since the drainer started: a reload may only lengthen it; shortening takes a restart",
                        humantime::format_duration(floor)
                    ));
                }
            }
        }
        out
    }
}

fn said(key: &str, value: &str, why: &str, ceiling: &str) -> String {
    format!(
        "{key} {value} is {why} {ceiling} in force since the drainer started: a reload may only tighten it; loosening takes a restart"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg() -> Config {
        Config {
            conditions: vec!["Ready=Unknown,5m".parse().unwrap()],
            max_cordoned: Budget::Count(2),
            ..Default::default()
        }
    }

    #[test]
    fn a_reload_may_tighten_what_the_drainer_started_with_and_never_loosen_it() {
        let start = Ceilings::of(&cfg());
        assert!(start.loosened_by(&cfg()).is_empty(), "the same settings");
        let mut tighter = cfg();
        tighter.max_cordoned = Budget::Count(1);
        tighter.safety.max_unhealthy = Budget::Percent(10.0);
        tighter.conditions = vec!["Ready=Unknown,10m".parse().unwrap()];
        assert!(start.loosened_by(&tighter).is_empty());

        // The edit that drained every node: 100% budgets and the breaker off.
        let mut loose = cfg();
        loose.max_cordoned = Budget::Percent(100.0);
        loose.max_drains_in_flight = 100;
        loose.safety.max_unhealthy = Budget::Percent(100.0);
        loose.safety.breaker_new = Budget::Percent(100.0);
        loose.safety.domain_outage_percent = 100.0;
        loose.ladder.max_reboots_per_day = 10;
        loose.conditions = vec!["Ready=Unknown,0s".parse().unwrap()];
        let said = start.loosened_by(&loose);
        for key in [
            "maxCordoned 100% is not comparable (a count and a percentage) with 2",
            "maxDrainsInFlight 100 is looser than 1",
            "maxUnhealthy 100% is looser than 30%",
            "breakerNew 100% is looser than 20%",
            "domainOutage 100% is looser than 50%",
            "maxRebootsPerNodePerDay 10 is looser than 1",
            "acts on Ready sooner than 5m",
        ] {
            assert!(said.iter().any(|l| l.contains(key)), "{key} in {said:#?}");
        }
        assert_eq!(said.len(), 7, "{said:#?}");
    }

    #[test]
    fn a_per_domain_limit_in_force_cannot_be_taken_away() {
        let mut c = cfg();
        c.safety.max_cordoned_per_domain = Some(Budget::Count(1));
        let start = Ceilings::of(&c);
        let none = cfg();
        let said = start.loosened_by(&none);
        assert_eq!(said.len(), 1);
        assert!(
            said[0].starts_with("maxCordonedPerDomain no limit is looser than 1"),
            "{}",
            said[0]
        );
    }
}
