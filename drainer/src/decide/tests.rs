use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, NodeCondition, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use nodemedic_common::keys;
use serde_json::json;

use super::*;
use crate::config::{Budget, Config, ProtectedPods};
use crate::model::pod::PodInfo;
use crate::model::record::{Phase, Record};

pub(super) fn t(s: i64) -> Timestamp {
    Timestamp::from_second(1_800_000_000 + s).unwrap()
}

pub(super) const NOW: i64 = 10_000;

pub(super) fn cfg() -> Config {
    Config {
        safety: crate::config::safety::Safety::off(),
        conditions: vec![
            "KernelDeadlock=True,10m".parse().unwrap(),
            "Ready=False,5m".parse().unwrap(),
        ],
        max_cordoned: Budget::Count(10),
        ..Default::default()
    }
}

pub(super) struct N(pub(super) Node);

pub(super) fn node(name: &str) -> N {
    let mut n = Node::default();
    n.metadata.name = Some(name.into());
    N(n)
}

impl N {
    pub(super) fn cond(mut self, type_: &str, status: &str, since: i64) -> N {
        let st = self.0.status.get_or_insert_with(Default::default);
        st.conditions
            .get_or_insert_with(Vec::new)
            .push(NodeCondition {
                type_: type_.into(),
                status: status.into(),
                last_transition_time: Some(Time(t(since))),
                ..Default::default()
            });
        self
    }
    pub(super) fn label(mut self, k: &str, v: &str) -> N {
        self.0
            .metadata
            .labels
            .get_or_insert_with(Default::default)
            .insert(k.into(), v.into());
        self
    }
    pub(super) fn unschedulable(mut self) -> N {
        self.0
            .spec
            .get_or_insert_with(Default::default)
            .unschedulable = Some(true);
        self
    }
    /// The drainer's record on the node, bound to it and sealed as the drainer seals them.
    pub(super) fn record(mut self, mut r: Record) -> N {
        let view = crate::model::node::NodeView::of(&self.0);
        r.node = view.name.to_string();
        r.uid = view.uid.to_string();
        let sealed = r.to_annotation(&Config::default().records);
        self.0
            .metadata
            .annotations
            .get_or_insert_with(Default::default)
            .insert(keys::DRAIN_RECORD_ANNOTATION.into(), sealed);
        self
    }
    /// Cordoned by us in `phase`, for the KernelDeadlock episode that started at `since`.
    pub(super) fn ours(self, phase: Phase, since: i64, cordoned: i64) -> N {
        self.owned_by(crate::config::DEFAULT_OWNER, phase, since, cordoned)
    }
    /// Cordoned by the drainer named `owner`.
    pub(super) fn owned_by(self, owner: &str, phase: Phase, since: i64, cordoned: i64) -> N {
        self.unschedulable().record(Record {
            owner: owner.into(),
            episode: format!("KernelDeadlock=True@{}", t(since).as_second()),
            reason: "KernelDeadlock=True".into(),
            phase,
            cordoned_at: t(cordoned),
            drain_at: t(cordoned + 600),
            drain_started: None,
            finished_at: None,
            attempts: 0,
            retry_at: None,
            ..Default::default()
        })
    }
}

