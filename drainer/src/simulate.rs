//! `drainer simulate`: replay a fleet scenario over simulated time through the controller's own
//! decision code ([`Fleet`]), and say what the drainer did at each step. The API server is stood in
//! for by applying each effect at once (a cordon sets `unschedulable` and the record, a drain takes
//! `drainTakes`, an uncordon clears both), so what is tested is the decisions and the safety gates,
//! at any fleet size, in milliseconds.
//!
//! A scenario is YAML:
//!
//! ```yaml
//! description: a zone goes dark
//! args: ["Ready=Unknown,5m", "--max-cordoned=10%"]     # drainer flags, as for `drainer run`
//! nodes:
//!   - {count: 5000, name: "node-{i}", labels: {topology.kubernetes.io/zone: "zone-{i%10}"}}
//! tick: 10s                  # a round every tick (default 10s)
//! drainTakes: 1m             # how long a drain takes (default 1m)
//! duration: 40m
//! steps:
//!   - at: 1m
//!     nodes: {label: "outage=yes"}   # a label selector (as --node-selector), and/or names, count
//!     set: Ready=Unknown     # or a list, alternated `times` times every `every`
//! expect:
//!   breakerOpenWithin: 10s   # of the first step
//!   drainsAtMost: 0
//! ```

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use clap::Parser;
use k8s_openapi::api::core::v1::Node;
use k8s_openapi::jiff::Timestamp;
use serde::Deserialize;

use crate::config::Config;
use crate::config::flags::PolicyArgs;
use crate::decide::fleet::{Fleet, FleetEvent};
use crate::decide::{Action, Effect};
use crate::model::node::NodeView;
use crate::model::record::{DrainOutcome, Record};

/// Errors reading or running a scenario.
#[derive(Debug, thiserror::Error)]
pub enum SimError {
    #[error("{file}: {message}")]
    Scenario { file: String, message: String },
    #[error("{file}: args: {message}")]
    Args { file: String, message: String },
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Scenario {
    #[serde(default)]
    pub description: String,
    #[serde(default)]
    pub args: Vec<String>,
    pub nodes: Vec<NodeGroup>,
    #[serde(default)]
    pub tick: Option<String>,
    #[serde(default)]
    pub drain_takes: Option<String>,
    pub duration: String,
    #[serde(default)]
    pub steps: Vec<Step>,
    #[serde(default)]
    pub expect: Expect,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct NodeGroup {
    #[serde(default = "one")]
    pub count: usize,
    /// `{i}` is the index within the group.
    pub name: String,
    /// Values may use `{i}` and `{i%N}`.
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    /// Conditions at the start, `Type=Status` (default: Ready=True).
    #[serde(default)]
    pub conditions: Vec<String>,
}

fn one() -> usize {
    1
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Step {
    pub at: String,
    pub nodes: Pick,
    /// `Type=Status`, or a list alternated over the repetitions.
    pub set: OneOrMany,
    #[serde(default)]
    pub every: Option<String>,
    #[serde(default = "one")]
    pub times: usize,
}

#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub enum OneOrMany {
    One(String),
    Many(Vec<String>),
}

/// Which nodes a step changes: a label selector (kube's syntax) and/or names, at most `count`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Pick {
    #[serde(default)]
    pub label: Option<String>,
    #[serde(default)]
    pub names: Vec<String>,
    #[serde(default)]
    pub count: Option<usize>,
}

/// What must hold (checked by `drainer simulate`, which exits 1 otherwise, and by the tests).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Expect {
    /// The breaker opens within this long of the first step.
    pub breaker_open_within: Option<String>,
    pub breaker_never_opens: Option<bool>,
    pub drains_at_most: Option<usize>,
    pub drains_at_least: Option<usize>,
    pub cordoned_at_once_at_most: Option<usize>,
    pub cordoned_at_once_at_least: Option<usize>,
    /// After the last step, every node still cordoned by the drainer is uncordoned within this.
    pub all_uncordoned_within: Option<String>,
    /// Nodes never cordoned or drained.
    #[serde(default)]
    pub untouched: Pick,
    /// Nodes reported as flapping (NodeFlapping).
    #[serde(default)]
    pub flapping: Vec<String>,
    /// Domains reported in an outage.
    #[serde(default)]
    pub outages: Vec<String>,
}

