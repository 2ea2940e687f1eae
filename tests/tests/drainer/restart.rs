//! A ladder's restart rung through both binaries (issue 67, point 2): `drainer run` with
//! `restart kubelet, drain, ...` and `detector run` carrying out the restart as it carries out
//! reboots. The test stands for the host's systemd (a `systemctl` that keeps each unit's state in
//! a file, as the reboot tests' command stands for the machine) and for the kubelet's health check
//! (it clears the condition when the unit is back):
//! - a unit that comes back: restarted once, the fence on meanwhile and nothing cordoned, the
//!   proof lifts the fence and the record;
//! - a unit that does not: started again rather than left stopped, said in a Warning for a person,
//!   and at the restart's deadline the node is cordoned and drained as the ladder goes on;
//! - what a node writes cannot ask for one: a request in the ConfigMap without the drainer's
//!   signature restarts nothing.

use std::path::Path;

use nodemedic_tests::cluster::eventually;
use serde_json::json;

use crate::ladder::{Machine, broken_node, detector_said, forget_requests, has_event, said};
use crate::remedies::{Proc, Scenario};

/// A `systemctl` for the machine in `dir`: `restart`, `start` and `is-active` of units whose
/// state is `dir/UNIT.state`; a unit with `dir/UNIT.broken` never becomes active.
fn systemctl(dir: &Path) -> String {
    let script = dir.join("systemctl");
    let d = dir.display();
    let text = format!(
        "#!/bin/sh\necho \"$*\" >> {d}/systemctl.log\ncase \"$1\" in\n  restart|start)\n    if [ -f {d}/$2.broken ]; then echo failed > {d}/$2.state; [ \"$1\" = start ] && exit 1; exit 0; fi\n    echo active > {d}/$2.state ;;\n  is-active)\n    s=$(cat {d}/$2.state 2>/dev/null || echo inactive); echo $s; [ \"$s\" = active ] ;;\nesac\n"
    );
    std::fs::write(&script, text).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    script.display().to_string()
}

fn calls(dir: &Path) -> Vec<String> {
    std::fs::read_to_string(dir.join("systemctl.log"))
        .unwrap_or_default()
        .lines()
        .map(String::from)
        .collect()
}

fn detector(s: &Scenario, m: &Machine, node: &str) -> Proc {
    let extra = [
        format!("--systemctl={}", systemctl(&m.dir)),
        "--restart-settle=2s".to_string(),
    ];
    m.detector_with(s, node, "detector.log", &extra)
}

