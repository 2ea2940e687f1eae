//! The drains running in this process, I/O: each drain is a task of its own (its evictions, then
//! the writing of how it ended); when its evictions end, the controller decides its record here
//! and has it written. No new drain starts for a node while its task runs.

use k8s_openapi::jiff::Timestamp;

use super::{Controller, Done, Tap};
use crate::act::DrainRun;
use crate::decide::{DrainJob, Effect, NodeDecision};
use crate::model::cluster::Cluster;

impl<C: Cluster> Controller<C> {
    /// Take the drains whose evictions ended (before anything else in a round: a node whose drain
    /// just ended is never taken for one whose drain is not running), and forget finished tasks.
    pub(super) fn drains_ended(&mut self) {
        while let Ok(run) = self.drains.ended.1.try_recv() {
            self.drain_ended(run);
        }
        self.drains.running.retain(|_, t| !t.is_finished());
    }

    /// Start the drains decided (each decision's effect a drain); what was started (for the tap
    /// only: the decision itself then, its job cloned).
    pub(super) fn start_drains(&mut self, drains: Vec<NodeDecision>, now: Timestamp) -> Vec<Done> {
        let mut done = Vec::new();
        for d in drains {
            let Effect::Drain(job) = d.effect else {
                continue;
            };
            let tapped = self.tap.is_some().then(|| Effect::Drain(job.clone()));
            let started = self.drain_decided(&d.node, &d.pods, job, now);
            if let (true, Some(effect)) = (started, tapped) {
                done.push(Done {
                    node: d.node,
                    why: d.why,
                    effect,
                    ok: true,
                });
            }
        }
        done
    }

    /// Start the drain decided for `node` with `pods`; whether it started.
    fn drain_decided(
        &mut self,
        node: &str,
        pods: &[crate::decide::PodPlan],
        job: DrainJob,
        now: Timestamp,
    ) -> bool {
        let ok = self.start_drain(node, job, now);
        // Pods a policy keeps out of the drain are counted as it starts.
        let skipped = (pods.iter())
            .filter(|p| p.policy.is_some() && p.action == crate::decide::PodAction::Skip);
        for _ in skipped.filter(|_| ok) {
            self.record
                .metrics()
                .pod_policy(crate::metrics::PolicyOutcome::Skipped);
        }
        ok
    }

    /// Start (or resume) a drain as its own task, unless one runs for the node. True if started.
    fn start_drain(&mut self, node: &str, job: DrainJob, now: Timestamp) -> bool {
        if self.drains.running.contains_key(node) {
            return false;
        }
        // The record the drain writes first, laid over the node now so budgets count it.
        let job = DrainJob {
            record: job.record.draining(now),
            ..job
        };
        if !self.cfg.dry_run {
            self.fleet.wrote(node, Some(&job.record), now);
        }
        let (exec, cfg, name) = (self.exec.clone(), self.cfg.clone(), node.to_string());
        let ended = self.drains.ended.0.clone();
        let earlier = self.tails.current.as_ref().and_then(|t| t.wait_for(node));
        let task = tokio::spawn(async move {
            // After its DrainScheduled, which an earlier round's tail may still be writing.
            if let Some(earlier) = earlier {
                earlier.await;
            }
            if let Some(run) = exec.drain(&name, job, &cfg).await {
                let _ = ended.send(run);
            }
        });
        self.drains.running.insert(node.to_string(), task);
        true
    }

    /// A drain's evictions ended: decide its record ([`crate::model::record::Record::finished`]),
    /// lay it over the node, and have it written (no new drain starts for the node until it is).
    pub(super) fn drain_ended(&mut self, run: DrainRun) {
        let cfg = self.cfg.clone();
        let finished = run
            .record
            .finished(&run.outcome, run.ended, cfg.retry_base, cfg.retry_max);
        self.fleet.wrote(&run.node, Some(&finished), run.ended);
        self.tap(Tap::DrainEnded {
            at: run.ended,
            node: run.node.clone(),
            outcome: run.outcome.clone(),
        });
        let exec = self.exec.clone();
        let node = run.node.clone();
        let task = tokio::spawn(async move { exec.finish_drain(&run, &finished, &cfg).await });
        self.drains.running.insert(node, task);
    }
}
