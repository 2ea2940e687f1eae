//! The remediation ladder through the real binaries (issue 40): `drainer run` with a condition that
//! names its steps and `detector run` carrying out the drainer's reboot requests. The test stands
//! for the machine and its kubelet: the detector's reboot command is a script that only writes a
//! line (the test counts its runs), and the test "boots" the machine by giving the detector's
//! boot-id file and the Node's `status.nodeInfo.bootID` a new value and clearing the condition.
//! - a reboot requested, carried out exactly once (also across a restart of the detector), proven
//!   by the new bootID, then the uncordon;
//! - no new bootID by the deadline: a person is needed;
//! - the problem survives the reboot: the Node is deleted for its replacement;
//! - what others write: a forged record through `nodes/status` requests nothing, a request on a
//!   node without the fence taint is refused by the detector, and a veto stops the ladder;
//! - slow start: two nodes of one zone reboot one at a time until the first one's proof has
//!   dwelt, then the zone widens;
//! - a power-cycle from outside: the provider (a loopback endpoint) asked once with the node, its
//!   boot and the token, no fence and no request to the detector, proven by the new boot.

use std::path::{Path, PathBuf};

use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use kube::api::{Patch, PatchParams};
use nodemedic_tests::bins::debug_bin;
use nodemedic_tests::cluster::Kubelet;
use serde_json::json;

use crate::remedies::{Proc, Scenario};

pub(super) const BOOT_A: &str = "11111111-2222-4333-8444-555555555555";
pub(super) const BOOT_B: &str = "66666666-7777-4888-8999-aaaaaaaaaaaa";

/// The detector's rules: a condition the test never sets (the test, not the detector, stands for
/// whatever sets KernelDeadlock).
const RULES: &str = r#"
source: quiet
input: {kind: kmsg}
conditions:
  - type: NodemedicLadderTest
    reason: Fine
    message: fine
rules:
  - {type: permanent, condition: NodemedicLadderTest, reason: Never, pattern: 'never matches this'}
"#;

/// A machine for one node: its boot-id file, and the reboot command's log of runs.
pub(super) struct Machine {
    pub(super) dir: PathBuf,
}

impl Machine {
    fn new(s: &Scenario) -> Machine {
        Machine::at(s, "machine")
    }

    /// A machine in the scenario's folder `name` (one per node).
    pub(super) fn at(s: &Scenario, name: &str) -> Machine {
        let dir = s.dir.path().join(name);
        std::fs::create_dir_all(dir.join("rules")).unwrap();
        std::fs::write(dir.join("rules/quiet.yaml"), RULES).unwrap();
        std::fs::write(dir.join("kmsg"), "").unwrap();
        std::fs::write(dir.join("boot_id"), format!("{BOOT_A}\n")).unwrap();
        let script = dir.join("reboot.sh");
        let log = dir.join("reboots.log");
        std::fs::write(
            &script,
            format!("#!/bin/sh\necho reboot >> {}\n", log.display()),
        )
        .unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
        Machine { dir }
    }

    /// How many times the reboot command ran.
    fn reboots(&self) -> usize {
        std::fs::read_to_string(self.dir.join("reboots.log"))
            .map(|t| t.lines().count())
            .unwrap_or(0)
    }

    /// `detector run` for `node`, carrying out the requests of the scenario's drainer.
    fn detector(&self, s: &Scenario, node: &str, log: &str) -> Proc {
        self.detector_with(s, node, log, &[])
    }

    /// [`Machine::detector`] with `extra` arguments.
    pub(super) fn detector_with(
        &self,
        s: &Scenario,
        node: &str,
        log: &str,
        extra: &[String],
    ) -> Proc {
        let d = &self.dir;
        let at = |p: &str| d.join(p).display().to_string();
        let mut args: Vec<String> = vec![
            "run".into(),
            format!("--node-name={node}"),
            format!("--rules={}", at("rules")),
            format!("--kmsg-path={}", at("kmsg")),
            format!("--state-file={}", at("state/detector.json")),
            format!("--reboot-state={}", at("state/reboots.json")),
            format!("--boot-id-file={}", at("boot_id")),
            format!("--reboot-command={}", at("reboot.sh")),
            format!(
                "--reboot-requests=kube-system/{}",
                nodemedic_common::reboot::configmap_name(&s.lease())
            ),
            format!("--reboot-public-key={}", s.public_key().display()),
            "--listen=127.0.0.1:0".into(),
        ];
        args.extend_from_slice(extra);
        let bin = debug_bin("nodemedic-detector", "detector");
        Proc::spawn(&bin, &args, &s.kubeconfig, d.join(log))
    }

    /// The machine is back as boot `id`: the kernel's file and the kubelet's report.
    async fn boot(&self, s: &Scenario, node: &str, id: &str) {
        std::fs::write(self.dir.join("boot_id"), format!("{id}\n")).unwrap();
        Kubelet::booted(&s.env.cluster.client, node, id).await;
    }
}

/// A selected node with KernelDeadlock True for an hour, booted as A, with a pod to drain.
pub(super) async fn broken_node(s: &Scenario, hint: &str) -> String {
    broken_node_with(s, hint, json!({})).await
}

/// [`broken_node`] with `labels`.
pub(super) async fn broken_node_with(
    s: &Scenario,
    hint: &str,
    labels: serde_json::Value,
) -> String {
    let node = s.env.node(hint, "True", 3600, labels).await;
    Kubelet::booted(&s.env.cluster.client, &node, BOOT_A).await;
    s.env
        .pod("default", &format!("web-{hint}"), &node, json!({}))
        .await;
    node
}

/// The drainer's reboot requests as the ConfigMap holds them (none before its first).
async fn requests(s: &Scenario) -> std::collections::BTreeMap<String, String> {
    let api: Api<ConfigMap> = Api::namespaced(s.env.cluster.client.clone(), "kube-system");
    let name = nodemedic_common::reboot::configmap_name(&s.lease());
    api.get_opt(&name)
        .await
        .unwrap()
        .and_then(|cm| cm.data)
        .unwrap_or_default()
}

/// Delete the requests ConfigMap (the drainer keeps it for as long as it runs).
pub(super) async fn forget_requests(s: &Scenario) {
    let api: Api<ConfigMap> = Api::namespaced(s.env.cluster.client.clone(), "kube-system");
    let name = nodemedic_common::reboot::configmap_name(&s.lease());
    let _ = api.delete(&name, &Default::default()).await;
}

async fn record(s: &Scenario, node: &str) -> Option<serde_json::Value> {
    let n = s.env.get_node(node).await;
    let text = n["metadata"]["annotations"]["nodemedic.io/drain"].as_str()?;
    serde_json::from_str(text).ok()
}

async fn phase(s: &Scenario, node: &str) -> Option<String> {
    record(s, node).await?["phase"].as_str().map(String::from)
}

pub(super) async fn has_event(s: &Scenario, node: &str, reason: &str) -> bool {
    s.env.event_reasons(node).await.iter().any(|r| r == reason)
}

/// Waits for the drainer's Event `reason` on `node`. The Event is written after the Node write it
/// tells of, so a test that has just seen the write waits for it rather than reading once.
pub(super) async fn said(s: &Scenario, drainer: &Proc, node: &str, reason: &str) {
    let what = format!("the {reason} Event on {node}");
    s.until(&what, drainer, || async {
        has_event(s, node, reason).await.then_some(())
    })
    .await;
}

/// The message of the detector's Event `reason` on `node`, once there is one.
pub(super) async fn detector_said(s: &Scenario, node: &str, reason: &str) -> Option<String> {
    let events = (s.env.cluster)
        .node_events_from(node, &["nodemedic-detector"])
        .await;
    let e = events
        .into_iter()
        .find(|e| e.reason.as_deref() == Some(reason))?;
    e.message
}

