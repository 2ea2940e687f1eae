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
//!
//! A token is not enough: whoever holds the drainer's ServiceAccount token can write that
//! ConfigMap, the fence taint and the cordon, and read every name, UID and bootID. So each request
//! is signed (Ed25519) with a key that reaches the drainer only as a file its pod mounts from a
//! Secret (the kubelet reads it; the drainer's token cannot), and the detector verifies it with the
//! public half it is given ([`verify`]). And the detector refuses on its own what no request may
//! ask ([`Guard`]): a node that is not cordoned, that still runs pods other than DaemonSet, mirror
//! and not-evicted ones, that has a control-plane role (unless its DaemonSet says otherwise), or
//! that it rebooted more often than its own daily limit.

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

/// What a request asks of the node's detector.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize,
)]
pub enum Action {
    /// Reboot the machine (every request before restarts existed: the field is then absent).
    #[default]
    #[serde(rename = "reboot")]
    Reboot,
    /// Restart the kubelet's unit, and see it active again.
    #[serde(rename = "restart kubelet")]
    RestartKubelet,
    /// Restart the container runtime's unit, and see it active again.
    #[serde(rename = "restart containerd")]
    RestartContainerd,
}

impl Action {
    pub fn is_reboot(&self) -> bool {
        *self == Action::Reboot
    }

    /// The component a restart is for (`kubelet`, `containerd`), None for a reboot.
    pub fn component(self) -> Option<&'static str> {
        match self {
            Action::Reboot => None,
            Action::RestartKubelet => Some("kubelet"),
            Action::RestartContainerd => Some("containerd"),
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Action::Reboot => "reboot",
            Action::RestartKubelet => "restart kubelet",
            Action::RestartContainerd => "restart containerd",
        }
    }
}

impl std::fmt::Display for Action {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Every node's request, by node name (the ConfigMap's data, parsed).
pub type Requests = BTreeMap<String, RebootRequest>;

/// One node's request.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RebootRequest {
    /// What it asks (absent: a reboot).
    #[serde(default, skip_serializing_if = "Action::is_reboot")]
    pub action: Action,
    pub node: String,
    /// The Node object's `metadata.uid`.
    pub uid: String,
    /// `status.nodeInfo.bootID` when the reboot was requested: the machine must run this boot.
    #[serde(rename = "bootID")]
    pub boot_id: String,
    /// When it was requested (RFC 3339); with the bootID, what makes it one request.
    pub requested: String,
    /// Until when it may be carried out (RFC 3339): at most a few minutes ahead, signed again
    /// while it stands, and never past the step's deadline, so a request the drainer withdrew,
    /// saved and written back, is soon refused.
    pub until: String,
    /// The problem it is asked for, as the Node's conditions said it (`KernelDeadlock=True`): the
    /// detector carries it out only while its Node still carries one of them, so a request the
    /// drainer withdrew when the problem cleared, saved and written back, does nothing (an
    /// attacker's review, issue 76). Empty in requests of earlier releases.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub because: Vec<String>,
    /// The drainer's Ed25519 signature over [`RebootRequest::signed_text`], base64 (empty:
    /// unsigned, which a detector given a public key refuses).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub signature: String,
}

impl RebootRequest {
    /// What the signature covers: every field, each on its line, after a version tag. A reboot's
    /// is the first version's (detectors of every release verify it); any other action's is the
    /// second's, which names it, so no detector that knows only reboots ever verifies one (and
    /// reboots for it), and no action can be swapped for another under the same signature.
    pub fn signed_text(&self) -> String {
        let fields = format!(
            "{}\n{}\n{}\n{}\n{}\n",
            self.node, self.uid, self.boot_id, self.requested, self.until
        );
        if !self.because.is_empty() {
            // The third version names its problem too: no detector of an earlier release verifies
            // it, and the problem cannot be dropped or swapped under the same signature.
            let because = self.because.join(",");
            return format!(
                "nodemedic-reboot-request-v3\n{}\n{because}\n{fields}",
                self.action
            );
        }
        match self.action {
            Action::Reboot => format!("nodemedic-reboot-request-v1\n{fields}"),
            a => format!("nodemedic-reboot-request-v2\n{a}\n{fields}"),
        }
    }

