//! The one shape of a fleet safety gate (pure): asked, for one candidate at one round, whether it
//! holds it back.

use crate::decide::candidate::Candidate;
use crate::decide::decision::Why;

/// One safety gate at one round.
pub(crate) trait Gate {
    /// Whether it holds `c` back (a new cordon, a drain start, a deletion), and why; None lets it
    /// through.
    fn hold(&self, c: &Candidate) -> Option<Why>;
}
