//! `explain NODE`'s conditions: each of the node's conditions against the configured ones (the
//! one for its reason where a type is listed by reason), and how it stands. Pure.

use k8s_openapi::api::core::v1::Node;
use k8s_openapi::jiff::Timestamp;
use serde::Serialize;

use crate::config::Config;
use crate::decide::problem::{elapsed, fmt_d};

#[derive(Debug, Clone, Serialize)]
pub(crate) struct ConditionLine {
    #[serde(rename = "type")]
    pub(crate) type_: String,
    pub(crate) status: String,
    pub(crate) reason: String,
    pub(crate) message: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) since: Option<Timestamp>,
    /// The configured condition it matches and how it stands against it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) watched: Option<String>,
}

pub(super) fn conditions(node: &Node, cfg: &Config, now: Timestamp) -> Vec<ConditionLine> {
    let list = node.status.as_ref().and_then(|s| s.conditions.as_deref());
    list.unwrap_or_default()
        .iter()
        .map(|c| {
            let since = c.last_transition_time.as_ref().map(|t| t.0);
            // The spec for its reason where several list the type (else the first of the type).
            let of_type = |w: &&crate::config::spec::ConditionSpec| w.type_ == c.type_;
            let watched = (cfg.conditions.iter())
                .filter(of_type)
                .find(|w| w.for_reason(c.reason.as_deref()))
                .or_else(|| cfg.conditions.iter().find(of_type))
                .map(|w| {
                    let reason = match w.reasons.is_empty() {
                        true => String::new(),
                        false => format!(",reason={}", w.reasons.join("|")),
                    };
                    let spec =
                        format!("{}={}{reason},{}", w.type_, w.status, fmt_d(w.min_duration));
                    let held = since.map(|t| elapsed(t, now)).unwrap_or_default();
                    if c.status != w.status.as_str() {
                        format!("{spec}: not in its problem status")
                    } else if !w.for_reason(c.reason.as_deref()) {
                        format!(
                            "{spec}: not for its reason {}",
                            c.reason.as_deref().unwrap_or("(none)")
                        )
                    } else if held >= w.min_duration {
                        format!("{spec}: held {} (min duration reached)", fmt_d(held))
                    } else {
                        let left = w.min_duration - held;
                        format!("{spec}: held {}, {} to go", fmt_d(held), fmt_d(left))
                    }
                });
            ConditionLine {
                type_: c.type_.clone(),
                status: c.status.clone(),
                reason: c.reason.clone().unwrap_or_default(),
                message: c.message.clone().unwrap_or_default(),
                since,
                watched,
            }
        })
        .collect()
}
