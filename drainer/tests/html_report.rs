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

/// Pixels of each colour (RGB) in the browser's screenshot of `page`.
fn screenshot(browser: &str, dir: &Path, page: &Path) -> BTreeMap<[u8; 3], usize> {
    let shot = dir.join("shot.png");
    headless(
        browser,
        dir,
        page,
        &[&format!("--screenshot={}", shot.display())],
    );
    colours(&shot)
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
    let mut quiet = BTreeSet::new();
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
            let acted_on = r["happenings"]
                .as_array()
                .unwrap()
                .iter()
                .any(|x| x["node"] == node && state_of(x["what"].as_str().unwrap()).is_some());
            if h["what"] == "held" && !acted_on {
                // Only ever held: folded into the quiet lane, counted there.
                quiet.insert(node.to_string());
            } else if h["what"] == "held" && before.is_none_or(|s| s == "uncordoned") {
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
    let folded: usize = dom
        .split("class=\"quiet\" data-count=\"")
        .skip(1)
        .map(|t| t[..t.find('"').unwrap()].parse::<usize>().unwrap())
        .sum();
    assert_eq!(
        folded,
        quiet.len(),
        "the nodes only held are counted in the quiet lanes"
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

    let seen = screenshot(browser, dir.path(), &page);
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

/// The `what`s of a JSON report's happenings.
fn whats(r: &Value) -> Vec<(u64, String, Option<String>, String)> {
    r["happenings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| {
            (
                h["at_secs"].as_u64().unwrap(),
                h["what"].as_str().unwrap().to_string(),
                h["node"].as_str().map(String::from),
                h["detail"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect()
}

#[test]
fn a_big_outage_reads_top_down_in_a_real_browser() {
    let scenarios = [
        "config/scenarios/zone-outage.yaml",
        "config/scenarios/zone-slow-start.yaml",
        "config/scenarios/probation.yaml",
        "config/scenarios/reboot-survives.yaml",
        "config/scenarios/bad-kernel-rollout.yaml",
    ];
    let html = drainer(&[&["simulate", "--output", "html"][..], &scenarios[..]].concat());
    assert!(html.status.success());
    let html = String::from_utf8(html.stdout).unwrap();
    let json = drainer(&[&["simulate", "--output", "json"][..], &scenarios[..]].concat());
    let reports: Vec<Value> = String::from_utf8_lossy(&json.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let Some(browser) = chromium() else { return };
    let dir = tempfile::tempdir().unwrap();
    let page = dir.path().join("report.html");
    std::fs::write(&page, &html).unwrap();
    let dom = headless(browser, dir.path(), &page, &["--dump-dom"]);
    let sections: Vec<&str> = dom.split("<section>").skip(1).collect();
    assert_eq!(sections.len(), 5);

    // Every run: the nodes acted on, in the order they were, the rest folded into a count.
    let mut lanes_seen = 0;
    for (section, report) in sections.iter().zip(&reports) {
        let mut first_act: Vec<(u64, String)> = Vec::new();
        for (at, what, node, _) in whats(report) {
            if let Some(node) = node.filter(|_| state_of(&what).is_some())
                && !first_act.iter().any(|(_, n)| *n == node)
            {
                first_act.push((at, node));
            }
        }
        let mut lanes: Vec<String> = Vec::new();
        for (node, _) in bars(section) {
            if !lanes.contains(&node) {
                lanes.push(node);
            }
        }
        let order: Vec<u64> = (lanes.iter())
            .map(|n| {
                first_act
                    .iter()
                    .find(|(_, m)| m == n)
                    .map(|(at, _)| *at)
                    .unwrap()
            })
            .collect();
        assert!(
            order.windows(2).all(|w| w[0] <= w[1]),
            "lanes by first action: {order:?}"
        );
        lanes_seen += lanes.len();
    }
    assert!(lanes_seen > 10, "{lanes_seen}");
    let only_held = |report: &Value| {
        let acted: BTreeSet<&str> = (report["happenings"].as_array().unwrap().iter())
            .filter(|h| state_of(h["what"].as_str().unwrap()).is_some())
            .filter_map(|h| h["node"].as_str())
            .collect();
        (report["held"].as_array().unwrap().iter())
            .filter_map(|h| h["node"].as_str())
            .filter(|n| !acted.contains(n))
            .collect::<BTreeSet<&str>>()
            .len()
    };
    let folded = |section: &str| {
        section
            .split("class=\"quiet\" data-count=\"")
            .nth(1)
            .map(|t| t[..t.find('"').unwrap()].parse::<usize>().unwrap())
    };
    for (section, report) in sections.iter().zip(&reports) {
        assert_eq!(folded(section), Some(only_held(report)).filter(|n| *n > 0));
    }
    // The outage held all 1,500 nodes and acted on none: one lane says so, under the breaker's band.
    let outage = sections[0];
    assert_eq!(only_held(&reports[0]), 1500);
    assert_eq!(folded(outage), Some(1500));
    let band = outage
        .find("class=\"breaker-band\"")
        .expect("the breaker's band");
    assert!(
        band < outage.find("class=\"quiet\"").unwrap(),
        "the band is above the lanes"
    );

    // The slow start's widths as it changed them.
    let widths: Vec<String> = whats(&reports[1])
        .into_iter()
        .filter(|(_, what, _, _)| what.starts_with("slow start "))
        .map(|(_, _, _, detail)| {
            detail
                .rsplit_once(": ")
                .unwrap()
                .1
                .split(' ')
                .next()
                .unwrap()
                .to_string()
        })
        .collect();
    let drawn: Vec<String> = sections[1]
        .split("class=\"slow-start\" data-width=\"")
        .skip(1)
        .map(|t| t[..t.find('"').unwrap()].to_string())
        .collect();
    assert!(!widths.is_empty());
    assert_eq!(drawn, widths);

    // The relapse marked on its node; the ladder's reboot and replacement counted.
    for (_, what, node, _) in whats(&reports[2]) {
        if what == "relapse" {
            let node = node.unwrap();
            assert!(sections[2].contains(&format!("class=\"relapse\" data-node=\"{node}\"")));
        }
    }
    assert!(
        sections[3].contains("1 reboot (") && sections[3].contains("1 replaced"),
        "{}",
        sections[3]
    );

    let seen = screenshot(browser, dir.path(), &page);
    assert!(
        seen.get(&[255, 191, 191]).copied().unwrap_or(0) >= 30,
        "the breaker's band is on the screen"
    );
    assert!(
        seen.get(&rgb("#f2c14e")).copied().unwrap_or(0)
            + seen
                .iter()
                .filter(|(c, _)| c[0] > 240 && c[1] > 200 && c[2] < 200 && c[2] > 130)
                .map(|(_, n)| *n)
                .sum::<usize>()
            >= 30,
        "the quiet lane is on the screen"
    );
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
