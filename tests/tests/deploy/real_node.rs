//! The project's images on a real node: a control plane of the newest supported release with its
//! controller manager and scheduler, a kubelet of the same build with containerd and runc on this
//! machine (`nodemedic_tests::node`), and `deploy/` applied with kustomize as the install guide says,
//! the images named by an overlay as the README's. Then, as in production:
//! - a line written to this machine's `/dev/kmsg` reaches the detector in its pod, which sets the
//!   condition on its Node;
//! - the drainer in its pod cordons the node and evicts through a PodDisruptionBudget, which the real
//!   disruption controller keeps closed until the test opens it;
//! - the kubelet stops the evicted pod's containers;
//! - the recovery line clears the condition and the drainer uncordons the node;
//! - with `deploy/reboot` (signed requests), a second condition whose ladder reboots: the drainer
//!   signs the request, the detector in its pod verifies it and runs its reboot command with
//!   `nsenter` into the host's namespaces, as in production, with two words changed: a host process
//!   of the test's stands for PID 1 (this machine's sandbox lets no one enter its PID 1, root on the
//!   host included), and `touch` of a marker file the test reads for `systemctl reboot` (the
//!   machine stays up);
//! - with the Kosmos guard (`deploy/components/guard`), a real node-lifecycle flap: the node, now a
//!   Kosmos leaf, stops heartbeating (its kubelet frozen, its containers running on, as in a network
//!   partition); kube-controller-manager marks it unreachable and its taint eviction deletes a pod
//!   whose toleration ran out; the guard in the drainer's pod denies each deletion, says so in an
//!   Event, and the pod is still there when the kubelet is back.
//!
//! The pods reach the API server through the host's network (the node's pod network is loopback
//! only: nothing leaves this machine), told where by `KUBERNETES_SERVICE_HOST` as kube-proxy would;
//! the API server reaches the guard at 127.0.0.1:9443 (the drainer's port on the host's network), by
//! URL in place of the Service no kube-proxy routes here, trusting the test's own certificate.

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, Pod};
use kube::Api;
use kube::api::{ListParams, Patch, PatchParams, PostParams};
use nodemedic_tests::cluster::{eventually, within};
use nodemedic_tests::envtest::{self, ControlPlane};
use nodemedic_tests::node::{self, RealNode, SLEEP_IMAGE};
use serde_json::{Value, json};

use crate::images::{DETECTOR, DRAINER, built, say};
use crate::render::repo;

/// The condition this test's own rule sets, and the drainer acts on.
const CONDITION: &str = "NodemedicCiProblem";
/// The condition whose ladder reboots.
const REBOOT: &str = "NodemedicCiReboot";

