//! What a cloud's instance metadata announces for this machine, read from each provider's
//! documented answers, and what `detector probe cloud-maintenance` says of it. Pure; the requests
//! are in `super::maintenance`.
//!
//! - AWS: `/latest/meta-data/events/maintenance/scheduled` (a JSON array of `{NotBefore, NotAfter,
//!   Code, Description, EventId, State}`, times as `21 Jan 2019 09:00:43 GMT`; canceled and
//!   completed events move to the history, so only `active` ones count), `spot/instance-action`
//!   (`{"action": "terminate|stop|hibernate", "time": RFC 3339}`) and
//!   `events/recommendations/rebalance` (`{"noticeTime": RFC 3339}`).
//! - Azure: Scheduled Events (`{"DocumentIncarnation", "Events": [{EventId, EventType, Resources,
//!   EventStatus, NotBefore, Description, DurationInSeconds}]}`, `NotBefore` as `Mon, 19 Sep 2016
//!   18:29:47 GMT`, empty once started). Events reach every machine of an availability set: only
//!   those naming this machine count. `Freeze` (a pause of seconds) is not worth a drain.
//! - GCP: `instance/maintenance-event` (`NONE`, `MIGRATE_ON_HOST_MAINTENANCE`,
//!   `TERMINATE_ON_HOST_MAINTENANCE`, said 60 s ahead) and `instance/preempted` (`TRUE`/`FALSE`).

use std::time::Duration;

use k8s_openapi::jiff::{Timestamp, civil::DateTime, tz::TimeZone};

use super::{Found, healthy, problem};

/// Something the provider announces.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Notice {
    /// The provider's word for it (`system-reboot`, `Reboot`, `spot terminate`, ...).
    pub(crate) what: String,
    /// When it may begin (None: now, or not said).
    pub(crate) from: Option<Timestamp>,
    /// When it ends, where said.
    pub(crate) to: Option<Timestamp>,
    /// Its description and id, as the provider gives them.
    pub(crate) detail: String,
}

/// AWS's `21 Jan 2019 09:00:43 GMT`.
fn aws_time(s: &str) -> Result<Timestamp, String> {
    let civil = s
        .strip_suffix(" GMT")
        .and_then(|t| DateTime::strptime("%d %b %Y %H:%M:%S", t).ok())
        .ok_or_else(|| {
            format!("{s:?} is not a time as AWS writes them (21 Jan 2019 09:00:43 GMT)")
        })?;
    civil
        .to_zoned(TimeZone::UTC)
        .map(|z| z.timestamp())
        .map_err(|e| format!("{s:?}: {e}"))
}

fn json(body: &str, what: &str) -> Result<serde_json::Value, String> {
    serde_json::from_str(body)
        .map_err(|e| format!("{what} is not the JSON its documentation shows: {e}"))
}

fn text<'a>(v: &'a serde_json::Value, key: &str) -> &'a str {
    v.get(key).and_then(|x| x.as_str()).unwrap_or_default()
}

/// AWS's scheduled events: the active ones.
pub(crate) fn aws_scheduled(body: &str) -> Result<Vec<Notice>, String> {
    let events = json(body, "the scheduled events")?;
    let events = events
        .as_array()
        .ok_or("the scheduled events are not a JSON array")?;
    let mut out = Vec::new();
    for e in events {
        if !matches!(text(e, "State"), "" | "active") {
            continue;
        }
        let to = match text(e, "NotAfter") {
            "" => None,
            t => Some(aws_time(t)?),
        };
        out.push(Notice {
            what: text(e, "Code").to_string(),
            from: Some(aws_time(text(e, "NotBefore"))?),
            to,
            detail: format!("{} ({})", text(e, "Description"), text(e, "EventId")),
        });
    }
    Ok(out)
}

/// AWS's spot interruption notice.
pub(crate) fn aws_spot(body: &str) -> Result<Notice, String> {
    let v = json(body, "the spot instance action")?;
    let time = text(&v, "time");
    Ok(Notice {
        what: format!("spot {}", text(&v, "action")),
        from: Some(
            time.parse()
                .map_err(|e| format!("spot time {time:?}: {e}"))?,
        ),
        to: None,
        detail: "a spot interruption".into(),
    })
}

