//! KWOK (`sigs.k8s.io/kwok`, `build/kwok-release`, built by `build/kubernetes.sh`) on a real control
//! plane: it plays the kubelets of nodes annotated [`ANNOTATION`]`=fake` (their status, their Lease,
//! their pods' status), so a bench's fleet is heartbeated as a cluster's is, by a process other than
//! the bench that measures it.
//!
//! How it heartbeats is the caller's choice ([`Heartbeat`]): kubelets renew a 40 s Lease every 10 s,
//! which at 5,000 nodes is 500 writes a second, more than this machine's two cores serve beside
//! everything else; a bench chooses its own, and says which.

use std::path::PathBuf;
use std::process::{Child, Command};

use crate::envtest::ControlPlane;

/// The annotation KWOK manages nodes by (`--manage-nodes-with-annotation-selector`).
pub const ANNOTATION: &str = "kwok.x-k8s.io/node";

/// The KWOK release the project runs (`build/kwok-release`).
pub fn release() -> &'static str {
    include_str!("../../build/kwok-release")
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty() && !l.starts_with('#'))
        .expect("build/kwok-release names a release")
}

/// The `kwok` binary: `NODEMEDIC_KWOK`, else where `build/kubernetes.sh` caches it.
pub fn binary() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("NODEMEDIC_KWOK") {
        return Some(PathBuf::from(p));
    }
    let dir = crate::envtest::cache_dir(&format!("kwok-{}", release()))?;
    Some(dir.join("kwok")).filter(|p| p.exists())
}

/// How KWOK heartbeats its nodes (its two stages).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Heartbeat {
    /// The node's status every 20 to 45 s, as kubelets did before Leases.
    Status,
    /// A Lease of that many seconds, renewed as kubelets renew theirs, and the status every 10 to 20
    /// minutes.
    Lease(u32),
}

/// A running `kwok`, killed when dropped (and with the test binary).
pub struct Kwok {
    child: std::sync::Mutex<Child>,
    log: PathBuf,
    _dir: tempfile::TempDir,
}

impl Kwok {
    /// Start `kwok` against `plane` for the nodes annotated [`ANNOTATION`]`=fake`, heartbeating them
    /// as `heartbeat` says.
    pub fn start(binary: &std::path::Path, plane: &ControlPlane, heartbeat: Heartbeat) -> Kwok {
        let heartbeat_kind = heartbeat;
        let dir = tempfile::tempdir().expect("a temporary directory");
        let kubeconfig = dir.path().join("kubeconfig");
        plane.write_kubeconfig(&kubeconfig);
        let log = dir.path().join("kwok.log");
        // The release's own stages (`build/kubernetes.sh` copies them beside the binary from KWOK's
        // module): nodes made Ready and heartbeated, pods made Ready and, once deleted, finished.
        let stages = binary.parent().expect("kwok's folder").join("stages");
        let heartbeat = match heartbeat {
            Heartbeat::Status => "node/heartbeat",
            Heartbeat::Lease(_) => "node/heartbeat-with-lease",
        };
        let mut cmd = Command::new(binary);
        cmd.arg("--kubeconfig").arg(&kubeconfig);
        for set in ["node/fast", heartbeat, "pod/fast"] {
            let files = std::fs::read_dir(stages.join(set)).unwrap_or_else(|e| {
                panic!(
                    "KWOK's stages in {}: {e} (build/kubernetes.sh copies them)",
                    stages.display()
                )
            });
            for f in files.flatten() {
                cmd.arg("--config").arg(f.path());
            }
        }
        if let Heartbeat::Lease(secs) = heartbeat_kind {
            cmd.arg(format!("--node-lease-duration-seconds={secs}"));
        }
        let child = crate::envtest::spawn(
            cmd.arg(format!(
                "--manage-nodes-with-annotation-selector={ANNOTATION}=fake"
            ))
            .args([
                "--node-ip=127.0.0.1",
                "--server-address=",
                "--cidr=10.0.0.0/16",
            ]),
            &log,
        );
        Kwok {
            child: std::sync::Mutex::new(child),
            log,
            _dir: dir,
        }
    }

    /// The last lines KWOK wrote (for a failure's message).
    pub fn log(&self) -> String {
        let t = std::fs::read_to_string(&self.log).unwrap_or_default();
        let l: Vec<&str> = t.lines().collect();
        l[l.len().saturating_sub(40)..].join("\n")
    }

    /// Panics with KWOK's log if it has exited.
    pub fn assert_alive(&self) {
        let status = self.child.lock().unwrap().try_wait();
        if let Ok(Some(status)) = status {
            panic!("kwok exited with {status}: {}", self.log());
        }
    }
}

impl Drop for Kwok {
    fn drop(&mut self) {
        let child = self.child.get_mut().unwrap_or_else(|e| e.into_inner());
        let _ = child.kill();
        let _ = child.wait();
    }
}
