//! The scenario file's format as people read it, pure: every key of every part, its type, default
//! and meaning, rendered as `docs/reference/simulate-scenario.md`. A test holds it against the
//! parser (each part's keys are exactly those serde accepts) and the committed page against this.

/// One key of a part.
pub(crate) struct Key {
    pub(crate) key: &'static str,
    pub(crate) kind: &'static str,
    pub(crate) default: &'static str,
    pub(crate) meaning: &'static str,
}

/// One part of the file (the top level, a node group, a step ...) and its keys.
pub(crate) struct Part {
    pub(crate) name: &'static str,
    pub(crate) what: &'static str,
    pub(crate) keys: &'static [Key],
}

const fn k(
    key: &'static str,
    kind: &'static str,
    default: &'static str,
    meaning: &'static str,
) -> Key {
    Key {
        key,
        kind,
        default,
        meaning,
    }
}

pub(crate) const PARTS: &[Part] = &[
    Part {
        name: "Scenario",
        what: "The file: a fleet, the drainer's flags, what happens when, and what must hold.",
        keys: &[
            k(
                "description",
                "string",
                "\"\"",
                "What the scenario shows (printed with the report).",
            ),
            k(
                "args",
                "list of strings",
                "[]",
                "The drainer's flags and conditions, as on `drainer run`'s command line (`--config FILE` relative to the scenario's directory).",
            ),
            k(
                "nodes",
                "list of node groups",
                "required",
                "The fleet (see Node group).",
            ),
            k(
                "tick",
                "duration",
                "10s",
                "How often the controller is woken besides the changes (`drainer run --tick`).",
            ),
            k(
                "drainTakes",
                "duration",
                "1m",
                "How long a drain's evictions take.",
            ),
            k(
                "duration",
                "duration",
                "required",
                "How long the simulated time runs.",
            ),
            k(
                "heartbeat",
                "duration",
                "5m",
                "How often the nodes' detectors refresh their conditions.",
            ),
            k(
                "rebootTakes",
                "duration",
                "3m",
                "How long a node takes to come back from a reboot the drainer asked for.",
            ),
            k(
                "steps",
                "list of steps",
                "[]",
                "What happens when (see Step).",
            ),
            k(
                "expect",
                "expectations",
                "none",
                "What must hold; `drainer simulate` exits 1 otherwise (see Expect).",
            ),
        ],
    },
    Part {
        name: "Node group",
        what: "`count` nodes alike.",
        keys: &[
            k("count", "integer", "1", "How many nodes."),
            k(
                "name",
                "string",
                "required",
                "Their names; `{i}` is the index within the group.",
            ),
            k(
                "labels",
                "map",
                "{}",
                "Their labels; values may use `{i}` and `{i%N}`.",
            ),
            k(
                "conditions",
                "list of `Type=Status`",
                "Ready=True",
                "Their conditions at the start.",
            ),
            k(
                "detector",
                "bool",
                "false",
                "A detector runs on them: it owns their conditions but Ready and refreshes them every `heartbeat` until a step stops it.",
            ),
            k(
                "pods",
                "list of pod groups",
                "[]",
                "Pods on each node besides its app pod (see Pod group).",
            ),
            k(
                "nodeInfo",
                "map",
                "{}",
                "`status.nodeInfo` fields (`kernelVersion`, `osImage`, ...); values may use `{i}` and `{i%N}`.",
            ),
            k(
                "reboot",
                "heals, survives or never",
                "heals",
                "What a reboot the drainer asks for does: back with a new bootID and the problem gone, back with it still there, or never back.",
            ),
            k(
                "restart",
                "helps or fails",
                "helps",
                "What restarting a component (a ladder's `restart kubelet` / `restart containerd`) does: healthy again 30 s later, its problem gone, or back with it still there.",
            ),
            k(
                "powerCycle",
                "works or fails",
                "works",
                "What a power-cycle from outside does: the provider reboots the machine (as `reboot` says it comes back), or gives up (medik8s: its remediation object says `Succeeded=False`; another provider answers an error).",
            ),
        ],
    },
    Part {
        name: "Pod group",
        what: "A pod on each node of a group.",
        keys: &[
            k(
                "name",
                "string",
                "required",
                "Its name; `{node}` is the node's.",
            ),
            k("namespace", "string", "default", "Its namespace."),
            k(
                "ownerKind",
                "string",
                "ReplicaSet",
                "Its controller's kind (ReplicaSet, StatefulSet, Job, DaemonSet ...).",
            ),
            k("labels", "map", "{}", "Its labels."),
            k(
                "annotations",
                "map",
                "{}",
                "Its annotations (`scheduler.alpha.kubernetes.io/not-evicted-pod: \"\"` in kube-system: never evicted).",
            ),
            k(
                "priority",
                "integer",
                "none",
                "`spec.priority` (2000000000 and above: a critical pod, never evicted).",
            ),
            k(
                "protected",
                "bool",
                "false",
                "A PodDisruptionBudget refuses its eviction.",
            ),
            k(
                "finishesAfter",
                "duration",
                "never",
                "It finishes (Succeeded) this long after the start, as a batch pod does.",
            ),
        ],
    },
    Part {
        name: "Step",
        what: "A change at a time, to some nodes, once or repeated.",
        keys: &[
            k("at", "duration", "required", "When, from the start."),
            k("nodes", "pick", "required", "Which nodes (see Pick)."),
            k(
                "set",
                "`Type=Status` or `Type=Status,reason=Reason`, or a list",
                "none",
                "The condition set (with its reason, for conditions listed by reason); a list is alternated over the repetitions.",
            ),
            k(
                "detector",
                "stop or start",
                "none",
                "Instead of `set`: the nodes' detectors stop (killed, hung) or start again.",
            ),
            k("every", "duration", "none", "Repeat this often ..."),
            k("times", "integer", "1", "... this many times in all."),
        ],
    },
    Part {
        name: "Pick",
        what: "Which nodes a step changes (or `expect.untouched` names).",
        keys: &[
            k(
                "label",
                "label selector",
                "none",
                "Nodes with these labels (Kubernetes' syntax).",
            ),
            k("names", "list of strings", "[]", "Nodes by name."),
            k("count", "integer", "all", "At most this many of them."),
        ],
    },
    Part {
        name: "Expect",
        what: "What must hold at the end of the run; each key is optional.",
        keys: &[
            k(
                "breakerOpenWithin",
                "duration",
                "none",
                "The breaker opens within this long of the first step.",
            ),
            k(
                "breakerNeverOpens",
                "bool",
                "none",
                "The breaker never opens.",
            ),
            k(
                "drainsAtMost",
                "integer",
                "none",
                "At most this many drains.",
            ),
            k(
                "drainsAtLeast",
                "integer",
                "none",
                "At least this many drains.",
            ),
            k(
                "cordonedAtOnceAtMost",
                "integer",
                "none",
                "At most this many nodes cordoned at any moment.",
            ),
            k(
                "cordonedAtOnceAtLeast",
                "integer",
                "none",
                "At least this many nodes cordoned at some moment.",
            ),
            k(
                "allUncordonedWithin",
                "duration",
                "none",
                "After the last step, every node the drainer still holds is uncordoned within this.",
            ),
            k(
                "untouched",
                "pick",
                "none",
                "Nodes never cordoned nor drained.",
            ),
            k(
                "flapping",
                "list of strings",
                "[]",
                "Exactly the nodes reported flapping (NodeFlapping).",
            ),
            k(
                "outages",
                "list of strings",
                "[]",
                "Exactly the failure domains reported in an outage.",
            ),
            k(
                "silent",
                "list of strings",
                "[]",
                "Exactly the nodes reported with a silent detector (DetectorSilent).",
            ),
            k(
                "rebootsProven",
                "integer",
                "none",
                "Exactly this many reboots proven (a new bootID, Ready and the problem clear).",
            ),
            k(
                "needsPerson",
                "list of strings",
                "none",
                "Exactly the nodes whose ladder ends with a person.",
            ),
            k(
                "replaced",
                "list of strings",
                "none",
                "Exactly the nodes replaced (their Node deleted).",
            ),
            k(
                "slowStartWidths",
                "list of integers",
                "none",
                "Every slow-start change, in order: the width it went to (1: fell back).",
            ),
        ],
    },
];

