//! A real control plane for scenarios, the envtest way: a folder holding `etcd`, `kube-apiserver`,
//! `kube-controller-manager`, `kube-scheduler` and `kubelet`. `build/kubernetes.sh` builds them from the
//! Go module `k8s.io/kubernetes` for each release the project supports (`build/kubernetes-releases`),
//! cached outside the clone; `KUBEBUILDER_ASSETS` names another folder (controller-runtime's convention).
//!
//! [`shared`] starts one control plane per test binary on free loopback ports, of the newest supported
//! release (scenarios keep apart by unique names); [`shared_oldest`] one of the oldest, for the
//! scenarios that prove a safety claim on both; [`ControlPlane::start`] starts a private one (the Kosmos
//! flap restarts its controller manager). Every request that changes something is in the API server's
//! audit log, which [`ControlPlane::audit`] reads: that is how scenarios count writes at the API server
//! itself.
//!
//! The processes are started from one long-lived thread with `PR_SET_PDEATHSIG`, so they die with the
//! test binary even though a shared plane is never dropped (the signal fires when the *thread* that
//! started a child exits, so it must not be a test's own thread).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use serde_json::Value;

/// The environment variable naming the binaries' folder (controller-runtime's convention).
pub const ASSETS_ENV: &str = "KUBEBUILDER_ASSETS";
/// The environment variable naming the folder of the oldest supported release's binaries (else the
/// build cache's).
pub const OLDEST_ASSETS_ENV: &str = "NODEMEDIC_KUBE_OLDEST_ASSETS";

/// The token the tests' own client uses (`system:masters`).
const ADMIN_TOKEN: &str = "nodemedic-test-admin";
/// The token kube-controller-manager uses; its user name is what the guard sees when the controller
/// manager runs with `--use-service-account-credentials=false`.
const KCM_TOKEN: &str = "nodemedic-test-kcm";
pub const KCM_USER: &str = "system:kube-controller-manager";
/// The token of a real node's kubelet ([`ControlPlane::start_for_node`]).
const NODE_TOKEN: &str = "nodemedic-test-node";

/// The releases the project supports and CI tests, newest first (`build/kubernetes-releases`).
pub fn releases() -> Vec<&'static str> {
    include_str!("../../build/kubernetes-releases")
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .collect()
}

/// Where `build/kubernetes.sh` caches a release's binaries.
pub fn cache_dir(release: &str) -> Option<PathBuf> {
    let base = match std::env::var_os("NODEMEDIC_KUBE_CACHE") {
        Some(d) => PathBuf::from(d),
        None => match std::env::var_os("XDG_CACHE_HOME") {
            Some(d) => PathBuf::from(d).join("nodemedic/kubernetes"),
            None => PathBuf::from(std::env::var_os("HOME")?).join(".cache/nodemedic/kubernetes"),
        },
    };
    Some(base.join(release))
}

fn usable(dir: PathBuf) -> Option<PathBuf> {
    (dir.join("etcd").exists() && dir.join("kube-apiserver").exists()).then_some(dir)
}

/// The folder of the newest supported release: `KUBEBUILDER_ASSETS`, else the build cache's. In CI
/// (`CI` set) a missing one is an error, never a quiet fall back to the test API server.
pub fn assets() -> Option<PathBuf> {
    static FOUND: OnceLock<Option<PathBuf>> = OnceLock::new();
    FOUND
        .get_or_init(|| {
            let found = match std::env::var_os(ASSETS_ENV) {
                Some(d) => usable(PathBuf::from(d)),
                None => cache_dir(releases()[0]).and_then(usable),
            };
            if found.is_none() && std::env::var_os("CI").is_some() {
                panic!(
                    "CI needs a real control plane: no etcd and kube-apiserver in {ASSETS_ENV} or in the build cache; \
                     run build/kubernetes.sh first"
                );
            }
            found
        })
        .clone()
}

/// The folder of the oldest supported release, when built (`build/kubernetes.sh` builds both).
pub fn oldest_assets() -> Option<PathBuf> {
    let rel = *releases().last()?;
    match std::env::var_os(OLDEST_ASSETS_ENV) {
        Some(d) => usable(PathBuf::from(d)),
        None => cache_dir(rel).and_then(usable),
    }
}

