//! A node taint as the settings name it (`KEY[=VALUE]:EFFECT`: problem, probation and after-drain
//! taints), parsed and checked. Pure.

use crate::model::node::{NodeTaint, TaintEffect};

/// A node taint, `KEY[=VALUE]:EFFECT`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Taint {
    pub(crate) key: String,
    pub(crate) value: Option<String>,
    pub(crate) effect: String,
}

/// A taint that is not one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TaintError {
    #[error("{0:?}: expected KEY[=VALUE]:EFFECT")]
    Form(String),
    #[error("{0:?}: the effect must be NoSchedule, PreferNoSchedule or NoExecute")]
    Effect(String),
    #[error("{0:?}: the key is empty")]
    EmptyKey(String),
    #[error(
        "{0:?}: taints under {1} belong to Kubernetes and its autoscalers (node.kubernetes.io/out-of-service force-deletes a node's pods); the drainer does not write them, and the own-node policy refuses it if asked (deploy/components/own-node-policy/drainer-policy.yaml)"
    )]
    System(String, &'static str),
}

/// The taint keys the drainer never writes, as `deploy/components/own-node-policy/drainer-policy.yaml`
/// lists them (a test holds the two equal): a stolen token must not add or lift them, and a setting
/// naming one would be refused by that policy on every write.
pub const SYSTEM_TAINT_PREFIXES: [&str; 5] = [
    "node.kubernetes.io/",
    "node-role.kubernetes.io/",
    "node.cloudprovider.kubernetes.io/",
    "ToBeDeletedByClusterAutoscaler",
    "DeletionCandidateOfClusterAutoscaler",
];

impl std::str::FromStr for Taint {
    type Err = TaintError;
    fn from_str(s: &str) -> Result<Taint, TaintError> {
        let (kv, effect) = s
            .rsplit_once(':')
            .ok_or_else(|| TaintError::Form(s.into()))?;
        if !["NoSchedule", "PreferNoSchedule", "NoExecute"].contains(&effect) {
            return Err(TaintError::Effect(s.into()));
        }
        let (key, value) = match kv.split_once('=') {
            Some((k, v)) => (k, Some(v.to_string())),
            None => (kv, None),
        };
        if key.is_empty() {
            return Err(TaintError::EmptyKey(s.into()));
        }
        if let Some(p) = SYSTEM_TAINT_PREFIXES.iter().find(|p| key.starts_with(**p)) {
            return Err(TaintError::System(s.into(), p));
        }
        Ok(Taint {
            key: key.to_string(),
            value,
            effect: effect.to_string(),
        })
    }
}

impl Taint {
    /// The taint as a node carries it.
    pub(crate) fn node_taint(&self) -> NodeTaint {
        NodeTaint::new(
            &self.key,
            self.value.as_deref(),
            TaintEffect::parse(&self.effect),
        )
    }
}

impl std::fmt::Display for Taint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.node_taint().fmt(f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_taint_parses_and_a_kubernetes_owned_key_is_refused_by_name() {
        let t: Taint = "nodemedic.io/problem=disk:NoSchedule".parse().unwrap();
        assert_eq!(
            (t.key.as_str(), t.value.as_deref(), t.effect.as_str()),
            ("nodemedic.io/problem", Some("disk"), "NoSchedule")
        );
        for bad in [
            "node.kubernetes.io/out-of-service=nodeshutdown:NoExecute",
            "node-role.kubernetes.io/control-plane:NoSchedule",
            "ToBeDeletedByClusterAutoscaler:NoSchedule",
        ] {
            let e = bad.parse::<Taint>().unwrap_err();
            assert!(matches!(e, TaintError::System(..)), "{bad}: {e}");
            assert!(e.to_string().contains("belong to Kubernetes"), "{e}");
        }
        // A look-alike outside the prefixes is the operator's own.
        assert!(
            "example.com/node.kubernetes.io:NoSchedule"
                .parse::<Taint>()
                .is_ok()
        );
    }

    #[test]
    fn the_drainers_node_policy_refuses_exactly_these_taint_keys() {
        let policy = include_str!("../../../deploy/components/own-node-policy/drainer-policy.yaml");
        let line = policy
            .lines()
            .skip_while(|l| !l.contains("name: system"))
            .nth(1)
            .expect("the policy's `system` variable");
        let listed: Vec<&str> = line.split('\'').skip(1).step_by(2).collect();
        assert_eq!(listed, SYSTEM_TAINT_PREFIXES, "{line}");
        let line = policy
            .lines()
            .skip_while(|l| !l.contains("name: owned"))
            .nth(1)
            .expect("the policy's `owned` variable");
        let alternatives = line.split_once("?(").unwrap().1.split_once(")/").unwrap().0;
        let domains: Vec<String> = alternatives
            .split('|')
            .map(|d| d.replace("[.]", "."))
            .collect();
        assert_eq!(domains, crate::config::OWNED_DOMAINS, "{line}");
    }

    #[test]
    fn after_drain_marks_outside_the_owned_domains_only() {
        use crate::config::{PairError, mark, owned_domain};
        assert_eq!(mark("drained=true"), Ok(("drained".into(), "true".into())));
        assert_eq!(
            mark("example.com/drained=yes").unwrap().0,
            "example.com/drained"
        );
        // Not a subdomain: a look-alike is the operator's own.
        assert_eq!(owned_domain("notkubernetes.io/x"), None);
        assert_eq!(owned_domain("notx-k8s.io/x"), None);
        // Cluster API's: the token must not point a node at another Machine.
        assert_eq!(owned_domain("cluster.x-k8s.io/machine"), Some("x-k8s.io"));
        assert_eq!(owned_domain("kubernetes.io"), None, "no prefix, no domain");
        for (bad, domain) in [
            ("topology.kubernetes.io/zone=z1", "kubernetes.io"),
            ("node-role.kubernetes.io/control-plane=", "kubernetes.io"),
            ("kubernetes.io/hostname=h", "kubernetes.io"),
            ("sigs.k8s.io/x=", "k8s.io"),
            ("nodemedic.io/do-not-remediate=x", "nodemedic.io"),
            ("kosmos.io/node=true", "kosmos.io"),
        ] {
            let e = mark(bad).unwrap_err();
            assert_eq!(e, PairError::Owned(bad.into(), domain));
            assert!(e.to_string().contains("drainer-policy.yaml"), "{e}");
        }
        assert!(matches!(mark("novalue"), Err(PairError::Form(_))));
    }
}
