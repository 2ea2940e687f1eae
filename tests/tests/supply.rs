//! The supply chain: every crate the workspace builds from carries an allowed licence, comes from
//! crates.io, and no dependency is a wildcard (`deny.toml`, checked by cargo-deny without the
//! network). `.ci/run` installs cargo-deny; elsewhere a machine without it says the test is skipped.

use std::process::Command;

#[test]
fn licences_sources_and_bans_pass_cargo_deny() {
    let ok = Command::new("cargo")
        .args(["deny", "--version"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        assert!(
            std::env::var_os("CI").is_none(),
            "cargo-deny is missing in CI (.ci/run installs it)"
        );
        eprintln!("skipped: cargo-deny is not installed (cargo install cargo-deny --locked)");
        return;
    }
    let out = Command::new("cargo")
        .current_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/.."))
        .args(["deny", "--offline", "check", "licenses", "bans", "sources"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "cargo deny check failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
