//! The exec checks shipped in config/checks/: every file loads, every program it names is there, and
//! each check run through the detector's exec runner and problem state sets its condition as it
//! should (the binary's built-in probes against local stand-ins for the kubelet, /proc, the mount
//! table and a container runtime's socket; the clock as this machine's kernel keeps it; the cloud's
//! instance metadata as a loopback server answering as AWS, Azure and GCP document theirs).

use std::io::{Read, Write};
use std::path::PathBuf;
use std::sync::Arc;

use nodemedic_detector::config::{self, Check, Input, Monitor};
use nodemedic_detector::problem::{MonitorState, Status};
use nodemedic_detector::source::exec::{CheckDirs, run_once};

const CHECKS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../config/checks");

fn monitors() -> Vec<Monitor> {
    config::load_paths(&[PathBuf::from(CHECKS)])
        .unwrap_or_else(|e| panic!("{e}"))
        .monitors
}

/// The check as the image runs it, with the image's paths mapped to this checkout and `args`
/// rewritten by `edit`.
fn local(check: &Check, edit: impl Fn(&mut Vec<String>)) -> Check {
    let mut c = check.clone();
    let program = c.program.to_string_lossy().to_string();
    c.program = if program == "/usr/local/bin/detector" {
        PathBuf::from(env!("CARGO_BIN_EXE_detector"))
    } else {
        PathBuf::from(program.replace("/etc/nodemedic/checks", CHECKS))
    };
    edit(&mut c.args);
    c
}

/// Run `check` of `monitor` once and return the monitor's first condition after it.
async fn condition_after(monitor: &Monitor, check: &Check) -> (Status, String, String) {
    let Input::Exec(settings) = &monitor.input else {
        panic!("{} is not an exec monitor", monitor.name)
    };
    let (_tx, mut stop) = tokio::sync::watch::channel(false);
    let bin = PathBuf::from(env!("CARGO_BIN_EXE_detector"));
    let dirs = CheckDirs::new([
        PathBuf::from(CHECKS),
        bin.parent().unwrap().to_path_buf(),
        PathBuf::from("/bin"),
        PathBuf::from("/usr/bin"),
    ])
    // As a DaemonSet that asks for them allows: the checks that need root (container-runtime-monitor).
    .allowing_root(true);
    let r = run_once(0, check, settings.max_output, &dirs, &mut stop)
        .await
        .unwrap();
    let mut state = MonitorState::new(Arc::new(monitor.clone()), &[], r.at);
    let mut out = Vec::new();
    state.check_result(0, r.exit, &r.message, r.at, &mut out);
    let c = &state.conditions()[0];
    (c.status, c.reason.clone(), c.message.clone())
}

fn by_name<'a>(ms: &'a [Monitor], name: &str) -> &'a Monitor {
    ms.iter().find(|m| m.name == name).unwrap()
}

#[test]
fn every_shipped_check_loads_and_names_a_program_that_is_there() {
    let ms = monitors();
    assert_eq!(
        ms.len(),
        6,
        "{:?}",
        ms.iter().map(|m| &m.name).collect::<Vec<_>>()
    );
    for m in &ms {
        assert!(matches!(m.input, Input::Exec(_)), "{}", m.name);
        for c in &m.checks {
            let local = local(c, |_| {});
            assert!(
                local.program.exists(),
                "{}: {} is missing",
                m.name,
                local.program.display()
            );
        }
    }
}

#[tokio::test]
async fn the_kubelet_check_follows_its_healthz() {
    let ms = monitors();
    let m = by_name(&ms, "kubelet-monitor");
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        for answer in [
            "HTTP/1.1 500 Internal Server Error\r\n\r\n[-]pleg failed",
            "HTTP/1.1 200 OK\r\n\r\nok",
        ] {
            let (mut s, _) = listener.accept().unwrap();
            let mut req = [0u8; 512];
            let _ = s.read(&mut req);
            s.write_all(answer.as_bytes()).unwrap();
        }
    });
    let check = local(&m.checks[0], |args| {
        for a in args.iter_mut() {
            *a = a.replace("127.0.0.1:10248", &addr.to_string());
        }
    });
    let (status, reason, message) = condition_after(m, &check).await;
    assert_eq!(
        (status, reason.as_str()),
        (Status::True, "KubeletUnhealthy")
    );
    // The status only: an answer's body never reaches a condition (issue 76).
    assert!(message.ends_with(": 500"), "{message}");
    assert!(!message.contains("pleg"), "{message}");
    let (status, reason, _) = condition_after(m, &check).await;
    assert_eq!(
        (status, reason.as_str()),
        (Status::False, "KubeletIsHealthy")
    );
}

