//! A small mutation fuzzer shared by `tests/tests/fuzz.rs` (a short run in every `cargo test`) and
//! `tests/benches/fuzz.rs` (long runs: `FUZZ_EXECS=10000000 cargo bench -p nodemedic-tests --bench fuzz`).
//!
//! The long runs that matter are coverage-guided: `fuzz/run` runs the same targets under libFuzzer
//! (cargo-fuzz, stable Rust, no sanitizer). This loop needs nothing installed, so every `cargo test`
//! replays the committed corpus with it. Each target runs in-process over its committed
//! corpus (`tests/fuzz/corpus/<target>/`), mutated: bit flips, interesting bytes and numbers, inserted
//! and deleted ranges, duplicated ranges, splices of two corpus inputs, and dictionary tokens of the
//! target's format. A panic is a crash: the input is written to `tests/fuzz/crashes/<target>/` and
//! the run fails. Tests and benches build with `panic = "unwind"` whatever the profile says, so a
//! crash is caught and reported rather than aborting the run. A target that runs longer than
//! `SLOW` on one input is reported too (a hang).

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// One fuzz target: a name, its dictionary, and the function that must never panic.
pub struct Target {
    pub name: &'static str,
    pub dictionary: &'static [&'static str],
    pub run: fn(&[u8]),
}

/// The longest a single input may take before it is reported as a hang.
pub const SLOW: Duration = Duration::from_secs(2);
/// Inputs are cut to this size (the binaries cap their inputs well below it).
const MAX_INPUT: usize = 64 * 1024;

/// xorshift64*: deterministic per seed, so a run can be repeated.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed.max(1))
    }
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            0
        } else {
            (self.next() % n as u64) as usize
        }
    }
}

fn corpus_dir(root: &Path, target: &str) -> PathBuf {
    root.join("corpus").join(target)
}

/// The committed seeds of `target`.
pub fn corpus(root: &Path, target: &str) -> Vec<Vec<u8>> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(corpus_dir(root, target))
        .map(|d| d.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    files.sort();
    files
        .into_iter()
        .filter_map(|p| std::fs::read(p).ok())
        .collect()
}

const INTERESTING: &[&str] = &[
    "0",
    "-1",
    "18446744073709551615",
    "9223372036854775807",
    "-9223372036854775808",
    "4294967296",
    "9999-12-31T23:59:59Z",
    "0000-01-01T00:00:00Z",
    "\u{0}",
    "\u{feff}",
    "é",
    "\\",
    "\"",
    "'",
    "\n",
    "\r\n",
    "{",
    "}",
    "[",
    "]",
    ":",
    ",",
    "null",
    "true",
    "NaN",
    "1e999",
    "(?x)",
    "# ",
    "((((((((((",
    ".*.*.*.*.*",
];

/// One mutation of `input` (possibly several stacked).
pub fn mutate(rng: &mut Rng, input: &[u8], corpus: &[Vec<u8>], dict: &[&str]) -> Vec<u8> {
    let mut out = input.to_vec();
    for _ in 0..1 + rng.below(4) {
        let len = out.len();
        match rng.below(9) {
            0 if len > 0 => {
                let i = rng.below(len);
                out[i] ^= 1 << rng.below(8);
            }
            1 if len > 0 => {
                let i = rng.below(len);
                out[i] = [0u8, 0xff, 0x7f, 0x80, b'\n', b';', b',', b' '][rng.below(8)];
            }
            2 => {
                let i = rng.below(len + 1);
                let n = 1 + rng.below(16);
                let bytes: Vec<u8> = (0..n).map(|_| rng.next() as u8).collect();
                out.splice(i..i, bytes);
            }
            3 if len > 0 => {
                let i = rng.below(len);
                let n = 1 + rng.below((len - i).min(64));
                out.drain(i..i + n);
            }
            4 if len > 0 => {
                // Duplicate a range, sometimes many times (long lines, deep nesting).
                let i = rng.below(len);
                let n = 1 + rng.below((len - i).min(32));
                let chunk = out[i..i + n].to_vec();
                let times = if rng.below(8) == 0 {
                    1 + rng.below(500)
                } else {
                    1
                };
                for _ in 0..times {
                    out.splice(i..i, chunk.iter().copied());
                }
            }
            5 if !corpus.is_empty() => {
                let other = &corpus[rng.below(corpus.len())];
                let cut = rng.below(len + 1);
                let from = rng.below(other.len() + 1);
                out.truncate(cut);
                out.extend_from_slice(&other[from..]);
            }
            6 if !dict.is_empty() => {
                let t = dict[rng.below(dict.len())];
                let i = rng.below(len + 1);
                out.splice(i..i, t.bytes());
            }
            7 => {
                let t = INTERESTING[rng.below(INTERESTING.len())];
                let i = rng.below(len + 1);
                if rng.below(2) == 0 && len > 0 {
                    // Replace a run of digits or a word with it.
                    let end = (i + 1 + rng.below(8)).min(len);
                    out.splice(i.min(len)..end.max(i.min(len)), t.bytes());
                } else {
                    out.splice(i..i, t.bytes());
                }
            }
            _ if len > 0 => {
                let i = rng.below(len);
                out.truncate(i);
            }
            _ => out.push(rng.next() as u8),
        }
    }
    out.truncate(MAX_INPUT);
    out
}

