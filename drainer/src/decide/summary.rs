//! What the drainer is set to do, said once when its caches have synced and again after each
//! reload: the conditions it watches, its selector and how many nodes that selects, with warnings
//! for the silent mistakes (issue 42): a watched condition type no node reports when one with a
//! close name is reported (`kerneldeadlock` for `KernelDeadlock`), a selector that selects nothing,
//! and a CEL selector that fails on nodes for lack of a key. Pure.

use std::collections::{BTreeMap, BTreeSet};

use crate::config::Config;
use crate::model::node::NodeView;

/// The settings as they meet the cluster.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Summary {
    /// The watched conditions as given (`KernelDeadlock=True,10m`).
    pub(crate) conditions: Vec<String>,
    /// The selector as its flag gives it.
    pub(crate) selector: String,
    pub(crate) selected: usize,
    pub(crate) nodes: usize,
    pub(crate) warnings: Vec<Warning>,
}

/// A setting that probably does not do what was meant.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum Warning {
    #[error(
        "no node reports a condition of type {watched:?}, but nodes report {close:?}: condition types are case-sensitive (a typo watches nothing)"
    )]
    UnseenCondition { watched: String, close: String },
    #[error(
        "no node reports {watched:?}: kubelets have not reported it since Kubernetes 1.13 and the type is gone since 1.16 (draino's examples still name it); watch DiskPressure instead"
    )]
    ObsoleteCondition { watched: String },
    #[error("the selector ({selector}) selects none of the {nodes} nodes: nothing will be drained")]
    SelectsNothing { selector: String, nodes: usize },
    #[error(
        "the selector reads {key:?}, which {count} of {nodes} nodes do not have (e.g. {example}): they are not selected; say so in the expression (`'{key}' in metadata.labels && ...`) if that is meant"
    )]
    MissingKey {
        key: String,
        count: usize,
        nodes: usize,
        example: String,
    },
}

/// Condition types no kubelet reports any more (`OutOfDisk`: not since Kubernetes 1.13), which
/// draino's example configurations still watch.
const OBSOLETE: [&str; 1] = ["OutOfDisk"];

/// Two condition types a typo apart: equal but for case, or at most two edits apart (and long
/// enough that two edits are a typo, not another word).
fn close(a: &str, b: &str) -> bool {
    a != b
        && (a.eq_ignore_ascii_case(b)
            || (a.len().min(b.len()) >= 8 && strsim::levenshtein(a, b) <= 2))
}

