//! A step under way keeps its request only while the gates and the slow start allow (issue 76,
//! principle 1), one node at a time; the fleet's side (places in the slow start, the requests left
//! out) is in `fleet::tests`. Pure.

use super::ladder::LadderWhy;
use super::ladder_steps_tests::held_new;
use super::ladder_tests::{fenced, ladder_cfg, ladder_why};
use super::tests::{NOW, one, t};
use super::*;
use crate::config::ladder::Step;
use crate::model::node::NodeView;

/// A restart under way keeps its request only while the gates allow (issue 76, principle 1): a
/// pause withdraws it and its deadline does not end it; withheld past its deadline it is asked
/// again once nothing holds it (not cordoned as if it had failed); one that stood to its deadline
/// goes on as before.
#[test]
fn a_restart_under_way_is_held_by_a_pause_and_asked_again_after_it() {
    use super::gates::Gates;
    use super::ladder_tests::decided_in;
    let c = ladder_cfg("restart kubelet, drain, reboot");
    let Effect::Reboot(mut r) = one(held_new(), &c).effect else {
        panic!("a restart first")
    };
    r.step_at = Some(t(NOW - 400));
    r.step_until = Some(t(NOW - 1));
    let view = NodeView::of(&fenced(held_new()).record(r).0);
    let record = crate::model::record::Record::of(&view, &c.records, &c.owner);
    let candidate = super::ladder_tests::selected(&view, record.as_ref(), (0, 0));
    let mut gates = Gates::open(c.safety.flap_window);
    gates.pause = Some(super::facts::Pause {
        by: "oncall".into(),
        since: Some(t(NOW - 100)),
        reason: "incident".into(),
    });
    let d = decided_in(&candidate, &gates, &c);
    assert_eq!(d.action(), Action::Hold, "{}", d.reason());
    assert!(
        matches!(
            ladder_why(&d),
            LadderWhy::RequestHeld {
                step: Step::RestartKubelet,
                ..
            }
        ),
        "{}",
        d.reason()
    );
    assert!(d.reason().contains("paused by oncall"), "{}", d.reason());
    // The pause lifts: withheld past its deadline, the restart is asked again from now.
    gates.pause = None;
    gates.under_way.withheld.insert(view.name.clone());
    let d = decided_in(&candidate, &gates, &c);
    assert_eq!(d.action(), Action::Restart, "{}", d.reason());
    let Effect::Reboot(again) = &d.effect else {
        panic!("{d:?}")
    };
    assert_eq!(again.step_at, Some(t(NOW)));
    // Never withheld: past its deadline it failed, and the cordon comes.
    gates.under_way.withheld.clear();
    let d = decided_in(&candidate, &gates, &c);
    assert_eq!(d.action(), Action::Cordon, "{}", d.reason());
}

/// `n` with `key[=value]:NoSchedule`, as a peer taints a node it takes.
fn peer_tainted(mut n: super::tests::N, key: &str, value: Option<&str>) -> super::tests::N {
    let spec = n.0.spec.get_or_insert_with(Default::default);
    spec.taints
        .get_or_insert_with(Vec::new)
        .push(k8s_openapi::api::core::v1::Taint {
            key: key.into(),
            value: value.map(String::from),
            effect: "NoSchedule".into(),
            ..Default::default()
        });
    n
}

/// Issue 79, point 3: a node cluster-autoscaler is deleting, or Karpenter disrupting, is left to
/// it: no cordon for its problem, no step on its ladder, and a restart's standing request is
/// withdrawn; the reason names the peer and its taint. Its taint gone, the same node is cordoned.
#[test]
fn a_node_another_remediator_has_taken_is_left_to_it() {
    let c = ladder_cfg("drain, reboot");
    let d = one(held_new(), &c);
    assert_eq!(d.action(), Action::Cordon, "the control: {}", d.reason());
    let taken = peer_tainted(held_new(), "ToBeDeletedByClusterAutoscaler", Some("1765"));
    let d = one(taken, &c);
    assert_eq!(d.action(), Action::Hold, "{}", d.reason());
    assert!(
        matches!(
            d.why,
            Why::TakenByPeer {
                peer: super::gates::peer::Peer::ClusterAutoscaler,
                ..
            }
        ),
        "{:?}",
        d.why
    );
    assert_eq!(
        d.reason(),
        "left to cluster-autoscaler, which is deleting it (its ToBeDeletedByClusterAutoscaler taint): nothing new is started on it until cluster-autoscaler lets go"
    );
    // A restart under way: its request is withdrawn while Karpenter disrupts the node.
    let c = ladder_cfg("restart kubelet, drain, reboot");
    let Effect::Reboot(r) = one(held_new(), &c).effect else {
        panic!("a restart first")
    };
    let under_way = fenced(held_new()).record(r);
    let d = one(peer_tainted(under_way, "karpenter.sh/disrupted", None), &c);
    assert_eq!(d.action(), Action::Hold, "{}", d.reason());
    assert!(
        matches!(ladder_why(&d), LadderWhy::RequestHeld { .. }),
        "{}",
        d.reason()
    );
    assert!(d.reason().contains("left to Karpenter"), "{}", d.reason());
}
