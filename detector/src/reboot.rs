//! Carrying out the drainer's reboot request for this node (`--reboot-requests`): a watch of the
//! drainer's requests ConfigMap, the checks of `nodemedic_common::reboot::verdict` (the drainer's
//! signature, verified with `--reboot-public-key`; this Node's name, UID and current bootID, the
//! fence taint; and the detector's own: cordoned, no pods left but DaemonSet, mirror and
//! not-evicted ones, no control-plane role unless `--reboot-control-plane`, under
//! `--reboot-max-per-day`), then the reboot command, at most once per request: the request's id is
//! written to `--reboot-state` before the command runs, so a detector restarting between the
//! command and the reboot never runs it twice. Every request carried out or refused gets a log
//! line and an Event on the Node. I/O.

use std::path::{Path, PathBuf};
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::{ConfigMap, Node, Pod};
use k8s_openapi::jiff::Timestamp;
use kube::Api;
use kube::runtime::watcher;
use nodemedic_common::events::{NodeEvent, NodeEvents, Severity};
use nodemedic_common::reboot::{
    FENCE_TAINT_EFFECT, FENCE_TAINT_KEY, FENCE_TAINT_VALUE, Guard, Me, RebootRequest, Verdict,
    VerifyingKey,
};
use tokio::sync::watch;

/// What carrying out reboot requests adds to [`crate::report::kube::PERMISSIONS`]: reading the
/// drainer's requests ConfigMap, in its namespace (the shipped Role names that one object), and
/// listing the pods bound to its node (`spec.nodeName`: RBAC cannot narrow a list to a field, so
/// the ClusterRole reads pods cluster-wide), to refuse a reboot while any but DaemonSet, mirror and
/// not-evicted pods still run there.
pub const REBOOT_PERMISSIONS: &[nodemedic_common::rbac::Permission] = &[
    nodemedic_common::rbac::Permission {
        group: "",
        resource: "configmaps",
        verbs: &["get", "list", "watch"],
        namespaced: true,
    },
    nodemedic_common::rbac::Permission {
        group: "",
        resource: "pods",
        verbs: &["list"],
        namespaced: false,
    },
    // Its own Node watched, by a field selector on its name (`crate::replaced`): the evidence kept
    // before a replacement. RBAC cannot narrow a list or watch to one name.
    nodemedic_common::rbac::Permission {
        group: "",
        resource: "nodes",
        verbs: &["list", "watch"],
        namespaced: false,
    },
];

/// The labels that give a Node a control-plane role.
const CONTROL_PLANE_LABELS: [&str; 2] = [
    "node-role.kubernetes.io/control-plane",
    "node-role.kubernetes.io/master",
];
/// A day: how long a reboot counts against `--reboot-max-per-day`.
const DAY: Duration = Duration::from_secs(24 * 3600);

/// The Event source of what this module says.
const SOURCE: &str = "nodemedic-detector";
/// How often an entry for this node that is not (yet) ours to carry out is looked at again (the
/// fence taint may follow the request by a moment).
const RECHECK: Duration = Duration::from_secs(5);
/// What `run` said last, when it was that the request was carried out already.
const DONE: &str = "done";
/// ... that it was for an earlier boot.
const PAST: &str = "past";
/// How many carried-out requests the state keeps.
const KEPT: usize = 16;

/// What `detector run` is told about reboots.
#[derive(Debug, Clone)]
pub struct Options {
    /// The drainer's requests ConfigMap, `(namespace, name)`.
    pub requests: (String, String),
    /// The reboot command and its arguments.
    pub command: Vec<String>,
    /// Where the ids of the requests carried out are kept.
    pub state: PathBuf,
    /// Where the kernel says which boot this is.
    pub boot_id_file: PathBuf,
    /// The drainer's public key (`--reboot-public-key`): only requests it signed are carried out.
    pub public_key: VerifyingKey,
    /// Whether a control-plane node may be rebooted (`--reboot-control-plane`).
    pub control_plane: bool,
    /// At most this many reboots in 24 hours (`--reboot-max-per-day`).
    pub max_per_day: u32,
    /// Evidence kept before each reboot (`--evidence-dir`; None: none).
    pub evidence: Option<crate::evidence::Options>,
    /// How a component is restarted (a ladder's `restart kubelet` / `restart containerd`).
    pub restart: crate::restart::Options,
}

