//! A scenario as written (YAML) and as run (a [`Plan`]: the settings, the nodes as objects, every
//! condition change in time order). Pure: parsing and planning only; errors name the file.

use std::collections::BTreeMap;
use std::time::Duration;

use clap::Parser;
use k8s_openapi::api::core::v1::Node;
use k8s_openapi::jiff::Timestamp;
use nodemedic_common::status::Status;
use nodemedic_common::time::duration_text as dt;
use serde::Deserialize;

use crate::config::Config;
use crate::config::flags::PolicyArgs;
use crate::model::node::NodeView;

/// Errors reading or running a scenario.
#[derive(Debug, thiserror::Error)]
pub enum SimError {
    #[error("{file}: {message}")]
    Scenario { file: String, message: String },
    /// The file's YAML: every error found, each `file:line:column: message` on a line of its own.
    #[error("{}", yaml_errors(file, errors))]
    Yaml {
        file: String,
        errors: Vec<nodemedic_common::yaml::YamlError>,
    },
    #[error("{file}: args: {message}")]
    Args { file: String, message: String },
    #[error("cannot start the simulation's runtime: {0}")]
    Runtime(std::io::Error),
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Scenario {
    #[serde(default)]
    pub(crate) description: String,
    #[serde(default)]
    pub(crate) args: Vec<String>,
    pub(crate) nodes: Vec<NodeGroup>,
    #[serde(default, deserialize_with = "dt::option")]
    pub(crate) tick: Option<String>,
    #[serde(default, deserialize_with = "dt::option")]
    pub(crate) drain_takes: Option<String>,
    #[serde(deserialize_with = "dt::deserialize")]
    pub(crate) duration: String,
    /// How often the nodes' detectors refresh their conditions (default 5m, the detector's).
    #[serde(default, deserialize_with = "dt::option")]
    pub(crate) heartbeat: Option<String>,
    /// How long a node takes to come back from a reboot the drainer asked for (default 3m).
    #[serde(default, deserialize_with = "dt::option")]
    pub(crate) reboot_takes: Option<String>,
    #[serde(default)]
    pub(crate) steps: Vec<Step>,
    #[serde(default)]
    pub(crate) expect: Expect,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct NodeGroup {
    #[serde(default = "one")]
    pub(crate) count: usize,
    /// `{i}` is the index within the group.
    pub(crate) name: String,
    /// Values may use `{i}` and `{i%N}`.
    #[serde(default)]
    pub(crate) labels: BTreeMap<String, String>,
    /// Conditions at the start, `Type=Status` (default: Ready=True).
    #[serde(default)]
    pub(crate) conditions: Vec<String>,
    /// A detector runs on these nodes: it owns their conditions but Ready (the ownership
    /// annotation names them) and refreshes their heartbeats every `heartbeat` until a step stops it.
    #[serde(default)]
    pub(crate) detector: bool,
    /// Pods on each node besides its app pod (for pod policies).
    #[serde(default)]
    pub(crate) pods: Vec<PodGroup>,
    /// `status.nodeInfo` fields (`kernelVersion`, `osImage`, ...); values may use `{i}`, `{i%N}`.
    #[serde(default)]
    pub(crate) node_info: BTreeMap<String, String>,
    /// What a reboot the drainer asks for does to these nodes (default: heals).
    #[serde(default)]
    pub(crate) reboot: super::reboots::Outcome,
    /// What a power-cycle from outside does to these nodes (default: works).
    #[serde(default)]
    pub(crate) power_cycle: super::reboots::Outside,
    /// What restarting a component does to these nodes (default: helps).
    #[serde(default)]
    pub(crate) restart: super::reboots::Restart,
}

/// A pod on each node of a group.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct PodGroup {
    /// `{node}` is the node's name.
    pub(crate) name: String,
    #[serde(default = "default_namespace")]
    pub(crate) namespace: String,
    /// Its controller's kind (ReplicaSet, StatefulSet, Job ...; default ReplicaSet).
    #[serde(default = "default_owner")]
    pub(crate) owner_kind: String,
    #[serde(default)]
    pub(crate) labels: BTreeMap<String, String>,
    /// Its annotations (kube-system's `scheduler.alpha.kubernetes.io/not-evicted-pod: ""`: kept).
    #[serde(default)]
    pub(crate) annotations: BTreeMap<String, String>,
    /// `spec.priority` (2000000000 and above: a critical pod, never evicted).
    #[serde(default)]
    pub(crate) priority: Option<i32>,
    /// A PodDisruptionBudget refuses its eviction.
    #[serde(default)]
    pub(crate) protected: bool,
    /// It finishes (Succeeded) this long after the start, as a batch pod does.
    #[serde(default, deserialize_with = "dt::option")]
    pub(crate) finishes_after: Option<String>,
}

fn default_namespace() -> String {
    "default".into()
}

fn default_owner() -> String {
    "ReplicaSet".into()
}

fn one() -> usize {
    1
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct Step {
    #[serde(deserialize_with = "dt::deserialize")]
    pub(crate) at: String,
    pub(crate) nodes: Pick,
    /// `Type=Status`, or a list alternated over the repetitions.
    #[serde(default)]
    pub(crate) set: Option<OneOrMany>,
    /// Instead of `set`: the nodes' detectors stop (killed, hung) or start again.
    #[serde(default)]
    pub(crate) detector: Option<DetectorStep>,
    #[serde(default, deserialize_with = "dt::option")]
    pub(crate) every: Option<String>,
    #[serde(default = "one")]
    pub(crate) times: usize,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum DetectorStep {
    Stop,
    Start,
}

#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub(crate) enum OneOrMany {
    One(String),
    Many(Vec<String>),
}

/// Which nodes a step changes: a label selector (kube's syntax) and/or names, at most `count`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct Pick {
    #[serde(default)]
    pub(crate) label: Option<String>,
    #[serde(default)]
    pub(crate) names: Vec<String>,
    #[serde(default)]
    pub(crate) count: Option<usize>,
}

/// What must hold (checked by `drainer simulate`, which exits 1 otherwise, and by the tests).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct Expect {
    /// The breaker opens within this long of the first step.
    pub(crate) breaker_open_within: Option<String>,
    pub(crate) breaker_never_opens: Option<bool>,
    pub(crate) drains_at_most: Option<usize>,
    pub(crate) drains_at_least: Option<usize>,
    pub(crate) cordoned_at_once_at_most: Option<usize>,
    pub(crate) cordoned_at_once_at_least: Option<usize>,
    /// After the last step, every node still cordoned by the drainer is uncordoned within this.
    pub(crate) all_uncordoned_within: Option<String>,
    /// Nodes never cordoned or drained.
    #[serde(default)]
    pub(crate) untouched: Pick,
    /// Nodes reported as flapping (NodeFlapping).
    #[serde(default)]
    pub(crate) flapping: Vec<String>,
    /// Domains reported in an outage.
    #[serde(default)]
    pub(crate) outages: Vec<String>,
    /// Nodes reported with a silent detector (DetectorSilent).
    #[serde(default)]
    pub(crate) silent: Vec<String>,
    /// The remediation ladder's outcomes (`simulate::reboots::check`).
    #[serde(flatten)]
    pub(crate) ladder: super::reboots::Expect,
}