/// The release of the kube-apiserver in `assets` (`v1.37.2`), from its `--version`.
pub fn release_of(assets: &Path) -> String {
    let out = Command::new(assets.join("kube-apiserver"))
        .arg("--version")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .unwrap_or_default();
    out.split_whitespace()
        .last()
        .unwrap_or("unknown")
        .to_string()
}

/// The minor version of a release (`v1.37.2` -> 37); 0 when it cannot be read.
pub fn minor_of(release: &str) -> u32 {
    release
        .trim_start_matches('v')
        .split('.')
        .nth(1)
        .and_then(|m| m.parse().ok())
        .unwrap_or(0)
}

/// Print that `scenario` is skipped because no control plane binaries are available, and how to get them.
/// Written straight to stderr, past the test harness's output capture, so a skip is seen in a passing
/// run too.
/// Say that `scenario` was skipped for want of a real control plane, and what of it (`needs`) the
/// test API server does not stand in for.
pub fn say_skipped(scenario: &str, needs: &str) {
    say(&format!(
        "skipped {scenario}: it needs {needs}, which the test API server does not stand in for; set {ASSETS_ENV} to a folder with etcd, kube-apiserver \
         and kube-controller-manager, or run build/kubernetes.sh, which builds them into its cache"
    ));
}

/// A line on stderr that `cargo test` does not capture.
pub fn say(line: &str) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr().lock(), "{line}");
}

/// The controller manager's settings.
#[derive(Debug, Clone)]
pub struct KcmOptions {
    /// `--controllers`, e.g. `nodelifecycle,disruption,garbagecollector`.
    pub controllers: String,
    /// `--use-service-account-credentials`: true makes each controller act as its own service account
    /// (kubeadm's setting), false as the controller manager's own user (the flag's default).
    pub service_account_credentials: bool,
    pub node_monitor_period: Duration,
    pub node_monitor_grace_period: Duration,
}

impl Default for KcmOptions {
    fn default() -> Self {
        KcmOptions {
            controllers: "nodelifecycle,taint-eviction-controller,disruption,garbagecollector"
                .into(),
            service_account_credentials: false,
            node_monitor_period: Duration::from_secs(1),
            node_monitor_grace_period: Duration::from_secs(40),
        }
    }
}

/// A running etcd + kube-apiserver (+ kube-controller-manager).
pub struct ControlPlane {
    /// `https://127.0.0.1:PORT`
    pub url: String,
    /// The release its kube-apiserver says it is (`v1.37.2`).
    pub release: String,
    etcd_port: u16,
    api_port: u16,
    dir: PathBuf,
    assets: PathBuf,
    etcd: Mutex<Option<Child>>,
    apiserver: Mutex<Option<Child>>,
    kcm: Mutex<Option<Child>>,
    scheduler: Mutex<Option<Child>>,
    /// The real node this plane was started for ([`ControlPlane::start_for_node`]).
    node: Option<String>,
}

static SHARED: OnceLock<Option<ControlPlane>> = OnceLock::new();
static SHARED_OLDEST: OnceLock<Option<ControlPlane>> = OnceLock::new();

/// The control plane of the newest supported release shared by the scenarios of this test binary
/// (with a controller manager running node lifecycle, disruption and the garbage collector), or `None`
/// without the binaries.
pub fn shared() -> Option<&'static ControlPlane> {
    SHARED
        .get_or_init(|| {
            assets().map(|a| {
                let plane = ControlPlane::start(&a, Some(KcmOptions::default()));
                say(&format!(
                    "note: scenarios run on a real kube-apiserver {} ({})",
                    plane.release,
                    a.display()
                ));
                plane
            })
        })
        .as_ref()
}

/// The same for the oldest supported release: the scenarios that prove a safety or security claim
/// run on it too. `None` where it is not built; in CI that is an error.
pub fn shared_oldest() -> Option<&'static ControlPlane> {
    SHARED_OLDEST
        .get_or_init(|| {
            let found = oldest_assets();
            if found.is_none() && std::env::var_os("CI").is_some() {
                panic!("CI needs the oldest supported release's control plane too; run build/kubernetes.sh first");
            }
            found.map(|a| {
                let plane = ControlPlane::start(&a, Some(KcmOptions::default()));
                say(&format!(
                    "note: the safety scenarios run on kube-apiserver {} too ({})",
                    plane.release,
                    a.display()
                ));
                plane
            })
        })
        .as_ref()
}

/// Every supported release's shared plane that is built here, newest first (the safety scenarios
/// loop over them).
pub fn shared_planes() -> Vec<&'static ControlPlane> {
    shared().into_iter().chain(shared_oldest()).collect()
}

