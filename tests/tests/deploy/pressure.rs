//! Early pressure (issue 41) as operators install it: kustomize's deploy/early-pressure and Helm's
//! `detector.earlyPressure` add the shipped resource-monitor.yaml to the rules and mount the two
//! filesystems it reads, read-only, at the paths it names.

use serde_json::{Value, json};

use crate::checks::*;
use crate::render::*;

/// The DaemonSet's mounts and hostPath volumes of the two filesystems, as (name, path, type).
fn filesystems(objects: &[Value]) -> Vec<(String, String, String)> {
    let spec = &find(objects, "DaemonSet", "nodemedic-detector")["spec"]["template"]["spec"];
    let mounts = spec["containers"][0]["volumeMounts"].as_array().unwrap();
    let volumes = spec["volumes"].as_array().unwrap();
    ["nodefs", "imagefs"]
        .iter()
        .filter_map(|name| {
            let m = mounts.iter().find(|m| m["name"] == *name)?;
            let v = volumes.iter().find(|v| v["name"] == *name)?;
            assert_eq!(m["readOnly"], true, "{m}");
            assert_eq!(
                m["mountPath"], v["hostPath"]["path"],
                "mounted where the host has it: {m} {v}"
            );
            let s = |v: &Value| v.as_str().unwrap().to_string();
            Some((s(&m["name"]), s(&m["mountPath"]), s(&v["hostPath"]["type"])))
        })
        .collect()
}

fn shipped() -> Vec<(String, String, String)> {
    ["nodefs:/var/lib/kubelet", "imagefs:/var/lib/containerd"]
        .iter()
        .map(|s| {
            let (n, p) = s.split_once(':').unwrap();
            (n.to_string(), p.to_string(), "Directory".to_string())
        })
        .collect()
}

#[test]
fn the_early_pressure_overlay_adds_the_rule_file_and_its_filesystems_to_the_base() {
    let copy = std::fs::read_to_string(
        repo().join("deploy/components/early-pressure/resource-monitor.yaml"),
    )
    .unwrap();
    let original =
        std::fs::read_to_string(repo().join("config/rules-extra/resource-monitor.yaml")).unwrap();
    assert_eq!(
        copy, original,
        "deploy/components/early-pressure/resource-monitor.yaml differs from config/rules-extra"
    );
    let Some(overlay) = kustomize(&repo().join("deploy/early-pressure")) else {
        return;
    };
    check_types(&overlay);
    check_configs(&overlay);
    let rules = find(&overlay, "ConfigMap", "nodemedic-detector-rules");
    assert!(rules["data"]["resource-monitor.yaml"].is_string());
    assert!(
        rules["data"]["kernel-monitor.yaml"].is_string(),
        "the base's rules stay"
    );
    assert_eq!(filesystems(&overlay), shipped());
    let base = kustomize(&repo().join("deploy")).unwrap();
    assert!(
        filesystems(&base).is_empty(),
        "the base mounts no kubelet filesystem"
    );
}

#[test]
fn helm_adds_early_pressure_when_asked_with_the_paths_given() {
    let chart = repo().join("deploy/helm/nodemedic");
    let copy = std::fs::read_to_string(chart.join("extra/resource-monitor.yaml")).unwrap();
    let original =
        std::fs::read_to_string(repo().join("config/rules-extra/resource-monitor.yaml")).unwrap();
    assert_eq!(
        copy, original,
        "the chart's extra/resource-monitor.yaml differs from config/rules-extra"
    );
    let mut v: Value = docs(&chart.join("values.yaml")).remove(0);
    let Some(plain) = helm_template(&chart, "nodemedic", "kube-system", Some(&v)) else {
        return;
    };
    assert!(filesystems(&plain).is_empty());
    v["detector"]["earlyPressure"]["enabled"] = json!(true);
    let on = helm_template(&chart, "nodemedic", "kube-system", Some(&v)).unwrap();
    check_configs(&on);
    assert_eq!(filesystems(&on), shipped());
    // CRI-O keeps images elsewhere: the mount and the rule file follow the value.
    v["detector"]["earlyPressure"]["imagefs"] = json!("/var/lib/containers");
    let crio = helm_template(&chart, "nodemedic", "kube-system", Some(&v)).unwrap();
    let rules = find(&crio, "ConfigMap", "nodemedic-detector-rules");
    let text = rules["data"]["resource-monitor.yaml"].as_str().unwrap();
    assert!(text.contains("imagefs: /var/lib/containers\n"), "{text}");
    let set = nodemedic_detector::config::load_sources(&[(
        "resource-monitor.yaml".into(),
        text.to_string(),
    )])
    .unwrap();
    assert_eq!(set.monitors.len(), 1);
    assert_eq!(filesystems(&crio)[1].1, "/var/lib/containers");
    v["detector"]["earlyPressure"]["imagefs"] = json!("relative/path");
    match helm_lint(&chart, Some(&v)) {
        Some(Err(report)) => assert!(report.contains("imagefs"), "{report}"),
        other => panic!("a relative imagefs path passed helm lint: {other:?}"),
    }
}

/// The cloud-maintenance component's check is the shipped one (issue 78, point 4), and the
/// drainer's conditions keep the config file's list beside the one it adds.
#[test]
fn the_cloud_maintenance_component_adds_the_shipped_check_and_its_condition() {
    let copy = std::fs::read_to_string(
        repo().join("deploy/components/cloud-maintenance/cloud-maintenance-monitor.yaml"),
    )
    .unwrap();
    let original =
        std::fs::read_to_string(repo().join("config/checks/cloud-maintenance-monitor.yaml"))
            .unwrap();
    assert_eq!(
        copy, original,
        "the component's copy differs from config/checks"
    );
    let dir = repo().join(format!("target/cloud-maintenance-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("kustomization.yaml"),
        "resources:\n  - ../../deploy/base\ncomponents:\n  - ../../deploy/components/cloud-maintenance\n",
    )
    .unwrap();
    let Some(objects) = kustomize(&dir) else {
        return;
    };
    std::fs::remove_dir_all(&dir).unwrap();
    check_types(&objects);
    check_configs(&objects);
    let rules = find(&objects, "ConfigMap", "nodemedic-detector-rules");
    assert!(rules["data"]["cloud-maintenance-monitor.yaml"].is_string());
    assert!(
        rules["data"]["kernel-monitor.yaml"].is_string(),
        "the base's rules stay"
    );
    let drainer = find(&objects, "Deployment", "nodemedic-drainer");
    let args = drainer["spec"]["template"]["spec"]["containers"][0]["args"].to_string();
    assert!(
        args.contains("--add-condition=MaintenanceScheduled=True"),
        "{args}"
    );
    assert!(
        args.contains("--config="),
        "the file's conditions stay: {args}"
    );
}
