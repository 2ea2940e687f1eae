//! Monitoring as shipped: the alert rules pass `promtool check rules` and their unit tests
//! (`promtool test rules`), the chart's monitoring objects equal `deploy/monitoring`, and every query
//! of the alerts and the Grafana dashboard names a metric the binaries' `/metrics` really serves.

use std::collections::BTreeSet;
use std::process::Command;
use std::sync::Arc;

use serde_json::{Value, json};

use crate::checks::*;
use crate::render::*;

fn alerts_file() -> std::path::PathBuf {
    repo().join("deploy/helm/nodemedic/files/alerts.yaml")
}

/// `promtool ARGS`, or `None` (said; a failure in CI) when it is not installed.
fn promtool(args: &[&str]) -> Option<std::process::Output> {
    match Command::new("promtool")
        .args(args)
        .current_dir(repo())
        .output()
    {
        Ok(o) => Some(o),
        Err(_) => {
            missing("promtool", "Debian's prometheus package");
            None
        }
    }
}

#[test]
fn the_alert_rules_pass_promtool_check_and_their_unit_tests() {
    let file = alerts_file();
    let Some(check) = promtool(&["check", "rules", file.to_str().unwrap()]) else {
        return;
    };
    assert!(
        check.status.success(),
        "promtool check rules:\n{}{}",
        String::from_utf8_lossy(&check.stdout),
        String::from_utf8_lossy(&check.stderr)
    );
    let test = promtool(&["test", "rules", "deploy/monitoring/alerts-test.yaml"]).unwrap();
    assert!(
        test.status.success(),
        "promtool test rules:\n{}{}",
        String::from_utf8_lossy(&test.stdout),
        String::from_utf8_lossy(&test.stderr)
    );
    // Every alert has a unit test.
    let tests = std::fs::read_to_string(repo().join("deploy/monitoring/alerts-test.yaml")).unwrap();
    for alert in alert_names() {
        assert!(
            tests.contains(&format!("alertname: {alert}\n")),
            "{alert} has no promtool unit test"
        );
    }
}

fn alert_rules() -> Vec<Value> {
    let rules = docs(&alerts_file()).remove(0);
    rules["groups"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|g| g["rules"].as_array().unwrap().clone())
        .collect()
}

fn alert_names() -> Vec<String> {
    alert_rules()
        .iter()
        .map(|r| r["alert"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn the_kustomize_prometheus_rule_carries_the_same_rules() {
    let rule = docs(&repo().join("deploy/components/monitoring/prometheusrule.yaml")).remove(0);
    assert_eq!(rule["spec"], docs(&alerts_file()).remove(0));
}

#[test]
fn helm_monitoring_objects_match_deploy_monitoring() {
    let chart = repo().join("deploy/helm/nodemedic");
    let mut v: Value = docs(&chart.join("values.yaml")).remove(0);
    v["metrics"]["service"]["enabled"] = json!(true);
    v["metrics"]["serviceMonitor"]["enabled"] = json!(true);
    v["metrics"]["prometheusRule"]["enabled"] = json!(true);
    let Some(helm) = helm_template(&chart, "nodemedic", "kube-system", Some(&v)) else {
        return;
    };
    check_types(&helm);
    check_labels(&helm, true);
    let (Some(mut base), Some(monitoring)) = (
        kustomize(&repo().join("deploy")),
        kustomize(&repo().join("deploy/monitoring")),
    ) else {
        return;
    };
    check_labels(&monitoring, false);
    base.extend(monitoring);
    crate::assert_same_as_kustomize(
        &helm,
        &base,
        "metrics enabled vs deploy/ + deploy/monitoring",
    );
    // Each ServiceMonitor selects exactly its component's metrics Service, and the Service its pods.
    for component in ["detector", "drainer"] {
        let sm = find(&helm, "ServiceMonitor", &format!("nodemedic-{component}"));
        let svc = find(&helm, "Service", &format!("nodemedic-{component}-metrics"));
        let selected: Vec<&Value> = helm
            .iter()
            .filter(|o| o["kind"] == "Service")
            .filter(|o| {
                sm["spec"]["selector"]["matchLabels"]
                    .as_object()
                    .unwrap()
                    .iter()
                    .all(|(k, val)| &o["metadata"]["labels"][k] == val)
            })
            .collect();
        assert_eq!(selected, vec![svc], "{component}");
        let workload = helm
            .iter()
            .find(|o| {
                (o["kind"] == "Deployment" || o["kind"] == "DaemonSet")
                    && o["metadata"]["labels"]["app.kubernetes.io/component"] == component
            })
            .unwrap();
        assert_eq!(
            &svc["spec"]["selector"],
            &workload["spec"]["selector"]["matchLabels"]
        );
        let ports = pod_spec(workload)["containers"][0]["ports"]
            .as_array()
            .unwrap();
        assert!(
            ports.iter().any(|p| p["name"] == "http"),
            "{component} has an http port"
        );
        let relabel = &sm["spec"]["endpoints"][0]["relabelings"][0];
        assert_eq!(relabel["replacement"], format!("nodemedic-{component}"));
    }
    // PodMonitors instead: no Service needed, the same selectors and job names.
    let mut v: Value = docs(&chart.join("values.yaml")).remove(0);
    v["metrics"]["podMonitor"]["enabled"] = json!(true);
    let helm = helm_template(&chart, "nodemedic", "kube-system", Some(&v)).unwrap();
    let pm = find(&helm, "PodMonitor", "nodemedic-drainer");
    let d = find(&helm, "Deployment", "nodemedic-drainer");
    assert_eq!(pm["spec"]["selector"], d["spec"]["selector"]);
    assert_eq!(
        pm["spec"]["podMetricsEndpoints"][0]["relabelings"][0]["replacement"],
        "nodemedic-drainer"
    );
    assert!(!helm.iter().any(|o| o["kind"] == "Service"));
}

/// The metric names `/metrics` serves, from both binaries' registries as their `run` registers them.
async fn exported() -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    let mut d = prometheus_client::registry::Registry::default();
    let detector = nodemedic_detector::metrics::Metrics::register(&mut d);
    // The detector's families labelled by monitor, rule and condition have series once a monitor
    // runs and something happens: make them happen as a running detector would.
    let counters = detector.monitor("kernel-monitor");
    counters.lines.inc();
    counters.parse_errors.inc();
    detector.matched("kernel-monitor", "OOMKilling");
    detector.problem("OOMKilling");
    detector.set_problem_gauge("KernelDeadlock", "DockerHung", 1);
    detector.stall("kernel-monitor");
    let mut r = prometheus_client::registry::Registry::default();
    nodemedic_drainer::metrics::Metrics::register(&mut r);
    for registry in [d, r] {
        let app = nodemedic_common::serve::router(
            Arc::new(registry),
            nodemedic_common::health::Health::default(),
        );
        let addr = nodemedic_common::serve::spawn("127.0.0.1:0".parse().unwrap(), app)
            .await
            .unwrap();
        let body = nodemedic_tests::http_get(&format!("http://{addr}/metrics")).await;
        for line in body.lines() {
            let Some(rest) = line.strip_prefix("# TYPE ") else {
                continue;
            };
            let (name, kind) = rest.split_once(' ').unwrap();
            match kind {
                "counter" => names.insert(format!("{name}_total")),
                "histogram" => {
                    for s in ["_bucket", "_sum", "_count"] {
                        names.insert(format!("{name}{s}"));
                    }
                    true
                }
                _ => names.insert(name.to_string()),
            };
        }
    }
    assert!(names.contains("problem_gauge"), "{names:?}");
    names
}

/// The metric names a PromQL expression uses (ours, NPD's and draino's: by their prefixes).
fn metrics_in(expr: &str) -> Vec<String> {
    let mut out = Vec::new();
    let bytes: Vec<char> = expr.chars().collect();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i].is_ascii_alphabetic() || bytes[i] == '_' {
            let start = i;
            while i < bytes.len() && (bytes[i].is_ascii_alphanumeric() || bytes[i] == '_') {
                i += 1;
            }
            let word: String = bytes[start..i].iter().collect();
            let preceded_by_label = start > 0 && matches!(bytes[start - 1], '"' | '$');
            if !preceded_by_label
                && ["problem_", "nodemedic_", "draino_"]
                    .iter()
                    .any(|p| word.starts_with(p))
            {
                out.push(word);
            }
        } else if bytes[i] == '"' {
            // Skip string literals (label values).
            i += 1;
            while i < bytes.len() && bytes[i] != '"' {
                i += 1;
            }
            i += 1;
        } else {
            i += 1;
        }
    }
    out
}

