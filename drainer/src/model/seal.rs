//! The seal on a drain record: proof that this drainer wrote it, for this Node object (pure).
//!
//! Why a seal and not state kept elsewhere: the record lives on the Node (`nodemedic.io/drain`)
//! because that is where people, `kubectl describe node` and every replica's watch already see it,
//! and because the cordon, the taints and the record then change in one PATCH (never a cordon
//! without its record, whatever crashes). But a Node's annotations are no proof of who wrote them:
//! a PATCH of `nodes/NAME/status` keeps metadata changes (recorded: apiserver 59), which the
//! detector's ServiceAccount may send for every Node, and each kubelet may annotate its own Node
//! (62). So the drainer seals what it writes with HMAC-SHA256 under a key only it can read (a
//! Secret in its namespace, see `crate::act::key`), over the record with the Node's name and UID
//! in it:
//! - a forged record has no valid seal (the key is not on any node);
//! - a genuine record copied to another node, or to a new Node object of the same name, names
//!   another node or UID;
//! - a genuine record of the same node written back later (a replay of an old "draining" record)
//!   has a write time older than the newest the drainer has seen for that node: the fleet keeps
//!   that mark per node from what the watch confirms, and the leader keeps it on its Lease so a new
//!   leader starts from it (`crate::decide::fleet::seen`).
//!
//! What fails the check is never acted on nor counted: the node is decided as if it had no record.

use std::sync::Arc;

use base64::Engine;
use ring::hmac;

/// The domain of the MAC, so the key signs nothing else by accident.
const CONTEXT: &[u8] = b"nodemedic.io/drain record seal v1\0";

/// The shortest key accepted (bytes).
pub(crate) const MIN_KEY_BYTES: usize = 32;

/// How records are checked: sealed with a key (the running drainer), or taken as they are
/// (`drainer plan` and `explain` reading files, which hold no key: they say so).
#[derive(Clone)]
pub enum RecordTrust {
    Sealed(Arc<SealKey>),
    Unchecked,
}

impl std::fmt::Debug for RecordTrust {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the key.
        match self {
            RecordTrust::Sealed(_) => f.write_str("Sealed"),
            RecordTrust::Unchecked => f.write_str("Unchecked"),
        }
    }
}

impl PartialEq for RecordTrust {
    fn eq(&self, other: &RecordTrust) -> bool {
        match (self, other) {
            (RecordTrust::Sealed(a), RecordTrust::Sealed(b)) => a.id == b.id,
            (RecordTrust::Unchecked, RecordTrust::Unchecked) => true,
            _ => false,
        }
    }
}

impl RecordTrust {
    /// Sealed with this process's own random key, made at first use (`drainer simulate`, tests,
    /// and any configuration before the running drainer sets the key from its Secret): records
    /// sealed with it are trusted by this process only, until it exits.
    pub(crate) fn process() -> RecordTrust {
        static KEY: std::sync::OnceLock<Arc<SealKey>> = std::sync::OnceLock::new();
        RecordTrust::Sealed(KEY.get_or_init(|| Arc::new(SealKey::random())).clone())
    }

    pub(crate) fn is_checked(&self) -> bool {
        matches!(self, RecordTrust::Sealed(_))
    }

    /// The key records are sealed with (the process's own when unchecked).
    pub(crate) fn key(&self) -> Arc<SealKey> {
        match self {
            RecordTrust::Sealed(k) => k.clone(),
            RecordTrust::Unchecked => match RecordTrust::process() {
                RecordTrust::Sealed(k) => k,
                RecordTrust::Unchecked => unreachable!("the process key seals"),
            },
        }
    }
}

/// The drainer's record key, and during a rotation the one before it.
pub struct SealKey {
    key: hmac::Key,
    /// The key before a rotation (`--record-key-previous-file`): records it sealed are still the
    /// drainer's, and each is sealed with the new key the next time it is written.
    previous: Option<hmac::Key>,
    /// Tells keys apart without comparing them (the first bytes of the key's own MAC of nothing).
    id: [u8; 8],
}

impl std::fmt::Debug for SealKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the key.
        f.write_str("SealKey")
    }
}

/// A key that cannot seal records.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the drain record key has {0} bytes; it needs at least {MIN_KEY_BYTES}")]
pub struct KeyTooShort(pub usize);

impl SealKey {
    /// A new key from the system's random source.
    pub(crate) fn random() -> SealKey {
        SealKey::new(&random_bytes()).expect("32 bytes is long enough")
    }