/// One condition change: at `at`, node `node` (an index into [`Plan::nodes`]) gets `type_=status`.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Change {
    pub(crate) at: Timestamp,
    pub(crate) node: usize,
    pub(crate) type_: String,
    pub(crate) status: Status,
    /// The condition's reason (None: as it was).
    pub(crate) reason: Option<String>,
}

/// A scenario ready to run.
pub struct Plan {
    /// The drainer's settings (the run takes them).
    pub(crate) cfg: Config,
    pub(crate) start: Timestamp,
    pub(crate) tick: Duration,
    pub(crate) drain_takes: Duration,
    pub(crate) end: Timestamp,
    pub(crate) nodes: Vec<Node>,
    /// In time order.
    pub(crate) changes: Vec<Change>,
    /// The detectors' heartbeat period, whether each node's detector runs at the start, and when
    /// one stops (false) or starts (true), in time order.
    pub(crate) heartbeat: Duration,
    pub(crate) detectors: Vec<bool>,
    pub(crate) detector_changes: Vec<(Timestamp, usize, bool)>,
    /// The groups' pods, those a PDB protects, and when pods finish (in time order).
    pub(crate) pods: Vec<k8s_openapi::api::core::v1::Pod>,
    pub(crate) protected: Vec<(String, String)>,
    pub(crate) finishing: Vec<(Timestamp, String, String)>,
    pub(crate) first_step: Option<Timestamp>,
    pub(crate) last_step: Option<Timestamp>,
    /// What a reboot and a power-cycle do to each node, and how long a reboot takes.
    pub(crate) reboots: Vec<super::reboots::Machine>,
    pub(crate) reboot_takes: Duration,
}

