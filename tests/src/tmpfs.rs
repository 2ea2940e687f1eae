//! A filesystem that really fills: a size-limited tmpfs mounted in a mount namespace of the test's
//! own (`unshare -rm`: root of a user namespace, so no privilege is needed where the kernel allows
//! user namespaces), with `detector run` started in the same namespace while a shell fills it. The
//! namespace's processes are one process group, killed with the test ([`Group`]).

use std::path::Path;
use std::process::{Child, Command, Stdio};

/// Whether this machine lets a test mount a tmpfs in a namespace of its own; said when not.
pub fn can_mount() -> bool {
    let Ok(dir) = tempfile::tempdir() else {
        return false;
    };
    let script = format!("mount -t tmpfs -o size=1m tmpfs {}", dir.path().display());
    let ok = Command::new("unshare")
        .args(["-rm", "sh", "-c", &script])
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        eprintln!("this machine cannot mount a tmpfs in a namespace of its own (unshare -rm)");
    }
    ok
}

/// A process group (the namespace's shell, the detector, the filler), killed when dropped.
pub struct Group(pub Child);

impl Drop for Group {
    fn drop(&mut self) {
        let pgid = rustix::process::Pid::from_child(&self.0);
        let _ = rustix::process::kill_process_group(pgid, rustix::process::Signal::KILL);
        let _ = self.0.wait();
    }
}

/// `detector` (`run`, for `node`, with `KUBECONFIG` = `kubeconfig`) in a mount namespace where
/// `dir/imagefs` is a 16 MiB tmpfs that a shell fills 128 KiB every 500 ms (about a minute to
/// full). `rules` is a rule file whose `MOUNT` is replaced with that path; the detector's stderr
/// goes to `stderr`.
pub fn filling_detector(
    detector: &Path,
    dir: &Path,
    node: &str,
    kubeconfig: &Path,
    rules: &str,
    stderr: Stdio,
) -> Group {
    let mnt = dir.join("imagefs");
    let rules_dir = dir.join("rules");
    std::fs::create_dir_all(&mnt).unwrap();
    std::fs::create_dir_all(&rules_dir).unwrap();
    let yaml = rules.replace("MOUNT", &mnt.display().to_string());
    std::fs::write(rules_dir.join("resource-monitor.yaml"), yaml).unwrap();
    let script = format!(
        "mount -t tmpfs -o size=16m tmpfs {mnt} || exit 3; \
         \"$0\" run --node-name {node} --listen 127.0.0.1:0 --rules {rules} --kmsg-path /dev/null \
           --state-file {state} & \
         i=0; while [ $i -lt 120 ]; do head -c 131072 /dev/zero > {mnt}/f$i 2>/dev/null; i=$((i+1)); sleep 0.5; done; wait",
        mnt = mnt.display(),
        rules = rules_dir.display(),
        state = dir.join("detector-state.json").display(),
    );
    let mut cmd = Command::new("unshare");
    std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
    let child = cmd
        .args(["-rm", "sh", "-c", &script])
        .arg(detector)
        .env("KUBECONFIG", kubeconfig)
        .env("RUST_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(stderr)
        .spawn()
        .expect("start unshare");
    Group(child)
}
