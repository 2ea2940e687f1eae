//! Recorded history for backtests (`drainer simulate --history`), pure: node condition transitions
//! read from what clusters keep, and the plan that replays them through the controller.
//!
//! A history file holds any mix of JSON documents, one after another (concatenated `kubectl get
//! events -A -o json` dumps, single Events, JSON lines):
//! - Events whose message is the detector's or NPD's `Node condition <Type> is now: <Status>,
//!   reason: <Reason>, ...` about a Node: one transition at the Event's last time;
//! - transition lines as the drainer's `--history-file` writes them:
//!   `{"at": "...", "node": "...", "type": "...", "status": "True", "reason": "..."}`.
//!
//! Everything else (the drainer's own Events, other Events) is skipped and counted.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use k8s_openapi::api::core::v1::Node;
use k8s_openapi::jiff::Timestamp;
use nodemedic_common::status::Status;

use super::scenario::{Change, Plan, SimError};
use crate::config::Config;

pub(crate) use crate::model::transition::Transition;

/// What a history file held.
#[derive(Debug, Default, PartialEq)]
pub(crate) struct History {
    pub(crate) transitions: Vec<Transition>,
    /// Documents or Events that were not transitions.
    pub(crate) skipped: usize,
}

fn error(file: &str, message: String) -> SimError {
    SimError::Scenario {
        file: file.into(),
        message,
    }
}

/// Read every transition in `text` (see the module's doc), in time order.
pub(crate) fn read(file: &str, text: &str) -> Result<History, SimError> {
    let mut h = History::default();
    let docs = serde_json::Deserializer::from_str(text).into_iter::<serde_json::Value>();
    for doc in docs {
        let doc = doc.map_err(|e| {
            error(
                file,
                format!("not JSON at line {}, column {}: {e}", e.line(), e.column()),
            )
        })?;
        if let Some(items) = doc.get("items").and_then(|i| i.as_array()) {
            for item in items {
                h.take(item);
            }
        } else {
            h.take(&doc);
        }
    }
    h.transitions
        .sort_by(|a, b| a.at.cmp(&b.at).then(a.node.cmp(&b.node)));
    Ok(h)
}

/// The transitions among `events` (the cluster's Events, read live), in time order.
pub(crate) fn of_events(events: &[k8s_openapi::api::core::v1::Event]) -> History {
    let mut h = History::default();
    for e in events {
        match serde_json::to_value(e) {
            Ok(v) => h.take(&v),
            Err(_) => h.skipped += 1,
        }
    }
    h.transitions
        .sort_by(|a, b| a.at.cmp(&b.at).then(a.node.cmp(&b.node)));
    h
}

impl History {
    fn take(&mut self, v: &serde_json::Value) {
        let t = if v.get("at").is_some() && v.get("node").is_some() {
            serde_json::from_value::<Transition>(v.clone()).ok()
        } else {
            of_event(v)
        };
        match t {
            Some(t) => self.transitions.push(t),
            None => self.skipped += 1,
        }
    }
}

/// The transition a condition-change Event records, if it is one.
fn of_event(v: &serde_json::Value) -> Option<Transition> {
    let object = v.get("involvedObject")?;
    if object.get("kind")?.as_str()? != "Node" {
        return None;
    }
    let node = object.get("name")?.as_str()?.to_string();
    let message = v.get("message")?.as_str()?;
    let rest = message.strip_prefix("Node condition ")?;
    let (type_, rest) = rest.split_once(" is now: ")?;
    let (status, rest) = rest.split_once(',').unwrap_or((rest, ""));
    let reason = rest
        .trim_start()
        .strip_prefix("reason: ")
        .map(|r| r.split(',').next().unwrap_or(r).trim().to_string())
        .filter(|r| !r.is_empty());
    let at = ["lastTimestamp", "eventTime", "firstTimestamp"]
        .iter()
        .find_map(|k| v.get(*k)?.as_str()?.parse::<Timestamp>().ok())?;
    Some(Transition {
        at,
        node,
        type_: type_.trim().to_string(),
        status: status.trim().to_string(),
        reason,
    })
}

