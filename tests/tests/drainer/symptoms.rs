//! Ready but broken, seen from the cluster (issue 41): a node whose pods never start while pods
//! start elsewhere gets PodsNotStarting from the drainer, with counts and examples; an owner whose
//! pods wait on several nodes (an image that does not exist) blames no node; the condition clears
//! when a pod starts there; the drainer does not act on it unless its conditions name it.

use std::time::Duration;

use nodemedic_tests::cluster::{eventually, now_rfc3339};
use serde_json::{Value, json};

use crate::env::{Env, ago};

/// Make `pod` (in `default`) look bound `minutes` ago and still waiting for `reason`.
async fn waiting(env: &Env, pod: &str, minutes: i64, reason: &str) {
    waiting_in(env, "default", pod, minutes, reason).await;
}

async fn waiting_in(env: &Env, ns: &str, pod: &str, minutes: i64, reason: &str) {
    let status = json!({"phase": "Pending",
        "conditions": [{"type": "PodScheduled", "status": "True", "lastTransitionTime": ago(minutes * 60)}],
        "containerStatuses": [{"name": "c", "image": "registry.k8s.io/pause:3.9", "imageID": "", "ready": false,
            "restartCount": 0, "state": {"waiting": {"reason": reason}}}]});
    env.cluster.set_pod_status(ns, pod, status).await;
}

/// The cluster operators' node agent on `node`: a DaemonSet's pod in kube-system, waiting for its
/// sandbox `minutes`.
async fn agent(env: &Env, node: &str, minutes: i64) -> String {
    let ds = env
        .cluster
        .owner_of_kind("kube-system", "DaemonSet", &format!("agent-{node}"))
        .await;
    let pod = env
        .pod(
            "kube-system",
            "agent",
            node,
            json!({"metadata": {"ownerReferences": ds}}),
        )
        .await;
    waiting_in(env, "kube-system", &pod, minutes, "ContainerCreating").await;
    pod
}

/// Make `pod` look started now.
async fn started(env: &Env, pod: &str) {
    started_in(env, "default", pod).await;
}

async fn started_in(env: &Env, ns: &str, pod: &str) {
    let now = now_rfc3339();
    let status = json!({"phase": "Running",
        "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": now}],
        "containerStatuses": [{"name": "c", "image": "registry.k8s.io/pause:3.9", "imageID": "", "ready": true,
            "restartCount": 0, "state": {"running": {"startedAt": now}}}]});
    env.cluster.set_pod_status(ns, pod, status).await;
}

/// The Event a kubelet writes when it cannot create `pod`'s sandbox, counted 5 times.
async fn kubelet_event(env: &Env, node: &str, pod: &str) {
    let name = env.name("sandbox");
    let e: k8s_openapi::api::core::v1::Event = serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": "default"},
        "involvedObject": {"kind": "Pod", "name": pod, "namespace": "default"},
        "reason": "FailedCreatePodSandBox", "type": "Warning", "count": 5,
        "message": "Failed to create pod sandbox: rpc error: code = Unknown desc = failed to setup network for sandbox",
        "firstTimestamp": ago(900), "lastTimestamp": ago(60),
        "source": {"component": "kubelet", "host": node}
    }))
    .unwrap();
    kube::Api::<k8s_openapi::api::core::v1::Event>::namespaced(
        env.cluster.client.clone(),
        "default",
    )
    .create(&kube::api::PostParams::default(), &e)
    .await
    .unwrap();
}

