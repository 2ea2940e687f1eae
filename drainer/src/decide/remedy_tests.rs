//! Taints instead of (or with) the cordon, and probation before the uncordon: the decisions over
//! nodes in every state of a hold. Pure.

use std::time::Duration;

use k8s_openapi::api::core::v1::Taint;

use super::tests::{N, NOW, cfg, node, one, t};
use super::*;
use crate::config::Config;
use crate::model::record::{Phase, Record};

fn taint(mut n: N, key: &str, effect: &str) -> N {
    n.0.spec
        .get_or_insert_with(Default::default)
        .taints
        .get_or_insert_with(Vec::new)
        .push(Taint {
            key: key.into(),
            effect: effect.into(),
            ..Default::default()
        });
    n
}

const PROBLEM_TAINT: &str = "nodemedic.io/problem:NoSchedule";

fn tainting(cordon: bool) -> Config {
    let mut c = cfg();
    c.remedy.taints = vec![PROBLEM_TAINT.parse().unwrap()];
    c.remedy.cordon = cordon;
    c
}

fn probation(with_taint: bool) -> Config {
    let mut c = tainting(true);
    c.remedy.uncordon_after = Duration::from_secs(1800);
    if with_taint {
        c.remedy.probation_taint = Some("nodemedic.io/probation:PreferNoSchedule".parse().unwrap());
    }
    c
}

/// A node we hold as `r` says, with the hold in place (cordon and taints).
fn held(name: &str, r: Record) -> N {
    let mut n = node(name);
    if r.cordoned {
        n = n.unschedulable();
    }
    for tt in &r.taints {
        let (key, effect) = tt.rsplit_once(':').unwrap();
        n = taint(n, key, effect);
    }
    n.record(r)
}

fn record(phase: Phase, cordoned: bool, taints: &[&str]) -> Record {
    Record {
        owner: crate::config::DEFAULT_OWNER.into(),
        episode: format!("KernelDeadlock=True@{}", t(0).as_second()),
        reason: "KernelDeadlock=True".into(),
        phase,
        cordoned_at: t(NOW - 3000),
        drain_at: t(NOW - 2400),
        cordoned,
        taints: taints.iter().map(|s| s.to_string()).collect(),
        ..Default::default()
    }
}

#[test]
fn a_problem_node_is_tainted_with_the_cordon_or_instead_of_it() {
    let bad = || node("n").cond("KernelDeadlock", "True", 0);
    for cordon in [true, false] {
        let d = one(bad(), &tainting(cordon));
        let Effect::Cordon(r) = &d.effect else {
            panic!("{d:?}")
        };
        assert_eq!(d.action(), Action::Cordon);
        assert_eq!(r.taints, vec![PROBLEM_TAINT.to_string()]);
        assert_eq!(r.cordoned, cordon);
    }
    // Taint-only: a node someone else cordoned is still ours to taint (its schedulability is theirs).
    let d = one(bad().unschedulable(), &tainting(false));
    assert_eq!(d.action(), Action::Cordon, "{}", d.reason());
    let d = one(bad().unschedulable(), &tainting(true));
    assert!(
        matches!(d.why, Why::CordonedBySomeoneElse { .. }),
        "{}",
        d.reason()
    );
}

#[test]
fn a_person_lifting_our_taint_or_cordon_releases_the_node() {
    let c = tainting(true);
    let bad = |n: N| n.cond("KernelDeadlock", "True", 0);
    let r = record(Phase::Cordoned, true, &[PROBLEM_TAINT]);
    // In place: the drain is due.
    let d = one(bad(held("n", r.clone())), &c);
    assert_eq!(d.action(), Action::Drain, "{}", d.reason());
    // The taint removed, the cordon still there.
    let n = bad(node("n").unschedulable().record(r.clone()));
    let d = one(n, &c);
    assert_eq!(
        d.why,
        Why::ManualUncordon {
            what: format!("taint {PROBLEM_TAINT} removed")
        }
    );
    let Effect::Release(released) = &d.effect else {
        panic!("{d:?}")
    };
    assert_eq!(released.phase, Phase::Released);
    assert!(
        !released.cordoned && released.taints.is_empty(),
        "nothing of ours is left"
    );
    // The cordon lifted, the taint still there.
    let n = bad(taint(node("n"), "nodemedic.io/problem", "NoSchedule").record(r));
    let d = one(n, &c);
    assert_eq!(
        d.why,
        Why::ManualUncordon {
            what: "uncordoned".into()
        }
    );
    // Taint-only: the node is not ours to cordon, so schedulable is how it should be.
    let r = record(Phase::Cordoned, false, &[PROBLEM_TAINT]);
    let d = one(bad(held("n", r)), &tainting(false));
    assert_eq!(d.action(), Action::Drain, "{}", d.reason());
}