fn wait_for_line(p: &Path, line: &str) -> bool {
    std::fs::read_to_string(p).is_ok_and(|t| t.contains(line))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reboot_is_carried_out_once_even_across_a_detector_restart_and_proven_by_a_new_boot() {
    let s = Scenario::new().await;
    let m = Machine::new(&s);
    let node = broken_node(&s, "reboot").await;
    let det = m.detector(&s, &node, "detector-1.log");
    let (drainer, _) = s
        .drainer(&[
            "KernelDeadlock=True: drain, reboot",
            "--drain-buffer=1s",
            "--uncordon-after=2s",
        ])
        .await;
    s.until("the reboot command run", &drainer, || async {
        (m.reboots() == 1).then_some(())
    })
    .await;
    assert_eq!(phase(&s, &node).await.as_deref(), Some("rebooting"));
    let r = record(&s, &node).await.unwrap();
    assert_eq!(r["bootId"], BOOT_A, "{r}");
    let taints = s.env.get_node(&node).await["spec"]["taints"].to_string();
    assert!(taints.contains("nodemedic.io/remediation"), "{taints}");
    let asked = requests(&s).await;
    assert!(asked[&node].contains(BOOT_A), "{asked:?}");
    said(&s, &drainer, &node, "RebootRequested").await;
    // The detector restarts before the machine goes down: it knows the request was carried out.
    drop(det);
    let log = m.dir.join("detector-2.log");
    let _det = m.detector(&s, &node, "detector-2.log");
    s.until(
        "the restarted detector's word on the request",
        &drainer,
        || async { wait_for_line(&log, "carried out already").then_some(()) },
    )
    .await;
    assert_eq!(
        m.reboots(),
        1,
        "a restart never reboots twice for one request"
    );
    // The machine comes back with a new boot; the problem is gone with the old kernel.
    m.boot(&s, &node, BOOT_B).await;
    s.env
        .set_condition(&node, "KernelDeadlock", "False", 0)
        .await;
    s.until("probation after the proof", &drainer, || async {
        (phase(&s, &node).await.as_deref() == Some("probation")).then_some(())
    })
    .await;
    said(&s, &drainer, &node, "RebootProven").await;
    let taints = s.env.get_node(&node).await["spec"]["taints"].to_string();
    assert!(
        !taints.contains("nodemedic.io/remediation"),
        "the fence goes with the proof: {taints}"
    );
    s.until("uncordoned after the probation", &drainer, || async {
        (!s.env.cordoned(&node).await).then_some(())
    })
    .await;
    assert_eq!(record(&s, &node).await, None);
    let taints = s.env.get_node(&node).await["spec"]["taints"].to_string();
    assert!(!taints.contains("nodemedic.io/remediation"), "{taints}");
    s.until("the request withdrawn", &drainer, || async {
        requests(&s).await.is_empty().then_some(())
    })
    .await;
    assert_eq!(m.reboots(), 1);
    drop(drainer);
    forget_requests(&s).await;
    s.env.cleanup().await;
}

/// Issue 67, point 6: what the reboot erases is kept first, on the node, and handed to the
/// operator's collector; the Event says where.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn evidence_is_kept_before_the_reboot_and_handed_to_the_collector() {
    let s = Scenario::new().await;
    let m = Machine::new(&s);
    std::fs::write(
        m.dir.join("kmsg"),
        "6,1,100,-;Linux version 6.1.0\n3,2,900,-;INFO: task kworker/0:1 blocked for more than 120 seconds.\n",
    )
    .unwrap();
    let collected = m.dir.join("collected");
    let collector = m.dir.join("collect.sh");
    std::fs::write(
        &collector,
        format!("#!/bin/sh\necho \"$1\" >> {}\n", collected.display()),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&collector, std::fs::Permissions::from_mode(0o755)).unwrap();
    let node = broken_node(&s, "evidence").await;
    let evidence = m.dir.join("evidence");
    let _det = m.detector_with(
        &s,
        &node,
        "detector.log",
        &[
            format!("--evidence-dir={}", evidence.display()),
            "--evidence-units=kubelet.service".into(),
            format!("--evidence-command={}", collector.display()),
        ],
    );
    let (drainer, _) = s
        .drainer(&["KernelDeadlock=True: drain, reboot", "--drain-buffer=1s"])
        .await;
    s.until("the reboot command run", &drainer, || async {
        (m.reboots() == 1).then_some(())
    })
    .await;
    // Kept before the reboot: one folder, the kernel log and the Node's conditions in it.
    let folders: Vec<_> = std::fs::read_dir(&evidence).unwrap().flatten().collect();
    assert_eq!(folders.len(), 1);
    let folder = folders[0].path();
    let kmsg = std::fs::read_to_string(folder.join("kmsg.txt")).unwrap();
    assert!(kmsg.contains("blocked for more than 120 seconds"), "{kmsg}");
    let n: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(folder.join("node.json")).unwrap()).unwrap();
    let conditions = n["conditions"].to_string();
    assert!(conditions.contains("KernelDeadlock"), "{n}");
    let manifest = std::fs::read_to_string(folder.join("manifest.json")).unwrap();
    // The journal of the unit: kept, or said why not (this machine's journalctl has no boot of a
    // kubelet to read).
    assert!(
        manifest.contains("journal-kubelet.service.txt"),
        "{manifest}"
    );
    // Handed to the collector, and the Event says where.
    let handed = std::fs::read_to_string(&collected).unwrap();
    assert_eq!(handed.trim(), folder.display().to_string());
    let events = s
        .until("the EvidenceKept Event", &drainer, || async {
            detector_said(&s, &node, "EvidenceKept").await
        })
        .await;
    assert!(events.contains(&folder.display().to_string()), "{events}");
    drop(drainer);
    forget_requests(&s).await;
    s.env.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reboot_that_never_comes_back_needs_a_person_and_one_the_problem_survives_replaces_the_node()
 {
    let s = Scenario::new().await;
    let m = Machine::new(&s);
    let lost = broken_node(&s, "lost").await;
    let _det = m.detector(&s, &lost, "detector.log");
    let (drainer, _) = s
        .drainer(&[
            "KernelDeadlock=True: drain, reboot",
            "--drain-buffer=1s",
            "--reboot-deadline=3s",
        ])
        .await;
    s.until("the reboot command run", &drainer, || async {
        (m.reboots() == 1).then_some(())
    })
    .await;
    // No new bootID ever: past the deadline, a person.
    s.until("needs a person", &drainer, || async {
        (phase(&s, &lost).await.as_deref() == Some("needsperson")).then_some(())
    })
    .await;
    said(&s, &drainer, &lost, "NeedsPerson").await;
    assert!(
        s.env.cordoned(&lost).await,
        "it stays cordoned for the person"
    );
    let r = record(&s, &lost).await.unwrap();
    assert!(
        r["escalated"].as_str().unwrap().contains("no new bootID"),
        "{r}"
    );
    drop(drainer);

    // Another node, on a ladder that replaces: back with a new boot, the problem still there.
    let kept = broken_node(&s, "kept").await;
    let (drainer, _) = s
        .drainer(&[
            "KernelDeadlock=True: drain, reboot, replace",
            "--drain-buffer=1s",
            "--reboot-deadline=3s",
        ])
        .await;
    s.until("its reboot requested", &drainer, || async {
        (phase(&s, &kept).await.as_deref() == Some("rebooting")).then_some(())
    })
    .await;
    Kubelet::booted(&s.env.cluster.client, &kept, BOOT_B).await;
    s.until("the Node deleted for its replacement", &drainer, || async {
        let api: Api<k8s_openapi::api::core::v1::Node> = Api::all(s.env.cluster.client.clone());
        api.get_opt(&kept).await.unwrap().is_none().then_some(())
    })
    .await;
    s.env.cluster.kubelet.forget(&kept);
    said(&s, &drainer, &kept, "ReplacingNode").await;
    assert_eq!(phase(&s, &lost).await.as_deref(), Some("needsperson"));
    drop(drainer);
    forget_requests(&s).await;
    s.env.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forged_requests_and_a_veto_reboot_nothing() {
    for s in Scenario::each_release().await {
        forged_requests_and_a_veto_reboot_nothing_on(s).await;
    }
}

async fn forged_requests_and_a_veto_reboot_nothing_on(s: Scenario) {
    let m = Machine::new(&s);
    let node = broken_node(&s, "forged").await;
    let det = m.detector(&s, &node, "detector.log");
    // Through nodes/status (what the detector's and the node's credentials may write): a record
    // saying the drainer requested a reboot, and the fence taint's look-alike annotation.
    let forged = json!({"phase": "rebooting", "owner": s.lease(), "bootId": BOOT_A,
        "step": "reboot", "episode": "x", "reason": "x", "cordonedAt": "2026-01-01T00:00:00Z",
        "drainAt": "2026-01-01T00:00:00Z"});
    let body = json!({"metadata": {"annotations": {"nodemedic.io/drain": forged.to_string(),
        "nodemedic.io/reboot": "now"}}});
    let nodes: Api<k8s_openapi::api::core::v1::Node> = Api::all(s.env.cluster.client.clone());
    nodes
        .patch_status(&node, &PatchParams::default(), &Patch::Merge(body))
        .await
        .unwrap();
    // A veto, which a node may write on itself.
    let veto = json!({"metadata": {"annotations": {"nodemedic.io/do-not-remediate": "true"}}});
    nodes
        .patch(&node, &PatchParams::default(), &Patch::Merge(veto))
        .await
        .unwrap();
    let (drainer, _) = s
        .drainer(&["KernelDeadlock=True: drain, reboot", "--drain-buffer=1s"])
        .await;
    s.until("the forged record refused", &drainer, || async {
        has_event(&s, &node, "DrainRecordRejected")
            .await
            .then_some(())
    })
    .await;
    s.until("drained, and the veto said", &drainer, || async {
        drainer
            .output()
            .contains("nodemedic.io/do-not-remediate is set: no reboot")
            .then_some(())
    })
    .await;
    assert_eq!(phase(&s, &node).await.as_deref(), Some("drained"));
    assert!(requests(&s).await.is_empty(), "{:?}", requests(&s).await);
    drop(drainer);
    // Issue 64, point 5: what the drainer's token alone can do. It may write the requests
    // ConfigMap, the fence taint and the cordon, and read the Node's UID and bootID: a request so
    // written, for a node fenced and cordoned, is refused by the detector (not signed with the
    // drainer's key, which only its pod mounts), and nothing reboots.
    let fence = json!({"spec": {"taints": [{"key": nodemedic_common::reboot::FENCE_TAINT_KEY,
        "value": nodemedic_common::reboot::FENCE_TAINT_VALUE,
        "effect": nodemedic_common::reboot::FENCE_TAINT_EFFECT}]}});
    nodes
        .patch(&node, &PatchParams::default(), &Patch::Merge(fence))
        .await
        .unwrap();
    let api: Api<ConfigMap> = Api::namespaced(s.env.cluster.client.clone(), "kube-system");
    let uid = nodes.get(&node).await.unwrap().metadata.uid.unwrap();
    let request = json!({"node": node, "uid": uid, "bootID": BOOT_A,
        "requested": "2026-11-27T10:00:00Z", "until": "2026-11-27T10:20:00Z"});
    let cm: ConfigMap = serde_json::from_value(json!({"metadata": {
        "name": nodemedic_common::reboot::configmap_name(&s.lease())},
        "data": {node.clone(): request.to_string()}}))
    .unwrap();
    match api.create(&Default::default(), &cm).await {
        Ok(_) => {}
        Err(_) => {
            let name = cm.metadata.name.clone().unwrap();
            api.replace(&name, &Default::default(), &cm).await.unwrap();
        }
    }
    let refused = s
        .until(
            "the detector refuses the unsigned request",
            &det,
            || async {
                let events = s
                    .env
                    .cluster
                    .node_events_from(&node, &["nodemedic-detector"])
                    .await;
                events
                    .into_iter()
                    .find(|e| e.reason.as_deref() == Some("RebootRequestRefused"))
            },
        )
        .await;
    assert!(
        refused.message.unwrap_or_default().contains("not signed"),
        "refused for its missing signature"
    );
    assert_eq!(m.reboots(), 0, "nothing rebooted");
    drop(det);
    forget_requests(&s).await;
    s.env.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_zone_reboots_one_node_at_a_time_until_the_first_has_stayed_healthy_and_narrows_on_a_failure()
 {
    let s = Scenario::new().await;
    let zone = json!({"topology.kubernetes.io/zone": format!("zone-{}", s.env.id)});
    let first = s.env.node("first", "True", 3600, zone.clone()).await;
    let second = s.env.node("second", "True", 3500, zone).await;
    for n in [&first, &second] {
        Kubelet::booted(&s.env.cluster.client, n, BOOT_A).await;
    }
    let (drainer, _) = s
        .drainer(&[
            "KernelDeadlock=True: drain, reboot",
            "--drain-buffer=1s",
            "--max-drains-in-flight=2",
            "--slow-start-dwell=2s",
            "--slow-start-cooldown=1s",
            "--reboot-deadline=10s",
        ])
        .await;
    // The older problem first; the other waits for the zone's width.
    s.until("the first node's reboot requested", &drainer, || async {
        (phase(&s, &first).await.as_deref() == Some("rebooting")).then_some(())
    })
    .await;
    s.until("the second held by the slow start", &drainer, || async {
        drainer
            .output()
            .contains("slow start: 1 of 1 remediation(s) under way in zone-")
            .then_some(())
    })
    .await;
    assert_eq!(phase(&s, &second).await.as_deref(), Some("drained"));
    // The first comes back healed: proven, uncordoned; after its dwell the zone widens and the
    // second reboots.
    Kubelet::booted(&s.env.cluster.client, &first, BOOT_B).await;
    s.env
        .set_condition(&first, "KernelDeadlock", "False", 0)
        .await;
    s.until("the second node's reboot requested", &drainer, || async {
        (phase(&s, &second).await.as_deref() == Some("rebooting")).then_some(())
    })
    .await;
    assert!(!s.env.cordoned(&first).await, "the first was let go");
    let events: Api<k8s_openapi::api::core::v1::Event> = Api::all(s.env.cluster.client.clone());
    let lease = s.lease();
    let on_lease = |reason: &'static str, words: &'static str| {
        let (events, lease) = (&events, &lease);
        async move {
            let list = events.list(&Default::default()).await.unwrap();
            list.items
                .iter()
                .any(|e| {
                    e.reason.as_deref() == Some(reason)
                        && e.involved_object.name.as_deref() == Some(lease.as_str())
                        && e.message.as_deref().is_some_and(|m| m.contains(words))
                })
                .then_some(())
        }
    };
    s.until(
        "a SlowStartWidened Event on the drainer's Lease",
        &drainer,
        || on_lease("SlowStartWidened", "allows 2 remediations"),
    )
    .await;
    // The second never comes back: at its deadline a person, and the zone is back to one.
    s.until("the second needs a person", &drainer, || async {
        (phase(&s, &second).await.as_deref() == Some("needsperson")).then_some(())
    })
    .await;
    s.until(
        "a SlowStartNarrowed Event on the drainer's Lease",
        &drainer,
        || {
            on_lease(
                "SlowStartNarrowed",
                "back to one remediation at once (was 2)",
            )
        },
    )
    .await;
    drop(drainer);
    forget_requests(&s).await;
    s.env.cleanup().await;
}

/// Cluster API's Machine kind as Cluster API publishes it, installed where a real control plane
/// lacks it; served once this returns.
async fn install_machine_crd(client: &kube::Client) {
    let machines = ["cluster-api/cluster.x-k8s.io_machines.yaml"];
    install_fixture_crds(client, true, &machines).await;
}

/// The CRDs in `files` (under tests/fixtures), as their projects publish them; on a real control
/// plane (`real`) established before it returns.
pub(crate) async fn install_fixture_crds(client: &kube::Client, real: bool, files: &[&str]) {
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    for file in files {
        let crd = fixture_crd(file);
        let name = crd.metadata.name.clone().unwrap();
        match crds.create(&Default::default(), &crd).await {
            Ok(_) => {}
            Err(kube::Error::Api(e)) if e.code == 409 => {}
            Err(e) => panic!("install {file}: {e}"),
        }
        if real {
            established(&crds, &name).await;
        }
    }
}

/// The published CRD in `file` under tests/fixtures.
fn fixture_crd(
    file: &str,
) -> k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures")
        .join(file);
    serde_saphyr::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap()
}

/// Wait until the CRD `name` is established: its kind is served.
async fn established(
    crds: &Api<k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition>,
    name: &str,
) {
    nodemedic_tests::cluster::eventually(
        &format!("{name} established"),
        std::time::Duration::from_secs(60),
        || async {
            let c = crds.get(name).await.ok()?;
            (c.status?.conditions?.iter())
                .any(|c| c.type_ == "Established" && c.status == "True")
                .then_some(())
        },
    )
    .await;
}

/// The published CRD of `kind` in the fixtures.
fn fixture_of(kind: &str) -> Option<&'static str> {
    match kind {
        "Machine" => Some("cluster-api/cluster.x-k8s.io_machines.yaml"),
        "Metal3Machine" => Some("metal3/infrastructure.cluster.x-k8s.io_metal3machines.yaml"),
        "BareMetalHost" => Some("metal3/metal3.io_baremetalhosts.yaml"),
        _ => None,
    }
}

