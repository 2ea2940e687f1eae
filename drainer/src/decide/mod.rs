//! The drain decision, pure: (nodes, pods, settings, now) -> one typed decision per node.
//!
//! ```text
//!  problem   which configured conditions a node has, held long enough or not
//!  facts     what the safety gates found (breaker trip, outage, pause, flapping), as values
//!  decision  Action, Why (with the facts), Effect (what to write), NodeDecision
//!  why_words the words people read for each Why
//!  candidate one node as a round sees it (view, selection, record, pods, domain, flapping)
//!  context   what every decision of a call shares: the gates, the configuration, the time
//!  gates/    the fleet safety gates, one module each behind one shape (`Gate`)
//!  counts        the cordon and drain budgets a round counts against
//!  one_node      one node's decision     evictions   which pods a drain evicts
//!  batch         decisions for many nodes: all (`drainer plan`) or the few that changed (the controller)
//!  fleet         the controller's incremental state: views, running totals, gate state, wake-ups
//!  common_cause  what nodes gaining one condition together share
//!  stale         stale pod readiness after a node flap
//!  silence       whether a node's detector fell silent
//!  symptoms      what pods waiting to start or to go say about their node
//!  schedule  when to write the Events of waits and stale pods, and retry their evictions
//! ```
//!
//! This module only names its parts; everything is in them.

pub mod batch;
pub mod candidate;
pub mod common_cause;
mod context;
pub mod counts;
pub mod decision;
pub mod evictions;
pub mod facts;
pub mod fleet;
pub mod gates;
pub mod ladder;
pub mod one_node;
pub mod problem;
pub mod schedule;
pub mod silence;
pub mod stale;
pub mod summary;
pub mod symptoms;
mod why_words;

pub use batch::{decide_nodes, decide_snapshot, decide_some, decide_views};
pub(crate) use candidate::Candidate;
pub(crate) use counts::Totals;
pub(crate) use decision::{Action, DrainJob, Effect, NodeDecision, ToEvict, Why};
pub(crate) use evictions::{PodAction, PodPlan};

#[cfg(test)]
mod ladder_steps_tests;
#[cfg(test)]
mod ladder_tests;
#[cfg(test)]
mod policy_tests;
#[cfg(test)]
mod refusals_tests;
#[cfg(test)]
mod remedy_tests;
#[cfg(test)]
mod resume_tests;
#[cfg(test)]
mod symptoms_owner_tests;
#[cfg(test)]
mod symptoms_tests;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod watchdog_tests;