/// Watch the requests and carry out this node's, until `stop`.
pub(crate) async fn run(
    client: kube::Client,
    node: String,
    opts: Options,
    mut stop: watch::Receiver<bool>,
) {
    let (namespace, name) = opts.requests.clone();
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), &namespace);
    let cfg = watcher::Config::default().fields(&format!("metadata.name={name}"));
    let mut stream = Box::pin(watcher(api, cfg));
    let mut mine: Option<String> = None;
    let mut said = String::new();
    // Only a refused entry is looked at again by the clock (the fence may follow the request).
    let mut recheck_due = false;
    tracing::info!(configmap = %format!("{namespace}/{name}"), command = %opts.command.join(" "),
        "carrying out the drainer's reboot requests for this node");
    loop {
        let recheck = async {
            match (&mine, recheck_due) {
                (Some(_), true) => tokio::time::sleep(RECHECK).await,
                _ => std::future::pending().await,
            }
        };
        tokio::select! {
            r = stop.changed() => if r.is_err() || *stop.borrow() { return },
            e = stream.next() => match e {
                None => return,
                Some(Ok(watcher::Event::Apply(cm) | watcher::Event::InitApply(cm))) => {
                    mine = cm.data.and_then(|mut d| d.remove(&node));
                }
                Some(Ok(watcher::Event::Delete(_))) => mine = None,
                Some(Ok(_)) => {}
                Some(Err(e)) => {
                    tracing::warn!(error = %e, "cannot watch the reboot requests; retrying");
                    tokio::time::sleep(RECHECK).await;
                    continue;
                }
            },
            () = recheck => {}
        }
        let Some(text) = mine.as_deref() else {
            continue;
        };
        let verdict = consider(&client, &node, text, &opts).await;
        recheck_due = matches!(verdict, Ok(Verdict::Refused(_)) | Err(_));
        match verdict {
            Ok(Verdict::Reboot(request)) => {
                reboot(&client, &node, &request, &opts).await;
                mine = None;
            }
            Ok(Verdict::Restart(request)) => {
                restart(&client, &node, &request, &opts).await;
                mine = None;
            }
            Ok(v) => {
                if let Some(news) = news(&v, &said) {
                    if let Some((severity, message)) = &news.event {
                        event(&client, &node, *severity, "RebootRequestRefused", message).await;
                    }
                    said = news.key;
                }
            }
            Err(e) => tracing::warn!(error = %e, "cannot check the reboot request; retrying"),
        }
    }
}

/// What is said, once, about a verdict that reboots nothing.
#[derive(Debug, PartialEq)]
struct News {
    /// What marks it said (the same verdict again says nothing).
    key: String,
    /// The `RebootRequestRefused` Event, if it gets one.
    event: Option<(Severity, String)>,
}

/// What to say about `v` (logged here, its Event written by the caller), unless `said` already.
/// A refusal is a Warning Event; a signed request for an earlier boot of this machine that this
/// detector did not carry out (the node rebooted by other means, or an old request) a Normal one,
/// as SECURITY.md promises; one carried out already only a log line.
fn news(v: &Verdict, said: &str) -> Option<News> {
    let key = match v {
        Verdict::Refused(why) => why.as_str(),
        Verdict::Past => PAST,
        Verdict::Done => DONE,
        Verdict::None | Verdict::Reboot(_) | Verdict::Restart(_) => return None,
    };
    if key == said {
        return None;
    }
    let event = match v {
        Verdict::Refused(why) => {
            tracing::warn!(%why, "a reboot request for this node is not carried out");
            Some((Severity::Warning, why.clone()))
        }
        Verdict::Past => {
            let why = "the request is for an earlier boot of this machine, which has booted since: not rebooted again";
            tracing::info!(%why, "a reboot request for this node is not carried out");
            Some((Severity::Normal, why.to_string()))
        }
        _ => {
            tracing::info!(
                "this node's reboot request was carried out already (before this detector started): not again"
            );
            None
        }
    };
    Some(News {
        key: key.to_string(),
        event,
    })
}