/// The plan replaying `transitions` under `cfg`: the nodes of `nodes` (labels, software; a node
/// only the history names is made bare), each watched condition starting in the status opposite to
/// its first recorded one (Ready=True), from a minute before the first transition to `after` past
/// the last.
pub(crate) fn plan(
    file: &str,
    transitions: &[Transition],
    nodes: &[Node],
    mut cfg: Config,
    after: Duration,
) -> Result<Plan, SimError> {
    let first = transitions
        .first()
        .ok_or_else(|| error(file, "no condition transitions in the history".into()))?;
    let start = nodemedic_common::time::sub(first.at, Duration::from_secs(60));
    let end = nodemedic_common::time::add(transitions.last().map_or(first.at, |t| t.at), after);
    cfg.owner = crate::config::DEFAULT_OWNER.into();
    let long_ago = nodemedic_common::time::sub(start, Duration::from_secs(86_400));
    // The first status of each node's condition types, to start from the opposite.
    let mut first_of: BTreeMap<(&str, &str), Status> = BTreeMap::new();
    for t in transitions {
        first_of
            .entry((&t.node, &t.type_))
            .or_insert_with(|| Status::parse(&t.status));
    }
    let mut names: BTreeSet<&str> = transitions.iter().map(|t| t.node.as_str()).collect();
    let mut fleet: Vec<Node> = Vec::new();
    for n in nodes {
        let name = n.metadata.name.as_deref().unwrap_or_default();
        names.remove(name);
        fleet.push(starting(n.clone(), &first_of, long_ago));
    }
    for name in names {
        let mut n = Node::default();
        n.metadata.name = Some(name.to_string());
        fleet.push(starting(n, &first_of, long_ago));
    }
    let index: BTreeMap<String, usize> = fleet
        .iter()
        .enumerate()
        .map(|(i, n)| (n.metadata.name.clone().unwrap_or_default(), i))
        .collect();
    let changes = transitions
        .iter()
        .map(|t| Change {
            at: t.at,
            node: index[&t.node],
            type_: t.type_.clone(),
            status: Status::parse(&t.status),
            reason: t.reason.clone(),
        })
        .collect();
    let fleet_len = fleet.len();
    Ok(Plan {
        cfg,
        start,
        tick: Duration::from_secs(10),
        drain_takes: Duration::from_secs(60),
        end,
        nodes: fleet,
        changes,
        first_step: Some(first.at),
        last_step: transitions.last().map(|t| t.at),
        heartbeat: Duration::from_secs(300),
        detectors: Vec::new(),
        detector_changes: Vec::new(),
        pods: Vec::new(),
        protected: Vec::new(),
        finishing: Vec::new(),
        // A replay cannot know what a reboot would have done: the machine comes back with a new
        // bootID and the recorded history decides whether the problem cleared (and so whether the
        // reboot is proven by its deadline).
        reboots: vec![
            super::reboots::Machine {
                reboot: super::reboots::Outcome::Survives,
                ..Default::default()
            };
            fleet_len
        ],
        reboot_takes: Duration::from_secs(180),
    })
}

/// `node` as the replay starts it: its recorded conditions dropped for the opposite of their first
/// transition (Ready=True when the history says nothing of it), since a day before.
fn starting(mut node: Node, first_of: &BTreeMap<(&str, &str), Status>, since: Timestamp) -> Node {
    use k8s_openapi::api::core::v1::NodeCondition;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
    let name = node.metadata.name.clone().unwrap_or_default();
    let mut conditions: BTreeMap<String, Status> =
        BTreeMap::from([("Ready".to_string(), Status::True)]);
    for ((n, t), s) in first_of {
        if *n == name {
            let opposite = match s {
                Status::True => Status::False,
                _ => Status::True,
            };
            conditions.insert(t.to_string(), opposite);
        }
    }
    let status = node.status.get_or_insert_with(Default::default);
    status.conditions = Some(
        conditions
            .into_iter()
            .map(|(t, s)| NodeCondition {
                type_: t,
                status: s.as_str().into(),
                last_transition_time: Some(Time(since)),
                ..Default::default()
            })
            .collect(),
    );
    node.spec.get_or_insert_with(Default::default).unschedulable = Some(false);
    node.metadata.annotations = None;
    node
}

