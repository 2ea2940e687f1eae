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
    loop {
        let event = tokio::select! {
            r = stop.changed() => if r.is_err() || *stop.borrow() { return } else { continue },
            e = stream.next() => e,
        };
        let (n, gone) = match event {
            None => return,
            Some(Ok(watcher::Event::Apply(n) | watcher::Event::InitApply(n))) => (n, false),
            Some(Ok(watcher::Event::Delete(n))) => (n, true),
            Some(Ok(_)) => continue,
            Some(Err(e)) => {
                tracing::warn!(error = %e, "cannot watch this node's Node for a replacement; retrying");
                tokio::time::sleep(std::time::Duration::from_secs(5)).await;
                continue;
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
