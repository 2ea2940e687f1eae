//! Matching throughput of the default rules over a 1,000,000-line generated kernel log, on one core.
//!
//! `cargo bench -p nodemedic-detector --bench matching` prints lines/s, MB/s and ns/line for:
//! - match: the default kmsg monitors' problem state (RegexSet pass + state) fed pre-parsed messages;
//! - check: the whole offline path (kmsg record parsing + matching), as `detector check` runs it.
//!
//! Each is run 3 times; the best and median are printed. The file is also left in target/ for the
//! footprint bench and for `detector check` by hand.

use std::io::BufWriter;
use std::sync::Arc;
use std::time::Instant;

use k8s_openapi::jiff::Timestamp;
use nodemedic_detector::check::{InputFormat, check};
use nodemedic_detector::config::{Input, bundled_defaults};
use nodemedic_detector::problem::MonitorState;

const LINES: u64 = 1_000_000;

fn main() {
    let path = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("bench-kern-1m.kmsg");
    let mut f = BufWriter::new(std::fs::File::create(&path).unwrap());
    let problems = nodemedic_detector::sample::write_kmsg(&mut f, LINES, 10_000, 42).unwrap();
    drop(f);
    let bytes = std::fs::metadata(&path).unwrap().len();
    println!(
        "input: {} ({LINES} lines, {bytes} bytes, {problems} problem lines)",
        path.display()
    );

    // Pre-parse the messages so "match" measures matching alone.
    let text = std::fs::read_to_string(&path).unwrap();
    let messages: Vec<&str> = text.lines().map(|l| l.split_once(';').unwrap().1).collect();
    let msg_bytes: usize = messages.iter().map(|m| m.len() + 1).sum();
    let rules = bundled_defaults();
    let kmsg_monitors: Vec<_> = rules
        .monitors
        .iter()
        .filter(|m| matches!(m.input, Input::Kmsg { .. }))
        .cloned()
        .collect();

    let mut runs = Vec::new();
    let mut found = 0;
    for _ in 0..3 {
        let mut states: Vec<MonitorState> = kmsg_monitors
            .iter()
            .map(|m| MonitorState::new(Arc::new(m.clone()), &[], Timestamp::now()))
            .collect();
        let mut out = Vec::new();
        let at = Timestamp::now();
        let start = Instant::now();
        for m in &messages {
            for s in states.iter_mut() {
                s.process(m, at, &mut out);
            }
        }
        runs.push(start.elapsed());
        found = out.len();
    }
    report(
        "match (default kmsg rules, 2 monitors)",
        &mut runs,
        msg_bytes as u64,
    );
    println!("  problems reported: {found}");

    // Where the time of the whole path goes: reading records, then parsing them too.
    for parse in [false, true] {
        let mut runs = Vec::new();
        for _ in 0..3 {
            let reader =
                std::io::BufReader::with_capacity(64 * 1024, std::fs::File::open(&path).unwrap());
            let mut records = nodemedic_detector::parse::kmsg::RecordReader::new(reader);
            let start = Instant::now();
            let mut n = 0u64;
            while let Some((_, rec)) = records.next_record().unwrap() {
                if parse {
                    n += nodemedic_detector::parse::kmsg::parse(rec)
                        .map_or(0, |r| r.message.len() as u64);
                } else {
                    n += rec.len() as u64;
                }
            }
            runs.push(start.elapsed());
            assert!(n > 0);
        }
        let what = if parse {
            "read + parse kmsg records"
        } else {
            "read kmsg records"
        };
        report(what, &mut runs, bytes);
    }

    let mut runs = Vec::new();
    for _ in 0..3 {
        let reader =
            std::io::BufReader::with_capacity(64 * 1024, std::fs::File::open(&path).unwrap());
        let start = Instant::now();
        let mut n = 0;
        let stats = check(&rules, reader, InputFormat::Kmsg, &mut |_| n += 1).unwrap();
        runs.push(start.elapsed());
        assert_eq!(stats.lines, LINES);
    }
    report("check (parse kmsg + match)", &mut runs, bytes);
    let ours = LINES as f64 / runs[runs.len() / 2].as_secs_f64();

    // grep -cE with the union of the same patterns, on the same file, in the same run.
    let union = grep_union(&kmsg_monitors);
    let mut runs = Vec::new();
    let mut count = String::new();
    for _ in 0..3 {
        let start = Instant::now();
        let out = std::process::Command::new("grep")
            .args(["-cE", &union])
            .arg(&path)
            .env("LC_ALL", "C")
            .output();
        let Ok(out) = out else {
            println!("grep: not run (not installed?)");
            return;
        };
        runs.push(start.elapsed());
        count = String::from_utf8_lossy(&out.stdout).trim().to_string();
    }
    report("grep -cE (union of the same patterns)", &mut runs, bytes);
    let grep = LINES as f64 / runs[runs.len() / 2].as_secs_f64();
    println!(
        "  grep counted {count} matching lines; check is {:.2}x grep's speed (medians)",
        ours / grep
    );
}

/// The monitors' single-line patterns as one POSIX ERE (what grep -E reads): Rust's `\d`, `\w`,
/// `\S` and non-capturing groups translated.
fn grep_union(monitors: &[nodemedic_detector::config::Monitor]) -> String {
    let mut parts = Vec::new();
    for m in monitors {
        for r in m.rules.iter().filter(|r| !r.multiline) {
            parts.push(r.source_pattern.clone());
        }
        for c in &m.conditions {
            if let Some(p) = &c.recovery_pattern {
                parts.push(p.clone());
            }
        }
    }
    parts
        .iter()
        .map(|p| {
            let ci = p.starts_with("(?i)");
            let p = p
                .trim_start_matches("(?i)")
                .replace("(?:", "(")
                .replace(r"[\S ]", ".")
                .replace(r"\d", "[0-9]")
                .replace(r"\w", "[[:alnum:]_]")
                .replace(r"\S", "[^[:space:]]");
            // grep has no inline (?i): spell out the letters' cases.
            if ci {
                p.chars()
                    .map(|c| {
                        if c.is_ascii_alphabetic() {
                            format!("[{}{}]", c.to_ascii_lowercase(), c.to_ascii_uppercase())
                        } else {
                            c.to_string()
                        }
                    })
                    .collect()
            } else {
                p
            }
        })
        .map(|p| format!("({p})"))
        .collect::<Vec<_>>()
        .join("|")
}

fn report(what: &str, runs: &mut [std::time::Duration], bytes: u64) {
    runs.sort();
    let best = runs[0].as_secs_f64();
    let median = runs[runs.len() / 2].as_secs_f64();
    println!(
        "{what}: best {:.0} lines/s ({:.1} MB/s, {:.0} ns/line), median {:.0} lines/s",
        LINES as f64 / best,
        bytes as f64 / best / 1e6,
        best * 1e9 / LINES as f64,
        LINES as f64 / median
    );
}
