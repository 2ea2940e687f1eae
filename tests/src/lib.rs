//! Integration-test support for nodemedic.
//!
//! - [`server`]: a Kubernetes API server stand-in on 127.0.0.1 that answers like the real one does in the
//!   exchanges recorded under `shared/reference/apiserver/` (status codes, Status bodies, strategic merge
//!   of conditions by type, watches with resourceVersion and 410 Expired), with fault injection.
//! - [`cluster`]: what a scenario talks to: that server, or a real cluster when `NODEMEDIC_E2E=1` and
//!   `KUBECONFIG` point at one, so the same scenarios can check the fake against reality.

pub mod cluster;
pub mod server;
