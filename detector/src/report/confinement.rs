//! What the detector's credential may write beyond its own Node's conditions, found out at start
//! and said in the log and `/healthz`.
//!
//! The shipped own-node policy (deploy/components/own-node-policy/policy.yaml) refuses any change of a
//! Node's labels by the detector. So the detector asks the API server, with a dry run (admitted,
//! never stored), to put a label on its own Node through `nodes/status`: refused by a
//! ValidatingAdmissionPolicy means the policy is in force for this credential; accepted means
//! nothing confines it, which for the ServiceAccount means its `nodes/status` right covers every
//! Node (cluster-wide mode). The verdict is a pure function of the answer, tested below.

use nodemedic_common::client::Credential;

/// The label the dry run would set (never stored).
pub const PROBE_LABEL: &str = "nodemedic.io/confinement-probe";

/// How the API server answered the dry run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ProbeAnswer {
    Accepted,
    /// An HTTP status and the server's message.
    Refused(u16, String),
    /// No answer (timeout, connection).
    Failed(String),
}

/// What the credential may write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Confinement {
    /// An admission policy keeps it to its own Node's conditions.
    OwnNode,
    /// The ServiceAccount, unconfined: it may patch every Node's status and metadata.
    ClusterWide,
    /// A kubeconfig's user refused on another Node: its own Node only (a kubelet's, by Node
    /// authorization and NodeRestriction, deploy/kubelet-credential).
    KubeconfigOwnNode,
    /// A kubeconfig's user that may write another Node's status too (an administrator's).
    KubeconfigAnyNode,
    /// A kubeconfig's user, with no other Node to try it on: as confined as that user is.
    Kubeconfig,
    /// The probe told nothing; why.
    Unknown(String),
}

impl Confinement {
    /// From the answer on its own Node and, for a kubeconfig that passed it, on another Node
    /// (`None`: no other Node could be tried).
    pub(crate) fn of(
        credential: Credential,
        answer: &ProbeAnswer,
        other: Option<&ProbeAnswer>,
    ) -> Confinement {
        match (answer, credential) {
            (ProbeAnswer::Refused(403, m), _) if m.contains("ValidatingAdmissionPolicy") => {
                Confinement::OwnNode
            }
            (ProbeAnswer::Accepted, Credential::ServiceAccount) => Confinement::ClusterWide,
            (ProbeAnswer::Accepted, Credential::Kubeconfig) => match other {
                Some(ProbeAnswer::Refused(403, _)) => Confinement::KubeconfigOwnNode,
                Some(ProbeAnswer::Accepted) => Confinement::KubeconfigAnyNode,
                _ => Confinement::Kubeconfig,
            },
            (ProbeAnswer::Refused(code, m), _) => Confinement::Unknown(format!(
                "the API server refused a dry-run status patch of this Node ({code}: {m})"
            )),
            (ProbeAnswer::Failed(e), _) => Confinement::Unknown(format!(
                "a dry-run status patch of this Node got no answer ({e})"
            )),
        }
    }

    /// The `/healthz` note.
    pub(crate) fn describe(&self) -> String {
        match self {
            Confinement::OwnNode => "ServiceAccount, own node only: a ValidatingAdmissionPolicy lets it write only this \
                 Node's conditions, its own annotations and Events about this Node"
                .into(),
            Confinement::ClusterWide => "ServiceAccount, cluster-wide: its nodes/status right covers every Node and no \
                 policy confines it (the base's own-node policy, Kubernetes 1.30+, or \
                 deploy/kubelet-credential would)"
                .into(),
            Confinement::KubeconfigOwnNode => "kubeconfig, own node only: another Node's status was refused it, as a \
                 kubelet's credential is by Node authorization and NodeRestriction"
                .into(),
            Confinement::KubeconfigAnyNode => "kubeconfig, any node: its user may write every Node's status, not only \
                 this one's (not a kubelet's credential; deploy/kubelet-credential gives the detector its node's own)"
                .into(),
            Confinement::Kubeconfig => "kubeconfig: as confined as its user (no other Node to try it on: a \
                 kubelet's credential would be refused there)"
                .into(),
            Confinement::Unknown(why) => format!("not known: {why}"),
        }
    }

