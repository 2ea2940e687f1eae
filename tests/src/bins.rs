//! The workspace's own binaries for scenarios that run them as processes (a detector killed with
//! SIGKILL, the drainer as `drainer run` starts it): built in the test profile's folder with
//! `cargo build` once per test process, so they are the current code whichever command ran the tests;
//! and the drainer as the image ships it (`build/pgo-drainer.sh`), for the benchmarks that run it.

use std::path::PathBuf;
use std::process::Command;
use std::sync::{Mutex, OnceLock};

/// `target/debug/<name>` of `package`, built first (quick when it is up to date).
pub fn debug_bin(package: &str, name: &str) -> PathBuf {
    built(package, name)
}

/// The drainer as the image ships it: built by `build/pgo-drainer.sh` as the Dockerfile builds it
/// (the `drainer` profile, with profile-guided optimisation; `NODEMEDIC_PGO=off` without), in
/// `target/shipped/`. For benchmarks, whose own profile is the release one the detector ships with;
/// the first build takes some 15 minutes, a later one with the same drainer code a few seconds.
pub fn shipped_drainer() -> PathBuf {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    BUILT
        .get_or_init(|| {
            let root = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/.."));
            let mut cmd = Command::new("sh");
            cmd.arg("build/pgo-drainer.sh").current_dir(&root);
            without_bench_env(&mut cmd);
            let status = cmd.status().expect("running build/pgo-drainer.sh");
            assert!(status.success(), "build/pgo-drainer.sh failed");
            target_dir(&root).join("shipped/drainer")
        })
        .clone()
}

/// Example `name` of the drainer's package built with the drainer's own cargo profile (as
/// the image's build, without profile-guided optimisation), in `target/drainer/examples/`: for the
/// benches that measure what any process built like the drainer pays.
pub fn drainer_example(name: &str) -> PathBuf {
    let root = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/.."));
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let mut cmd = Command::new(cargo);
    cmd.args([
        "build",
        "--profile",
        "drainer",
        "-p",
        "nodemedic-drainer",
        "--example",
        name,
    ])
    .current_dir(&root);
    without_bench_env(&mut cmd);
    let status = cmd.status().expect("cargo build");
    assert!(status.success(), "cargo build of example {name} failed");
    target_dir(&root).join("drainer/examples").join(name)
}

/// The drainer built with its own cargo profile (`drainer`, as the image's build) without
/// profile-guided optimisation, in `target/drainer/`: for the benches that compare it with a
/// process built the same way ([`drainer_example`]).
pub fn drainer_unprofiled() -> PathBuf {
    let root = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/.."));
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let mut cmd = Command::new(cargo);
    cmd.args(["build", "--profile", "drainer", "-p", "nodemedic-drainer"])
        .args(["--bin", "drainer"])
        .current_dir(&root);
    without_bench_env(&mut cmd);
    let status = cmd.status().expect("cargo build");
    assert!(status.success(), "cargo build of the drainer failed");
    target_dir(&root).join("drainer/drainer")
}

/// What cargo sets for the bench that builds something (its package's variables, OUT_DIR, the
/// library path) would reach build scripts that watch such variables, and cargo would rebuild
/// part of the drainer's tree (and `build/pgo-drainer.sh` retrain it) for every bench run.
fn without_bench_env(cmd: &mut Command) {
    for (key, _) in std::env::vars_os() {
        let k = key.to_string_lossy();
        if k.starts_with("CARGO_PKG_")
            || k.starts_with("CARGO_MANIFEST_")
            || k.starts_with("CARGO_BIN_EXE_")
            || [
                "OUT_DIR",
                "LD_LIBRARY_PATH",
                "CARGO_CRATE_NAME",
                "CARGO_PRIMARY_PACKAGE",
            ]
            .contains(&&*k)
        {
            cmd.env_remove(&key);
        }
    }
}

fn target_dir(root: &std::path::Path) -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("target"))
}

/// `name` of `package` built with the dev profile, once per process.
fn built(package: &str, name: &str) -> PathBuf {
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
    target_dir(&root).join("debug").join(name)
}
