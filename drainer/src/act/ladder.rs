//! The remediation ladder's writes (`decide::ladder`): the record of each step, with the fence
//! taint of a reboot; the Node's deletion for its replacement; the Event, log line, metric and
//! notification of each through the [`Recorder`](crate::record::Recorder). The reboot request
//! itself is not written here: the controller derives it from the records (`act::publisher`). I/O
//! through the executor's gated cluster.

use super::executor::{Executor, ours, swap};
use crate::config::Config;
use crate::config::ladder::PowerCycle;
use crate::metrics::{LadderStep, StepResult};
use crate::model::cluster::{
    Cluster, MACHINE_ANNOTATION, MACHINE_NAMESPACE_ANNOTATION, MachineMark, NodeVersion,
    PowerCycleRequest, PowerTarget,
};
use crate::model::ladder::Step;
use crate::model::node::NodeView;
use crate::model::occurrence::Occurrence;
use crate::model::record::{Phase, Record};

impl<C: Cluster> Executor<C> {
    /// Store `next` (its cordon and taints swapped in as it says) for the step `step`; the
    /// reboot a record in phase `rebooting` stands for fails when it is left for another step.
    async fn step_record(
        &self,
        node: &NodeView,
        next: &Record,
        step: &'static str,
        cfg: &Config,
    ) -> bool {
        let name = node.name.as_str();
        let held = ours(node, cfg);
        let hold = swap(&held, next, Some(node));
        if let Err(e) = self.hold(name, &hold, &cfg.records).await {
            let error = e.to_string();
            let o = Occurrence::LadderWriteFailed { step, error };
            self.record.node(name, o).await;
            return false;
        }
        if held.phase == Phase::Rebooting && next.phase != Phase::Rebooting {
            self.record
                .metrics()
                .remediation(LadderStep::Reboot, StepResult::Failed);
        }
        true
    }

    /// A reboot: the record (phase `rebooting`; for the node's own, the fence taint on), then for
    /// a power-cycle the provider asked. True when the record was written.
    pub(super) async fn reboot(&self, node: &NodeView, next: &Record, cfg: &Config) -> bool {
        let outside = next.step == Some(Step::PowerCycle);
        let taken = next.step.unwrap_or(Step::Reboot);
        if !self.step_record(node, next, taken.as_str(), cfg).await {
            return false;
        }
        if taken.restarts() {
            let o = Occurrence::RestartRequested {
                step: taken,
                until: next.step_until.unwrap_or_default(),
                problem: next.reason.clone(),
            };
            self.record.node(&node.name, o).await;
            return true;
        }
        if outside {
            self.power_cycle(node, next, cfg).await;
            return true;
        }
        let o = Occurrence::RebootRequested {
            boot_id: next.boot_id.clone(),
            until: next.step_until.unwrap_or_default(),
            problem: next.reason.clone(),
        };
        self.record.node(&node.name, o).await;
        true
    }

    /// Ask the power-cycle provider to reboot `node` from outside, and say what came of it. A
    /// failure ends the attempt, in the record: past its retries for a passing reason the step
    /// waits out its deadline; refused, the ladder goes on at once.
    async fn power_cycle(&self, node: &NodeView, next: &Record, cfg: &Config) {
        let name = node.name.as_str();
        let Some(provider) = &cfg.ladder.power_cycle else {
            // Settings refuse a ladder naming the step without a provider.
            let error = "neither --power-cycle-url nor --power-cycle-provider is given".to_string();
            return self
                .power_cycle_failed(
                    node,
                    next,
                    "no power-cycle provider".into(),
                    error,
                    false,
                    cfg,
                )
                .await;
        };
        let shown = provider.to_string();
        let target = match self.target(provider, node, next).await {
            Ok(t) => t,
            Err(error) => {
                return self
                    .power_cycle_failed(node, next, shown, error, false, cfg)
                    .await;
            }
        };
        let time = |t: Option<k8s_openapi::jiff::Timestamp>| {
            t.map(nodemedic_common::time::rfc3339).unwrap_or_default()
        };
        let request = PowerCycleRequest {
            action: "power-cycle",
            node: name.to_string(),
            uid: node.uid.to_string(),
            boot_id: next.boot_id.clone(),
            requested: time(next.step_at),
            until: time(next.step_until),
            operation_id: operation_id(node, next),
        };
        match self.cluster.power_cycle(&target, &request).await {
            Ok(()) => {
                let o = Occurrence::PowerCycleRequested {
                    provider: shown,
                    boot_id: next.boot_id.clone(),
                    until: next.step_until.unwrap_or_default(),
                    problem: next.reason.clone(),
                };
                self.record.node(name, o).await;
            }
            Err(e) => {
                let transient = e.is_transient();
                self.power_cycle_failed(node, next, shown, e.to_string(), transient, cfg)
                    .await
            }
        }
    }

