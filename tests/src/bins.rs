//! The workspace's own binaries for scenarios that run them as processes (a detector killed with
//! SIGKILL, the drainer as `drainer run` starts it): built in the test profile's folder with
//! `cargo build` once per test process, so they are the current code whichever command ran the tests.

use std::path::PathBuf;
use std::process::Command;
use std::sync::{Mutex, OnceLock};

/// `target/debug/<name>` of `package`, built first (quick when it is up to date).
pub fn debug_bin(package: &str, name: &str) -> PathBuf {
    static BUILT: OnceLock<Mutex<Vec<String>>> = OnceLock::new();
    let root = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/.."));
    let built = BUILT.get_or_init(Default::default);
    let mut built = built.lock().unwrap_or_else(|e| e.into_inner());
    if !built.iter().any(|b| b == name) {
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let status = Command::new(cargo)
            .args(["build", "-q", "-p", package, "--bin", name])
            .current_dir(&root)
            .status()
            .expect("cargo build");
        assert!(
            status.success(),
            "cargo build -p {package} --bin {name} failed"
        );
        built.push(name.to_string());
    }
    let dir = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("target"));
    dir.join("debug").join(name)
}
