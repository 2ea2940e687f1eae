//! Carrying out the drainer's reboot request for this node (`--reboot-requests`): a watch of the
//! drainer's requests ConfigMap, the checks of `nodemedic_common::reboot::verdict` (this Node's
//! name, UID and current bootID, the fence taint), then the reboot command, at most once per
//! request: the request's id is written to `--reboot-state` before the command runs, so a detector
//! restarting between the command and the reboot never runs it twice. Every request carried out
//! or refused gets a log line and an Event on the Node. I/O.

use std::path::{Path, PathBuf};
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::{ConfigMap, Node};
use k8s_openapi::jiff::Timestamp;
use kube::Api;
use kube::runtime::watcher;
use nodemedic_common::events::{NodeEvent, NodeEvents, Severity};
use nodemedic_common::reboot::{
    FENCE_TAINT_EFFECT, FENCE_TAINT_KEY, FENCE_TAINT_VALUE, Me, RebootRequest, Verdict,
};
use tokio::sync::watch;

/// What carrying out reboot requests adds to [`crate::report::kube::PERMISSIONS`]: reading the
/// drainer's requests ConfigMap, in its namespace (the shipped Role names that one object).
pub const REBOOT_PERMISSIONS: &[nodemedic_common::rbac::Permission] =
    &[nodemedic_common::rbac::Permission {
        group: "",
        resource: "configmaps",
        verbs: &["get", "list", "watch"],
        namespaced: true,
    }];

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
            Ok(Verdict::Past) if said != PAST => {
                tracing::info!(
                    "this node's reboot request is for an earlier boot: it rebooted since"
                );
                said = PAST.into();
            }
            Ok(Verdict::Refused(why)) if why != said => {
                tracing::warn!(%why, "a reboot request for this node is not carried out");
                event(
                    &client,
                    &node,
                    Severity::Warning,
                    "RebootRequestRefused",
                    &why,
                )
                .await;
                said = why;
            }
            Ok(Verdict::Done) if said != DONE => {
                tracing::info!(
                    "this node's reboot request was carried out already (before this detector started): not again"
                );
                said = DONE.into();
            }
            Ok(Verdict::Reboot(request)) => {
                reboot(&client, &node, &request, &opts).await;
                mine = None;
            }
            Ok(_) => {}
            Err(e) => tracing::warn!(error = %e, "cannot check the reboot request; retrying"),
        }
    }
}

/// The verdict on this node's entry `text`, from its Node, its bootID and the state.
async fn consider(
    client: &kube::Client,
    node: &str,
    text: &str,
    opts: &Options,
) -> Result<Verdict, kube::Error> {
    let n = Api::<Node>::all(client.clone()).get(node).await?;
    let fenced = n
        .spec
        .and_then(|s| s.taints)
        .unwrap_or_default()
        .iter()
        .any(|t| {
            t.key == FENCE_TAINT_KEY
                && t.value.as_deref() == Some(FENCE_TAINT_VALUE)
                && t.effect == FENCE_TAINT_EFFECT
        });
    let uid = n.metadata.uid.unwrap_or_default();
    let boot = std::fs::read_to_string(&opts.boot_id_file).unwrap_or_default();
    let me = Me {
        node,
        uid: &uid,
        boot_id: boot.trim(),
        fenced,
    };
    Ok(match done(&opts.state) {
        Ok(done) => nodemedic_common::reboot::verdict(Some(text), &me, &done),
        Err(e) => Verdict::Refused(format!(
            "cannot read which requests were carried out from {} ({e}), so a reboot could be repeated",
            opts.state.display()
        )),
    })
}

/// Remember `request` as carried out, say so, and run the command.
async fn reboot(client: &kube::Client, node: &str, request: &RebootRequest, opts: &Options) {
    if let Err(e) = remember(&opts.state, &request.id()) {
        // Without the memory a restart could reboot twice: not carried out.
        let why = format!(
            "cannot record the request in {} before rebooting ({e}); not rebooting",
            opts.state.display()
        );
        tracing::error!(%why);
        event(client, node, Severity::Warning, "RebootFailed", &why).await;
        return;
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

/// The ids of the requests carried out (none before the first); an unreadable file is an error,
/// never an empty memory.
fn done(state: &Path) -> std::io::Result<Vec<String>> {
    match std::fs::read_to_string(state) {
        Ok(t) => serde_json::from_str(&t).map_err(std::io::Error::other),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Vec::new()),
        Err(e) => Err(e),
    }
}

/// Add `id` to the ids carried out, written to a new file and renamed over the old one, synced:
/// on the disk before the command runs.
fn remember(state: &Path, id: &str) -> std::io::Result<()> {
    use std::io::Write;
    let mut ids = done(state)?;
    ids.push(id.to_string());
    let drop_first = ids.len().saturating_sub(KEPT);
    ids.drain(..drop_first);
    if let Some(dir) = state.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let tmp = state.with_extension("tmp");
    let mut f = std::fs::File::create(&tmp)?;
    f.write_all(
        serde_json::to_string(&ids)
            .expect("strings serialise")
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
    fn the_memory_of_requests_carried_out_survives_and_stays_small() {
        let dir = tempfile::tempdir().unwrap();
        let state = dir.path().join("sub/reboots.json");
        assert!(done(&state).unwrap().is_empty());
        remember(&state, "a").unwrap();
        remember(&state, "b").unwrap();
        assert_eq!(done(&state).unwrap(), ["a", "b"]);
        for i in 0..40 {
            remember(&state, &i.to_string()).unwrap();
        }
        let ids = done(&state).unwrap();
        assert_eq!(ids.len(), KEPT);
        assert_eq!(ids.last().map(String::as_str), Some("39"));
        std::fs::write(&state, "not json").unwrap();
        assert!(done(&state).is_err(), "unreadable is no memory: refused");
        assert!(remember(&state, "c").is_err(), "and nothing carried out");
    }
}
