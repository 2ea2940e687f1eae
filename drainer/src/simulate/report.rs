//! What a simulation did, pure: the controller's taps tallied into happenings and figures
//! ([`Report`]), the scenario's expectations checked against them, and the text `drainer simulate`
//! prints.

use std::collections::BTreeSet;
use std::time::Duration;

use super::scenario::{Plan, Scenario, SimError, dur, picked};
use crate::controller::{Done, Tap};
use crate::decide::fleet::FleetEvent;
use crate::decide::gates::slow_start::Change;
use crate::decide::{Action, Effect};
use crate::model::record::DrainOutcome;
use crate::model::record::Phase;

/// One thing that happened, at `at` (since the start).
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub(crate) struct Happening {
    pub(crate) at_secs: u64,
    pub(crate) what: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) node: Option<String>,
    pub(crate) detail: String,
}

/// What the run did, and the figures the expectations read.
#[derive(Debug, Default, serde::Serialize)]
pub struct Report {
    pub(crate) happenings: Vec<Happening>,
    pub(crate) cordons: usize,
    pub(crate) drains: usize,
    pub(crate) uncordons: usize,
    pub(crate) max_cordoned_at_once: usize,
    pub(crate) breaker_opened_at: Option<u64>,
    /// Seconds after the last step until no node was cordoned by us (None: some still are).
    pub(crate) all_uncordoned_after_last_step: Option<u64>,
    pub(crate) nodes: usize,
    pub(crate) rounds: usize,
    /// Expectations that failed, in words (empty: all held).
    pub(crate) failed: Vec<String>,
    /// When a gate (a budget, the breaker, an outage, a window...) began to hold a node, with its
    /// words (`held`), and when none held it any more (`released`).
    pub(crate) held: Vec<Happening>,
    /// Nodes cordoned at least once.
    #[serde(skip)]
    pub(crate) touched: BTreeSet<String>,
    /// Cordoned by the drainer now.
    #[serde(skip)]
    pub(crate) cordoned_now: usize,
    /// Held by a gate now.
    #[serde(skip)]
    pub(crate) held_now: BTreeSet<String>,
}

impl Report {
    /// Take what the controller did (`tap`), as of `plan` (times in seconds since its start; what
    /// happened after its end is not counted).
    pub(crate) fn tally(&mut self, tap: Tap, plan: &Plan) {
        let at = match &tap {
            Tap::Fleet { at, .. } | Tap::Round { at, .. } | Tap::DrainEnded { at, .. } => *at,
        };
        if at > plan.end {
            return;
        }
        let secs = plan.secs(at);
        match tap {
            Tap::Fleet { event, .. } => self.fleet(secs, event),
            Tap::DrainEnded { node, outcome, .. } => {
                if outcome == DrainOutcome::Drained {
                    self.happened(secs, "drained", Some(node), String::new());
                }
            }
            Tap::Round { done, decided, .. } => {
                self.rounds += 1;
                self.holds(secs, decided);
                for d in done.into_iter().filter(|d| d.ok) {
                    let Some(what) = self.done(&d) else {
                        continue;
                    };
                    let (node, reason) = (d.node.to_string(), d.why.to_string());
                    self.happened(secs, what, Some(node), reason);
                }
                self.max_cordoned_at_once = self.max_cordoned_at_once.max(self.cordoned_now);
                if let Some(last) = plan.last_step
                    && at >= last
                    && self.cordoned_now == 0
                    && self.all_uncordoned_after_last_step.is_none()
                {
                    let after = secs.saturating_sub(plan.secs(last));
                    self.all_uncordoned_after_last_step = Some(after);
                }
            }
        }
    }

