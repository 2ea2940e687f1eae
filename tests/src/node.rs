//! A real node on this machine: containerd (with its CRI plugin), runc and the CNI plugins from
//! Debian's packages, and the kubelet of the control plane's own release, registered to a
//! [`ControlPlane::start_for_node`] plane. Everything it runs lives under one temporary folder: its
//! own containerd socket, root and state, its own kubelet root, its pods' cgroups under a cgroup
//! root of its own. It has no pod network: its CNI configuration is the `loopback` plugin alone (so
//! the runtime calls its network ready and nothing on the machine changes), and the pods it runs use
//! the host's network (`hostNetwork: true`), as node agents do; nothing leaves 127.0.0.1.
//!
//! What a kind-style e2e gives, within this machine: the kubelet runs what the scheduler binds, stops
//! what is evicted, reports its status; the images are handed over as a registry would (OCI archives
//! from buildah's storage).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::envtest::ControlPlane;

/// The tools a real node needs, and the Debian packages they come from; `None` when all are here.
pub fn missing() -> Option<String> {
    let tools = [
        ("containerd", "containerd"),
        ("runc", "runc"),
        ("ctr", "containerd"),
        ("buildah", "buildah"),
        ("iptables", "iptables"),
    ];
    let gone: Vec<String> = tools
        .iter()
        .filter(|(t, _)| {
            Command::new("sh")
                .args(["-c", &format!("command -v {t}")])
                .output()
                .map(|o| !o.status.success())
                .unwrap_or(true)
        })
        .map(|(t, p)| format!("{t} (Debian: {p})"))
        .collect();
    let cni = Path::new(CNI_BIN).join("loopback");
    let mut gone = gone;
    if !cni.exists() {
        gone.push(format!(
            "{} (Debian: containernetworking-plugins)",
            cni.display()
        ));
    }
    (!gone.is_empty()).then(|| gone.join(", "))
}

/// Where Debian's containernetworking-plugins puts the plugins.
const CNI_BIN: &str = "/usr/lib/cni";
/// The sandbox ("pause") image: made by [`RealNode::make_local_images`] from the Debian base the
/// images test makes, as nothing can be pulled here.
pub const PAUSE_IMAGE: &str = "localhost/nodemedic-pause:ci";
/// A workload image: `sleep infinity` on the same base.
pub const SLEEP_IMAGE: &str = "localhost/nodemedic-sleep:ci";

pub struct RealNode {
    pub name: String,
    dir: tempfile::TempDir,
    containerd: Child,
    kubelet: Option<Child>,
}

