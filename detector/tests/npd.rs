//! node-problem-detector's own files and command lines, unchanged (tests/fixtures/npd, copied from NPD):
//! - every shipped monitor file loads as it is and through `detector convert-npd` into the same monitor;
//! - the log monitors report the same problems on the same sample logs either way;
//! - NPD's two DaemonSet command lines run the detector against the real control plane
//!   (KUBEBUILDER_ASSETS) or the test API server, custom plugin monitors included;
//! - the GKE-style command line with the system stats monitor runs unchanged and shows NPD's host
//!   metrics under NPD's names.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use nodemedic_detector::config::{self, Monitor};
use nodemedic_tests::cluster::{Cluster, eventually};

const NPD: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/fixtures/npd");
const SAMPLES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../config/samples");

fn detector() -> Command {
    Command::new(env!("CARGO_BIN_EXE_detector"))
}

fn npd(name: &str) -> PathBuf {
    Path::new(NPD).join(name)
}

/// Every monitor file NPD ships that nodemedic reads as a rule file (system stats monitor files
/// are read by `stats::settings`, exporter files have no equivalent).
const SHIPPED: &[&str] = &[
    "kernel-monitor.json",
    "readonly-monitor.json",
    "docker-monitor.json",
    "systemd-monitor.json",
    "kernel-monitor-filelog.json",
    "docker-monitor-filelog.json",
    "custom-plugin-monitor.json",
    "network-problem-monitor.json",
    "health-checker-kubelet.json",
    "health-checker-containerd.json",
    "health-checker-docker.json",
];

/// What a monitor means, all of it (the compiled patterns come from `rules`), but how journal
/// identifiers match: NPD's JSON keeps NPD's SYSLOG_IDENTIFIER, a conversion to nodemedic's YAML
/// checks journald's own fields too (asserted apart).
fn meaning(m: &Monitor) -> String {
    let input = match m.input.clone() {
        config::Input::Journal {
            identifiers,
            units,
            directory,
            ..
        } => config::Input::Journal {
            identifiers,
            how: nodemedic_detector::parse::journal::IdentifierMatch::Backed,
            units,
            directory,
        },
        other => other,
    };
    let conditions: Vec<_> = m
        .conditions
        .iter()
        .map(|c| {
            (
                &c.type_,
                &c.healthy_reason,
                &c.healthy_message,
                &c.recovery_pattern,
                c.recovery_after,
            )
        })
        .collect();
    format!(
        "{} {} {:?} {:?} {} {:?} {:?} {:?}",
        m.name, m.source, input, m.lookback, m.buffer_size, conditions, m.rules, m.checks
    )
}

#[test]
fn convert_npd_makes_its_out_dir_and_never_writes_two_files_to_one_name() {
    let dir = tempfile::tempdir().unwrap();
    let out_dir = dir.path().join("rules/converted");
    let other = dir.path().join("other");
    std::fs::create_dir(&other).unwrap();
    let twin = other.join(SHIPPED[0]);
    std::fs::copy(npd(SHIPPED[0]), &twin).unwrap();
    let out = detector()
        .arg("convert-npd")
        .arg(npd(SHIPPED[0]))
        .arg(&twin)
        .arg("--out-dir")
        .arg(&out_dir)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    let stem = SHIPPED[0].trim_end_matches(".json");
    assert!(out_dir.join(format!("{stem}.yaml")).is_file(), "{stderr}");
    assert!(
        stderr.contains("would overwrite") && stderr.contains("1 file(s) not converted"),
        "{stderr}"
    );
}

#[test]
fn npd_shipped_files_load_as_they_are_and_convert_to_the_same_monitors() {
    let dir = tempfile::tempdir().unwrap();
    let out = detector()
        .arg("convert-npd")
        .args(SHIPPED.iter().map(|f| npd(f)))
        .arg("--out-dir")
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for file in SHIPPED {
        let json = config::load_paths(&[npd(file)]).unwrap_or_else(|e| panic!("{file}: {e}"));
        let stem = file.trim_end_matches(".json");
        let yaml = config::load_paths(&[dir.path().join(format!("{stem}.yaml"))])
            .unwrap_or_else(|e| panic!("{stem}.yaml: {e}"));
        assert_eq!(json.monitors.len(), 1);
        assert_eq!(
            meaning(&json.monitors[0]),
            meaning(&yaml.monitors[0]),
            "{file} and its conversion differ"
        );
        if let (
            config::Input::Journal { how: from_npd, .. },
            config::Input::Journal { how: converted, .. },
        ) = (&json.monitors[0].input, &yaml.monitors[0].input)
        {
            use nodemedic_detector::parse::journal::IdentifierMatch;
            assert_eq!(
                (*from_npd, *converted),
                (IdentifierMatch::SyslogIdentifier, IdentifierMatch::Backed),
                "{file}"
            );
        }
    }
    // What NPD's files mean, spot-checked against NPD's own defaults.
    let ntp = config::load_paths(&[npd("custom-plugin-monitor.json")]).unwrap();
    let m = &ntp.monitors[0];
    assert_eq!(m.checks.len(), 2);
    assert_eq!(m.checks[0].timeout, Duration::from_secs(3));
    assert_eq!(m.checks[0].interval, Duration::from_secs(30));
    assert_eq!(
        m.checks[0].program,
        PathBuf::from("./config/plugin/check_ntp.sh")
    );
    let kubelet = config::load_paths(&[npd("health-checker-kubelet.json")]).unwrap();
    let c = &kubelet.monitors[0].checks[0];
    assert_eq!(c.args[0], "--component=kubelet");
    assert_eq!(
        (c.interval, c.timeout),
        (Duration::from_secs(10), Duration::from_secs(180))
    );
}

