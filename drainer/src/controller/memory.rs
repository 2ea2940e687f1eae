//! The record memory's round trip (`decide::fleet::seen`, kept by `act::recall` in ConfigMaps of
//! its own): a new leadership asks for it and decides nothing until the answer is in, so a record
//! written back while no replica led is refused from the first round; then each round hands on
//! the shards that changed.
//!
//! An earlier release kept the memory on the Lease (`nodemedic.io/records`): read back once, when
//! the ConfigMaps hold nothing yet, and then removed from the Lease by the next renewal. The shell:
//! channels to `act::recall`, no decisions.

use k8s_openapi::jiff::Timestamp;
use tokio::sync::watch;

use super::Controller;
use crate::act::recall::{Kept, Link, Memory, Recalled};
use crate::decide::fleet::seen::{SHARDS, Seen};
use crate::model::cluster::Cluster;

impl<C: Cluster> Controller<C> {
    /// Keep the record memory in its ConfigMaps through `link`; `lease_out` removes what an
    /// earlier release kept on the Lease.
    pub(crate) fn with_record_memory(
        mut self,
        link: Link,
        lease_out: watch::Sender<Option<Option<String>>>,
    ) -> Controller<C> {
        self.memory = Some(Memory::new(link, lease_out));
        self
    }

    /// A new leadership asks for the memory, and decides nothing until it is in.
    pub(super) fn ask_memory(&mut self) {
        if let Some(m) = &mut self.memory {
            m.ask += 1;
            m.waiting = Some(m.ask);
            m.link.asks.send_replace(m.ask);
        }
    }

    /// Whether rounds wait for the memory still.
    pub(super) fn waiting_for_memory(&self) -> bool {
        self.memory.as_ref().is_some_and(|m| m.waiting.is_some())
    }

    /// The memory came back: the fleet continues it when it answers the ask this leadership made
    /// (an answer to an earlier one is dropped).
    pub(super) fn memory_answered(&mut self, answer: Recalled) {
        let Some(m) = &mut self.memory else {
            return;
        };
        if Some(answer.ask) != m.waiting {
            return;
        }
        m.waiting = None;
        let mut seen = answer.memory;
        let key = crate::model::keys::RECORDS_ANNOTATION;
        if let Some(raw) = self.lease_annotation(key) {
            if seen == Seen::default() {
                match Seen::from_annotation(&raw) {
                    Ok(old) => {
                        tracing::info!(
                            nodes = old.nodes.len(),
                            "the record memory an earlier release kept on the Lease moves to its ConfigMaps"
                        );
                        seen = old;
                    }
                    Err(e) => {
                        tracing::warn!(error = %e, "the record memory an earlier release kept on the Lease is unreadable: an older record written back before now is taken once")
                    }
                }
            }
            if let Some(m) = &self.memory {
                m.lease_out.send_replace(Some(None));
            }
        }
        tracing::info!(
            nodes = seen.nodes.len(),
            "record memory read back: deciding"
        );
        self.fleet.restore_seen(seen);
    }

    /// Hand on the shards of the memory that changed (none before it is read back).
    pub(super) fn publish_records(&mut self, now: Timestamp) {
        let Some(m) = &self.memory else {
            return;
        };
        if m.waiting.is_some() {
            return;
        }
        let Some((dirty, seen)) = self.fleet.memory_changed(now) else {
            return;
        };
        for shard in (0..SHARDS).filter(|i| dirty & (1 << i) != 0) {
            let text = seen.shard_text(shard).into();
            let _ = m.link.kept.send(Kept {
                ask: m.ask,
                shard,
                text,
            });
        }
    }
}
