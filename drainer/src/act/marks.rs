//! The after-drain marks (labels, annotations, taints that let an autoscaler or a machine
//! controller replace a drained node), set after a drain and removed on uncordon. I/O through the
//! executor's gated cluster.

use k8s_openapi::api::core::v1::Taint;

use super::executor::Executor;
use crate::config::AfterDrain;
use crate::model::cluster::{ApiError, Cluster, NodePatch};

use super::hold::{TAINT_TRIES, taints_and_version};

impl<C: Cluster> Executor<C> {
    /// Add (`on`) or remove the after-drain marks. Taints are a list the API replaces whole, so
    /// they are read and written back with the node's resourceVersion (retried on a conflict).
    pub(super) async fn set_marks(
        &self,
        node: &str,
        m: &AfterDrain,
        on: bool,
    ) -> Result<(), ApiError> {
        let value = |v: &String| on.then(|| v.clone());
        let patch = NodePatch {
            labels: m
                .labels
                .iter()
                .map(|(k, v)| (k.clone(), value(v)))
                .collect(),
            annotations: m
                .annotations
                .iter()
                .map(|(k, v)| (k.clone(), value(v)))
                .collect(),
            ..Default::default()
        };
        if !patch.is_empty() {
            self.cluster.patch_node(node, &patch).await?;
        }
        if m.taints.is_empty() {
            return Ok(());
        }
        let mut attempt = 1;
        loop {
            let (current, version) = taints_and_version(self.cluster.read_node(node).await?);
            let patch = NodePatch {
                resource_version: Some(version),
                taints: Some(with_marks(current, m, on)),
                ..Default::default()
            };
            match self.cluster.patch_node(node, &patch).await {
                Err(e) if e.is_conflict() && attempt < TAINT_TRIES => attempt += 1,
                other => return other,
            }
        }
    }
}

/// `taints` with the marks' taints removed, then (`on`) added again.
pub(crate) fn with_marks(taints: Vec<Taint>, m: &AfterDrain, on: bool) -> Vec<Taint> {
    let ours: Vec<_> = m
        .taints
        .iter()
        .map(crate::config::Taint::node_taint)
        .collect();
    let taints = super::hold::edit_taints(taints, &ours, &[]);
    if on {
        super::hold::edit_taints(taints, &[], &ours)
    } else {
        taints
    }
}

/// The after-drain marks in words (for the Event).
pub(crate) fn describe(m: &AfterDrain) -> String {
    let mut parts: Vec<String> = Vec::new();
    parts.extend(m.labels.iter().map(|(k, v)| format!("label {k}={v}")));
    parts.extend(
        m.annotations
            .iter()
            .map(|(k, v)| format!("annotation {k}={v}")),
    );
    parts.extend(m.taints.iter().map(|t| match &t.value {
        Some(v) => format!("taint {}={v}:{}", t.key, t.effect),
        None => format!("taint {}:{}", t.key, t.effect),
    }));
    parts.join(", ")
}
