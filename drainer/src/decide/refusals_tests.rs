//! Every step's refusals are one table ([`ladder::refused::REFUSALS`]), and this test walks it: for
//! each step and each check of its row, a node that passes every other check and fails that one is
//! refused as the row says (passed over, a person, or a wait for that reason), and a node failing
//! none is not. A check the table names that refuses nothing, or refuses the wrong way, fails here.
//! Pure.

use std::collections::HashMap;

use super::context::Context;
use super::counts::Budgets;
use super::gates::Gates;
use super::ladder::LadderWhy;
use super::ladder::refused::{Check, REFUSALS, Refused, Then, refused};
use super::ladder_tests::{BOOT_A, booted, ladder_cfg};
use super::tests::{NOW, node, pod, t};
use super::*;
use crate::config::ladder::Step;
use crate::model::node::NodeView;
use crate::model::pod::PodInfo;

fn budgets() -> Budgets {
    Budgets {
        cordoned: 0,
        cordon_limit: 10,
        draining: 0,
        last_drain_start: None,
        prior_drain_start: None,
        domain_cordoned: HashMap::new(),
        replaced: Vec::new(),
        remediating: HashMap::new(),
    }
}

/// What `step` meets on a node that fails only `failing` (None: nothing).
fn refusal(step: Step, failing: Option<Check>) -> Option<Refused> {
    let cfg = ladder_cfg("restart kubelet, drain, reboot, power-cycle, replace");
    let mut n = booted(node("n"), BOOT_A).cond("KernelDeadlock", "True", 0);
    let mut today = (0, 0);
    let mut pods: Vec<PodInfo> = Vec::new();
    let mut gates = Gates::open(cfg.safety.flap_window);
    let mut b = budgets();
    match failing {
        None => {}
        Some(Check::Veto) => {
            let a =
                n.0.metadata
                    .annotations
                    .get_or_insert_with(Default::default);
            a.insert("nodemedic.io/do-not-remediate".into(), "true".into());
        }
        Some(Check::KosmosLeaf) => n = n.label("kosmos.io/node", "true"),
        Some(Check::BootId) => n = node("n").cond("KernelDeadlock", "True", 0),
        Some(Check::DayCap) => today = (9, 9),
        Some(Check::PodsInTheWay | Check::PodsLeft) => {
            pods.push(PodInfo::from_pod(
                &pod("db-0", "n", serde_json::json!({})),
                None,
            ));
        }
        Some(Check::ControlPlane) => n = n.label("node-role.kubernetes.io/control-plane", ""),
        Some(Check::Gates) => {
            gates.pause = Some(super::facts::Pause {
                by: "oncall".into(),
                since: Some(t(NOW - 60)),
                reason: "incident".into(),
            })
        }
        Some(Check::SlowStart) => {
            b.remediating.insert(String::new(), 1);
        }
        Some(Check::Window) => gates.window = Err(None),
        Some(Check::RebootLock) => {
            let lock = r#"{"nodeID":"other","created":"2026-12-08T09:50:00Z","TTL":0}"#;
            let at = "kube-system/kured";
            let read = super::gates::reboot_lock::read(Some(lock), at, t(NOW));
            gates.peers.kured = Some((at.into(), read));
        }
        Some(Check::ReplaceBudget) => b.replaced = vec![t(NOW - 60), t(NOW - 30)],
    }
    let view = NodeView::of(&n.0);
    let mut c = super::ladder_tests::selected(&view, None, today);
    c.pods = pods.iter().collect();
    let x = Context {
        gates: &gates,
        cfg: &cfg,
        now: t(NOW),
    };
    refused(step, &c, &x, &b, "KernelDeadlock=True")
}

#[test]
fn every_check_of_every_step_refuses_as_its_row_says() {
    let mut walked = 0;
    for (step, row) in REFUSALS {
        assert_eq!(
            refusal(step, None),
            None,
            "{step} on a node failing nothing"
        );
        for &(check, then) in row {
            let got = refusal(step, Some(check));
            let ok = match (&got, then) {
                (Some(Refused::NextStep(w)), Then::NextStep)
                | (Some(Refused::Person(w)), Then::Person) => !w.is_empty(),
                (Some(Refused::Wait(why)), Then::Wait) => match check {
                    Check::Veto => {
                        matches!(why, Why::Ladder(LadderWhy::Vetoed { step: s }) if *s == step)
                    }
                    Check::KosmosLeaf => matches!(why, Why::Ladder(LadderWhy::KosmosLeaf)),
                    Check::Gates => matches!(why, Why::Paused { .. }),
                    Check::SlowStart => matches!(why, Why::Ladder(LadderWhy::SlowStart { .. })),
                    Check::Window => matches!(why, Why::OutsideDrainWindow { .. }),
                    Check::RebootLock => matches!(why, Why::WaitingForPeer { .. }),
                    Check::ReplaceBudget => {
                        matches!(why, Why::Ladder(LadderWhy::ReplaceBudget { .. }))
                    }
                    _ => false,
                },
                _ => false,
            };
            assert!(
                ok,
                "{step}, failing {check:?}: {got:?}, the table says {then:?}"
            );
            walked += 1;
        }
    }
    assert!(walked >= 30, "{walked} checks walked");
}

/// The machine-down steps share their refusals: a power-cycle is refused wherever a reboot is
/// (issue 76, principle 3: a power-cycle once went where the detector refused the reboot).
#[test]
fn a_power_cycle_is_refused_wherever_a_reboot_is() {
    let row = |s: Step| REFUSALS.iter().find(|(r, _)| *r == s).map(|(_, row)| *row);
    assert_eq!(row(Step::Reboot), row(Step::PowerCycle));
    for check in [Check::PodsInTheWay, Check::ControlPlane] {
        assert!(
            row(Step::Reboot).unwrap().contains(&(check, Then::Person)),
            "{check:?}"
        );
    }
    let replace = row(Step::Replace).unwrap();
    assert!(replace.contains(&(Check::PodsLeft, Then::Person)));
    assert!(replace.contains(&(Check::ControlPlane, Then::Person)));
}
