//! The nodemedic drainer: cordons and drains nodes whose conditions say they are broken.
//!
//! ```text
//!  observe (observe.rs: watchers into compact node views (view.rs) and pod infos, marking what changed)
//!    -> decide (decide/: pure, nodes + pods + config + now -> a typed decision per node; fleet.rs:
//!       the incremental state and running totals; record.rs: the record's own transitions)
//!    -> act (act.rs: cordon, evict, uncordon; the one leadership gate before every write)
//!    -> record (the nodemedic.io/drain annotation, DrainScheduled, Events, metrics)
//!  controller.rs runs the loop; run.rs wires it all; leader.rs holds the Lease; guard/ is the webhook.
//! ```
//! All state lives in the cluster (the `nodemedic.io/drain` annotation on each node we touched), so a
//! new leader continues where the old one stopped. `drainer plan` runs `decide` offline.
#![forbid(unsafe_code)]

pub mod act;
pub mod config;
pub mod controller;
pub mod decide;
pub mod error;
pub mod guard;
pub mod leader;
pub mod live;
pub mod metrics;
pub mod model;
pub mod notify;
pub mod observe;
pub mod plan;
pub mod record;
pub mod run;
pub mod simulate;