#[tokio::test]
async fn every_dashboard_and_alert_query_names_an_exported_metric() {
    let exported = exported().await;
    let dashboard: Value = serde_json::from_str(
        &std::fs::read_to_string(repo().join("deploy/monitoring/dashboard.json")).unwrap(),
    )
    .expect("dashboard.json is JSON");
    let mut queries = Vec::new();
    for p in dashboard["panels"].as_array().unwrap() {
        for t in p["targets"].as_array().unwrap() {
            queries.push((
                format!("dashboard panel {:?}", p["title"]),
                t["expr"].as_str().unwrap().to_string(),
            ));
        }
    }
    assert!(queries.len() >= 10, "{} queries", queries.len());
    for r in alert_rules() {
        queries.push((
            format!("alert {}", r["alert"]),
            r["expr"].as_str().unwrap().to_string(),
        ));
    }
    let mut used = BTreeSet::new();
    for (what, expr) in &queries {
        let names = metrics_in(expr);
        // `up` is Prometheus's own; every other query reads at least one of ours.
        assert!(
            !names.is_empty() || expr.contains("up{"),
            "{what}: {expr} names none of our metrics"
        );
        for n in names {
            assert!(
                exported.contains(&n),
                "{what}: {n} is not served on /metrics (served: {exported:?})"
            );
            used.insert(n);
        }
    }
    // What the dashboard must show (problems, conditions, actions, evictions, drain durations, guard).
    for needed in [
        "problem_counter",
        "problem_gauge",
        "draino_cordoned_nodes_total",
        "draino_drained_nodes_total",
        "nodemedic_drainer_evictions_total",
        "nodemedic_drainer_drain_duration_seconds_bucket",
        "nodemedic_guard_requests_total",
    ] {
        assert!(used.contains(needed), "nothing shows {needed}");
    }
}

#[test]
fn the_metric_name_scanner_finds_names_and_skips_label_values() {
    assert_eq!(
        metrics_in(
            r#"sum by (result) (increase(draino_drained_nodes_total{result="nodemedic_x"}[5m]))"#
        ),
        vec!["draino_drained_nodes_total"]
    );
    assert_eq!(
        metrics_in(
            "histogram_quantile(0.5, sum by (le) (rate(nodemedic_drainer_drain_duration_seconds_bucket[$__rate_interval])))"
        ),
        vec!["nodemedic_drainer_drain_duration_seconds_bucket"]
    );
}
