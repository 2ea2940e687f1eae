//! The nodemedic detector: a node-local agent that turns log lines into NodeConditions and Events.
//!
//! ```text
//!  source::spawn -> {kmsg, journal, file, exec}  (I/O: a thread or task per input)
//!        | SourceEvent (lines, check results, malformed, overrun)
//!        v
//!  monitor (one task per rule file) -> problem::MonitorState::apply (pure: parse'd line -> matcher -> state)
//!        | Outcome (conditions, Events, progress)
//!        v
//!  report::writer -> report::{sync, aggregate} (pure) -> report::reporter (seam) -> report::kube (I/O)
//! ```
//! `config` (pure but for `load`) builds the rule set every layer reads; `supervise` starts the
//! monitors and applies reloads; `run` wires it all. `check` reads a file once (`source::once`) into
//! the same `SourceEvent`s and feeds the same `MonitorState::apply`, with no cluster.
#![forbid(unsafe_code)]

pub mod check;
pub mod checkpoint;
pub mod cli;
pub mod config;
pub mod error;
pub mod evidence;
pub mod matcher;
pub mod metrics;
pub mod monitor;
pub mod npd_flags;
pub mod occurrence;
pub mod parse;
pub mod probe;
pub mod problem;
pub mod reboot;
pub(crate) mod replaced;
pub mod report;
pub mod restart;
pub mod run;
pub mod sample;
pub mod source;
pub mod stats;
pub mod supervise;
