//! What the process benches share: where they run (a real control plane or the test API server),
//! free ports, environment knobs, release binaries, metric sums.

use std::path::PathBuf;
use std::process::Command;

/// A loopback port free now (bound and released: a bench starts its process on it right after).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .expect("bind loopback")
        .local_addr()
        .expect("local address")
        .port()
}

/// The number in environment variable `name`, or `default`.
pub fn env_or(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

/// This thread's CPU time, to the nanosecond (`CLOCK_THREAD_CPUTIME_ID`).
#[allow(unsafe_code)]
pub fn thread_cpu() -> std::time::Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes only the timespec it is given.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    std::time::Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// The fleet size in `NODES` (1 to 100,000), or `default`; anything else ends the bench with a
/// message (exit 2).
pub fn nodes_from_env(default: usize) -> usize {
    match std::env::var("NODES").ok().map(|s| s.parse::<usize>()) {
        None => default,
        Some(Ok(n)) if (1..=100_000).contains(&n) => n,
        Some(_) => {
            eprintln!("NODES must be a number from 1 to 100000");
            std::process::exit(2);
        }
    }
}

/// Build the binaries of `packages` in release mode (cargo is what runs the bench) and return the
/// folder they are in.
pub fn release_bins(packages: &[&str]) -> PathBuf {
    let root = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/.."));
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let mut cmd = Command::new(cargo);
    cmd.args(["build", "--release", "--bins"])
        .current_dir(&root);
    for p in packages {
        cmd.args(["-p", p]);
    }
    let status = cmd.status().expect("cargo build");
    assert!(status.success(), "cargo build --release failed");
    root.join("target/release")
}

/// The sum of the samples of metric family `name` in a Prometheus text exposition.
pub fn metric_sum(text: &str, name: &str) -> f64 {
    text.lines()
        .filter(|l| l.starts_with(name))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

/// Where a bench runs: a real control plane (etcd + kube-apiserver from `KUBEBUILDER_ASSETS`), or
/// the test API server when there is none (said on stderr, and by [`Backend::describe`]).
pub enum Backend {
    Real(&'static crate::envtest::ControlPlane),
    Fake(crate::server::TestApiServer),
}

impl Backend {
    /// A real control plane if `KUBEBUILDER_ASSETS` names one, else the test API server.
    pub async fn start(bench: &str) -> Backend {
        match crate::envtest::assets() {
            Some(assets) => {
                let plane = crate::envtest::ControlPlane::start(&assets, None);
                Backend::Real(Box::leak(Box::new(plane)))
            }
            None => {
                crate::envtest::say(&format!(
                    "note: the {bench} bench runs on the test API server: no real control plane here (set KUBEBUILDER_ASSETS for one); the drainer's CPU and memory are its own either way"
                ));
                Backend::Fake(crate::server::TestApiServer::start().await)
            }
        }
    }

    pub fn client(&self) -> kube::Client {
        match self {
            Backend::Real(plane) => plane.client_with_agent("scale-bench"),
            Backend::Fake(server) => server.client(),
        }
    }

    pub fn write_kubeconfig(&self, path: &std::path::Path) {
        match self {
            Backend::Real(plane) => plane.write_kubeconfig(path),
            Backend::Fake(server) => server.write_kubeconfig(path),
        }
    }

    pub fn describe(&self) -> String {
        match self {
            Backend::Real(plane) => format!("real kube-apiserver {}", plane.release),
            Backend::Fake(_) => "the test API server (no real control plane here)".into(),
        }
    }

    /// The requests the drainer made (its user agent), Lease renewals aside: what a cordon and
    /// drain cost.
    pub fn drainer_requests(&self) -> usize {
        let agent = nodemedic_common::keys::DRAINER_MANAGER;
        match self {
            Backend::Real(plane) => plane
                .audit()
                .iter()
                .filter(|e| e.user_agent.starts_with(agent))
                .filter(|e| e.resource != "leases")
                .count(),
            Backend::Fake(server) => server
                .log()
                .iter()
                .filter(|e| {
                    e.user_agent
                        .as_deref()
                        .is_some_and(|a| a.starts_with(agent))
                })
                .filter(|e| !e.path.contains("/leases"))
                .count(),
        }
    }
}

/// The child process, killed however the bench ends (a panic included): it would outlive its
/// control plane.
pub struct KillOnDrop(pub std::process::Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The drainer a bench measures, started against `backend` with [`crate::fleet::drainer_command`]:
/// `NODEMEDIC_DRAINER_BIN` names another build (one with symbols, to profile it), else the shipped
/// build, built first if need be (before the clock starts: `started` is the drainer's own start).
pub struct Drainer {
    pub listen: String,
    pub pid: u32,
    pub started: std::time::Instant,
    pub child: KillOnDrop,
    /// Holds the kubeconfig for as long as the drainer runs.
    _dir: tempfile::TempDir,
}

impl Drainer {
    pub fn start(backend: &Backend) -> Drainer {
        Drainer::start_with(backend, None)
    }

    /// [`Drainer::start`] with `args` in place of the benches' budgets (`fleet::drainer_command_with`).
    pub fn start_with(backend: &Backend, args: Option<&[&str]>) -> Drainer {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let kubeconfig = dir.path().join("kubeconfig");
        backend.write_kubeconfig(&kubeconfig);
        let listen = format!("127.0.0.1:{}", free_port());
        let exe = std::env::var_os("NODEMEDIC_DRAINER_BIN")
            .map(PathBuf::from)
            .unwrap_or_else(crate::bins::shipped_drainer);
        println!("drainer: {}", exe.display());
        let mut cmd = match args {
            None => crate::fleet::drainer_command(&exe, &kubeconfig, &listen),
            Some(a) => crate::fleet::drainer_command_with(&exe, &kubeconfig, &listen, a),
        };
        die_with_parent(&mut cmd);
        let started = std::time::Instant::now();
        let child = cmd.spawn().expect("the drainer starts");
        Drainer {
            listen,
            pid: child.id(),
            started,
            child: KillOnDrop(child),
            _dir: dir,
        }
    }
}

/// The child is killed when the thread that spawned it ends, so a bench stopped by a signal (whose
/// [`KillOnDrop`] never runs) leaves no drainer behind writing into the next run. Benches spawn from
/// their main thread.
pub fn die_with_parent(cmd: &mut Command) {
    use std::os::unix::process::CommandExt;
    // SAFETY: prctl is async-signal-safe and touches no memory of the parent.
    unsafe {
        cmd.pre_exec(|| {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

/// The number in environment variable `name` (1 to `max`), or `default`; anything else ends the
/// bench with a message (exit 2).
pub fn count_from_env(name: &str, default: usize, max: usize) -> usize {
    match std::env::var(name).ok().map(|s| s.parse::<usize>()) {
        None => default,
        Some(Ok(n)) if (1..=max).contains(&n) => n,
        Some(_) => {
            eprintln!("{name} must be a number from 1 to {max}");
            std::process::exit(2);
        }
    }
}

/// The bare Node watch (`drainer/examples/watch_floor.rs` at `exe`) against the cluster in
/// `kubeconfig`, once it has listed every Node (its `synced` line, returned); its later output is
/// drained so a full pipe never blocks it.
pub async fn start_watch_floor(
    exe: &std::path::Path,
    kubeconfig: &std::path::Path,
) -> (KillOnDrop, String) {
    use tokio::io::AsyncBufReadExt;
    let mut cmd = Command::new(exe);
    cmd.env("KUBECONFIG", kubeconfig)
        .env("MALLOC_ARENA_MAX", "1")
        .stdout(std::process::Stdio::piped());
    die_with_parent(&mut cmd);
    let mut child = KillOnDrop(cmd.spawn().expect("the watcher starts"));
    let stdout = child.0.stdout.take().expect("its stdout");
    let stdout = tokio::process::ChildStdout::from_std(stdout).expect("a pipe tokio can read");
    let mut lines = tokio::io::BufReader::new(stdout).lines();
    let synced = tokio::time::timeout(std::time::Duration::from_secs(600), async {
        while let Ok(Some(l)) = lines.next_line().await {
            if l.starts_with("synced") {
                return Some(l);
            }
        }
        None
    })
    .await
    .ok()
    .flatten()
    .expect("the watcher listed the nodes within 10 minutes");
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    (child, synced)
}

/// A bench's fleet of `count` kubelet-shaped nodes (no pods) on a control plane named `name`
/// (printed with how long it took), and a kubeconfig for it in a temporary directory (kept with it).
pub async fn node_fleet(
    name: &str,
    count: usize,
) -> (Backend, tempfile::TempDir, std::path::PathBuf) {
    let backend = Backend::start(name).await;
    let t0 = std::time::Instant::now();
    crate::fleet::create_nodes(&backend.client(), count).await;
    println!(
        "fixture: {count} kubelet-shaped nodes on {} in {:.0?}",
        backend.describe(),
        t0.elapsed()
    );
    let dir = tempfile::tempdir().expect("a temporary directory");
    let kubeconfig = dir.path().join("kubeconfig");
    backend.write_kubeconfig(&kubeconfig);
    (backend, dir, kubeconfig)
}