    /// This request signed with `key`.
    pub fn signed(mut self, key: &SigningKey) -> RebootRequest {
        use base64::Engine;
        let sig = key.0.sign(self.signed_text().as_bytes());
        self.signature = base64::engine::general_purpose::STANDARD.encode(sig.as_ref());
        self
    }

    /// What identifies it (in the detector's memory of requests carried out).
    pub fn id(&self) -> String {
        let id = format!(
            "{}/{}/{}@{}",
            self.node, self.uid, self.boot_id, self.requested
        );
        match self.action {
            Action::Reboot => id,
            a => format!("{a} {id}"),
        }
    }
}

/// The drainer's private key, from a PEM file as `openssl genpkey -algorithm ed25519` writes it.
pub struct SigningKey(ring::signature::Ed25519KeyPair);

/// The public half the detectors verify with, from `openssl pkey -pubout`'s PEM.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VerifyingKey(Vec<u8>);

/// A key file that is not one.
#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    #[error("{path}: {source}")]
    Read {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "{path}: not an Ed25519 {what} in PEM (make one with `openssl genpkey -algorithm ed25519 -out key.pem` and its public half with `openssl pkey -in key.pem -pubout -out public.pem`)"
    )]
    Malformed { path: String, what: &'static str },
}

/// The DER inside the first PEM block labelled `label` (`-----BEGIN {label}-----`).
// PEM is base64 between two marker lines (RFC 7468): a few lines, where a crate would add a
// dependency for one call.
fn pem(text: &str, label: &str) -> Option<Vec<u8>> {
    use base64::Engine;
    let begin = format!("-----BEGIN {label}-----");
    let end = format!("-----END {label}-----");
    let body = text.split_once(&begin)?.1.split_once(&end)?.0;
    let b64: String = body.split_whitespace().collect();
    base64::engine::general_purpose::STANDARD.decode(b64).ok()
}

/// The DER prefix of an Ed25519 SubjectPublicKeyInfo (RFC 8410): the 32 key bytes follow.
const ED25519_SPKI_PREFIX: [u8; 12] = [
    0x30, 0x2a, 0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x70, 0x03, 0x21, 0x00,
];

impl SigningKey {
    pub fn from_pem(text: &str, path: &str) -> Result<SigningKey, KeyError> {
        let malformed = || KeyError::Malformed {
            path: path.into(),
            what: "private key (PKCS#8, \"PRIVATE KEY\")",
        };
        let der = pem(text, "PRIVATE KEY").ok_or_else(malformed)?;
        ring::signature::Ed25519KeyPair::from_pkcs8_maybe_unchecked(&der)
            .map(SigningKey)
            .map_err(|_| malformed())
    }

    pub fn read(path: &std::path::Path) -> Result<SigningKey, KeyError> {
        let p = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|source| KeyError::Read {
            path: p.clone(),
            source,
        })?;
        SigningKey::from_pem(&text, &p)
    }

    /// Its public half.
    pub fn verifying_key(&self) -> VerifyingKey {
        use ring::signature::KeyPair;
        VerifyingKey(self.0.public_key().as_ref().to_vec())
    }

    /// A new key, as PKCS#8 PEM (tests; operators use openssl).
    pub fn generate_pem() -> String {
        use base64::Engine;
        let rng = ring::rand::SystemRandom::new();
        let der = ring::signature::Ed25519KeyPair::generate_pkcs8(&rng)
            .expect("the system's random source");
        let b64 = base64::engine::general_purpose::STANDARD.encode(der.as_ref());
        format!("-----BEGIN PRIVATE KEY-----\n{b64}\n-----END PRIVATE KEY-----\n")
    }
}

impl VerifyingKey {
    pub fn from_pem(text: &str, path: &str) -> Result<VerifyingKey, KeyError> {
        let der =
            pem(text, "PUBLIC KEY").filter(|d| d.len() == 44 && d[..12] == ED25519_SPKI_PREFIX);
        der.map(|d| VerifyingKey(d[12..].to_vec()))
            .ok_or(KeyError::Malformed {
                path: path.into(),
                what: "public key (\"PUBLIC KEY\")",
            })
    }

