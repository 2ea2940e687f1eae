//! What every decision of one call shares besides its node (pure data): the gates, the
//! configuration and the time.

use k8s_openapi::jiff::Timestamp;

use super::gates::Gates;
use crate::config::Config;

/// What every decision of one call reads besides its node: the safety gates, the configuration
/// and the time. One value, so a decision function takes the node (candidate, record, problem),
/// this and the budgets.
#[derive(Clone, Copy)]
pub(crate) struct Context<'a> {
    pub(crate) gates: &'a Gates,
    pub(crate) cfg: &'a Config,
    pub(crate) now: Timestamp,
}
