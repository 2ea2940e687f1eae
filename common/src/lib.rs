//! What the nodemedic detector and drainer share.
//!
//! ```text
//!   alloc       freed memory given back to the system after a burst of work
//!   keys        well-known labels, annotations, condition types and reasons
//!   labels      typed metric label values
//!   cli         shell completions and man pages for the binaries
//!   client      a kube::Client from in-cluster config or KUBECONFIG
//!   clock       the time loops read (wall clock, or tokio's pausable clock in tests)
//!   conditions  node-condition patches that touch only the conditions we own
//!   events      core/v1 Events on a Node, aggregated the way `kubectl describe` shows them
//!   evict       the Eviction subresource (hand-built body: kube-core 5 drops the grace period)
//!   exempt      the pods nodemedic never evicts
//!   filewatch   wake on content changes of config files, not on reads (rules, certificates)
//!   health      liveness beats: /healthz fails when a registered loop stops beating
//!   serve       one HTTP listener: /metrics /healthz /readyz (+ extra routes)
//!   status      a condition status: True, False, Unknown
//!   sysclock    the kernel's clock discipline (adjtimex), for the clock probe
//!   privs       children without new privileges, each in a Landlock domain of its own
//!   telemetry   tracing subscriber, text or JSON
//!   time        RFC 3339 times as the API server stores them
//! ```
// Exceptions, each allowed where it is: `alloc::trim`, `privs` (prctl and Landlock before exec),
// `sysclock::read` (adjtimex).
#![deny(unsafe_code)]

pub mod alloc;
pub mod cli;
pub mod client;
pub mod clock;
pub mod conditions;
pub mod events;
pub mod evict;
pub mod exempt;
pub mod filewatch;
pub mod health;
pub mod keys;
pub mod labels;
pub mod lenient;
pub mod privs;
pub mod rbac;
pub mod reboot;
pub mod runtime;
pub mod serve;
pub mod status;
pub mod sysclock;
pub mod telemetry;
pub mod throttle;
pub mod time;
pub mod yaml;
