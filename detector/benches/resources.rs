//! What the `resources` input costs, with the binary `cargo build --release` gives (the bench
//! profile is release): issue 41's budget is at most 1 ms of CPU per sample with everything on,
//! and no measurable change to idle RSS.
//! 1. `detector sample`: CPU per reading of every signal (three pressure files, meminfo, loadavg,
//!    the two PID limits, two `statvfs`) and printing it, over 20,000 readings.
//! 2. `detector run` against the test API server, idle: RSS after settling with the default rules,
//!    and with the default rules and the shipped resource-monitor.
//! 3. `detector run` with the shipped resource-monitor alone (its 13 rules, the trend windows),
//!    reading every second, against the same reading every minute: the CPU the first spends more
//!    over a window, per sample (reading, handing over, every rule). Everything else (the
//!    writer's tick, the heartbeat) is the same in both, and no log input polls.
//!
//! 4. NPD's system stats monitor (issue 66), its two shipped files: `detector stats`' CPU per
//!    collection of both over 2,000 collections; `detector run`'s idle RSS with the default rules
//!    and the two files at NPD's intervals against the default rules alone; and the CPU a
//!    collection costs the daemon (both files every second against every minute, as in 3). With
//!    `NPD_BIN` set, node-problem-detector runs the same two files beside it (every second, then
//!    idle RSS at NPD's intervals), read the same way.
//!
//! Three runs of each; min / median / max. `cargo bench -p nodemedic-detector --bench resources`

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use nodemedic_tests::process::{CpuMeter, cpu_seconds, status_mib};

const READINGS: u32 = 20_000;
const COLLECTIONS: u32 = 2_000;
const RUNS: usize = 3;
const WINDOW: Duration = Duration::from_secs(20);

/// The detector under test: `NODEMEDIC_DETECTOR_BIN` (a build with symbols, to profile), else
/// the one cargo built for this bench.
fn exe() -> String {
    std::env::var("NODEMEDIC_DETECTOR_BIN")
        .unwrap_or_else(|_| env!("CARGO_BIN_EXE_detector").into())
}

/// CPU microseconds per reading of `detector sample`.
fn sample_cpu_us() -> f64 {
    let mut cmd = Command::new(exe());
    cmd.args([
        "sample",
        "--interval",
        "0s",
        "--count",
        &READINGS.to_string(),
    ])
    .args(["--filesystem", "nodefs=/", "--filesystem", "imagefs=/tmp"]);
    cpu_until_exit(cmd) * 1e6 / f64::from(READINGS)
}

/// CPU microseconds per collection of NPD's two system stats files by `detector stats`.
fn stats_cpu_us(files: &str) -> f64 {
    let mut cmd = Command::new(exe());
    cmd.args(["stats", files, "--interval", "0s", "--count"])
        .arg(COLLECTIONS.to_string());
    cpu_until_exit(cmd) * 1e6 / f64::from(COLLECTIONS)
}

