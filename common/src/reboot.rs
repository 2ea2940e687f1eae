//! Reboot requests: what the drainer asks a node's detector to do, and how the detector decides
//! whether it may (pure).
//!
//! The drainer keeps every request in one ConfigMap beside its Lease, `<lease>-reboots`, one key
//! per node. Only the drainer writes it: the detector's ServiceAccount may only read that one
//! object, and no kubelet may write a ConfigMap. Nothing on a Node (annotations, status, the drain
//! record) is ever taken as a request: those are what a node's own credentials can write.
//!
//! The detector carries a request out only when it names this node's name, its Node's UID and the
//! bootID the machine runs now (one for an earlier boot is past: the reboot happened), and the Node
//! carries the fence taint the drainer put on with it:
//! so a request is carried out at most once per boot, never on another node, and never once the
//! drainer has moved on. The detector also remembers (in its state file) the requests it carried
//! out, so a detector restarting between the command and the reboot does not run it twice.

use std::collections::BTreeMap;

/// The ConfigMap of the drainer whose Lease is `lease`, in the Lease's namespace.
pub fn configmap_name(lease: &str) -> String {
    format!("{lease}-reboots")
}

/// The taint the drainer puts on a node with its reboot request (`KEY=VALUE:EFFECT`).
pub const FENCE_TAINT_KEY: &str = "nodemedic.io/remediation";
/// Its value.
pub const FENCE_TAINT_VALUE: &str = "reboot";
/// Its effect.
pub const FENCE_TAINT_EFFECT: &str = "NoSchedule";

/// Every node's request, by node name (the ConfigMap's data, parsed).
pub type Requests = BTreeMap<String, RebootRequest>;

/// One node's request.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RebootRequest {
    pub node: String,
    /// The Node object's `metadata.uid`.
    pub uid: String,
    /// `status.nodeInfo.bootID` when the reboot was requested: the machine must run this boot.
    #[serde(rename = "bootID")]
    pub boot_id: String,
    /// When it was requested (RFC 3339); with the bootID, what makes it one request.
    pub requested: String,
    /// When the drainer stops waiting for its proof (RFC 3339).
    pub until: String,
}

impl RebootRequest {
    /// What identifies it (in the detector's memory of requests carried out).
    pub fn id(&self) -> String {
        format!(
            "{}/{}/{}@{}",
            self.node, self.uid, self.boot_id, self.requested
        )
    }
}

/// The ConfigMap's data from the requests (one key per node).
pub fn to_data(requests: &BTreeMap<String, RebootRequest>) -> BTreeMap<String, String> {
    requests
        .iter()
        .map(|(n, r)| {
            let text = serde_json::to_string(r).expect("plain data serialises");
            (n.clone(), text)
        })
        .collect()
}

/// What this node knows of itself when it reads a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Me<'a> {
    pub node: &'a str,
    /// Its Node's `metadata.uid` as read from the API server.
    pub uid: &'a str,
    /// The bootID the kernel reports now (`/proc/sys/kernel/random/boot_id`).
    pub boot_id: &'a str,
    /// Whether its Node carries the fence taint.
    pub fenced: bool,
}

/// What the detector does with the ConfigMap's entry for its node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// No entry for this node.
    None,
    /// Reboot now.
    Reboot(RebootRequest),
    /// Already carried out (this boot, this request).
    Done,
    /// Made for an earlier boot: the machine has rebooted since, so there is nothing to do (the
    /// drainer withdraws it once it sees the new bootID).
    Past,
    /// Not for us to carry out, and why (logged once).
    Refused(String),
}

/// The verdict on the entry `text` (the ConfigMap's value under this node's name) for `me`,
/// `done` being the ids of the requests this detector carried out.
pub fn verdict(text: Option<&str>, me: &Me, done: &[String]) -> Verdict {
    let Some(text) = text else {
        return Verdict::None;
    };
    let r: RebootRequest = match serde_json::from_str(text) {
        Ok(r) => r,
        Err(e) => return Verdict::Refused(format!("the request does not parse ({e})")),
    };
    if done.contains(&r.id()) {
        return Verdict::Done;
    }
    let refused = if r.node != me.node {
        format!("it names node {:?}, not this one", r.node)
    } else if r.uid != me.uid {
        format!(
            "it names Node UID {}, this Node is {} (a Node of the same name created since)",
            r.uid, me.uid
        )
    } else if r.boot_id != me.boot_id {
        return Verdict::Past;
    } else if !me.fenced {
        format!(
            "the Node does not carry the fence taint {FENCE_TAINT_KEY}={FENCE_TAINT_VALUE}:{FENCE_TAINT_EFFECT} the drainer puts on with a request"
        )
    } else {
        return Verdict::Reboot(r);
    };
    Verdict::Refused(refused)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request() -> RebootRequest {
        RebootRequest {
            node: "n1".into(),
            uid: "u1".into(),
            boot_id: "b1".into(),
            requested: "2026-11-27T10:00:00Z".into(),
            until: "2026-11-27T10:20:00Z".into(),
        }
    }

    fn me() -> Me<'static> {
        Me {
            node: "n1",
            uid: "u1",
            boot_id: "b1",
            fenced: true,
        }
    }

    #[test]
    fn a_request_is_carried_out_only_for_this_node_object_and_boot_once() {
        let r = request();
        let text = serde_json::to_string(&r).unwrap();
        assert!(text.contains("\"bootID\":\"b1\""), "{text}");
        assert_eq!(verdict(None, &me(), &[]), Verdict::None);
        assert_eq!(verdict(Some(&text), &me(), &[]), Verdict::Reboot(r.clone()));
        assert_eq!(verdict(Some(&text), &me(), &[r.id()]), Verdict::Done);
        let refused = |m: Me| match verdict(Some(&text), &m, &[]) {
            Verdict::Refused(why) => why,
            other => panic!("{other:?}"),
        };
        assert!(refused(Me { node: "n2", ..me() }).contains("not this one"));
        assert!(refused(Me { uid: "u2", ..me() }).contains("created since"));
        let later = Me {
            boot_id: "b2",
            ..me()
        };
        assert_eq!(
            verdict(Some(&text), &later, &[]),
            Verdict::Past,
            "rebooted since: nothing to do, nothing to refuse"
        );
        assert!(
            refused(Me {
                fenced: false,
                ..me()
            })
            .contains("fence taint")
        );
        assert!(matches!(
            verdict(Some("{"), &me(), &[]),
            Verdict::Refused(_)
        ));
    }

    #[test]
    fn the_data_has_a_key_per_node() {
        let map = BTreeMap::from([("n1".to_string(), request())]);
        let data = to_data(&map);
        let back: RebootRequest = serde_json::from_str(&data["n1"]).unwrap();
        assert_eq!(back, request());
    }
}
