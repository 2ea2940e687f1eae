//! The conditions the drainer writes for what a node's pods say of it (`decide::symptoms`), with
//! their reasons and messages: names the decision, the Events and the metrics share. Pure.

/// The conditions the drainer writes for these symptoms.
pub(crate) const PODS_NOT_STARTING: &str = "PodsNotStarting";
pub(crate) const PODS_NOT_TERMINATING: &str = "PodsNotTerminating";

/// Each condition, its reason when True, and its reason and message when False.
pub(crate) const CONDITIONS: [(&str, &str, &str, &str); 2] = [
    (
        PODS_NOT_STARTING,
        "PodsWaitingToStart",
        "PodsStart",
        "pods bound to this node start",
    ),
    (
        PODS_NOT_TERMINATING,
        "PodsStuckTerminating",
        "PodsTerminate",
        "pods deleted on this node go",
    ),
];