/// The reference page.
pub(crate) fn reference() -> String {
    let mut out = String::from(
        "# `drainer simulate` scenario reference\n\n\
         Generated from the code (`drainer/src/simulate/format.rs`, held against the scenario parser by a test): \
         do not edit; `NODEMEDIC_WRITE_DOCS=1 cargo test -p nodemedic-drainer --lib reference` rewrites it.\n\n\
         A scenario is a YAML file: `drainer simulate FILE...` runs the real controller against a cluster in \
         memory on simulated time and prints what it did; `--output html` draws it. Durations are written as \
         `30s`, `10m`, `1h`. Every mistake in a file is reported as `file:line:column: message`, a misspelt \
         key with the key meant. The shipped scenarios are in `config/scenarios/`.\n",
    );
    for p in PARTS {
        out.push_str(&format!(
            "\n## {}\n\n{}\n\n| key | type | default | meaning |\n| --- | --- | --- | --- |\n",
            p.name, p.what
        ));
        for key in p.keys {
            out.push_str(&format!(
                "| `{}` | {} | {} | {} |\n",
                key.key, key.kind, key.default, key.meaning
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The keys serde accepts in the part a document's unknown key lands in, from its error.
    fn accepted(doc: &str) -> Vec<String> {
        let e = serde_saphyr::from_str::<super::super::Scenario>(doc).unwrap_err();
        let text = e.to_string();
        let list = text
            .split_once("expected one of ")
            .map(|(_, l)| l.lines().next().unwrap_or(l))
            .unwrap_or_else(|| panic!("no key list in: {text}"));
        let list = list.split(" at line ").next().unwrap_or(list);
        list.split(", ")
            .map(|k| k.trim().trim_matches('`').to_string())
            .collect()
    }

    fn documented(name: &str) -> Vec<String> {
        let part = PARTS.iter().find(|p| p.name == name).unwrap();
        part.keys.iter().map(|k| k.key.to_string()).collect()
    }

    #[test]
    fn every_part_documents_exactly_the_keys_the_parser_takes() {
        let cases = [
            ("Scenario", "zzz: 1\n"),
            ("Node group", "nodes: [{name: a, zzz: 1}]\nduration: 1m\n"),
            (
                "Pod group",
                "nodes: [{name: a, pods: [{name: p, zzz: 1}]}]\nduration: 1m\n",
            ),
            (
                "Step",
                "nodes: []\nduration: 1m\nsteps: [{at: 1m, nodes: {}, zzz: 1}]\n",
            ),
            (
                "Pick",
                "nodes: []\nduration: 1m\nsteps: [{at: 1m, nodes: {zzz: 1}}]\n",
            ),
        ];
        for (part, doc) in cases {
            let mut got = accepted(doc);
            let mut want = documented(part);
            got.sort();
            want.sort();
            assert_eq!(got, want, "{part}");
        }
        // Expect flattens the ladder's keys in, which leaves serde no list to give: every key
        // documented parses, and an unknown one is refused.
        for key in documented("Expect") {
            let value = match key.as_str() {
                "untouched" => "{names: [a]}",
                k if k.ends_with("Within") => "1m",
                "breakerNeverOpens" => "true",
                "flapping" | "outages" | "silent" | "needsPerson" | "replaced" => "[a]",
                "slowStartWidths" => "[1, 2]",
                _ => "1",
            };
            let doc = format!("nodes: []\nduration: 1m\nexpect: {{{key}: {value}}}\n");
            assert!(
                serde_saphyr::from_str::<super::super::Scenario>(&doc).is_ok(),
                "{doc}"
            );
        }
        let doc = "nodes: []\nduration: 1m\nexpect: {zzz: 1}\n";
        assert!(serde_saphyr::from_str::<super::super::Scenario>(doc).is_err());
    }

    #[test]
    fn the_committed_scenario_reference_is_what_the_code_generates() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        nodemedic_common::cli::check_reference(
            &root,
            "docs/reference/simulate-scenario.md",
            &reference(),
        )
        .unwrap();
    }
}