/// `detector check --output json` findings (one JSON object per line).
fn findings(rules: &[PathBuf], input: &str) -> Vec<serde_json::Value> {
    let mut cmd = detector();
    cmd.args([
        "check",
        "--output",
        "json",
        "--now",
        "2026-11-22T10:00:00Z",
        "--input",
    ])
    .arg(Path::new(SAMPLES).join(input));
    for r in rules {
        cmd.arg("--rules").arg(r);
    }
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[test]
fn npd_log_monitors_report_the_same_problems_as_json_and_as_converted_yaml() {
    let dir = tempfile::tempdir().unwrap();
    for (files, input, at_least) in [
        (
            &["kernel-monitor.json", "readonly-monitor.json"][..],
            "kern.kmsg",
            5,
        ),
        (
            &["docker-monitor.json", "systemd-monitor.json"][..],
            "journal.json",
            7,
        ),
    ] {
        let json: Vec<PathBuf> = files.iter().map(|f| npd(f)).collect();
        let status = detector()
            .arg("convert-npd")
            .args(&json)
            .arg("--out-dir")
            .arg(dir.path())
            .stderr(Stdio::null())
            .status()
            .unwrap();
        assert!(status.success());
        let yaml: Vec<PathBuf> = files
            .iter()
            .map(|f| dir.path().join(f.replace(".json", ".yaml")))
            .collect();
        let from_json = findings(&json, input);
        let from_yaml = findings(&yaml, input);
        assert!(
            from_json.len() >= at_least,
            "{input}: {} findings from {files:?}",
            from_json.len()
        );
        assert_eq!(from_json, from_yaml, "{input}");
    }
}

/// The container command of an NPD DaemonSet manifest, without the binary.
fn daemonset_args(manifest: &str) -> Vec<String> {
    let text = std::fs::read_to_string(npd(manifest)).unwrap();
    let ds: serde_json::Value = serde_saphyr::from_str(&text).unwrap();
    let command = ds
        .pointer("/spec/template/spec/containers/0/command")
        .and_then(|c| c.as_array())
        .expect("a container command");
    command[1..]
        .iter()
        .map(|a| a.as_str().unwrap().to_string())
        .collect()
}

/// NPD's `/config` volume: its shipped files, in a directory of our own.
fn config_volume(dir: &Path) -> PathBuf {
    let config = dir.join("config");
    std::fs::create_dir_all(config.join("plugin")).unwrap();
    for entry in std::fs::read_dir(NPD).unwrap().flatten() {
        if entry.path().extension().is_some_and(|e| e == "json") {
            std::fs::copy(entry.path(), config.join(entry.file_name())).unwrap();
        }
    }
    std::fs::create_dir_all(config.join("guestosconfig")).unwrap();
    std::fs::copy(
        npd("guestosconfig/known-modules.json"),
        config.join("guestosconfig/known-modules.json"),
    )
    .unwrap();
    for script in ["check_ntp.sh", "network_problem.sh"] {
        let to = config.join("plugin").join(script);
        std::fs::copy(npd(&format!("plugin/{script}")), &to).unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&to, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    config
}

// Two workers: the test's blocking waits do not stall the test API server on the other.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn npd_daemonset_command_lines_run_unchanged() {
    // The real control plane with KUBEBUILDER_ASSETS, else the test API server.
    let cluster = Cluster::new().await;
    let dir = tempfile::tempdir().unwrap();
    let config = config_volume(dir.path());
    cluster.write_kubeconfig(&dir.path().join("kubeconfig"));
    // check_ntp.sh asks systemctl; this one says ntp.service is not active.
    let bin = dir.path().join("bin");
    std::fs::create_dir(&bin).unwrap();
    let systemctl = bin.join("systemctl");
    std::fs::write(&systemctl, "#!/bin/sh\nexit 3\n").unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&systemctl, std::fs::Permissions::from_mode(0o755)).unwrap();
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );

    let mut running = Vec::new();
    for (hint, manifest, extra) in [
        ("npd-basic", "node-problem-detector.yaml", None),
        // NPD's sample custom plugin monitor (`./config/plugin/check_ntp.sh`, relative to the working
        // directory as in NPD's image) beside the health checker DaemonSet's own arguments.
        (
            "npd-health",
            "node-problem-detector-healthchecker.yaml",
            Some("--config.custom-plugin-monitor=/config/custom-plugin-monitor.json"),
        ),
    ] {
        let node = cluster.create_node(hint).await;
        let kmsg = dir.path().join(format!("{node}.kmsg"));
        let boot_us = nodemedic_detector::source::kmsg::monotonic_now_us();
        std::fs::write(
            &kmsg,
            format!("3,1,{boot_us},-;Killed process 4242 (java) total-vm:1024kB, anon-rss:512kB, file-rss:0kB, shmem-rss:0kB\n"),
        )
        .unwrap();
        // The manifest's `/config/...` paths point at the volume; nothing else of them changes.
        let args: Vec<String> = daemonset_args(manifest)
            .into_iter()
            .chain(extra.map(String::from))
            .map(|a| a.replace("/config/", &format!("{}/", config.display())))
            .collect();
        let child = detector()
            .args(&args)
            // What the pod gives it: the kmsg device, a state directory, a port.
            .arg("--kmsg-path")
            .arg(&kmsg)
            .arg("--state-file")
            .arg(dir.path().join(format!("{node}.state")))
            .args(["--listen", "127.0.0.1:0"])
            .current_dir(dir.path())
            .env("NODE_NAME", &node)
            .env("KUBECONFIG", dir.path().join("kubeconfig"))
            .env("PATH", &path)
            .env("RUST_LOG", "warn")
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        running.push((manifest, node, Killed(child), args));
    }

    for (manifest, node, _, args) in &running {
        eprintln!("{manifest}: detector {}", args.join(" "));
        // kernel-monitor.json: the OOM line is an Event, its conditions are on the Node.
        eventually(
            &format!("{manifest}: OOMKilling Event"),
            Duration::from_secs(60),
            || async {
                let events = cluster.node_events_from(node, &["kernel-monitor"]).await;
                events
                    .iter()
                    .any(|e| e.reason.as_deref() == Some("OOMKilling"))
                    .then_some(())
            },
        )
        .await;
        for (type_, reason) in [
            ("KernelDeadlock", "KernelHasNoDeadlock"),
            ("ReadonlyFilesystem", "FilesystemIsNotReadOnly"),
            ("CorruptDockerOverlay2", "NoCorruptDockerOverlay2"),
        ] {
            let got = cluster.condition(node, type_).await;
            assert_eq!(
                got.map(|(s, r, _)| (s, r)),
                Some(("False".to_string(), reason.to_string())),
                "{manifest}: {type_}"
            );
        }
    }
    let (_, node, _, _) = &running[1];
    // health-checker-kubelet.json names NPD's own health-checker binary, not on this machine: the
    // condition says Unknown, with why.
    let kubelet = eventually(
        "KubeletUnhealthy Unknown",
        Duration::from_secs(60),
        || async {
            cluster
                .condition(node, "KubeletUnhealthy")
                .await
                .filter(|(s, _, _)| s == "Unknown")
        },
    )
    .await;
    assert_eq!(kubelet.1, "KubeletIsHealthy");
    assert!(
        kubelet
            .2
            .starts_with("cannot run /home/kubernetes/bin/health-checker"),
        "{kubelet:?}"
    );
    // custom-plugin-monitor.json runs NPD's check_ntp.sh: ntp.service is not running.
    let ntp = eventually("NTPProblem True", Duration::from_secs(60), || async {
        cluster
            .condition(node, "NTPProblem")
            .await
            .filter(|(s, _, _)| s == "True")
    })
    .await;
    assert_eq!(
        (ntp.1.as_str(), ntp.2.as_str()),
        ("NTPIsDown", "ntp.service is not running")
    );
    // The temporary rule's problem and the condition's change, both with reason NTPIsDown: one
    // aggregated Event (by source and reason) whose count adds them up.
    let events = eventually("NTPIsDown Events", Duration::from_secs(60), || async {
        let e = cluster
            .node_events_from(node, &["ntp-custom-plugin-monitor"])
            .await;
        let count: i32 = e
            .iter()
            .filter(|e| e.reason.as_deref() == Some("NTPIsDown"))
            .map(|e| e.count.unwrap_or(1))
            .sum();
        (count >= 2).then_some(e)
    })
    .await;
    assert!(
        events.iter().all(|e| e.type_.as_deref() == Some("Warning")),
        "{events:#?}"
    );
    for (_, node, child, _) in running {
        drop(child);
        cluster.delete_node(&node).await;
    }
}