#[tokio::test]
async fn the_conntrack_and_readonly_root_checks_read_what_they_are_pointed_at() {
    let ms = monitors();
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("nf_conntrack_max"), "100").unwrap();
    std::fs::write(dir.path().join("nf_conntrack_count"), "97").unwrap();
    let m = by_name(&ms, "conntrack-monitor");
    let netfilter = dir.path().display().to_string();
    let check = local(&m.checks[0], |args| {
        args.extend(["--netfilter".to_string(), netfilter.clone()])
    });
    let (status, reason, message) = condition_after(m, &check).await;
    assert_eq!(
        (status, reason.as_str(), message.as_str()),
        (
            Status::True,
            "ConntrackTableFull",
            "conntrack table 97% full (97 of 100)"
        )
    );

    let mounts = dir.path().join("mounts");
    std::fs::write(&mounts, "/dev/sda1 / ext4 ro,relatime 0 0\n").unwrap();
    let m = by_name(&ms, "readonly-root-monitor");
    let check = local(&m.checks[0], |args| {
        let at = args.iter().position(|a| a == "/proc/1/mounts").unwrap();
        args[at] = mounts.display().to_string();
    });
    let (status, reason, _) = condition_after(m, &check).await;
    assert_eq!(
        (status, reason.as_str()),
        (Status::True, "RootFilesystemIsReadOnly")
    );
}

/// The clock and container-runtime checks, built into the detector (the image has no shell):
/// the clock as the kernel keeps it here, and a runtime's socket missing (unknown: not mounted)
/// or accepting and never answering (a wedged runtime: the problem).
#[tokio::test]
async fn the_clock_and_container_runtime_checks_need_no_host_tools() {
    let ms = monitors();
    let m = by_name(&ms, "ntp-monitor");
    let (status, reason, message) = condition_after(m, &local(&m.checks[0], |_| {})).await;
    let synced = nodemedic_common::sysclock::read().unwrap().max_error_us < 16_000_000;
    let expected = if synced { Status::False } else { Status::True };
    assert_eq!(status, expected, "{reason}: {message}");
    let m = by_name(&ms, "container-runtime-monitor");
    let dir = tempfile::tempdir().unwrap();
    let at = |sock: &str, timeout: &'static str| {
        let endpoint = format!("--endpoint=unix://{}", dir.path().join(sock).display());
        local(&m.checks[0], move |args| {
            args.retain(|a| a != "--timeout" && a != "10s");
            args.extend([endpoint.clone(), "--timeout".into(), timeout.into()]);
        })
    };
    let (status, reason, message) = condition_after(m, &at("missing.sock", "5s")).await;
    assert_eq!(status, Status::Unknown, "{message}");
    assert_eq!(reason, m.conditions[0].healthy_reason);
    assert!(message.starts_with("cannot tell"), "{message}");
    let _wedged = std::os::unix::net::UnixListener::bind(dir.path().join("wedged.sock")).unwrap();
    let (status, reason, message) = condition_after(m, &at("wedged.sock", "300ms")).await;
    assert_eq!(
        (status, reason.as_str()),
        (Status::True, "ContainerRuntimeUnhealthy"),
        "{message}"
    );
    assert!(message.contains("no answer within 300ms"), "{message}");
}

/// What the loopback metadata service announces, and the requests it was asked.
#[derive(Default)]
struct Imds {
    /// AWS: the scheduled events' JSON; Azure: the Scheduled Events document; GCP: the
    /// maintenance-event value.
    announced: String,
    asked: Vec<String>,
}

type Shared = std::sync::Arc<std::sync::Mutex<Imds>>;

