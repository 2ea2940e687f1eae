//! Installing with kustomize as docs/install.md says: each Kubernetes version's documented line run
//! with real kubectl against the test API server answering as that version (all or nothing: on a
//! cluster too old for a component, nothing is created), and the components of `deploy/components`
//! combined with real `kubectl kustomize`: every pair, all of them, and the documented example.

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;

use k8s_openapi::api::apps::v1::{DaemonSet, Deployment};
use k8s_openapi::api::core::v1::{ConfigMap, ServiceAccount};
use kube::Api;
use kube::api::{ApiResource, DynamicObject, ListParams};
use serde_json::Value;

use crate::checks::*;
use crate::render::*;

/// The install line docs/install.md gives for the Kubernetes versions of the row starting `row`.
fn documented_line(row: &str) -> String {
    let doc = std::fs::read_to_string(repo().join("docs/install.md")).unwrap();
    let line = doc
        .lines()
        .find(|l| l.starts_with(&format!("| {row} |")))
        .unwrap_or_else(|| panic!("no row {row:?} in docs/install.md"));
    line.split('`')
        .nth(1)
        .expect("a command in backticks")
        .to_string()
}

/// Run `line` (`kubectl ... && kubectl ...`) as a shell would, with `kubeconfig`; whether it
/// succeeded, and what kubectl said on stderr. `--validate=false` is added to each apply: the
/// test API server serves no OpenAPI document, which kubectl's client-side schema check reads
/// (the refusal tested here comes from discovery, which it serves).
fn run_line(line: &str, kubeconfig: &Path) -> (bool, String) {
    let mut said = String::new();
    for part in line.split(" && ") {
        let mut words = part.split_whitespace();
        assert_eq!(words.next(), Some("kubectl"), "{line}");
        let mut args: Vec<&str> = words.collect();
        if let Some(i) = args.iter().position(|a| *a == "apply") {
            args.insert(i + 1, "--validate=false");
        }
        let out = Command::new("kubectl")
            .args(&args)
            .current_dir(repo())
            .env("KUBECONFIG", kubeconfig)
            .output()
            .expect("kubectl");
        said.push_str(&String::from_utf8_lossy(&out.stderr));
        if !out.status.success() {
            return (false, said);
        }
    }
    (true, said)
}

/// How many of nodemedic's `K` objects kube-system holds.
async fn count<K>(client: &kube::Client) -> usize
where
    K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug,
{
    let lp = ListParams::default().labels("app.kubernetes.io/part-of=nodemedic");
    Api::<K>::namespaced(client.clone(), "kube-system")
        .list(&lp)
        .await
        .unwrap()
        .items
        .len()
}

/// How many of nodemedic's objects kube-system holds, by kind.
async fn installed(client: &kube::Client) -> Vec<(&'static str, usize)> {
    vec![
        ("DaemonSet", count::<DaemonSet>(client).await),
        ("Deployment", count::<Deployment>(client).await),
        ("ConfigMap", count::<ConfigMap>(client).await),
        ("ServiceAccount", count::<ServiceAccount>(client).await),
    ]
}

fn policies(client: &kube::Client) -> Api<DynamicObject> {
    let gvk = kube::api::GroupVersionKind::gvk(
        "admissionregistration.k8s.io",
        "v1",
        "ValidatingAdmissionPolicy",
    );
    Api::all_with(client.clone(), &ApiResource::from_gvk(&gvk))
}