/// What a run found.
pub struct Report {
    pub execs: u64,
    pub crashes: Vec<(PathBuf, String)>,
    pub slow: Vec<(PathBuf, Duration)>,
    pub elapsed: Duration,
}

fn save(root: &Path, target: &str, kind: &str, input: &[u8]) -> PathBuf {
    let dir = root.join(kind).join(target);
    let _ = std::fs::create_dir_all(&dir);
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in input {
        h = (h ^ u64::from(*b)).wrapping_mul(0x100_0000_01b3);
    }
    let path = dir.join(format!("{h:016x}"));
    let _ = std::fs::write(&path, input);
    path
}

/// The stack the targets run on: a tokio worker's (2 MiB) in optimised builds, as the binaries run
/// them. Unoptimised builds get 16 MiB: the cel crate's generated parser takes frames there that
/// overflow 2 MiB on 141 bytes of bad input (the release build parses it in 256 KiB).
pub const STACK: usize = if cfg!(debug_assertions) {
    16 << 20
} else {
    2 << 20
};

/// [`run`] on a thread with [`STACK`].
pub fn run_on_thread(root: &Path, target: &'static Target, execs: u64, seed: u64) -> Report {
    let root = root.to_path_buf();
    std::thread::Builder::new()
        .name(format!("fuzz-{}", target.name))
        .stack_size(STACK)
        .spawn(move || run(&root, target, execs, seed))
        .expect("fuzz thread")
        .join()
        .expect("the fuzz loop itself does not panic")
}

/// Stop a target's run after this long even if `execs` is not reached (`FUZZ_SECONDS`; default none).
fn time_budget() -> Option<Duration> {
    std::env::var("FUZZ_SECONDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .map(Duration::from_secs)
}

/// Run `target` over its corpus and then `execs` mutated inputs from `seed`.
pub fn run(root: &Path, target: &Target, execs: u64, seed: u64) -> Report {
    let budget = time_budget();
    let seeds = corpus(root, target.name);
    let mut rng = Rng::new(seed ^ (target.name.len() as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15));
    let mut report = Report {
        execs: 0,
        crashes: Vec::new(),
        slow: Vec::new(),
        elapsed: Duration::ZERO,
    };
    let started = Instant::now();
    let quiet = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    // FUZZ_SAVE_CURRENT=1: each input is written to `current-<target>` before it runs, to find the
    // one that kills the process (a stack overflow cannot be caught).
    let save_current = std::env::var_os("FUZZ_SAVE_CURRENT").is_some();
    let one = |input: &[u8], report: &mut Report| {
        if save_current {
            let _ = std::fs::write(root.join(format!("current-{}", target.name)), input);
        }
        let t0 = Instant::now();
        let result = std::panic::catch_unwind(|| (target.run)(input));
        let took = t0.elapsed();
        report.execs += 1;
        if let Err(p) = result {
            let msg = p
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default();
            report
                .crashes
                .push((save(root, target.name, "crashes", input), msg));
        } else if took > SLOW {
            report
                .slow
                .push((save(root, target.name, "slow", input), took));
        }
    };
    for s in &seeds {
        one(s, &mut report);
    }
    let empty = vec![Vec::new()];
    let pool = if seeds.is_empty() { &empty } else { &seeds };
    while report.execs < execs + seeds.len() as u64
        && report.crashes.len() < 10
        && budget.is_none_or(|b| started.elapsed() < b)
    {
        let base = &pool[rng.below(pool.len())];
        let input = mutate(&mut rng, base, pool, target.dictionary);
        one(&input, &mut report);
    }
    std::panic::set_hook(quiet);
    report.elapsed = started.elapsed();
    report
}