/// AWS's rebalance recommendation (an elevated risk of a spot interruption).
pub(crate) fn aws_rebalance(body: &str) -> Result<Notice, String> {
    let v = json(body, "the rebalance recommendation")?;
    let time = text(&v, "noticeTime");
    let at: Timestamp = time
        .parse()
        .map_err(|e| format!("noticeTime {time:?}: {e}"))?;
    Ok(Notice {
        what: "spot rebalance recommendation".into(),
        from: Some(at),
        to: None,
        detail: "an elevated risk of a spot interruption".into(),
    })
}

/// Azure's Scheduled Events that name `vm` (all of them when its name is not known).
pub(crate) fn azure(body: &str, vm: Option<&str>) -> Result<Vec<Notice>, String> {
    let doc = json(body, "the scheduled events")?;
    let events = doc
        .get("Events")
        .and_then(|e| e.as_array())
        .ok_or("the scheduled events have no Events list")?;
    let mut out = Vec::new();
    for e in events {
        let kind = text(e, "EventType");
        let names_me = vm.is_none_or(|vm| {
            (e.get("Resources")
                .and_then(|r| r.as_array())
                .into_iter()
                .flatten())
            .any(|r| r.as_str().is_some_and(|r| r.eq_ignore_ascii_case(vm)))
        });
        if kind == "Freeze" || !names_me {
            continue;
        }
        let from = match text(e, "NotBefore") {
            "" => None,
            t => Some(
                k8s_openapi::jiff::fmt::rfc2822::parse(t)
                    .map(|z| z.timestamp())
                    .map_err(|err| format!("NotBefore {t:?}: {err}"))?,
            ),
        };
        let secs = e
            .get("DurationInSeconds")
            .and_then(|d| d.as_i64())
            .unwrap_or(-1);
        let to = from
            .zip(u64::try_from(secs).ok())
            .and_then(|(f, s)| f.checked_add(Duration::from_secs(s)).ok());
        let description = match text(e, "Description") {
            "" => String::new(),
            d => format!("{d} "),
        };
        out.push(Notice {
            what: kind.to_string(),
            from,
            to,
            detail: format!(
                "{description}({}, {})",
                text(e, "EventId"),
                text(e, "EventStatus")
            ),
        });
    }
    Ok(out)
}

/// GCP's `maintenance-event` value.
pub(crate) fn gcp_maintenance(body: &str) -> Option<Notice> {
    let what = match body.trim() {
        "" | "NONE" => return None,
        w @ ("MIGRATE_ON_HOST_MAINTENANCE" | "TERMINATE_ON_HOST_MAINTENANCE") => w.to_string(),
        // Anything else is said as such, never echoed: the answer may not be what was asked for.
        _ => "an undocumented maintenance-event value".to_string(),
    };
    Some(Notice {
        what,
        from: None,
        to: None,
        detail: "host maintenance".into(),
    })
}

/// GCP's `preempted` value.
pub(crate) fn gcp_preempted(body: &str) -> Option<Notice> {
    body.trim().eq_ignore_ascii_case("TRUE").then(|| Notice {
        what: "preempted".into(),
        from: None,
        to: None,
        detail: "a preemptible machine being stopped".into(),
    })
}

/// The probe's line: a problem (exit 1) for what begins within `ahead` of `now` (or has begun),
/// earliest first, each with its time; healthy otherwise, naming the next one beyond `ahead`.
pub(crate) fn verdict(mut notices: Vec<Notice>, now: Timestamp, ahead: Duration) -> Found {
    notices.sort_by_key(|n| n.from);
    let soon = |n: &Notice| {
        n.from
            .is_none_or(|f| f.duration_since(now).as_secs() <= ahead.as_secs() as i64)
    };
    let (due, later): (Vec<Notice>, Vec<Notice>) = notices.into_iter().partition(soon);
    if due.is_empty() {
        return healthy(match later.first() {
            None => "no maintenance announced".to_string(),
            Some(n) => format!("no maintenance within {}; next: {}", words(ahead), say(n)),
        });
    }
    let said: Vec<String> = due.iter().map(say).collect();
    problem(said.join("; "))
}

/// One notice in words: what, when, and what the provider says of it.
fn say(n: &Notice) -> String {
    let when = match (n.from, n.to) {
        (None, _) => "now".to_string(),
        (Some(f), None) => format!("at {f}"),
        (Some(f), Some(t)) => format!("from {f} to {t}"),
    };
    format!("{} {when}: {}", n.what, n.detail)
}

fn words(d: Duration) -> String {
    humantime::format_duration(d).to_string()
}

#[cfg(test)]
#[path = "notices_tests.rs"]
mod tests;
