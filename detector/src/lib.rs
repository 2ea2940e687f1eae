//! The nodemedic detector: a node-local agent that turns log lines into NodeConditions and Events.
//!
//! ```text
//!  source/{kmsg,journal,file} -> parse -> matcher -> problem (state) -> report/{aggregate,sync} -> report/kube
//!  source/exec (checks) ----------------------------> problem/exec
//!     (I/O threads/tasks)        (pure)   (pure)       (pure)               (pure)                (I/O)
//!             \____________ monitor (one per rule file) ____________/        \__ report/writer: the writer task, checkpoint
//!  supervise: the monitors, started and hot-reloaded;  run: the wiring
//! ```
//! `check` runs parse -> matcher -> problem over a file with no cluster; `run` wires the sources, the
//! problem state of each monitor and the reporter together, with hot reload of the rule files.
#![forbid(unsafe_code)]

pub mod check;
pub mod checkpoint;
pub mod config;
pub mod error;
pub mod matcher;
pub mod metrics;
pub mod monitor;
pub mod npd_flags;
pub mod occurrence;
pub mod parse;
pub mod probe;
pub mod problem;
pub mod report;
pub mod run;
pub mod sample;
pub mod source;
pub mod supervise;
