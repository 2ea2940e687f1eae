//! Drain policies per workload and NoExecute taints: what each pod of a drain gets. Pure.

use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use serde_json::json;

use super::evictions::{self, PodAction};
use super::tests::{cfg, pod};
use crate::config::Config;
use crate::config::build::build;
use crate::config::policy::PolicyAction;
use crate::model::node::{NodeTaint, TaintEffect};
use crate::model::pod::PodInfo;

/// Settings with the pod policies of this YAML.
fn policies(yaml: &str) -> Config {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("drainer.yaml");
    std::fs::write(
        &f,
        format!("conditions: ['KernelDeadlock=True']\npodPolicies:\n{yaml}"),
    )
    .unwrap();
    let mut c = build(&crate::config::flags::PolicyArgs {
        config: Some(f),
        ..Default::default()
    })
    .unwrap();
    c.safety = cfg().safety;
    c
}

fn decide(p: &Pod, c: &Config) -> evictions::PodPlan {
    evictions::decide(&PodInfo::project(&p.into(), &evictions::projection(c)), c)
}

const POLICIES: &str = "
  - name: batch-jobs
    namespaces: [batch]
    ownerKinds: [Job]
    action: wait
    maxWait: 2h
  - name: databases
    selector: 'tier=db'
    action: delete
    after: 10m
  - name: low
    priorityClasses: [best-effort]
    action: skip
  - name: statefulsets-here
    namespaces: [web]
    ownerKinds: [StatefulSet]
    action: evict
";

fn owned(kind: &str) -> serde_json::Value {
    json!({"metadata": {"ownerReferences": [{"apiVersion": "v1", "kind": kind, "name": "o", "uid": "u", "controller": true}]}})
}

#[test]
fn the_first_policy_that_matches_says_what_the_drain_does_with_a_pod() {
    let c = policies(POLICIES);
    assert_eq!(c.pod_policies.len(), 4);
    assert_eq!(
        c.pod_policies[0].action,
        PolicyAction::Wait {
            max: Duration::from_secs(7200)
        }
    );
    let job = pod("etl", "n", json!({"metadata": {"namespace": "batch"}}));
    let mut job = job;
    job.metadata.owner_references.as_mut().unwrap()[0].kind = "Job".into();
    let d = decide(&job, &c);
    assert_eq!(
        (d.action, d.policy.as_deref()),
        (PodAction::Wait, Some("batch-jobs"))
    );
    assert!(
        d.reason.contains("evicted only if still running 2h"),
        "{}",
        d.reason
    );
    let db = pod("pg-0", "n", json!({"metadata": {"labels": {"tier": "db"}}}));
    let d = decide(&db, &c);
    assert_eq!(
        (d.action, d.policy.as_deref()),
        (PodAction::Evict, Some("databases"))
    );
    assert!(matches!(d.policy_action, Some(PolicyAction::Delete { .. })));
    let cheap = pod(
        "batchy",
        "n",
        json!({"spec": {"priorityClassName": "best-effort"}}),
    );
    assert_eq!(decide(&cheap, &c).action, PodAction::Skip);
    // An evict policy overrides a pod rule: StatefulSet pods are evicted in `web`.
    let mut sts = pod("web-0", "n", json!({"metadata": {"namespace": "web"}}));
    sts.metadata.owner_references =
        serde_json::from_value(owned("StatefulSet")["metadata"]["ownerReferences"].clone())
            .unwrap();
    assert_eq!(decide(&sts, &c).action, PodAction::Evict);
    sts.metadata.namespace = Some("other".into());
    assert_eq!(
        decide(&sts, &c).action,
        PodAction::Skip,
        "elsewhere the rule stands"
    );
    // No policy matches: the pod rules as before.
    let plain = pod("api", "n", json!({}));
    assert_eq!(
        (decide(&plain, &c).action, decide(&plain, &c).policy),
        (PodAction::Evict, None)
    );
}

