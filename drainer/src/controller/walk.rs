//! The watchdog's walk over the selected nodes while it is under way, pure data: the walk gives
//! way to changes and goes on over several rounds (`chores.rs`), so what it has gathered is kept
//! here between them.

use std::sync::Arc;

use k8s_openapi::jiff::Timestamp;

use crate::model::intern::ArcStr;
use crate::model::node::NodeView;

/// Begun `at`, the names `left`, and the latest views gathered so far.
pub(super) struct Walk {
    pub(super) at: Timestamp,
    pub(super) left: Vec<ArcStr>,
    pub(super) latest: Vec<Arc<NodeView>>,
}
