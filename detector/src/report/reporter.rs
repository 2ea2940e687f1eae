//! The seam between the report writer and the API server: what a write may do ([`Reporter`]) and how
//! it may fail ([`Error`]). Pure (a trait and an error type).

use std::future::Future;
use std::time::Duration;

use k8s_openapi::jiff::Timestamp;

use super::aggregate::Write;
use super::sync::Plan;

/// Where the writer's writes go: the Node's status and Events.
pub(crate) trait Reporter: Send + Sync + 'static {
    /// One patch of the node's status: the plan's conditions (heartbeat `now`), removals, ownership.
    fn patch(&self, plan: &Plan, now: Timestamp) -> impl Future<Output = Result<(), Error>> + Send;
    /// Create (`w.create`) or update an Event.
    fn write_event(&self, w: &Write) -> impl Future<Output = Result<(), Error>> + Send;
}

#[derive(Debug, thiserror::Error)]
pub(crate) enum Error {
    #[error("{}", nodemedic_common::client::said(.0))]
    Api(#[from] kube::Error),
    #[error("API call timed out after {0:?}")]
    Timeout(Duration),
}

impl Error {
    /// 404 from the API server.
    pub(crate) fn is_not_found(&self) -> bool {
        matches!(self, Error::Api(kube::Error::Api(s)) if s.code == 404)
    }

    /// The API server answered and refused the write for what it is (a 4xx other than 409 and
    /// 429: RBAC, quota, a webhook, an invalid object): retrying the same write will not help.
    /// Timeouts, connection errors, 5xx and 429 are the server's state, not the write's.
    pub(crate) fn is_refusal(&self) -> bool {
        matches!(self, Error::Api(kube::Error::Api(s)) if (400..500).contains(&s.code) && s.code != 409 && s.code != 429)
    }
}
