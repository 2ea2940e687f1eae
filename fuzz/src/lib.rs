//! The fuzz targets of `tests/fuzz/targets.rs`, for libFuzzer: each `fuzz_targets/<name>.rs` calls
//! [`run`] with its name. One list of targets serves both fuzzers: this coverage-guided one for long
//! runs (`fuzz/run`), and the mutation loop that replays the committed corpus in every `cargo test`.

#[allow(dead_code)]
#[path = "../../tests/fuzz/engine.rs"]
mod engine;
#[path = "../../tests/fuzz/targets.rs"]
mod targets;

/// Runs the target called `name` on `data`. An unknown name is a mistake in this crate's
/// `fuzz_targets/`, not an input, so it panics (which libFuzzer reports at once).
pub fn run(name: &str, data: &[u8]) {
    match targets::TARGETS.iter().find(|t| t.name == name) {
        Some(t) => (t.run)(data),
        None => panic!("no fuzz target named {name} in tests/fuzz/targets.rs"),
    }
}