/// One thing that happened, at `at` (since the start).
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Happening {
    pub at_secs: u64,
    pub what: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
    pub detail: String,
}

/// What the run did, and the figures the expectations read.
#[derive(Debug, Default, serde::Serialize)]
pub struct Report {
    pub happenings: Vec<Happening>,
    pub cordons: usize,
    pub drains: usize,
    pub uncordons: usize,
    pub max_cordoned_at_once: usize,
    pub breaker_opened_at: Option<u64>,
    /// Seconds after the last step until no node was cordoned by us (None: some still are).
    pub all_uncordoned_after_last_step: Option<u64>,
    pub nodes: usize,
    pub rounds: usize,
    /// Expectations that failed, in words (empty: all held).
    pub failed: Vec<String>,
}

struct SimNode {
    name: String,
    labels: BTreeMap<String, String>,
    /// type -> (status, since)
    conditions: BTreeMap<String, (String, Timestamp)>,
    unschedulable: bool,
    record: Option<Record>,
    version: u64,
    drain_done_at: Option<Timestamp>,
    touched: bool,
}

impl SimNode {
    fn to_node(&self) -> Node {
        let conditions: Vec<serde_json::Value> = self
            .conditions
            .iter()
            .map(|(t, (s, since))| {
                serde_json::json!({"type": t, "status": s, "lastTransitionTime": nodemedic_common::time::rfc3339(*since)})
            })
            .collect();
        let mut annotations = serde_json::Map::new();
        if let Some(r) = &self.record {
            annotations.insert(
                nodemedic_common::keys::DRAIN_RECORD_ANNOTATION.into(),
                serde_json::Value::String(r.to_annotation()),
            );
        }
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": self.name, "resourceVersion": self.version.to_string(),
                "labels": self.labels, "annotations": annotations},
            "spec": {"unschedulable": self.unschedulable},
            "status": {"conditions": conditions},
        }))
        .unwrap_or_default()
    }

    fn view(&self) -> Arc<NodeView> {
        Arc::new(NodeView::of(&self.to_node()))
    }
}

fn expand(template: &str, i: usize) -> String {
    let mut out = template.replace("{i}", &i.to_string());
    while let Some(start) = out.find("{i%") {
        let Some(end) = out[start..].find('}') else {
            break;
        };
        let n: usize = out[start + 3..start + end].parse().unwrap_or(1).max(1);
        out.replace_range(start..start + end + 1, &(i % n).to_string());
    }
    out
}

fn dur(file: &str, what: &str, s: &str) -> Result<Duration, SimError> {
    humantime::parse_duration(s.trim()).map_err(|e| SimError::Scenario {
        file: file.into(),
        message: format!("{what}: invalid duration {s:?}: {e}"),
    })
}

fn condition(file: &str, s: &str) -> Result<(String, String), SimError> {
    s.split_once('=')
        .map(|(t, v)| (t.trim().to_string(), v.trim().to_string()))
        .ok_or_else(|| SimError::Scenario {
            file: file.into(),
            message: format!("condition {s:?}: expected Type=Status"),
        })
}

#[derive(Parser)]
struct Flags {
    #[command(flatten)]
    policy: PolicyArgs,
}

/// The drainer's settings from a scenario's `args`, exactly as `drainer run` parses them.
pub fn settings(file: &str, args: &[String]) -> Result<Config, SimError> {
    let flags =
        Flags::try_parse_from(std::iter::once("drainer".to_string()).chain(args.iter().cloned()))
            .map_err(|e| SimError::Args {
            file: file.into(),
            message: e.to_string().lines().next().unwrap_or_default().to_string(),
        })?;
    crate::config::build::build(&flags.policy).map_err(|errors| SimError::Args {
        file: file.into(),
        message: errors
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join("; "),
    })
}

/// Parse a scenario (errors name the file, and for YAML the line and column).
pub fn parse(file: &str, text: &str) -> Result<Scenario, SimError> {
    serde_saphyr::from_str(text).map_err(|e| SimError::Scenario {
        file: file.into(),
        message: e.to_string().lines().next().unwrap_or_default().to_string(),
    })
}

