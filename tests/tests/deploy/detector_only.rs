//! The detector alone, for a platform that repairs nodes itself (issue 79, point 3; the operator
//! guide's "Beside other remediators"): `deploy/detector-only` and Helm's `drainer.enabled: false`
//! render the detector's objects exactly as the full install does and nothing of the drainer, the
//! guard or the plugin's roles; Helm refuses reboots without the drainer; and the overlay installs
//! on a real control plane with kubectl's all-or-nothing line.

use k8s_openapi::api::apps::v1::{DaemonSet, Deployment};
use kube::Api;
use serde_json::{Value, json};

use crate::checks::*;
use crate::render::*;

/// Whether `o` is the drainer's (or the guard's, which the drainer serves): its name says so.
fn drainers(o: &Value) -> bool {
    let name = o["metadata"]["name"].as_str().unwrap_or_default();
    name.contains("drainer") || name.contains("guard") || name.contains("kubectl-nodemedic")
}

fn names(objects: &[Value]) -> Vec<String> {
    let mut n: Vec<String> = objects
        .iter()
        .map(|o| {
            format!(
                "{}/{}",
                o["kind"].as_str().unwrap_or(""),
                o["metadata"]["name"].as_str().unwrap_or("")
            )
        })
        .collect();
    n.sort();
    n
}

/// The detector's objects of a full rendering, in order.
fn detectors(objects: &[Value]) -> Vec<&Value> {
    objects.iter().filter(|o| !drainers(o)).collect()
}

#[test]
fn the_detector_alone_renders_its_objects_as_the_full_install_and_nothing_of_the_drainer() {
    let (Some(full), Some(alone)) = (
        kustomize(&repo().join("deploy")),
        kustomize(&repo().join("deploy/detector-only")),
    ) else {
        return;
    };
    check_types(&alone);
    assert!(
        alone.iter().all(|o| !drainers(o)),
        "drainer objects left: {:?}",
        names(&alone)
    );
    assert_eq!(
        alone.iter().collect::<Vec<_>>(),
        detectors(&full),
        "the detector's objects as deploy/ has them"
    );
    assert!(
        full.iter().any(drainers),
        "the filter finds the drainer in the full install"
    );
    let chart = repo().join("deploy/helm/nodemedic");
    let Some(full) = helm_template(&chart, "nodemedic", "kube-system", None) else {
        return;
    };
    let off = json!({"drainer": {"enabled": false}});
    let alone = helm_template(&chart, "nodemedic", "kube-system", Some(&off)).unwrap();
    check_types(&alone);
    assert!(
        alone.iter().all(|o| !drainers(o)),
        "drainer objects left: {:?}",
        names(&alone)
    );
    assert_eq!(alone.iter().collect::<Vec<_>>(), detectors(&full));
    // With the alert rules, only the detector's: the drainer's leader alert would fire for good.
    let rules =
        json!({"drainer": {"enabled": false}, "metrics": {"prometheusRule": {"enabled": true}}});
    let alone = helm_template(&chart, "nodemedic", "kube-system", Some(&rules)).unwrap();
    let rule = alone
        .iter()
        .find(|o| o["kind"] == "PrometheusRule")
        .expect("the rules");
    let groups: Vec<&str> = rule["spec"]["groups"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| g["name"].as_str().unwrap())
        .collect();
    assert_eq!(groups, ["nodemedic-detector"]);
    // Reboots need the drainer's signed requests.
    let reboot = json!({"drainer": {"enabled": false},
        "detector": {"reboot": {"enabled": true, "publicKey": "-----BEGIN PUBLIC KEY-----\nMCowBQYDK2VwAyEA\n-----END PUBLIC KEY-----"}}});
    let said = helm_template_refused(&chart, &reboot).unwrap();
    assert!(
        said.contains("detector.reboot.enabled needs drainer.enabled"),
        "{said}"
    );
}

/// The documented line with `deploy/detector-only` on a fresh control plane of the newest release:
/// the detector installed, no Deployment, no drainer account.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_detector_alone_installs_with_the_all_or_nothing_line() {
    use nodemedic_tests::envtest::{self, ControlPlane};
    let Some(assets) = envtest::assets() else {
        envtest::say_skipped(
            "the detector alone on a real control plane",
            "a real kube-apiserver",
        );
        return;
    };
    let plane = ControlPlane::start(&assets, None);
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    plane.write_kubeconfig(&kubeconfig);
    let line = "kubectl apply --dry-run=server -k deploy/detector-only && kubectl apply -k deploy/detector-only";
    let mut said = String::new();
    nodemedic_tests::cluster::eventually(
        "the detector alone installed",
        std::time::Duration::from_secs(60),
        || {
            let (ok, s) = crate::install::run_line(line, &kubeconfig, &assets);
            said = s.clone();
            async move { ok.then_some(()) }
        },
    )
    .await;
    let client = plane.client();
    Api::<DaemonSet>::namespaced(client.clone(), "kube-system")
        .get("nodemedic-detector")
        .await
        .unwrap_or_else(|e| panic!("{e}; kubectl said {said}"));
    assert!(
        Api::<Deployment>::namespaced(client.clone(), "kube-system")
            .get_opt("nodemedic-drainer")
            .await
            .unwrap()
            .is_none(),
        "no drainer"
    );
    assert!(
        Api::<k8s_openapi::api::core::v1::ServiceAccount>::namespaced(client, "kube-system")
            .get_opt("nodemedic-drainer")
            .await
            .unwrap()
            .is_none(),
        "no drainer account"
    );
}
