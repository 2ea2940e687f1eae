//! The machines check's lookups: from what a request asks ([`machines::read`]) to the node it
//! reaches, that Node read afresh (a quorum read, not the cache, which may not hold the record
//! written a moment before), its record checked under the drainer's key ([`machines::under_way`]),
//! and the machine tied to the node the way the drainer ties them when it acts (the Machine naming
//! the Node back; the host behind that Machine). I/O; every answer is one [`Verdict`].

use k8s_openapi::api::core::v1::Node;
use k8s_openapi::jiff::Timestamp;
use kube::Api;

use super::machines::{self, Ask};
use crate::act::kube::KubeCluster;
use crate::model::ladder::Step;
use crate::model::node::NodeView;
use crate::model::record::Record;
use crate::model::seal::RecordTrust;

/// What the check answers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// Admitted, and why (the audit log's words).
    Admit(String),
    /// Refused: the message the writer gets.
    Deny(String),
    /// Could not be told (the API server did not answer): the webhook fails the request, which
    /// the drainer retries; `failurePolicy: Fail` keeps it closed meanwhile.
    Unknown(String),
}

/// The check's means: a client for the lookups, the drainer's key and its name (Lease).
#[derive(Clone)]
pub(crate) struct Tie {
    pub(crate) cluster: KubeCluster,
    pub(crate) nodes: Api<Node>,
    pub(crate) trust: RecordTrust,
    pub(crate) owner: String,
}

/// `Err` of a lookup: refused with these words, or not told.
type Looked<T> = Result<T, Verdict>;

impl Tie {
    /// The verdict on `ask`, at `now`.
    pub(crate) async fn verdict(&self, ask: &Ask, now: Timestamp) -> Verdict {
        match self.tied(ask, now).await {
            Ok(why) => Verdict::Admit(why),
            Err(v) => v,
        }
    }

    async fn tied(&self, ask: &Ask, now: Timestamp) -> Looked<String> {
        let step = match machines::without_lookup(ask) {
            Ok(step) => step,
            Err(answer) => return answer.map_err(Verdict::Deny),
        };
        let what = step.as_str();
        match ask {
            Ask::Fence { node } => {
                self.node_under_way(node, step, now).await?;
                Ok(format!("allowed: a {what} of node {node} is under way"))
            }
            Ask::MarkMachine {
                namespace,
                name,
                node,
            } => {
                let at = format!("Machine {namespace}/{name}");
                let Some(node) = node else {
                    return Err(Verdict::Deny(format!(
                        "{at} names no node (status.nodeRef)"
                    )));
                };
                let view = self.node_under_way(node, step, now).await?;
                let uid = view.uid.to_string();
                match self.cluster.machine_of(namespace, name, node, &uid).await {
                    Ok(Some(Ok(_))) => Ok(format!(
                        "allowed: a {what} of node {node} ({at}) is under way"
                    )),
                    Ok(Some(Err(why))) => Err(Verdict::Deny(format!("{at} {why}"))),
                    Ok(None) => Err(Verdict::Deny(format!("no {at}"))),
                    Err(e) => Err(Verdict::Unknown(format!("cannot read {at}: {e}"))),
                }
            }
            Ask::RebootHost {
                namespace,
                name,
                consumer,
            } => {
                let host = format!("BareMetalHost {namespace}/{name}");
                let Some((m_ns, m_name)) = consumer else {
                    return Err(Verdict::Deny(format!(
                        "{host} is not consumed by a Metal3Machine (spec.consumerRef): no node's power-cycle leads to it"
                    )));
                };
                let (ns, machine, node) = match self.cluster.host_node(m_ns, m_name).await {
                    Ok(Ok(found)) => found,
                    Ok(Err(why)) => return Err(Verdict::Deny(format!("{host}: {why}"))),
                    Err(e) => return Err(Verdict::Unknown(format!("{host}: {e}"))),
                };
                let view = self.node_under_way(&node, step, now).await?;
                let uid = view.uid.to_string();
                match self.cluster.metal3_host(&ns, &machine, &node, &uid).await {
                    Ok((h_ns, h_name)) if (&h_ns, &h_name) == (namespace, name) => Ok(format!(
                        "allowed: a {what} of node {node} ({host}) is under way"
                    )),
                    Ok((h_ns, h_name)) => Err(Verdict::Deny(format!(
                        "node {node}'s Machine {ns}/{machine} leads to BareMetalHost {h_ns}/{h_name}, not {namespace}/{name}"
                    ))),
                    Err(crate::model::cluster::PowerCycleError::Api(e)) => {
                        Err(Verdict::Unknown(format!("{host}: {e}")))
                    }
                    Err(e) => Err(Verdict::Deny(format!("{host}: {e}"))),
                }
            }
            // Answered above without a lookup.
            Ask::Refuse(_) | Ask::Else(_) => Err(Verdict::Deny("no step".into())),
        }
    }

    /// `node` read now, if its record has `step` under way.
    async fn node_under_way(&self, node: &str, step: Step, now: Timestamp) -> Looked<NodeView> {
        if node.is_empty() {
            return Err(Verdict::Deny("it names no node".into()));
        }
        let n = match self.nodes.get_opt(node).await {
            Ok(Some(n)) => n,
            Ok(None) => return Err(Verdict::Deny(format!("there is no node {node}"))),
            Err(e) => {
                let e = nodemedic_common::client::said(&e);
                return Err(Verdict::Unknown(format!("cannot read node {node}: {e}")));
            }
        };
        let view = NodeView::of(&n);
        let checked = Record::check(&view, &self.trust, &self.owner);
        machines::under_way(&view, checked, step, now).map_err(Verdict::Deny)?;
        Ok(view)
    }
}
