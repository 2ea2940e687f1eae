//! Every fuzz target over its committed corpus and a few thousand mutations of it, in each
//! `cargo test` (the long runs are coverage-guided, `fuzz/run`, or this mutation loop,
//! `FUZZ_EXECS=10000000 cargo bench -p nodemedic-tests --bench fuzz`; see `tests/fuzz/engine.rs`).
//! A crash found by a long run is added to the corpus, so this test keeps it fixed.

#[path = "../fuzz/engine.rs"]
mod engine;
#[path = "../fuzz/targets.rs"]
mod targets;

fn root() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz")
}

#[test]
fn no_target_panics_or_hangs_on_its_corpus_and_mutations() {
    let execs: u64 = std::env::var("FUZZ_TEST_EXECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(2_000);
    let mut failures = Vec::new();
    for t in targets::TARGETS {
        let seeds = engine::corpus(&root(), t.name);
        assert!(!seeds.is_empty(), "{}: no corpus committed", t.name);
        let r = engine::run_on_thread(&root(), t, execs, 0x5eed);
        eprintln!(
            "fuzz {}: {} execs in {:.1} s, {} crashes, {} slow",
            t.name,
            r.execs,
            r.elapsed.as_secs_f64(),
            r.crashes.len(),
            r.slow.len()
        );
        for (path, msg) in &r.crashes {
            failures.push(format!("{}: crash {}: {msg}", t.name, path.display()));
        }
        for (path, took) in &r.slow {
            failures.push(format!("{}: {took:?} on {}", t.name, path.display()));
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
}

#[test]
fn the_mutator_is_deterministic_and_reaches_beyond_its_seeds() {
    let seeds = vec![b"3,1,2,-;hello".to_vec()];
    let run = |seed| {
        let mut rng = engine::Rng::new(seed);
        (0..200)
            .map(|_| engine::mutate(&mut rng, &seeds[0], &seeds, &["\n SUBSYSTEM="]))
            .collect::<Vec<_>>()
    };
    assert_eq!(run(7), run(7));
    let distinct: std::collections::HashSet<_> = run(7).into_iter().collect();
    assert!(distinct.len() > 150, "{}", distinct.len());
}

/// The libFuzzer crate (`fuzz/`, built only by cargo-fuzz) has one binary per target, each calling
/// the target of its name, and `fuzz/run` runs them all: a target added here is fuzzed there too.
#[test]
fn the_coverage_guided_crate_has_every_target() {
    let fuzz = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../fuzz");
    let manifest = std::fs::read_to_string(fuzz.join("Cargo.toml")).unwrap();
    let script = std::fs::read_to_string(fuzz.join("run")).unwrap();
    let all = script
        .lines()
        .find_map(|l| l.strip_prefix("all=("))
        .and_then(|l| l.strip_suffix(')'))
        .expect("fuzz/run lists its targets as all=(...)");
    let mut listed: Vec<&str> = all.split_whitespace().collect();
    let mut names: Vec<&str> = targets::TARGETS.iter().map(|t| t.name).collect();
    listed.sort_unstable();
    names.sort_unstable();
    assert_eq!(
        listed, names,
        "fuzz/run's all=(...) and tests/fuzz/targets.rs"
    );
    for name in names {
        assert!(
            manifest.contains(&format!(
                "[[bin]]\nname = \"{name}\"\npath = \"fuzz_targets/{name}.rs\""
            )),
            "fuzz/Cargo.toml has no [[bin]] for {name}"
        );
        let source = std::fs::read_to_string(fuzz.join(format!("fuzz_targets/{name}.rs"))).unwrap();
        assert!(
            source.contains(&format!("nodemedic_fuzz::run(\"{name}\", data)")),
            "fuzz/fuzz_targets/{name}.rs does not run {name}: {source}"
        );
    }
}