    /// Whether operators should hear about it at warning level.
    pub(crate) fn is_warning(&self) -> bool {
        self.writes_other_nodes() || matches!(self, Confinement::Unknown(_))
    }

    /// Whether it may write Nodes other than its own.
    pub(crate) fn writes_other_nodes(&self) -> bool {
        matches!(
            self,
            Confinement::ClusterWide | Confinement::KubeconfigAnyNode
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const DENIED: &str = "nodes \"n1\" is forbidden: ValidatingAdmissionPolicy 'nodemedic-detector-own-node' \
         with binding 'nodemedic-detector-own-node' denied request: nodemedic's detector may change only \
         its Node's conditions";

    #[test]
    fn a_policy_denial_is_own_node_whatever_the_credential() {
        for c in [Credential::ServiceAccount, Credential::Kubeconfig] {
            assert_eq!(
                Confinement::of(c, &ProbeAnswer::Refused(403, DENIED.into()), None),
                Confinement::OwnNode
            );
        }
    }

    #[test]
    fn an_accepted_label_is_cluster_wide_for_the_service_account_only() {
        let sa = Confinement::of(Credential::ServiceAccount, &ProbeAnswer::Accepted, None);
        assert_eq!(sa, Confinement::ClusterWide);
        assert!(sa.is_warning());
        assert!(sa.describe().contains("cluster-wide"), "{}", sa.describe());
        let kc = Confinement::of(Credential::Kubeconfig, &ProbeAnswer::Accepted, None);
        assert_eq!(kc, Confinement::Kubeconfig);
        assert!(!kc.is_warning());
        assert!(kc.describe().contains("no other Node"), "{}", kc.describe());
    }

    /// A kubeconfig is tried on another Node too: a kubelet's credential is refused there
    /// (NodeRestriction), an administrator's is not, and only then is it said to be a kubelet's.
    #[test]
    fn a_kubeconfig_is_own_node_only_when_another_node_refuses_it() {
        let restricted =
            "nodes \"other\" is forbidden: node \"n1\" is not allowed to modify node \"other\"";
        let kubelet = Confinement::of(
            Credential::Kubeconfig,
            &ProbeAnswer::Accepted,
            Some(&ProbeAnswer::Refused(403, restricted.into())),
        );
        assert_eq!(kubelet, Confinement::KubeconfigOwnNode);
        assert!(!kubelet.is_warning());
        assert!(
            kubelet.describe().contains("own node only"),
            "{}",
            kubelet.describe()
        );
        let admin = Confinement::of(
            Credential::Kubeconfig,
            &ProbeAnswer::Accepted,
            Some(&ProbeAnswer::Accepted),
        );
        assert_eq!(admin, Confinement::KubeconfigAnyNode);
        assert!(admin.writes_other_nodes() && admin.is_warning());
        assert!(
            !admin.describe().contains("own node"),
            "{}",
            admin.describe()
        );
        assert!(
            admin.describe().contains("every Node"),
            "{}",
            admin.describe()
        );
    }

    #[test]
    fn other_refusals_and_failures_are_unknown_and_say_why() {
        // RBAC's refusal names no policy: the detector may not patch its status at all.
        let rbac = "nodes \"n1\" is forbidden: User \"system:serviceaccount:kube-system:nodemedic-detector\" \
                    cannot patch resource \"nodes/status\"";
        let c = Confinement::of(
            Credential::ServiceAccount,
            &ProbeAnswer::Refused(403, rbac.into()),
            None,
        );
        assert!(
            matches!(&c, Confinement::Unknown(w) if w.contains("403") && w.contains("cannot patch")),
            "{c:?}"
        );
        assert!(c.is_warning());
        let c = Confinement::of(
            Credential::ServiceAccount,
            &ProbeAnswer::Failed("timed out".into()),
            None,
        );
        assert!(c.describe().contains("timed out"), "{}", c.describe());
    }
}