async fn condition(env: &Env, node: &str) -> Option<Value> {
    let n = env.get_node(node).await;
    n["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == "PodsNotStarting")
        .cloned()
}

#[tokio::test]
async fn a_node_whose_pods_never_start_gets_pods_not_starting_and_a_bad_image_blames_no_node() {
    let env = Env::new().await;
    let broken = env.node("wedged", "False", 3600, json!({})).await;
    let fine = env.node("fine", "False", 3600, json!({})).await;
    let other = env.node("other", "False", 3600, json!({})).await;
    // On the wedged node a pod has waited 20 minutes in ContainerCreating, and so has the node
    // agent the cluster's operators run there (no single tenant owns both).
    let stuck = env.pod("default", "stuck", &broken, json!({})).await;
    waiting(&env, &stuck, 20, "ContainerCreating").await;
    let node_agent = agent(&env, &broken, 19).await;
    // A pod just started on the fine node.
    let runs = env.pod("default", "runs", &fine, json!({})).await;
    started(&env, &runs).await;
    // One ReplicaSet whose image does not exist: its pods wait on two nodes, one where nothing
    // else ever started.
    let bad = env.cluster.owner("default", "bad-image").await;
    let with_bad = json!({"metadata": {"ownerReferences": bad}});
    let bad_a = env.pod("default", "bad-a", &fine, with_bad.clone()).await;
    let bad_b = env.pod("default", "bad-b", &other, with_bad).await;
    waiting(&env, &bad_a, 20, "ImagePullBackOff").await;
    waiting(&env, &bad_b, 20, "ImagePullBackOff").await;
    // The wedged node's kubelet says why, as kubelets do (one Event, its count growing).
    kubelet_event(&env, &broken, &stuck).await;

    let running = env.start(env.config(Duration::from_secs(1)), "a").await;
    let set = eventually(
        "PodsNotStarting on the wedged node",
        Duration::from_secs(60),
        || async {
            condition(&env, &broken)
                .await
                .filter(|c| c["status"] == "True")
        },
    )
    .await;
    assert_eq!(set["reason"], "PodsWaitingToStart");
    let message = set["message"].as_str().unwrap();
    assert!(
        message.starts_with("2 pods bound here have waited over 10m to start and no container started here in that time: ")
            && message.contains(&format!("default/{stuck} (ContainerCreating, 20m)"))
            && message.ends_with("; its kubelet reported FailedCreatePodSandBox 5 times in that time, last 1m ago"),
        "{message}"
    );
    // The pass that set it saw the other nodes too: neither is blamed for the bad image.
    assert_eq!(condition(&env, &fine).await, None);
    assert_eq!(condition(&env, &other).await, None);
    // The Event comes after the condition is written.
    eventually(
        "the PodsWaitingToStart Event",
        Duration::from_secs(60),
        || async {
            env.event_reasons(&broken)
                .await
                .contains(&"PodsWaitingToStart".to_string())
                .then_some(())
        },
    )
    .await;
    // Not among the drainer's conditions: reported, not acted on.
    assert!(!env.cordoned(&broken).await);

    // The runtime recovers: the pods start, and the condition clears.
    started(&env, &stuck).await;
    started_in(&env, "kube-system", &node_agent).await;
    let cleared = eventually(
        "PodsNotStarting cleared",
        Duration::from_secs(90),
        || async {
            condition(&env, &broken)
                .await
                .filter(|c| c["status"] == "False")
        },
    )
    .await;
    assert_eq!(cleared["reason"], "PodsStart");
    running.shutdown().await;
    env.cleanup().await;
}

/// The attack: a node's own credential (a kubelet's) reports every pod bound to it stuck, some of
/// them of the same owner as a pod really stuck on another node. Only its own node gets the
/// condition; the other node's own stuck pod is then excused (pods elsewhere can only excuse a
/// node), and a healthy node is never named.
#[tokio::test]
async fn a_node_reporting_its_pods_stuck_names_only_itself() {
    let env = Env::new().await;
    let Some(server) = env
        .cluster
        .fake_or_skip("a_node_reporting_its_pods_stuck_names_only_itself")
    else {
        return;
    };
    let attacker = env.node("attacker", "False", 3600, json!({})).await;
    let healthy = env.node("healthy", "False", 3600, json!({})).await;
    let victim = env.node("victim", "False", 3600, json!({})).await;
    let shared = env.cluster.owner("default", "shared").await;
    let with_shared = json!({"metadata": {"ownerReferences": shared}});
    let own = env.pod("default", "own", &attacker, json!({})).await;
    // Its node agent too: a kubelet writes the status of every pod bound to its node.
    let ds = env
        .cluster
        .owner_of_kind("kube-system", "DaemonSet", "attacker-agent")
        .await;
    let own_agent = env
        .pod(
            "kube-system",
            "agent",
            &attacker,
            json!({"metadata": {"ownerReferences": ds}}),
        )
        .await;
    let copy = env
        .pod("default", "copy", &attacker, with_shared.clone())
        .await;
    let real = env.pod("default", "real", &victim, with_shared).await;
    waiting(&env, &real, 20, "ContainerCreating").await;
    let fine = env.pod("default", "fine", &healthy, json!({})).await;
    started(&env, &fine).await;
    // What a kubelet may write: the status of pods bound to its node, as itself.
    let kubelet = server.client_as_node(&attacker);
    for (ns, pod) in [
        ("default", &own),
        ("default", &copy),
        ("kube-system", &own_agent),
    ] {
        let pods: kube::Api<k8s_openapi::api::core::v1::Pod> =
            kube::Api::namespaced(kubelet.clone(), ns);
        let status = json!({"status": {"phase": "Pending",
            "conditions": [{"type": "PodScheduled", "status": "True", "lastTransitionTime": ago(3600)}],
            "containerStatuses": [{"name": "c", "image": "i", "imageID": "", "ready": false, "restartCount": 0,
                "state": {"waiting": {"reason": "ContainerCreating"}}}]}});
        pods.patch_status(
            pod,
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(status),
        )
        .await
        .unwrap();
    }
    let running = env.start(env.config(Duration::from_secs(1)), "a").await;
    let set = eventually(
        "PodsNotStarting on the attacker's node",
        Duration::from_secs(60),
        || async {
            condition(&env, &attacker)
                .await
                .filter(|c| c["status"] == "True")
        },
    )
    .await;
    assert!(
        set["message"]
            .as_str()
            .unwrap()
            .contains(&format!("default/{own} ")),
        "{set}"
    );
    // The same pass looked at every node: the healthy one is not named, and the victim's own
    // stuck pod shares an owner with pods waiting elsewhere, so it is excused, not blamed.
    assert_eq!(condition(&env, &healthy).await, None);
    assert_eq!(condition(&env, &victim).await, None);
    running.shutdown().await;
    env.cleanup().await;
}

/// Issue 64, point 1: a tenant who may create pods in its own namespace only binds them to nodes of
/// its choice: on n3 pods with an image that cannot be pulled, a crash loop, a volume that does not
/// exist (ContainerCreating for good), each of its own owner, and (issue 76, point 4) two such pods
/// from two namespaces; on n5 pods held by a finalizer and deleted. With both symptoms named among the drainer's conditions, as the operator guide
/// suggests, neither node gets a symptom or a cordon; a node whose runtime is wedged still does.
#[tokio::test]
async fn a_tenants_pods_never_choose_a_node_to_drain() {
    for env in Env::each_release().await {
        a_tenants_pods_never_choose_a_node_to_drain_on(env).await;
    }
}

async fn a_tenants_pods_never_choose_a_node_to_drain_on(env: Env) {
    let n3 = env.node("tenant-n3", "False", 3600, json!({})).await;
    let n5 = env.node("tenant-n5", "False", 3600, json!({})).await;
    let wedged = env.node("tenant-wedged", "False", 3600, json!({})).await;
    // Issue 76, principle 1: a PodsNotStarting condition written on a node with no stuck pod (by
    // the drainer's stolen token, which its node policy lets write that condition), an hour old.
    let forged = env.node("tenant-forged", "False", 3600, json!({})).await;
    env.set_condition(&forged, "PodsNotStarting", "True", 3600)
        .await;
    for (i, reason) in [
        "ImagePullBackOff",
        "CrashLoopBackOff",
        "InvalidImageName",
        "ContainerCreating",
    ]
    .iter()
    .enumerate()
    {
        let owner = env.cluster.owner("default", &format!("tenant-{i}")).await;
        let pod = env
            .pod(
                "default",
                &format!("t{i}"),
                &n3,
                json!({"metadata": {"ownerReferences": owner}}),
            )
            .await;
        waiting(&env, &pod, 30, reason).await;
    }
    // Issue 76, point 4: a second tenant namespace (or a second tenant) with the same kind of pod
    // on n3, each mounting a Secret that does not exist: ContainerCreating for good, by their own
    // doing. Two namespaces are not enough to blame the node.
    let other_ns = env.name("tenant-b");
    env.cluster.ensure_namespace(&other_ns, json!({})).await;
    for (ns, hint) in [("default", "vol-a"), (other_ns.as_str(), "vol-b")] {
        let pod = env
            .pod(
                ns,
                hint,
                &n3,
                json!({"spec": {"volumes": [{"name": "s", "secret": {"secretName": "does-not-exist"}}],
                    "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.9",
                        "volumeMounts": [{"name": "s", "mountPath": "/s"}]}]}}),
            )
            .await;
        waiting_in(&env, ns, &pod, 30, "ContainerCreating").await;
    }
    let held = env
        .pod(
            "default",
            "held",
            &n5,
            json!({"metadata": {"finalizers": ["tenant.example/hold"]},
            "spec": {"terminationGracePeriodSeconds": 0}}),
        )
        .await;
    let pods: kube::Api<k8s_openapi::api::core::v1::Pod> =
        kube::Api::namespaced(env.cluster.client.clone(), "default");
    pods.delete(&held, &kube::api::DeleteParams::default().grace_period(0))
        .await
        .unwrap();
    // Its grace period over a while: it counts from the first pass on, if it counts at all.
    let deleted = pods
        .get(&held)
        .await
        .unwrap()
        .metadata
        .deletion_timestamp
        .unwrap()
        .0;
    eventually(
        "the held pod 2s past its grace period",
        Duration::from_secs(60),
        || async {
            (k8s_openapi::jiff::Timestamp::now() > deleted + Duration::from_secs(2)).then_some(())
        },
    )
    .await;
    // The control: a wedged node, where a pod and the node agent both wait for their sandboxes.
    let stuck = env.pod("default", "stuck", &wedged, json!({})).await;
    waiting(&env, &stuck, 30, "ContainerCreating").await;
    agent(&env, &wedged, 30).await;

    let mut cfg = env.config(Duration::from_secs(1));
    cfg.conditions = vec![
        "KernelDeadlock=True,10m".parse().unwrap(),
        "PodsNotStarting=True,0s".parse().unwrap(),
        "PodsNotTerminating=True,0s".parse().unwrap(),
    ];
    cfg.symptoms.not_terminating_after = Some(Duration::from_secs(1));
    let running = env.start(cfg, "a").await;
    eventually(
        "the wedged node cordoned for PodsNotStarting",
        Duration::from_secs(60),
        || async { env.cordoned(&wedged).await.then_some(()) },
    )
    .await;
    // The pass that set the control saw every node; the barrier, that the drainer decided since.
    env.barrier("KernelDeadlock", json!({})).await;
    assert!(
        !env.cordoned(&forged).await,
        "a symptom condition no pass of the drainer's found cordoned its node"
    );
    for n in [&n3, &n5] {
        let node = env.get_node(n).await;
        let named: Vec<&Value> = node["status"]["conditions"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|c| c["type"] == "PodsNotStarting" || c["type"] == "PodsNotTerminating")
            .collect();
        assert!(named.is_empty(), "{n}: {named:?}");
        assert!(!env.cordoned(n).await, "{n} cordoned");
    }
    let still_held = pods.get(&held).await.unwrap();
    assert!(
        still_held.metadata.deletion_timestamp.is_some(),
        "the finalizer holds it"
    );
    running.shutdown().await;
    let _ = pods
        .patch(
            &held,
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(json!({"metadata": {"finalizers": null}})),
        )
        .await;
    let _ = kube::Api::<k8s_openapi::api::core::v1::Namespace>::all(env.cluster.client.clone())
        .delete(&other_ns, &Default::default())
        .await;
    env.cleanup().await;
}

