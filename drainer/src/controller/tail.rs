//! A round's tail, I/O: what a round writes after its holds (the DrainScheduled conditions of its
//! cordons, the budget waits' Events), written while the next rounds are decided and write. In a
//! burst of 500 bad nodes the tail of the round that cordoned most of them took a second, and the
//! nodes whose conditions came in meanwhile waited for it. A node's writes stay in order: a later
//! round's write or drain for a node of the tail waits for the tail ([`Tail::wait_for`]).

use std::collections::HashSet;

use futures::StreamExt;
use futures::future::{BoxFuture, FutureExt, Shared};
use tokio::sync::mpsc;

use crate::act::{Executor, FollowUp};
use crate::model::cluster::Cluster;
use crate::model::intern::ArcStr;
use crate::record::Recorder;
use nodemedic_common::events::NodeEvent;

/// A budget wait's Event to write: the node, the Event to update (None: a new one), the Event.
pub(super) type WaitNote = (ArcStr, Option<String>, NodeEvent);

/// A budget wait's Event as written: its node and the Event's name (None: the write failed).
pub(super) type Noted = (ArcStr, Option<String>);

/// Done when every write of the tail (and of the tails before it) is.
pub(super) type Written = Shared<BoxFuture<'static, ()>>;

/// The tails still being written, and where their budget notes' Event names come back.
pub(super) struct Tails {
    pub(super) current: Option<Tail>,
    pub(super) noted: (mpsc::UnboundedSender<Noted>, mpsc::UnboundedReceiver<Noted>),
}

impl Default for Tails {
    fn default() -> Tails {
        Tails {
            current: None,
            noted: mpsc::unbounded_channel(),
        }
    }
}

impl Tails {
    /// What a write for `node` waits for first, if a tail has one for it.
    pub(super) fn wait_for(&self, node: &str) -> Option<Written> {
        self.current.as_ref().and_then(|t| t.wait_for(node))
    }
}

/// The tails being written, as one: each waits for the one before it.
pub(super) struct Tail {
    /// Nodes with a write in it.
    nodes: HashSet<ArcStr>,
    done: Written,
}

impl Tail {
    /// Start writing `then` and `notes` once `before` (a tail still being written) is done; the
    /// notes' Event names are sent to `noted`. None when there is nothing to write or wait for.
    /// The writers are cloned only when there is something to write: most rounds (a node decided
    /// again, nothing to write) have nothing, and each clone of them is a few dozen small
    /// allocations (the API handles' paths, the notifier's settings) freed again at once.
    pub(super) fn start<C: Cluster>(
        before: Option<Tail>,
        exec: &Executor<C>,
        record: &Recorder<C>,
        then: Vec<(ArcStr, FollowUp)>,
        notes: Vec<WaitNote>,
        noted: &mpsc::UnboundedSender<Noted>,
        at_once: usize,
    ) -> Option<Tail> {
        let before = before.filter(|t| !t.is_done());
        if then.is_empty() && notes.is_empty() {
            return before;
        }
        let (exec, record, noted) = (exec.clone(), record.clone(), noted.clone());
        let mut nodes = before.as_ref().map(|t| t.nodes.clone()).unwrap_or_default();
        nodes.extend(then.iter().map(|(n, _)| n.clone()));
        nodes.extend(notes.iter().map(|(n, _, _)| n.clone()));
        let after = before.map(|t| t.done);
        let task = tokio::spawn(async move {
            if let Some(before) = after {
                before.await;
            }
            write(&exec, &record, then, notes, &noted, at_once).await;
        });
        let done = task.map(|_| ()).boxed().shared();
        Some(Tail { nodes, done })
    }

    /// What a write for `node` waits for first, if the tail has one for it.
    pub(super) fn wait_for(&self, node: &str) -> Option<Written> {
        (self.nodes.contains(node) && !self.is_done()).then(|| self.done.clone())
    }

    pub(super) fn is_done(&self) -> bool {
        self.done.peek().is_some()
    }

    /// Wait until it is written.
    pub(super) async fn finish(self) {
        self.done.await
    }
}

/// The DrainScheduled conditions, then the budget waits' Events, `at_once` at a time (as many as
/// a round's writes).
async fn write<C: Cluster>(
    exec: &Executor<C>,
    record: &Recorder<C>,
    then: Vec<(ArcStr, FollowUp)>,
    notes: Vec<WaitNote>,
    noted: &mpsc::UnboundedSender<Noted>,
    at_once: usize,
) {
    futures::stream::iter(then)
        .for_each_concurrent(at_once, |(node, f)| async move {
            exec.follow_up(&node, f).await
        })
        .await;
    futures::stream::iter(notes)
        .for_each_concurrent(at_once, |(node, existing, ev)| async move {
            let name = record.episode(&node, existing, &ev).await;
            let _ = noted.send((node, name));
        })
        .await;
}