    pub fn read(path: &std::path::Path) -> Result<VerifyingKey, KeyError> {
        let p = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|source| KeyError::Read {
            path: p.clone(),
            source,
        })?;
        VerifyingKey::from_pem(&text, &p)
    }

    /// As `openssl pkey -pubout` writes it.
    pub fn to_pem(&self) -> String {
        use base64::Engine;
        let mut der = ED25519_SPKI_PREFIX.to_vec();
        der.extend_from_slice(&self.0);
        let b64 = base64::engine::general_purpose::STANDARD.encode(der);
        format!("-----BEGIN PUBLIC KEY-----\n{b64}\n-----END PUBLIC KEY-----\n")
    }

    /// Whether `r` carries a signature of this key's private half over its fields.
    pub fn verify(&self, r: &RebootRequest) -> bool {
        use base64::Engine;
        let Ok(sig) = base64::engine::general_purpose::STANDARD.decode(&r.signature) else {
            return false;
        };
        ring::signature::UnparsedPublicKey::new(&ring::signature::ED25519, &self.0)
            .verify(r.signed_text().as_bytes(), &sig)
            .is_ok()
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
    /// Whether its Node carries `nodemedic.io/do-not-remediate` (a person's veto).
    pub vetoed: bool,
    /// Now, by the detector's clock: a request is carried out only before its `until`.
    pub now: k8s_openapi::jiff::Timestamp,
    /// Its Node's conditions now, each `Type=Status`.
    pub conditions: &'a [String],
}

/// What the detector checks on its own before any reboot, whatever the request says: things a
/// holder of the drainer's token could otherwise get past.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Guard<'a> {
    /// Its Node is cordoned (`spec.unschedulable`).
    pub cordoned: bool,
    /// The pods still running on it other than DaemonSet, mirror and not-evicted ones, as
    /// `namespace/name`.
    pub pods: &'a [String],
    /// Its Node's control-plane role label, if it has one (`node-role.kubernetes.io/control-plane`
    /// or `.../master`).
    pub control_plane: Option<&'a str>,
    /// Whether this detector may reboot a control-plane node (its `--reboot-control-plane`).
    pub control_plane_allowed: bool,
    /// The reboots it carried out in the last 24 hours, and its limit (`--reboot-max-per-day`).
    pub today: (u32, u32),
    /// The restarts it carried out in the last 24 hours, and its limit (`--restart-max-per-day`).
    pub restarts_today: (u32, u32),
}

impl Guard<'_> {
    /// Why this node may not be rebooted now, if it may not.
    pub fn refused(&self) -> Option<String> {
        if !self.cordoned {
            return Some("the Node is not cordoned".into());
        }
        if !self.pods.is_empty() {
            let first: Vec<&str> = self.pods.iter().take(3).map(String::as_str).collect();
            return Some(format!(
                "{} pod(s) besides DaemonSet, mirror and not-evicted ones still run on it ({})",
                self.pods.len(),
                first.join(", ")
            ));
        }
        if let (Some(role), false) = (self.control_plane, self.control_plane_allowed) {
            return Some(format!(
                "it is a control-plane node ({role}); this detector reboots one only with --reboot-control-plane"
            ));
        }
        let (done, max) = self.today;
        (done >= max).then(|| {
            format!(
                "this detector rebooted it {done} time(s) in the last 24h, the most its --reboot-max-per-day allows ({max})"
            )
        })
    }

    /// Why a component may not be restarted now, if it may not: pods may run on (a restart keeps
    /// them), but not on a control-plane node unless allowed, nor past the day's restarts.
    pub fn restart_refused(&self) -> Option<String> {
        if let (Some(role), false) = (self.control_plane, self.control_plane_allowed) {
            return Some(format!(
                "it is a control-plane node ({role}); this detector restarts its components only with --reboot-control-plane"
            ));
        }
        let (done, max) = self.restarts_today;
        (done >= max).then(|| {
            format!(
                "this detector restarted a component {done} time(s) in the last 24h, the most its --restart-max-per-day allows ({max})"
            )
        })
    }
}

/// What the detector does with the ConfigMap's entry for its node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// No entry for this node.
    None,
    /// Reboot now.
    Reboot(RebootRequest),
    /// Restart the component it names now.
    Restart(RebootRequest),
    /// Already carried out (this boot, this request).
    Done,
    /// Made for an earlier boot: the machine has rebooted since, so there is nothing to do (the
    /// drainer withdraws it once it sees the new bootID).
    Past,
    /// Not for us to carry out, and why (logged once).
    Refused(String),
}

