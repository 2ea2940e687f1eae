//! `drainer simulate --output html` and `backtest --output html` draw timelines people look at
//! rather than read (issue 42, point 11). The page is rendered by a real headless browser
//! (Debian's chromium, installed by `.ci/run`): what it parsed (its DOM) holds a bar for each
//! state each node went through, as the JSON report of the same run says, the breaker's open
//! span and the count of cordoned nodes; and its screenshot shows each of those colours, so the
//! SVG is drawn, not only parsed. The page is self-contained: no script, nothing fetched.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn drainer(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_drainer"))
        .current_dir(repo())
        .args(args)
        .output()
        .unwrap()
}

/// The browser, or `None` (said; a failure in CI, where `.ci/run` installs it).
fn chromium() -> Option<&'static str> {
    for name in ["chromium", "chromium-browser", "google-chrome"] {
        if Command::new(name)
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success())
        {
            return Some(name);
        }
    }
    assert!(
        std::env::var_os("CI").is_none(),
        "chromium is missing in CI (.ci/run installs Debian's chromium)"
    );
    eprintln!("skipped: chromium is not installed (apt-get install chromium)");
    None
}

/// Headless chromium on `page` with `what` (`--dump-dom`, `--screenshot=...`); its stdout.
fn headless(browser: &str, dir: &Path, page: &Path, what: &[&str]) -> String {
    let out = Command::new(browser)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--hide-scrollbars",
            "--force-device-scale-factor=1",
            "--window-size=1100,2400",
        ])
        .arg(format!("--user-data-dir={}", dir.join("profile").display()))
        .args(what)
        .arg(format!("file://{}", page.display()))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "chromium failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The value of `name="..."` in a tag's text.
fn attr<'a>(tag: &'a str, name: &str) -> Option<&'a str> {
    let key = format!("{name}=\"");
    let start = tag
        .match_indices(&key)
        .find(|(i, _)| *i == 0 || tag.as_bytes()[i - 1] == b' ')?
        .0
        + key.len();
    let len = tag[start..].find('"')?;
    Some(&tag[start..start + len])
}

/// Every `<rect class="seg" ...>` the browser parsed: (node, state) in document order.
fn bars(dom: &str) -> Vec<(String, String)> {
    dom.split("<rect ")
        .skip(1)
        .map(|t| &t[..t.find('>').unwrap_or(t.len())])
        .filter(|t| attr(t, "class") == Some("seg"))
        .map(|t| {
            (
                attr(t, "data-node").unwrap_or("").to_string(),
                attr(t, "data-state").unwrap_or("").to_string(),
            )
        })
        .collect()
}

/// The state a happening of the JSON report starts on a node's lane.
fn state_of(what: &str) -> Option<&'static str> {
    Some(match what {
        "cordon" | "taint" | "relapse" => "cordoned",
        "drain" => "draining",
        "drained" => "drained",
        "probation" => "probation",
        "uncordon" | "untaint" => "uncordoned",
        "delete" => "deleted",
        _ => return None,
    })
}

/// Pixels of each colour (RGB) in a PNG.
fn colours(png_file: &Path) -> BTreeMap<[u8; 3], usize> {
    let decoder = png::Decoder::new(std::io::BufReader::new(
        std::fs::File::open(png_file).unwrap(),
    ));
    let mut reader = decoder.read_info().unwrap();
    let mut buf = vec![0; reader.output_buffer_size().unwrap()];
    let info = reader.next_frame(&mut buf).unwrap();
    let step = info.color_type.samples();
    let mut out = BTreeMap::new();
    for px in buf[..info.buffer_size()].chunks(step) {
        *out.entry([px[0], px[1], px[2]]).or_insert(0) += 1;
    }
    out
}

fn rgb(hex: &str) -> [u8; 3] {
    let v = u32::from_str_radix(hex.trim_start_matches('#'), 16).unwrap();
    [(v >> 16) as u8, (v >> 8) as u8, v as u8]
}

/// The colours the page draws (its legend: `background:#...` then the name).
fn legend(html: &str) -> BTreeMap<String, String> {
    html.split("<i style=\"background:")
        .skip(1)
        .filter_map(|t| {
            let colour = &t[..7];
            let name = t.split("</i>").nth(1)?.split("</span>").next()?;
            Some((name.to_string(), colour.to_string()))
        })
        .collect()
}