/// The verdict on this node's entry `text`, from its Node, its pods, its bootID and the state.
async fn consider(
    client: &kube::Client,
    node: &str,
    text: &str,
    opts: &Options,
) -> Result<Verdict, kube::Error> {
    let n = Api::<Node>::all(client.clone()).get(node).await?;
    let spec = n.spec.clone().unwrap_or_default();
    let fenced = spec.taints.unwrap_or_default().iter().any(|t| {
        t.key == FENCE_TAINT_KEY
            && t.value.as_deref() == Some(FENCE_TAINT_VALUE)
            && t.effect == FENCE_TAINT_EFFECT
    });
    let labels = n.metadata.labels.clone().unwrap_or_default();
    let control_plane = CONTROL_PLANE_LABELS
        .into_iter()
        .find(|l| labels.contains_key(*l));
    let uid = n.metadata.uid.clone().unwrap_or_default();
    let boot = std::fs::read_to_string(&opts.boot_id_file).unwrap_or_default();
    let vetoed = n
        .metadata
        .annotations
        .as_ref()
        .is_some_and(|a| a.contains_key(nodemedic_common::keys::DO_NOT_REMEDIATE_ANNOTATION));
    // Its conditions as the API server holds them now: a request names the problem it is for.
    let conditions: Vec<String> = (n.status.as_ref())
        .and_then(|s| s.conditions.as_ref())
        .map(|cs| {
            cs.iter()
                .map(|c| format!("{}={}", c.type_, c.status))
                .collect()
        })
        .unwrap_or_default();
    let me = Me {
        node,
        uid: &uid,
        boot_id: boot.trim(),
        fenced,
        vetoed,
        now: Timestamp::now(),
        conditions: &conditions,
    };
    let state = match State::read(&opts.state) {
        Ok(s) => s,
        Err(e) => {
            return Ok(Verdict::Refused(format!(
                "cannot read which requests were carried out from {} ({e}), so a reboot could be repeated",
                opts.state.display()
            )));
        }
    };
    let pods = left_running(client, node).await?;
    let guard = Guard {
        cordoned: spec.unschedulable == Some(true),
        pods: &pods,
        control_plane,
        control_plane_allowed: opts.control_plane,
        today: (state.today(Timestamp::now()), opts.max_per_day),
        restarts_today: (
            state.restarts_today(Timestamp::now()),
            opts.restart.max_per_day,
        ),
    };
    Ok(nodemedic_common::reboot::verdict(
        Some(text),
        &me,
        &state.done,
        &opts.public_key,
        &guard,
    ))
}

/// The pods bound to `node` that still run, other than DaemonSet, mirror and not-evicted ones.
async fn left_running(client: &kube::Client, node: &str) -> Result<Vec<String>, kube::Error> {
    let lp = kube::api::ListParams::default().fields(&format!("spec.nodeName={node}"));
    let pods = Api::<Pod>::all(client.clone()).list(&lp).await?;
    Ok(pods
        .items
        .iter()
        .filter(|p| stays(p))
        .map(|p| {
            let m = &p.metadata;
            format!(
                "{}/{}",
                m.namespace.as_deref().unwrap_or_default(),
                m.name.as_deref().unwrap_or_default()
            )
        })
        .collect())
}