/// Why a request is no longer to be carried out at `now`, if it is not: past its `until` (a saved
/// request put back later, by whoever may write the ConfigMap, is refused), or without a deadline
/// that reads as a time.
fn expired(r: &RebootRequest, now: k8s_openapi::jiff::Timestamp) -> Option<String> {
    match r.until.parse::<k8s_openapi::jiff::Timestamp>() {
        Ok(until) if now <= until => None,
        Ok(_) => Some(format!(
            "its deadline {} has passed: a request is carried out only before it",
            r.until
        )),
        Err(_) => Some(format!(
            "its deadline {:?} is not a time: a request is carried out only before it",
            r.until
        )),
    }
}

/// The verdict on the entry `text` (the ConfigMap's value under this node's name) for `me`,
/// `done` being the ids of the requests this detector carried out, `key` the drainer's public key
/// it verifies with and `guard` what it checks on its own.
pub fn verdict(
    text: Option<&str>,
    me: &Me,
    done: &[String],
    key: &VerifyingKey,
    guard: &Guard,
) -> Verdict {
    let Some(text) = text else {
        return Verdict::None;
    };
    let r: RebootRequest = match serde_json::from_str(text) {
        Ok(r) => r,
        Err(e) => return Verdict::Refused(format!("the request does not parse ({e})")),
    };
    if !key.verify(&r) {
        return Verdict::Refused(if r.signature.is_empty() {
            "it is not signed (the drainer signs its requests with --reboot-signing-key)".into()
        } else {
            "its signature does not verify with this detector's --reboot-public-key: not the drainer's".into()
        });
    }
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
    } else if let Some(why) = expired(&r, me.now) {
        why
    } else if me.vetoed {
        format!(
            "the Node carries {}: a person vetoed its remediation",
            crate::keys::DO_NOT_REMEDIATE_ANNOTATION
        )
    } else if !r.because.is_empty() && !r.because.iter().any(|b| me.conditions.contains(b)) {
        format!(
            "the problem it was asked for ({}) is not on the Node now: withdrawn by the drainer, or written back",
            r.because.join(", ")
        )
    } else if !me.fenced {
        format!(
            "the Node does not carry the fence taint {FENCE_TAINT_KEY}={FENCE_TAINT_VALUE}:{FENCE_TAINT_EFFECT} the drainer puts on with a request"
        )
    } else if let Some(why) = match r.action {
        Action::Reboot => guard.refused(),
        _ => guard.restart_refused(),
    } {
        why
    } else if r.action.is_reboot() {
        return Verdict::Reboot(r);
    } else {
        return Verdict::Restart(r);
    };
    Verdict::Refused(refused)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request() -> RebootRequest {
        RebootRequest {
            action: Action::Reboot,
            node: "n1".into(),
            uid: "u1".into(),
            boot_id: "b1".into(),
            requested: "2026-11-27T10:00:00Z".into(),
            until: "2026-11-27T10:20:00Z".into(),
            because: vec!["KernelDeadlock=True".into()],
            signature: String::new(),
        }
    }

    /// The Node's conditions in the tests: the problem the request names, and Ready.
    static CONDITIONS: std::sync::LazyLock<Vec<String>> =
        std::sync::LazyLock::new(|| vec!["Ready=True".into(), "KernelDeadlock=True".into()]);

    fn me() -> Me<'static> {
        Me {
            node: "n1",
            uid: "u1",
            boot_id: "b1",
            fenced: true,
            vetoed: false,
            now: "2026-11-27T10:05:00Z".parse().unwrap(),
            conditions: &CONDITIONS[..],
        }
    }

    fn guard() -> Guard<'static> {
        Guard {
            cordoned: true,
            pods: &[],
            control_plane: None,
            control_plane_allowed: false,
            today: (0, 3),
            restarts_today: (0, 3),
        }
    }

    fn key() -> SigningKey {
        SigningKey::from_pem(&SigningKey::generate_pem(), "key.pem").unwrap()
    }

    /// An attacker's review (issue 76): a signed request the drainer withdrew when the problem
    /// cleared, saved and written back before its deadline, was carried out on a healthy node.
    #[test]
    fn a_request_is_carried_out_only_while_the_problem_it_names_is_on_the_node() {
        let k = key();
        let public = k.verifying_key();
        let r = request().signed(&k);
        let text = serde_json::to_string(&r).unwrap();
        assert!(
            text.contains("\"because\":[\"KernelDeadlock=True\"]"),
            "{text}"
        );
        let healthy = ["Ready=True".to_string(), "KernelDeadlock=False".to_string()];
        let m = Me {
            conditions: &healthy,
            ..me()
        };
        match verdict(Some(&text), &m, &[], &public, &guard()) {
            Verdict::Refused(why) => assert!(why.contains("is not on the Node now"), "{why}"),
            other => panic!("{other:?}"),
        }
        // The problem cannot be dropped, nor another named, under the same signature.
        for because in [vec![], vec!["Ready=True".to_string()]] {
            let mut edited = r.clone();
            edited.because = because;
            let text = serde_json::to_string(&edited).unwrap();
            match verdict(Some(&text), &m, &[], &public, &guard()) {
                Verdict::Refused(why) => assert!(why.contains("does not verify"), "{why}"),
                other => panic!("{other:?}"),
            }
        }
        // A request of an earlier release names none, and is judged as it was.
        let legacy = RebootRequest {
            because: vec![],
            ..request()
        }
        .signed(&k);
        let text = serde_json::to_string(&legacy).unwrap();
        assert_eq!(
            verdict(Some(&text), &m, &[], &public, &guard()),
            Verdict::Reboot(legacy.clone())
        );
        assert!(
            legacy
                .signed_text()
                .starts_with("nodemedic-reboot-request-v1\n")
        );
    }

    #[test]
    fn a_request_is_carried_out_only_for_this_node_object_and_boot_once() {
        let k = key();
        let public = k.verifying_key();
        let r = request().signed(&k);
        let text = serde_json::to_string(&r).unwrap();
        assert!(text.contains("\"bootID\":\"b1\""), "{text}");
        let v =
            |text: Option<&str>, m: &Me, done: &[String]| verdict(text, m, done, &public, &guard());
        assert_eq!(v(None, &me(), &[]), Verdict::None);
        assert_eq!(v(Some(&text), &me(), &[]), Verdict::Reboot(r.clone()));
        assert_eq!(v(Some(&text), &me(), &[r.id()]), Verdict::Done);
        let refused = |m: Me| match v(Some(&text), &m, &[]) {
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
            v(Some(&text), &later, &[]),
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
        assert!(matches!(v(Some("{"), &me(), &[]), Verdict::Refused(_)));
        // Issue 76: a signed request saved and put back after its deadline (the drainer cancelled
        // it, or a cap refused it, on the same boot) is refused; so is one on a vetoed Node.
        let late = Me {
            now: "2026-11-27T10:20:01Z".parse().unwrap(),
            ..me()
        };
        assert!(refused(late).contains("deadline 2026-11-27T10:20:00Z has passed"));
        assert!(
            refused(Me {
                vetoed: true,
                ..me()
            })
            .contains("do-not-remediate")
        );
        let mut undated = request();
        undated.until = "soon".into();
        let undated = serde_json::to_string(&undated.signed(&k)).unwrap();
        assert!(matches!(
            v(Some(&undated), &me(), &[]),
            Verdict::Refused(why) if why.contains("not a time")
        ));
    }

    /// Issue 64, point 5: the drainer's token can write the requests, the fence and the cordon, and
    /// read every name, UID and bootID; without the private key its requests reboot nothing.
    #[test]
    fn a_request_the_token_alone_writes_is_refused_and_so_is_any_change_to_a_signed_one() {
        let (ours, theirs) = (key(), key());
        let public = ours.verifying_key();
        let refused = |r: &RebootRequest| match verdict(
            Some(&serde_json::to_string(r).unwrap()),
            &me(),
            &[],
            &public,
            &guard(),
        ) {
            Verdict::Refused(why) => why,
            other => panic!("{other:?}"),
        };
        assert!(refused(&request()).contains("not signed"));
        assert!(refused(&request().signed(&theirs)).contains("does not verify"));
        // A genuine request for another node, its fields rewritten for this one.
        let mut moved = RebootRequest {
            node: "n9".into(),
            ..request()
        }
        .signed(&ours);
        moved.node = "n1".into();
        assert!(refused(&moved).contains("does not verify"));
        let mut later = request().signed(&ours);
        later.until = "2026-11-28T10:00:00Z".into();
        assert!(refused(&later).contains("does not verify"));
        // The keys as openssl writes and reads them.
        let back = VerifyingKey::from_pem(&public.to_pem(), "p.pem").unwrap();
        assert!(back.verify(&request().signed(&ours)));
        assert!(
            VerifyingKey::from_pem(
                "-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----",
                "p"
            )
            .is_err()
        );
        assert!(SigningKey::from_pem("not a key", "k").is_err());
    }

    /// Even a genuine request is refused for a node that is not cordoned, still runs pods, is a
    /// control-plane node (unless allowed), or was rebooted to the detector's own daily limit.
    #[test]
    fn a_genuine_request_is_refused_where_the_detector_itself_says_no() {
        let k = key();
        let public = k.verifying_key();
        let text = serde_json::to_string(&request().signed(&k)).unwrap();
        let why = |g: Guard| match verdict(Some(&text), &me(), &[], &public, &g) {
            Verdict::Refused(why) => why,
            other => panic!("{other:?}"),
        };
        assert_eq!(
            why(Guard {
                cordoned: false,
                ..guard()
            }),
            "the Node is not cordoned"
        );
        let pods = ["shop/db-0".to_string()];
        assert!(
            why(Guard {
                pods: &pods,
                ..guard()
            })
            .starts_with("1 pod(s) besides DaemonSet")
        );
        let cp = Guard {
            control_plane: Some("node-role.kubernetes.io/control-plane"),
            ..guard()
        };
        assert!(why(cp.clone()).contains("--reboot-control-plane"));
        assert!(matches!(
            verdict(
                Some(&text),
                &me(),
                &[],
                &public,
                &Guard {
                    control_plane_allowed: true,
                    ..cp
                }
            ),
            Verdict::Reboot(_)
        ));
        assert!(
            why(Guard {
                today: (3, 3),
                ..guard()
            })
            .contains("--reboot-max-per-day")
        );
    }

    /// A restart is carried out where a reboot would be refused for the pods still running (it
    /// keeps them), under its own daily limit; its signature covers what it asks, and a detector
    /// that knows only reboots cannot verify it.
    #[test]
    fn a_restart_request_is_its_own_signed_action() {
        let k = key();
        let public = k.verifying_key();
        let restart = RebootRequest {
            action: Action::RestartKubelet,
            ..request()
        }
        .signed(&k);
        let text = serde_json::to_string(&restart).unwrap();
        assert!(text.contains("\"action\":\"restart kubelet\""), "{text}");
        assert!(
            !serde_json::to_string(&request())
                .unwrap()
                .contains("action")
        );
        let pods = ["shop/db-0".to_string()];
        let busy = Guard {
            cordoned: false,
            pods: &pods,
            ..guard()
        };
        let v = |text: &str, g: &Guard| verdict(Some(text), &me(), &[], &public, g);
        assert_eq!(v(&text, &busy), Verdict::Restart(restart.clone()));
        let spent = Guard {
            restarts_today: (3, 3),
            ..guard()
        };
        assert!(
            matches!(v(&text, &spent), Verdict::Refused(w) if w.contains("--restart-max-per-day"))
        );
        // The action swapped under the same signature.
        let mut swapped = restart.clone();
        swapped.action = Action::Reboot;
        let swapped = serde_json::to_string(&swapped).unwrap();
        assert!(
            matches!(v(&swapped, &guard()), Verdict::Refused(w) if w.contains("does not verify"))
        );
        let mut other = restart.clone();
        other.action = Action::RestartContainerd;
        let other = serde_json::to_string(&other).unwrap();
        assert!(
            matches!(v(&other, &guard()), Verdict::Refused(w) if w.contains("does not verify"))
        );
        // A detector that knows only reboots reads no action: the first version's text, which the
        // signature does not cover.
        let mut old = restart.clone();
        old.action = Action::Reboot;
        assert!(!public.verify(&old));
        assert_ne!(restart.id(), request().signed(&k).id());
        assert!(restart.id().starts_with("restart kubelet "));
    }

    #[test]
    fn the_data_has_a_key_per_node() {
        let map = BTreeMap::from([("n1".to_string(), request())]);
        let data = to_data(&map);
        let back: RebootRequest = serde_json::from_str(&data["n1"]).unwrap();
        assert_eq!(back, request());
    }
}