fn kubectl_missing() -> bool {
    Command::new("kubectl")
        .arg("version")
        .arg("--client")
        .output()
        .is_err()
        && missing("kubectl", "it carries kustomize").is_none()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_version_line_installs_all_or_nothing() {
    if kubectl_missing() {
        return;
    }
    let (newer, older) = (
        documented_line("1.30 and later"),
        documented_line("1.26 to 1.29"),
    );
    let dir = tempfile::tempdir().unwrap();

    // 1.26: the 1.30 line creates nothing; the 1.26 line installs.
    let old = nodemedic_tests::cluster::Cluster::fake().await;
    old.fake.as_ref().unwrap().pretend_minor(26);
    let kubeconfig = dir.path().join("old");
    old.write_kubeconfig(&kubeconfig);
    let (ok, said) = run_line(&newer, &kubeconfig);
    assert!(!ok, "{newer} succeeded on 1.26");
    assert!(
        said.contains("no matches for kind \"ValidatingAdmissionPolicy\""),
        "{said}"
    );
    let nothing = installed(&old.client).await;
    assert!(nothing.iter().all(|(_, n)| *n == 0), "{nothing:?}");
    let (ok, said) = run_line(&older, &kubeconfig);
    assert!(ok, "{older}: {said}");
    let ds = Api::<DaemonSet>::namespaced(old.client.clone(), "kube-system")
        .get("nodemedic-detector")
        .await
        .unwrap();
    let env = ds.spec.unwrap().template.spec.unwrap().containers[0]
        .env
        .clone()
        .unwrap_or_default();
    assert!(
        env.iter().any(|e| e.name == "KUBECONFIG"),
        "the node's credential"
    );
    let all = installed(&old.client).await;
    assert!(all.iter().all(|(_, n)| *n > 0), "{all:?}");

    // What the dry run spares: a plain apply on 1.26 leaves the workloads without the policy.
    let plain = nodemedic_tests::cluster::Cluster::fake().await;
    plain.fake.as_ref().unwrap().pretend_minor(26);
    let kubeconfig = dir.path().join("plain");
    plain.write_kubeconfig(&kubeconfig);
    let second = newer.split(" && ").nth(1).unwrap().to_string();
    assert!(!second.contains("dry-run"), "{second}");
    let (ok, _) = run_line(&second, &kubeconfig);
    assert!(!ok);
    let half = installed(&plain.client).await;
    assert!(
        half.iter().any(|(k, n)| *k == "DaemonSet" && *n == 1),
        "{half:?}"
    );

    // 1.30: the 1.30 line installs, the policy with it.
    let new = nodemedic_tests::cluster::Cluster::fake().await;
    let kubeconfig = dir.path().join("new");
    new.write_kubeconfig(&kubeconfig);
    let (ok, said) = run_line(&newer, &kubeconfig);
    assert!(ok, "{newer}: {said}");
    policies(&new.client)
        .get("nodemedic-detector-own-node")
        .await
        .expect("the own-node policy");
    let all = installed(&new.client).await;
    assert!(all.iter().all(|(_, n)| *n > 0), "{all:?}");
}

/// Whether `component`'s change is in `objects`.
fn has(objects: &[Value], component: &str) -> bool {
    let named = |kind: &str, name: &str| {
        objects
            .iter()
            .any(|o| o["kind"] == kind && o["metadata"]["name"] == name)
    };
    let args = |kind: &str, name: &str| -> Vec<String> {
        let o = find(objects, kind, name);
        pod_spec(o)["containers"][0]["args"]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|x| x.as_str().map(String::from))
                    .collect()
            })
            .unwrap_or_default()
    };
    let arg = |kind: &str, name: &str, prefix: &str| {
        args(kind, name).iter().any(|a| a.starts_with(prefix))
    };
    let detector = find(objects, "DaemonSet", "nodemedic-detector");
    match component {
        "own-node-policy" => named("ValidatingAdmissionPolicy", "nodemedic-detector-own-node"),
        "kubelet-credential" => pod_spec(detector)["containers"][0]["env"]
            .as_array()
            .is_some_and(|e| e.iter().any(|v| v["name"] == "KUBECONFIG")),
        "early-pressure" => {
            find(objects, "ConfigMap", "nodemedic-detector-rules")["data"]["resource-monitor.yaml"]
                .is_string()
        }
        "reboot" => {
            let (d, r) = (
                arg("DaemonSet", "nodemedic-detector", "--reboot-requests="),
                arg("Deployment", "nodemedic-drainer", "--reboot-signing-key="),
            );
            assert_eq!(d, r, "the reboot component changes both or neither");
            d && pod_spec(detector)["hostPID"] == true
        }
        "guard" => {
            arg("Deployment", "nodemedic-drainer", "--guard-listen=")
                && named("ValidatingWebhookConfiguration", "nodemedic-kosmos-guard")
        }
        "delete-drained-nodes" => named("ClusterRole", "nodemedic-drainer-delete-nodes"),
        "cluster-api" => named("Role", "nodemedic-drainer-cluster-api"),
        "allow-force-delete" => named("ClusterRole", "nodemedic-drainer-force-delete"),
        "monitoring" => named("ServiceMonitor", "nodemedic-detector"),
        "power-cycle-metal3" | "power-cycle-medik8s" => {
            let provider = component.trim_start_matches("power-cycle-");
            arg(
                "Deployment",
                "nodemedic-drainer",
                &format!("--power-cycle-provider={provider}"),
            ) && named("Role", &format!("nodemedic-drainer-{component}"))
        }
        other => panic!("no check for the component {other}: add one"),
    }
}

#[test]
fn every_pair_of_components_and_the_documented_combination_render() {
    let components: Vec<String> = std::fs::read_dir(repo().join("deploy/components"))
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    assert_eq!(components.len(), 11, "{components:?}");
    // One power-cycle provider at a time (the drainer asks one): the others combine with all.
    let one_provider =
        |set: &[&str]| set.iter().filter(|c| c.starts_with("power-cycle-")).count() <= 1;
    let all_but_medik8s = components
        .iter()
        .map(String::as_str)
        .filter(|c| *c != "power-cycle-medik8s");
    let mut sets: Vec<Vec<&str>> = vec![all_but_medik8s.collect()];
    for (i, a) in components.iter().enumerate() {
        sets.push(vec![a]);
        for b in &components[i + 1..] {
            if one_provider(&[a, b]) {
                sets.push(vec![a, b]);
            }
        }
    }
    let root = repo().join(format!("target/components-{}", std::process::id()));
    for (n, set) in sets.iter().enumerate() {
        let dir = root.join(n.to_string());
        std::fs::create_dir_all(&dir).unwrap();
        let listed: String = set
            .iter()
            .map(|c| format!("  - ../../../deploy/components/{c}\n"))
            .collect();
        std::fs::write(
            dir.join("kustomization.yaml"),
            format!("resources:\n  - ../../../deploy/base\ncomponents:\n{listed}"),
        )
        .unwrap();
        let Some(objects) = kustomize(&dir) else {
            return;
        };
        check_types(&objects);
        for c in &components {
            assert_eq!(
                has(&objects, c),
                set.contains(&c.as_str()),
                "{c} with {set:?}"
            );
        }
    }
    // The example in docs/install.md, as written there (it sits beside deploy/).
    let doc = std::fs::read_to_string(repo().join("docs/install.md")).unwrap();
    let example = doc
        .split("```yaml\n")
        .find(|b| b.contains("components:"))
        .and_then(|b| b.split("```").next())
        .expect("the documented combination");
    let dir = root.join("my-cluster");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("kustomization.yaml"),
        example.replace("../deploy", "../../../deploy"),
    )
    .unwrap();
    let objects = kustomize(&dir).unwrap();
    std::fs::remove_dir_all(&root).unwrap();
    check_types(&objects);
    for c in ["kubelet-credential", "early-pressure", "reboot"] {
        assert!(has(&objects, c), "{c}");
    }
    assert!(!has(&objects, "own-node-policy"));
}
