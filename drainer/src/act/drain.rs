//! A drain's evictions and writing how it ended, I/O. [`Executor::drain`] evicts the job's pods (in
//! parallel, bounded per drain and, with every drain's other requests, across drains:
//! [`super::turns`]) and waits until they are gone; the controller works out the record from the
//! [`DrainRun`] it returns, and [`Executor::finish_drain`] writes that record, DrainScheduled's
//! outcome, the Event and the after-drain marks.

use crate::model::lifecycle::Stage;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::jiff::Timestamp;
use nodemedic_common::evict::Evicted;
use nodemedic_common::time::rfc3339 as ts;

use super::executor::Executor;
use crate::config::Config;
use crate::config::policy::PolicyAction;
use crate::decide::{DrainJob, ToEvict};
use crate::metrics::PolicyOutcome;
use crate::model::cluster::Cluster;
use crate::model::occurrence::{EvictionFor, Occurrence, PodOccurrence};
use crate::model::pod::PodInfo;
use crate::model::record::{DrainOutcome, EvictError, Record};

/// Wait between retries of an eviction refused by a PodDisruptionBudget (draino and kubectl: 5s).
pub(crate) const PDB_RETRY: Duration = Duration::from_secs(5);

/// A drain attempt whose evictions ended, for the controller to decide the record of.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct DrainRun {
    pub(crate) node: String,
    /// The record of the attempt (draining).
    pub(crate) record: Record,
    pub(crate) outcome: DrainOutcome,
    pub(crate) started: Timestamp,
    pub(crate) ended: Timestamp,
    /// The pods the drain leaves running ([`DrainJob::kept`]).
    pub(crate) kept: Vec<String>,
}

impl<C: Cluster> Executor<C> {
    /// Run one drain attempt's evictions: store `job.record` (the attempt, draining), evict the
    /// pods, wait until they are gone. `None` when nothing more is to be recorded: dry-run, the
    /// start could not be stored, or leadership was lost (the next leader resumes).
    pub(crate) async fn drain(&self, node: &str, job: DrainJob, cfg: &Config) -> Option<DrainRun> {
        let started = self.clock.now();
        let (record, pods, kept) = (job.record, job.evict, job.kept);
        let starting = Occurrence::DrainStarting {
            pods: pods
                .iter()
                .map(|p| format!("{}/{}", p.pod.namespace, p.pod.name))
                .collect(),
        };
        let slot = self.turns.drain_request().await;
        self.record.node(node, starting).await;
        if self.dry_run() {
            tracing::info!(%node, pods = pods.len(), "dry-run: would drain");
            return None;
        }
        if let Err(e) = self.set_record(node, Some(&record), &cfg.records).await {
            tracing::warn!(%node, error = %e, "cannot record the drain start; not draining now");
            return None;
        }
        drop(slot);
        let running = self.lifecycle(
            Stage::Started {
                problem: &record.reason,
            },
            cfg,
        );
        if !running.is_empty()
            && let Err(e) = self.cluster.patch_node_status(node, &running).await
        {
            tracing::warn!(%node, error = %e, "cannot write the DrainInProgress and Drained conditions");
        }
        // A wait policy counts from the drain's first start (a retry does not wait again).
        let first_start = record.drain_started.unwrap_or(started);
        let results: Vec<Result<(), EvictError>> = futures::stream::iter(pods)
            .map(|p| async move { self.drain_pod(&p, first_start, cfg).await })
            .buffer_unordered(cfg.eviction_concurrency.max(1))
            .collect()
            .await;
        if !self.cluster.leading() {
            tracing::warn!(%node, "lost leadership during the drain; the next leader resumes it");
            return None;
        }
        let failures: Vec<EvictError> = results.into_iter().filter_map(Result::err).collect();
        let outcome = if failures.is_empty() {
            DrainOutcome::Drained
        } else {
            DrainOutcome::Failed(failures)
        };
        Some(DrainRun {
            node: node.to_string(),
            record,
            outcome,
            started,
            ended: self.clock.now(),
            kept,
        })
    }