/// Give `node` the provider ID its kubelet (or cloud controller) sets once at registration, as the
/// admin: what Cluster API matches a Machine to its Node by.
async fn provider_id(s: &Scenario, node: &str) -> String {
    let id = format!("test://default/{node}");
    let nodes: Api<k8s_openapi::api::core::v1::Node> = Api::all(s.env.cluster.client.clone());
    let patch = json!({"spec": {"providerID": id}});
    nodes
        .patch(node, &PatchParams::default(), &Patch::Merge(patch))
        .await
        .unwrap();
    id
}

/// A Cluster API Machine (`cluster.x-k8s.io/v1beta2`, as Cluster API v1.11 and later store it) in
/// `default` whose `status.nodeRef` names `node` (by name only, as v1beta2 keeps it) and whose
/// provider ID is the node's.
async fn machine(
    s: &Scenario,
    version: &str,
    name: &str,
    node: &str,
) -> Option<Api<kube::api::DynamicObject>> {
    use kube::api::{ApiResource, DynamicObject, PostParams};
    use kube::core::GroupVersionKind;
    let gvk = GroupVersionKind::gvk("cluster.x-k8s.io", version, "Machine");
    let resource = ApiResource::from_gvk_with_plural(&gvk, "machines");
    let api: Api<DynamicObject> =
        Api::namespaced_with(s.env.cluster.client.clone(), "default", &resource);
    let id = provider_id(s, node).await;
    let mut m = DynamicObject::new(name, &resource);
    m.data = if version == "v1beta1" {
        // As Cluster API before v1.11 wrote it: the nodeRef with the Node's UID.
        let uid = s.env.get_node(node).await["metadata"]["uid"].clone();
        json!({"spec": {"clusterName": "c", "bootstrap": {"dataSecretName": "b"}, "providerID": id,
                "infrastructureRef": {"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1", "kind": "Metal3Machine", "name": name}},
            "status": {"nodeRef": {"kind": "Node", "name": node, "uid": uid}}})
    } else {
        json!({"spec": {"clusterName": "c", "bootstrap": {"dataSecretName": "b"}, "providerID": id,
                "infrastructureRef": {"apiGroup": "infrastructure.cluster.x-k8s.io", "kind": "Metal3Machine", "name": name}},
            "status": {"nodeRef": {"name": node}}})
    };
    let mut installed = false;
    loop {
        match api.create(&PostParams::default(), &m).await {
            Ok(_) => break,
            // A control plane without Cluster API: its Machine kind installed here, then again.
            Err(kube::Error::Api(e)) if e.code == 404 && !installed && s.env.cluster.real() => {
                install_machine_crd(&s.env.cluster.client).await;
                installed = true;
            }
            Err(kube::Error::Api(e)) if e.code == 404 => return None,
            Err(e) => panic!("create the Machine: {e}"),
        }
    }
    // Where the status is a subresource, create drops it: written there too.
    let status = json!({"status": m.data["status"].clone()});
    let _ = api
        .patch_status(name, &PatchParams::default(), &Patch::Merge(status))
        .await;
    Some(api)
}

