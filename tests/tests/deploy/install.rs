//! Installing with kustomize as docs/install.md says: the documented line run with real kubectl
//! against real control planes of the oldest and newest supported releases (it installs whole, and
//! changes nothing where one object is refused), and the components of `deploy/components` combined
//! with real `kubectl kustomize`: every pair, all of them, and the documented example.

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;

use k8s_openapi::api::apps::v1::{DaemonSet, Deployment};
use k8s_openapi::api::core::v1::{ConfigMap, ServiceAccount};
use kube::Api;
use kube::api::{ApiResource, DynamicObject, ListParams};
use serde_json::{Value, json};

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

/// The line of docs/install.md that makes the drainer's record key Secret (a shell line: its key
/// comes from `$(head -c 32 /dev/urandom | base64)`).
pub fn record_key_line() -> String {
    let doc = std::fs::read_to_string(repo().join("docs/install.md")).unwrap();
    doc.lines()
        .find(|l| {
            l.starts_with(
                "kubectl -n kube-system create secret generic nodemedic-drainer-record-key ",
            )
        })
        .expect("docs/install.md makes the record key Secret")
        .to_string()
}

/// Run the shell line `line` with `kubeconfig` and the release's own kubectl from `bin` first on
/// the PATH; whether it succeeded, and what it said.
pub fn run_shell(line: &str, kubeconfig: &Path, bin: &Path) -> (bool, String) {
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let out = Command::new("sh")
        .args(["-c", line])
        .current_dir(repo())
        .env("KUBECONFIG", kubeconfig)
        .env("PATH", path)
        .output()
        .expect("sh");
    (
        out.status.success(),
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
    )
}