    /// What a decision carried out did, in the report's words (counted as it goes): its action,
    /// told apart where the report says more (a hold by taints alone, a relapse, a restart's
    /// end, a person needed); `None` for what the report does not show (a released or forgotten
    /// record).
    fn done(&mut self, d: &Done) -> Option<&'static str> {
        let what = match &d.effect {
            Effect::Relapse(_) => "relapse",
            Effect::Cordon(r) => {
                self.cordons += 1;
                self.cordoned_now += 1;
                self.touched.insert(d.node.to_string());
                if r.cordoned { "cordon" } else { "taint" }
            }
            Effect::Uncordon(r) if r.phase == Phase::Restarting => "restart over",
            Effect::Uncordon(r) => {
                self.uncordons += 1;
                self.cordoned_now = self.cordoned_now.saturating_sub(1);
                if r.cordoned { "uncordon" } else { "untaint" }
            }
            Effect::Drain(_) => {
                self.drains += 1;
                "drain"
            }
            Effect::Escalate(_) => "needs a person",
            Effect::Release(_) | Effect::Forget | Effect::Nothing => return None,
            Effect::DeleteNode | Effect::Probation(_) | Effect::Reboot(_) | Effect::Replace(_) => {
                Action::of(&d.why, &d.effect).as_str()
            }
        };
        Some(what)
    }

    /// A node a gate begins to hold is `held` from then; one no gate holds any more is `released`.
    fn holds(&mut self, secs: u64, decided: Vec<(String, Option<String>)>) {
        for (node, held) in decided {
            match held {
                Some(why) => {
                    if self.held_now.insert(node.clone()) {
                        self.held.push(Happening {
                            at_secs: secs,
                            what: "held".into(),
                            node: Some(node),
                            detail: why,
                        });
                    }
                }
                None => {
                    if self.held_now.remove(&node) {
                        self.held.push(Happening {
                            at_secs: secs,
                            what: "released".into(),
                            node: Some(node),
                            detail: String::new(),
                        });
                    }
                }
            }
        }
    }

    fn fleet(&mut self, secs: u64, event: FleetEvent) {
        let (what, detail) = match event {
            FleetEvent::BreakerOpened { trip, cause } => {
                self.breaker_opened_at.get_or_insert(secs);
                let cause = cause.map(|c| format!("; likely common cause: {c}"));
                (
                    "breaker opened",
                    format!("{trip}{}", cause.unwrap_or_default()),
                )
            }
            FleetEvent::CommonCause(c) => ("common cause", c.to_string()),
            FleetEvent::BreakerClosed { open_for } => {
                // To the second, as every time in the report (rounds run a few ms after a change).
                let secs = (open_for.as_millis() + 500) / 1000;
                let d = humantime::format_duration(Duration::from_secs(secs as u64));
                ("breaker closed", format!("after {d}"))
            }
            FleetEvent::OutageStarted(o) => ("outage started", o.to_string()),
            FleetEvent::OutageEnded { domain } => ("outage ended", domain),
            FleetEvent::SlowStart(Change::Widened { domain, width }) => {
                ("slow start widened", format!("{domain}: {width} at once"))
            }
            FleetEvent::SlowStart(Change::Narrowed { domain, why, .. }) => (
                "slow start narrowed",
                format!("{domain}: 1 at once ({why})"),
            ),
            FleetEvent::Flapping { node, changes } => {
                let detail = format!("{changes} changes");
                return self.happened(secs, "flapping", Some(node), detail);
            }
            FleetEvent::DetectorSilent { node, silence } => {
                let detail = format!(
                    "last heard {}",
                    nodemedic_common::time::rfc3339(silence.last_heard)
                );
                return self.happened(secs, "detector silent", Some(node), detail);
            }
            FleetEvent::DomainKept {
                node, labels_say, ..
            } => {
                let detail = format!("labels say {}", labels_say.unwrap_or_default());
                return self.happened(secs, "domain kept", Some(node), detail);
            }
            FleetEvent::LeftToPeer(t) => {
                let what = t.peer.to_string();
                return self.happened(secs, "left to peer", Some(t.node), what);
            }
            FleetEvent::DetectorHeard { node, silent_for } => {
                let d = humantime::format_duration(Duration::from_secs(silent_for.as_secs()));
                return self.happened(secs, "detector heard", Some(node), format!("after {d}"));
            }
        };
        self.happened(secs, what, None, detail);
    }

    pub(crate) fn happened(
        &mut self,
        at_secs: u64,
        what: &str,
        node: Option<String>,
        detail: String,
    ) {
        self.happenings.push(Happening {
            at_secs,
            what: what.into(),
            node,
            detail,
        });
    }
}