/// Where Cluster API runs the nodes, a replacement marks the node's Machine for its
/// MachineHealthCheck instead of deleting the Node; a node that names a Machine of another Node
/// (it may write that annotation on itself) gets no Machine marked: its own Node is deleted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replacement_marks_the_cluster_api_machine_that_names_the_node_back() {
    replacement_marks_the_machine(Scenario::new().await, "v1beta2").await;
}

/// The same where Cluster API serves v1beta1 alone (before v1.11), on a control plane of its own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replacement_marks_a_v1beta1_only_machine_that_names_the_node_back() {
    let Some(s) = v1beta1_only_scenario().await else {
        return;
    };
    replacement_marks_the_machine(s, "v1beta1").await;
}

async fn replacement_marks_the_machine(s: Scenario, version: &str) {
    let honest = broken_node(&s, "capi").await;
    let liar = broken_node(&s, "liar").await;
    let other = s.env.node("other", "False", 3600, json!({})).await;
    let (m_honest, m_other) = (format!("m-{honest}"), format!("m-{other}"));
    let Some(machines) = machine(&s, version, &m_honest, &honest).await else {
        nodemedic_tests::envtest::say_skipped(
            "a_replacement_marks_the_cluster_api_machine_that_names_the_node_back",
            "Cluster API's Machine CRD",
        );
        return;
    };
    machine(&s, version, &m_other, &other).await.unwrap();
    let nodes: Api<k8s_openapi::api::core::v1::Node> = Api::all(s.env.cluster.client.clone());
    for (n, m) in [(&honest, &m_honest), (&liar, &m_other)] {
        let claim = json!({"metadata": {"annotations": {"cluster.x-k8s.io/machine": m,
            "cluster.x-k8s.io/cluster-namespace": "default"}}});
        nodes
            .patch(n, &PatchParams::default(), &Patch::Merge(claim))
            .await
            .unwrap();
    }
    let (drainer, _) = s
        .drainer(&["KernelDeadlock=True: drain, replace", "--drain-buffer=1s"])
        .await;
    let marked = |m: kube::api::DynamicObject| {
        m.metadata
            .annotations
            .is_some_and(|a| a.contains_key("cluster.x-k8s.io/remediate-machine"))
    };
    s.until("the honest node's Machine marked", &drainer, || async {
        marked(machines.get(&m_honest).await.unwrap()).then_some(())
    })
    .await;
    said(&s, &drainer, &honest, "MarkedMachineForRemediation").await;
    assert!(
        nodes.get_opt(&honest).await.unwrap().is_some(),
        "Cluster API deletes it, not the drainer"
    );
    // Its replacement holds the slow start of the nodes without a zone until the Node goes, as
    // Cluster API deletes it now (the test stands for it).
    nodes.delete(&honest, &Default::default()).await.unwrap();
    s.env.cluster.kubelet.forget(&honest);
    s.until("the liar's own Node deleted instead", &drainer, || async {
        nodes.get_opt(&liar).await.unwrap().is_none().then_some(())
    })
    .await;
    s.env.cluster.kubelet.forget(&liar);
    assert!(
        !marked(machines.get(&m_other).await.unwrap()),
        "another node's Machine is never marked on a node's word"
    );
    assert_eq!(phase(&s, &other).await, None, "the other node untouched");
    drop(drainer);
    for m in [&m_honest, &m_other] {
        let _ = machines.delete(m, &Default::default()).await;
    }
    forget_requests(&s).await;
    s.env.cleanup().await;
}