fn picked(file: &str, nodes: &[SimNode], pick: &Pick) -> Result<Vec<usize>, SimError> {
    let sel = pick
        .label
        .as_deref()
        .map(|l| {
            crate::config::select::Selector::labels(l).map_err(|e| SimError::Scenario {
                file: file.into(),
                message: format!("label selector {l:?}: {e}"),
            })
        })
        .transpose()?;
    let mut out: Vec<usize> = nodes
        .iter()
        .enumerate()
        .filter(|(_, n)| {
            let by_label = sel
                .as_ref()
                .is_some_and(|s| s.matches(&n.view()).unwrap_or(false));
            by_label || pick.names.contains(&n.name)
        })
        .map(|(i, _)| i)
        .collect();
    if let Some(c) = pick.count {
        out.truncate(c);
    }
    Ok(out)
}

/// Run `scenario` starting at `start`.
pub fn run(file: &str, scenario: &Scenario, start: Timestamp) -> Result<Report, SimError> {
    let mut cfg = settings(file, &scenario.args)?;
    cfg.owner = crate::config::DEFAULT_OWNER.into();
    let cfg = Arc::new(cfg);
    let tick = dur(file, "tick", scenario.tick.as_deref().unwrap_or("10s"))?;
    let drain_takes = dur(
        file,
        "drainTakes",
        scenario.drain_takes.as_deref().unwrap_or("1m"),
    )?;
    let duration = dur(file, "duration", &scenario.duration)?;
    if tick.is_zero() {
        return Err(SimError::Scenario {
            file: file.into(),
            message: "tick: must be more than 0s".into(),
        });
    }
    let at = |d: Duration| nodemedic_common::time::add(start, d);
    let secs = |t: Timestamp| (t.as_second() - start.as_second()).max(0) as u64;

    // The fleet as it starts: Ready=True (or the group's conditions) since long before.
    let long_ago = nodemedic_common::time::sub(start, Duration::from_secs(86_400));
    let mut nodes: Vec<SimNode> = Vec::new();
    for g in &scenario.nodes {
        for i in 0..g.count {
            let mut conditions = BTreeMap::new();
            conditions.insert("Ready".to_string(), ("True".to_string(), long_ago));
            for c in &g.conditions {
                let (t, s) = condition(file, c)?;
                conditions.insert(t, (s, long_ago));
            }
            nodes.push(SimNode {
                name: expand(&g.name, i),
                labels: g
                    .labels
                    .iter()
                    .map(|(k, v)| (k.clone(), expand(v, i)))
                    .collect(),
                conditions,
                unschedulable: false,
                record: None,
                version: 1,
                drain_done_at: None,
                touched: false,
            });
        }
    }
    let index: HashMap<String, usize> = nodes
        .iter()
        .enumerate()
        .map(|(i, n)| (n.name.clone(), i))
        .collect();

    // Every change: (time, node, type, status), in time order.
    let mut changes: Vec<(Timestamp, usize, String, String)> = Vec::new();
    let mut first_step: Option<Timestamp> = None;
    let mut last_step: Option<Timestamp> = None;
    for step in &scenario.steps {
        let t0 = at(dur(file, "at", &step.at)?);
        let every = step
            .every
            .as_deref()
            .map(|e| dur(file, "every", e))
            .transpose()?
            .unwrap_or_default();
        let values: Vec<String> = match &step.set {
            OneOrMany::One(s) => vec![s.clone()],
            OneOrMany::Many(v) => v.clone(),
        };
        let targets = picked(file, &nodes, &step.nodes)?;
        if targets.is_empty() {
            return Err(SimError::Scenario {
                file: file.into(),
                message: format!("step at {}: its nodes pick no node", step.at),
            });
        }
        for k in 0..step.times.max(1) {
            let t = nodemedic_common::time::add(t0, every * k as u32);
            let (ty, st) = condition(file, &values[k % values.len().max(1)])?;
            for &n in &targets {
                changes.push((t, n, ty.clone(), st.clone()));
            }
            first_step = Some(first_step.map_or(t, |f: Timestamp| f.min(t)));
            last_step = Some(last_step.map_or(t, |l: Timestamp| l.max(t)));
        }
    }
    changes.sort_by_key(|c| c.0);

    let mut fleet = Fleet::new(cfg.clone());
    let mut report = Report {
        nodes: nodes.len(),
        ..Default::default()
    };
    for n in &nodes {
        fleet.observe(n.view(), start);
    }
    let end = at(duration);
    let mut now = start;
    let mut next_change = 0;
    let mut cordoned_now = 0usize;
    let record =
        |report: &mut Report, t: Timestamp, what: &str, node: Option<&str>, detail: String| {
            report.happenings.push(Happening {
                at_secs: secs(t),
                what: what.into(),
                node: node.map(String::from),
                detail,
            });
        };
    while now <= end {
        // Condition changes due by now, as the watch would deliver them.
        while next_change < changes.len() && changes[next_change].0 <= now {
            let (t, n, ty, st) = changes[next_change].clone();
            next_change += 1;
            let node = &mut nodes[n];
            let entry = node.conditions.entry(ty).or_insert((String::new(), t));
            if entry.0 != st {
                *entry = (st, t);
                node.version += 1;
                fleet.observe(node.view(), now);
            }
        }
        // Drains ending by now.
        for node in nodes.iter_mut() {
            if node.drain_done_at.is_some_and(|d| d <= now) {
                node.drain_done_at = None;
                if let Some(r) = &node.record {
                    let done =
                        r.finished(&DrainOutcome::Drained, now, cfg.retry_base, cfg.retry_max);
                    node.record = Some(done);
                    node.version += 1;
                    fleet.observe(node.view(), now);
                    report.happenings.push(Happening {
                        at_secs: secs(now),
                        what: "drained".into(),
                        node: Some(node.name.clone()),
                        detail: String::new(),
                    });
                }
            }
        }
        let decisions = fleet.round(
            |name| index.get(name).map(|&i| nodes[i].view()),
            |_| Vec::new(),
            now,
        );
        report.rounds += 1;
        for ev in fleet.take_events() {
            let (what, detail) = match &ev {
                FleetEvent::BreakerOpened { trip } => {
                    report.breaker_opened_at.get_or_insert(secs(now));
                    ("breaker opened", trip.to_string())
                }
                FleetEvent::BreakerClosed { open_for } => (
                    "breaker closed",
                    format!("after {}", humantime::format_duration(*open_for)),
                ),
                FleetEvent::OutageStarted(o) => ("outage started", o.to_string()),
                FleetEvent::OutageEnded { domain } => ("outage ended", domain.clone()),
                FleetEvent::Flapping { node, changes } => {
                    record(
                        &mut report,
                        now,
                        "flapping",
                        Some(node),
                        format!("{changes} changes"),
                    );
                    continue;
                }
            };
            record(&mut report, now, what, None, detail);
        }
        for (d, _) in decisions {
            let Some(&i) = index.get(&d.node) else {
                continue;
            };
            let node = &mut nodes[i];
            match &d.effect {
                Effect::Cordon(r) => {
                    node.unschedulable = true;
                    node.record = Some(r.clone());
                    node.touched = true;
                    fleet.wrote(&d.node, Some(r), Some(true), now);
                    report.cordons += 1;
                    cordoned_now += 1;
                    record(&mut report, now, "cordon", Some(&d.node), d.reason.clone());
                }
                Effect::Drain(job) if node.drain_done_at.is_none() => {
                    let r = job.record.draining(now);
                    node.record = Some(r.clone());
                    node.drain_done_at = Some(nodemedic_common::time::add(now, drain_takes));
                    fleet.wrote(&d.node, Some(&r), None, now);
                    report.drains += 1;
                    record(&mut report, now, "drain", Some(&d.node), d.reason.clone());
                }
                Effect::Uncordon => {
                    node.unschedulable = false;
                    node.record = None;
                    node.drain_done_at = None;
                    fleet.wrote(&d.node, None, Some(false), now);
                    report.uncordons += 1;
                    cordoned_now = cordoned_now.saturating_sub(1);
                    record(
                        &mut report,
                        now,
                        "uncordon",
                        Some(&d.node),
                        d.reason.clone(),
                    );
                }
                Effect::Release(r) => {
                    node.record = Some(r.clone());
                    fleet.wrote(&d.node, Some(r), None, now);
                }
                Effect::Forget => {
                    node.record = None;
                    fleet.wrote(&d.node, None, None, now);
                }
                Effect::DeleteNode => {
                    record(&mut report, now, "delete", Some(&d.node), d.reason.clone());
                }
                Effect::Drain(_) | Effect::Nothing => {}
            }
            if d.action == Action::Hold {
                // Held: nothing is written (the plan and the log say why).
            }
        }
        report.max_cordoned_at_once = report.max_cordoned_at_once.max(cordoned_now);
        if let Some(last) = last_step
            && now >= last
            && cordoned_now == 0
            && report.all_uncordoned_after_last_step.is_none()
        {
            report.all_uncordoned_after_last_step = Some(secs(now).saturating_sub(secs(last)));
        }
        now = nodemedic_common::time::add(now, tick);
    }
    check(file, scenario, &nodes, first_step.map(secs), &mut report)?;
    Ok(report)
}