    /// Say that the power-cycle of `next` failed, and end its attempt in the record (`next` once
    /// more, the attempt added, a later version of it).
    async fn power_cycle_failed(
        &self,
        node: &NodeView,
        next: &Record,
        provider: String,
        error: String,
        transient: bool,
        cfg: &Config,
    ) {
        use crate::model::attempt::{self, Attempt, Outcome};
        let name = node.name.as_str();
        let outcome = if transient {
            Outcome::TransientFailure
        } else {
            Outcome::PermanentFailure
        };
        let now = self.clock.now();
        let a = Attempt::new(Step::PowerCycle, outcome, next.step_at, now, &error);
        let o = Occurrence::PowerCycleFailed {
            provider,
            error,
            transient,
        };
        self.record.node(name, o).await;
        let mut ended = next.clone();
        ended.ended = attempt::with(ended.ended, a.clone());
        let ended = ended.bound(node, Some(next.at), now);
        match self.set_record(name, Some(&ended), &cfg.records).await {
            Ok(()) => {
                self.record
                    .node(name, Occurrence::AttemptEnded { attempt: a })
                    .await
            }
            Err(e) => {
                let (step, error) = ("power-cycle", e.to_string());
                self.record
                    .node(name, Occurrence::LadderWriteFailed { step, error })
                    .await;
            }
        }
    }

    /// Where `provider` is asked for `node`: the endpoint with its token and CA (read now, so a
    /// rotated one is used), or the Machine that leads to its BareMetalHost.
    async fn target(
        &self,
        provider: &PowerCycle,
        node: &NodeView,
        next: &Record,
    ) -> Result<PowerTarget, String> {
        match provider {
            PowerCycle::Http {
                url,
                token_file,
                ca_file,
            } => {
                let token = match token_file {
                    None => None,
                    Some(path) => Some(
                        std::fs::read_to_string(path)
                            .map_err(|e| format!("its token file {}: {e}", path.display()))?
                            .trim()
                            .to_string(),
                    ),
                };
                let ca = match ca_file {
                    None => None,
                    Some(path) => Some(
                        crate::config::ca::read(path)
                            .map_err(|e| format!("its CA file {e}"))?
                            .into_iter()
                            .map(|c| c.as_ref().to_vec())
                            .collect(),
                    ),
                };
                Ok(PowerTarget::Http {
                    url: url.expose().to_string(),
                    token,
                    ca,
                })
            }
            PowerCycle::Metal3 => {
                let machine = (node.annotations.get(MACHINE_ANNOTATION)).ok_or_else(|| {
                    format!("the Node names no Cluster API Machine ({MACHINE_ANNOTATION}), which leads to its BareMetalHost")
                })?;
                let namespace =
                    (node.annotations.get(MACHINE_NAMESPACE_ANNOTATION)).unwrap_or("default");
                Ok(PowerTarget::Metal3 {
                    namespace: namespace.to_string(),
                    machine: machine.to_string(),
                    node: node.name.to_string(),
                    node_uid: node.uid.to_string(),
                })
            }
            PowerCycle::Medik8s(template) => Ok(PowerTarget::Medik8s {
                template: template.clone(),
                node: node.name.to_string(),
                operation: operation_id(node, next),
            }),
        }
    }