impl ControlPlane {
    /// Start a control plane from the binaries in `assets`; panics with the process's log if one does
    /// not come up (a test cannot go on without it).
    pub fn start(assets: &Path, kcm: Option<KcmOptions>) -> ControlPlane {
        ControlPlane::start_inner(assets, kcm, None)
    }

    /// A control plane for a real node named `node` (`crate::node`): its kubelet's token
    /// (`system:node:<node>`, group `system:nodes`), ServiceAccount admission on (pods get their
    /// tokens), kube-controller-manager with every default controller (the ServiceAccounts, the
    /// cluster's root CA in each namespace, Deployments, DaemonSets, node lifecycle, disruption) and
    /// kube-scheduler.
    pub fn start_for_node(assets: &Path, node: &str) -> ControlPlane {
        let kcm = KcmOptions {
            controllers: "*".into(),
            ..KcmOptions::default()
        };
        let plane = ControlPlane::start_inner(assets, Some(kcm), Some(node.to_string()));
        plane.start_scheduler();
        plane
    }

    fn start_inner(assets: &Path, kcm: Option<KcmOptions>, node: Option<String>) -> ControlPlane {
        clean_stale_dirs();
        let dir = std::env::temp_dir().join(format!(
            "nodemedic-envtest-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&dir).expect("control plane dir");
        let [etcd_port, peer_port, api_port] = free_ports();
        let etcd = spawn(
            Command::new(assets.join("etcd"))
                .arg("--data-dir")
                .arg(dir.join("etcd"))
                .args([
                    "--listen-client-urls",
                    &format!("http://127.0.0.1:{etcd_port}"),
                    "--advertise-client-urls",
                    &format!("http://127.0.0.1:{etcd_port}"),
                    "--listen-peer-urls",
                    &format!("http://127.0.0.1:{peer_port}"),
                    "--initial-advertise-peer-urls",
                    &format!("http://127.0.0.1:{peer_port}"),
                    "--initial-cluster",
                    &format!("default=http://127.0.0.1:{peer_port}"),
                    "--unsafe-no-fsync",
                ]),
            &dir.join("etcd.log"),
        );
        write_files(&dir, node.as_deref());
        let release = release_of(assets);
        let apiserver = spawn_apiserver(
            assets,
            &release,
            node.is_some(),
            &dir,
            etcd_port,
            api_port,
            &dir.join("kube-apiserver.log"),
        );
        let plane = ControlPlane {
            url: format!("https://127.0.0.1:{api_port}"),
            release,
            etcd_port,
            api_port,
            dir,
            assets: assets.to_path_buf(),
            etcd: Mutex::new(Some(etcd)),
            apiserver: Mutex::new(Some(apiserver)),
            kcm: Mutex::new(None),
            scheduler: Mutex::new(None),
            node,
        };
        plane.wait_ready();
        if let Some(k) = kcm {
            plane.start_kcm(&k);
        }
        plane
    }

    /// A client for this control plane as `system:masters`, with kube's retry layer off like the
    /// binaries' own clients (`common::client`), so a PDB's 429 reaches the code under test.
    pub fn client(&self) -> kube::Client {
        self.client_as(ADMIN_TOKEN)
    }

    /// A client acting as `user` (impersonated by the admin), e.g. a controller's identity.
    pub fn client_impersonating(&self, user: &str) -> kube::Client {
        self.build_client(ADMIN_TOKEN, Some(user))
    }

    /// A client acting as `user` in `groups` (impersonation sets no groups by itself).
    pub fn client_impersonating_groups(&self, user: &str, groups: &[&str]) -> kube::Client {
        let mut config = self.config(ADMIN_TOKEN, "nodemedic-tests");
        config.auth_info.impersonate = Some(user.to_string());
        config.auth_info.impersonate_groups = Some(groups.iter().map(|g| g.to_string()).collect());
        nodemedic_common::client::from_config(config, "nodemedic-tests")
            .expect("a client for the control plane")
    }

    fn config(&self, token: &str, _user_agent: &str) -> kube::Config {
        let mut config = kube::Config::new(self.url.parse().expect("control plane URL"));
        config.accept_invalid_certs = true;
        config.auth_info.token = Some(token.to_string().into());
        config
    }

    fn client_as(&self, token: &str) -> kube::Client {
        self.build_client(token, None)
    }

    /// A client presenting `token` as is (a ServiceAccount token from the TokenRequest API, say):
    /// the API server authenticates it, with whatever claims it carries.
    pub fn client_with_token(&self, token: &str) -> kube::Client {
        self.build_client_agent(token, None, "nodemedic-tests")
    }

    /// An admin client whose requests carry `user_agent` (the audit log tells them apart).
    pub fn client_with_agent(&self, user_agent: &str) -> kube::Client {
        self.build_client_agent(ADMIN_TOKEN, None, user_agent)
    }

    fn build_client(&self, token: &str, impersonate: Option<&str>) -> kube::Client {
        self.build_client_agent(token, impersonate, "nodemedic-tests")
    }

    fn build_client_agent(
        &self,
        token: &str,
        impersonate: Option<&str>,
        user_agent: &str,
    ) -> kube::Client {
        let mut config = self.config(token, user_agent);
        config.auth_info.impersonate = impersonate.map(String::from);
        nodemedic_common::client::from_config(config, user_agent)
            .expect("a client for the control plane")
    }

    /// Write a kubeconfig for this control plane as `system:masters` to `path` (for a binary run as
    /// its own process, e.g. by a benchmark).
    pub fn write_kubeconfig(&self, path: &Path) {
        std::fs::write(
            path,
            format!(
                "apiVersion: v1\nkind: Config\nclusters: [{{name: c, cluster: {{server: \"{}\", insecure-skip-tls-verify: true}}}}]\n\
                 users: [{{name: u, user: {{token: {ADMIN_TOKEN}}}}}]\ncontexts: [{{name: c, context: {{cluster: c, user: u}}}}]\ncurrent-context: c\n",
                self.url
            ),
        )
        .expect("kubeconfig");
    }

    /// (Re)start kube-controller-manager with `opts`, stopping the one running.
    pub fn start_kcm(&self, opts: &KcmOptions) {
        let mut slot = self.kcm.lock().unwrap();
        if let Some(mut old) = slot.take() {
            let _ = old.kill();
            let _ = old.wait();
        }
        if !self.assets.join("kube-controller-manager").exists() {
            panic!(
                "{} has no kube-controller-manager (build/kubernetes.sh builds it)",
                self.assets.display()
            );
        }
        let kubeconfig = self.dir.join("kcm.kubeconfig");
        std::fs::write(
            &kubeconfig,
            format!(
                "apiVersion: v1\nkind: Config\nclusters: [{{name: c, cluster: {{server: \"{}\", insecure-skip-tls-verify: true}}}}]\n\
                 users: [{{name: u, user: {{token: {KCM_TOKEN}}}}}]\ncontexts: [{{name: c, context: {{cluster: c, user: u}}}}]\ncurrent-context: c\n",
                self.url
            ),
        )
        .expect("kcm kubeconfig");
        let child = spawn(
            Command::new(self.assets.join("kube-controller-manager"))
                .arg("--kubeconfig")
                .arg(&kubeconfig)
                .args([
                    "--controllers",
                    &opts.controllers,
                    "--leader-elect=false",
                    &format!(
                        "--use-service-account-credentials={}",
                        opts.service_account_credentials
                    ),
                    &format!(
                        "--node-monitor-period={}ms",
                        opts.node_monitor_period.as_millis()
                    ),
                    &format!(
                        "--node-monitor-grace-period={}ms",
                        opts.node_monitor_grace_period.as_millis()
                    ),
                    "--bind-address=127.0.0.1",
                    "--secure-port=0",
                ])
                .args(self.node.iter().flat_map(|_| {
                    // For a real node's pods: the root CA each namespace's kube-root-ca.crt carries.
                    [
                        format!("--root-ca-file={}", self.ca_file().display()),
                        format!(
                            "--service-account-private-key-file={}",
                            self.dir.join("sa.key").display()
                        ),
                    ]
                })),
            &self.dir.join("kube-controller-manager.log"),
        );
        *slot = Some(child);
    }

    /// Start kube-scheduler (as the admin, no leader election).
    pub fn start_scheduler(&self) {
        let kubeconfig = self.dir.join("scheduler.kubeconfig");
        self.write_kubeconfig(&kubeconfig);
        let child = spawn(
            Command::new(self.assets.join("kube-scheduler"))
                .arg("--kubeconfig")
                .arg(&kubeconfig)
                .args([
                    "--leader-elect=false",
                    "--bind-address=127.0.0.1",
                    "--secure-port=0",
                ]),
            &self.dir.join("kube-scheduler.log"),
        );
        *self.scheduler.lock().unwrap() = Some(child);
    }

    /// The API server's serving certificate with the CA it generated for it (what pods trust).
    pub fn ca_file(&self) -> PathBuf {
        self.dir.join("certs/apiserver.crt")
    }

    /// The folder of this plane's binaries.
    pub fn assets(&self) -> &Path {
        &self.assets
    }

    /// The API server's port on 127.0.0.1.
    pub fn port(&self) -> u16 {
        self.api_port
    }

    /// Write the kubeconfig of this plane's real node's kubelet (`system:node:<node>`).
    pub fn write_node_kubeconfig(&self, path: &Path) {
        assert!(self.node.is_some(), "a plane started for a node");
        std::fs::write(
            path,
            format!(
                "apiVersion: v1\nkind: Config\nclusters: [{{name: c, cluster: {{server: \"{}\", certificate-authority: \"{}\"}}}}]\n\
                 users: [{{name: u, user: {{token: {NODE_TOKEN}}}}}]\ncontexts: [{{name: c, context: {{cluster: c, user: u}}}}]\ncurrent-context: c\n",
                self.url,
                self.ca_file().display()
            ),
        )
        .expect("node kubeconfig");
    }

    /// Stop kube-apiserver (SIGKILL: connections reset, watches cut); etcd keeps the data. For a
    /// private plane only ([`ControlPlane::start`]): the shared one serves other scenarios.
    pub fn stop_apiserver(&self) {
        if let Some(mut c) = self.apiserver.lock().unwrap().take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Start kube-apiserver again on the same port and wait until it is ready: what clients see of
    /// an API server restart (every watch lost, resourceVersions kept).
    pub fn restart_apiserver(&self) {
        self.stop_apiserver();
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let child = spawn_apiserver(
            &self.assets,
            &self.release,
            self.node.is_some(),
            &self.dir,
            self.etcd_port,
            self.api_port,
            &self.dir.join(format!("kube-apiserver-{n}.log")),
        );
        *self.apiserver.lock().unwrap() = Some(child);
        self.wait_ready();
    }

    /// Stop kube-controller-manager (a scenario that must not race a controller).
    pub fn stop_kcm(&self) {
        if let Some(mut c) = self.kcm.lock().unwrap().take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    fn wait_ready(&self) {
        let deadline = Instant::now() + Duration::from_secs(60);
        let port = self.url.rsplit(':').next().unwrap().to_string();
        while Instant::now() < deadline {
            // /readyz without TLS verification: a bare TCP connect first, then the real check over HTTPS.
            if std::net::TcpStream::connect(format!("127.0.0.1:{port}")).is_ok() && self.readyz() {
                return;
            }
            if let Some(c) = self.apiserver.lock().unwrap().as_mut()
                && let Ok(Some(status)) = c.try_wait()
            {
                panic!(
                    "kube-apiserver exited with {status}; its log:\n{}",
                    tail(&self.dir.join("kube-apiserver.log"))
                );
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        panic!(
            "kube-apiserver not ready within 60 s; its log:\n{}",
            tail(&self.dir.join("kube-apiserver.log"))
        );
    }

    fn readyz(&self) -> bool {
        // A small runtime of its own: start() is called from synchronous code (OnceLock), and a
        // kube::Client must be built inside a runtime.
        std::thread::scope(|s| {
            s.spawn(|| {
                let rt = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .unwrap();
                rt.block_on(async {
                    let client = self.client();
                    let url = &self.url;
                    let req = http_get_request(&format!("{url}/readyz"));
                    matches!(client.request_text(req).await, Ok(t) if t.trim() == "ok")
                })
            })
            .join()
            .unwrap_or(false)
        })
    }

    /// The audit events logged so far (writes of every kind, and reads other than list/watch; node
    /// heartbeat Leases are left out), oldest first.
    pub fn audit(&self) -> Vec<AuditEvent> {
        let text = std::fs::read_to_string(self.dir.join("audit.log")).unwrap_or_default();
        text.lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .map(|v| AuditEvent::from_json(&v))
            .collect()
    }

    /// The API server's own Prometheus metrics (`/metrics`).
    pub async fn metrics(&self) -> String {
        self.client()
            .request_text(http_get_request(&format!("{}/metrics", self.url)))
            .await
            .expect("GET /metrics")
    }

    /// Where the processes write their logs and data (printed when a scenario fails).
    pub fn dir(&self) -> &Path {
        &self.dir
    }
}

impl Drop for ControlPlane {
    fn drop(&mut self) {
        for slot in [&self.scheduler, &self.kcm, &self.apiserver, &self.etcd] {
            if let Some(mut c) = slot.lock().unwrap_or_else(|e| e.into_inner()).take() {
                let _ = c.kill();
                let _ = c.wait();
            }
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn http_get_request(url: &str) -> http::Request<Vec<u8>> {
    http::Request::get(url).body(Vec::new()).unwrap()
}

/// One request as the API server's audit log recorded it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuditEvent {
    /// get, create, update, patch, delete, ...
    pub verb: String,
    pub resource: String,
    pub subresource: String,
    pub namespace: String,
    pub name: String,
    pub user: String,
    pub user_agent: String,
    pub code: u16,
    /// `?dryRun=All`: admitted, never stored.
    pub dry_run: bool,
    /// Audit annotations (e.g. an admission webhook's, as `<webhook name>/<key>`).
    pub annotations: std::collections::BTreeMap<String, String>,
}

impl AuditEvent {
    fn from_json(v: &Value) -> AuditEvent {
        let s = |p: &str| {
            v.pointer(p)
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string()
        };
        AuditEvent {
            verb: s("/verb"),
            resource: s("/objectRef/resource"),
            subresource: s("/objectRef/subresource"),
            namespace: s("/objectRef/namespace"),
            name: s("/objectRef/name"),
            user: s("/user/username"),
            user_agent: s("/userAgent"),
            dry_run: s("/requestURI").contains("dryRun=All"),
            code: v
                .pointer("/responseStatus/code")
                .and_then(Value::as_u64)
                .unwrap_or(0) as u16,
            annotations: v
                .get("annotations")
                .and_then(Value::as_object)
                .map(|m| {
                    m.iter()
                        .map(|(k, v)| (k.clone(), v.as_str().unwrap_or("").to_string()))
                        .collect()
                })
                .unwrap_or_default(),
        }
    }
}

static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);

fn write_files(dir: &Path, node: Option<&str>) {
    let mut tokens = format!(
        "{ADMIN_TOKEN},nodemedic-test-admin,admin,system:masters\n\
         {KCM_TOKEN},{KCM_USER},kcm,system:masters\n"
    );
    if let Some(node) = node {
        tokens.push_str(&format!(
            "{NODE_TOKEN},system:node:{node},node,system:nodes\n"
        ));
    }
    std::fs::write(dir.join("tokens.csv"), tokens).expect("tokens.csv");
    std::fs::write(
        dir.join("audit-policy.yaml"),
        "apiVersion: audit.k8s.io/v1\nkind: Policy\nomitStages: [RequestReceived]\nrules:\n\
         - level: None\n  resources: [{group: coordination.k8s.io, resources: [leases]}]\n  namespaces: [kube-node-lease]\n\
         - level: None\n  verbs: [list, watch]\n\
         - level: None\n  nonResourceURLs: ['/*']\n\
         - level: Metadata\n",
    )
    .expect("audit policy");
    // The service-account signing key (ECDSA P-256 from rcgen: no openssl needed).
    let key = rcgen::KeyPair::generate().expect("a service-account signing key");
    std::fs::write(dir.join("sa.key"), key.serialize_pem()).expect("sa.key");
    std::fs::write(dir.join("sa.pub"), key.public_key_pem()).expect("sa.pub");
}

fn free_ports() -> [u16; 3] {
    let listeners: Vec<std::net::TcpListener> = (0..3)
        .map(|_| std::net::TcpListener::bind("127.0.0.1:0").expect("a free port"))
        .collect();
    let ports: Vec<u16> = listeners
        .iter()
        .map(|l| l.local_addr().unwrap().port())
        .collect();
    [ports[0], ports[1], ports[2]]
}

fn tail(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(40)..].join("\n")
}

/// Remove the folders of control planes whose test binary is gone (its processes died with it).
fn clean_stale_dirs() {
    let Ok(entries) = std::fs::read_dir(std::env::temp_dir()) else {
        return;
    };
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let Some(rest) = name.strip_prefix("nodemedic-envtest-") else {
            continue;
        };
        let pid = rest.split('-').next().unwrap_or("");
        if !pid.is_empty() && !Path::new(&format!("/proc/{pid}")).exists() {
            let _ = std::fs::remove_dir_all(e.path());
        }
    }
}

/// kube-apiserver on `api_port` over the etcd on `etcd_port`, its files in `dir`.
fn spawn_apiserver(
    assets: &Path,
    release: &str,
    service_accounts: bool,
    dir: &Path,
    etcd_port: u16,
    api_port: u16,
    log: &Path,
) -> Child {
    let mut cmd = Command::new(assets.join("kube-apiserver"));
    if !service_accounts {
        // No serviceaccount controller runs: pods need no ServiceAccount object (envtest does the same).
        cmd.args(["--disable-admission-plugins", "ServiceAccount"]);
    }
    if minor_of(release) < 30 {
        // ValidatingAdmissionPolicy is alpha before 1.30 (deploy/own-node-policy is tested with it).
        cmd.args([
            "--feature-gates",
            "ValidatingAdmissionPolicy=true",
            "--runtime-config",
            "admissionregistration.k8s.io/v1alpha1=true",
        ]);
    }
    spawn(
        cmd.args([
            "--etcd-servers",
            &format!("http://127.0.0.1:{etcd_port}"),
            "--bind-address",
            "127.0.0.1",
            "--secure-port",
            &api_port.to_string(),
            "--service-account-issuer",
            "https://kubernetes.default.svc",
            "--service-cluster-ip-range",
            "10.0.0.0/24",
            // As kubeadm sets them up: the Node authorizer and NodeRestriction confine each
            // kubelet (and a detector with its node's credential) to its own Node.
            "--authorization-mode",
            "Node,RBAC",
            "--enable-admission-plugins",
            "NodeRestriction",
            // As every cluster that runs a node agent: the detector's DaemonSet is privileged.
            "--allow-privileged=true",
            "--audit-log-mode",
            "blocking",
        ])
        .arg("--cert-dir")
        .arg(dir.join("certs"))
        .arg("--service-account-key-file")
        .arg(dir.join("sa.pub"))
        .arg("--service-account-signing-key-file")
        .arg(dir.join("sa.key"))
        .arg("--token-auth-file")
        .arg(dir.join("tokens.csv"))
        .arg("--audit-policy-file")
        .arg(dir.join("audit-policy.yaml"))
        .arg("--audit-log-path")
        .arg(dir.join("audit.log")),
        log,
    )
}

type SpawnJob = Box<dyn FnOnce() + Send>;

/// Spawn `cmd` (output to `log`) from the long-lived spawner thread, with SIGKILL on that thread's
/// (and so the test binary's) death.
pub(crate) fn spawn(cmd: &mut Command, log: &Path) -> Child {
    static SPAWNER: OnceLock<Mutex<mpsc::Sender<SpawnJob>>> = OnceLock::new();
    let tx = SPAWNER.get_or_init(|| {
        let (tx, rx) = mpsc::channel::<SpawnJob>();
        std::thread::Builder::new()
            .name("envtest-spawner".into())
            .spawn(move || {
                // Never returns while the binary runs: its exit would kill the children.
                for job in rx {
                    job();
                }
                loop {
                    std::thread::park();
                }
            })
            .expect("spawner thread");
        Mutex::new(tx)
    });
    let out = std::fs::File::create(log).expect("process log");
    let err = out.try_clone().expect("process log");
    cmd.stdin(Stdio::null()).stdout(out).stderr(err);
    // SAFETY: prctl(PR_SET_PDEATHSIG) is async-signal-safe; nothing else runs between fork and exec.
    unsafe {
        use std::os::unix::process::CommandExt;
        cmd.pre_exec(|| {
            rustix::process::set_parent_process_death_signal(Some(rustix::process::Signal::KILL))
                .map_err(std::io::Error::from)
        });
    }
    let program = cmd.get_program().to_string_lossy().into_owned();
    let cmd = std::mem::replace(cmd, Command::new("true"));
    let (rtx, rrx) = mpsc::channel();
    let mut cmd = cmd;
    tx.lock()
        .unwrap()
        .send(Box::new(move || {
            let _ = rtx.send(cmd.spawn());
        }))
        .expect("spawner alive");
    rrx.recv()
        .expect("spawner answers")
        .unwrap_or_else(|e| panic!("cannot start {program}: {e}"))
}