/// A node that reports no bootID cannot have a reboot proven: the ladder passes the reboot over
/// and replaces it. Every form says so in the same words: `explain` beforehand (the reboot
/// skipped, the replacement next), then the live drainer's log line and its ReplacingNode Event.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_without_a_boot_id_is_replaced_and_every_form_says_why() {
    let s = Scenario::new().await;
    let node = s.env.node("noboot", "True", 3600, json!({})).await;
    s.env.pod("default", "web-noboot", &node, json!({})).await;
    let ladder = "KernelDeadlock=True: drain, reboot, replace";
    let why =
        "the node reports no bootID (status.nodeInfo.bootID), so a reboot could not be proven";
    let explained = std::process::Command::new(debug_bin("nodemedic-drainer", "drainer"))
        .env("KUBECONFIG", &s.kubeconfig)
        .args([
            "explain",
            &node,
            "--live",
            "--lease-name",
            &s.lease(),
            ladder,
        ])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&explained.stdout);
    assert!(
        text.contains(&format!(
            "[drain: now] -> reboot (skipped: {why}) -> replace (next) -> a person (later)"
        )),
        "explain should promise the replacement, the reboot skipped:\n{text}\n{}",
        String::from_utf8_lossy(&explained.stderr)
    );
    let (drainer, _) = s.drainer(&[ladder, "--drain-buffer=1s"]).await;
    s.until("the Node deleted for its replacement", &drainer, || async {
        let api: Api<k8s_openapi::api::core::v1::Node> = Api::all(s.env.cluster.client.clone());
        api.get_opt(&node).await.unwrap().is_none().then_some(())
    })
    .await;
    s.env.cluster.kubelet.forget(&node);
    said(&s, &drainer, &node, "ReplacingNode").await;
    let events = s.env.drainer_events(&node).await;
    let replacing = events
        .iter()
        .find(|e| e.reason.as_deref() == Some("ReplacingNode"))
        .and_then(|e| e.message.clone())
        .unwrap_or_default();
    assert!(
        replacing.contains(&format!("no reboot: {why}")),
        "the Event says why: {replacing}"
    );
    assert!(
        !events
            .iter()
            .any(|e| e.reason.as_deref() == Some("RebootRequested")),
        "no reboot was asked for"
    );
    let log = drainer.output();
    assert!(
        log.lines()
            .any(|l| l.contains("replacing the node") && l.contains(&format!("no reboot: {why}"))),
        "the log line says why:\n{log}"
    );
    forget_requests(&s).await;
    s.env.cleanup().await;
}