#[test]
fn a_recovered_node_goes_through_probation_before_it_is_let_go() {
    let healthy = |n: N| n.cond("KernelDeadlock", "False", NOW - 700);
    let r = record(Phase::Drained, true, &[PROBLEM_TAINT]);
    // Without a probation taint, the node stays held as it is until the end of probation.
    let d = one(healthy(held("n", r.clone())), &probation(false));
    let until = t(NOW + 1800);
    assert_eq!(
        (d.action(), &d.why),
        (Action::Probation, &Why::StartProbation { until })
    );
    let Effect::Probation(p) = &d.effect else {
        panic!("{d:?}")
    };
    assert_eq!(
        (p.phase, p.probation_until),
        (Phase::Probation, Some(until))
    );
    assert_eq!((p.cordoned, &p.taints), (true, &r.taints));
    // With one, the cordon and the problem's taints give way to it.
    let d = one(healthy(held("n", r.clone())), &probation(true));
    let Effect::Probation(p) = &d.effect else {
        panic!("{d:?}")
    };
    assert!(!p.cordoned);
    assert_eq!(
        p.taints,
        vec!["nodemedic.io/probation:PreferNoSchedule".to_string()]
    );
    assert!(d.reason().contains("probation until"), "{}", d.reason());
    // During probation: the node, no longer cordoned by us, is waited on until its time.
    let mut during = p.clone();
    during.probation_until = Some(t(NOW + 60));
    let d = one(healthy(held("n", during.clone())), &probation(true));
    assert_eq!(
        (d.action(), &d.why, d.wake),
        (
            Action::Wait,
            &Why::Probation { until: t(NOW + 60) },
            Some(t(NOW + 60))
        )
    );
    // Its time came: uncordoned (what the record holds comes off).
    during.probation_until = Some(t(NOW));
    let d = one(healthy(held("n", during.clone())), &probation(true));
    assert_eq!(
        (d.action(), &d.why),
        (Action::Uncordon, &Why::ProbationPassed)
    );
    assert!(
        matches!(&d.effect, Effect::Uncordon(r) if *r == during),
        "{:?}",
        d.effect
    );
    // Someone removed the probation taint: released like an uncordon.
    let n = healthy(node("n").record(during));
    assert!(matches!(
        one(n, &probation(true)).why,
        Why::ManualUncordon { .. }
    ));
}

#[test]
fn a_relapse_during_probation_holds_again_and_drains_without_a_new_buffer() {
    let mut during = record(
        Phase::Probation,
        false,
        &["nodemedic.io/probation:PreferNoSchedule"],
    );
    during.probation_until = Some(t(NOW + 600));
    during.finished_at = Some(t(NOW - 2000));
    let n = held("n", during).cond("KernelDeadlock", "True", NOW - 900);
    let d = one(n, &probation(true));
    assert_eq!(d.action(), Action::Cordon, "{}", d.reason());
    assert!(matches!(d.why, Why::Relapse { .. }), "{}", d.reason());
    let Effect::Relapse(r) = &d.effect else {
        panic!("{d:?}")
    };
    assert_eq!(
        (r.phase, r.drain_at, r.probation_until),
        (Phase::Cordoned, t(NOW), None)
    );
    assert_eq!(
        (r.cordoned, &r.taints),
        (true, &vec![PROBLEM_TAINT.to_string()])
    );
    assert_eq!(
        r.episode,
        format!("KernelDeadlock=True@{}", t(NOW - 900).as_second())
    );
    // Held again, the drain is due at once.
    let again = held("n", r.clone()).cond("KernelDeadlock", "True", NOW - 900);
    let d = one(again, &probation(true));
    assert_eq!(d.action(), Action::Drain, "{}", d.reason());
}