/// The metrics NPD's own end-to-end test (`test/e2e/metriconly/metrics_test.go`) expects of the
/// system stats monitor's shipped file, by the names it scrapes.
const NPD_E2E_METRICS: &[&str] = &[
    "cpu_runnable_task_count",
    "cpu_usage_time",
    "cpu_load_1m",
    "cpu_load_5m",
    "cpu_load_15m",
    "disk_operation_count",
    "disk_merged_operation_count",
    "disk_operation_bytes_count",
    "disk_operation_time",
    "disk_bytes_used",
    "disk_percent_used",
    "disk_io_time",
    "disk_weighted_io",
    "memory_bytes_used",
    "memory_anonymous_used",
    "memory_page_cache_used",
    "memory_unevictable_used",
    "memory_dirty_used",
    "memory_percent_used",
    "host_uptime",
    "system_os_feature",
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn npd_gke_command_line_with_the_system_stats_monitor_runs_unchanged() {
    let cluster = Cluster::new().await;
    let dir = tempfile::tempdir().unwrap();
    let config = config_volume(dir.path());
    cluster.write_kubeconfig(&dir.path().join("kubeconfig"));
    let node = cluster.create_node("npd-gke").await;
    let kmsg = dir.path().join("kmsg");
    std::fs::write(&kmsg, "").unwrap();
    let args: Vec<String> = daemonset_args("node-problem-detector-gke.yaml")
        .into_iter()
        .map(|a| a.replace("/config/", &format!("{}/", config.display())))
        .collect();
    assert!(
        args.iter()
            .any(|a| a.starts_with("--config.system-stats-monitor="))
    );
    let mut cmd = detector();
    cmd.args(&args)
        .arg("--kmsg-path")
        .arg(&kmsg)
        .arg("--state-file")
        .arg(dir.path().join("state"))
        .args(["--listen", "127.0.0.1:0"])
        .current_dir(dir.path())
        .env("NODE_NAME", &node)
        .env("KUBECONFIG", dir.path().join("kubeconfig"))
        .env("RUST_LOG", "info")
        .stdout(Stdio::null());
    let running = nodemedic_tests::process::Logged::spawn(cmd, Duration::from_secs(60)).await;
    let url = format!("http://{}/metrics", running.addr);
    // The first collection is made at start; the average queue length needs a second (60 s).
    // Each monitor's first collection lands on its own: the page is read once every one of those
    // checked below is on it (CI once read it with the network's not yet there).
    let labels = [
        "cpu_usage_time{state=\"idle\"}",
        "memory_bytes_used{state=\"used\"}",
        "net_rx_bytes{interface_name=\"lo\"}",
        "system_os_feature{os_feature=\"KTD\",value=\"\"}",
    ];
    let text = eventually("NPD's host metrics", Duration::from_secs(60), || async {
        let t = nodemedic_tests::try_http_get(&url).await.ok()?;
        (t.contains("\nhost_uptime{") && labels.iter().all(|l| t.contains(l))).then_some(t)
    })
    .await;
    let names: std::collections::BTreeSet<&str> = text
        .lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| l.split(['{', ' ']).next())
        .collect();
    for name in NPD_E2E_METRICS {
        assert!(names.contains(name), "{name} missing from:\n{text}");
    }
    for label in labels {
        assert!(text.contains(label), "{label} missing from:\n{text}");
    }
    // The log monitors ran as before: their conditions are on the Node, NPD's problem metrics on
    // the same page.
    eventually("KernelDeadlock False", Duration::from_secs(60), || async {
        cluster
            .condition(&node, "KernelDeadlock")
            .await
            .filter(|(s, _, _)| s == "False")
    })
    .await;
    assert!(text.contains("problem_gauge{"), "{text}");
    drop(running);
    cluster.delete_node(&node).await;
}

#[test]
fn a_broken_system_stats_file_stops_the_detector_at_start_with_its_place() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("system-stats-monitor.json");
    std::fs::write(&bad, "{\n  \"invokeInterval\": \"60s\",\n  \"cpu\": }\n").unwrap();
    let out = detector()
        .arg(format!(
            "--config.system-log-monitor={}",
            npd("kernel-monitor.json").display()
        ))
        .arg(format!("--config.system-stats-monitor={}", bad.display()))
        .env("NODE_NAME", "n")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&format!(
            "--config.system-stats-monitor: {}:3:10: expected value",
            bad.display()
        )),
        "{err}"
    );
}

/// A detector process, killed when the test ends, failed or not.
struct Killed(std::process::Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}