/// A power-cycle provider on loopback: each POST recorded (its Authorization and body), 200.
async fn power_provider() -> (
    String,
    std::sync::Arc<std::sync::Mutex<Vec<(Option<String>, serde_json::Value)>>>,
) {
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let s = seen.clone();
    let app = axum::Router::new().route(
        "/power",
        axum::routing::post(move |h: axum::http::HeaderMap, body: axum::body::Bytes| {
            let s = s.clone();
            async move {
                let auth = (h.get(axum::http::header::AUTHORIZATION))
                    .and_then(|v| v.to_str().ok())
                    .map(String::from);
                let json = serde_json::from_slice(&body).unwrap_or_default();
                s.lock().unwrap().push((auth, json));
                axum::http::StatusCode::OK
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    (format!("http://{addr}/power"), seen)
}

/// [`power_provider`] over HTTPS, its certificate self-signed for 127.0.0.1 (its PEM, for
/// `--power-cycle-ca-file`, written to `dir/tls.crt`): (url, requests seen).
async fn power_provider_tls(
    dir: &std::path::Path,
) -> (
    String,
    std::sync::Arc<std::sync::Mutex<Vec<(Option<String>, serde_json::Value)>>>,
) {
    use rustls::pki_types::pem::PemObject;
    let (plain, seen) = power_provider().await;
    nodemedic_tests::webhook::write_cert(dir, "power-provider");
    let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
    let certs = rustls::pki_types::CertificateDer::pem_file_iter(dir.join("tls.crt"))
        .unwrap()
        .collect::<Result<Vec<_>, _>>()
        .unwrap();
    let key = rustls::pki_types::PrivateKeyDer::from_pem_file(dir.join("tls.key")).unwrap();
    let cfg = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .unwrap();
    // A TLS front that forwards to the plain provider: the requests land in the same `seen`.
    let to = plain
        .trim_start_matches("http://")
        .trim_end_matches("/power")
        .to_string();
    let app = axum::Router::new().route(
        "/power",
        axum::routing::post(move |h: axum::http::HeaderMap, body: axum::body::Bytes| {
            let to = to.clone();
            async move {
                let mut req = axum::http::Request::post(format!("http://{to}/power"));
                if let Some(a) = h.get(axum::http::header::AUTHORIZATION) {
                    req = req.header(axum::http::header::AUTHORIZATION, a);
                }
                let req = req.body(http_body_util::Full::new(body)).unwrap();
                let client = hyper_util::client::legacy::Client::builder(
                    hyper_util::rt::TokioExecutor::new(),
                )
                .build_http();
                match client.request(req).await {
                    Ok(r) => r.status(),
                    Err(_) => axum::http::StatusCode::BAD_GATEWAY,
                }
            }
        }),
    );
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let addr = listener.local_addr().unwrap();
    let tls = axum_server::tls_rustls::RustlsConfig::from_config(std::sync::Arc::new(cfg));
    tokio::spawn(async move {
        axum_server::from_tcp_rustls(listener, tls)
            .unwrap()
            .serve(app.into_make_service())
            .await
    });
    (format!("https://{addr}/power"), seen)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hung_node_is_power_cycled_from_outside_and_proven_by_its_new_boot() {
    let s = Scenario::new().await;
    let node = broken_node(&s, "hung").await;
    // Over HTTPS with the provider's own CA, trusted instead of the system's.
    let (url, seen) = power_provider_tls(s.dir.path()).await;
    let token = s.dir.path().join("power-token");
    std::fs::write(&token, "s3cret\n").unwrap();
    let (drainer, _) = s
        .drainer(&[
            "KernelDeadlock=True: drain, power-cycle",
            "--drain-buffer=1s",
            "--reboot-deadline=60s",
            &format!("--power-cycle-url={url}"),
            &format!("--power-cycle-token-file={}", token.display()),
            &format!(
                "--power-cycle-ca-file={}",
                s.dir.path().join("tls.crt").display()
            ),
        ])
        .await;
    let (auth, body) = s
        .until("the provider asked", &drainer, || async {
            seen.lock().unwrap().first().cloned()
        })
        .await;
    assert_eq!(auth.as_deref(), Some("Bearer s3cret"));
    assert_eq!(
        (
            body["action"].as_str(),
            body["node"].as_str(),
            body["bootID"].as_str()
        ),
        (Some("power-cycle"), Some(node.as_str()), Some(BOOT_A))
    );
    let uid = s.env.get_node(&node).await["metadata"]["uid"].clone();
    assert_eq!(
        body["operationID"],
        format!("{}-{BOOT_A}", uid.as_str().unwrap())
    );
    said(&s, &drainer, &node, "PowerCycleRequested").await;
    assert_eq!(phase(&s, &node).await.as_deref(), Some("rebooting"));
    assert!(
        requests(&s).await.is_empty(),
        "the node's detector is asked nothing"
    );
    let taints = s.env.get_node(&node).await["spec"]["taints"].to_string();
    assert!(
        !taints.contains("nodemedic.io/remediation"),
        "no fence: {taints}"
    );
    // The machine comes back with a new boot, the problem gone: proven, uncordoned.
    Kubelet::booted(&s.env.cluster.client, &node, BOOT_B).await;
    s.env
        .set_condition(&node, "KernelDeadlock", "False", 0)
        .await;
    said(&s, &drainer, &node, "RebootProven").await;
    s.until("uncordoned", &drainer, || async {
        (!s.env.cordoned(&node).await).then_some(())
    })
    .await;
    assert_eq!(seen.lock().unwrap().len(), 1, "asked once");
    drop(drainer);
    forget_requests(&s).await;
    s.env.cleanup().await;
}

/// An object of `kind` in `default`, created (its status written too).
async fn object(
    s: &Scenario,
    (group, version, kind, plural): (&str, &str, &str, &str),
    name: &str,
    data: serde_json::Value,
) -> Api<kube::api::DynamicObject> {
    use kube::api::{ApiResource, DynamicObject, PostParams};
    let gvk = kube::core::GroupVersionKind::gvk(group, version, kind);
    let resource = ApiResource::from_gvk_with_plural(&gvk, plural);
    let api: Api<DynamicObject> =
        Api::namespaced_with(s.env.cluster.client.clone(), "default", &resource);
    let mut o = DynamicObject::new(name, &resource);
    o.metadata.annotations = serde_json::from_value(data["annotations"].clone()).ok();
    o.data = json!({"spec": data["spec"].clone(), "status": data["status"].clone()});
    if let Err(kube::Error::Api(e)) = api.create(&PostParams::default(), &o).await
        && e.code == 404
        && s.env.cluster.real()
    {
        let file = fixture_of(kind)
            .unwrap_or_else(|| panic!("no published CRD of {kind} in tests/fixtures"));
        install_fixture_crds(&s.env.cluster.client, true, &[file]).await;
        api.create(&PostParams::default(), &o).await.unwrap();
    }
    let status = json!({"status": data["status"].clone()});
    let _ = api
        .patch_status(name, &PatchParams::default(), &Patch::Merge(status))
        .await;
    api
}

pub(super) const MACHINE: (&str, &str, &str, &str) =
    ("cluster.x-k8s.io", "v1beta2", "Machine", "machines");
pub(super) const METAL3_MACHINE: (&str, &str, &str, &str) = (
    "infrastructure.cluster.x-k8s.io",
    "v1beta2",
    "Metal3Machine",
    "metal3machines",
);
pub(super) const HOST: (&str, &str, &str, &str) =
    ("metal3.io", "v1alpha1", "BareMetalHost", "baremetalhosts");

/// `node`'s Machine, Metal3Machine and BareMetalHost as today's Cluster API (v1beta2) and Metal3
/// write them (the Machine naming the node back by name, its provider ID the node's, its status
/// written through the status subresource); the hosts' API.
async fn metal3_host(s: &Scenario, node: &str) -> Api<kube::api::DynamicObject> {
    let id = provider_id(s, node).await;
    object(
        s,
        MACHINE,
        &format!("m-{node}"),
        json!({
        "spec": {"clusterName": "c", "bootstrap": {"dataSecretName": "b"}, "providerID": id,
            "infrastructureRef": {"apiGroup": "infrastructure.cluster.x-k8s.io",
                "kind": "Metal3Machine", "name": format!("m3m-{node}")}},
        "status": {"nodeRef": {"name": node}}}),
    )
    .await;
    object(
        s,
        METAL3_MACHINE,
        &format!("m3m-{node}"),
        json!({
        "annotations": {"metal3.io/BareMetalHost": format!("default/host-{node}")},
        "spec": {}, "status": {}}),
    )
    .await;
    object(
        s,
        HOST,
        &format!("host-{node}"),
        json!({"spec": {"online": true}, "status": {"poweredOn": true}}),
    )
    .await
}

async fn names_machine(s: &Scenario, node: &str, machine: &str) {
    let nodes: Api<k8s_openapi::api::core::v1::Node> = Api::all(s.env.cluster.client.clone());
    let claim = json!({"metadata": {"annotations": {"cluster.x-k8s.io/machine": machine,
        "cluster.x-k8s.io/cluster-namespace": "default"}}});
    nodes
        .patch(node, &PatchParams::default(), &Patch::Merge(claim))
        .await
        .unwrap();
}

/// The drainer of the Metal3 scenarios: a ladder that power-cycles through Metal3, one
/// remediation at a time (the liar's turn comes once the first has proven itself).
async fn metal3_drainer(s: &Scenario) -> Proc {
    let (drainer, _) = s
        .drainer(&[
            "KernelDeadlock=True: drain, power-cycle",
            "--drain-buffer=1s",
            "--reboot-deadline=60s",
            "--max-drains-in-flight=2",
            "--slow-start-dwell=1s",
            "--slow-start-cooldown=1s",
            "--power-cycle-provider=metal3",
        ])
        .await;
    drainer
}

/// The operator rebooted `node`'s host: it comes back with a new boot, the problem gone, and the
/// reboot is proven; then the liar's power-cycle is refused.
async fn proven_then_liar_refused(s: &Scenario, drainer: &Proc, node: &str, liar: &str) {
    Kubelet::booted(&s.env.cluster.client, node, BOOT_B).await;
    s.env
        .set_condition(node, "KernelDeadlock", "False", 0)
        .await;
    said(s, drainer, node, "RebootProven").await;
    s.until("the liar refused", drainer, || async {
        has_event(s, liar, "PowerCycleFailed").await.then_some(())
    })
    .await;
}

/// The reboot annotation Metal3's operator acts on, on a BareMetalHost.
fn annotation(h: kube::api::DynamicObject) -> Option<String> {
    h.metadata
        .annotations
        .and_then(|a| a.get("reboot.metal3.io").cloned())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metal3_power_cycles_the_host_behind_the_nodes_machine_and_no_other() {
    let s = Scenario::new().await;
    let node = broken_node(&s, "bm").await;
    let liar = broken_node(&s, "liar").await;
    let healthy = s.env.node("healthy", "False", 3600, json!({})).await;
    let hosts = metal3_host(&s, &node).await;
    metal3_host(&s, &healthy).await;
    names_machine(&s, &node, &format!("m-{node}")).await;
    // What a node may write on itself: it names the healthy node's Machine as its own.
    names_machine(&s, &liar, &format!("m-{healthy}")).await;
    let drainer = metal3_drainer(&s).await;
    let asked = s
        .until("the host's reboot annotation", &drainer, || async {
            annotation(hosts.get(&format!("host-{node}")).await.ok()?)
        })
        .await;
    assert_eq!(asked, r#"{"mode":"hard"}"#);
    said(&s, &drainer, &node, "PowerCycleRequested").await;
    // The operator reboots the host; the node comes back with a new boot, the problem gone.
    // The liar's power-cycle leads nowhere: its Machine names the healthy node back.
    proven_then_liar_refused(&s, &drainer, &node, &liar).await;
    let spared = hosts.get(&format!("host-{healthy}")).await.unwrap();
    assert_eq!(
        annotation(spared),
        None,
        "the healthy node's host is not rebooted"
    );
    assert!(
        drainer.output().contains(&format!("names node {healthy}")),
        "the refusal says why"
    );
    drop(drainer);
    forget_requests(&s).await;
    s.env.cleanup().await;
}

/// Before Cluster API v1.11 (and Metal3's provider before v1.13) only v1beta1 is served: the
/// Machine's nodeRef keeps the node's UID and its infrastructure reference an apiVersion. On a
/// control plane of its own (the CRDs are cluster-wide), served v1beta1 only: the drainer reads that
/// version, the host behind the node's Machine is power-cycled and the liar's is not.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metal3_power_cycles_through_v1beta1_only_machines_too() {
    let Some(s) = v1beta1_only_scenario().await else {
        return;
    };
    let client = &s.env.cluster.client;
    let node = broken_node(&s, "bm1").await;
    let liar = broken_node(&s, "liar1").await;
    let healthy = s.env.node("healthy1", "False", 3600, json!({})).await;
    for n in [&node, &healthy] {
        let id = provider_id(&s, n).await;
        let uid = s.env.get_node(n).await["metadata"]["uid"].clone();
        object(
            &s,
            ("cluster.x-k8s.io", "v1beta1", "Machine", "machines"),
            &format!("m-{n}"),
            json!({
            "spec": {"clusterName": "c", "bootstrap": {"dataSecretName": "b"}, "providerID": id,
                "infrastructureRef": {"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1",
                    "kind": "Metal3Machine", "name": format!("m3m-{n}"), "namespace": "default"}},
            "status": {"nodeRef": {"kind": "Node", "name": n, "uid": uid}}}),
        )
        .await;
        object(&s, ("infrastructure.cluster.x-k8s.io", "v1beta1", "Metal3Machine", "metal3machines"),
            &format!("m3m-{n}"),
            json!({"annotations": {"metal3.io/BareMetalHost": format!("default/host-{n}")}, "spec": {}, "status": {}})).await;
        object(
            &s,
            HOST,
            &format!("host-{n}"),
            json!({"spec": {"online": true}, "status": {"poweredOn": true}}),
        )
        .await;
    }
    names_machine(&s, &node, &format!("m-{node}")).await;
    names_machine(&s, &liar, &format!("m-{healthy}")).await;
    let hosts: Api<kube::api::DynamicObject> = Api::namespaced_with(
        client.clone(),
        "default",
        &kube::api::ApiResource::from_gvk_with_plural(
            &kube::core::GroupVersionKind::gvk(HOST.0, HOST.1, HOST.2),
            HOST.3,
        ),
    );
    let drainer = metal3_drainer(&s).await;
    s.until(
        "the host's reboot annotation (v1beta1)",
        &drainer,
        || async { annotation(hosts.get(&format!("host-{node}")).await.ok()?) },
    )
    .await;
    proven_then_liar_refused(&s, &drainer, &node, &liar).await;
    assert_eq!(
        annotation(hosts.get(&format!("host-{healthy}")).await.unwrap()),
        None
    );
    assert!(
        drainer.output().contains(&format!("names node {healthy}")),
        "{}",
        drainer.output()
    );
    drop(drainer);
    forget_requests(&s).await;
    s.env.cleanup().await;
}

/// A scenario on a control plane of its own (the CRDs are cluster-wide) where Cluster API and Metal3
/// serve v1beta1 alone; `None` (said) without a real control plane.
async fn v1beta1_only_scenario() -> Option<Scenario> {
    use nodemedic_tests::envtest::{self, ControlPlane, KcmOptions};
    let Some(assets) = envtest::assets() else {
        envtest::say_skipped("v1beta1-only Machines", "a control plane of its own");
        return None;
    };
    let plane: &'static ControlPlane = Box::leak(Box::new(ControlPlane::start(
        &assets,
        Some(KcmOptions::default()),
    )));
    let s = Scenario::on(crate::env::Env::on(nodemedic_tests::cluster::Cluster::on(
        plane,
    )))
    .await;
    for file in [
        "cluster-api/cluster.x-k8s.io_machines.yaml",
        "metal3/infrastructure.cluster.x-k8s.io_metal3machines.yaml",
        "metal3/metal3.io_baremetalhosts.yaml",
    ] {
        install_fixture_crd_serving(&s.env.cluster.client, file, "v1beta1").await;
    }
    Some(s)
}

/// The published CRD in `file` (under tests/fixtures) as a release serving `version` alone (its
/// storage version) would have it: a Cluster API or Metal3 before v1beta2; established on return.
async fn install_fixture_crd_serving(client: &kube::Client, file: &str, version: &str) {
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
    let mut crd = fixture_crd(file);
    // A kind with no such version (Metal3's BareMetalHost, v1alpha1) stays as published.
    if crd.spec.versions.iter().any(|v| v.name == version) {
        crd.spec.versions.retain(|v| v.name == version);
        for v in &mut crd.spec.versions {
            v.served = true;
            v.storage = true;
        }
    }
    let name = crd.metadata.name.clone().unwrap();
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    crds.create(&Default::default(), &crd)
        .await
        .unwrap_or_else(|e| panic!("install {file}: {e}"));
    established(&crds, &name).await;
}

/// What a node's own credential may write cannot power-cycle anything or skip a step: a record
/// claiming a power-cycle under way, with an attempt that "failed for good" (which would send the
/// ladder on to a replacement), is refused; the provider is never asked, nothing is replaced.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forged_power_cycle_record_asks_no_provider_and_skips_no_step() {
    for s in Scenario::each_release().await {
        a_forged_power_cycle_record_asks_no_provider_and_skips_no_step_on(s).await;
    }
}

async fn a_forged_power_cycle_record_asks_no_provider_and_skips_no_step_on(s: Scenario) {
    let node = broken_node(&s, "forged-cycle").await;
    let (url, seen) = power_provider().await;
    let forged = json!({"phase": "rebooting", "owner": s.lease(), "bootId": BOOT_A,
        "step": "power-cycle", "stepAt": "2026-01-01T00:00:00Z", "ladder": "drain, power-cycle, replace",
        "episode": "x", "reason": "x", "cordonedAt": "2026-01-01T00:00:00Z", "drainAt": "2026-01-01T00:00:00Z",
        "ended": [{"step": "power-cycle", "outcome": "permanent failure", "started": "2026-01-01T00:00:00Z",
            "ended": "2026-01-01T00:01:00Z", "why": "forged"}]});
    let body = json!({"metadata": {"annotations": {"nodemedic.io/drain": forged.to_string()}}});
    let nodes: Api<k8s_openapi::api::core::v1::Node> = Api::all(s.env.cluster.client.clone());
    nodes
        .patch_status(&node, &PatchParams::default(), &Patch::Merge(body))
        .await
        .unwrap();
    let (drainer, _) = s
        .drainer(&[
            "KernelDeadlock=True: drain, power-cycle, replace",
            "--drain-buffer=1s",
            "--reboot-deadline=10m",
            &format!("--power-cycle-url={url}"),
            "--power-cycle-allow-http",
        ])
        .await;
    s.until("the forged record refused", &drainer, || async {
        has_event(&s, &node, "DrainRecordRejected")
            .await
            .then_some(())
    })
    .await;
    // Decided from its conditions alone: cordoned and drained as any node, then its own
    // power-cycle, asked once, by the drainer's own record.
    s.until("its own power-cycle asked", &drainer, || async {
        (!seen.lock().unwrap().is_empty()).then_some(())
    })
    .await;
    assert!(
        !has_event(&s, &node, "ReplacingNode").await,
        "no step skipped"
    );
    let asked = seen.lock().unwrap().clone();
    assert_eq!(asked.len(), 1, "{asked:?}");
    assert_ne!(
        asked[0].1["requested"], "2026-01-01T00:00:00Z",
        "the forged attempt is not the one asked"
    );
    drop(drainer);
    forget_requests(&s).await;
    s.env.cleanup().await;
}

/// Issue 67, point 6: before a replacement too. The drainer deletes the Node from outside; the
/// detector, watching its own Node, keeps the evidence once the record says `replacing`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn evidence_is_kept_before_a_replacement() {
    let s = Scenario::new().await;
    let m = Machine::at(&s, "replaced");
    let node = broken_node(&s, "replaced").await;
    let evidence = m.dir.join("evidence");
    let _det = m.detector_with(
        &s,
        &node,
        "detector.log",
        &[
            format!("--evidence-dir={}", evidence.display()),
            "--evidence-units=kubelet.service".into(),
        ],
    );
    let (drainer, _) = s
        .drainer(&["KernelDeadlock=True: drain, replace", "--drain-buffer=1s"])
        .await;
    let message = s
        .until("the EvidenceKept Event", &drainer, || async {
            detector_said(&s, &node, "EvidenceKept").await
        })
        .await;
    assert!(message.contains("before the replacement"), "{message}");
    let folders: Vec<_> = std::fs::read_dir(&evidence).unwrap().flatten().collect();
    assert_eq!(folders.len(), 1, "once per replacement");
    let n = std::fs::read_to_string(folders[0].path().join("node.json")).unwrap();
    assert!(n.contains("KernelDeadlock"), "{n}");
    said(&s, &drainer, &node, "ReplacingNode").await;
    drop(drainer);
    s.env.cluster.kubelet.forget(&node);
    forget_requests(&s).await;
    s.env.cleanup().await;
}

/// An attacker's review (issue 76): a signed request the drainer withdrew when the node's problem
/// cleared, saved by the drainer's token and written back before its deadline (with the fence
/// and the cordon, which that token may put on), was carried out by the detector on a healthy
/// node. A request names the problem it is for now, and the detector carries it out only while
/// its Node still carries it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_withdrawn_request_written_back_reboots_nothing() {
    let s = Scenario::new().await;
    let m = Machine::new(&s);
    let node = broken_node(&s, "withdrawn").await;
    let (drainer, _) = s
        .drainer(&["KernelDeadlock=True: drain, reboot", "--drain-buffer=1s"])
        .await;
    let saved = s
        .until("the reboot requested", &drainer, || async {
            requests(&s).await.get(&node).cloned()
        })
        .await;
    assert!(
        saved.contains("\"because\":[\"KernelDeadlock=True\"]"),
        "{saved}"
    );
    s.env
        .set_condition(&node, "KernelDeadlock", "False", 0)
        .await;
    s.until("the request withdrawn", &drainer, || async {
        (!requests(&s).await.contains_key(&node)).then_some(())
    })
    .await;
    drop(drainer);
    // As the drainer's token may: the fence and the cordon put back, the saved request with them.
    let nodes: Api<k8s_openapi::api::core::v1::Node> = Api::all(s.env.cluster.client.clone());
    let mut taints: Vec<serde_json::Value> = (nodes.get(&node).await.unwrap().spec)
        .and_then(|sp| sp.taints)
        .unwrap_or_default()
        .iter()
        .filter(|t| t.key != nodemedic_common::reboot::FENCE_TAINT_KEY)
        .map(|t| serde_json::to_value(t).unwrap())
        .collect();
    taints.push(json!({"key": nodemedic_common::reboot::FENCE_TAINT_KEY,
        "value": nodemedic_common::reboot::FENCE_TAINT_VALUE,
        "effect": nodemedic_common::reboot::FENCE_TAINT_EFFECT}));
    nodes
        .patch(
            &node,
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"unschedulable": true, "taints": taints}})),
        )
        .await
        .unwrap();
    let api: Api<ConfigMap> = Api::namespaced(s.env.cluster.client.clone(), "kube-system");
    api.patch(
        &nodemedic_common::reboot::configmap_name(&s.lease()),
        &PatchParams::default(),
        &Patch::Merge(json!({"data": {node.clone(): saved}})),
    )
    .await
    .unwrap();
    let det = m.detector(&s, &node, "detector.log");
    s.until("the detector's refusal", &det, || async {
        det.output()
            .contains("is not on the Node now")
            .then_some(())
    })
    .await;
    assert_eq!(m.reboots(), 0, "{}", det.output());
}