/// Whether `p` keeps its node from being rebooted: it runs (not finished), and is neither a
/// DaemonSet's pod nor a mirror, not-evicted or critical one.
fn stays(p: &Pod) -> bool {
    let finished = p
        .status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .is_some_and(|ph| ph == "Succeeded" || ph == "Failed");
    let daemonset = p
        .metadata
        .owner_references
        .iter()
        .flatten()
        .any(|o| o.controller == Some(true) && o.kind == "DaemonSet");
    let exempt = nodemedic_common::exempt::never_evicted(
        p.metadata.namespace.as_deref().unwrap_or_default(),
        &p.metadata.annotations.clone().unwrap_or_default(),
        p.spec.as_ref().and_then(|s| s.priority),
    )
    .is_some();
    !finished && !daemonset && !exempt
}

/// Remember `request` as carried out, say so, and run the command.
async fn reboot(client: &kube::Client, node: &str, request: &RebootRequest, opts: &Options) {
    if let Err(e) = remember(&opts.state, &request.id(), Timestamp::now(), false) {
        // Without the memory a restart could reboot twice: not carried out.
        let why = format!(
            "cannot record the request in {} before rebooting ({e}); not rebooting",
            opts.state.display()
        );
        tracing::error!(%why);
        event(client, node, Severity::Warning, "RebootFailed", &why).await;
        return;
    }
    if let Some(evidence) = &opts.evidence {
        keep_evidence(client, node, &request.boot_id, evidence, "reboot", None).await;
    }
    let message = format!(
        "Rebooting at the drainer's request (boot {}, requested {}): {}",
        request.boot_id,
        request.requested,
        opts.command.join(" ")
    );
    tracing::warn!(boot_id = %request.boot_id, requested = %request.requested, "rebooting at the drainer's request");
    event(client, node, Severity::Normal, "Rebooting", &message).await;
    let Some((program, args)) = opts.command.split_first() else {
        return;
    };
    let out = tokio::process::Command::new(program)
        .args(args)
        .output()
        .await;
    let failed = match out {
        Ok(o) if o.status.success() => return,
        Ok(o) => format!(
            "the reboot command exited with {}: {}",
            o.status,
            String::from_utf8_lossy(&o.stderr).trim()
        ),
        Err(e) => format!("cannot run the reboot command {program:?}: {e}"),
    };
    tracing::error!(error = %failed, "reboot failed");
    event(client, node, Severity::Warning, "RebootFailed", &failed).await;
}

/// Remember `request` as carried out, say so, and restart the component it names: active again,
/// or started again (`crate::restart`), and said.
async fn restart(client: &kube::Client, node: &str, request: &RebootRequest, opts: &Options) {
    let component = request.action.component().unwrap_or_default();
    let unit = opts
        .restart
        .units
        .get(component)
        .cloned()
        .unwrap_or_default();
    if let Err(e) = remember(&opts.state, &request.id(), Timestamp::now(), true) {
        let why = format!(
            "cannot record the request in {} before restarting {unit} ({e}); not restarting",
            opts.state.display()
        );
        tracing::error!(%why);
        event(
            client,
            node,
            Severity::Warning,
            "ComponentRestartFailed",
            &why,
        )
        .await;
        return;
    }
    tracing::warn!(%unit, requested = %request.requested, "restarting at the drainer's request");
    let message = format!(
        "Restarting {unit} ({component}) at the drainer's request (requested {})",
        request.requested
    );
    event(
        client,
        node,
        Severity::Normal,
        "RestartingComponent",
        &message,
    )
    .await;
    let outcome = crate::restart::restart(&opts.restart, component).await;
    let (reason, warning, message) = outcome.said(opts.restart.settle);
    match warning {
        true => tracing::warn!(%unit, %message, "restart"),
        false => tracing::info!(%unit, %message, "restart"),
    }
    let severity = if warning {
        Severity::Warning
    } else {
        Severity::Normal
    };
    event(client, node, severity, reason, &message).await;
}