/// Run `line` (`kubectl ... && kubectl ...`) as a shell would, with `kubeconfig` and the release's
/// own kubectl from `bin`; whether it succeeded, and what kubectl said on stderr.
pub(crate) fn run_line(line: &str, kubeconfig: &Path, bin: &Path) -> (bool, String) {
    let mut said = String::new();
    for part in line.split(" && ") {
        let mut words = part.split_whitespace();
        assert_eq!(words.next(), Some("kubectl"), "{line}");
        let args: Vec<&str> = words.collect();
        let out = Command::new(bin.join("kubectl"))
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
    admission(client, "ValidatingAdmissionPolicy")
}

fn bindings(client: &kube::Client) -> Api<DynamicObject> {
    admission(client, "ValidatingAdmissionPolicyBinding")
}

fn admission(client: &kube::Client, kind: &str) -> Api<DynamicObject> {
    let gvk = kube::api::GroupVersionKind::gvk("admissionregistration.k8s.io", "v1", kind);
    Api::all_with(client.clone(), &ApiResource::from_gvk(&gvk))
}

/// The documented line on a fresh control plane of each supported release built here: on one
/// whose admission refuses one of the objects nothing is created; on a plain one everything is,
/// the own-node policy with it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_install_line_installs_whole_or_changes_nothing_on_each_supported_release() {
    use nodemedic_tests::envtest::{self, ControlPlane};
    let line = documented_line("1.34 to 1.37");
    let releases: Vec<_> = envtest::assets()
        .into_iter()
        .chain(envtest::oldest_assets())
        .collect();
    if releases.is_empty() {
        envtest::say_skipped(
            "the install line on real control planes",
            "real kube-apiservers of the supported releases",
        );
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    for (i, assets) in releases.iter().enumerate() {
        // A control plane of its own: the line installs into kube-system under fixed names.
        let plane = ControlPlane::start(assets, None);
        let release = plane.release.clone();
        let client = plane.client();
        let kubeconfig = dir.path().join(format!("kubeconfig-{i}"));
        plane.write_kubeconfig(&kubeconfig);

        // A cluster whose admission refuses one object (a policy of its own on ConfigMaps named
        // like the drainer's): the dry run stops the line before anything is created.
        let refuse = json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
            "metadata": {"name": "refuse-drainer-config"},
            "spec": {"failurePolicy": "Fail",
                     "matchConstraints": {"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"],
                         "operations": ["CREATE"], "resources": ["configmaps"]}]},
                     "validations": [{"expression": "object.metadata.name != 'nodemedic-drainer-config'",
                                      "message": "this cluster refuses the drainer's config"}]}});
        let binding = json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding",
            "metadata": {"name": "refuse-drainer-config"},
            "spec": {"policyName": "refuse-drainer-config", "validationActions": ["Deny"]}});
        policies(&client)
            .create(
                &Default::default(),
                &serde_json::from_value(refuse).unwrap(),
            )
            .await
            .unwrap();
        bindings(&client)
            .create(
                &Default::default(),
                &serde_json::from_value(binding).unwrap(),
            )
            .await
            .unwrap();
        // In force once the API server has compiled it: a dry-run create it refuses.
        let probe: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
        nodemedic_tests::cluster::eventually(
            "the cluster's own policy in force",
            std::time::Duration::from_secs(60),
            || async {
                let cm: ConfigMap = serde_json::from_value(
                    json!({"metadata": {"name": "nodemedic-drainer-config"}}),
                )
                .unwrap();
                let pp = kube::api::PostParams {
                    dry_run: true,
                    ..Default::default()
                };
                probe.create(&pp, &cm).await.is_err().then_some(())
            },
        )
        .await;
        let bin = assets.clone();
        let (ok, said) = run_line(&line, &kubeconfig, &bin);
        assert!(
            !ok && said.contains("refuses the drainer's config"),
            "{release}: {said}"
        );
        let nothing = installed(&client).await;
        assert!(
            nothing.iter().all(|(_, n)| *n == 0),
            "{release}: {nothing:?} after {said}"
        );
        assert!(
            policies(&client)
                .get("nodemedic-detector-own-node")
                .await
                .is_err(),
            "{release}"
        );

        // Without it, the line installs everything, the own-node policy with it.
        bindings(&client)
            .delete("refuse-drainer-config", &Default::default())
            .await
            .unwrap();
        policies(&client)
            .delete("refuse-drainer-config", &Default::default())
            .await
            .unwrap();
        let mut said = String::new();
        nodemedic_tests::cluster::eventually(
            "the line to install",
            std::time::Duration::from_secs(60),
            || {
                let (ok, s) = run_line(&line, &kubeconfig, &bin);
                said = s.clone();
                async move { ok.then_some(()) }
            },
        )
        .await;
        policies(&client)
            .get("nodemedic-detector-own-node")
            .await
            .unwrap_or_else(|e| panic!("{release}: the own-node policy: {e}; kubectl said {said}"));
        let all = installed(&client).await;
        assert!(all.iter().all(|(_, n)| *n > 0), "{release}: {all:?}");
        // The record key line: a Secret the drainer's pod mounts, with a key long enough to seal
        // with, and a new one each install.
        let (ok, said) = run_shell(&record_key_line(), &kubeconfig, &bin);
        assert!(ok, "{release}: {said}");
        let secret =
            Api::<k8s_openapi::api::core::v1::Secret>::namespaced(client.clone(), "kube-system")
                .get("nodemedic-drainer-record-key")
                .await
                .unwrap();
        let key = secret
            .data
            .unwrap_or_default()
            .remove("key")
            .expect("a key")
            .0;
        assert!(key.len() >= 32, "{release}: a key of {} bytes", key.len());
        let d: Deployment = Api::namespaced(client.clone(), "kube-system")
            .get("nodemedic-drainer")
            .await
            .unwrap();
        let spec = d.spec.unwrap().template.spec.unwrap();
        let mounted = spec.volumes.unwrap_or_default().into_iter().any(|v| {
            v.secret
                .is_some_and(|s| s.secret_name.as_deref() == Some("nodemedic-drainer-record-key"))
        });
        assert!(
            mounted,
            "{release}: the drainer's pod mounts the record key"
        );
    }
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
        "cloud-maintenance" => {
            let (d, r) = (
                find(objects, "ConfigMap", "nodemedic-detector-rules")["data"]
                    ["cloud-maintenance-monitor.yaml"]
                    .is_string(),
                arg(
                    "Deployment",
                    "nodemedic-drainer",
                    "--add-condition=MaintenanceScheduled=True",
                ),
            );
            assert_eq!(d, r, "the check and the condition come together");
            d
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
        "cluster-api" => {
            named("Role", "nodemedic-drainer-cluster-api")
                && named(
                    "ValidatingWebhookConfiguration",
                    "nodemedic-drainer-cluster-api-under-way",
                )
        }
        "allow-force-delete" => named("ClusterRole", "nodemedic-drainer-force-delete"),
        "kured" => {
            let (r, a) = (
                named("Role", "nodemedic-drainer-kured"),
                arg(
                    "Deployment",
                    "nodemedic-drainer",
                    "--kured-daemonset=kube-system/kured",
                ),
            );
            assert_eq!(r, a, "the grant and the flag come together");
            r
        }
        "monitoring" => named("ServiceMonitor", "nodemedic-detector"),
        "power-cycle-metal3" | "power-cycle-medik8s" => {
            let provider = component.trim_start_matches("power-cycle-");
            arg(
                "Deployment",
                "nodemedic-drainer",
                &format!("--power-cycle-provider={provider}"),
            ) && named("Role", &format!("nodemedic-drainer-{component}"))
                && named(
                    "ValidatingWebhookConfiguration",
                    &format!("nodemedic-drainer-{provider}-under-way"),
                )
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
    assert_eq!(components.len(), 13, "{components:?}");
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

/// docs/install.md's record key rotation, run as written (in a namespace of its own, beside a
/// Deployment of the drainer's name for `rollout restart`) with the newest release's kubectl: the
/// first part keeps the old key as `previous` beside a new 32-byte `key`, the second drops
/// `previous` and keeps the new key.
#[test]
fn the_record_key_rotation_commands_keep_the_old_key_beside_a_new_one() {
    use nodemedic_tests::envtest;
    let Some(plane) = envtest::shared() else {
        envtest::say_skipped("the record key rotation commands", "a real kube-apiserver");
        return;
    };
    let doc = std::fs::read_to_string(repo().join("docs/install.md")).unwrap();
    let block = doc
        .split("To rotate the key")
        .nth(1)
        .and_then(|rest| rest.split("```sh\n").nth(1))
        .and_then(|b| b.split("```").next())
        .expect("docs/install.md's rotation block");
    let (first, second) = block
        .split_once("# a week later")
        .expect("the block's two parts");
    let second = second.split_once('\n').unwrap().1;
    let ns = format!("nodemedic-rotate-{}", std::process::id());
    let mine = |text: &str| text.replace("kube-system", &ns);
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    plane.write_kubeconfig(&kubeconfig);
    let bin = plane.assets().to_path_buf();
    // Each part as a shell of its own runs it (a week apart), stopping at the first failure.
    let sh = |line: &str| {
        let (ok, said) = run_shell(&format!("set -ex\n{line}"), &kubeconfig, &bin);
        assert!(ok, "{line}\n{said}");
    };
    sh(&format!("kubectl create namespace {ns}"));
    sh(&format!(
        "kubectl -n {ns} create deployment nodemedic-drainer --image=registry.k8s.io/pause:3.9"
    ));
    sh(&mine(&record_key_line()));
    let data = |key: &str| -> Option<String> {
        let (ok, out) = run_shell(
            &format!(
                "kubectl -n {ns} get secret nodemedic-drainer-record-key -o jsonpath='{{.data.{key}}}'"
            ),
            &kubeconfig,
            &bin,
        );
        assert!(ok, "{out}");
        (!out.trim().is_empty()).then(|| out.trim().to_string())
    };
    let old = data("key").expect("the install line's key");
    sh(&mine(first));
    let new = data("key").expect("a new key");
    assert_eq!(
        data("previous").as_deref(),
        Some(old.as_str()),
        "the old key kept beside"
    );
    assert_ne!(new, old);
    let decoded = Command::new("sh")
        .args(["-c", &format!("printf %s '{new}' | base64 -d | wc -c")])
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&decoded.stdout).trim(), "32");
    // The two parts are a week apart; kubectl refuses a second restart within the second of the
    // first: wait for the clock to pass it.
    let (ok, at) = run_shell(
        &format!(
            "kubectl -n {ns} get deployment nodemedic-drainer -o jsonpath='{{.spec.template.metadata.annotations.kubectl\\.kubernetes\\.io/restartedAt}}'"
        ),
        &kubeconfig,
        &bin,
    );
    let at: k8s_openapi::jiff::Timestamp = at
        .trim()
        .parse()
        .unwrap_or_else(|e| panic!("{ok} {at}: {e}"));
    let until = at + std::time::Duration::from_secs(2);
    while k8s_openapi::jiff::Timestamp::now() < until {
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    sh(&mine(second));
    assert_eq!(data("previous"), None, "dropped");
    assert_eq!(data("key").as_deref(), Some(new.as_str()));
    sh(&format!("kubectl delete namespace {ns} --wait=false"));
}

/// The draino migration guide's commands (issue 78, point 3), run as written with real kubectl on a
/// control plane of their own (they bind cluster-wide names): the drainer's objects land in
/// kube-system (none in `default`, where `kubectl apply -f` without `-n` once put them), and draino's
/// own account may then make every call of the drainer's there.
#[test]
fn the_draino_account_commands_grant_the_drainers_calls_in_kube_system() {
    use nodemedic_tests::envtest::{self, ControlPlane};
    let Some(assets) = envtest::assets().into_iter().next() else {
        envtest::say_skipped("the draino migration commands", "a real kube-apiserver");
        return;
    };
    let doc = std::fs::read_to_string(repo().join("docs/migrating-from-draino.md")).unwrap();
    let block = doc
        .split("bind them to draino's account")
        .nth(1)
        .and_then(|rest| rest.split("```sh\n").nth(1))
        .and_then(|b| b.split("```").next())
        .expect("the guide's commands");
    let plane = ControlPlane::start(&assets, None);
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    plane.write_kubeconfig(&kubeconfig);
    let sh = |line: &str| run_shell(line, &kubeconfig, &assets);
    let (ok, said) = sh("kubectl -n kube-system create serviceaccount draino");
    assert!(ok, "{said}");
    let lines: Vec<&str> = block
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    assert_eq!(lines.len(), 3, "{block}");
    for line in &lines {
        let (ok, said) = sh(line);
        assert!(ok, "{line}\n{said}");
    }
    let can = |verb: &str, what: &str| {
        let (_, said) = sh(&format!(
            "kubectl auth can-i {verb} {what} -n kube-system --as=system:serviceaccount:kube-system:draino"
        ));
        // (kubectl warns on stderr that nodes are not namespaced; its answer is a line of its own.)
        said.lines().any(|l| l.trim() == "yes")
    };
    assert!(can("update", "leases/nodemedic-drainer"), "the Lease");
    assert!(
        can("update", "configmaps/nodemedic-drainer-reboots"),
        "its ConfigMaps"
    );
    assert!(can("patch", "nodes"), "the cordon");
    assert!(can("create", "pods --subresource=eviction"), "the drain");
    assert!(!can("get", "secrets"), "no Secret, as with its own account");
    let (ok, said) = sh("kubectl -n kube-system get lease nodemedic-drainer -o name");
    assert!(ok, "{said}");
    let (_, said) = sh("kubectl -n default get configmaps,leases -o name");
    assert!(!said.contains("nodemedic-drainer"), "{said}");
}
