//! The PodsNotStarting and PodsNotTerminating conditions, I/O: every [`SYMPTOMS_EVERY`] the pods
//! waiting to start or to go are assessed (`decide::symptoms`, pure) and the conditions that
//! changed are written on the selected Nodes, each with its Event, log line and metric. Written even when
//! no decision reads them (reporting); the drainer acts on them only when its conditions name them.

use std::time::Duration;

use k8s_openapi::jiff::Timestamp;
use nodemedic_common::status::Status;
use nodemedic_common::time::add;

use super::Controller;
use crate::decide::symptoms::{self, CONDITIONS, SymptomWrite};
use crate::model::cluster::{Cluster, ConditionPatch};
use crate::model::occurrence::Occurrence;

/// How often the symptoms are assessed: minutes matter here, not milliseconds.
pub(super) const SYMPTOMS_EVERY: Duration = Duration::from_secs(30);

impl<C: Cluster> Controller<C> {
    /// Assess the symptoms if it is time, and write what changed (not in a dry run: logged only).
    pub(super) async fn report_symptoms(&mut self, now: Timestamp) {
        if self
            .last_symptoms
            .is_some_and(|t| add(t, SYMPTOMS_EVERY) > now)
        {
            return;
        }
        // Not before the kubelets' sandbox Events are in: their words would be missing from a
        // message that is not rewritten while its reason stays. (`drainer simulate` runs no such
        // watch: nothing to wait for.)
        if !self.observed.sandbox.settled() {
            return;
        }
        self.last_symptoms = Some(now);
        let (pods, last_start) = self.observed.troubled_pods();
        let sandbox = match self.cfg.symptoms.not_starting_after {
            None => Default::default(),
            Some(after) => {
                let since = nodemedic_common::time::sub(now, after);
                let nodes: std::collections::BTreeSet<_> =
                    pods.iter().filter_map(|p| p.node.clone()).collect();
                nodes
                    .into_iter()
                    .filter_map(|n| Some((n.clone(), self.observed.sandbox.since(&n, since)?)))
                    .collect()
            }
        };
        let evidence = symptoms::Evidence {
            pods: &pods,
            last_start: &last_start,
            sandbox: &sandbox,
        };
        let found = symptoms::assess(now, &evidence, &self.cfg.symptoms);
        for (condition, ..) in CONDITIONS {
            let n = found
                .values()
                .filter(|s| s.iter().any(|s| s.condition == condition))
                .count();
            self.metrics.symptom_nodes(condition, n);
        }
        let selected = self.fleet.selections().filter(|(_, s)| *s).map(|(v, _)| v);
        let planned = symptoms::writes(&found, selected, &self.cfg.kosmos_label);
        for (node, write) in planned {
            let condition = write.condition();
            let (patch, done) = match write {
                SymptomWrite::Set(s) => (
                    ConditionPatch::Set {
                        type_: s.condition.into(),
                        status: Status::True,
                        reason: s.reason.into(),
                        message: s.message.clone(),
                        at: now,
                    },
                    Occurrence::Symptom {
                        condition: s.condition,
                        reason: s.reason,
                        message: s.message,
                    },
                ),
                SymptomWrite::Clear {
                    condition,
                    reason,
                    message,
                } => (
                    ConditionPatch::Set {
                        type_: condition.into(),
                        status: Status::False,
                        reason: reason.into(),
                        message: message.into(),
                        at: now,
                    },
                    Occurrence::SymptomCleared {
                        condition,
                        reason,
                        message,
                    },
                ),
            };
            let written = match self.cfg.dry_run {
                true => Ok(()),
                false => self.exec.cluster().patch_node_status(&node, &patch).await,
            };
            let o = match written {
                Ok(()) => done,
                Err(e) => Occurrence::SymptomWriteFailed {
                    condition,
                    error: e.to_string(),
                },
            };
            self.record.node(&node, o).await;
        }
    }
}
