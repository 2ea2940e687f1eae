//! A selector's answer kept with the node's view it was given for, pure data: so that one view is evaluated
//! once: the watch asks whether a label change moved the selection (the old view and the new), and
//! the fleet takes the new view's selection at the next round; without the memo a quiet label
//! change evaluated the CEL expression three times (issue 39).
//!
//! A view is not changed once it is in the cache (it is shared behind an `Arc`); a clone starts
//! without an answer, so a view made by changing a copy is evaluated anew. The answer is tied to
//! the selector that gave it (each selector built from a configuration has its own number): after
//! a reload the new selector's answers are its own.

use std::sync::atomic::{AtomicU64, Ordering};

/// The answer of selector number `id` for this view, if it was asked ([`crate::config::select`]).
/// Not part of the view's value: views compare equal whatever their memos hold.
#[derive(Default)]
pub struct Selection(AtomicU64);

impl Selection {
    /// What selector `id` answered for this view, if it did.
    pub(crate) fn get(&self, id: u32) -> Option<bool> {
        let v = self.0.load(Ordering::Relaxed);
        (v & 1 == 1 && v >> 2 == u64::from(id)).then_some(v & 2 != 0)
    }

    /// Selector `id` answered `selected` for this view (what another selector answered is
    /// forgotten).
    pub(crate) fn set(&self, id: u32, selected: bool) {
        let v = (u64::from(id) << 2) | (u64::from(selected) << 1) | 1;
        self.0.store(v, Ordering::Relaxed);
    }
}

impl Clone for Selection {
    /// A copy of a view may be changed: it starts without an answer.
    fn clone(&self) -> Selection {
        Selection::default()
    }
}

impl PartialEq for Selection {
    fn eq(&self, _: &Selection) -> bool {
        true
    }
}

impl Eq for Selection {}

impl std::fmt::Debug for Selection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Selection")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_answer_is_the_selectors_that_gave_it_and_a_copy_starts_without() {
        let s = Selection::default();
        assert_eq!(s.get(1), None, "nothing asked yet");
        s.set(1, false);
        assert_eq!(s.get(1), Some(false));
        assert_eq!(
            s.get(2),
            None,
            "another selector's answer is not this one's"
        );
        s.set(2, true);
        assert_eq!((s.get(2), s.get(1)), (Some(true), None));
        s.set(u32::MAX, true);
        assert_eq!(
            s.get(u32::MAX),
            Some(true),
            "the largest number is kept whole"
        );
        assert_eq!(
            s.clone().get(u32::MAX),
            None,
            "a copy may be changed: no answer"
        );
        assert_eq!(s, Selection::default(), "not part of the view's value");
    }
}
