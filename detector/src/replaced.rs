//! Evidence kept before a replacement (`--evidence-dir`): the drainer deletes a Node it replaces
//! from outside and asks nothing of its detector first, so the detector watches its own Node, and
//! once the drain record on it says `replacing`, or the Node goes, it keeps what the machine's end
//! erases, once per replacement, as before a reboot (`crate::evidence`). The record is not checked
//! for its seal (the detector has no key): one a node writes on itself only makes that node keep
//! its own evidence, bounded and pruned. I/O.

use futures::StreamExt;
use k8s_openapi::api::core::v1::Node;
use kube::Api;
use kube::runtime::watcher;
use nodemedic_common::keys::DRAIN_RECORD_ANNOTATION;
use tokio::sync::watch;

use crate::evidence::Options;
use crate::reboot::keep_evidence as keep;

/// The replacement a Node's drain record says is under way: the step's start (what tells one
/// replacement from the next), if its phase is `replacing`.
pub(crate) fn replacing(n: &Node) -> Option<String> {
    let text = n
        .metadata
        .annotations
        .as_ref()?
        .get(DRAIN_RECORD_ANNOTATION)?;
    let r: serde_json::Value = serde_json::from_str(text).ok()?;
    (r["phase"] == "replacing").then(|| r["stepAt"].as_str().unwrap_or_default().to_string())
}

/// How long after a failed watch it is tried again.
const RETRY: std::time::Duration = std::time::Duration::from_secs(5);
/// How long after a refused one (403: the credential lacks list/watch on nodes, as `deploy/reboot`
/// granted only get before, and a hand-made Role may): a grant added later is found within this.
const FORBIDDEN_RETRY: std::time::Duration = std::time::Duration::from_secs(300);

/// Whether the watch's list or watch was refused (403).
fn forbidden(e: &watcher::Error) -> bool {
    match e {
        watcher::Error::InitialListFailed(kube::Error::Api(s))
        | watcher::Error::WatchStartFailed(kube::Error::Api(s)) => s.code == 403,
        watcher::Error::WatchError(s) => s.code == 403,
        _ => false,
    }
}

/// Watch this node's Node until `stop`; keep the evidence once per replacement.
pub(crate) async fn run(
    client: kube::Client,
    node: String,
    opts: Options,
    boot_id_file: std::path::PathBuf,
    mut stop: watch::Receiver<bool>,
) {
    let api: Api<Node> = Api::all(client.clone());
    let cfg = watcher::Config::default().fields(&format!("metadata.name={node}"));
    let mut stream = Box::pin(watcher(api, cfg));
    let mut kept: Option<String> = None;
    // Said once per streak of failures, not at each retry.
    let mut failing = false;
    loop {
        let event = tokio::select! {
            r = stop.changed() => if r.is_err() || *stop.borrow() { return } else { continue },
            e = stream.next() => e,
        };
        let (n, gone) = match event {
            None => return,
            Some(Err(e)) => {
                let forbidden = forbidden(&e);
                if !failing {
                    failing = true;
                    if forbidden {
                        tracing::warn!(error = %e, "this detector's credential may not watch its Node (list and watch on nodes), so it keeps no evidence before a replacement; the replacement goes on; trying again every {} minutes", FORBIDDEN_RETRY.as_secs() / 60);
                    } else {
                        tracing::warn!(error = %e, "cannot watch this node's Node for a replacement; retrying");
                    }
                }
                let wait = if forbidden { FORBIDDEN_RETRY } else { RETRY };
                tokio::select! {
                    r = stop.changed() => if r.is_err() || *stop.borrow() { return },
                    () = tokio::time::sleep(wait) => {}
                }
                continue;
            }
            Some(Ok(e)) => {
                if std::mem::take(&mut failing) {
                    tracing::info!("watching this node's Node for a replacement again");
                }
                match e {
                    watcher::Event::Apply(n) | watcher::Event::InitApply(n) => (n, false),
                    watcher::Event::Delete(n) => (n, true),
                    _ => continue,
                }
            }
        };
        let which = match (replacing(&n), gone) {
            (Some(at), _) => at,
            (None, true) => "deleted".to_string(),
            (None, false) => continue,
        };
        if kept.as_deref() == Some(which.as_str()) || (gone && kept.is_some()) {
            continue;
        }
        kept = Some(which);
        let boot = std::fs::read_to_string(&boot_id_file).unwrap_or_default();
        keep(&client, &node, boot.trim(), &opts, "replacement", Some(n)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refused_list_or_watch_is_told_from_other_failures() {
        let status = |code: u16| kube::core::Status {
            code,
            ..kube::core::Status::failure("nodes is forbidden", "Forbidden")
        };
        let api = |code| kube::Error::Api(Box::new(status(code)));
        assert!(forbidden(&watcher::Error::InitialListFailed(api(403))));
        assert!(forbidden(&watcher::Error::WatchStartFailed(api(403))));
        assert!(forbidden(&watcher::Error::WatchError(Box::new(status(
            403
        )))));
        assert!(!forbidden(&watcher::Error::InitialListFailed(api(500))));
        assert!(!forbidden(&watcher::Error::WatchError(Box::new(status(
            410
        )))));
    }

    #[test]
    fn a_record_in_phase_replacing_names_its_replacement() {
        let node = |record: &str| -> Node {
            serde_json::from_value(serde_json::json!({"metadata": {"name": "n",
                "annotations": {DRAIN_RECORD_ANNOTATION: record}}}))
            .unwrap()
        };
        let r = node(r#"{"phase":"replacing","stepAt":"2026-12-02T10:00:00Z"}"#);
        assert_eq!(replacing(&r).as_deref(), Some("2026-12-02T10:00:00Z"));
        assert_eq!(replacing(&node(r#"{"phase":"drained"}"#)), None);
        assert_eq!(replacing(&node("not json")), None);
        let bare: Node =
            serde_json::from_value(serde_json::json!({"metadata": {"name": "n"}})).unwrap();
        assert_eq!(replacing(&bare), None);
    }
}
