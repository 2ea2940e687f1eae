//! What the detector's credential may write beyond its own Node's conditions, found out at start
//! and said in the log and `/healthz`.
//!
//! The shipped own-node policy (deploy/own-node-policy/policy.yaml) refuses any change of a
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
    /// A kubeconfig's user: as confined as that user is (a kubelet's by Node authorization and
    /// NodeRestriction, deploy/kubelet-credential).
    Kubeconfig,
    /// The probe told nothing; why.
    Unknown(String),
}

impl Confinement {
    pub(crate) fn of(credential: Credential, answer: &ProbeAnswer) -> Confinement {
        match (answer, credential) {
            (ProbeAnswer::Refused(403, m), _) if m.contains("ValidatingAdmissionPolicy") => {
                Confinement::OwnNode
            }
            (ProbeAnswer::Accepted, Credential::ServiceAccount) => Confinement::ClusterWide,
            (ProbeAnswer::Accepted, Credential::Kubeconfig) => Confinement::Kubeconfig,
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
            Confinement::Kubeconfig => "kubeconfig: as confined as its user (a kubelet's credential: its own Node, by \
                 Node authorization and NodeRestriction)"
                .into(),
            Confinement::Unknown(why) => format!("not known: {why}"),
        }
    }

    /// Whether operators should hear about it at warning level.
    pub(crate) fn is_warning(&self) -> bool {
        matches!(self, Confinement::ClusterWide | Confinement::Unknown(_))
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
                Confinement::of(c, &ProbeAnswer::Refused(403, DENIED.into())),
                Confinement::OwnNode
            );
        }
    }

    #[test]
    fn an_accepted_label_is_cluster_wide_for_the_service_account_only() {
        let sa = Confinement::of(Credential::ServiceAccount, &ProbeAnswer::Accepted);
        assert_eq!(sa, Confinement::ClusterWide);
        assert!(sa.is_warning());
        assert!(sa.describe().contains("cluster-wide"), "{}", sa.describe());
        let kc = Confinement::of(Credential::Kubeconfig, &ProbeAnswer::Accepted);
        assert_eq!(kc, Confinement::Kubeconfig);
        assert!(!kc.is_warning());
    }

    #[test]
    fn other_refusals_and_failures_are_unknown_and_say_why() {
        // RBAC's refusal names no policy: the detector may not patch its status at all.
        let rbac = "nodes \"n1\" is forbidden: User \"system:serviceaccount:kube-system:nodemedic-detector\" \
                    cannot patch resource \"nodes/status\"";
        let c = Confinement::of(
            Credential::ServiceAccount,
            &ProbeAnswer::Refused(403, rbac.into()),
        );
        assert!(
            matches!(&c, Confinement::Unknown(w) if w.contains("403") && w.contains("cannot patch")),
            "{c:?}"
        );
        assert!(c.is_warning());
        let c = Confinement::of(
            Credential::ServiceAccount,
            &ProbeAnswer::Failed("timed out".into()),
        );
        assert!(c.describe().contains("timed out"), "{}", c.describe());
    }
}