/// Check the scenario's expectations: what failed goes to `r.failed`.
pub(crate) fn check(file: &str, s: &Scenario, plan: &Plan, r: &mut Report) -> Result<(), SimError> {
    let first_step = plan.first_step.map(|t| plan.secs(t));
    let nodes = &plan.nodes;
    let e = &s.expect;
    let mut failed = Vec::new();
    if let Some(w) = &e.breaker_open_within {
        let within = dur(file, "breakerOpenWithin", w)?.as_secs();
        match (r.breaker_opened_at, first_step) {
            (Some(o), Some(f)) if o <= f + within => {}
            (opened, _) => failed.push(format!(
                "the breaker opens within {w} of the first step: opened at {}",
                opened.map_or("never".into(), |o| format!("+{o}s"))
            )),
        }
    }
    if e.breaker_never_opens == Some(true) && r.breaker_opened_at.is_some() {
        failed.push("the breaker never opens: it did".into());
    }
    if let Some(n) = e.drains_at_most
        && r.drains > n
    {
        failed.push(format!("at most {n} drains: {}", r.drains));
    }
    if let Some(n) = e.drains_at_least
        && r.drains < n
    {
        failed.push(format!("at least {n} drains: {}", r.drains));
    }
    if let Some(n) = e.cordoned_at_once_at_most
        && r.max_cordoned_at_once > n
    {
        failed.push(format!(
            "at most {n} cordoned at once: {}",
            r.max_cordoned_at_once
        ));
    }
    if let Some(n) = e.cordoned_at_once_at_least
        && r.max_cordoned_at_once < n
    {
        failed.push(format!(
            "at least {n} cordoned at once: {}",
            r.max_cordoned_at_once
        ));
    }
    if let Some(w) = &e.all_uncordoned_within {
        let within = dur(file, "allUncordonedWithin", w)?.as_secs();
        match r.all_uncordoned_after_last_step {
            Some(after) if after <= within => {}
            after => failed.push(format!(
                "all uncordoned within {w} of the last step: {}",
                after.map_or("some stay cordoned".into(), |a| format!("after {a}s"))
            )),
        }
    }
    if e.untouched.label.is_some() || !e.untouched.names.is_empty() {
        for i in picked(file, nodes, &e.untouched)? {
            let name = nodes[i].metadata.name.as_deref().unwrap_or_default();
            if r.touched.contains(name) {
                failed.push(format!("{name} untouched: it was cordoned"));
            }
        }
    }
    for n in &e.flapping {
        if !r
            .happenings
            .iter()
            .any(|h| h.what == "flapping" && h.node.as_deref() == Some(n))
        {
            failed.push(format!("{n} reported flapping: it was not"));
        }
    }
    for d in &e.outages {
        if !r
            .happenings
            .iter()
            .any(|h| h.what == "outage started" && h.detail.contains(&format!("outage in {d}:")))
        {
            failed.push(format!("an outage in {d}: none reported"));
        }
    }
    if !e.silent.is_empty() {
        let reported: BTreeSet<&str> = r
            .happenings
            .iter()
            .filter(|h| h.what == "detector silent")
            .filter_map(|h| h.node.as_deref())
            .collect();
        let expected: BTreeSet<&str> = e.silent.iter().map(String::as_str).collect();
        if reported != expected {
            failed.push(format!(
                "detectors reported silent on {expected:?}: they were on {reported:?}"
            ));
        }
    }
    check_ladders(&e.ladder, r, &mut failed);
    r.failed = failed;
    Ok(())
}

