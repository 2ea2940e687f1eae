//! The nodemedic detector: a node-local agent that turns log lines into NodeConditions and Events.
//!
//! ```text
//!  source/{kmsg,journal,file} -> parse -> matcher -> problem (state) -> report/{aggregate,kube}
//!         (I/O, checkpoint)       (pure)   (pure)      (pure)            (pure core | I/O shell)
//! ```
//! `check` runs parse -> matcher -> problem over a file with no cluster; `run` wires the sources, the
//! problem state of each monitor and the reporter together, with hot reload of the rule files.
#![forbid(unsafe_code)]

pub mod check;
pub mod config;
pub mod matcher;
pub mod parse;
pub mod problem;
