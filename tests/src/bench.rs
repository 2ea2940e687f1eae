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
