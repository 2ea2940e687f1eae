//! The power-cycle providers in memory (I/O-free, as the rest of `MemoryCluster`): each request
//! carried out (the machine rebooted by what simulates it), except on a node whose provider gives
//! up: medik8s' remediator then says `Succeeded=False` on its object, another provider answers
//! an error. medik8s' objects are kept as the API server would keep them, for the drainer to
//! follow and delete.

use crate::model::cluster::{PowerCycleError, PowerCycleRequest, PowerTarget};
use crate::model::medik8s::{Outcome, Remediation};

#[derive(Default)]
pub(super) struct Outside {
    /// The nodes whose provider gives up.
    pub(super) fails: std::collections::BTreeSet<String>,
    /// The medik8s remediation objects made.
    pub(super) objects: Vec<Remediation>,
}

impl Outside {
    /// `request` asked of `target`: whether the machine is rebooted (Err: the provider's error).
    pub(super) fn asked(
        &mut self,
        target: &PowerTarget,
        request: &PowerCycleRequest,
    ) -> Result<bool, PowerCycleError> {
        let fails = self.fails.contains(&request.node);
        let PowerTarget::Medik8s {
            node, operation, ..
        } = target
        else {
            return if fails {
                Err(PowerCycleError::Status(503))
            } else {
                Ok(true)
            };
        };
        if self.objects.iter().any(|o| o.operation == *operation) {
            return Ok(false);
        }
        self.objects.push(Remediation {
            name: node.clone(),
            uid: format!("{operation}-object"),
            node: node.clone(),
            operation: operation.clone(),
            outcome: if fails {
                Outcome::Failed("FenceAgentFailed: the fence agent could not reach the BMC".into())
            } else {
                Outcome::Pending
            },
            created: request.requested.parse().ok(),
        });
        Ok(!fails)
    }
}
