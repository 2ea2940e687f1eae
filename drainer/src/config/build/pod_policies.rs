//! The file's pod policies built (`config::policy`), every error at its position. Pure.

use std::time::Duration;

use serde_saphyr::Spanned;

use super::sources::Sources;
use crate::config::policy::{PodPolicy, PodSelector, PolicyAction};
use crate::config::select::Selector;

fn duration(v: &str) -> Result<Duration, String> {
    nodemedic_common::time::parse_duration(v.trim())
        .map_err(|e| format!("invalid duration {v:?}: {e}"))
}

/// The file's policies, built; each error at its position.
pub(super) fn build(s: &mut Sources, out: &mut Vec<PodPolicy>) {
    let file = s.file;
    for (i, raw) in file.pod_policies.iter().enumerate() {
        let at = format!("podPolicies[{i}]");
        let selector = raw
            .selector
            .as_ref()
            .and_then(|sel| match Selector::labels(&sel.value) {
                Ok(Selector::Labels { selector, .. }) => Some(PodSelector {
                    text: sel.value.clone(),
                    selector,
                }),
                Ok(_) => None,
                Err(e) => {
                    let err = s.at(sel, format!("{at}.selector: {e}"));
                    s.errors.push(err);
                    None
                }
            });
        let mut need = |d: &Option<Spanned<String>>, key: &str| -> Option<Duration> {
            let Some(d) = d else {
                let err = s.at(
                    &raw.action,
                    format!("{at}: action {:?} needs {key}", raw.action.value),
                );
                s.errors.push(err);
                return None;
            };
            match duration(&d.value) {
                Ok(v) if !v.is_zero() => Some(v),
                Ok(_) => {
                    let err = s.at(d, format!("{at}.{key}: must be more than 0s"));
                    s.errors.push(err);
                    None
                }
                Err(e) => {
                    let err = s.at(d, format!("{at}.{key}: {e}"));
                    s.errors.push(err);
                    None
                }
            }
        };
        let action = match raw.action.value.as_str() {
            "evict" => Some(PolicyAction::Evict),
            "skip" => Some(PolicyAction::Skip),
            "wait" => need(&raw.max_wait, "maxWait").map(|max| PolicyAction::Wait { max }),
            "delete" => need(&raw.after, "after").map(|after| PolicyAction::Delete { after }),
            other => {
                let err = s.at(
                    &raw.action,
                    format!("{at}.action: {other:?}: expected evict, skip, wait or delete"),
                );
                s.errors.push(err);
                None
            }
        };
        let stray = [
            (&raw.max_wait, "maxWait", "wait"),
            (&raw.after, "after", "delete"),
        ];
        for (given, key, only) in stray {
            if let Some(g) = given
                && raw.action.value != only
            {
                let err = s.at(g, format!("{at}.{key}: only for action {only}"));
                s.errors.push(err);
            }
        }
        let (Some(action), true) = (action, raw.selector.is_none() || selector.is_some()) else {
            continue;
        };
        out.push(PodPolicy {
            name: raw.name.clone().unwrap_or(at),
            namespaces: raw.namespaces.clone(),
            selector,
            owner_kinds: raw.owner_kinds.clone(),
            priority_classes: raw.priority_classes.clone(),
            action,
        });
    }
}
