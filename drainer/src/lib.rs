//! The nodemedic drainer: cordons and drains nodes whose conditions say they are broken, and
//! uncordons them when they recover. Imports point one way, down the data path:
//!
//! ```text
//!  model      the vocabulary every layer shares (pure): node and pod views, the drain record and its
//!             transitions, occurrences and Event reasons, keys, the Cluster seam (a trait)
//!  config     every setting, raw -> validated -> frozen (pure)
//!  decide     the decisions (pure): (nodes, pods, settings, now) -> a typed decision per node;
//!             the fleet's incremental state; the safety gates, one module each
//!  observe    the caches the watches fill (I/O)
//!  record     logs, counts, notifies and writes the Event of each occurrence (I/O)
//!  act        executes effects against the Cluster behind the leadership gate (I/O)
//!  controller the loop: caches -> decide -> act, and a drain's end back to decide (I/O)
//!  run        the wiring of `drainer run`; cli: the command lines; simulate: the controller over a
//!             cluster in memory; plan, live: the decisions offline and read-only
//!  guard      the Kosmos eviction guard webhook; leader the Lease; notify, metrics: outputs
//! ```
//! All state lives in the cluster (the `nodemedic.io/drain` annotation on each node we touched), so a
//! new leader continues where the old one stopped.
#![forbid(unsafe_code)]

pub mod act;
pub mod cli;
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
