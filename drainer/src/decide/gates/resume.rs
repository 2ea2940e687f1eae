//! Steps under way that a node's detector carries out (a reboot, a restart), pure. The request a
//! record of ours stands for is stored state, so it stands only while the step would pass now what
//! it passed when it started (issue 76, principle 1): no pause, no outage of its domain, the breaker
//! closed, for a reboot the drain windows open, and a place within its domain's slow start, where
//! the steps that started first keep theirs (a new leader whose memory lost the widths starts the
//! domain at one again). While anything holds it, its request is withdrawn and its deadline does
//! not end it: once nothing does, a step withheld past its deadline starts again, through every
//! check a new step meets. What holds a step is asked of [`super::Gates::resume_hold`].

use std::collections::{BTreeMap, BTreeSet};

use crate::model::intern::ArcStr;

/// The ladder's steps under way and the requests withheld, as the fleet keeps them (none in a
/// snapshot, which previews one moment).
#[derive(Debug, Clone, Default)]
pub(crate) struct UnderWay {
    /// Each failure domain's nodes with a step under way ("" for none), in the order their steps
    /// started.
    pub(crate) order: BTreeMap<String, Vec<ArcStr>>,
    /// The nodes whose request was withheld at their last decision.
    pub(crate) withheld: BTreeSet<ArcStr>,
}
