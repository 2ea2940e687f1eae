//! What more than one bench sets up the same way.

use std::sync::Arc;

use k8s_openapi::jiff::Timestamp;
use nodemedic_drainer::config::Config;
use nodemedic_drainer::config::select::Selector;
use nodemedic_drainer::decide::fleet::Fleet;
use nodemedic_drainer::observe::Observed;

/// The controller's fleet after its first round over the caches, as a new leader has it: every
/// node observed with its pods and decided once (`KernelDeadlock=True`, selected by `selector`).
pub fn decided_fleet(observed: &Observed, selector: &str, now: Timestamp) -> Fleet {
    let cfg = Config {
        conditions: vec!["KernelDeadlock=True".parse().expect("a condition")],
        selector: Selector::cel(selector).expect("the selector"),
        ..Default::default()
    };
    let mut fleet = Fleet::new(Arc::new(cfg));
    for v in observed.nodes() {
        let name = v.name.clone();
        fleet.observe(v, now);
        fleet.pods(&name, observed.pods_on(&name));
    }
    fleet.touch_all();
    let decided = fleet.round(now);
    assert_eq!(
        decided.len(),
        observed.nodes().len(),
        "every node is decided at first"
    );
    for (d, _) in &decided {
        fleet.note(&d.node, d.why.kind());
    }
    fleet
}
