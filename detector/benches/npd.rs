//! Side by side with node-problem-detector, in one run: the same 1,000,000-line kern.log (syslog form,
//! RFC 3339 times in the future, as NPD's filelog plugin needs), the same kernel and read-only rules
//! (NPD's own JSON beside our YAML), alternating trials. Prints, for each, lines per CPU-second, peak
//! RSS and problems found.
//!
//! `NPD_BIN=/path/to/node-problem-detector cargo bench -p nodemedic-detector --bench npd`
//! (`../shared/peers/` has a build: `xz -dc node-problem-detector.xz > npd && chmod +x npd`; its JSON
//! configs are read from `NPD_CONFIGS`, default `../shared/peers`). Skipped with a message without
//! `NPD_BIN`.
//!
//! NPD is a daemon: it has consumed the file when its descriptor on the file is at the end and its
//! CPU time stops growing; its figures are read from /proc then, and its problems from its
//! Prometheus `problem_counter`. Ours come from `detector check` run under `/usr/bin/time`.

use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const LINES: u64 = 1_000_000;
const TRIALS: usize = 3;

struct Figures {
    cpu_s: f64,
    peak_mib: f64,
    problems: u64,
}

fn main() {
    let Some(npd) = std::env::var_os("NPD_BIN").map(PathBuf::from) else {
        println!(
            "npd bench skipped: set NPD_BIN to a node-problem-detector binary (../shared/peers/node-problem-detector.xz)"
        );
        return;
    };
    let configs = std::env::var_os("NPD_CONFIGS")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/peers"));
    let tmp = tempfile::tempdir().unwrap();
    let log = tmp.path().join("kern.log");
    let problems = write_kern_log(&log);
    println!(
        "input: {} ({LINES} lines, {} bytes, {problems} problem lines)",
        log.display(),
        std::fs::metadata(&log).unwrap().len()
    );
    // NPD's configs, pointed at the file.
    let mut npd_configs = Vec::new();
    for name in ["kern-filelog.json", "readonly-filelog.json"] {
        let text = std::fs::read_to_string(configs.join(name))
            .unwrap_or_else(|e| panic!("{}: {e}", configs.join(name).display()));
        let mut v: serde_json::Value = serde_json::from_str(&text).unwrap();
        v["logPath"] = serde_json::json!(log);
        let path = tmp.path().join(name);
        std::fs::write(&path, v.to_string()).unwrap();
        npd_configs.push(path);
    }
    // Ours: the same two monitors.
    let rules = tmp.path().join("rules");
    std::fs::create_dir(&rules).unwrap();
    for name in ["kernel-monitor.yaml", "readonly-monitor.yaml"] {
        let src = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../config/rules")
            .join(name);
        std::fs::copy(src, rules.join(name)).unwrap();
    }

    let (mut ours, mut theirs) = (Vec::new(), Vec::new());
    for trial in 0..TRIALS {
        ours.push(run_ours(&rules, &log));
        theirs.push(run_npd(&npd, &npd_configs, &log, trial));
    }
    for (name, runs) in [
        ("nodemedic detector check", &ours),
        ("node-problem-detector", &theirs),
    ] {
        let mut rate: Vec<f64> = runs.iter().map(|f| LINES as f64 / f.cpu_s).collect();
        rate.sort_by(f64::total_cmp);
        let mut peak: Vec<f64> = runs.iter().map(|f| f.peak_mib).collect();
        peak.sort_by(f64::total_cmp);
        let found: Vec<u64> = runs.iter().map(|f| f.problems).collect();
        println!(
            "{name}: {:.0} lines per CPU-second (min {:.0}, max {:.0}), peak RSS {:.1} MiB (median), problems found {found:?}",
            rate[rate.len() / 2],
            rate[0],
            rate[rate.len() - 1],
            peak[peak.len() / 2]
        );
    }
    let agree = ours
        .iter()
        .zip(&theirs)
        .all(|(a, b)| a.problems == b.problems);
    println!(
        "problems found {}",
        if agree { "agree" } else { "DIFFER (see above)" }
    );
}