    /// Delete the remediation object `r`, its attempt over, and say so.
    pub(crate) async fn remediation_over(
        &self,
        template: &crate::model::medik8s::Template,
        r: &crate::model::medik8s::Remediation,
    ) {
        let object = format!(
            "{} {}/{}",
            template.remediation_kind(),
            template.namespace,
            r.name
        );
        let o = match self.cluster.delete_remediation(template, r).await {
            Ok(()) => Occurrence::RemediationDeleted {
                object,
                outcome: r.outcome.to_string(),
            },
            Err(e) => Occurrence::RemediationDeleteFailed {
                object,
                error: e.to_string(),
            },
        };
        self.record.node(&r.node, o).await;
    }

    /// A replacement: the record (phase `replacing`), then, where Cluster API runs the node, its
    /// Machine marked for its MachineHealthCheck, else the Node deleted as it was observed (its
    /// resourceVersion moved on with our write: the delete carries the node's UID instead).
    /// True when the record was written.
    pub(super) async fn replace(
        &self,
        node: &NodeView,
        next: &Record,
        why: &str,
        cfg: &Config,
    ) -> bool {
        if !self.step_record(node, next, "replace", cfg).await {
            return false;
        }
        let name = node.name.as_str();
        let o = Occurrence::Replacing {
            until: next.step_until.unwrap_or_default(),
            why: why.to_string(),
        };
        self.record.node(name, o).await;
        if self.machine_marked(node).await {
            return true;
        }
        let only = NodeVersion::Uid(node.uid.to_string());
        if let Err(e) = self.cluster.delete_node(name, &only).await {
            let error = e.to_string();
            self.record
                .node(name, Occurrence::ReplaceFailed { error })
                .await;
        }
        true
    }

    /// Where the Node names its Cluster API Machine, mark that Machine for remediation (only if
    /// the Machine names this Node back: a node may write that annotation on itself); whether it
    /// was marked. Otherwise the Node is deleted, as anywhere.
    async fn machine_marked(&self, node: &NodeView) -> bool {
        let Some(machine) = node.annotations.get(MACHINE_ANNOTATION) else {
            return false;
        };
        let namespace = node
            .annotations
            .get(MACHINE_NAMESPACE_ANNOTATION)
            .unwrap_or("default");
        let name = node.name.as_str();
        let uid = node.uid.to_string();
        let at = format!("{namespace}/{machine}");
        match self
            .cluster
            .mark_machine(namespace, machine, name, &uid)
            .await
        {
            Ok(MachineMark::Marked) => {
                let o = Occurrence::MachineMarked { machine: at };
                self.record.node(name, o).await;
                true
            }
            Ok(MachineMark::Missing) => {
                tracing::info!(node = %name, machine = %at, "no such Machine: deleting the Node instead");
                false
            }
            Ok(MachineMark::OtherNode(why)) => {
                tracing::warn!(node = %name, machine = %at, why = %why,
                    "the Machine the node's annotation names does not name this Node back: not marked; deleting this Node instead");
                false
            }
            Err(e) => {
                tracing::warn!(node = %name, machine = %at, error = %e,
                    "cannot mark the Machine for remediation: deleting the Node instead");
                false
            }
        }
    }

    /// The end of the ladder: the record (phase `needsperson`), and people told.
    pub(super) async fn escalate(&self, node: &NodeView, next: &Record, cfg: &Config) -> bool {
        if !self.step_record(node, next, "escalate", cfg).await {
            return false;
        }
        let why = next.escalated.clone();
        self.record
            .node(&node.name, Occurrence::NeedsPerson { why })
            .await;
        true
    }
}

/// The one ID of a power-cycle attempt: the node's UID and the boot it must leave (asked again,
/// the same attempt is not asked twice).
pub(crate) fn operation_id(node: &NodeView, next: &Record) -> String {
    format!("{}-{}", node.uid, next.boot_id)
}