/// A metadata service on loopback that checks each request as the provider's service does:
/// AWS's IMDSv2 token (a GET without it is 401), Azure's `Metadata: true` (else 400), GCP's
/// `Metadata-Flavor: Google` (else 403).
async fn imds(state: Shared) -> String {
    use axum::http::{HeaderMap, StatusCode};
    use axum::routing::{get, put};
    let ok = |s: &Shared, what: &str| {
        let mut g = s.lock().unwrap();
        g.asked.push(what.to_string());
        g.announced.clone()
    };
    let token_of = |h: &HeaderMap| {
        h.get("X-aws-ec2-metadata-token")
            .and_then(|v| v.to_str().ok())
            == Some("T0KEN")
    };
    let app = axum::Router::new()
        .route(
            "/latest/api/token",
            put(|h: HeaderMap| async move {
                match h.get("X-aws-ec2-metadata-token-ttl-seconds") {
                    Some(_) => (StatusCode::OK, "T0KEN".to_string()),
                    None => (StatusCode::BAD_REQUEST, String::new()),
                }
            }),
        )
        .route(
            "/latest/meta-data/events/maintenance/scheduled",
            get({
                let s = state.clone();
                move |h: HeaderMap| async move {
                    if !token_of(&h) {
                        return (StatusCode::UNAUTHORIZED, String::new());
                    }
                    (StatusCode::OK, ok(&s, "aws scheduled"))
                }
            }),
        )
        .route(
            "/latest/meta-data/spot/instance-action",
            get(move |h: HeaderMap| async move {
                if token_of(&h) { StatusCode::NOT_FOUND } else { StatusCode::UNAUTHORIZED }
            }),
        )
        .route(
            "/latest/meta-data/events/recommendations/rebalance",
            get(move |h: HeaderMap| async move {
                if token_of(&h) { StatusCode::NOT_FOUND } else { StatusCode::UNAUTHORIZED }
            }),
        )
        .route(
            "/metadata/instance/compute/name",
            get(|h: HeaderMap| async move {
                match h.get("Metadata").and_then(|v| v.to_str().ok()) {
                    Some("true") => (StatusCode::OK, "vm-1".to_string()),
                    _ => (StatusCode::BAD_REQUEST, String::new()),
                }
            }),
        )
        .route(
            "/metadata/scheduledevents",
            get({
                let s = state.clone();
                move |h: HeaderMap| async move {
                    match h.get("Metadata").and_then(|v| v.to_str().ok()) {
                        Some("true") => (StatusCode::OK, ok(&s, "azure events")),
                        _ => (StatusCode::BAD_REQUEST, String::new()),
                    }
                }
            }),
        )
        .route(
            "/computeMetadata/v1/instance/{key}",
            get({
                let s = state.clone();
                move |axum::extract::Path(key): axum::extract::Path<String>, h: HeaderMap| async move {
                    if h.get("Metadata-Flavor").and_then(|v| v.to_str().ok()) != Some("Google") {
                        return (StatusCode::FORBIDDEN, String::new());
                    }
                    match key.as_str() {
                        "maintenance-event" => (StatusCode::OK, ok(&s, "gcp maintenance")),
                        "preempted" => (StatusCode::OK, "FALSE".to_string()),
                        _ => (StatusCode::NOT_FOUND, String::new()),
                    }
                }
            }),
        );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    format!("http://{addr}")
}

fn probe_maintenance(provider: &str, endpoint: &str) -> (Option<i32>, String) {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_detector"))
        .args([
            "probe",
            "cloud-maintenance",
            "--provider",
            provider,
            "--endpoint",
            endpoint,
        ])
        .args(["--ahead", "1h", "--timeout", "5s"])
        .output()
        .unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).trim().to_string(),
    )
}