/// Issue 76: a tenant with two namespaces binds pods to a node it picks, each with an inline NFS
/// volume on a server it runs, stops that server and deletes them: their processes hang in the
/// kernel (a hard mount, D state) and the kubelet reports them running long past their grace
/// period. Never the node's doing: no PodsNotTerminating, no cordon. The same two namespaces' pods
/// without such a volume, hung on another node, still set it there.
#[tokio::test]
async fn a_tenants_hung_nfs_pods_never_choose_a_node_to_drain() {
    for env in Env::each_release().await {
        a_tenants_hung_nfs_pods_never_choose_a_node_to_drain_on(env).await;
    }
}

async fn a_tenants_hung_nfs_pods_never_choose_a_node_to_drain_on(env: Env) {
    let chosen = env.node("nfs-chosen", "False", 3600, json!({})).await;
    let control = env.node("nfs-control", "False", 3600, json!({})).await;
    let other_ns = env.name("tenant-nfs");
    env.cluster.ensure_namespace(&other_ns, json!({})).await;
    let mut hung = Vec::new();
    for ns in ["default", other_ns.as_str()] {
        hung.push((ns, hung_pod(&env, ns, "nfs", &chosen, true).await));
        hung.push((ns, hung_pod(&env, ns, "plain", &control, false).await));
    }
    let mut cfg = env.config(Duration::from_secs(1));
    cfg.conditions = vec![
        "KernelDeadlock=True,10m".parse().unwrap(),
        "PodsNotTerminating=True,0s".parse().unwrap(),
    ];
    cfg.symptoms.not_terminating_after = Some(Duration::from_secs(1));
    let running = env.start(cfg, "a").await;
    let set = eventually(
        "PodsNotTerminating on the control node",
        Duration::from_secs(60),
        || async {
            let node = env.get_node(&control).await;
            node["status"]["conditions"]
                .as_array()?
                .iter()
                .find(|c| c["type"] == "PodsNotTerminating" && c["status"] == "True")
                .cloned()
        },
    )
    .await;
    assert!(
        set["message"]
            .as_str()
            .unwrap()
            .starts_with("2 pods deleted here"),
        "{set}"
    );
    // The pass that set it looked at every node; the barrier, that the drainer decided since.
    env.barrier("KernelDeadlock", json!({})).await;
    let node = env.get_node(&chosen).await;
    let named: Vec<&Value> = node["status"]["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["type"] == "PodsNotTerminating")
        .collect();
    assert!(named.is_empty(), "{chosen}: {named:?}");
    assert!(!env.cordoned(&chosen).await, "{chosen} cordoned");
    running.shutdown().await;
    for (ns, pod) in hung {
        let _ = kube::Api::<k8s_openapi::api::core::v1::Pod>::namespaced(
            env.cluster.client.clone(),
            ns,
        )
        .patch(
            &pod,
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(json!({"metadata": {"finalizers": null}})),
        )
        .await;
    }
    let _ = kube::Api::<k8s_openapi::api::core::v1::Namespace>::all(env.cluster.client.clone())
        .delete(&other_ns, &Default::default())
        .await;
    env.cleanup().await;
}

/// A pod in `ns` bound to `node`, deleted, whose container its kubelet still reports running (held
/// by a finalizer here, as no kubelet runs): with an inline NFS volume when `nfs`.
async fn hung_pod(env: &Env, ns: &str, hint: &str, node: &str, nfs: bool) -> String {
    let mut extra = json!({"metadata": {"finalizers": ["tenant.example/hold"]},
        "spec": {"terminationGracePeriodSeconds": 0}});
    if nfs {
        extra["spec"]["volumes"] =
            json!([{"name": "share", "nfs": {"server": "10.96.0.99", "path": "/export"}}]);
        extra["spec"]["containers"] = json!([{"name": "c", "image": "registry.k8s.io/pause:3.9",
            "volumeMounts": [{"name": "share", "mountPath": "/share"}]}]);
    }
    let pod = env.pod(ns, hint, node, extra).await;
    let status = json!({"phase": "Running",
        "containerStatuses": [{"name": "c", "image": "registry.k8s.io/pause:3.9", "imageID": "", "ready": true,
            "restartCount": 0, "state": {"running": {"startedAt": ago(600)}}}]});
    env.cluster.set_pod_status(ns, &pod, status).await;
    let pods: kube::Api<k8s_openapi::api::core::v1::Pod> =
        kube::Api::namespaced(env.cluster.client.clone(), ns);
    pods.delete(&pod, &kube::api::DeleteParams::default().grace_period(0))
        .await
        .unwrap();
    let deleted = pods
        .get(&pod)
        .await
        .unwrap()
        .metadata
        .deletion_timestamp
        .unwrap()
        .0;
    eventually(
        "the pod 2s past its grace period",
        Duration::from_secs(60),
        || async {
            (k8s_openapi::jiff::Timestamp::now() > deleted + Duration::from_secs(2)).then_some(())
        },
    )
    .await;
    pod
}

/// A client acting as node `name`'s kubelet (`system:node:NAME` in `system:nodes`): on a real
/// control plane through impersonation (its Node authorizer and NodeRestriction decide), on the
/// test API server as its node identity.
fn kubelet_of(env: &Env, name: &str) -> kube::Client {
    if let Some(plane) = env.cluster.plane {
        return plane.client_impersonating_groups(
            &format!("system:node:{name}"),
            &["system:nodes", "system:authenticated"],
        );
    }
    env.cluster
        .fake
        .as_ref()
        .expect("the test API server")
        .client_as_node(name)
}

/// Issue 76 (an attacker's review): root on node `rogue` (its kubelet credential) reports its own
/// pod of the node agents' DaemonSet waiting, which the kubelet may. That DaemonSet then "waited
/// on several nodes", which excused its pod really stuck on a wedged node: the wedged node was
/// hidden from PodsNotStarting. Now the wedged node is still found and cordoned (rogue may get its
/// own node reported, as it always could); rogue cannot write the wedged node's pods.
#[tokio::test]
async fn one_rogue_kubelet_cannot_hide_a_wedged_node() {
    for env in Env::each_release().await {
        one_rogue_kubelet_cannot_hide_a_wedged_node_on(env).await;
    }
}

async fn one_rogue_kubelet_cannot_hide_a_wedged_node_on(env: Env) {
    let Agents {
        wedged,
        rogue,
        stuck_agent,
        rogues_agent,
    } = agents(&env, "rogue").await;
    // The lie, as rogue's kubelet.
    let as_rogue: kube::Api<k8s_openapi::api::core::v1::Pod> =
        kube::Api::namespaced(kubelet_of(&env, &rogue), "kube-system");
    let waiting = json!({"status": {"phase": "Pending",
        "conditions": [{"type": "PodScheduled", "status": "True", "lastTransitionTime": ago(1800)}],
        "containerStatuses": [{"name": "c", "image": "registry.k8s.io/pause:3.9", "imageID": "", "ready": false,
            "restartCount": 0, "state": {"waiting": {"reason": "ContainerCreating"}}}]}});
    as_rogue
        .patch_status(
            &rogues_agent,
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(waiting.clone()),
        )
        .await
        .expect("a kubelet writes the status of a pod bound to its node");
    if env.cluster.real() {
        let other = as_rogue
            .patch_status(
                &stuck_agent,
                &kube::api::PatchParams::default(),
                &kube::api::Patch::Merge(waiting),
            )
            .await;
        assert!(
            matches!(&other, Err(kube::Error::Api(e)) if e.code == 403),
            "{other:?}"
        );
    }
    let running = env.start(pods_not_starting_watched(&env), "a").await;
    eventually(
        "the wedged node cordoned for PodsNotStarting",
        Duration::from_secs(60),
        || async { env.cordoned(&wedged).await.then_some(()) },
    )
    .await;
    let set = condition(&env, &wedged).await.expect("PodsNotStarting");
    assert_eq!(set["status"], "True", "{set}");
    running.shutdown().await;
    env.cleanup().await;
}

/// An attacker's second review (issue 76): one kubelet reads its own agent pod, learning the
/// agents' DaemonSet's UID (it writes nothing); a tenant's pods in its own namespace name that UID
/// as their controller and wait on two healthy nodes (a Secret that does not exist). The
/// DaemonSet then "waited on three nodes", and its pod stuck on a wedged node was excused. Owners
/// are counted in their own namespace: the wedged node is still found and cordoned.
#[tokio::test]
async fn a_tenants_pods_naming_a_daemonsets_uid_cannot_hide_a_wedged_node() {
    for env in Env::each_release().await {
        decoys_cannot_hide_a_wedged_node_on(env).await;
    }
}

async fn decoys_cannot_hide_a_wedged_node_on(env: Env) {
    let Agents {
        wedged,
        rogue,
        rogues_agent,
        ..
    } = agents(&env, "decoy").await;
    let as_rogue: kube::Api<k8s_openapi::api::core::v1::Pod> =
        kube::Api::namespaced(kubelet_of(&env, &rogue), "kube-system");
    let mine = as_rogue
        .get(&rogues_agent)
        .await
        .expect("a kubelet reads a pod bound to its node");
    let uid = mine.metadata.owner_references.unwrap()[0].uid.clone();
    let decoy_owner = json!([{"apiVersion": "decoy.example.com/v1", "kind": "Decoy",
        "name": "decoy", "uid": uid, "controller": true}]);
    for hint in ["decoy-a", "decoy-b"] {
        let node = env.node(hint, "False", 3600, json!({})).await;
        let d = env
            .pod(
                "default",
                hint,
                &node,
                json!({"metadata": {"ownerReferences": decoy_owner.clone()},
                    "spec": {"volumes": [{"name": "s", "secret": {"secretName": "does-not-exist"}}]}}),
            )
            .await;
        waiting_in(&env, "default", &d, 30, "ContainerCreating").await;
    }
    let running = env.start(pods_not_starting_watched(&env), "a").await;
    eventually(
        "the wedged node cordoned beside the decoys",
        Duration::from_secs(60),
        || async { env.cordoned(&wedged).await.then_some(()) },
    )
    .await;
    running.shutdown().await;
    env.cleanup().await;
}

/// A wedged node whose node agent (a kube-system DaemonSet's pod) waits for its sandbox, and a
/// node `hint`-rogue whose agent of the same DaemonSet runs.
struct Agents {
    wedged: String,
    rogue: String,
    stuck_agent: String,
    rogues_agent: String,
}

async fn agents(env: &Env, hint: &str) -> Agents {
    let wedged = env
        .node(&format!("{hint}-wedged"), "False", 3600, json!({}))
        .await;
    let rogue = env
        .node(&format!("{hint}-rogue"), "False", 3600, json!({}))
        .await;
    let ds = env
        .cluster
        .owner_of_kind("kube-system", "DaemonSet", &env.name("agents"))
        .await;
    let with_ds = json!({"metadata": {"ownerReferences": ds}});
    let stuck_agent = env
        .pod("kube-system", "agent-w", &wedged, with_ds.clone())
        .await;
    waiting_in(env, "kube-system", &stuck_agent, 30, "ContainerCreating").await;
    let rogues_agent = env.pod("kube-system", "agent-r", &rogue, with_ds).await;
    started_in(env, "kube-system", &rogues_agent).await;
    Agents {
        wedged,
        rogue,
        stuck_agent,
        rogues_agent,
    }
}

/// The drainer's settings watching PodsNotStarting at once (and KernelDeadlock, its barrier's).
fn pods_not_starting_watched(env: &Env) -> nodemedic_drainer::config::Config {
    let mut cfg = env.config(Duration::from_secs(1));
    cfg.conditions = vec![
        "KernelDeadlock=True,10m".parse().unwrap(),
        "PodsNotStarting=True,0s".parse().unwrap(),
    ];
    cfg
}
