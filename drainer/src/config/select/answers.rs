//! A CEL selector's answers by the values it reads.
//!
//! An answer is a function of the parts of the node [`super::fields::variables`] builds and nothing
//! else (CEL has no clock, no I/O), so nodes that agree on the labels and annotations a selector
//! names get the same answer. They mostly do: `metadata.labels['pool'] == 'gpu'` sees a handful of
//! pools over thousands of nodes. A label change the selector reads was one CEL evaluation, about
//! 40 us of the drainer's CPU on a 2,000-node bench (issue 39's profile: the context, the variables,
//! the names resolved); here it is a few comparisons.
//!
//! Kept only where the values are few and cheap to compare: a selector that reads only named keys
//! of labels or annotations and `spec.unschedulable`; not the node's name (unique), its conditions
//! (their times are per node) or every label. At most [`MAX`] answers: past that the selector is
//! evaluated as before (the first ones are kept; no churn). Errors are never kept (the fleet says
//! each). Pure apart from its lock.

use std::sync::Mutex;

use super::fields::{Fields, Keys};
use crate::model::intern::ArcStr;
use crate::model::node::NodeView;

/// Answers kept per selector: a fleet's distinct combinations of what a selector reads are few;
/// a selector that reads something unique per node fills this once and is evaluated as before.
pub(crate) const MAX: usize = 64;

/// One combination of the values read, and the answer for it.
struct Answer {
    values: Box<[Option<ArcStr>]>,
    unschedulable: bool,
    selected: bool,
}

impl Answer {
    /// Is this the answer for what `node` shows a selector reading `reads`?
    fn is_for(&self, reads: &Fields, node: &NodeView) -> bool {
        self.unschedulable == (reads.unschedulable && node.unschedulable)
            && self
                .values
                .iter()
                .map(|v| v.as_deref())
                .eq(values(reads, node))
    }
}

/// The answers of one selector (built with it: a reload starts afresh).
#[derive(Default)]
pub struct Answers {
    kept: Mutex<Vec<Answer>>,
}

/// Whether a selector reading `reads` may be answered by what it read: only named keys (or none),
/// and neither the name nor the conditions.
pub(crate) fn kept_for(reads: &Fields) -> bool {
    let named = |k: &Keys| !matches!(k, Keys::All);
    !reads.name && !reads.conditions && named(&reads.labels) && named(&reads.annotations)
}

/// The values of `node` a selector reading `reads` sees, in a fixed order: each named label, then
/// each named annotation (None: absent).
fn values<'a>(reads: &'a Fields, node: &'a NodeView) -> impl Iterator<Item = Option<&'a str>> {
    let keys = |k: &'a Keys| match k {
        Keys::Some(keys) => keys.as_slice(),
        Keys::None | Keys::All => &[],
    };
    let labels = keys(&reads.labels).iter().map(|k| node.labels.get(k));
    let annotations = keys(&reads.annotations)
        .iter()
        .map(|k| node.annotations.get(k));
    labels.chain(annotations)
}

impl Answers {
    /// The answer kept for what `node` shows a selector reading `reads`, if one is.
    pub(crate) fn get(&self, reads: &Fields, node: &NodeView) -> Option<bool> {
        let kept = self.kept.lock().unwrap_or_else(|p| p.into_inner());
        kept.iter()
            .find(|a| a.is_for(reads, node))
            .map(|a| a.selected)
    }

    /// Keep `selected` as the answer for what `node` shows (room allowing).
    pub(crate) fn put(&self, reads: &Fields, node: &NodeView, selected: bool) {
        let mut kept = self.kept.lock().unwrap_or_else(|p| p.into_inner());
        // Two evaluations of the same values can race (the watch and the fleet): kept once.
        if kept.len() >= MAX || kept.iter().any(|a| a.is_for(reads, node)) {
            return;
        }
        kept.push(Answer {
            values: values(reads, node).map(|v| v.map(ArcStr::from)).collect(),
            unschedulable: reads.unschedulable && node.unschedulable,
            selected,
        });
    }

    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.kept.lock().unwrap().len()
    }
}
