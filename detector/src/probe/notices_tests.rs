//! Tests of the notices (`super`): each provider's documented answers, and the probe's verdict on
//! them. Pure.

use super::*;

fn at(s: &str) -> Timestamp {
    s.parse().unwrap()
}

#[test]
fn aws_scheduled_events_as_its_documentation_shows_them() {
    // From the EC2 user guide's example, with a canceled event beside it (moved to the history).
    let body = r#"[ {
        "NotBefore" : "21 Jan 2019 09:00:43 GMT",
        "Code" : "system-reboot",
        "Description" : "scheduled reboot",
        "EventId" : "instance-event-0d59937288b749b32",
        "NotAfter" : "21 Jan 2019 09:17:23 GMT",
        "State" : "active"
      }, {
        "NotBefore" : "22 Jan 2019 09:00:43 GMT",
        "Code" : "instance-stop",
        "Description" : "stop",
        "EventId" : "instance-event-1",
        "State" : "canceled"
      } ]"#;
    let n = aws_scheduled(body).unwrap();
    assert_eq!(n.len(), 1);
    assert_eq!(n[0].what, "system-reboot");
    assert_eq!(n[0].from, Some(at("2019-01-21T09:00:43Z")));
    assert_eq!(n[0].to, Some(at("2019-01-21T09:17:23Z")));
    assert!(n[0].detail.contains("instance-event-0d59937288b749b32"));
    assert_eq!(aws_scheduled("[]").unwrap(), []);
    let bad = aws_scheduled(r#"[{"NotBefore": "tomorrow", "State": "active"}]"#).unwrap_err();
    assert!(bad.contains("21 Jan 2019 09:00:43 GMT"), "{bad}");
    assert!(
        aws_scheduled("<html>")
            .unwrap_err()
            .contains("not the JSON")
    );
}

#[test]
fn aws_spot_and_rebalance_notices() {
    let spot = aws_spot(r#"{"action": "terminate", "time": "2017-09-18T08:22:00Z"}"#).unwrap();
    assert_eq!(
        (spot.what.as_str(), spot.from),
        ("spot terminate", Some(at("2017-09-18T08:22:00Z")))
    );
    let r = aws_rebalance(r#"{"noticeTime": "2020-10-27T08:22:00Z"}"#).unwrap();
    assert_eq!(r.from, Some(at("2020-10-27T08:22:00Z")));
}

#[test]
fn azure_events_for_this_machine_only_and_no_freeze() {
    let body = r#"{"DocumentIncarnation": 2, "Events": [
        {"EventId": "602d9444-d2cd-49c7-8624-8643e7171297", "EventType": "Reboot",
         "ResourceType": "VirtualMachine", "Resources": ["FrontEnd_IN_0", "BackEnd_IN_0"],
         "EventStatus": "Scheduled", "NotBefore": "Mon, 19 Sep 2016 18:29:47 GMT",
         "Description": "", "EventSource": "Platform", "DurationInSeconds": 300},
        {"EventId": "x", "EventType": "Freeze", "ResourceType": "VirtualMachine",
         "Resources": ["FrontEnd_IN_0"], "EventStatus": "Scheduled", "NotBefore": "Mon, 19 Sep 2016 18:00:00 GMT",
         "Description": "", "EventSource": "Platform", "DurationInSeconds": 9},
        {"EventId": "y", "EventType": "Preempt", "ResourceType": "VirtualMachine",
         "Resources": ["Other_IN_1"], "EventStatus": "Started", "NotBefore": "",
         "Description": "", "EventSource": "Platform", "DurationInSeconds": -1}]}"#;
    let mine = azure(body, Some("frontend_in_0")).unwrap();
    assert_eq!(mine.len(), 1, "{mine:?}");
    assert_eq!(mine[0].what, "Reboot");
    assert_eq!(mine[0].from, Some(at("2016-09-19T18:29:47Z")));
    assert_eq!(mine[0].to, Some(at("2016-09-19T18:34:47Z")));
    let all = azure(body, None).unwrap();
    assert_eq!(all.len(), 2);
    assert_eq!(all[1].from, None, "started: now");
    assert!(azure(r#"{"DocumentIncarnation": 1}"#, None).is_err());
    assert_eq!(
        azure(r#"{"DocumentIncarnation": 1, "Events": []}"#, None).unwrap(),
        []
    );
}

#[test]
fn gcps_maintenance_and_preemption_values_are_read_as_it_documents_them() {
    assert_eq!(gcp_maintenance("NONE"), None);
    assert_eq!(
        gcp_maintenance("TERMINATE_ON_HOST_MAINTENANCE")
            .unwrap()
            .what,
        "TERMINATE_ON_HOST_MAINTENANCE"
    );
    assert_eq!(gcp_preempted("FALSE"), None);
    assert!(gcp_preempted("TRUE").is_some());
}

#[test]
fn the_verdict_is_a_problem_for_what_comes_within_ahead_with_its_time() {
    let now = at("2026-12-02T10:00:00Z");
    let n = |what: &str, from: Option<&str>| Notice {
        what: what.into(),
        from: from.map(at),
        to: None,
        detail: "d".into(),
    };
    let ahead = Duration::from_secs(3600);
    let quiet = verdict(vec![], now, ahead);
    assert_eq!(
        (quiet.code, quiet.message.as_str()),
        (0, "no maintenance announced")
    );
    let later = verdict(
        vec![n("system-reboot", Some("2026-12-05T09:00:00Z"))],
        now,
        ahead,
    );
    assert_eq!(later.code, 0);
    assert_eq!(
        later.message,
        "no maintenance within 1h; next: system-reboot at 2026-12-05T09:00:00Z: d"
    );
    let soon = verdict(
        vec![
            n("system-maintenance", Some("2026-12-02T10:50:00Z")),
            n("spot terminate", Some("2026-12-02T10:02:00Z")),
            n("system-reboot", Some("2026-12-05T09:00:00Z")),
        ],
        now,
        ahead,
    );
    assert_eq!(soon.code, 1);
    assert_eq!(
        soon.message,
        "spot terminate at 2026-12-02T10:02:00Z: d; system-maintenance at 2026-12-02T10:50:00Z: d"
    );
    let now_ = verdict(vec![n("MIGRATE_ON_HOST_MAINTENANCE", None)], now, ahead);
    assert_eq!(
        (now_.code, now_.message.as_str()),
        (1, "MIGRATE_ON_HOST_MAINTENANCE now: d")
    );
    let begun = verdict(vec![n("Reboot", Some("2026-12-02T09:00:00Z"))], now, ahead);
    assert_eq!(begun.code, 1, "begun already");
}

/// GCP's maintenance-event is one of its documented values; anything else (a token, if the request
/// was aimed elsewhere) is said as undocumented, never echoed.
#[test]
fn an_undocumented_gcp_answer_is_never_echoed() {
    let n = gcp_maintenance("TERMINATE_ON_HOST_MAINTENANCE\n").unwrap();
    assert_eq!(n.what, "TERMINATE_ON_HOST_MAINTENANCE");
    assert!(gcp_maintenance("NONE").is_none());
    let n = gcp_maintenance("{\"access_token\":\"ya29.secret\"}").unwrap();
    assert_eq!(n.what, "an undocumented maintenance-event value");
}