impl RealNode {
    /// Make, in buildah's storage, the pause and workload images from the Debian base image
    /// (`tests/images/bases.sh` makes it).
    pub fn make_local_images() {
        for (image, cmd) in [
            (PAUSE_IMAGE, r#"["/bin/sleep","infinity"]"#),
            (SLEEP_IMAGE, r#"["/bin/sleep","infinity"]"#),
        ] {
            let have = Command::new("buildah")
                .args(["inspect", "--type", "image", image])
                .output()
                .is_ok_and(|o| o.status.success());
            if have {
                continue;
            }
            let c = run(Command::new("buildah").args([
                "from",
                "--pull-never",
                "docker.io/library/debian:bookworm-slim",
            ]));
            let c = c.trim();
            run(Command::new("buildah").args(["config", "--entrypoint", cmd, "--cmd", "", c]));
            run(Command::new("buildah").args(["commit", "--quiet", "--rm", c, image]));
        }
    }

    /// Start containerd and the kubelet for `plane`'s node; returns once the Node is Ready (a poll
    /// of the Node, every half second: its Ready condition is what every scenario waits for).
    pub async fn start(plane: &ControlPlane, name: &str, images: &[&str]) -> RealNode {
        let dir = tempfile::Builder::new()
            .prefix("nm-node-")
            .tempdir_in("/tmp")
            .unwrap();
        let d = dir.path().to_path_buf();
        std::fs::create_dir_all(d.join("cni")).unwrap();
        // Loopback only: a second network besides containerd's own lo, which the CRI plugin needs
        // to call the runtime's network ready.
        std::fs::write(
            d.join("cni/10-loopback.conflist"),
            r#"{"cniVersion": "1.0.0", "name": "nodemedic-lo", "plugins": [{"type": "loopback"}]}"#,
        )
        .unwrap();
        std::fs::write(
            d.join("containerd.toml"),
            format!(
                r#"version = 2
root = "{d}/containerd/root"
state = "{d}/containerd/state"
[grpc]
  address = "{d}/containerd.sock"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "{PAUSE_IMAGE}"
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  enable_selinux = false
  # This machine's sandbox lets no process lower its OOM score (runc's init would fail writing the
  # kubelet's -998 for the sandbox): keep each container's at least containerd's own.
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "{CNI_BIN}"
    conf_dir = "{d}/cni"
  [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
    runtime_type = "io.containerd.runc.v2"
"#,
                d = d.display()
            ),
        )
        .unwrap();
        let containerd = Command::new("containerd")
            .arg("--config")
            .arg(d.join("containerd.toml"))
            .stdin(Stdio::null())
            .stdout(log(&d, "containerd.log"))
            .stderr(log(&d, "containerd.log"))
            .spawn()
            .expect("start containerd");
        let mut node = RealNode {
            name: name.to_string(),
            dir,
            containerd,
            kubelet: None,
        };
        node.wait_for("containerd", Duration::from_secs(60), |n| {
            n.ctr(&["version"])
                .output()
                .is_ok_and(|o| o.status.success())
        });
        for image in [PAUSE_IMAGE, SLEEP_IMAGE].iter().chain(images) {
            node.import(image);
        }
        node.start_kubelet(plane);
        // Registered and Ready, or the logs of why not.
        let nodes: kube::Api<k8s_openapi::api::core::v1::Node> = kube::Api::all(plane.client());
        let deadline = Instant::now() + Duration::from_secs(180);
        loop {
            node.assert_alive();
            let ready = nodes.get_opt(name).await.ok().flatten().is_some_and(|n| {
                n.status
                    .and_then(|s| s.conditions)
                    .unwrap_or_default()
                    .iter()
                    .any(|c| c.type_ == "Ready" && c.status == "True")
            });
            if ready {
                return node;
            }
            assert!(
                Instant::now() < deadline,
                "{name} not Ready within 180 s: {}",
                node.logs()
            );
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }

    fn start_kubelet(&mut self, plane: &ControlPlane) {
        let d = self.dir.path().to_path_buf();
        // The kubelet's cgroup root, in every hierarchy (cgroup v1 here: one per controller).
        for ctl in std::fs::read_dir("/sys/fs/cgroup")
            .into_iter()
            .flatten()
            .flatten()
        {
            if ctl.file_type().is_ok_and(|t| t.is_dir()) && ctl.file_name() != "unified" {
                let root = ctl.path().join(format!("nodemedic-{}", self.name));
                let _ = std::fs::create_dir_all(&root);
                // A new cpuset cgroup starts with no CPUs and no memory nodes: nothing could run in it.
                for f in ["cpuset.cpus", "cpuset.mems"] {
                    if let Ok(v) = std::fs::read_to_string(ctl.path().join(f)) {
                        let _ = std::fs::write(root.join(f), v.trim());
                    }
                }
            }
        }
        plane.write_node_kubeconfig(&d.join("kubelet.kubeconfig"));
        let [port, healthz] = ports();
        std::fs::write(
            d.join("kubelet.yaml"),
            format!(
                r#"apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: 127.0.0.1
port: {port}
healthzBindAddress: 127.0.0.1
healthzPort: {healthz}
readOnlyPort: 0
authentication:
  anonymous: {{enabled: false}}
  webhook: {{enabled: false}}
authorization: {{mode: AlwaysAllow}}
cgroupDriver: cgroupfs
cgroupRoot: /nodemedic-{name}
failCgroupV1: false
failSwapOn: false
containerRuntimeEndpoint: unix://{d}/containerd.sock
imageServiceEndpoint: unix://{d}/containerd.sock
resolvConf: /etc/resolv.conf
registerNode: true
nodeStatusUpdateFrequency: 5s
syncFrequency: 10s
fileCheckFrequency: 10s
evictionHard: {{memory.available: "50Mi", nodefs.available: "1%", imagefs.available: "1%", nodefs.inodesFree: "1%"}}
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
serializeImagePulls: false
"#,
                name = self.name,
                d = d.display()
            ),
        )
        .unwrap();
        let kubelet = Command::new(plane_asset(plane, "kubelet"))
            .arg("--config")
            .arg(d.join("kubelet.yaml"))
            .arg("--kubeconfig")
            .arg(d.join("kubelet.kubeconfig"))
            .arg("--root-dir")
            .arg(d.join("kubelet"))
            .arg("--cert-dir")
            .arg(d.join("kubelet-pki"))
            .args(["--hostname-override", &self.name, "--v=2"])
            .stdin(Stdio::null())
            .stdout(log(&d, "kubelet.log"))
            .stderr(log(&d, "kubelet.log"))
            .spawn()
            .expect("start the kubelet");
        self.kubelet = Some(kubelet);
    }

    /// Panics with the logs when the kubelet or containerd has exited: a scenario waiting on the node
    /// learns at once instead of at its deadline.
    pub fn assert_alive(&mut self) {
        if let Some(k) = self.kubelet.as_mut()
            && let Ok(Some(status)) = k.try_wait()
        {
            panic!("the kubelet exited with {status}: {}", self.logs());
        }
        if let Ok(Some(status)) = self.containerd.try_wait() {
            panic!("containerd exited with {status}: {}", self.logs());
        }
    }

    /// `ctr` against this node's containerd, in the CRI plugin's namespace.
    pub fn ctr(&self, args: &[&str]) -> Command {
        let mut c = Command::new("ctr");
        c.arg("--address")
            .arg(self.dir.path().join("containerd.sock"))
            .args(["--namespace", "k8s.io"])
            .args(args);
        c
    }

    /// The containers containerd runs for the kubelet now (task list): their IDs.
    pub fn running_tasks(&self) -> Vec<String> {
        self.ids(&["tasks", "list", "--quiet"])
    }

    /// The IDs `ctr ARGS --quiet` lists, one a line.
    fn ids(&self, args: &[&str]) -> Vec<String> {
        let out = self.ctr(args).output().expect("ctr");
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(str::to_string)
            .collect()
    }

    /// The IDs of the containers the kubelet made for `container` of pod `pod` in `ns` (from
    /// containerd's labels), running or not.
    pub fn containers_of(&self, ns: &str, pod: &str, container: &str) -> Vec<String> {
        self.ids(&[
            "containers",
            "list",
            "--quiet",
            &format!("labels.\"io.kubernetes.pod.namespace\"=={ns}"),
            &format!("labels.\"io.kubernetes.pod.name\"=={pod}"),
            &format!("labels.\"io.kubernetes.container.name\"=={container}"),
        ])
    }

    /// Hand `image` from buildah's storage to this containerd, as a registry would.
    pub fn import(&self, image: &str) {
        let archive = self.dir.path().join("image.tar");
        run(Command::new("buildah")
            .args(["push", "--quiet", image])
            .arg(format!("oci-archive:{}:{image}", archive.display())));
        run(self.ctr(&["images", "import"]).arg(&archive));
        std::fs::remove_file(archive).unwrap();
    }

    /// The last lines of the kubelet's and containerd's logs (printed when a scenario fails).
    pub fn logs(&self) -> String {
        let tail = |f: &str| {
            let t = std::fs::read_to_string(self.dir.path().join(f)).unwrap_or_default();
            let l: Vec<&str> = t.lines().collect();
            l[l.len().saturating_sub(30)..].join("\n")
        };
        format!(
            "kubelet:\n{}\ncontainerd:\n{}",
            tail("kubelet.log"),
            tail("containerd.log")
        )
    }

    /// The last lines each container of `ns`'s pods named `prefix`... wrote, from the kubelet's pod
    /// log directory (what `kubectl logs` would show, without the API server reaching the kubelet).
    pub fn pod_logs(&self, ns: &str, prefix: &str) -> String {
        let mut out = String::new();
        let pods = std::fs::read_dir("/var/log/pods")
            .into_iter()
            .flatten()
            .flatten();
        for pod in pods {
            let dir = pod.file_name().to_string_lossy().into_owned();
            if !dir.starts_with(&format!("{ns}_{prefix}")) {
                continue;
            }
            for file in walk(&pod.path()) {
                let t = std::fs::read_to_string(&file).unwrap_or_default();
                let l: Vec<&str> = t.lines().collect();
                out += &format!(
                    "--- {}:\n{}\n",
                    file.display(),
                    l[l.len().saturating_sub(60)..].join("\n")
                );
            }
        }
        out
    }

    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    fn wait_for(&mut self, what: &str, within: Duration, ok: impl Fn(&RealNode) -> bool) {
        let deadline = Instant::now() + within;
        while !ok(self) {
            if let Ok(Some(status)) = self.containerd.try_wait() {
                panic!("containerd exited with {status}: {}", self.logs());
            }
            assert!(
                Instant::now() < deadline,
                "{what} not up within {within:?}: {}",
                self.logs()
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }
}

impl Drop for RealNode {
    fn drop(&mut self) {
        if let Some(mut k) = self.kubelet.take() {
            let _ = k.kill();
            let _ = k.wait();
        }
        // The pods' containers and sandboxes: their shims outlive containerd otherwise.
        for id in self.running_tasks() {
            let _ = self
                .ctr(&["tasks", "kill", "--signal", "SIGKILL", &id])
                .output();
        }
        std::thread::sleep(Duration::from_millis(500));
        for id in self.running_tasks() {
            let _ = self.ctr(&["tasks", "delete", "--force", &id]).output();
        }
        let _ = self.containerd.kill();
        let _ = self.containerd.wait();
        // The kubelet's volume mounts (tmpfs for tokens and ConfigMaps) under its root.
        let _ = Command::new("sh")
            .arg("-c")
            .arg(format!(
                "grep -o ' {}/[^ ]*' /proc/mounts | sort -r | xargs -r -n1 umount -l",
                self.dir.path().display()
            ))
            .status();
        let cg = format!("/nodemedic-{}", self.name);
        for ctl in std::fs::read_dir("/sys/fs/cgroup")
            .into_iter()
            .flatten()
            .flatten()
        {
            remove_cgroup_tree(&ctl.path().join(cg.trim_start_matches('/')));
        }
    }
}

fn remove_cgroup_tree(p: &Path) {
    if let Ok(entries) = std::fs::read_dir(p) {
        for e in entries.flatten() {
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                remove_cgroup_tree(&e.path());
            }
        }
        let _ = std::fs::remove_dir(p);
    }
}

fn plane_asset(plane: &ControlPlane, bin: &str) -> PathBuf {
    plane.assets().join(bin)
}

fn log(dir: &Path, name: &str) -> std::fs::File {
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(dir.join(name))
        .expect("a log file")
}

fn ports() -> [u16; 2] {
    let a = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let b = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    [
        a.local_addr().unwrap().port(),
        b.local_addr().unwrap().port(),
    ]
}

/// Run `cmd`; its stdout, or a panic with what it said.
fn run(cmd: &mut Command) -> String {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("cannot run {:?}: {e}", cmd.get_program()));
    assert!(
        out.status.success(),
        "{:?} failed: {}{}",
        cmd,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The files under `dir`, depth first.
fn walk(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut files = Vec::new();
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        if e.file_type().is_ok_and(|t| t.is_dir()) {
            files.extend(walk(&e.path()));
        } else {
            files.push(e.path());
        }
    }
    files.sort();
    files
}