fn check(
    file: &str,
    s: &Scenario,
    nodes: &[SimNode],
    first_step: Option<u64>,
    r: &mut Report,
) -> Result<(), SimError> {
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
            if nodes[i].touched {
                failed.push(format!("{} untouched: it was cordoned", nodes[i].name));
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
    r.failed = failed;
    Ok(())
}

/// The report as text: one line per happening (`+MMmSSs what node: detail`), then the figures.
pub fn print(r: &Report, s: &Scenario, out: &mut impl std::io::Write) -> std::io::Result<()> {
    if !s.description.is_empty() {
        writeln!(out, "# {}", s.description)?;
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
            let t = format!("+{}m{:02}s", x.at_secs / 60, x.at_secs % 60);
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

#[cfg(test)]
mod tests {
    use super::*;

    fn start() -> Timestamp {
        "2026-11-24T10:00:00Z".parse().unwrap()
    }

    fn run_text(text: &str) -> Report {
        let s = parse("test.yaml", text).unwrap();
        run("test.yaml", &s, start()).unwrap()
    }

    #[test]
    fn templates_expand_the_index_and_its_modulo() {
        assert_eq!(expand("node-{i}", 7), "node-7");
        assert_eq!(expand("zone-{i%3}", 7), "zone-1");
        assert_eq!(expand("r{i%2}-n{i}", 5), "r1-n5");
    }

    #[test]
    fn a_single_failure_is_cordoned_drained_and_uncordoned_after_recovery() {
        let r = run_text(
            r#"
args: ["KernelDeadlock=True,2m", "--drain-buffer=1m"]
nodes: [{count: 20, name: "n{i}", labels: {zone: "z{i%4}"}, conditions: ["KernelDeadlock=False"]}]
duration: 20m
drainTakes: 30s
steps:
  - {at: 1m, nodes: {names: [n3]}, set: KernelDeadlock=True}
  - {at: 10m, nodes: {names: [n3]}, set: KernelDeadlock=False}
expect:
  breakerNeverOpens: true
  drainsAtLeast: 1
  allUncordonedWithin: 3m
"#,
        );
        assert!(r.failed.is_empty(), "{:?}", r.failed);
        let whats: Vec<(&str, u64)> = r
            .happenings
            .iter()
            .map(|h| (h.what.as_str(), h.at_secs))
            .collect();
        assert_eq!(
            whats,
            vec![
                ("cordon", 180),
                ("drain", 240),
                ("drained", 270),
                ("uncordon", 720)
            ],
            "cordoned 2m after the problem, drained after the 1m buffer, uncordoned 2m after recovery"
        );
    }

    #[test]
    fn bad_scenarios_are_clear_errors() {
        let e = parse("s.yaml", "nodes: []\nduration: 1m\nsteps: []\nnope: 1\n").unwrap_err();
        assert!(e.to_string().starts_with("s.yaml: "), "{e}");
        let s = parse(
            "s.yaml",
            "args: [\"--max-cordoned=0\"]\nnodes: []\nduration: 1m\n",
        )
        .unwrap();
        let e = run("s.yaml", &s, start()).unwrap_err();
        assert!(e.to_string().contains("--max-cordoned"), "{e}");
        let s = parse(
            "s.yaml",
            "args: [\"Ready=Unknown\"]\nnodes: [{name: a}]\nduration: 1m\nsteps: [{at: 1m, nodes: {names: [b]}, set: Ready=Unknown}]\n",
        )
        .unwrap();
        let e = run("s.yaml", &s, start()).unwrap_err();
        assert!(e.to_string().contains("pick no node"), "{e}");
    }
}
