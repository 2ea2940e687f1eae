//! The drain decision, pure: (nodes, pods, settings, now) -> one typed decision per node.
//!
//! ```text
//!  problem   which configured conditions a node has, held long enough or not
//!  facts     what the safety gates found (breaker trip, outage, pause, flapping), as values
//!  decision  Action, Why (with the facts), Effect (what to write), NodeDecision
//!  candidate one node as a round sees it (view, selection, record, pods, domain, flapping)
//!  gates/    the fleet safety gates, one module each behind one shape (`Gate`)
//!  budget    the cordon and drain budgets a round counts against
//!  node      one node's decision        pods   which pods a drain evicts
//!  round     a round: all nodes (`drainer plan`) or the few that changed (the controller)
//!  fleet     the controller's incremental state: views, running totals, gate state, wake-ups
//!  cause     common cause: what nodes gaining one condition together share
//!  stale     stale pod readiness after a node flap
//!  watchdog  whether a node's detector fell silent
//!  schedule  when to write the Events of waits and stale pods, and retry their evictions
//! ```
//!
//! This module only names its parts; everything is in them.

pub mod budget;
pub mod candidate;
pub mod cause;
pub mod decision;
pub mod facts;
pub mod fleet;
pub mod gates;
pub mod node;
pub mod pods;
pub mod problem;
pub mod round;
pub mod schedule;
pub mod stale;
pub mod summary;
pub mod watchdog;

pub(crate) use budget::Totals;
pub(crate) use candidate::Candidate;
pub(crate) use decision::{Action, DrainJob, Effect, NodeDecision, ToEvict, Why};
pub(crate) use pods::{PodAction, PodPlan};
pub use round::{decide_nodes, decide_snapshot, decide_some, decide_views};

#[cfg(test)]
mod policy_tests;
#[cfg(test)]
mod remedy_tests;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod watchdog_tests;