pub(super) fn pod(name: &str, node: &str, extra: serde_json::Value) -> Pod {
    let mut v = json!({
        "metadata": {"name": name, "namespace": "default",
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs", "uid": "u", "controller": true}]},
        "spec": {"nodeName": node, "containers": [{"name": "c"}]},
        "status": {"phase": "Running"}
    });
    merge(&mut v, &extra);
    serde_json::from_value(v).unwrap()
}

fn merge(a: &mut serde_json::Value, b: &serde_json::Value) {
    match (a, b) {
        (serde_json::Value::Object(a), serde_json::Value::Object(b)) => {
            for (k, v) in b {
                merge(a.entry(k.clone()).or_insert(serde_json::Value::Null), v);
            }
        }
        (a, b) => *a = b.clone(),
    }
}

pub(super) fn run(nodes: Vec<N>, pods: &[Pod], cfg: &Config) -> Vec<NodeDecision> {
    let nodes: Vec<Node> = nodes.into_iter().map(|n| n.0).collect();
    let pods: Vec<PodInfo> = pods.iter().map(|p| PodInfo::from_pod(p, None)).collect();
    decide_nodes(&nodes, &pods, cfg, t(NOW))
}

fn decide_pod(p: &Pod, cfg: &Config) -> PodPlan {
    evictions::decide(
        &PodInfo::from_pod(p, Some(&evictions::kept_annotations(cfg))),
        cfg,
    )
}

pub(super) fn one(n: N, cfg: &Config) -> NodeDecision {
    run(vec![n], &[], cfg).remove(0)
}

#[test]
fn healthy_node_needs_nothing() {
    let p = one(
        node("n")
            .cond("Ready", "True", 0)
            .cond("KernelDeadlock", "False", 0),
        &cfg(),
    );
    assert_eq!(
        (p.action(), &p.why, &p.effect),
        (Action::None, &Why::Healthy, &Effect::Nothing)
    );
    assert_eq!(p.reason(), "healthy");
}

#[test]
fn condition_held_long_enough_is_cordoned_with_a_record() {
    let p = one(node("n").cond("KernelDeadlock", "True", NOW - 700), &cfg());
    assert_eq!(p.action(), Action::Cordon);
    let Effect::Cordon(r) = &p.effect else {
        panic!("{p:?}")
    };
    assert_eq!(r.phase, Phase::Cordoned);
    assert_eq!(r.drain_at, t(NOW + 600), "drain after the buffer");
    assert_eq!(
        r.episode,
        format!("KernelDeadlock=True@{}", t(NOW - 700).as_second())
    );
    assert_eq!(
        p.why,
        Why::Cordon {
            problem: "KernelDeadlock=True for 11m 40s".into(),
            drain_at: Some(t(NOW + 600))
        }
    );
    assert_eq!(
        p.reason(),
        "KernelDeadlock=True for 11m 40s; drain at 2027-01-15T10:56:40Z",
        "the human text is the decision's Display"
    );
}

#[test]
fn condition_not_held_long_enough_waits_and_a_flap_does_nothing() {
    let p = one(node("n").cond("KernelDeadlock", "True", NOW - 60), &cfg());
    assert_eq!(p.action(), Action::Wait);
    assert_eq!(
        p.why,
        Why::NotHeldLongEnough {
            pending: vec!["KernelDeadlock=True for 1m of 10m".into()]
        }
    );
    assert_eq!(p.effect, Effect::Nothing);
}

#[test]
fn kosmos_leaf_nodes_are_never_acted_on_for_ready() {
    let kosmos = || node("kosmos-leaf").label("kosmos.io/node", "true");
    let p = one(kosmos().cond("Ready", "False", 0), &cfg());
    assert_eq!(p.action(), Action::Skip);
    assert_eq!(
        p.why,
        Why::KosmosExempt {
            conditions: vec!["Ready=False".into()]
        }
    );
    // other conditions: off by default, on with the setting; Ready never
    let p = one(kosmos().cond("KernelDeadlock", "True", 0), &cfg());
    assert_eq!(p.action(), Action::Skip);
    let mut c = cfg();
    c.kosmos_other_conditions = true;
    assert_eq!(
        one(kosmos().cond("KernelDeadlock", "True", 0), &c).action(),
        Action::Cordon
    );
    assert_eq!(
        one(kosmos().cond("Ready", "False", 0), &c).action(),
        Action::Skip
    );
    assert_eq!(
        one(node("ordinary").cond("Ready", "False", 0), &cfg()).action(),
        Action::Cordon
    );
}

#[test]
fn opt_out_label_and_selector() {
    let p = one(
        node("n")
            .label("nodemedic.io/exclude", "true")
            .cond("KernelDeadlock", "True", 0),
        &cfg(),
    );
    assert_eq!(p.action(), Action::Skip);
    let mut c = cfg();
    c.selector =
        crate::config::select::Selector::cel("metadata.labels['draino'] in ['node']").unwrap();
    assert_eq!(
        one(node("n").cond("KernelDeadlock", "True", 0), &c).action(),
        Action::Skip
    );
    assert_eq!(
        one(
            node("n")
                .label("draino", "node")
                .cond("KernelDeadlock", "True", 0),
            &c
        )
        .action(),
        Action::Cordon
    );
}

#[test]
fn a_node_cordoned_by_someone_else_is_not_touched() {
    let p = one(
        node("n").unschedulable().cond("KernelDeadlock", "True", 0),
        &cfg(),
    );
    assert_eq!(p.action(), Action::None);
    assert!(
        matches!(p.why, Why::CordonedBySomeoneElse { .. }),
        "{:?}",
        p.why
    );
    // and it is not uncordoned when healthy either
    let p = one(node("n").unschedulable(), &cfg());
    assert_eq!(p.action(), Action::None);
}

#[test]
fn drain_waits_for_the_buffer_then_drains_with_pod_plans() {
    let cordoned = NOW - 300;
    let p = one(
        node("n")
            .cond("KernelDeadlock", "True", 0)
            .ours(Phase::Cordoned, 0, cordoned),
        &cfg(),
    );
    assert_eq!(p.action(), Action::Wait);
    assert!(
        matches!(p.why, Why::DrainScheduled { at, .. } if at == t(cordoned + 600)),
        "{:?}",
        p.why
    );
    let nodes =
        vec![
            node("n")
                .cond("KernelDeadlock", "True", 0)
                .ours(Phase::Cordoned, 0, NOW - 600),
        ];
    let pods = vec![
        pod("web", "n", json!({})),
        pod("other-node", "m", json!({})),
    ];
    let p = run(nodes, &pods, &cfg()).remove(0);
    assert_eq!(p.action(), Action::Drain);
    let Effect::Drain(job) = &p.effect else {
        panic!("{:?}", p.effect)
    };
    assert_eq!(job.record.phase, Phase::Cordoned, "the record as read");
    let evict: Vec<&str> = job.evict.iter().map(|p| &*p.pod.name).collect();
    assert_eq!(evict, ["web"], "the drain carries the pods it evicts");
    assert_eq!(p.pods.len(), 1);
    assert_eq!(
        (p.pods[0].name.as_str(), p.pods[0].action),
        ("web", PodAction::Evict)
    );
}

#[test]
fn recovery_during_the_buffer_cancels_and_uncordons() {
    let p = one(
        node("n")
            .cond("KernelDeadlock", "False", NOW - 700)
            .ours(Phase::Cordoned, 0, NOW - 100),
        &cfg(),
    );
    assert_eq!(p.action(), Action::Uncordon);
    assert!(
        matches!(&p.effect, Effect::Uncordon(r) if r.phase == Phase::Cordoned),
        "{:?}",
        p.effect
    );
    assert_eq!(
        p.why,
        Why::Uncordon {
            during_buffer: true
        }
    );
    // recovered, but not for the min duration yet
    let p = one(
        node("n")
            .cond("KernelDeadlock", "False", NOW - 60)
            .ours(Phase::Drained, 0, NOW - 5000),
        &cfg(),
    );
    assert_eq!(p.action(), Action::Wait);
    assert_eq!(
        p.why,
        Why::Recovering {
            left: Duration::from_secs(540)
        }
    );
    let p = one(node("n").ours(Phase::Drained, 0, NOW - 5000), &cfg());
    assert_eq!(
        p.action(),
        Action::Uncordon,
        "an absent condition counts as cleared"
    );
}

#[test]
fn manual_uncordon_releases_the_node_for_the_episode() {
    // we cordoned it; a person uncordoned it (spec.unschedulable false)
    let mut n = node("n")
        .cond("KernelDeadlock", "True", 0)
        .ours(Phase::Cordoned, 0, NOW - 100);
    n.0.spec.as_mut().unwrap().unschedulable = Some(false);
    let p = one(n, &cfg());
    let Effect::Release(r) = &p.effect else {
        panic!("{p:?}")
    };
    assert_eq!(r.phase, Phase::Released);
    // released: same episode -> nothing, even though the condition still holds
    let released = node("n")
        .cond("KernelDeadlock", "True", 0)
        .record(r.clone());
    let p = one(released, &cfg());
    assert_eq!((p.action(), &p.effect), (Action::None, &Effect::Nothing));
    // a new episode (new transition time) is cordoned again
    let again = node("n")
        .cond("KernelDeadlock", "True", NOW - 700)
        .record(r.clone());
    assert_eq!(one(again, &cfg()).action(), Action::Cordon);
    // cleared: the record is forgotten
    let cleared = node("n")
        .cond("KernelDeadlock", "False", NOW - 700)
        .record(r.clone());
    assert_eq!(one(cleared, &cfg()).effect, Effect::Forget);
}

#[test]
fn budget_of_one_drain_and_spacing_of_drain_starts() {
    let bad = |name: &str, since: i64| {
        node(name)
            .cond("KernelDeadlock", "True", since)
            .ours(Phase::Cordoned, since, NOW - 1000)
    };
    let plans = run(vec![bad("b", 5), bad("a", 1), bad("c", 9)], &[], &cfg());
    let actions: Vec<(&str, Action)> = plans
        .iter()
        .map(|p| (p.node.as_str(), p.action()))
        .collect();
    assert_eq!(
        actions,
        vec![
            ("b", Action::Wait),
            ("a", Action::Drain),
            ("c", Action::Wait)
        ],
        "oldest problem first"
    );
    assert!(
        matches!(plans[0].why, Why::DrainBudget { used: 1, limit: 1 }),
        "{:?}",
        plans[0].why
    );
    // a drain finished 2 minutes ago: the next start waits until the buffer has passed since it started
    let mut done = node("d")
        .cond("KernelDeadlock", "True", 0)
        .ours(Phase::Drained, 0, NOW - 1000)
        .0;
    let mut r = Record::of(
        &crate::model::node::NodeView::of(&done),
        &cfg().records,
        &cfg().owner,
    )
    .unwrap();
    r.drain_started = Some(t(NOW - 120));
    done.metadata.annotations.as_mut().unwrap().insert(
        keys::DRAIN_RECORD_ANNOTATION.into(),
        r.to_annotation(&cfg().records),
    );
    let plans = run(vec![N(done), bad("e", 1)], &[], &cfg());
    let e = plans.iter().find(|p| p.node == "e").unwrap();
    assert_eq!(e.action(), Action::Wait);
    assert!(matches!(e.why, Why::DrainSpacing { .. }), "{:?}", e.why);
}

#[test]
fn cordon_budget_counts_nodes_already_cordoned_by_us() {
    let mut c = cfg();
    c.max_cordoned = Budget::Count(2);
    let plans = run(
        vec![
            node("held")
                .cond("KernelDeadlock", "True", 0)
                .ours(Phase::Cordoned, 0, NOW - 10),
            node("x").cond("KernelDeadlock", "True", 1),
            node("y").cond("KernelDeadlock", "True", 2),
            node("ok"),
        ],
        &[],
        &c,
    );
    let get = |n: &str| plans.iter().find(|p| p.node == n).unwrap();
    assert_eq!(get("x").action(), Action::Cordon);
    assert_eq!(get("y").action(), Action::Wait);
    assert!(
        matches!(
            get("y").why,
            Why::CordonBudget {
                used: 2,
                limit: 2,
                ..
            }
        ),
        "{:?}",
        get("y").why
    );
}

#[test]
fn failed_drains_are_retried_after_their_backoff() {
    let mut n = node("n")
        .cond("KernelDeadlock", "True", 0)
        .ours(Phase::Failed, 0, NOW - 5000)
        .0;
    let mut r = Record::of(
        &crate::model::node::NodeView::of(&n),
        &cfg().records,
        &cfg().owner,
    )
    .unwrap();
    r.retry_at = Some(t(NOW + 60));
    n.metadata.annotations.as_mut().unwrap().insert(
        keys::DRAIN_RECORD_ANNOTATION.into(),
        r.to_annotation(&cfg().records),
    );
    let p = one(N(n.clone()), &cfg());
    assert_eq!(p.action(), Action::Wait);
    assert!(matches!(p.why, Why::RetryScheduled { .. }), "{:?}", p.why);
    r.retry_at = Some(t(NOW - 1));
    n.metadata.annotations.as_mut().unwrap().insert(
        keys::DRAIN_RECORD_ANNOTATION.into(),
        r.to_annotation(&cfg().records),
    );
    assert_eq!(one(N(n), &cfg()).action(), Action::Drain);
}

#[test]
fn skip_drain_cordons_only() {
    let mut c = cfg();
    c.skip_drain = true;
    let p = one(
        node("n")
            .cond("KernelDeadlock", "True", 0)
            .ours(Phase::Cordoned, 0, NOW - 5000),
        &c,
    );
    assert_eq!(p.action(), Action::None);
    assert!(matches!(p.why, Why::SkipDrain { .. }), "{:?}", p.why);
}

#[test]
fn each_kind_of_pod_is_evicted_skipped_or_blocks_as_the_rules_say() {
    let c = cfg();
    let cases: Vec<(Pod, PodAction, &str)> = vec![
        (pod("rs", "n", json!({})), PodAction::Evict, "evictable"),
        (
            pod("done", "n", json!({"status": {"phase": "Succeeded"}})),
            PodAction::Skip,
            "finished",
        ),
        (
            pod(
                "ds",
                "n",
                json!({"metadata": {"ownerReferences": [{"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "d", "uid": "u", "controller": true}]}}),
            ),
            PodAction::Skip,
            "DaemonSet pod",
        ),
        (
            pod(
                "mirror",
                "n",
                json!({"metadata": {"annotations": {"kubernetes.io/config.mirror": "x"}}}),
            ),
            PodAction::Skip,
            "mirror (static) pod",
        ),
        (
            pod(
                "ne",
                "n",
                json!({"metadata": {"namespace": "kube-system", "annotations": {"scheduler.alpha.kubernetes.io/not-evicted-pod": ""}}}),
            ),
            PodAction::Skip,
            "not-evicted pod",
        ),
        (
            pod("crit", "n", json!({"spec": {"priority": 2000001000}})),
            PodAction::Skip,
            "critical pod (priority",
        ),
        (
            pod(
                "crit2",
                "n",
                json!({"metadata": {"namespace": "kube-system", "annotations": {"scheduler.alpha.kubernetes.io/critical-pod": ""}}}),
            ),
            PodAction::Skip,
            "critical pod (",
        ),
        (
            pod(
                "safe",
                "n",
                json!({"metadata": {"annotations": {"cluster-autoscaler.kubernetes.io/safe-to-evict": "false"}}}),
            ),
            PodAction::Skip,
            "protected by cluster-autoscaler",
        ),
        (
            pod(
                "karpenter",
                "n",
                json!({"metadata": {"annotations": {"karpenter.sh/do-not-disrupt": "true"}}}),
            ),
            PodAction::Skip,
            "protected by karpenter.sh/do-not-disrupt=true",
        ),
        (
            pod(
                "ed",
                "n",
                json!({"spec": {"volumes": [{"name": "v", "emptyDir": {}}]}}),
            ),
            PodAction::Skip,
            "uses emptyDir",
        ),
        (
            pod(
                "ss",
                "n",
                json!({"metadata": {"ownerReferences": [{"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "s", "uid": "u", "controller": true}]}}),
            ),
            PodAction::Skip,
            "StatefulSet pod",
        ),
    ];
    for (p, action, reason) in cases {
        let d = decide_pod(&p, &c);
        assert_eq!(d.action, action, "{}: {}", d.name, d.reason);
        assert!(d.reason.starts_with(reason), "{}: {}", d.name, d.reason);
    }
    let mut bare = pod("bare", "n", json!({}));
    bare.metadata.owner_references = None;
    assert_eq!(decide_pod(&bare, &c).action, PodAction::Skip);
    // in kube-system the not-evicted annotation needs an empty value; elsewhere it means nothing
    let ne_elsewhere = pod(
        "ne2",
        "n",
        json!({"metadata": {"annotations": {"scheduler.alpha.kubernetes.io/not-evicted-pod": ""}}}),
    );
    assert_eq!(decide_pod(&ne_elsewhere, &c).action, PodAction::Evict);
    // the legacy critical-pod annotation protects only in kube-system, as the kubelet read it: a
    // pod elsewhere cannot mark itself critical and block drains
    let crit_elsewhere = pod(
        "crit3",
        "n",
        json!({"metadata": {"annotations": {"scheduler.alpha.kubernetes.io/critical-pod": ""}}}),
    );
    assert_eq!(decide_pod(&crit_elsewhere, &c).action, PodAction::Evict);
    // options allow what they name; critical and not-evicted never
    let mut open = cfg();
    open.evict_emptydir_pods = true;
    open.evict_unreplicated_pods = true;
    open.evict_statefulset_pods = true;
    open.protected_annotations = vec![("team/keep".into(), Some("yes".into()))];
    assert_eq!(decide_pod(&bare, &open).action, PodAction::Evict);
    let keep = pod(
        "keep",
        "n",
        json!({"metadata": {"annotations": {"team/keep": "yes"}}}),
    );
    assert_eq!(decide_pod(&keep, &open).action, PodAction::Skip);
    let crit = pod("crit", "n", json!({"spec": {"priority": 2000000000}}));
    assert_eq!(decide_pod(&crit, &open).action, PodAction::Skip);
    // --evict-daemonset-pods (draino's meaning): DaemonSet pods are evicted and the plan says why;
    // critical and not-evicted DaemonSet pods (the detector's) still never.
    let owner = json!([{"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "d", "uid": "u", "controller": true}]);
    let ds = pod("ds", "n", json!({"metadata": {"ownerReferences": owner}}));
    assert_eq!(
        decide_pod(&ds, &open).action,
        PodAction::Skip,
        "off unless asked"
    );
    open.evict_daemonset_pods = true;
    let d = decide_pod(&ds, &open);
    assert_eq!(d.action, PodAction::Evict);
    assert!(d.reason.contains("--evict-daemonset-pods"), "{}", d.reason);
    let detector = pod(
        "detector",
        "n",
        json!({"metadata": {"ownerReferences": owner}, "spec": {"priority": 2000001000}}),
    );
    assert_eq!(decide_pod(&detector, &open).action, PodAction::Skip);
}

#[test]
fn protected_pods_block_the_drain_when_configured() {
    let mut c = cfg();
    c.protected_pods = ProtectedPods::Block;
    let nodes =
        vec![
            node("n")
                .cond("KernelDeadlock", "True", 0)
                .ours(Phase::Cordoned, 0, NOW - 1000),
        ];
    let pods = vec![
        pod("web", "n", json!({})),
        pod("crit", "n", json!({"spec": {"priority": 2000001000}})),
    ];
    let p = run(nodes, &pods, &c).remove(0);
    assert_eq!(p.action(), Action::Wait);
    assert_eq!(
        p.why,
        Why::BlockedByPods {
            pods: vec!["default/crit".into()]
        }
    );
    assert_eq!(p.reason(), "drain blocked by protected pods: default/crit");
    assert_eq!(p.effect, Effect::Nothing);
    let _ = Duration::ZERO;
}

#[test]
fn records_of_another_drainer_are_neither_touched_nor_counted() {
    let mut c = cfg();
    c.max_cordoned = Budget::Count(1);
    c.owner = "drainer-a".into();
    let plans = run(
        vec![
            // cordoned and draining by drainer-b: not ours even though we select it
            node("theirs").cond("KernelDeadlock", "True", 0).owned_by(
                "drainer-b",
                Phase::Cordoned,
                0,
                NOW - 700,
            ),
            node("mine").cond("KernelDeadlock", "True", 1),
        ],
        &[],
        &c,
    );
    let get = |n: &str| plans.iter().find(|p| p.node == n).unwrap();
    assert_eq!(get("theirs").action(), Action::Skip);
    assert_eq!(get("theirs").why, Why::OwnedByOther("drainer-b".into()));
    assert_eq!(get("theirs").effect, Effect::Nothing);
    // The same record on a node we do not select: not ours to speak of at all (the shell logs no
    // NotSelected decision).
    let mut only_a = cfg();
    only_a.owner = "drainer-a".into();
    only_a.selector = crate::config::select::Selector::labels("pool=a").unwrap();
    let plans = run(
        vec![node("theirs").cond("KernelDeadlock", "True", 0).owned_by(
            "drainer-b",
            Phase::Cordoned,
            0,
            NOW - 700,
        )],
        &[],
        &only_a,
    );
    assert_eq!(plans[0].why, Why::NotSelected);
    assert_eq!(
        get("mine").action(),
        Action::Cordon,
        "the other drainer's cordon does not use our budget of one"
    );
    let Effect::Cordon(r) = &get("mine").effect else {
        panic!("{:?}", get("mine").effect)
    };
    assert_eq!(r.owner, "drainer-a", "the record names its drainer");
}

#[test]
fn an_ownerless_record_belongs_to_whichever_drainer_selects_the_node() {
    let mut c = cfg();
    c.selector = crate::config::select::Selector::labels("pool=a").unwrap();
    let legacy = |name: &str| {
        node(name)
            .cond("KernelDeadlock", "True", 0)
            .owned_by("", Phase::Cordoned, 0, NOW - 10)
    };
    let mut selected = legacy("sel");
    selected
        .0
        .metadata
        .labels
        .get_or_insert_with(Default::default)
        .insert("pool".into(), "a".into());
    let plans = run(vec![selected, legacy("other")], &[], &c);
    let get = |n: &str| plans.iter().find(|p| p.node == n).unwrap();
    assert!(matches!(get("sel").why, Why::DrainScheduled { .. }));
    assert_eq!(get("other").why, Why::OwnedByOther(String::new()));
}

#[test]
fn a_waiting_nodes_decision_is_stable_while_its_reason_text_ages() {
    // The shell logs a decision and notes a wait when `why` changes; the reason carries durations.
    let mut c = cfg();
    c.max_cordoned = Budget::Count(1);
    let nodes = || {
        vec![
            node("held")
                .cond("KernelDeadlock", "True", 0)
                .ours(Phase::Cordoned, 0, NOW - 10),
            node("waiting").cond("KernelDeadlock", "True", 1),
        ]
    };
    let at = |now: i64| {
        let ns: Vec<Node> = nodes().into_iter().map(|n| n.0).collect();
        decide_nodes(&ns, &[] as &[PodInfo], &c, t(now))
            .into_iter()
            .find(|p| p.node == "waiting")
            .unwrap()
    };
    let (a, b) = (at(NOW), at(NOW + 61));
    assert_ne!(a.reason(), b.reason(), "the text ages");
    assert!(matches!(
        a.why,
        Why::CordonBudget {
            used: 1,
            limit: 1,
            ..
        }
    ));
    assert_eq!(a.why.kind(), b.why.kind());
}

#[test]
fn times_near_the_end_of_time_in_api_objects_do_not_panic() {
    // The API server accepts dates up to 9999-12-31: a record started then must not abort the plan.
    let late: Timestamp = "9999-12-30T21:00:00Z".parse().unwrap();
    let mut r = Record::parse(&crate::model::node::NodeView::of(
        &node("late")
            .cond("KernelDeadlock", "True", 0)
            .ours(Phase::Draining, 0, NOW - 700)
            .0,
    ))
    .unwrap()
    .unwrap();
    r.drain_started = Some(late);
    let plans = run(
        vec![
            node("late").cond("KernelDeadlock", "True", 0).record(r),
            node("next")
                .cond("KernelDeadlock", "True", 1)
                .ours(Phase::Cordoned, 1, NOW - 700),
        ],
        &[],
        &cfg(),
    );
    let next = plans.iter().find(|p| p.node == "next").unwrap();
    assert!(
        matches!(next.why, Why::DrainBudget { .. } | Why::DrainSpacing { .. }),
        "{:?}",
        next.why
    );
}

#[test]
fn a_round_of_one_node_gives_back_exactly_one_decision_without_room_for_more() {
    // A round that decides one changed node is the steady case (one update at a time). The
    // decisions' vector is made to size: collected from `flatten` it started at four (a decision is
    // hundreds of bytes, four past glibc's small sizes), and each such request made malloc first
    // consolidate every small block freed since.
    for n in [1, 3] {
        let nodes = (0..n)
            .map(|i| node(&format!("n{i}")).cond("Ready", "True", 0))
            .collect();
        let d = run(nodes, &[], &cfg());
        assert_eq!(d.len(), n);
        assert_eq!(
            d.capacity(),
            n,
            "{n} decisions in a vector made for {}",
            d.capacity()
        );
    }
}