/// Issue 76, principle 1: a step under way passes the gates again while its request stands. A
/// pause on the Lease withdraws a standing reboot request (a detector started meanwhile reboots
/// nothing, and the ladder does not go on past the deadline); the saved request written back is
/// undone within 30 seconds and good for three at most; once the pause lifts, the request stands
/// again and the node's detector carries it out once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pause_withdraws_a_standing_reboot_request_until_it_lifts() {
    use nodemedic_drainer::model::keys::PAUSE_ANNOTATION;
    let s = Scenario::new().await;
    let m = Machine::new(&s);
    let node = broken_node(&s, "paused").await;
    let (drainer, _) = s
        .drainer(&[
            "KernelDeadlock=True: drain, reboot",
            "--drain-buffer=1s",
            "--reboot-deadline=20s",
        ])
        .await;
    let saved = s
        .until("the reboot requested", &drainer, || async {
            requests(&s).await.get(&node).cloned()
        })
        .await;
    let leases: Api<k8s_openapi::api::coordination::v1::Lease> =
        Api::namespaced(s.env.cluster.client.clone(), "kube-system");
    let pause = |value: serde_json::Value| {
        let (leases, name) = (leases.clone(), s.lease());
        async move {
            let body = json!({"metadata": {"annotations": {PAUSE_ANNOTATION: value}}});
            leases
                .patch(&name, &PatchParams::default(), &Patch::Merge(body))
                .await
                .unwrap();
        }
    };
    pause(json!("incident")).await;
    s.until("the request withdrawn by the pause", &drainer, || async {
        (!requests(&s).await.contains_key(&node)).then_some(())
    })
    .await;
    // Written back as the drainer's token may (an attacker's review): undone at the next renewal,
    // and good for minutes only in any case.
    let cms: Api<ConfigMap> = Api::namespaced(s.env.cluster.client.clone(), "kube-system");
    let name = nodemedic_common::reboot::configmap_name(&s.lease());
    let mut cm = cms.get(&name).await.unwrap();
    cm.data
        .get_or_insert_with(Default::default)
        .insert(node.clone(), saved.clone());
    cms.replace(&name, &Default::default(), &cm).await.unwrap();
    let r: nodemedic_common::reboot::RebootRequest = serde_json::from_str(&saved).unwrap();
    let until: k8s_openapi::jiff::Timestamp = r.until.parse().unwrap();
    let ahead = until.as_second() - k8s_openapi::jiff::Timestamp::now().as_second();
    assert!(
        ahead <= 180,
        "a request is good for 3 minutes at most: {saved}"
    );
    s.until("the write-back undone", &drainer, || async {
        (!requests(&s).await.contains_key(&node)).then_some(())
    })
    .await;
    let det = m.detector(&s, &node, "detector.log");
    // The detector has read the requests (none for its node) once it says it watches them; the
    // deadline passes meanwhile, and the ladder stays where it was.
    s.until("the detector watching the requests", &det, || async {
        det.output().contains("reboot requests").then_some(())
    })
    .await;
    s.until("the reboot deadline passed", &drainer, || async {
        let until = record(&s, &node).await?["stepUntil"].as_str()?.to_string();
        let until: k8s_openapi::jiff::Timestamp = until.parse().ok()?;
        (k8s_openapi::jiff::Timestamp::now() > until).then_some(())
    })
    .await;
    assert_eq!(phase(&s, &node).await.as_deref(), Some("rebooting"));
    assert_eq!(m.reboots(), 0, "{}", det.output());
    pause(serde_json::Value::Null).await;
    s.until(
        "the reboot carried out after the pause",
        &drainer,
        || async { (m.reboots() == 1).then_some(()) },
    )
    .await;
    let r = record(&s, &node).await.unwrap();
    assert_eq!(r["step"], "reboot", "started again, not a power-cycle: {r}");
    let ended = r["ended"].to_string();
    assert!(ended.contains("withheld"), "{r}");
    drop(det);
    drop(drainer);
    forget_requests(&s).await;
    s.env.cleanup().await;
}