/// Keep what the `what` (a reboot, a replacement) erases (`crate::evidence`), and say where: never
/// in its way. `seen`: the Node as last seen, when the caller has it (a Node being deleted may
/// be gone by the time it would be read); else it is read.
pub(crate) async fn keep_evidence(
    client: &kube::Client,
    node: &str,
    boot_id: &str,
    opts: &crate::evidence::Options,
    what: &str,
    seen: Option<Node>,
) {
    let read = match seen {
        Some(n) => Some(n),
        None => Api::<Node>::all(client.clone()).get(node).await.ok(),
    };
    let json = read.map(|n| {
        let status = n.status.unwrap_or_default();
        serde_json::json!({"name": node, "conditions": status.conditions, "nodeInfo": status.node_info})
    });
    match crate::evidence::save(opts, node, boot_id, json).await {
        Ok(saved) => {
            let message = saved.said(what);
            tracing::info!(path = %saved.path.display(), files = saved.files.len(), %what, "diagnostics kept");
            let severity = match saved.missing.is_empty() && saved.collector.is_none() {
                true => Severity::Normal,
                false => Severity::Warning,
            };
            event(client, node, severity, "EvidenceKept", &message).await;
        }
        Err(why) => {
            tracing::warn!(%why, %what, "no diagnostics kept; going on anyway");
            let message = format!("No diagnostics kept before the {what}: {why}");
            event(client, node, Severity::Warning, "EvidenceNotKept", &message).await;
        }
    }
}

/// What `--reboot-state` keeps: the ids of the requests carried out, and when the reboots of the
/// last day began. Earlier releases kept the ids alone (a JSON list): read as such.
#[derive(Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct State {
    done: Vec<String>,
    #[serde(default)]
    rebooted: Vec<Timestamp>,
    /// When the restarts of the last day began.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    restarted: Vec<Timestamp>,
}

impl State {
    /// None before the first reboot; an unreadable file is an error, never an empty memory.
    fn read(path: &Path) -> std::io::Result<State> {
        let text = match std::fs::read_to_string(path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(State::default()),
            Err(e) => return Err(e),
        };
        if let Ok(done) = serde_json::from_str::<Vec<String>>(&text) {
            return Ok(State {
                done,
                ..State::default()
            });
        }
        serde_json::from_str(&text).map_err(std::io::Error::other)
    }

    /// The reboots begun within the day before `now`.
    fn today(&self, now: Timestamp) -> u32 {
        let from = nodemedic_common::time::sub(now, DAY);
        self.rebooted.iter().filter(|t| **t > from).count() as u32
    }

    /// The restarts begun within the day before `now`.
    fn restarts_today(&self, now: Timestamp) -> u32 {
        let from = nodemedic_common::time::sub(now, DAY);
        self.restarted.iter().filter(|t| **t > from).count() as u32
    }
}

/// Add `id` to the ids carried out and `at` to the reboots (or the restarts), written to a new
/// file and renamed over the old one, synced: on the disk before the command runs.
fn remember(state: &Path, id: &str, at: Timestamp, restart: bool) -> std::io::Result<()> {
    use std::io::Write;
    let mut s = State::read(state)?;
    s.done.push(id.to_string());
    let drop_first = s.done.len().saturating_sub(KEPT);
    s.done.drain(..drop_first);
    let from = nodemedic_common::time::sub(at, DAY);
    s.rebooted.retain(|t| *t > from);
    s.restarted.retain(|t| *t > from);
    match restart {
        false => s.rebooted.push(at),
        true => s.restarted.push(at),
    }
    if let Some(dir) = state.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let tmp = state.with_extension("tmp");
    let mut f = std::fs::File::create(&tmp)?;
    f.write_all(
        serde_json::to_string(&s)
            .expect("plain data serialises")
            .as_bytes(),
    )?;
    f.sync_all()?;
    std::fs::rename(&tmp, state)
}