/// A syslog kern.log with times from tomorrow on (NPD skips lines older than its start).
fn write_kern_log(path: &Path) -> u64 {
    let mut kmsg = Vec::new();
    let problems = nodemedic_detector::sample::write_kmsg(&mut kmsg, LINES, 10_000, 42).unwrap();
    let mut out = BufWriter::new(std::fs::File::create(path).unwrap());
    let start = k8s_openapi::jiff::Timestamp::now()
        .checked_add(k8s_openapi::jiff::SignedDuration::from_hours(24))
        .unwrap();
    for (i, line) in kmsg
        .split(|&b| b == b'\n')
        .filter(|l| !l.is_empty())
        .enumerate()
    {
        let text = String::from_utf8_lossy(line);
        let (prefix, msg) = text.split_once(';').unwrap();
        let mono: u64 = prefix.split(',').nth(2).unwrap().parse().unwrap();
        let at = start
            .checked_add(k8s_openapi::jiff::SignedDuration::from_micros(i as i64))
            .unwrap();
        writeln!(
            out,
            "{} node-1 kernel: [{:>5}.{:06}] {msg}",
            at.strftime("%Y-%m-%dT%H:%M:%S%.6f+00:00"),
            mono / 1_000_000,
            mono % 1_000_000
        )
        .unwrap();
    }
    problems
}

fn run_ours(rules: &Path, log: &Path) -> Figures {
    let out = Command::new("/usr/bin/time")
        .args(["-f", "TIME %U %S %M"])
        .arg(env!("CARGO_BIN_EXE_detector"))
        .arg("check")
        .arg("--rules")
        .arg(rules)
        .arg("--input")
        .arg(log)
        .args(["--output", "json"])
        .output()
        .expect("/usr/bin/time (Debian package `time`)");
    let stderr = String::from_utf8_lossy(&out.stderr);
    let t: Vec<f64> = stderr
        .lines()
        .find_map(|l| l.strip_prefix("TIME "))
        .expect("time's figures")
        .split_whitespace()
        .map(|v| v.parse().unwrap())
        .collect();
    let problems = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| l.contains("\"kind\":\"event\"") || l.contains("\"status\":\"True\""))
        .count() as u64;
    Figures {
        cpu_s: t[0] + t[1],
        peak_mib: t[2] / 1024.0,
        problems,
    }
}

fn run_npd(npd: &Path, configs: &[PathBuf], log: &Path, trial: usize) -> Figures {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let list: Vec<String> = configs.iter().map(|c| c.display().to_string()).collect();
    let mut child = Command::new(npd)
        .arg("--enable-k8s-exporter=false")
        .arg(format!("--config.system-log-monitor={}", list.join(",")))
        .arg("--prometheus-address=127.0.0.1")
        .arg(format!("--prometheus-port={port}"))
        .arg(format!("--hostname-override=bench-{trial}"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start NPD");
    let pid = child.id();
    let size = std::fs::metadata(log).unwrap().len();
    let deadline = Instant::now() + Duration::from_secs(1800);
    let mut last_cpu = -1.0;
    loop {
        std::thread::sleep(Duration::from_millis(500));
        let cpu = nodemedic_tests::process::cpu_seconds(pid);
        if at_end(pid, log, size) && cpu == last_cpu {
            break;
        }
        last_cpu = cpu;
        if Instant::now() > deadline {
            println!("NPD did not finish the file in 30 minutes");
            break;
        }
    }
    let figures = Figures {
        cpu_s: nodemedic_tests::process::cpu_seconds(pid),
        peak_mib: nodemedic_tests::process::status_mib(pid, "VmHWM:"),
        problems: problem_count(port),
    };
    let _ = child.kill();
    let _ = child.wait();
    figures
}

/// Whether every descriptor `pid` holds on `file` is at `size`.
fn at_end(pid: u32, file: &Path, size: u64) -> bool {
    let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
        return false;
    };
    let mut any = false;
    for fd in fds.flatten() {
        if std::fs::read_link(fd.path()).ok().as_deref() != Some(file) {
            continue;
        }
        any = true;
        let info = std::fs::read_to_string(format!(
            "/proc/{pid}/fdinfo/{}",
            fd.file_name().to_string_lossy()
        ))
        .unwrap_or_default();
        let pos: u64 = info
            .lines()
            .find_map(|l| l.strip_prefix("pos:"))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0);
        if pos < size {
            return false;
        }
    }
    any
}

/// Sum of NPD's `problem_counter` series.
fn problem_count(port: u16) -> u64 {
    use std::io::Read;
    let Ok(mut s) = std::net::TcpStream::connect(("127.0.0.1", port)) else {
        return 0;
    };
    let _ = s.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    let mut body = String::new();
    let _ = s.read_to_string(&mut body);
    body.lines()
        .filter(|l| l.starts_with("problem_counter{"))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum::<f64>() as u64
}