async fn fenced(s: &Scenario, node: &str) -> bool {
    let taints = s.env.get_node(node).await["spec"]["taints"].to_string();
    taints.contains("nodemedic.io/remediation")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_unit_that_comes_back_is_proven_and_one_that_does_not_goes_on_to_the_drain() {
    let s = Scenario::new().await;
    let (back, down) = (Machine::at(&s, "back"), Machine::at(&s, "down"));
    std::fs::write(down.dir.join("kubelet.service.broken"), "").unwrap();
    let node = broken_node(&s, "back").await;
    let stuck = broken_node(&s, "down").await;
    let _d1 = detector(&s, &back, &node);
    let _d2 = detector(&s, &down, &stuck);
    let (drainer, _) = s
        .drainer(&[
            "KernelDeadlock=True: restart kubelet, drain, reboot",
            "--restart-deadline=20s",
            "--drain-buffer=1s",
            "--max-drains-in-flight=2",
        ])
        .await;
    // Restarted once, fenced meanwhile, never cordoned.
    s.until(
        "the kubelet restarted on the first node",
        &drainer,
        || async {
            calls(&back.dir)
                .contains(&"restart kubelet.service".to_string())
                .then_some(())
        },
    )
    .await;
    said(&s, &drainer, &node, "RestartRequested").await;
    assert!(fenced(&s, &node).await, "no new pods while it restarts");
    assert!(
        !s.env.cordoned(&node).await,
        "nothing cordoned for a restart"
    );
    let message = s
        .until("the detector's word", &drainer, || async {
            detector_said(&s, &node, "ComponentRestarted").await
        })
        .await;
    assert!(
        message.contains("kubelet.service") && message.contains("active again"),
        "{message}"
    );
    // Its health check comes back: the condition clears; the proof lifts the fence and the record.
    s.env
        .set_condition(&node, "KernelDeadlock", "False", 0)
        .await;
    said(&s, &drainer, &node, "RestartProven").await;
    s.until("the fence lifted", &drainer, || async {
        (!fenced(&s, &node).await).then_some(())
    })
    .await;
    let n = s.env.get_node(&node).await;
    assert!(
        n["metadata"]["annotations"]["nodemedic.io/drain"].is_null(),
        "{n}"
    );
    assert!(!s.env.cordoned(&node).await);
    assert_eq!(
        calls(&back.dir)
            .iter()
            .filter(|c| c.starts_with("restart"))
            .count(),
        1,
        "restarted once"
    );
    // The unit that does not come back: started again, said for a person.
    let warning = s
        .until("the failed restart said", &drainer, || async {
            detector_said(&s, &stuck, "ComponentRestartFailed").await
        })
        .await;
    assert!(warning.contains("nor once started again"), "{warning}");
    assert!(
        calls(&down.dir).contains(&"start kubelet.service".to_string()),
        "never left stopped: {:?}",
        calls(&down.dir)
    );
    // At the restart's deadline: cordoned and drained, the ladder going on.
    s.until("the stuck node cordoned", &drainer, || async {
        s.env.cordoned(&stuck).await.then_some(())
    })
    .await;
    eventually("drained", crate::env::WAIT, || async {
        has_event(&s, &stuck, "DrainSucceeded").await.then_some(())
    })
    .await;
    drop(drainer);
    forget_requests(&s).await;
    s.env.cleanup().await;
}

/// What holds only the drainer's token (or a node that could write the ConfigMap) cannot make a
/// detector restart anything: an unsigned restart request for a fenced node is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_request_without_the_drainers_signature_restarts_nothing() {
    use k8s_openapi::api::core::v1::ConfigMap;
    let s = Scenario::new().await;
    let m = Machine::at(&s, "forged");
    let node = broken_node(&s, "forged").await;
    // The fence too, as the token could write it.
    let nodes: kube::Api<k8s_openapi::api::core::v1::Node> =
        kube::Api::all(s.env.cluster.client.clone());
    let taint = json!({"spec": {"taints": [{"key": "nodemedic.io/remediation", "value": "reboot", "effect": "NoSchedule"}]}});
    nodes
        .patch(&node, &Default::default(), &kube::api::Patch::Merge(taint))
        .await
        .unwrap();
    let uid = s.env.get_node(&node).await["metadata"]["uid"]
        .as_str()
        .unwrap()
        .to_string();
    let request = json!({"action": "restart kubelet", "node": node, "uid": uid,
        "bootID": crate::ladder::BOOT_A, "requested": "2026-12-02T10:00:00Z", "until": "2026-12-02T10:05:00Z"});
    // Into the requests ConfigMap the scenario keeps, as the token could write it.
    let api: kube::Api<ConfigMap> =
        kube::Api::namespaced(s.env.cluster.client.clone(), "kube-system");
    let name = nodemedic_common::reboot::configmap_name(&s.lease());
    let data = json!({"data": {node.clone(): request.to_string()}});
    if api.get_opt(&name).await.unwrap().is_some() {
        api.patch(&name, &Default::default(), &kube::api::Patch::Merge(data))
            .await
            .unwrap();
    } else {
        let mut cm = data;
        cm["metadata"] = json!({"name": name, "namespace": "kube-system"});
        let cm: ConfigMap = serde_json::from_value(cm).unwrap();
        api.create(&Default::default(), &cm).await.unwrap();
    }
    let det = detector(&s, &m, &node);
    let refused = eventually("the refusal", crate::env::WAIT, || async {
        detector_said(&s, &node, "RebootRequestRefused").await
    })
    .await;
    assert!(refused.contains("not signed"), "{refused}");
    assert!(
        calls(&m.dir).is_empty(),
        "nothing restarted: {:?}",
        calls(&m.dir)
    );
    drop(det);
    forget_requests(&s).await;
    s.env.cleanup().await;
}