#[test]
fn built_in_protections_come_before_every_policy() {
    let c = policies("  - {namespaces: [kube-system], action: evict}\n  - {action: evict}\n");
    let critical = pod(
        "dns",
        "n",
        json!({"metadata": {"namespace": "kube-system"}, "spec": {"priorityClassName": "system-cluster-critical", "priority": 2000000000}}),
    );
    assert_eq!(decide(&critical, &c).action, PodAction::Skip);
    let mirror = pod(
        "static",
        "n",
        json!({"metadata": {"annotations": {"kubernetes.io/config.mirror": "x"}}}),
    );
    assert_eq!(decide(&mirror, &c).action, PodAction::Skip);
    let done = pod("done", "n", json!({"status": {"phase": "Succeeded"}}));
    assert_eq!(decide(&done, &c).action, PodAction::Skip);
}

#[test]
fn policy_errors_are_reported_at_their_positions() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("drainer.yaml");
    std::fs::write(
        &f,
        "conditions: ['Ready']\npodPolicies:\n  - {action: wait}\n  - {action: delete, after: 0s}\n  - {action: nuke}\n  - {action: skip, maxWait: 1h}\n  - {selector: 'a in (', action: skip}\n",
    )
    .unwrap();
    let e: Vec<String> = build(&crate::config::flags::PolicyArgs {
        config: Some(f),
        ..Default::default()
    })
    .unwrap_err()
    .iter()
    .map(ToString::to_string)
    .collect();
    assert_eq!(e.len(), 5, "{e:#?}");
    assert!(
        e[0].contains(":3:") && e[0].contains("needs maxWait"),
        "{}",
        e[0]
    );
    assert!(
        e[1].contains(":4:") && e[1].contains("after: must be more than 0s"),
        "{}",
        e[1]
    );
    assert!(
        e[2].contains(":5:") && e[2].contains("expected evict, skip, wait or delete"),
        "{}",
        e[2]
    );
    assert!(
        e[3].contains(":6:") && e[3].contains("maxWait: only for action wait"),
        "{}",
        e[3]
    );
    assert!(
        e[4].contains(":7:") && e[4].contains("selector"),
        "{}",
        e[4]
    );
}

#[test]
fn a_no_execute_taint_evicts_what_does_not_tolerate_it() {
    let c = cfg();
    let taints = [NodeTaint::new(
        "nodemedic.io/problem",
        None,
        TaintEffect::NoExecute,
    )];
    let plain = PodInfo::from_pod(&pod("api", "n", json!({})), None);
    let d = evictions::under_no_execute(&plain, evictions::decide(&plain, &c), &taints);
    assert_eq!(d.action, PodAction::Evict);
    assert!(
        d.reason
            .contains("does not tolerate nodemedic.io/problem:NoExecute"),
        "{}",
        d.reason
    );
    // A DaemonSet pod is left by a drain, not by the taint manager.
    let ds = PodInfo::from_pod(&pod("agent", "n", owned("DaemonSet")), None);
    assert_eq!(evictions::decide(&ds, &c).action, PodAction::Skip);
    assert_eq!(
        evictions::under_no_execute(&ds, evictions::decide(&ds, &c), &taints).action,
        PodAction::Evict
    );
    let tolerant = PodInfo::from_pod(
        &pod(
            "agent",
            "n",
            json!({"spec": {"tolerations": [{"operator": "Exists"}]}}),
        ),
        None,
    );
    let d = evictions::under_no_execute(&tolerant, evictions::decide(&tolerant, &c), &taints);
    assert!(
        d.reason.ends_with("tolerates the NoExecute taint"),
        "{}",
        d.reason
    );
    let keyed = PodInfo::from_pod(
        &pod(
            "x",
            "n",
            json!({"spec": {"tolerations": [{"key": "nodemedic.io/problem", "operator": "Exists", "effect": "NoExecute"}]}}),
        ),
        None,
    );
    assert!(
        evictions::under_no_execute(&keyed, evictions::decide(&keyed, &c), &taints)
            .reason
            .contains("tolerates")
    );
    let other = PodInfo::from_pod(
        &pod(
            "y",
            "n",
            json!({"spec": {"tolerations": [{"key": "other", "operator": "Exists"}]}}),
        ),
        None,
    );
    assert!(
        evictions::under_no_execute(&other, evictions::decide(&other, &c), &taints)
            .reason
            .contains("does not tolerate")
    );
}