    pub(crate) fn new(bytes: &[u8]) -> Result<SealKey, KeyTooShort> {
        if bytes.len() < MIN_KEY_BYTES {
            return Err(KeyTooShort(bytes.len()));
        }
        let key = hmac::Key::new(hmac::HMAC_SHA256, bytes);
        let mut id = [0u8; 8];
        id.copy_from_slice(&hmac::sign(&key, b"id").as_ref()[..8]);
        Ok(SealKey {
            key,
            id,
            previous: None,
        })
    }

    /// This key, still trusting the records `previous` sealed (a rotation in progress).
    pub(crate) fn with_previous(mut self, previous: &[u8]) -> Result<SealKey, KeyTooShort> {
        if previous.len() < MIN_KEY_BYTES {
            return Err(KeyTooShort(previous.len()));
        }
        self.previous = Some(hmac::Key::new(hmac::HMAC_SHA256, previous));
        Ok(self)
    }

    /// The seal of `body` (the record's JSON without its seal), as text.
    pub(crate) fn seal(&self, body: &[u8]) -> String {
        let mut ctx = hmac::Context::with_key(&self.key);
        ctx.update(CONTEXT);
        ctx.update(body);
        base64::engine::general_purpose::STANDARD_NO_PAD.encode(ctx.sign().as_ref())
    }

    /// Whether `seal` is this key's seal of `body`, or the previous key's during a rotation
    /// (compared in constant time).
    pub(crate) fn verify(&self, body: &[u8], seal: &str) -> bool {
        let Ok(tag) = base64::engine::general_purpose::STANDARD_NO_PAD.decode(seal) else {
            return false;
        };
        let mut msg = Vec::with_capacity(CONTEXT.len() + body.len());
        msg.extend_from_slice(CONTEXT);
        msg.extend_from_slice(body);
        std::iter::once(&self.key)
            .chain(self.previous.as_ref())
            .any(|k| hmac::verify(k, &msg, &tag).is_ok())
    }
}

/// Key material for a new key, from the system's random source.
pub(crate) fn random_bytes() -> [u8; MIN_KEY_BYTES] {
    let mut bytes = [0u8; MIN_KEY_BYTES];
    ring::rand::SecureRandom::fill(&ring::rand::SystemRandom::new(), &mut bytes)
        .expect("the system's random source works");
    bytes
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_seal_verifies_only_its_own_body_under_its_own_key() {
        let k = SealKey::new(&[7u8; 32]).unwrap();
        let other = SealKey::new(&[8u8; 32]).unwrap();
        let s = k.seal(b"{\"phase\":\"draining\"}");
        assert!(k.verify(b"{\"phase\":\"draining\"}", &s));
        assert!(!k.verify(b"{\"phase\":\"drained\"}", &s), "another body");
        assert!(
            !other.verify(b"{\"phase\":\"draining\"}", &s),
            "another key"
        );
        assert!(!k.verify(b"{\"phase\":\"draining\"}", "not base64!"));
        assert!(!k.verify(b"{\"phase\":\"draining\"}", ""));
    }

    #[test]
    fn after_a_rotation_the_previous_keys_seals_hold_and_new_ones_are_the_new_keys() {
        let (old, new) = (random_bytes(), random_bytes());
        let before = SealKey::new(&old).unwrap();
        let sealed_before = before.seal(b"record");
        let rotating = SealKey::new(&new).unwrap().with_previous(&old).unwrap();
        assert!(
            rotating.verify(b"record", &sealed_before),
            "the previous key's record holds"
        );
        let sealed_now = rotating.seal(b"record");
        assert_ne!(sealed_now, sealed_before, "sealed with the new key");
        let after = SealKey::new(&new).unwrap();
        assert!(after.verify(b"record", &sealed_now));
        assert!(
            !after.verify(b"record", &sealed_before),
            "the previous key dropped: refused"
        );
        assert!(!rotating.verify(b"another", &sealed_before));
        assert_eq!(
            SealKey::new(&new).unwrap().with_previous(b"short").err(),
            Some(KeyTooShort(5))
        );
    }

    #[test]
    fn short_keys_are_refused_and_keys_never_print() {
        assert_eq!(SealKey::new(&[1u8; 31]).err(), Some(KeyTooShort(31)));
        let t = RecordTrust::Sealed(Arc::new(SealKey::new(&[9u8; 40]).unwrap()));
        assert_eq!(format!("{t:?}"), "Sealed");
        assert_eq!(t, t.clone());
        assert_eq!(
            RecordTrust::process(),
            RecordTrust::process(),
            "one key a process"
        );
        let fresh = RecordTrust::Sealed(Arc::new(SealKey::random()));
        assert_ne!(fresh, RecordTrust::process());
        assert_ne!(fresh, RecordTrust::Unchecked);
    }
}