/// The summary of `cfg` over `nodes` (each with whether it is selected).
pub(crate) fn summarize<'a>(
    cfg: &Config,
    nodes: impl IntoIterator<Item = (&'a NodeView, bool)>,
) -> Summary {
    let (mut total, mut selected) = (0, 0);
    let mut reported: BTreeSet<&str> = BTreeSet::new();
    // Missing key -> (nodes without it, the first such node).
    let mut missing: BTreeMap<String, (usize, &str)> = BTreeMap::new();
    for (view, is_selected) in nodes {
        total += 1;
        selected += usize::from(is_selected);
        reported.extend(view.conditions.iter().map(|c| &*c.type_));
        if !is_selected && let Some(key) = cfg.selector.missing_key(view) {
            let e = missing.entry(key).or_insert((0, &view.name));
            e.0 += 1;
        }
    }
    let mut warnings = Vec::new();
    let watched: BTreeSet<&str> = cfg.conditions.iter().map(|c| c.type_.as_str()).collect();
    for w in watched {
        if reported.contains(w) {
            continue;
        }
        if let Some(c) = reported.iter().find(|r| close(w, r)) {
            warnings.push(Warning::UnseenCondition {
                watched: w.to_string(),
                close: c.to_string(),
            });
        } else if OBSOLETE.contains(&w) {
            let watched = w.to_string();
            warnings.push(Warning::ObsoleteCondition { watched });
        }
    }
    if total > 0 && selected == 0 {
        warnings.push(Warning::SelectsNothing {
            selector: cfg.selector.describe(),
            nodes: total,
        });
    }
    for (key, (count, example)) in missing {
        warnings.push(Warning::MissingKey {
            key,
            count,
            nodes: total,
            example: example.to_string(),
        });
    }
    Summary {
        conditions: cfg.conditions.iter().map(|c| c.to_string()).collect(),
        selector: cfg.selector.describe(),
        selected,
        nodes: total,
        warnings,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::select::Selector;
    use crate::model::node::Condition;
    use nodemedic_common::status::Status;

    fn node(name: &str, labels: &[(&str, &str)], conditions: &[&str]) -> NodeView {
        NodeView {
            name: name.into(),
            labels: labels.iter().copied().collect(),
            conditions: conditions
                .iter()
                .map(|t| Condition {
                    type_: (*t).into(),
                    status: Status::False,
                    reason: None,
                    since: Default::default(),
                    heartbeat: 0,
                })
                .collect(),
            ..NodeView::default()
        }
    }

    fn cfg(conditions: &[&str], selector: Selector) -> Config {
        Config {
            conditions: conditions.iter().map(|c| c.parse().unwrap()).collect(),
            selector,
            ..Default::default()
        }
    }

    fn summary(cfg: &Config, nodes: &[NodeView]) -> Summary {
        summarize(
            cfg,
            nodes
                .iter()
                .map(|n| (n, cfg.selector.matches(n).unwrap_or(false))),
        )
    }

    #[test]
    fn a_case_typo_in_a_watched_condition_is_named_with_the_type_nodes_report() {
        let nodes = [
            node("a", &[], &["Ready", "KernelDeadlock"]),
            node("b", &[], &["Ready"]),
        ];
        let c = cfg(&["kerneldeadlock=True", "Ready=Unknown,5m"], Selector::All);
        let s = summary(&c, &nodes);
        assert_eq!(
            s.warnings,
            vec![Warning::UnseenCondition {
                watched: "kerneldeadlock".into(),
                close: "KernelDeadlock".into()
            }]
        );
        assert_eq!((s.selected, s.nodes), (2, 2));
        let said = s.warnings[0].to_string();
        assert!(said.contains("case-sensitive"), "{said}");
        // Two letters swapped is a typo too; a type nobody reports and nothing resembles is not
        // warned about (a problem that has not happened yet is normal).
        let c = cfg(&["KernelDaedlock=True", "GPUMissing=True"], Selector::All);
        let s = summary(&c, &nodes);
        assert_eq!(s.warnings.len(), 1, "{:?}", s.warnings);
        assert!(
            matches!(&s.warnings[0], Warning::UnseenCondition { close, .. } if close == "KernelDeadlock")
        );
        // Correct spelling: no warning.
        let c = cfg(&["KernelDeadlock=True"], Selector::All);
        assert!(summary(&c, &nodes).warnings.is_empty());
    }

    #[test]
    fn draino_s_obsolete_out_of_disk_is_named_unless_a_node_still_reports_it() {
        let nodes = [node("a", &[], &["Ready", "DiskPressure"])];
        let c = cfg(&["OutOfDisk=True", "KernelDeadlock=True"], Selector::All);
        let s = summary(&c, &nodes);
        assert_eq!(
            s.warnings,
            vec![Warning::ObsoleteCondition {
                watched: "OutOfDisk".into()
            }]
        );
        assert!(
            s.warnings[0]
                .to_string()
                .contains("watch DiskPressure instead")
        );
        let old = [node("a", &[], &["Ready", "OutOfDisk"])];
        assert!(summary(&c, &old).warnings.is_empty());
    }

    #[test]
    fn a_selector_that_selects_nothing_and_keys_nodes_lack_are_said() {
        let nodes = [
            node("a", &[("draino", "node")], &[]),
            node("b", &[("pool", "x")], &[]),
            node("c", &[], &[]),
        ];
        let c = cfg(
            &["KernelDeadlock=True"],
            Selector::labels("dranio=node").unwrap(),
        );
        let s = summary(&c, &nodes);
        assert_eq!((s.selected, s.nodes), (0, 3));
        assert!(
            matches!(&s.warnings[..], [Warning::SelectsNothing { nodes: 3, selector }] if selector.contains("dranio=node")),
            "{:?}",
            s.warnings
        );
        let c = cfg(
            &["KernelDeadlock=True"],
            Selector::cel("metadata.labels['draino'] == 'node'").unwrap(),
        );
        let s = summary(&c, &nodes);
        assert_eq!(s.selected, 1);
        assert_eq!(
            s.warnings,
            vec![Warning::MissingKey {
                key: "draino".into(),
                count: 2,
                nodes: 3,
                example: "b".into()
            }]
        );
        // Said in the expression: no key missing, no warning.
        let c = cfg(
            &["KernelDeadlock=True"],
            Selector::cel("'draino' in metadata.labels && metadata.labels['draino'] == 'node'")
                .unwrap(),
        );
        assert!(summary(&c, &nodes).warnings.is_empty());
        // No nodes yet: nothing to say about the selector.
        assert!(summary(&c, &[]).warnings.is_empty());
    }
}
