use super::*;
use crate::simulate::report::Happening;

fn h(at_secs: u64, what: &str, node: Option<&str>, detail: &str) -> Happening {
    Happening {
        at_secs,
        what: what.into(),
        node: node.map(String::from),
        detail: detail.into(),
    }
}

fn report() -> Report {
    Report {
        happenings: vec![
            h(60, "cordon", Some("a"), "KernelDeadlock=True for 10m"),
            h(120, "breaker opened", None, "3 of 5 nodes unhealthy"),
            h(600, "drain", Some("a"), "after the drain buffer"),
            h(660, "drained", Some("a"), ""),
            h(700, "cordon", Some("b<x>"), "ReadonlyFilesystem"),
            h(900, "breaker closed", None, "after 13m"),
            h(1200, "probation", Some("a"), "problem cleared"),
            h(1500, "uncordon", Some("a"), "healthy 5m"),
            h(1600, "uncordon", Some("b<x>"), "cleared"),
        ],
        held: vec![
            h(
                300,
                "held",
                Some("c"),
                "waiting for the cordon budget: 1 of 1",
            ),
            h(650, "held", Some("a"), "waiting for a drain slot"),
            h(1700, "released", Some("a"), ""),
            h(1800, "held", Some("d"), "breaker open"),
            h(1900, "released", Some("d"), ""),
        ],
        ..Default::default()
    }
}

#[test]
fn each_node_gets_its_states_in_order_each_ending_where_the_next_begins() {
    let lanes = lanes(&report(), 2000);
    let names: Vec<&str> = lanes.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["a", "c", "b<x>", "d"]);
    let a: Vec<(State, u64, u64)> = lanes[0].1.iter().map(|s| (s.state, s.from, s.to)).collect();
    assert_eq!(
        a,
        [
            (State::Cordoned, 60, 600),
            (State::Draining, 600, 660),
            (State::Drained, 660, 1200),
            (State::Probation, 1200, 1500),
            (State::Uncordoned, 1500, 2000),
        ]
    );
    // A wait while draining does not undo the drain: it is said on it.
    assert!(
        lanes[0].1[1]
            .why
            .contains("then held: waiting for a drain slot")
    );
    // A node only ever held is held to the end.
    assert_eq!(lanes[1].1.len(), 1);
    assert_eq!(
        (lanes[1].1[0].state, lanes[1].1[0].from, lanes[1].1[0].to),
        (State::Held, 300, 2000)
    );
    // Held, then released: the span ends there, and nothing follows.
    let d: Vec<(State, u64, u64)> = lanes[3].1.iter().map(|s| (s.state, s.from, s.to)).collect();
    assert_eq!(d, [(State::Held, 1800, 1900)]);
}

#[test]
fn the_count_and_the_breaker_follow_the_happenings() {
    let r = report();
    assert_eq!(
        cordoned_over_time(&r),
        [(0, 0), (60, 1), (700, 2), (1500, 1), (1600, 0)]
    );
    assert_eq!(
        breaker_spans(&r, 2000),
        [(120, 900, "3 of 5 nodes unhealthy".to_string())]
    );
    let mut open = r;
    open.happenings.retain(|h| h.what != "breaker closed");
    assert_eq!(
        breaker_spans(&open, 2000)[0].1,
        2000,
        "still open: to the end"
    );
}

#[test]
fn the_page_is_self_contained_and_escapes_what_nodes_are_named() {
    let r = report();
    let runs = [
        Run {
            title: "policy <one>".into(),
            about: String::new(),
            report: &r,
        },
        Run {
            title: "two".into(),
            about: "a second policy".into(),
            report: &r,
        },
    ];
    let rows = vec![("drains".to_string(), vec!["1".to_string(), "1".to_string()])];
    let html = page(
        "backtest",
        "times from the first transition",
        &runs,
        Axis::Shared,
        &rows,
    );
    assert!(!html.contains("<script"), "no script");
    assert!(
        !html.contains("src=") && !html.contains("href="),
        "nothing fetched"
    );
    assert!(html.contains("data-node=\"b&lt;x&gt;\""));
    assert!(!html.contains("b<x>"));
    assert_eq!(html.matches("<svg ").count(), 2, "one timeline per policy");
    assert!(html.contains("<th>policy &lt;one&gt;</th><th>two</th>"));
    assert!(html.contains("a cordoned from +1m00s to +10m00s: KernelDeadlock=True for 10m"));
}

#[test]
fn ticks_are_round_and_about_ten() {
    assert_eq!(tick_step(60), 10);
    assert_eq!(tick_step(3600), 600);
    assert_eq!(tick_step(86400 * 3), 43200);
    assert!(86400 * 30 / tick_step(86400 * 30) <= 10);
}