    /// Write how `run` ended: `finished` (the record the controller decided), DrainScheduled with
    /// the outcome, the Event, and on success the after-drain marks.
    pub(crate) async fn finish_drain(&self, run: &DrainRun, finished: &Record, cfg: &Config) {
        let (node, now) = (run.node.as_str(), run.ended);
        let took = now.duration_since(run.started).as_secs_f64().max(0.0);
        self.record.metrics().drain_duration.observe(took);
        let scheduled = format!("Drain activity scheduled {}", ts(finished.drain_at));
        let _ = self.set_record(node, Some(finished), &cfg.records).await;
        match &run.outcome {
            DrainOutcome::Drained => {
                let message = format!("{scheduled} | Completed: {}", ts(now));
                let done = self.lifecycle(Stage::Succeeded, cfg);
                let _ = self.drain_scheduled(node, message, done).await;
                let kept = run.kept.clone();
                self.record.node(node, Occurrence::Drained { kept }).await;
                let marks = &cfg.after_drain;
                if !marks.is_empty() && !self.dry_run() {
                    let o = match self.set_marks(node, marks, true).await {
                        Ok(()) => Occurrence::Marked {
                            marks: super::marks::describe(marks),
                        },
                        Err(e) => Occurrence::MarkFailed {
                            error: e.to_string(),
                        },
                    };
                    self.record.node(node, o).await;
                }
            }
            DrainOutcome::Failed(failures) => {
                let retry_in = finished
                    .retry_at
                    .map(|r| Duration::from_secs(r.duration_since(now).as_secs().max(0) as u64))
                    .unwrap_or_default();
                let message = format!("{scheduled} | Failed: {}", ts(now));
                let retry = finished.retry_at.unwrap_or(now);
                let again = self.lifecycle(Stage::Failed { retry }, cfg);
                let _ = self.drain_scheduled(node, message, again).await;
                let failures = failures.iter().map(ToString::to_string).collect();
                let o = Occurrence::DrainFailed { retry_in, failures };
                self.record.node(node, o).await;
            }
        }
    }

    /// Evict a stale pod (one attempt; a PDB's refusal is retried by the controller later).
    pub(crate) async fn evict_stale(&self, s: &crate::decide::stale::Stale) {
        if !self.cluster.leading() || s.exempt.is_some() || self.dry_run() {
            return;
        }
        let id = format!("{}/{}", s.namespace, s.name);
        let answer = self.cluster.evict(&s.namespace, &s.name, None).await;
        let o = PodOccurrence::of(&answer);
        self.record
            .pod(&id, Some(&s.node), &o, EvictionFor::StaleReadiness)
            .await;
    }

    /// One pod of a drain, as its pod policy says: waited for first (`wait`: evicted only if still
    /// running `max` after the drain's first start), evicted, deleted once budgets have refused it
    /// for `after` (`delete`). Each pod's deadline is the drain's (`--max-grace-period` and the
    /// headroom) after what its policy waits.
    async fn drain_pod(
        &self,
        p: &ToEvict,
        first_start: Timestamp,
        cfg: &Config,
    ) -> Result<(), EvictError> {
        let pod = &p.pod;
        let in_ = |d: Duration| tokio::time::Instant::now() + d;
        let grace_window = cfg.max_grace_period + cfg.eviction_headroom;
        let mut delete_after = None;
        match &p.policy {
            Some((name, PolicyAction::Wait { max })) => {
                let until = nodemedic_common::time::add(first_start, *max);
                let left = until.duration_since(self.clock.now()).unsigned_abs();
                let left = if until > self.clock.now() {
                    left
                } else {
                    Duration::ZERO
                };
                let (ns, pname) = (&*pod.namespace, &*pod.name);
                if self
                    .cluster
                    .pod_gone(ns, pname, pod.uid.as_ref(), in_(left), true)
                    .await
                {
                    self.record.metrics().pod_policy(PolicyOutcome::Waited);
                    tracing::info!(pod = %format!("{ns}/{pname}"), policy = %name, "finished (or went) while the drain waited for it");
                    return Ok(());
                }
                self.record.metrics().pod_policy(PolicyOutcome::WaitedOut);
                tracing::info!(pod = %format!("{ns}/{pname}"), policy = %name, "still running after the policy's wait: evicting it");
            }
            Some((name, PolicyAction::Delete { after })) => {
                delete_after = Some((name.clone(), *after))
            }
            _ => {}
        }
        let extra = delete_after.as_ref().map_or(Duration::ZERO, |(_, a)| *a);
        let deadline = in_(grace_window + extra);
        self.evict_and_wait(
            pod,
            cfg.max_grace_period,
            deadline,
            cfg.allow_force_delete,
            delete_after,
        )
        .await
    }