/// The history a plan's changes make (what `--history-file` would have recorded of them).
pub fn of_plan(plan: &Plan) -> Vec<Transition> {
    plan.changes
        .iter()
        .map(|c| Transition {
            at: c.at,
            node: plan.nodes[c.node].metadata.name.clone().unwrap_or_default(),
            type_: c.type_.clone(),
            status: c.status.as_str().to_string(),
            reason: None,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const NPD: &str = r#"{"kind": "List", "items": [
      {"kind": "Event", "involvedObject": {"kind": "Node", "name": "a"}, "reason": "DockerHung",
       "message": "Node condition KernelDeadlock is now: True, reason: DockerHung, message: \"task docker:7 blocked, for more than 120 seconds.\"",
       "firstTimestamp": "2026-11-18T02:00:00Z", "lastTimestamp": "2026-11-18T02:10:00Z"},
      {"kind": "Event", "involvedObject": {"kind": "Pod", "name": "web"}, "message": "Node condition X is now: True", "lastTimestamp": "2026-11-18T02:11:00Z"},
      {"kind": "Event", "involvedObject": {"kind": "Node", "name": "a"}, "message": "Cordoned node", "lastTimestamp": "2026-11-18T02:12:00Z"}]}
    {"kind": "Event", "involvedObject": {"kind": "Node", "name": "b"}, "message": "Node condition Ready is now: Unknown", "eventTime": "2026-11-18T01:00:00.000000Z"}
    {"at": "2026-11-18T03:00:00Z", "node": "a", "type": "KernelDeadlock", "status": "False", "reason": "KernelHasNoDeadlock"}
    "#;

    #[test]
    fn events_dumps_single_events_and_history_lines_are_read_in_time_order() {
        let h = read("h.json", NPD).unwrap();
        assert_eq!(
            h.skipped, 2,
            "a Pod's Event and a Node Event that is no condition change"
        );
        let got: Vec<(String, &str, &str, &str, Option<&str>)> = h
            .transitions
            .iter()
            .map(|t| {
                (
                    t.at.to_string(),
                    t.node.as_str(),
                    t.type_.as_str(),
                    t.status.as_str(),
                    t.reason.as_deref(),
                )
            })
            .collect();
        assert_eq!(
            got,
            vec![
                ("2026-11-18T01:00:00Z".into(), "b", "Ready", "Unknown", None),
                (
                    "2026-11-18T02:10:00Z".into(),
                    "a",
                    "KernelDeadlock",
                    "True",
                    Some("DockerHung")
                ),
                (
                    "2026-11-18T03:00:00Z".into(),
                    "a",
                    "KernelDeadlock",
                    "False",
                    Some("KernelHasNoDeadlock")
                ),
            ]
        );
        let e = read("h.json", "{\"items\": []}\n[1,")
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("h.json: not JSON at line 2"), "{e}");
    }

    #[test]
    fn the_replay_starts_each_recorded_condition_opposite_to_its_first_transition() {
        let h = read("h.json", NPD).unwrap();
        let mut labelled = Node::default();
        labelled.metadata.name = Some("a".into());
        labelled.metadata.labels = Some([("zone".to_string(), "z1".to_string())].into());
        let cfg: Config = Config::default();
        let p = plan(
            "h.json",
            &h.transitions,
            &[labelled],
            cfg,
            Duration::from_secs(600),
        )
        .unwrap();
        assert_eq!(
            p.start.to_string(),
            "2026-11-18T00:59:00Z",
            "a minute before the first"
        );
        assert_eq!(p.end.to_string(), "2026-11-18T03:10:00Z");
        let status = |n: usize, t: &str| {
            let c = p.nodes[n]
                .status
                .as_ref()
                .unwrap()
                .conditions
                .as_ref()
                .unwrap();
            c.iter().find(|c| c.type_ == t).map(|c| c.status.clone())
        };
        assert_eq!(
            p.nodes[0].metadata.labels.as_ref().unwrap()["zone"],
            "z1",
            "labels from the node list"
        );
        assert_eq!(status(0, "KernelDeadlock").as_deref(), Some("False"));
        assert_eq!(
            p.nodes[1].metadata.name.as_deref(),
            Some("b"),
            "named only by the history"
        );
        assert_eq!(status(1, "Ready").as_deref(), Some("True"));
        assert_eq!(p.changes.len(), 3);
        let e = plan("h.json", &[], &[], Config::default(), Duration::ZERO)
            .err()
            .unwrap();
        assert!(e.to_string().contains("no condition transitions"), "{e}");
    }
}
