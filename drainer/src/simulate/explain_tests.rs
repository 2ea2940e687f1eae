//! `explain` agrees with the controller: the controller runs over a fleet in memory on paused time
//! while `explain` is asked about every node every few simulated seconds, from a snapshot of the
//! same cluster (as `kubectl nodemedic explain` reads it); every action the controller takes must
//! have been announced by the explanation made just before it (the same action, due then or
//! earlier). Shell (it drives the controller); the check itself is pure.

use std::collections::HashMap;
use std::time::Duration;

use k8s_openapi::jiff::Timestamp;
use nodemedic_common::clock::Clock;
use nodemedic_common::health::Health;
use tokio::sync::{mpsc, watch};

use super::scenario::{Plan, parse, settings};
use crate::act::Executor;
use crate::act::memory::MemoryCluster;
use crate::controller::{Controller, Tap};
use crate::decide::Action;
use crate::decide::gates::snapshot::Recorded;
use crate::model::cluster::Gated;
use crate::model::node::NodeView;
use crate::model::pod::PodInfo;
use crate::observe::Observed;
use crate::plan::chain::{Next, Snapshot, explain};
use crate::record::Recorder;

const SCENARIO: &str = r#"
args: ["KernelDeadlock=True,2m", "Ready=Unknown,1m", "--drain-buffer=3m", "--max-cordoned=2",
  "--max-unhealthy=100%", "--breaker-new=100%", "--flap-threshold=0"]
nodes: [{count: 8, name: "n{i}", labels: {zone: "z{i%2}"}, conditions: ["KernelDeadlock=False"]}]
duration: 40m
drainTakes: 30s
steps:
  - {at: 1m, nodes: {names: [n1, n2, n3]}, set: KernelDeadlock=True}
  - {at: 2m, nodes: {names: [n5]}, set: Ready=Unknown}
  - {at: 4m, nodes: {names: [n5]}, set: Ready=True}
  - {at: 15m, nodes: {names: [n1, n2]}, set: KernelDeadlock=False}
  - {at: 25m, nodes: {names: [n3]}, set: KernelDeadlock=False}
"#;

/// How often the explanations are taken.
const EVERY: Duration = Duration::from_secs(5);

#[test]
fn every_action_the_controller_takes_was_announced_by_explain_just_before() {
    let start: Timestamp = "2026-11-24T10:00:00Z".parse().unwrap();
    let scenario = parse("agree.yaml", SCENARIO).unwrap();
    let mut plan = Plan::of("agree.yaml", &scenario, start).unwrap();
    let mut cfg = settings("agree.yaml", &scenario.args).unwrap();
    cfg.owner = crate::config::DEFAULT_OWNER.into();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .unwrap();
    let (announced, taps) = runtime.block_on(drive(&mut plan, &cfg));
    let mut checked = 0;
    for tap in taps {
        let Tap::Round { at, done, .. } = tap else {
            continue;
        };
        for d in done.into_iter().filter(|d| d.ok) {
            let action = Action::of(&d.why, &d.effect);
            if !action.writes() {
                continue;
            }
            let before = announced
                .get(d.node.as_str())
                .and_then(|list| list.iter().rev().find(|(t, _)| *t < at))
                .unwrap_or_else(|| panic!("{} {action:?} at {at}: never explained before", d.node));
            let (t, next) = before;
            assert_eq!(
                next.action,
                Some(action),
                "{}: the controller did {action:?} at {at}; explain at {t} said {next:?}",
                d.node
            );
            assert!(
                next.at.is_none_or(|due| due <= at),
                "{}: {action:?} at {at}, announced for {:?}",
                d.node,
                next.at
            );
            checked += 1;
        }
    }
    // Three cordons (the budget of 2 makes n3 wait), three drains, three uncordons.
    assert!(checked >= 9, "only {checked} actions checked");
}

type Announced = HashMap<String, Vec<(Timestamp, Next)>>;

/// Run the controller over `plan`, explaining every node every [`EVERY`]; the explanations'
/// `next` by node and time, and the controller's taps.
async fn drive(plan: &mut Plan, cfg: &crate::config::Config) -> (Announced, Vec<Tap>) {
    let clock = Clock::tokio_at(plan.start);
    let began = tokio::time::Instant::now();
    let observed = Observed::default();
    let cluster = MemoryCluster::new(observed.clone());
    for node in &plan.nodes {
        cluster.put_pod(super::pod_of(node));
        cluster.put_node(node.clone());
    }
    cluster.set_termination(plan.drain_takes);
    cluster.sync();
    let (_leader, leading) = watch::channel(true);
    let gated = Gated::new(cluster.clone(), leading.clone());
    let metrics = crate::metrics::Metrics::register(&mut Default::default());
    let record = Recorder::new(gated.clone(), metrics, observed.clone(), clock);
    let run_cfg = std::mem::take(&mut plan.cfg);
    let exec = Executor::new(gated, record, false, clock);
    let (tap, mut taps) = mpsc::unbounded_channel();
    let controller = Controller::new(
        run_cfg,
        observed.clone(),
        exec,
        Health::default(),
        leading,
        clock,
    );
    let (stop, stopped) = watch::channel(false);
    let task = tokio::spawn(controller.with_tap(tap).run(
        observed.changed.clone(),
        plan.tick,
        stopped,
    ));
    let mut announced = Announced::new();
    let mut changes = plan.changes.iter().peekable();
    let mut t = plan.start;
    while t <= plan.end {
        tokio::time::sleep_until(began + t.duration_since(plan.start).unsigned_abs()).await;
        while let Some(c) = changes.next_if(|c| c.at <= t) {
            let name = plan.nodes[c.node].metadata.name.clone().unwrap_or_default();
            cluster.set_condition(&name, &c.type_, c.status, c.at);
        }
        let (nodes, pods) = cluster.objects();
        let views: Vec<NodeView> = nodes.iter().map(NodeView::of).collect();
        let pods: Vec<PodInfo> = pods.iter().map(|p| PodInfo::from_pod(p, None)).collect();
        let recorded = Recorded::default();
        for node in &nodes {
            let s = Snapshot {
                views: &views,
                node,
                pods: &pods,
                pdbs: &[],
                events: &[],
                recorded: &recorded,
            };
            if let Some(e) = explain(&s, cfg, t) {
                announced
                    .entry(e.node.clone())
                    .or_default()
                    .push((t, e.next));
            }
        }
        t = nodemedic_common::time::add(t, EVERY);
    }
    let _ = stop.send(true);
    let _ = task.await;
    let mut out = Vec::new();
    while let Ok(tap) = taps.try_recv() {
        out.push(tap);
    }
    (announced, out)
}