async fn event(client: &kube::Client, node: &str, severity: Severity, reason: &str, message: &str) {
    let now = Timestamp::now();
    let ev = NodeEvent {
        source: SOURCE.into(),
        severity,
        reason: reason.into(),
        message: message.into(),
        count: 1,
        first_seen: now,
        last_seen: now,
    };
    if let Err(e) = NodeEvents::new(client.clone(), node).create(&ev).await {
        tracing::warn!(error = %e, %reason, "cannot write the Event");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_for_an_earlier_boot_gets_its_refused_event_once() {
        let past = news(&Verdict::Past, "").expect("said");
        let (severity, message) = past.event.expect("an Event, as SECURITY.md says");
        assert_eq!(severity, Severity::Normal);
        assert!(message.contains("earlier boot"), "{message}");
        assert_eq!(news(&Verdict::Past, &past.key), None, "once");
        let refused = news(&Verdict::Refused("not signed".into()), &past.key).unwrap();
        assert_eq!(
            refused.event,
            Some((Severity::Warning, "not signed".into()))
        );
        let done = news(&Verdict::Done, &refused.key).unwrap();
        assert_eq!(done.event, None, "carried out already: only logged");
        assert_eq!(news(&Verdict::None, ""), None);
    }

    #[test]
    fn the_memory_of_requests_carried_out_survives_and_stays_small() {
        let dir = tempfile::tempdir().unwrap();
        let state = dir.path().join("sub/reboots.json");
        let t = |s: i64| Timestamp::from_second(1_800_000_000 + s).unwrap();
        assert_eq!(State::read(&state).unwrap(), State::default());
        remember(&state, "a", t(0), false).unwrap();
        remember(&state, "b", t(10), false).unwrap();
        let s = State::read(&state).unwrap();
        assert_eq!(s.done, ["a", "b"]);
        assert_eq!(s.today(t(20)), 2);
        assert_eq!(
            s.today(t(24 * 3600 + 5)),
            1,
            "a day on, the first no longer counts"
        );
        for i in 0..40 {
            remember(&state, &i.to_string(), t(100 + i), false).unwrap();
        }
        let s = State::read(&state).unwrap();
        assert_eq!(s.done.len(), KEPT);
        assert_eq!(s.done.last().map(String::as_str), Some("39"));
        // What earlier releases wrote: the ids alone.
        std::fs::write(&state, r#"["old"]"#).unwrap();
        assert_eq!(State::read(&state).unwrap().done, ["old"]);
        std::fs::write(&state, "not json").unwrap();
        assert!(
            State::read(&state).is_err(),
            "unreadable is no memory: refused"
        );
        assert!(
            remember(&state, "c", t(0), false).is_err(),
            "and nothing carried out"
        );
    }

    #[test]
    fn daemonset_mirror_not_evicted_and_finished_pods_never_keep_a_node_from_its_reboot() {
        let pod = |v: serde_json::Value| -> Pod { serde_json::from_value(v).unwrap() };
        let ds = pod(
            serde_json::json!({"metadata": {"name": "a", "namespace": "kube-system",
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "d", "uid": "u", "controller": true}]}}),
        );
        let mirror = pod(
            serde_json::json!({"metadata": {"name": "m", "namespace": "kube-system",
            "annotations": {"kubernetes.io/config.mirror": "x"}}}),
        );
        let not_evicted = pod(
            serde_json::json!({"metadata": {"name": "n", "namespace": "kube-system",
            "annotations": {"scheduler.alpha.kubernetes.io/not-evicted-pod": ""}}}),
        );
        let done = pod(
            serde_json::json!({"metadata": {"name": "j", "namespace": "app"}, "status": {"phase": "Succeeded"}}),
        );
        let app = pod(
            serde_json::json!({"metadata": {"name": "web", "namespace": "app",
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "r", "uid": "u", "controller": true}]}}),
        );
        for p in [&ds, &mirror, &not_evicted, &done] {
            assert!(!stays(p), "{:?}", p.metadata.name);
        }
        assert!(stays(&app));
    }
}