    /// Evict `pod` and wait until it is gone. With `force` (draino's `--allow-force-delete`), a pod
    /// whose eviction kept failing other than by a PodDisruptionBudget, or that is still there at
    /// the deadline, is deleted with grace 0; a budget's refusal is never deleted around.
    async fn evict_and_wait(
        &self,
        pod: &PodInfo,
        max_grace: Duration,
        deadline: tokio::time::Instant,
        force: bool,
        delete_after: Option<(String, Duration)>,
    ) -> Result<(), EvictError> {
        let (ns, name) = (&*pod.namespace, &*pod.name);
        // Pod default when unset: 30s.
        let own = pod.grace().unwrap_or(30);
        let grace = own.min(max_grace.as_secs() as i64);
        let id = format!("{ns}/{name}");
        let node = pod.node.as_deref();
        // Since when budgets have refused it without a break (a delete policy's clock).
        let mut refused_since: Option<tokio::time::Instant> = None;
        loop {
            if !self.cluster.leading() {
                return Err(EvictError::LeadershipLost { pod: id });
            }
            let slot = self.turns.drain_request().await;
            let answer = self.cluster.evict(ns, name, Some(grace)).await;
            let o = PodOccurrence::of(&answer);
            self.record.pod(&id, node, &o, EvictionFor::Drain).await;
            drop(slot);
            let refused = matches!(answer, Ok(Evicted::Refused(_)));
            match answer {
                Ok(Evicted::Accepted) => break,
                Ok(Evicted::Gone) => return Ok(()),
                _ => {}
            }
            let since = *refused_since.get_or_insert_with(tokio::time::Instant::now);
            if !refused {
                refused_since = None;
            }
            if let Some((policy, after)) = &delete_after
                && refused
                && since.elapsed() >= *after
            {
                return self
                    .delete_by_policy(pod, id, grace, policy, *after, deadline)
                    .await;
            }
            if tokio::time::Instant::now() + PDB_RETRY > deadline {
                if force && !refused {
                    return self.force_delete(pod, id).await;
                }
                return Err(EvictError::NotEvicted { pod: id });
            }
            tokio::time::sleep(PDB_RETRY).await;
        }
        // Gone: deleted, or replaced by a pod with another uid (the watch tells, no polling).
        if self
            .cluster
            .pod_gone(ns, name, pod.uid.as_ref(), deadline, false)
            .await
        {
            Ok(())
        } else if force {
            self.force_delete(pod, id).await
        } else {
            Err(EvictError::StillPresent { pod: id })
        }
    }

    /// Delete `pod` with its eviction's grace period (a delete policy: `kubectl drain
    /// --disable-eviction`, around the PodDisruptionBudgets that kept refusing it), said loudly: a
    /// warning, a Warning Event on its node, and counted; then wait until it is gone.
    async fn delete_by_policy(
        &self,
        pod: &PodInfo,
        id: String,
        grace: i64,
        policy: &str,
        after: Duration,
        deadline: tokio::time::Instant,
    ) -> Result<(), EvictError> {
        let slot = self.turns.drain_request().await;
        let answer = self
            .cluster
            .delete_pod(&pod.namespace, &pod.name, pod.uid.as_ref(), grace)
            .await;
        match answer {
            Ok(()) => {}
            Err(e) if e.is_not_found() || e.is_conflict() => return Ok(()),
            Err(e) => {
                let error = e.to_string();
                return Err(EvictError::ForceDeleteFailed { pod: id, error });
            }
        }
        let o = PodOccurrence::DeletedByPolicy {
            policy: policy.to_string(),
            refused_for: after,
        };
        self.record
            .pod(&id, pod.node.as_deref(), &o, EvictionFor::Drain)
            .await;
        drop(slot);
        let (ns, name) = (&*pod.namespace, &*pod.name);
        if self
            .cluster
            .pod_gone(ns, name, pod.uid.as_ref(), deadline, false)
            .await
        {
            Ok(())
        } else {
            Err(EvictError::StillPresent { pod: id })
        }
    }

    /// Delete `pod` with grace 0 (only this pod: its uid is a precondition), said loudly: a warning,
    /// `evictions_total{result="force_deleted"}` and a Warning Event on its node.
    async fn force_delete(&self, pod: &PodInfo, id: String) -> Result<(), EvictError> {
        if !self.cluster.leading() {
            return Err(EvictError::LeadershipLost { pod: id });
        }
        let _slot = self.turns.drain_request().await;
        let answer = self
            .cluster
            .delete_pod(&pod.namespace, &pod.name, pod.uid.as_ref(), 0)
            .await;
        // 404: gone meanwhile; 409: the precondition failed, so this pod is gone and another took
        // its name.
        match answer {
            Ok(()) => {}
            Err(e) if e.is_not_found() || e.is_conflict() => {}
            Err(e) => {
                let error = e.to_string();
                return Err(EvictError::ForceDeleteFailed { pod: id, error });
            }
        }
        let node = pod.node.as_deref();
        let o = PodOccurrence::ForceDeleted;
        self.record.pod(&id, node, &o, EvictionFor::Drain).await;
        Ok(())
    }
}