/// The CPU seconds `cmd` spends from start to exit.
fn cpu_until_exit(mut cmd: Command) -> f64 {
    let mut child = cmd
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // The process's own CPU, read just before it exits: wait4's rusage through /proc is gone
    // after the wait, so poll until it is a zombie.
    let pid = child.id();
    let mut cpu = 0.0;
    loop {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        let zombie = stat
            .rsplit_once(") ")
            .is_some_and(|(_, r)| r.starts_with('Z'));
        cpu = f64::max(cpu, cpu_seconds(pid));
        if zombie {
            break;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    child.wait().unwrap();
    cpu
}

/// NPD's two system stats monitor files in `dir/name`, collected `every` (None: NPD's own 60 s
/// and 120 s), comma separated as the flag takes them.
fn stats_files(dir: &Path, name: &str, every: Option<&str>) -> String {
    let to = dir.join(name);
    std::fs::create_dir_all(to.join("guestosconfig")).unwrap();
    let npd = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/fixtures/npd");
    std::fs::copy(
        format!("{npd}/guestosconfig/known-modules.json"),
        to.join("guestosconfig/known-modules.json"),
    )
    .unwrap();
    let mut files = Vec::new();
    for (file, own) in [
        ("system-stats-monitor.json", "60s"),
        ("net-cgroup-system-stats-monitor.json", "120s"),
    ] {
        let text = std::fs::read_to_string(format!("{npd}/{file}")).unwrap();
        let every = every.unwrap_or(own);
        // NPD's own rule, kept: the lsblk timeout may not be longer than the interval.
        let text = text
            .replace(
                &format!("\"invokeInterval\": \"{own}\""),
                &format!("\"invokeInterval\": \"{every}\""),
            )
            .replace("\"lsblkTimeout\": \"5s\"", "\"lsblkTimeout\": \"1s\"");
        std::fs::write(to.join(file), text).unwrap();
        files.push(to.join(file).display().to_string());
    }
    files.join(",")
}

/// A rules directory: the default rules (`logs`) and the resource-monitor read every `every`.
fn rules_dir(dir: &Path, name: &str, logs: bool, every: Option<&str>) -> std::path::PathBuf {
    let rules = dir.join(name);
    std::fs::create_dir_all(&rules).unwrap();
    let shipped = concat!(env!("CARGO_MANIFEST_DIR"), "/../config");
    for f in std::fs::read_dir(format!("{shipped}/rules"))
        .unwrap()
        .filter(|_| logs)
    {
        let f = f.unwrap().path();
        std::fs::copy(&f, rules.join(f.file_name().unwrap())).unwrap();
    }
    if let Some(every) = every {
        let text = std::fs::read_to_string(format!("{shipped}/rules-extra/resource-monitor.yaml"))
            .unwrap()
            .replace("interval: 10s", &format!("interval: {every}"))
            .replace("nodefs: /var/lib/kubelet", "nodefs: /")
            .replace("imagefs: /var/lib/containerd", "imagefs: /tmp");
        std::fs::write(rules.join("resource-monitor.yaml"), text).unwrap();
    }
    rules
}

fn start(dir: &Path, rules: &Path, kubeconfig: &Path, node: &str, stats: Option<&str>) -> Child {
    Command::new(exe())
        .args([
            "run",
            "--node-name",
            node,
            "--listen",
            "127.0.0.1:0",
            "--rules",
        ])
        .arg(rules)
        .arg("--kmsg-path")
        .arg(dir.join("kmsg"))
        .arg("--state-file")
        .arg(dir.join(format!("{node}.json")))
        .args(stats.map(|f| format!("--config.system-stats-monitor={f}")))
        .env("KUBECONFIG", kubeconfig)
        .env("RUST_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("start detector")
}

/// RSS (MiB) after settling, and CPU seconds over [`WINDOW`], of `detector run` with `rules` (and
/// the system stats files `stats`).
fn daemon(
    dir: &Path,
    rules: &Path,
    kubeconfig: &Path,
    node: &str,
    stats: Option<&str>,
) -> (f64, f64) {
    measure(start(dir, rules, kubeconfig, node, stats))
}

/// RSS (MiB) after 5 s, and CPU seconds over [`WINDOW`], of a started daemon; killed after.
fn measure(mut child: Child) -> (f64, f64) {
    std::thread::sleep(Duration::from_secs(5));
    let rss = status_mib(child.id(), "VmRSS:");
    let meter = CpuMeter::start(child.id());
    let (begin, started) = (meter.seconds(), Instant::now());
    std::thread::sleep(WINDOW);
    let cpu = (meter.seconds() - begin) * WINDOW.as_secs_f64() / started.elapsed().as_secs_f64();
    let _ = child.kill();
    let _ = child.wait();
    (rss, cpu)
}

fn spread(mut v: Vec<f64>, digits: usize) -> String {
    v.sort_by(f64::total_cmp);
    format!(
        "{:.d$} / {:.d$} / {:.d$}",
        v[0],
        v[v.len() / 2],
        v[v.len() - 1],
        d = digits
    )
}

fn main() {
    let per_reading: Vec<f64> = (0..RUNS).map(|_| sample_cpu_us()).collect();
    println!(
        "detector sample: CPU per reading of every signal, min / median / max of {RUNS} x {READINGS}: {} us",
        spread(per_reading, 1)
    );

    let tmp = tempfile::tempdir().unwrap();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let kubeconfig = tmp.path().join("kubeconfig");
    let server = rt.block_on(async {
        let mut cluster = nodemedic_tests::cluster::Cluster::fake().await;
        cluster.create_node("bench-a").await;
        cluster.create_node("bench-b").await;
        cluster.write_kubeconfig(&kubeconfig);
        cluster.fake.take().expect("the test API server")
    });
    std::fs::write(tmp.path().join("kmsg"), "6,1,1,-;boot\n").unwrap();
    let dir = tmp.path();
    let defaults = rules_dir(dir, "defaults", true, None);
    let both = rules_dir(dir, "both", true, Some("10s"));
    let (every_second, every_minute) = (
        rules_dir(dir, "second", false, Some("1s")),
        rules_dir(dir, "minute", false, Some("60s")),
    );
    let (mut rss_without, mut rss_with, mut per_sample) = (vec![], vec![], vec![]);
    for _ in 0..RUNS {
        rss_without.push(daemon(dir, &defaults, &kubeconfig, "bench-a", None).0);
        rss_with.push(daemon(dir, &both, &kubeconfig, "bench-b", None).0);
        let busy = daemon(dir, &every_second, &kubeconfig, "bench-a", None).1;
        let quiet = daemon(dir, &every_minute, &kubeconfig, "bench-b", None).1;
        // One sample a second against none in the window.
        per_sample.push((busy - quiet) * 1e6 / WINDOW.as_secs_f64());
    }
    println!(
        "detector run, idle RSS after 5 s, default rules: {} MiB; with the resource-monitor too: {} MiB",
        spread(rss_without, 1),
        spread(rss_with, 1)
    );
    println!(
        "detector run: CPU per sample of the resource-monitor (a {} s window at 1 sample/s less one with none): {} us",
        WINDOW.as_secs(),
        spread(per_sample, 0)
    );
    system_stats(dir, &defaults, &kubeconfig);
    drop(server);
}

/// Part 4: NPD's system stats monitor, ours and, with `NPD_BIN`, NPD's.
fn system_stats(dir: &Path, defaults: &Path, kubeconfig: &Path) {
    let (npds, second) = (
        stats_files(dir, "stats-npd", None),
        stats_files(dir, "stats-second", Some("1s")),
    );
    let minute = stats_files(dir, "stats-minute", Some("60s"));
    let per_collection: Vec<f64> = (0..RUNS).map(|_| stats_cpu_us(&npds)).collect();
    let (mut rss, mut busy_quiet) = (vec![], vec![]);
    for _ in 0..RUNS {
        rss.push(daemon(dir, defaults, kubeconfig, "bench-a", Some(&npds)).0);
        let busy = daemon(dir, defaults, kubeconfig, "bench-a", Some(&second)).1;
        let quiet = daemon(dir, defaults, kubeconfig, "bench-b", Some(&minute)).1;
        busy_quiet.push((busy - quiet) * 1e6 / WINDOW.as_secs_f64());
    }
    println!(
        "detector stats: CPU per collection of NPD's two system stats files, {RUNS} x {COLLECTIONS}: {} us",
        spread(per_collection, 0)
    );
    println!(
        "detector run, idle RSS after 5 s, default rules and NPD's two system stats files: {} MiB",
        spread(rss, 1)
    );
    println!(
        "detector run: CPU per collection of both files (every second less every minute, {} s): {} us",
        WINDOW.as_secs(),
        spread(busy_quiet, 0)
    );
    let Some(npd) = std::env::var_os("NPD_BIN") else {
        println!(
            "node-problem-detector beside it: skipped (set NPD_BIN to a node-problem-detector binary)"
        );
        return;
    };
    let run_npd = |files: &str| {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map(|a| a.port())
            .unwrap();
        Command::new(&npd)
            .args([
                "--enable-k8s-exporter=false",
                "--prometheus-address=127.0.0.1",
            ])
            .arg(format!("--prometheus-port={port}"))
            .arg(format!("--config.system-stats-monitor={files}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start node-problem-detector")
    };
    let (mut rss, mut per) = (vec![], vec![]);
    for _ in 0..RUNS {
        rss.push(measure(run_npd(&npds)).0);
        // NPD's idle cost without collections is not separable here: every second, all of it.
        per.push(measure(run_npd(&second)).1 * 1e6 / WINDOW.as_secs_f64());
    }
    println!(
        "node-problem-detector, the same two files: idle RSS after 5 s {} MiB; CPU per collection (every second, all of its CPU) {} us",
        spread(rss, 1),
        spread(per, 0)
    );
}