/// Check `e` against what happened in `r`; what failed goes to `failed`.
fn check_ladders(e: &super::reboots::Expect, r: &Report, failed: &mut Vec<String>) {
    let nodes = |what: &str| -> Vec<String> {
        let mut v: Vec<String> = (r.happenings.iter())
            .filter(|h| h.what == what)
            .filter_map(|h| h.node.clone())
            .collect();
        v.sort();
        v.dedup();
        v
    };
    if let Some(n) = e.reboots_proven {
        let proven = r
            .happenings
            .iter()
            .filter(|h| h.what == "reboot proven")
            .count();
        if proven != n {
            failed.push(format!("{n} reboots proven: {proven}"));
        }
    }
    for (what, want) in [
        ("needs a person", &e.needs_person),
        ("replace", &e.replaced),
    ] {
        if let Some(want) = want {
            let mut want = want.clone();
            want.sort();
            let got = nodes(what);
            if got != want {
                failed.push(format!("{what}: {want:?}; it was {got:?}"));
            }
        }
    }
    if let Some(want) = &e.slow_start_widths {
        let got: Vec<u32> = (r.happenings.iter())
            .filter_map(|h| match h.what.as_str() {
                "slow start narrowed" => Some(1),
                "slow start widened" => h
                    .detail
                    .rsplit_once(": ")
                    .and_then(|(_, w)| w.split(' ').next()?.parse().ok()),
                _ => None,
            })
            .collect();
        if &got != want {
            failed.push(format!("slow start widths {want:?}: {got:?}"));
        }
    }
}

/// The report as text: one line per happening (`+MMmSSs what node: detail`), then the figures.
pub fn print(r: &Report, description: &str, out: &mut impl std::io::Write) -> std::io::Result<()> {
    print_from(r, description, None, out)
}

/// [`print`], with times as the clock read them when `start` (the run's start) is given.
pub fn print_from(
    r: &Report,
    description: &str,
    start: Option<k8s_openapi::jiff::Timestamp>,
    out: &mut impl std::io::Write,
) -> std::io::Result<()> {
    if !description.is_empty() {
        writeln!(out, "# {description}")?;
    }
    // A burst of one kind at one instant is summarised past a few lines.
    let mut i = 0;
    while i < r.happenings.len() {
        let h = &r.happenings[i];
        let same = r.happenings[i..]
            .iter()
            .take_while(|x| x.at_secs == h.at_secs && x.what == h.what)
            .count();
        let shown = if same > 5 { 3 } else { same };
        for x in &r.happenings[i..i + shown] {
            let t = match start {
                Some(s) => nodemedic_common::time::rfc3339(nodemedic_common::time::add(
                    s,
                    std::time::Duration::from_secs(x.at_secs),
                )),
                None => format!("+{}m{:02}s", x.at_secs / 60, x.at_secs % 60),
            };
            match &x.node {
                Some(n) if x.detail.is_empty() => writeln!(out, "{t:>9}  {:<15} {n}", x.what)?,
                Some(n) => writeln!(out, "{t:>9}  {:<15} {n}: {}", x.what, x.detail)?,
                None => writeln!(out, "{t:>9}  {:<15} {}", x.what, x.detail)?,
            }
        }
        if same > shown {
            writeln!(
                out,
                "{:>9}  {:<15} ... and {} more",
                "",
                h.what,
                same - shown
            )?;
        }
        i += same;
    }
    writeln!(
        out,
        "nodes {}, rounds {}: {} cordons, {} drains, {} uncordons; at most {} cordoned at once; breaker opened {}",
        r.nodes,
        r.rounds,
        r.cordons,
        r.drains,
        r.uncordons,
        r.max_cordoned_at_once,
        r.breaker_opened_at
            .map_or("never".to_string(), |s| format!("at +{s}s"))
    )?;
    for f in &r.failed {
        writeln!(out, "EXPECTATION FAILED: {f}")?;
    }
    Ok(())
}