#[test]
fn simulate_draws_each_nodes_states_the_breaker_and_the_count_in_a_real_browser() {
    let scenarios = [
        "config/scenarios/probation.yaml",
        "config/scenarios/bad-kernel-rollout.yaml",
    ];
    let out = drainer(&[&["simulate", "--output", "html"][..], &scenarios[..]].concat());
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let html = String::from_utf8(out.stdout).unwrap();
    for fetches in ["<script", "src=", "href=", "url(", "@import"] {
        assert!(
            !html.contains(fetches),
            "self-contained: {fetches} in the page"
        );
    }
    // What the same runs did, from their JSON reports.
    let json = drainer(&[&["simulate", "--output", "json"][..], &scenarios[..]].concat());
    let reports: Vec<Value> = String::from_utf8_lossy(&json.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let mut expected: BTreeSet<(String, String)> = BTreeSet::new();
    let mut held_while = Vec::new();
    for r in &reports {
        for h in r["happenings"].as_array().unwrap() {
            if let (Some(node), Some(state)) =
                (h["node"].as_str(), state_of(h["what"].as_str().unwrap()))
            {
                expected.insert((node.to_string(), state.to_string()));
            }
        }
        // A node held while cordoned or draining keeps that bar (its hover says it is held); one
        // held before (or after being let go) gets a bar of its own.
        for h in r["held"].as_array().unwrap() {
            let node = h["node"].as_str().unwrap();
            let before = r["happenings"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|x| x["node"] == node && x["at_secs"].as_u64() <= h["at_secs"].as_u64())
                .filter_map(|x| state_of(x["what"].as_str().unwrap()))
                .next_back();
            if h["what"] == "held" && before.is_none_or(|s| s == "uncordoned") {
                expected.insert((node.to_string(), "held by a gate".into()));
            } else if h["what"] == "held" {
                held_while.push(node.to_string());
            }
        }
    }
    assert!(
        expected.contains(&("node-10".into(), "probation".into())),
        "the probation scenario puts node-10 on probation: {expected:?}"
    );

    let Some(browser) = chromium() else { return };
    let dir = tempfile::tempdir().unwrap();
    let page = dir.path().join("report.html");
    std::fs::write(&page, &html).unwrap();
    let dom = headless(browser, dir.path(), &page, &["--dump-dom"]);
    let drawn: BTreeSet<(String, String)> = bars(&dom).into_iter().collect();
    let missing: Vec<_> = expected.difference(&drawn).collect();
    assert!(
        missing.is_empty(),
        "no bar for {missing:?}; drawn: {drawn:?}"
    );
    for node in &held_while {
        assert!(
            dom.contains(&format!("<title>{node} ")) && dom.contains("; then held: "),
            "{node} was held while cordoned: its bar says so"
        );
    }
    let lane = |node: &str| -> Vec<String> {
        bars(&dom)
            .into_iter()
            .filter(|(n, _)| n == node)
            .map(|(_, s)| s)
            .collect()
    };
    assert_eq!(
        lane("node-10"),
        ["cordoned", "draining", "drained", "probation", "uncordoned"],
        "node-10's lane, in order"
    );
    assert!(
        dom.contains("class=\"breaker\""),
        "the rollout's breaker opening is drawn"
    );
    assert!(
        dom.contains("class=\"cordoned-count\" data-max=\"2\""),
        "two nodes cordoned at most"
    );

    let shot = dir.path().join("report.png");
    headless(
        browser,
        dir.path(),
        &page,
        &[&format!("--screenshot={}", shot.display())],
    );
    let seen = colours(&shot);
    let states_drawn: BTreeSet<&str> = drawn.iter().map(|(_, s)| s.as_str()).collect();
    for (name, colour) in legend(&html) {
        let wanted = match name.as_str() {
            // Drawn a quarter opaque over white.
            "breaker open" => [255, 191, 191],
            "nodes cordoned" => rgb(&colour),
            state if states_drawn.contains(state) => rgb(&colour),
            _ => continue,
        };
        let pixels = seen.get(&wanted).copied().unwrap_or(0);
        assert!(
            pixels >= 30,
            "{name} ({colour}) is not on the screen: {pixels} pixels of {wanted:?}"
        );
    }
}

#[test]
fn a_backtest_draws_its_policies_side_by_side() {
    let dir = tempfile::tempdir().unwrap();
    let history = dir.path().join("history.jsonl");
    let mut lines = String::new();
    for (i, node) in ["n1", "n2", "n3"].iter().enumerate() {
        lines.push_str(&format!(
            "{{\"at\":\"2026-03-0{}T10:00:00Z\",\"node\":\"{node}\",\"type\":\"KernelDeadlock\",\"status\":\"True\",\"reason\":\"Hung\"}}\n",
            i + 1
        ));
    }
    std::fs::write(&history, lines).unwrap();
    let strict = dir.path().join("strict.yaml");
    std::fs::write(
        &strict,
        "conditions: [\"KernelDeadlock=True,10m\"]\nskipDrain: true\n",
    )
    .unwrap();
    let eager = dir.path().join("eager.yaml");
    std::fs::write(
        &eager,
        "conditions: [\"KernelDeadlock=True,1m\"]\ndrainBuffer: 1m\n",
    )
    .unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_drainer"))
        .args(["backtest", "--output", "html", "--history"])
        .arg(&history)
        .arg("--policy")
        .arg(&strict)
        .arg("--policy")
        .arg(&eager)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let html = String::from_utf8(out.stdout).unwrap();
    assert_eq!(html.matches("<svg ").count(), 2, "one timeline per policy");
    let Some(browser) = chromium() else { return };
    let page = dir.path().join("backtest.html");
    std::fs::write(&page, &html).unwrap();
    let dom = headless(browser, dir.path(), &page, &["--dump-dom"]);
    // The summary table heads a column per policy; the strict one never drains, the eager one does.
    assert!(
        dom.contains(&format!("<th>policy {}</th>", strict.display())),
        "{dom}"
    );
    let sections: Vec<&str> = dom.split("<section>").skip(1).collect();
    assert_eq!(sections.len(), 2);
    assert!(!bars(sections[0]).iter().any(|(_, s)| s == "drained"));
    assert!(
        bars(sections[1])
            .iter()
            .any(|(n, s)| n == "n1" && s == "drained"),
        "{}",
        sections[1]
    );
}
