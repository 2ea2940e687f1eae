//! What the process benches share: free ports, environment knobs, release binaries, metric sums.

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
