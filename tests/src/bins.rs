//! The workspace's own binaries for scenarios that run them as processes (a detector killed with
//! SIGKILL, the drainer as `drainer run` starts it): built in the test profile's folder with
//! `cargo build` once per test process, so they are the current code whichever command ran the tests;
//! and the drainer as the image ships it, for the benchmarks that run it.

use std::path::PathBuf;
use std::process::Command;
use std::sync::{Mutex, OnceLock};

/// `target/debug/<name>` of `package`, built first (quick when it is up to date).
pub fn debug_bin(package: &str, name: &str) -> PathBuf {
    built(None, package, name)
}

/// The drainer as the image ships it: built with the `drainer` profile (Cargo.toml says why), in
/// `target/drainer/`. For benchmarks, whose own profile is the release one the detector ships with;
/// the first build takes some minutes.
pub fn shipped_drainer() -> PathBuf {
    built(Some("drainer"), "nodemedic-drainer", "drainer")
}

/// `name` of `package` built with `profile` (None: the dev profile), once per process.
fn built(profile: Option<&str>, package: &str, name: &str) -> PathBuf {
    /// What this process built: (profile, binary).
    type Built = Vec<(Option<String>, String)>;
    static BUILT: OnceLock<Mutex<Built>> = OnceLock::new();
    let root = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/.."));
    let built = BUILT.get_or_init(Default::default);
    let mut built = built.lock().unwrap_or_else(|e| e.into_inner());
    let key = (profile.map(String::from), name.to_string());
    if !built.contains(&key) {
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let mut cmd = Command::new(cargo);
        cmd.args(["build", "-q", "-p", package, "--bin", name]);
        if let Some(p) = profile {
            cmd.args(["--profile", p]);
        }
        let status = cmd.current_dir(&root).status().expect("cargo build");
        assert!(
            status.success(),
            "cargo build -p {package} --bin {name} (profile {profile:?}) failed"
        );
        built.push(key);
    }
    let dir = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("target"));
    dir.join(profile.unwrap_or("debug")).join(name)
}
