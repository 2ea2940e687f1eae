//! The symptoms' condition writes (`decide::symptoms`): PodsNotStarting and PodsNotTerminating set
//! True or False on a Node, each with its Event, log line and metric through the
//! [`Recorder`](crate::record::Recorder). I/O through the executor's gated cluster, as every
//! other write of the drainer.

use k8s_openapi::jiff::Timestamp;
use nodemedic_common::status::Status;

use super::executor::Executor;
use crate::decide::symptoms::SymptomWrite;
use crate::model::cluster::{Cluster, ConditionPatch};
use crate::model::occurrence::Occurrence;

impl<C: Cluster> Executor<C> {
    /// Write `write` on `node` as of `now` (a dry run writes nothing, its Event and log line go out).
    pub(crate) async fn symptom(&self, node: &str, write: SymptomWrite, now: Timestamp) {
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
        // A dry run writes no condition and says what it found, as it always has (its Events).
        let written = match self.dry_run() {
            true => Ok(()),
            false => {
                self.cluster()
                    .patch_node_status(node, std::slice::from_ref(&patch))
                    .await
            }
        };
        let o = match written {
            Ok(()) => done,
            Err(e) => Occurrence::SymptomWriteFailed {
                condition,
                error: e.to_string(),
            },
        };
        self.recorder().node(node, o).await;
    }
}
