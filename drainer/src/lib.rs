//! The nodemedic drainer: cordons and drains nodes whose conditions say they are broken.
//!
//! ```text
//!  observe (reflectors: Nodes, Pods) -> decide (pure: snapshot + config + now -> plan)
//!      -> act (cordon, evict, uncordon; only while leader) -> record (annotation, DrainScheduled, Events, metrics)
//! ```
//! All state lives in the cluster (the `nodemedic.io/drain` annotation on each node we touched), so a
//! new leader continues where the old one stopped. `drainer plan` runs `decide` offline.
#![forbid(unsafe_code)]

pub mod act;
pub mod config;
pub mod decide;
pub mod guard;
pub mod leader;
pub mod metrics;
pub mod plan;
pub mod policy;
pub mod record;
pub mod run;
pub mod select;
pub mod spec;
