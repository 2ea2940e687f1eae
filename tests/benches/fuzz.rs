//! Long fuzz runs: `FUZZ_EXECS=10000000 cargo bench -p nodemedic-tests --bench fuzz [-- TARGET...]`
//! (default 1,000,000 executions per target; `FUZZ_SECONDS` caps each target's time; `FUZZ_SEED` to
//! vary the run). Prints executions,
//! executions per second, crashes and slow inputs per target; crashes are written to
//! `tests/fuzz/crashes/<target>/` (add them to the corpus once fixed). See `tests/fuzz/engine.rs`.

#[path = "../fuzz/engine.rs"]
mod engine;
#[path = "../fuzz/targets.rs"]
mod targets;

fn main() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz");
    let execs: u64 = std::env::var("FUZZ_EXECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1_000_000);
    let seed: u64 = std::env::var("FUZZ_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0x5eed);
    let wanted: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with("--"))
        .collect();
    let mut crashed = false;
    for t in targets::TARGETS {
        if !wanted.is_empty() && !wanted.iter().any(|w| w == t.name) {
            continue;
        }
        let r = engine::run_on_thread(&root, t, execs, seed);
        println!(
            "fuzz {:<10} {:>11} execs in {:>7.1} s ({:>9.0}/s), {} crashes, {} slow",
            t.name,
            r.execs,
            r.elapsed.as_secs_f64(),
            r.execs as f64 / r.elapsed.as_secs_f64().max(1e-9),
            r.crashes.len(),
            r.slow.len()
        );
        for (p, m) in &r.crashes {
            println!("  crash {}: {m}", p.display());
            crashed = true;
        }
        for (p, d) in &r.slow {
            println!("  slow {:?}: {}", d, p.display());
        }
    }
    if crashed {
        std::process::exit(1);
    }
}