/// An AWS time (`21 Jan 2019 09:00:43 GMT`) `secs` from now, and the same in RFC 3339.
fn aws_time(secs: i64) -> (String, String) {
    let t = k8s_openapi::jiff::Timestamp::now()
        .checked_add(k8s_openapi::jiff::SignedDuration::from_secs(secs))
        .unwrap();
    let t = k8s_openapi::jiff::Timestamp::from_second(t.as_second()).unwrap();
    (
        t.strftime("%d %b %Y %H:%M:%S GMT").to_string(),
        t.to_string(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cloud_maintenance_probe_asks_each_provider_as_documented() {
    let state = Shared::default();
    let endpoint = imds(state.clone()).await;
    let (soon, soon_rfc) = aws_time(600);
    let (far, _) = aws_time(3 * 86400);
    let event = |at: &str, code: &str| {
        format!(
            r#"{{"NotBefore": "{at}", "Code": "{code}", "Description": "scheduled", "EventId": "instance-event-1", "State": "active"}}"#
        )
    };
    state.lock().unwrap().announced = format!("[{}]", event(&far, "system-reboot"));
    let (code, line) = tokio::task::spawn_blocking({
        let e = endpoint.clone();
        move || probe_maintenance("aws", &e)
    })
    .await
    .unwrap();
    assert_eq!(code, Some(0), "{line}");
    assert!(
        line.starts_with("no maintenance within 1h; next: system-reboot at "),
        "{line}"
    );
    state.lock().unwrap().announced = format!("[{}]", event(&soon, "instance-retirement"));
    let (code, line) = tokio::task::spawn_blocking({
        let e = endpoint.clone();
        move || probe_maintenance("aws", &e)
    })
    .await
    .unwrap();
    assert_eq!(code, Some(1), "{line}");
    assert_eq!(
        line,
        format!("instance-retirement at {soon_rfc}: scheduled (instance-event-1)")
    );

    state.lock().unwrap().announced = r#"{"DocumentIncarnation": 3, "Events": [
        {"EventId": "e-1", "EventType": "Redeploy", "ResourceType": "VirtualMachine", "Resources": ["vm-1"],
         "EventStatus": "Started", "NotBefore": "", "Description": "Host server is undergoing maintenance.",
         "EventSource": "Platform", "DurationInSeconds": -1},
        {"EventId": "e-2", "EventType": "Reboot", "ResourceType": "VirtualMachine", "Resources": ["vm-2"],
         "EventStatus": "Scheduled", "NotBefore": "Mon, 19 Sep 2016 18:29:47 GMT", "Description": "",
         "EventSource": "User", "DurationInSeconds": -1}]}"#
        .to_string();
    let (code, line) = tokio::task::spawn_blocking({
        let e = endpoint.clone();
        move || probe_maintenance("azure", &e)
    })
    .await
    .unwrap();
    assert_eq!(code, Some(1), "{line}");
    assert_eq!(
        line, "Redeploy now: Host server is undergoing maintenance. (e-1, Started)",
        "vm-2's reboot is not this machine's"
    );

    state.lock().unwrap().announced = "MIGRATE_ON_HOST_MAINTENANCE".into();
    let (code, line) = tokio::task::spawn_blocking({
        let e = endpoint.clone();
        move || probe_maintenance("gcp", &e)
    })
    .await
    .unwrap();
    assert_eq!(
        (code, line.as_str()),
        (Some(1), "MIGRATE_ON_HOST_MAINTENANCE now: host maintenance")
    );
    let asked = state.lock().unwrap().asked.clone();
    assert_eq!(
        asked,
        [
            "aws scheduled",
            "aws scheduled",
            "azure events",
            "gcp maintenance"
        ],
        "each answered only when asked as documented"
    );

    // Nothing listening: unknown, saying why.
    let closed = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let (code, line) =
        tokio::task::spawn_blocking(move || probe_maintenance("aws", &format!("http://{closed}")))
            .await
            .unwrap();
    assert_eq!(code, Some(2), "{line}");
    assert!(
        line.contains("cannot reach") && line.contains("hostNetwork"),
        "{line}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cloud_maintenance_check_sets_its_condition_with_the_time_and_clears() {
    let ms = monitors();
    let m = by_name(&ms, "cloud-maintenance-monitor");
    let state = Shared::default();
    let endpoint = imds(state.clone()).await;
    let check = local(&m.checks[0], |args| {
        args.extend(["--endpoint".to_string(), endpoint.clone()]);
    });
    let (soon, soon_rfc) = aws_time(1200);
    state.lock().unwrap().announced = format!(
        r#"[{{"NotBefore": "{soon}", "Code": "system-maintenance", "Description": "scheduled maintenance", "EventId": "instance-event-2", "State": "active"}}]"#
    );
    let (status, reason, message) = condition_after(m, &check).await;
    assert_eq!(
        (status, reason.as_str()),
        (Status::True, "MaintenanceScheduled")
    );
    assert_eq!(
        message,
        format!("system-maintenance at {soon_rfc}: scheduled maintenance (instance-event-2)")
    );
    state.lock().unwrap().announced = "[]".into();
    let (status, reason, _) = condition_after(m, &check).await;
    assert_eq!(
        (status, reason.as_str()),
        (Status::False, "NoMaintenanceScheduled")
    );
}
