//! The shipped checks' built-in probes against the real things they probe: the container runtime
//! probe asks a real containerd (its CRI plugin on, a socket of the test's own) as `crictl info`
//! would, and sees it ready, wedged (stopped with SIGSTOP: it accepts connections and answers
//! nothing) and dead.

use std::process::{Command, Stdio};
use std::time::Duration;

use nodemedic_tests::bins::debug_bin;

/// `detector probe container-runtime` against `socket`: its exit code and line.
fn probe(socket: &std::path::Path, timeout: &str) -> (i32, String) {
    let out = Command::new(debug_bin("nodemedic-detector", "detector"))
        .args([
            "probe",
            "container-runtime",
            "--timeout",
            timeout,
            "--endpoint",
        ])
        .arg(format!("unix://{}", socket.display()))
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).trim().to_string(),
    )
}

#[test]
fn the_container_runtime_probe_asks_a_real_containerd() {
    let runnable = rustix::process::geteuid().is_root()
        && Command::new("containerd")
            .arg("--version")
            .stdout(Stdio::null())
            .status()
            .is_ok();
    if !runnable {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI runs as root with containerd installed (.ci/run)"
        );
        eprintln!("skipped: needs root and containerd");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().display();
    let socket = dir.path().join("containerd.sock");
    let config = dir.path().join("config.toml");
    std::fs::write(
        &config,
        format!("version = 2\nroot = \"{d}/root\"\nstate = \"{d}/state\"\n[grpc]\n  address = \"{d}/containerd.sock\"\n"),
    )
    .unwrap();
    let log = std::fs::File::create(dir.path().join("containerd.log")).unwrap();
    let mut daemon = Command::new("containerd")
        .arg("--config")
        .arg(&config)
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .unwrap();
    let pid = rustix::process::Pid::from_raw(daemon.id() as i32).unwrap();
    // Until its CRI service answers (the socket appears before the plugins are up).
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    let ready = loop {
        let (code, line) = probe(&socket, "5s");
        if code == 0 || std::time::Instant::now() > deadline {
            break (code, line);
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    let log = || std::fs::read_to_string(dir.path().join("containerd.log")).unwrap_or_default();
    assert_eq!(ready.0, 0, "{ready:?}\n{}", log());
    // No CNI configuration here: the network is named, and is not the runtime's health.
    assert!(
        ready.1.starts_with("container runtime ready; network"),
        "{ready:?}"
    );
    // Wedged: connections accepted, nothing answered.
    rustix::process::kill_process(pid, rustix::process::Signal::STOP).unwrap();
    let (code, line) = probe(&socket, "1s");
    assert_eq!(code, 1, "{line}");
    assert!(line.contains("no answer within 1s"), "{line}");
    rustix::process::kill_process(pid, rustix::process::Signal::CONT).unwrap();
    assert_eq!(probe(&socket, "5s").0, 0, "answers again once resumed");
    // Dead: the socket left behind, nothing listening.
    daemon.kill().unwrap();
    daemon.wait().unwrap();
    let (code, line) = probe(&socket, "5s");
    if socket.exists() {
        assert_eq!(
            (code, line.contains("nothing listens")),
            (1, true),
            "{line}"
        );
    } else {
        assert_eq!(code, 2, "{line}");
    }
}
