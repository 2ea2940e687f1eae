//! Matching throughput of the default rules over a 1,000,000-line generated kernel log, on one core.
//!
//! `cargo bench -p nodemedic-detector --bench matching` prints lines/s, MB/s and ns/line for:
//! - match: the default kmsg monitors' problem state (RegexSet pass + state) fed pre-parsed messages;
//! - check: the whole offline path (kmsg record parsing + matching), as `detector check` runs it.
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
        .filter(|m| m.input == Input::Kmsg)
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
