//! The pause, pure: an annotation on the drainer's Lease ([`PAUSE_ANNOTATION`]) holds every new
//! cordon and drain start (a drain already evicting finishes) until it is removed.
//!
//! Settings: none (the annotation is the setting). State: the Lease as the election last read it.
//! Persists nothing of its own; who set it and since when come from the Lease's managed fields.

use k8s_openapi::api::coordination::v1::Lease;

use super::gate::Gate;
use crate::decide::candidate::Candidate;
use crate::decide::decision::Why;
use crate::decide::facts::Pause;

pub(crate) use crate::model::keys::PAUSE_ANNOTATION;

/// The pause on `lease`, if its annotation is set. Who and since when come from the managed field
/// entry that owns the annotation.
pub(crate) fn pause_of(lease: &Lease) -> Option<Pause> {
    let reason = lease
        .metadata
        .annotations
        .as_ref()?
        .get(PAUSE_ANNOTATION)?
        .clone();
    let field = format!("f:{PAUSE_ANNOTATION}");
    let entry = lease
        .metadata
        .managed_fields
        .iter()
        .flatten()
        .filter(|m| {
            m.fields_v1.as_ref().is_some_and(|f| {
                f.0.get("f:metadata")
                    .and_then(|m| m.get("f:annotations"))
                    .is_some_and(|a| a.get(&field).is_some())
            })
        })
        .max_by_key(|m| m.time.as_ref().map(|t| t.0));
    Some(Pause {
        by: entry.and_then(|m| m.manager.clone()).unwrap_or_default(),
        since: entry.and_then(|m| m.time.as_ref().map(|t| t.0)),
        reason,
    })
}

impl Gate for Option<Pause> {
    fn hold(&self, _: &Candidate) -> Option<Why> {
        Some(Why::Paused {
            pause: self.clone()?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pause_says_who_and_since_when_from_managed_fields() {
        let lease: Lease = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "nodemedic-drainer", "annotations": {PAUSE_ANNOTATION: "kernel rollout"},
              "managedFields": [
                {"manager": "nodemedic-drainer", "operation": "Update", "time": "2026-11-24T09:00:00Z",
                 "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {"f:holderIdentity": {}}}},
                {"manager": "kubectl-annotate", "operation": "Update", "time": "2026-11-24T09:30:00Z",
                 "fieldsType": "FieldsV1", "fieldsV1": {"f:metadata": {"f:annotations": {".": {}, "f:nodemedic.io/pause": {}}}}}
              ]}
        }))
        .unwrap();
        let p = pause_of(&lease).unwrap();
        assert_eq!(
            p.to_string(),
            "paused by kubectl-annotate since 2026-11-24T09:30:00Z: kernel rollout (remove the nodemedic.io/pause annotation of the drainer's Lease to resume)"
        );
        let mut unpaused = lease.clone();
        unpaused.metadata.annotations = None;
        assert_eq!(pause_of(&unpaused), None);
    }
}
