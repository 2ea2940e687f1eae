//! Leader election through a `coordination.k8s.io/v1` Lease, client-go style: read the Lease, then
//! create it, renew it, or take it over once expired, always with the resourceVersion read, so two
//! replicas racing get one success and one 409. The step to take is a pure function ([`next_step`]).
//! Leadership is published on a watch channel; it turns false at once when a renewal fails or the
//! renew deadline passes, and every write of the controller checks it first.
//!
//! The Lease also carries what operators and the next leader must see: the pause annotation an
//! operator sets (read every period and published as the Lease read), and the circuit breaker's
//! state, which the leader writes with its renewals when it changed (so no extra write races them).

use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, PostParams};
use tokio::sync::watch;

use crate::model::keys::{BREAKER_ANNOTATION, RECORDS_ANNOTATION};

#[derive(Debug, Clone)]
pub struct LeaseConfig {
    pub namespace: String,
    pub name: String,
    pub identity: String,
    /// A lease not renewed for this long may be taken over (draino: 15s).
    pub duration: Duration,
    /// The leader gives up if it could not renew for this long (draino: 10s).
    pub renew_deadline: Duration,
    /// How often to try (draino: 2s).
    pub retry_period: Duration,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Step {
    Create,
    Renew,
    TakeOver,
    Follow { holder: String },
}

/// What to do given the current Lease.
pub(crate) fn next_step(
    lease: Option<&LeaseSpec>,
    me: &str,
    now: Timestamp,
    default_duration: Duration,
) -> Step {
    let Some(spec) = lease else {
        return Step::Create;
    };
    let holder = spec.holder_identity.clone().unwrap_or_default();
    if holder == me {
        return Step::Renew;
    }
    // Never longer than this replica's own: every replica renews with the same duration, and a
    // Lease written with a day's (the drainer's token may write it: an attacker's review) would
    // otherwise hold every replica back for that day after one write.
    let duration = spec
        .lease_duration_seconds
        .map(|s| Duration::from_secs(s.max(0) as u64))
        .unwrap_or(default_duration)
        .min(default_duration);
    let renewed = spec
        .renew_time
        .as_ref()
        .map(|t| t.0)
        .or(spec.acquire_time.as_ref().map(|t| t.0));
    match renewed {
        Some(t) if nodemedic_common::time::add(t, duration) > now && !holder.is_empty() => {
            Step::Follow { holder }
        }
        _ => Step::TakeOver,
    }
}

fn spec(
    cfg: &LeaseConfig,
    now: Timestamp,
    acquire: Option<MicroTime>,
    transitions: i32,
) -> LeaseSpec {
    LeaseSpec {
        holder_identity: Some(cfg.identity.clone()),
        lease_duration_seconds: Some(cfg.duration.as_secs() as i32),
        acquire_time: Some(acquire.unwrap_or(MicroTime(now))),
        renew_time: Some(MicroTime(now)),
        lease_transitions: Some(transitions),
        ..Default::default()
    }
}

/// `base` (the pod's name, or the host's) with a random suffix: a Lease holder is known by its
/// identity alone, so two processes that shared one (two drainers on one host, or a restarted
/// container while the old one still runs) would both take themselves for the leader.
pub(crate) fn unique_identity(base: &str) -> String {
    let suffix: String = crate::model::seal::random_bytes()[..8]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    format!("{base}_{suffix}")
}

/// What the Lease carries besides the election.
pub(crate) struct LeaseData {
    /// The Lease as last read (every retry period, leading or not).
    pub(crate) read: watch::Sender<Option<Lease>>,
    /// The breaker state to keep in [`BREAKER_ANNOTATION`], written with the next renewal: `None`
    /// leaves the annotation as it is (a new leader has not read it back yet), `Some(None)` removes
    /// it, `Some(Some(state))` sets it.
    pub(crate) breaker: watch::Receiver<Option<Option<String>>>,
    /// The record memory earlier releases kept in [`RECORDS_ANNOTATION`] (it now lives in
    /// ConfigMaps of its own, `act::recall`): `Some(None)` removes it, once it was read back.
    pub(crate) records: watch::Receiver<Option<Option<String>>>,
}

impl LeaseData {}

/// Set (or with `Some(None)` remove) annotation `key` on `lease`; `None` leaves it.
fn annotate(lease: &mut Lease, key: &str, value: Option<Option<String>>) {
    let Some(value) = value else {
        return;
    };
    let annotations = lease
        .metadata
        .annotations
        .get_or_insert_with(Default::default);
    match value {
        Some(v) => {
            annotations.insert(key.to_string(), v);
        }
        None => {
            annotations.remove(key);
        }
    }
}

/// Whether a failed Lease request lost a race (409); any other failure is logged, at most once a
/// minute.
fn conflicted(e: &kube::Error, failing: &mut nodemedic_common::throttle::Throttle) -> bool {
    let conflict = matches!(e, kube::Error::Api(s) if s.code == 409);
    if !conflict && let Some(quiet) = failing.allow(std::time::Instant::now()) {
        let error = nodemedic_common::client::said(e);
        tracing::warn!(%error, earlier_failures_not_logged = quiet, "lease request failed; retrying (logged at most once a minute)");
    }
    conflict
}

/// Run the election until `stop`; `leader` says whether we lead.
pub(crate) async fn run(
    client: kube::Client,
    cfg: LeaseConfig,
    leader: watch::Sender<bool>,
    mut stop: watch::Receiver<bool>,
    data: LeaseData,
) {
    let api: Api<Lease> = Api::namespaced(client, &cfg.namespace);
    let mut last_renew: Option<tokio::time::Instant> = None;
    // The holder last said to lead while we follow (said again only when it changes).
    let mut followed: Option<String> = None;
    let mut failing = nodemedic_common::throttle::Throttle::default();
    loop {
        let now = Timestamp::now();
        // Ok(None): leading; Ok(Some(holder)): another replica holds the Lease.
        let outcome: Result<Option<String>, kube::Error> = async {
            let current = api.get_opt(&cfg.name).await?;
            data.read.send_replace(current.clone());
            let breaker = data.breaker.borrow().clone();
            let records = data.records.borrow().clone();
            // A Lease the manifests ship has no holder (nor perhaps a spec): it is taken, not made.
            let held = current.as_ref().map(|l| l.spec.clone().unwrap_or_default());
            let step = next_step(held.as_ref(), &cfg.identity, now, cfg.duration);
            match (step, current) {
                (Step::Create, _) => {
                    let mut lease = Lease {
                        metadata: ObjectMeta { name: Some(cfg.name.clone()), ..Default::default() },
                        spec: Some(spec(&cfg, now, None, 0)),
                    };
                    annotate(&mut lease, BREAKER_ANNOTATION, breaker);
                    annotate(&mut lease, RECORDS_ANNOTATION, records);
                    let created = api.create(&PostParams::default(), &lease).await?;
                    data.read.send_replace(Some(created));
                    tracing::info!(lease = %cfg.name, identity = %cfg.identity, "created the lease: leading");
                    Ok(None)
                }
                (Step::Renew, Some(mut lease)) => {
                    let old = lease.spec.clone().unwrap_or_default();
                    lease.spec = Some(spec(&cfg, now, old.acquire_time, old.lease_transitions.unwrap_or(0)));
                    annotate(&mut lease, BREAKER_ANNOTATION, breaker);
                    annotate(&mut lease, RECORDS_ANNOTATION, records);
                    let renewed = api.replace(&cfg.name, &PostParams::default(), &lease).await?;
                    data.read.send_replace(Some(renewed));
                    Ok(None)
                }
                (Step::TakeOver, Some(mut lease)) => {
                    let old = lease.spec.clone().unwrap_or_default();
                    // A Lease the manifests ship, never held, changes no hands when first taken.
                    let never_held = old.holder_identity.as_deref().unwrap_or_default().is_empty()
                        && old.acquire_time.is_none();
                    let transitions = old.lease_transitions.unwrap_or(0) + i32::from(!never_held);
                    lease.spec = Some(spec(&cfg, now, None, transitions));
                    let taken = api.replace(&cfg.name, &PostParams::default(), &lease).await?;
                    data.read.send_replace(Some(taken));
                    said_taken(&cfg, old.holder_identity.as_deref());
                    Ok(None)
                }
                (Step::Follow { holder }, _) => Ok(Some(holder)),
                (_, None) => Ok(Some(String::new())),
            }
        }
        .await;
        let leading = match outcome {
            Ok(None) => {
                (last_renew, followed) = (Some(tokio::time::Instant::now()), None);
                failing.reset();
                true
            }
            Ok(Some(holder)) => {
                failing.reset();
                if followed.as_ref() != Some(&holder) {
                    tracing::info!(lease = %cfg.name, %holder, "another replica leads: following (this one takes over if that one stops renewing)");
                    followed = Some(holder);
                }
                false
            }
            // Keep leading only while the renew deadline has not passed.
            Err(e) => {
                !conflicted(&e, &mut failing)
                    && *leader.borrow()
                    && last_renew.is_some_and(|t| t.elapsed() < cfg.renew_deadline)
            }
        };
        if leading != *leader.borrow() {
            tracing::info!(identity = %cfg.identity, leading, "leadership changed");
            let _ = leader.send(leading);
        }
        tokio::select! {
            _ = stop.changed() => {
                let was_leading = *leader.borrow();
                let _ = leader.send(false);
                if was_leading {
                    release(&api, &cfg).await;
                }
                return;
            }
            _ = tokio::time::sleep(cfg.retry_period) => {}
        }
    }
}

/// Give the Lease up on shutdown (client-go's `ReleaseOnCancel`): an empty holder with a one-second
/// duration, so the next replica takes over at once instead of after a whole lease duration. Written
/// with the resourceVersion read, and only while we still hold it.
async fn release(api: &Api<Lease>, cfg: &LeaseConfig) {
    let Ok(Some(mut lease)) = api.get_opt(&cfg.name).await else {
        return;
    };
    let Some(old) = lease.spec.clone() else {
        return;
    };
    if old.holder_identity.as_deref() != Some(cfg.identity.as_str()) {
        return;
    }
    let now = Timestamp::now();
    lease.spec = Some(LeaseSpec {
        holder_identity: Some(String::new()),
        lease_duration_seconds: Some(1),
        acquire_time: Some(MicroTime(now)),
        renew_time: Some(MicroTime(now)),
        lease_transitions: old.lease_transitions,
        ..Default::default()
    });
    match api.replace(&cfg.name, &PostParams::default(), &lease).await {
        Ok(_) => tracing::info!(lease = %cfg.name, identity = %cfg.identity, "released the lease"),
        Err(e) => {
            let error = nodemedic_common::client::said(&e);
            tracing::warn!(lease = %cfg.name, %error, "cannot release the lease; the next leader waits for it to expire")
        }
    }
}

/// Say that this replica took the Lease, and from whom (`previous`: its holder; none or empty when
/// a replica that stopped cleanly released it, or it was never held).
fn said_taken(cfg: &LeaseConfig, previous: Option<&str>) {
    match previous.filter(|h| !h.is_empty()) {
        Some(previous) => {
            tracing::info!(lease = %cfg.name, identity = %cfg.identity, %previous, "took over an expired lease: leading")
        }
        None => {
            tracing::info!(lease = %cfg.name, identity = %cfg.identity, "took a lease no one held: leading")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(s: i64) -> Timestamp {
        Timestamp::from_second(1_800_000_000 + s).unwrap()
    }

    fn lease(holder: &str, renewed: i64) -> LeaseSpec {
        LeaseSpec {
            holder_identity: Some(holder.into()),
            lease_duration_seconds: Some(15),
            renew_time: Some(MicroTime(t(renewed))),
            ..Default::default()
        }
    }

    /// An attacker's review (issue 76): the drainer's token wrote the Lease with a foreign holder
    /// and a long duration, and every replica followed it, a silent pause, for as long as it said.
    #[test]
    fn a_lease_held_longer_than_this_replicas_duration_expires_after_its_own() {
        let d = Duration::from_secs(15);
        let long = LeaseSpec {
            lease_duration_seconds: Some(86_400),
            ..lease("attacker", 0)
        };
        assert!(matches!(
            next_step(Some(&long), "me", t(10), d),
            Step::Follow { .. }
        ));
        assert_eq!(next_step(Some(&long), "me", t(16), d), Step::TakeOver);
    }

    #[test]
    fn the_next_step_follows_from_the_lease_its_holder_and_its_age() {
        let d = Duration::from_secs(15);
        assert_eq!(next_step(None, "a", t(0), d), Step::Create);
        assert_eq!(next_step(Some(&lease("a", 0)), "a", t(100), d), Step::Renew);
        assert_eq!(
            next_step(Some(&lease("b", 0)), "a", t(10), d),
            Step::Follow { holder: "b".into() }
        );
        assert_eq!(
            next_step(Some(&lease("b", 0)), "a", t(15), d),
            Step::TakeOver,
            "expired"
        );
        assert_eq!(
            next_step(Some(&lease("", 0)), "a", t(1), d),
            Step::TakeOver,
            "released"
        );
        assert_eq!(
            next_step(Some(&LeaseSpec::default()), "a", t(1), d),
            Step::TakeOver,
            "as the manifests ship it"
        );
        // A renewTime near the end of time (the API server accepts it) is followed, not a panic.
        let far = LeaseSpec {
            holder_identity: Some("b".into()),
            lease_duration_seconds: Some(15),
            renew_time: Some(MicroTime("9999-12-30T21:59:59Z".parse().unwrap())),
            ..Default::default()
        };
        assert_eq!(
            next_step(Some(&far), "a", t(0), d),
            Step::Follow { holder: "b".into() }
        );
    }
}