/// The overlay: `deploy/` as the README installs it, the images named, one rule of the test's own
/// added to the rules ConfigMap, the drainer's settings for a one-node cluster, and the two pods on
/// the host's network.
fn overlay(marker: &str, api_port: u16, host_pid: u32, guard_ca: &str) -> PathBuf {
    let dir = repo().join(format!("target/real-node-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let host_net = |kind: &str, name: &str| {
        let env = |k: &str, v: &str| {
            format!(
                "      - {{op: add, path: /spec/template/spec/containers/0/env/-, value: {{name: {k}, value: \"{v}\"}}}}\n"
            )
        };
        format!(
            "  - target: {{kind: {kind}, name: {name}}}\n    patch: |-\n      - {{op: add, path: /spec/template/spec/hostNetwork, value: true}}\n{}{}",
            env("KUBERNETES_SERVICE_HOST", "127.0.0.1"),
            env("KUBERNETES_SERVICE_PORT", &api_port.to_string()),
        )
    };
    std::fs::write(
        dir.join("kustomization.yaml"),
        format!(
            "resources: [../../deploy/reboot]\n\
             components: [../../deploy/components/guard]\n\
             images:\n\
             \x20 - {{name: nodemedic/detector, newName: {}, newTag: ci}}\n\
             \x20 - {{name: nodemedic/drainer, newName: {}, newTag: ci}}\n\
             generatorOptions: {{disableNameSuffixHash: true}}\n\
             configMapGenerator:\n\
             \x20 - {{name: nodemedic-detector-rules, namespace: kube-system, behavior: merge, files: [ci-monitor.yaml]}}\n\
             \x20 - {{name: nodemedic-drainer-config, namespace: kube-system, behavior: replace, files: [drainer.yaml]}}\n\
             patches:\n{}{}\
             \x20 - target: {{kind: Deployment, name: nodemedic-drainer}}\n    patch: |-\n      - {{op: replace, path: /spec/replicas, value: 1}}\n\
             \x20 - target: {{kind: ValidatingWebhookConfiguration, name: nodemedic-kosmos-guard}}\n    patch: |-\n      - {{op: replace, path: /webhooks/0/clientConfig, value: {{url: 'https://127.0.0.1:9443/validate', caBundle: {ca}}}}}\n\
             \x20 - target: {{kind: DaemonSet, name: nodemedic-detector}}\n    patch: |-\n      - {{op: add, path: /spec/template/spec/containers/0/args/-, value: '--reboot-command=nsenter --target {host_pid} --mount --uts --ipc --net -- touch /tmp/{marker}-rebooted'}}\n\
             \x20 - target: {{kind: DaemonSet, name: nodemedic-detector}}\n    patch: |-\n      kind: DaemonSet\n      apiVersion: apps/v1\n      metadata: {{name: nodemedic-detector, namespace: kube-system}}\n      spec: {{template: {{spec: {{volumes: [{{name: state, hostPath: {{path: {state}, type: DirectoryOrCreate}}}}]}}}}}}\n",
            DETECTOR.rsplit_once(':').unwrap().0,
            DRAINER.rsplit_once(':').unwrap().0,
            host_net("DaemonSet", "nodemedic-detector"),
            host_net("Deployment", "nodemedic-drainer"),
            state = state_dir(marker).display(),
            ca = nodemedic_tests::webhook::base64(guard_ca.as_bytes()),
        ),
    )
    .unwrap();
    std::fs::write(
        dir.join("ci-monitor.yaml"),
        format!(
            // The test writes its lines to /dev/kmsg from user space (it has no kernel module to
            // say them): a monitor matches such records only when it says so (issue 76).
            "source: ci-monitor\ninput: {{kind: kmsg, userSpace: true}}\nlookback: 1m\nconditions:\n\
             \x20 - type: {CONDITION}\n    reason: NoCiProblem\n    message: no CI problem\n\
             \x20   recovery: {{pattern: '{marker} recovered'}}\n\
             \x20 - type: {REBOOT}\n    reason: NoCiReboot\n    message: no CI reboot asked\n\
             rules:\n\
             \x20 - type: permanent\n    condition: {CONDITION}\n    reason: CiProblem\n    pattern: '{marker} broken'\n\
             \x20 - type: permanent\n    condition: {REBOOT}\n    reason: CiReboot\n    pattern: '{marker} wedged'\n"
        ),
    )
    .unwrap();
    std::fs::write(
        dir.join("drainer.yaml"),
        format!(
            "conditions: ['{CONDITION}=True,0s', '{REBOOT}=True,0s: drain, reboot']\ndrainBuffer: 0s\nmaxUnhealthy: '100%'\nbreakerNew: '100%'\n\
             maxCordoned: '100%'\nmaxDrainsInFlight: 1\nprotectedPods: leave\n"
        ),
    )
    .unwrap();
    dir
}

/// The detector's state folder on the host (its reboots of the last day, its conditions), the
/// test's own: this machine stands for a new node each run, and the shipped `/var/lib/nodemedic`
/// would carry one run's reboots into the next (the detector's cap of 3 a day refused the fourth).
fn state_dir(marker: &str) -> PathBuf {
    PathBuf::from(format!("/tmp/{marker}-state"))
}

/// `kubectl` of the plane's own release.
fn kubectl(plane: &ControlPlane, kubeconfig: &std::path::Path, args: &[&str]) -> (bool, String) {
    let out = Command::new(plane.assets().join("kubectl"))
        .args(args)
        .env("KUBECONFIG", kubeconfig)
        .current_dir(repo())
        .output()
        .expect("kubectl");
    (
        out.status.success(),
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
    )
}

fn condition(node: &Node, type_: &str) -> Option<String> {
    nodemedic_common::conditions::find(node, type_).map(|c| c.status.clone())
}

fn kmsg(line: &str) {
    use std::io::Write;
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .open("/dev/kmsg")
        .expect("/dev/kmsg is writable (root)");
    f.write_all(format!("{line}\n").as_bytes()).unwrap();
}

/// Pods of `ns` with `selector`, by name, with their phase.
async fn pods(client: &kube::Client, ns: &str, selector: &str) -> Vec<Pod> {
    Api::<Pod>::namespaced(client.clone(), ns)
        .list(&ListParams::default().labels(selector))
        .await
        .unwrap()
        .items
}

fn running(p: &Pod) -> bool {
    p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_a_real_node_a_kernel_line_cordons_evicts_through_a_pdb_and_its_recovery_uncordons() {
    let missing = node::missing().or_else(crate::images::missing);
    if let Some(why) = missing {
        assert!(
            std::env::var_os("CI").is_none(),
            "the real-node test must run in CI, but {why} (.ci/run installs them)"
        );
        say(&format!("skipped the real-node test: {why}"));
        return;
    }
    let Some(assets) = envtest::assets() else {
        envtest::say_skipped("the real-node test", "a kubelet and a real control plane");
        return;
    };
    let started = std::time::Instant::now();
    built();
    RealNode::make_local_images();
    let name = format!("real-{}", std::process::id());
    let plane = ControlPlane::start_for_node(&assets, &name);
    let node = RealNode::start(&plane, &name, &[DETECTOR, DRAINER]).await;
    let client = plane.client();
    let nodes: Api<Node> = Api::all(client.clone());
    let wait = Duration::from_secs(180);
    eventually("the node to register Ready", wait, || async {
        let n = nodes.get_opt(&name).await.ok().flatten()?;
        (condition(&n, "Ready").as_deref() == Some("True")).then_some(())
    })
    .await;
    say(&format!(
        "real node: {name} Ready ({}) in {:.0} s",
        plane.release,
        started.elapsed().as_secs_f64()
    ));

    // The install line of the README, with the images named by an overlay.
    let marker = format!(
        "nodemedic-ci-{}-{}",
        std::process::id(),
        started.elapsed().as_nanos()
    );
    // The detector's state folder goes with the test, however it ends.
    struct Gone(PathBuf);
    impl Drop for Gone {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
    let _state = Gone(state_dir(&marker));
    // The host process the detector's nsenter enters, standing for PID 1.
    struct Host(std::process::Child);
    impl Drop for Host {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let host = Host(
        Command::new("sleep")
            .arg("infinity")
            .spawn()
            .expect("sleep"),
    );
    let tls = tempfile::tempdir().unwrap();
    let guard_ca = nodemedic_tests::webhook::write_cert(tls.path(), "nodemedic-guard");
    let dir = overlay(&marker, plane.port(), host.0.id(), &guard_ca);
    let kubeconfig = dir.join("kubeconfig");
    plane.write_kubeconfig(&kubeconfig);
    let k = dir.to_string_lossy().into_owned();
    // The guard's serving certificate, as the install guide's openssl steps make it.
    let (cert, key) = (
        format!("--cert={}", tls.path().join("tls.crt").display()),
        format!("--key={}", tls.path().join("tls.key").display()),
    );
    let (ok, said) = kubectl(
        &plane,
        &kubeconfig,
        &[
            "-n",
            "kube-system",
            "create",
            "secret",
            "tls",
            "nodemedic-guard-tls",
            &cert,
            &key,
        ],
    );
    assert!(ok, "{said}");
    drop(tls);
    // The reboot keys, as deploy/reboot/kustomization.yaml says to make them.
    let pem = nodemedic_common::reboot::SigningKey::generate_pem();
    let public = nodemedic_common::reboot::SigningKey::from_pem(&pem, "key.pem")
        .unwrap()
        .verifying_key()
        .to_pem();
    std::fs::write(dir.join("key.pem"), &pem).unwrap();
    std::fs::write(dir.join("public.pem"), &public).unwrap();
    for (what, name, file) in [
        ("secret", "nodemedic-drainer-reboot-key", "key.pem"),
        ("configmap", "nodemedic-reboot-public-key", "public.pem"),
    ] {
        let from = format!("--from-file={}", dir.join(file).display());
        let mut args = vec!["-n", "kube-system", "create", what];
        if what == "secret" {
            args.push("generic");
        }
        args.extend([name, from.as_str()]);
        let (ok, said) = kubectl(&plane, &kubeconfig, &args);
        assert!(ok, "{said}");
    }
    std::fs::remove_file(dir.join("key.pem")).unwrap();
    // The drainer's record key, made as the install guide says.
    let (ok, said) = crate::install::run_shell(
        &crate::install::record_key_line(),
        &kubeconfig,
        plane.assets(),
    );
    assert!(ok, "{said}");
    let (ok, said) = kubectl(
        &plane,
        &kubeconfig,
        &["apply", "--dry-run=server", "-k", &k],
    );
    assert!(ok, "{said}");
    let (ok, said) = kubectl(&plane, &kubeconfig, &["apply", "-k", &k]);
    assert!(ok, "{said}");
    let up = |selector: &'static str| {
        let client = client.clone();
        async move {
            let all = pods(&client, "kube-system", selector).await;
            all.iter().any(running).then_some(())
        }
    };
    let detector = "app.kubernetes.io/component=detector";
    let drainer = "app.kubernetes.io/component=drainer";
    for sel in [detector, drainer] {
        tokio::time::timeout(wait, eventually(sel, wait, || up(sel)))
            .await
            .unwrap_or_else(|_| panic!("{sel} not running: {}", node.logs()));
    }
    // Up: the detector wrote its conditions, the healthy default of the test's rule among them.
    eventually("the detector's conditions", wait, || async {
        let n = nodes.get(&name).await.ok()?;
        (condition(&n, CONDITION).as_deref() == Some("False")).then_some(())
    })
    .await;

    // A workload behind a PodDisruptionBudget that allows no disruption.
    let ns = "ci-app";
    let admin = |path: String, body: Value| {
        let client = client.clone();
        async move {
            let req = http::Request::post(path)
                .header("Content-Type", "application/json")
                .body(serde_json::to_vec(&body).unwrap())
                .unwrap();
            client.request_text(req).await.unwrap();
        }
    };
    admin(
        "/api/v1/namespaces".into(),
        json!({"metadata": {"name": ns}}),
    )
    .await;
    admin(
        format!("/apis/apps/v1/namespaces/{ns}/deployments"),
        json!({"metadata": {"name": "app"}, "spec": {"replicas": 1,
            "selector": {"matchLabels": {"app": "app"}},
            "template": {"metadata": {"labels": {"app": "app"}}, "spec": {
                "terminationGracePeriodSeconds": 1, "hostNetwork": true,
                "containers": [{"name": "app", "image": SLEEP_IMAGE, "imagePullPolicy": "Never"}]}}}}),
    )
    .await;
    let pdbs: Api<k8s_openapi::api::policy::v1::PodDisruptionBudget> =
        Api::namespaced(client.clone(), ns);
    pdbs.create(
        &PostParams::default(),
        &serde_json::from_value(json!({"metadata": {"name": "app"},
            "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "app"}}}}))
        .unwrap(),
    )
    .await
    .unwrap();
    let app = eventually("the workload running", wait, || async {
        let all = pods(&client, ns, "app=app").await;
        all.into_iter().find(running)
    })
    .await;
    let app_name = app.metadata.name.clone().unwrap();
    let containers = node.containers_of(ns, &app_name, "app");
    assert!(
        !containers.is_empty(),
        "the kubelet runs the workload's container"
    );

    // The kernel line: the detector sets the condition, the drainer cordons.
    kmsg(&format!("{marker} broken"));
    eventually("the condition True", wait, || async {
        let n = nodes.get(&name).await.ok()?;
        (condition(&n, CONDITION).as_deref() == Some("True")).then_some(())
    })
    .await;
    eventually("the cordon", wait, || async {
        let n = nodes.get(&name).await.ok()?;
        n.spec?.unschedulable?.then_some(())
    })
    .await;
    // The budget holds: the drainer's evictions are refused (429) and the pod stays.
    eventually("an eviction refused by the budget", wait, || async {
        plane
            .audit()
            .iter()
            .any(|e| {
                e.resource == "pods"
                    && e.subresource == "eviction"
                    && e.name == app_name
                    && e.code == 429
            })
            .then_some(())
    })
    .await;
    assert!(
        pods(&client, ns, "app=app")
            .await
            .iter()
            .any(|p| p.metadata.name.as_deref() == Some(&app_name)),
        "the pod stays while its budget allows no disruption"
    );
    // The budget opens: the eviction goes through and the kubelet stops the container.
    pdbs.patch(
        "app",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"minAvailable": 0}})),
    )
    .await
    .unwrap();
    eventually("the pod evicted", wait, || async {
        let all = pods(&client, ns, "app=app").await;
        (!all
            .iter()
            .any(|p| p.metadata.name.as_deref() == Some(&app_name)))
        .then_some(())
    })
    .await;
    eventually("the kubelet to stop its container", wait, || async {
        let tasks = node.running_tasks();
        containers.iter().all(|c| !tasks.contains(c)).then_some(())
    })
    .await;
    let evicted = plane.audit().iter().any(|e| {
        e.resource == "pods" && e.subresource == "eviction" && e.name == app_name && e.code == 201
    });
    assert!(evicted, "the pod went through the Eviction API");

    // The recovery line clears the condition; the drainer uncordons.
    kmsg(&format!("{marker} recovered"));
    eventually("the condition False", wait, || async {
        let n = nodes.get(&name).await.ok()?;
        (condition(&n, CONDITION).as_deref() == Some("False")).then_some(())
    })
    .await;
    eventually("the uncordon", wait, || async {
        let n = nodes.get(&name).await.ok()?;
        (!n.spec?.unschedulable.unwrap_or(false)).then_some(())
    })
    .await;
    say(&format!(
        "real node: kernel line -> condition -> cordon -> eviction through a PDB -> containers stopped -> uncordon, in {:.0} s",
        started.elapsed().as_secs_f64()
    ));

    // A reboot: the ladder's second step, signed by the drainer, carried out by the detector.
    let rebooted = PathBuf::from(format!("/tmp/{marker}-rebooted"));
    kmsg(&format!("{marker} wedged"));
    eventually("the cordon for the reboot", wait, || async {
        let n = nodes.get(&name).await.ok()?;
        n.spec?.unschedulable?.then_some(())
    })
    .await;
    if within(wait, || async { rebooted.exists().then_some(()) })
        .await
        .is_none()
    {
        panic!(
            "timed out after {wait:?} waiting for the reboot command run on the host\n{}",
            node.pod_logs("kube-system", "nodemedic-")
        );
    }
    let events: Api<k8s_openapi::api::core::v1::Event> = Api::namespaced(client.clone(), "default");
    let said = events
        .list(&ListParams::default().fields(&format!("involvedObject.name={name}")))
        .await
        .unwrap()
        .items;
    let reasons: Vec<&str> = said.iter().filter_map(|e| e.reason.as_deref()).collect();
    assert!(reasons.contains(&"Rebooting"), "{reasons:?}");
    assert!(!reasons.contains(&"RebootFailed"), "{reasons:?}");
    let _ = std::fs::remove_file(&rebooted);
    drop(host);
    say(&format!(
        "real node: signed reboot request carried out by the detector in its pod, in {:.0} s in all",
        started.elapsed().as_secs_f64()
    ));

    kosmos_flap(&plane, &node, &name, ns, wait).await;
    say(&format!(
        "real node: the Kosmos guard held its pod through a node-lifecycle flap, in {:.0} s in all",
        started.elapsed().as_secs_f64()
    ));
    drop(node);
    let _ = std::fs::remove_dir_all(&dir);
}

/// The node becomes a Kosmos leaf and its kubelet freezes (SIGSTOP: no heartbeat, its containers run
/// on, as in a network partition). A second node heartbeats meanwhile (its Lease renewed by the test),
/// so the node lifecycle controller does not take the cluster for one with every node down (it would
/// then evict nothing). The controller marks the leaf unreachable and its taint eviction deletes a pod
/// whose toleration ran out; the guard denies every such deletion, writes `PodDeletionBlocked`, and the
/// pod is still there when the kubelet comes back and the node is Ready again.
async fn kosmos_flap(plane: &ControlPlane, node: &RealNode, name: &str, ns: &str, wait: Duration) {
    let client = plane.client();
    let nodes: Api<Node> = Api::all(client.clone());
    nodes
        .patch(
            name,
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"kosmos.io/node": "true"}}})),
        )
        .await
        .unwrap();
    let peer = format!("{name}-peer");
    nodes
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": peer,
                "labels": {"kubernetes.io/hostname": peer}},
                "spec": {"taints": [{"key": "nodemedic.test/peer", "effect": "NoSchedule"}]}}))
            .unwrap(),
        )
        .await
        .unwrap();
    let now = nodemedic_tests::cluster::now_rfc3339();
    nodes
        .patch_status(
            &peer,
            &PatchParams::default(),
            &Patch::Strategic(
                json!({"status": {"conditions": [{"type": "Ready", "status": "True",
                "reason": "KubeletReady", "message": "the test renews its Lease",
                "lastHeartbeatTime": now, "lastTransitionTime": now}]}}),
            ),
        )
        .await
        .unwrap();
    struct Heartbeat(tokio::task::JoinHandle<()>);
    impl Drop for Heartbeat {
        fn drop(&mut self) {
            self.0.abort();
        }
    }
    let _heartbeat = Heartbeat(tokio::spawn({
        let leases: Api<k8s_openapi::api::coordination::v1::Lease> =
            Api::namespaced(client.clone(), "kube-node-lease");
        let peer = peer.clone();
        async move {
            loop {
                let now = k8s_openapi::jiff::Timestamp::now()
                    .strftime("%Y-%m-%dT%H:%M:%S%.6fZ")
                    .to_string();
                let lease = json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                    "metadata": {"name": peer, "namespace": "kube-node-lease"},
                    "spec": {"holderIdentity": peer, "leaseDurationSeconds": 40, "renewTime": now}});
                let _ = leases
                    .patch(
                        &peer,
                        &PatchParams::apply("nodemedic-test-kubelet").force(),
                        &Patch::Apply(lease),
                    )
                    .await;
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        }
    }));
    // A pod that tolerates an unreachable node for 2 s only, bound to the node (still cordoned and
    // fenced from the reboot step, whose proof never comes: the machine did not reboot), as Kosmos
    // binds its pods to a leaf.
    let pod: Pod = serde_json::from_value(json!({"metadata": {"name": "leaf-app", "namespace": ns},
        "spec": {"nodeName": name, "terminationGracePeriodSeconds": 1, "hostNetwork": true,
            "containers": [{"name": "app", "image": SLEEP_IMAGE, "imagePullPolicy": "Never"}],
            "tolerations": [
                {"operator": "Exists", "effect": "NoSchedule"},
                {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 2},
                {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 2}]}}))
    .unwrap();
    let app: Api<Pod> = Api::namespaced(client.clone(), ns);
    app.create(&PostParams::default(), &pod).await.unwrap();
    eventually("the leaf's pod running", wait, || async {
        app.get_opt("leaf-app")
            .await
            .ok()
            .flatten()
            .filter(running)
            .map(|_| ())
    })
    .await;

    // The flap: the kubelet frozen until the controller has tried and failed to delete the pod.
    let kubelet = Frozen::kubelet_of(name);
    eventually("the leaf tainted unreachable:NoExecute", wait, || async {
        let n = nodes.get(name).await.ok()?;
        n.spec?
            .taints?
            .iter()
            .any(|t| t.key == "node.kubernetes.io/unreachable" && t.effect == "NoExecute")
            .then_some(())
    })
    .await;
    let deletions = |code: fn(u16) -> bool| {
        plane
            .audit()
            .iter()
            .filter(|e| {
                e.verb == "delete"
                    && e.resource == "pods"
                    && e.subresource.is_empty()
                    && e.namespace == ns
                    && e.name == "leaf-app"
                    && e.user == envtest::KCM_USER
                    && code(e.code)
            })
            .count()
    };
    eventually(
        "the controller's deletion denied by the guard",
        wait,
        || async { (deletions(|c| c >= 400) > 0).then_some(()) },
    )
    .await;
    let events: Api<k8s_openapi::api::core::v1::Event> = Api::namespaced(client.clone(), "default");
    eventually("the guard's PodDeletionBlocked Event", wait, || async {
        let said = events
            .list(&ListParams::default().fields(&format!("involvedObject.name={name}")))
            .await
            .ok()?
            .items;
        said.iter()
            .any(|e| e.reason.as_deref() == Some("PodDeletionBlocked"))
            .then_some(())
    })
    .await;
    drop(kubelet);
    eventually("the leaf Ready again", wait, || async {
        let n = nodes.get(name).await.ok()?;
        (condition(&n, "Ready").as_deref() == Some("True")).then_some(())
    })
    .await;
    assert_eq!(
        deletions(|c| c < 400),
        0,
        "no deletion of the leaf's pod got through"
    );
    let kept = app.get("leaf-app").await.unwrap();
    assert!(
        kept.metadata.deletion_timestamp.is_none(),
        "the leaf's pod survived the flap"
    );
    assert!(
        !node.containers_of(ns, "leaf-app", "app").is_empty(),
        "its container still runs"
    );
    let _ = nodes.delete(&peer, &Default::default()).await;
}

/// A kubelet stopped with SIGSTOP, continued when dropped (however the test ends).
struct Frozen(i32);

impl Frozen {
    fn kubelet_of(node: &str) -> Frozen {
        let pattern = format!("kubelet .*--hostname-override {node} ");
        let out = Command::new("pgrep")
            .args(["-f", &pattern])
            .output()
            .expect("pgrep");
        let pids: Vec<i32> = String::from_utf8_lossy(&out.stdout)
            .split_whitespace()
            .filter_map(|p| p.parse().ok())
            .collect();
        assert_eq!(pids.len(), 1, "one kubelet for {node}: {pids:?}");
        // SAFETY: kill(2) with a pid the test started and a standard signal.
        assert_eq!(unsafe { libc::kill(pids[0], libc::SIGSTOP) }, 0);
        Frozen(pids[0])
    }
}

impl Drop for Frozen {
    fn drop(&mut self) {
        // SAFETY: as above.
        unsafe { libc::kill(self.0, libc::SIGCONT) };
    }
}