#[test]
fn a_ladder_draws_its_reboot_and_its_end_with_a_person() {
    let r = Report {
        happenings: vec![
            h(60, "cordon", Some("n"), "KernelDeadlock=True"),
            h(120, "drain", Some("n"), ""),
            h(180, "drained", Some("n"), ""),
            h(240, "reboot", Some("n"), "rebooting it"),
            h(240, "rebooted", Some("n"), "the machine: back in 3m"),
            h(1440, "needs a person", Some("n"), "no new bootID"),
        ],
        ..Default::default()
    };
    let lanes = lanes(&r, 2000);
    let n: Vec<(State, u64, u64)> = lanes[0].1.iter().map(|s| (s.state, s.from, s.to)).collect();
    assert_eq!(
        n,
        [
            (State::Cordoned, 60, 120),
            (State::Draining, 120, 180),
            (State::Drained, 180, 240),
            (State::Rebooting, 240, 1440),
            (State::NeedsPerson, 1440, 2000),
        ],
        "the machine's own lines draw nothing"
    );
    let colours: std::collections::BTreeSet<&str> = State::ALL.iter().map(|s| s.colour()).collect();
    assert_eq!(colours.len(), State::ALL.len(), "each state its own colour");
}

/// The page of `r` alone.
fn one_run(r: &Report) -> String {
    let run = Run {
        title: "t".into(),
        about: String::new(),
        report: r,
    };
    page("s", "", &[run], Axis::Each, &[])
}

#[test]
fn lanes_go_in_the_order_the_drainer_first_acted_and_the_only_held_fold_into_one() {
    // Held at once in name order (as a breaker holds a zone), then acted on in another order.
    let mut r = Report::default();
    for n in ["a", "b", "c", "d"] {
        r.held.push(h(10, "held", Some(n), "breaker open"));
    }
    r.held.push(h(100, "released", Some("c"), ""));
    r.happenings
        .push(h(100, "cordon", Some("c"), "KernelDeadlock"));
    r.held.push(h(200, "released", Some("a"), ""));
    r.happenings
        .push(h(200, "cordon", Some("a"), "KernelDeadlock"));
    let (acted, quiet) = arrange(lanes(&r, 1000));
    let acted: Vec<&str> = acted.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(acted, ["c", "a"], "by first action, not by name");
    let quiet: Vec<&str> = quiet.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(quiet, ["b", "d"]);

    let html = one_run(&r);
    assert!(html.contains("class=\"quiet\" data-count=\"2\""), "{html}");
    assert!(html.contains("2 nodes held by a gate and never acted on"));
    assert!(
        !html.contains("data-node=\"b\""),
        "a quiet node has no lane of its own"
    );
    let first_c = html.find("data-node=\"c\"").unwrap();
    assert!(first_c < html.find("data-node=\"a\"").unwrap());
}

#[test]
fn bands_above_the_lanes_relapses_marked_and_the_counts_in_one_line() {
    let r = Report {
        happenings: vec![
            h(
                0,
                "slow start narrowed",
                None,
                "zone-a: 1 at once (a relapse)",
            ),
            h(30, "breaker opened", None, "3 of 5 unhealthy"),
            h(60, "cordon", Some("n"), "KernelDeadlock=True"),
            h(90, "drained", Some("n"), ""),
            h(120, "reboot", Some("n"), "rebooting it"),
            h(300, "reboot proven", Some("n"), ""),
            h(400, "probation", Some("n"), "problem cleared"),
            h(500, "relapse", Some("n"), "KernelDeadlock came back"),
            h(600, "slow start widened", None, "zone-a: 2 at once"),
            h(700, "replace", Some("n"), "deleting the Node"),
            h(900, "breaker closed", None, "after 14m"),
        ],
        ..Default::default()
    };
    assert_eq!(
        slow_start_widths(&r)
            .iter()
            .map(|(at, w, _)| (*at, w.as_str()))
            .collect::<Vec<_>>(),
        [(0, "1"), (600, "2")]
    );
    let l = lanes(&r, 1000);
    let relapsed: Vec<(State, u64)> = l[0]
        .1
        .iter()
        .filter(|s| s.relapse)
        .map(|s| (s.state, s.from))
        .collect();
    assert_eq!(relapsed, [(State::Cordoned, 500)]);
    // Drained again in the same second: the mark stays, on the drain.
    let mut again = Report {
        happenings: r.happenings.clone(),
        ..Default::default()
    };
    again
        .happenings
        .insert(8, h(500, "drain", Some("n"), "again"));
    let l = lanes(&again, 1000);
    let relapsed: Vec<(State, u64)> = l[0]
        .1
        .iter()
        .filter(|s| s.relapse)
        .map(|s| (s.state, s.from))
        .collect();
    assert_eq!(relapsed, [(State::Draining, 500)]);
    assert_eq!(
        summary(&r),
        "1 cordoned, 1 drained, 1 reboot (1 proven), 1 replaced, 0 needed a person, 1 relapse"
    );
    let html = one_run(&r);
    let band = html
        .find("class=\"breaker-band\"")
        .expect("the breaker's band");
    let slow = html
        .find("class=\"slow-start\" data-width=\"1\"")
        .expect("the slow start's band");
    let first_bar = html.find("class=\"seg\"").unwrap();
    assert!(
        band < first_bar && slow < first_bar,
        "both bands come before (above) the lanes"
    );
    assert!(html.contains("class=\"relapse\" data-node=\"n\""));
    assert!(
        html.contains("<p class=\"counts\">1 cordoned, 1 drained, 1 reboot (1 proven), 1 replaced")
    );
}