pub(super) fn expand(template: &str, i: usize) -> String {
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

fn error(file: &str, message: String) -> SimError {
    SimError::Scenario {
        file: file.into(),
        message,
    }
}

pub(super) fn dur(file: &str, what: &str, s: &str) -> Result<Duration, SimError> {
    nodemedic_common::time::parse_duration(s.trim())
        .map_err(|e| error(file, format!("{what}: invalid duration {s:?}: {e}")))
}

/// `Type=Status` or `Type=Status,reason=Reason`.
fn condition(file: &str, s: &str) -> Result<(String, Status, Option<String>), SimError> {
    let (head, reason) = match s.split_once(',') {
        Some((h, r)) => match r.trim().strip_prefix("reason=") {
            Some(r) if !r.trim().is_empty() => (h, Some(r.trim().to_string())),
            _ => {
                let what =
                    format!("condition {s:?}: expected Type=Status or Type=Status,reason=Reason");
                return Err(error(file, what));
            }
        },
        None => (s, None),
    };
    let (t, v) = head
        .split_once('=')
        .ok_or_else(|| error(file, format!("condition {s:?}: expected Type=Status")))?;
    let status = v
        .trim()
        .parse()
        .map_err(|e| error(file, format!("condition {s:?}: {e}")))?;
    Ok((t.trim().to_string(), status, reason))
}

#[derive(Parser)]
struct Flags {
    #[command(flatten)]
    policy: PolicyArgs,
}

/// The drainer's settings from a scenario's `args`, exactly as `drainer run` parses them.
pub(crate) fn settings(file: &str, args: &[String]) -> Result<Config, SimError> {
    let argv = std::iter::once("drainer".to_string()).chain(args.iter().cloned());
    let flags = Flags::try_parse_from(argv).map_err(|e| SimError::Args {
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

/// `args` with a relative `--config` path taken from the scenario's folder (a scenario and its
/// config file ship together).
fn relative_to(file: &str, args: &[String]) -> Vec<String> {
    let dir = std::path::Path::new(file)
        .parent()
        .unwrap_or(std::path::Path::new(""));
    let rebase = |p: &str| match std::path::Path::new(p).is_relative() {
        true => dir.join(p).display().to_string(),
        false => p.to_string(),
    };
    let mut out = Vec::with_capacity(args.len());
    let mut next_is_config = false;
    for a in args {
        if next_is_config {
            out.push(rebase(a));
            next_is_config = false;
        } else if let Some(p) = a.strip_prefix("--config=") {
            out.push(format!("--config={}", rebase(p)));
        } else {
            next_is_config = a == "--config";
            out.push(a.clone());
        }
    }
    out
}

/// Parse a scenario: every error of the file, each with its line and column (and "did you mean"
/// for a misspelt key), as the config and rule files say theirs.
pub fn parse(file: &str, text: &str) -> Result<Scenario, SimError> {
    nodemedic_common::yaml::parse_all(text).map_err(|errors| SimError::Yaml {
        file: file.into(),
        errors,
    })
}

fn yaml_errors(file: &str, errors: &[nodemedic_common::yaml::YamlError]) -> String {
    let one = |e: &nodemedic_common::yaml::YamlError| match (e.line, e.column) {
        (0, _) => format!("{file}: {}", e.message),
        (l, c) => format!("{file}:{l}:{c}: {}", e.message),
    };
    errors.iter().map(one).collect::<Vec<_>>().join("\n")
}

/// The nodes `pick` names, by index into `nodes`.
pub(super) fn picked(file: &str, nodes: &[Node], pick: &Pick) -> Result<Vec<usize>, SimError> {
    let sel = pick
        .label
        .as_deref()
        .map(|l| {
            crate::config::select::Selector::labels(l)
                .map_err(|e| error(file, format!("label selector {l:?}: {e}")))
        })
        .transpose()?;
    let mut out: Vec<usize> = nodes
        .iter()
        .enumerate()
        .filter(|(_, n)| {
            let by_label = sel
                .as_ref()
                .is_some_and(|s| s.matches(&NodeView::of(n)).unwrap_or(false));
            let name = n.metadata.name.as_deref().unwrap_or_default();
            by_label || pick.names.iter().any(|p| p == name)
        })
        .map(|(i, _)| i)
        .collect();
    if let Some(c) = pick.count {
        out.truncate(c);
    }
    Ok(out)
}

/// The fleet as it starts: Ready=True (or the group's conditions) since a day before `start`.
fn fleet(file: &str, s: &Scenario, start: Timestamp) -> Result<Vec<Node>, SimError> {
    let long_ago = nodemedic_common::time::rfc3339(nodemedic_common::time::sub(
        start,
        Duration::from_secs(86_400),
    ));
    let mut nodes = Vec::new();
    for g in &s.nodes {
        let mut conditions = BTreeMap::from([("Ready".to_string(), Status::True)]);
        for c in &g.conditions {
            let (t, s, _) = condition(file, c)?;
            conditions.insert(t, s);
        }
        let owned: Vec<&str> = conditions
            .keys()
            .map(String::as_str)
            .filter(|t| g.detector && *t != "Ready")
            .collect();
        let started = nodemedic_common::time::rfc3339(start);
        let conditions: Vec<serde_json::Value> = conditions
            .iter()
            .map(|(t, s)| {
                let mut c = serde_json::json!({"type": t, "status": s.as_str(), "lastTransitionTime": long_ago});
                if owned.contains(&t.as_str()) {
                    c["lastHeartbeatTime"] = serde_json::json!(started);
                }
                c
            })
            .collect();
        let annotations = match owned.is_empty() {
            true => serde_json::json!({}),
            false => {
                serde_json::json!({nodemedic_common::keys::OWNED_CONDITIONS_ANNOTATION: owned.join(",")})
            }
        };
        for i in 0..g.count {
            let labels: BTreeMap<String, String> = g
                .labels
                .iter()
                .map(|(k, v)| (k.clone(), expand(v, i)))
                .collect();
            // A UID as the API server gives one (a replacement deletes only that Node object).
            let uid = format!("00000000-0000-4000-8000-{:012x}", nodes.len() + 1);
            let mut node = serde_json::json!({
                "metadata": {"name": expand(&g.name, i), "uid": uid, "labels": labels, "annotations": annotations},
                "spec": {"unschedulable": false},
                "status": {"conditions": conditions},
            });
            if !g.node_info.is_empty() {
                // Every field NodeSystemInfo requires, then the group's.
                let mut info = serde_json::json!({"architecture": "amd64", "bootID": "", "containerRuntimeVersion": "",
                    "kernelVersion": "", "kubeProxyVersion": "", "kubeletVersion": "", "machineID": "",
                    "operatingSystem": "linux", "osImage": "", "systemUUID": ""});
                for (k, v) in &g.node_info {
                    info[k] = serde_json::json!(expand(v, i));
                }
                node["status"]["nodeInfo"] = info;
            }
            let node =
                serde_json::from_value(node).map_err(|e| error(file, format!("nodes: {e}")))?;
            nodes.push(node);
        }
    }
    Ok(nodes)
}

type Pods = (
    Vec<k8s_openapi::api::core::v1::Pod>,
    Vec<(String, String)>,
    Vec<(Timestamp, String, String)>,
);

/// The groups' pods (each owned by a controller of its kind), which are protected, and when those
/// that finish do.
fn pods(file: &str, s: &Scenario, nodes: &[Node], start: Timestamp) -> Result<Pods, SimError> {
    let (mut pods, mut protected, mut finishing) = (Vec::new(), Vec::new(), Vec::new());
    let mut first = 0;
    for g in &s.nodes {
        for node in &nodes[first..first + g.count] {
            let node = node.metadata.name.as_deref().unwrap_or_default();
            for p in &g.pods {
                let name = p.name.replace("{node}", node);
                let pod = serde_json::json!({
                    "metadata": {"name": name, "namespace": p.namespace, "uid": format!("uid-{name}"),
                        "labels": p.labels, "annotations": p.annotations,
                        "ownerReferences": [{"apiVersion": "apps/v1", "kind": p.owner_kind,
                            "name": format!("{}-owner", p.name.replace("{node}", "")),
                            "uid": "uid-owner", "controller": true}]},
                    "spec": {"nodeName": node, "containers": [], "priority": p.priority},
                    "status": {"phase": "Running"},
                });
                let pod =
                    serde_json::from_value(pod).map_err(|e| error(file, format!("pods: {e}")))?;
                pods.push(pod);
                if p.protected {
                    protected.push((p.namespace.clone(), name.clone()));
                }
                if let Some(f) = &p.finishes_after {
                    let at = nodemedic_common::time::add(start, dur(file, "finishesAfter", f)?);
                    finishing.push((at, p.namespace.clone(), name));
                }
            }
        }
        first += g.count;
    }
    finishing.sort_by_key(|f| f.0);
    Ok((pods, protected, finishing))
}

impl Plan {
    /// `scenario` as run from `start`.
    pub(crate) fn of(file: &str, scenario: &Scenario, start: Timestamp) -> Result<Plan, SimError> {
        let mut cfg = settings(file, &relative_to(file, &scenario.args))?;
        cfg.owner = crate::config::DEFAULT_OWNER.into();
        let tick = dur(file, "tick", scenario.tick.as_deref().unwrap_or("10s"))?;
        let drain_takes = scenario.drain_takes.as_deref().unwrap_or("1m");
        let drain_takes = dur(file, "drainTakes", drain_takes)?;
        let duration = dur(file, "duration", &scenario.duration)?;
        if tick.is_zero() {
            return Err(error(file, "tick: must be more than 0s".into()));
        }
        let nodes = fleet(file, scenario, start)?;
        let heartbeat = dur(
            file,
            "heartbeat",
            scenario.heartbeat.as_deref().unwrap_or("5m"),
        )?;
        if heartbeat.is_zero() {
            return Err(error(file, "heartbeat: must be more than 0s".into()));
        }
        let detectors = scenario
            .nodes
            .iter()
            .flat_map(|g| std::iter::repeat_n(g.detector, g.count))
            .collect();
        let (pods, protected, finishing) = pods(file, scenario, &nodes, start)?;
        let reboot_takes = scenario.reboot_takes.as_deref().unwrap_or("3m");
        let mut plan = Plan {
            reboots: (scenario.nodes.iter())
                .flat_map(|g| std::iter::repeat_n(g.machine(), g.count))
                .collect(),
            reboot_takes: dur(file, "rebootTakes", reboot_takes)?,
            pods,
            protected,
            finishing,
            heartbeat,
            detectors,
            detector_changes: Vec::new(),
            cfg,
            start,
            tick,
            drain_takes,
            end: nodemedic_common::time::add(start, duration),
            nodes,
            changes: Vec::new(),
            first_step: None,
            last_step: None,
        };
        for step in &scenario.steps {
            plan.step(file, step)?;
        }
        plan.changes.sort_by_key(|c| c.at);
        plan.detector_changes.sort_by_key(|c| c.0);
        Ok(plan)
    }

    fn step(&mut self, file: &str, step: &Step) -> Result<(), SimError> {
        let t0 = nodemedic_common::time::add(self.start, dur(file, "at", &step.at)?);
        let every = step.every.as_deref().map(|e| dur(file, "every", e));
        let every = every.transpose()?.unwrap_or_default();
        let targets = picked(file, &self.nodes, &step.nodes)?;
        let values: Vec<&String> = match (&step.set, step.detector) {
            (Some(OneOrMany::One(s)), None) => vec![s],
            (Some(OneOrMany::Many(v)), None) => v.iter().collect(),
            (None, Some(d)) => {
                for &node in &targets {
                    self.detector_changes
                        .push((t0, node, d == DetectorStep::Start));
                }
                self.first_step = Some(self.first_step.map_or(t0, |f| f.min(t0)));
                self.last_step = Some(self.last_step.map_or(t0, |l| l.max(t0)));
                return Ok(());
            }
            _ => {
                let what = format!("step at {}: give either `set` or `detector`", step.at);
                return Err(error(file, what));
            }
        };
        if targets.is_empty() || values.is_empty() {
            let what = format!("step at {}: its nodes pick no node", step.at);
            return Err(error(file, what));
        }
        for k in 0..step.times.max(1) {
            let at = nodemedic_common::time::add(t0, every.saturating_mul(k as u32));
            let (type_, status, reason) = condition(file, values[k % values.len()])?;
            for &node in &targets {
                self.changes.push(Change {
                    at,
                    node,
                    type_: type_.clone(),
                    status,
                    reason: reason.clone(),
                });
            }
            self.first_step = Some(self.first_step.map_or(at, |f| f.min(at)));
            self.last_step = Some(self.last_step.map_or(at, |l| l.max(at)));
        }
        Ok(())
    }

    pub(crate) fn secs(&self, t: Timestamp) -> u64 {
        (t.as_second() - self.start.as_second()).max(0) as u64
    }
}
