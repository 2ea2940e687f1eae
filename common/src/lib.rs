//! What the nodemedic detector and drainer share.
//!
//! ```text
//!   keys        well-known labels, annotations, condition types and reasons
//!   client      a kube::Client from in-cluster config or KUBECONFIG
//!   conditions  node-condition patches that touch only the conditions we own
//!   events      core/v1 Events on a Node, aggregated the way `kubectl describe` shows them
//!   filewatch   wake on content changes of config files, not on reads (rules, certificates)
//!   health      liveness beats: /healthz fails when a registered loop stops beating
//!   serve       one HTTP listener: /metrics /healthz /readyz (+ extra routes)
//!   telemetry   tracing subscriber, text or JSON
//! ```
#![forbid(unsafe_code)]

pub mod client;
pub mod conditions;
pub mod events;
pub mod exempt;
pub mod filewatch;
pub mod health;
pub mod keys;
pub mod rbac;
pub mod runtime;
pub mod serve;
pub mod telemetry;
