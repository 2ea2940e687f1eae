//! The live cluster for `drainer plan --live` and `kubectl nodemedic`: nodes, pods and
//! PodDisruptionBudgets read through the current kubeconfig (read-only), and a node-by-node summary
//! of what nodemedic reports and did (`kubectl nodemedic conditions`). I/O for the reads; the
//! summary of a node is pure.

use std::io::Write;
use std::path::Path;

use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::jiff::Timestamp;
use kube::Api;
use kube::api::ListParams;
use nodemedic_common::keys::{DRAIN_RECORD_ANNOTATION, OWNED_CONDITIONS_ANNOTATION};

use crate::model::node::NodeView;
use crate::model::record::Record;

/// The name the command was run as, for its messages: `kubectl nodemedic` as the plugin, else
/// `drainer` (an operator who typed one should not read the other).
static PROGRAM: std::sync::OnceLock<&'static str> = std::sync::OnceLock::new();

/// Name the command for its messages (once, at start).
pub(crate) fn set_program(name: &'static str) {
    let _ = PROGRAM.set(name);
}

/// The API server the read-only tools talk to, for their errors (a connection error names it).
static SERVER: std::sync::OnceLock<String> = std::sync::OnceLock::new();

/// `from URL`, the server the tools read, for error messages.
fn server() -> String {
    SERVER.get().map_or_else(String::new, |u| {
        format!(" from {}", u.trim_end_matches('/'))
    })
}

/// The name messages start with.
pub(crate) fn program() -> &'static str {
    PROGRAM.get().copied().unwrap_or("drainer")
}

/// What the read-only tools (`kubectl nodemedic`, `drainer plan --live`, `explain`, `backtest`,
/// `config --live`) read, and nothing else: `deploy/kubectl-plugin` grants exactly this (a test
/// checks it), the namespaced part by name in the drainer's namespace.
pub const PERMISSIONS: &[nodemedic_common::rbac::Permission] = &[
    grant("", "nodes", &["list"], false),
    grant("", "pods", &["list"], false),
    grant("", "events", &["list"], false),
    grant("policy", "poddisruptionbudgets", &["list"], false),
    grant("coordination.k8s.io", "leases", &["get"], true),
    grant("", "configmaps", &["get"], true),
    grant("apps", "daemonsets", &["get"], true),
];

const fn grant(
    group: &'static str,
    resource: &'static str,
    verbs: &'static [&'static str],
    namespaced: bool,
) -> nodemedic_common::rbac::Permission {
    nodemedic_common::rbac::Permission {
        group,
        resource,
        verbs,
        namespaced,
    }
}

/// Where a refusal (403) sends the reader: the roles that grant the tools' reads.
fn refused_hint(e: &kube::Error) -> &'static str {
    match e {
        kube::Error::Api(s) if s.code == 403 => {
            "; kubectl nodemedic needs read access: `kubectl apply -k deploy/kubectl-plugin` ships it as two roles named nodemedic-plugin-reader for you to be bound to (docs/install.md)"
        }
        _ => "",
    }
}

/// Objects listed per request (a 5,000-node cluster's pods arrive in pages, not one response).
const PAGE: u32 = 500;

/// Errors reaching or reading the cluster.
#[derive(Debug, thiserror::Error)]
pub(crate) enum LiveError {
    #[error("cannot read the kubeconfig {}: {source}", path.display())]
    Kubeconfig {
        path: std::path::PathBuf,
        #[source]
        source: kube::config::KubeconfigError,
    },
    #[error("no usable Kubernetes configuration: {0}")]
    Config(String),
    #[error(transparent)]
    Client(#[from] nodemedic_common::client::Error),
    #[error("cannot read {what}{}: {}{}", server(), nodemedic_common::client::said(.source), refused_hint(.source))]
    Get {
        what: String,
        #[source]
        source: kube::Error,
    },
    #[error("cannot list {what}{}: {}{}", server(), nodemedic_common::client::said(.source), refused_hint(.source))]
    List {
        what: &'static str,
        #[source]
        source: kube::Error,
    },
}

/// A client for the cluster of `kubeconfig` (default: `KUBECONFIG`, `~/.kube/config`, or the
/// in-cluster service account) and `context` (default: the current one).
pub(crate) async fn client(
    kubeconfig: Option<&Path>,
    context: Option<&str>,
) -> Result<kube::Client, LiveError> {
    let options = kube::config::KubeConfigOptions {
        context: context.map(String::from),
        ..Default::default()
    };
    let config = match kubeconfig {
        Some(path) => {
            let kc = kube::config::Kubeconfig::read_from(path).map_err(|source| {
                LiveError::Kubeconfig {
                    path: path.to_path_buf(),
                    source,
                }
            })?;
            kube::Config::from_custom_kubeconfig(kc, &options)
                .await
                .map_err(|e| LiveError::Config(e.to_string()))?
        }
        None if context.is_some() => kube::Config::from_kubeconfig(&options)
            .await
            .map_err(|e| LiveError::Config(e.to_string()))?,
        None => kube::Config::infer()
            .await
            .map_err(|e| LiveError::Config(e.to_string()))?,
    };
    let _ = SERVER.set(config.cluster_url.to_string());
    Ok(nodemedic_common::client::from_config(
        config,
        nodemedic_common::keys::DRAINER_MANAGER,
    )?)
}

/// What `drainer plan` reads, from the live cluster.
pub(crate) struct Snapshot {
    pub(crate) nodes: Vec<Node>,
    pub(crate) pods: Vec<Pod>,
    pub(crate) pdbs: Vec<PodDisruptionBudget>,
    /// The drainer's Lease (a pause is set there), if it exists.
    pub(crate) lease: Option<k8s_openapi::api::coordination::v1::Lease>,
    /// The drainer's NodeFlapping Events (which nodes it saw flapping).
    pub(crate) flapping: Vec<k8s_openapi::api::core::v1::Event>,
}

/// List nodes, pods and PodDisruptionBudgets (all namespaces), a page at a time, and get the
/// drainer's Lease `namespace/name`.
pub(crate) async fn read(
    client: &kube::Client,
    lease_namespace: &str,
    lease_name: &str,
) -> Result<Snapshot, LiveError> {
    let leases: Api<k8s_openapi::api::coordination::v1::Lease> =
        Api::namespaced(client.clone(), lease_namespace);
    Ok(Snapshot {
        nodes: list_all(Api::all(client.clone()), "nodes").await?,
        pods: list_all(Api::all(client.clone()), "pods").await?,
        pdbs: list_all(Api::all(client.clone()), "poddisruptionbudgets").await?,
        lease: leases
            .get_opt(lease_name)
            .await
            .map_err(|source| LiveError::List {
                what: "the drainer's lease",
                source,
            })?,
        // Node Events live in `default`, as the kubelet's do.
        flapping: Api::<k8s_openapi::api::core::v1::Event>::namespaced(client.clone(), "default")
            .list(&ListParams::default().fields(&format!(
                "reason={}",
                crate::model::occurrence::reason::NODE_FLAPPING
            )))
            .await
            .map_err(|source| LiveError::List {
                what: "NodeFlapping events",
                source,
            })?
            .items,
    })
}

/// The DaemonSet `namespace/name` (where the detector runs), if it exists and may be read; one
/// that may not (403) is as good as absent here: the watchdog then watches only nodes whose
/// detector reported before, and says so.
pub(crate) async fn daemon_set(
    client: &kube::Client,
    namespace: &str,
    name: &str,
) -> Result<Option<k8s_openapi::api::apps::v1::DaemonSet>, LiveError> {
    let api: Api<k8s_openapi::api::apps::v1::DaemonSet> =
        Api::namespaced(client.clone(), namespace);
    match api.get_opt(name).await {
        Ok(ds) => Ok(ds),
        Err(kube::Error::Api(s)) if s.code == 403 => {
            eprintln!(
                "{}: may not read the detector DaemonSet {namespace}/{name}: nodes that never reported are not shown silent",
                program()
            );
            Ok(None)
        }
        Err(source) => Err(LiveError::List {
            what: "the detector DaemonSet",
            source,
        }),
    }
}

/// The drainer's Events about `node` (its history, for `explain`), from the `default` namespace
/// where node Events live.
pub(crate) async fn node_events(
    client: &kube::Client,
    node: &str,
) -> Result<Vec<k8s_openapi::api::core::v1::Event>, LiveError> {
    let api = Api::<k8s_openapi::api::core::v1::Event>::namespaced(client.clone(), "default");
    let params = ListParams::default().fields(&format!("involvedObject.name={node}"));
    let list = api.list(&params).await.map_err(|source| LiveError::List {
        what: "the node's events",
        source,
    })?;
    Ok(list
        .items
        .into_iter()
        .filter(|e| e.reason.as_deref() != Some(crate::model::occurrence::reason::NODE_FLAPPING))
        .collect())
}

/// Every Event about a Node, in every namespace, a page at a time (the history a backtest
/// replays).
pub(crate) async fn node_events_all(
    client: &kube::Client,
) -> Result<Vec<k8s_openapi::api::core::v1::Event>, LiveError> {
    let events: Vec<k8s_openapi::api::core::v1::Event> =
        list_all(Api::all(client.clone()), "events").await?;
    Ok(events
        .into_iter()
        .filter(|e| e.involved_object.kind.as_deref() == Some("Node"))
        .collect())
}

/// Only the nodes (for `kubectl nodemedic conditions`).
pub(crate) async fn read_nodes(client: &kube::Client) -> Result<Vec<Node>, LiveError> {
    list_all(Api::all(client.clone()), "nodes").await
}

/// Every object, a page at a time. One that cannot be decoded (a time past 9999-12-30T22:00Z, which
/// the API server takes) is skipped with a warning on stderr instead of failing the whole list.
async fn list_all<K>(
    api: Api<nodemedic_common::lenient::Lenient<K>>,
    what: &'static str,
) -> Result<Vec<K>, LiveError>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug + 'static,
{
    use nodemedic_common::lenient::Lenient;
    let mut out = Vec::new();
    let mut params = ListParams::default().limit(PAGE);
    loop {
        let page = api
            .list(&params)
            .await
            .map_err(|source| LiveError::List { what, source })?;
        for item in page.items {
            match item {
                Lenient::Ok(k) => out.push(k),
                bad @ Lenient::Malformed { .. } => {
                    if let Lenient::Malformed { error, .. } = &bad {
                        eprintln!(
                            "{}: skipped {what} {}: cannot decode it: {error}",
                            program(),
                            bad.id()
                        );
                    }
                }
            }
        }
        match page.metadata.continue_.filter(|c| !c.is_empty()) {
            Some(token) => params = params.continue_token(&token),
            None => return Ok(out),
        }
    }
}

/// One node as `kubectl nodemedic conditions` shows it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub(crate) struct NodeSummary {
    pub(crate) node: String,
    pub(crate) ready: String,
    pub(crate) schedulable: bool,
    /// The conditions the detector owns on this node (its annotation names them).
    pub(crate) conditions: Vec<ConditionSummary>,
    /// The drainer's record, in words; `None` without one.
    pub(crate) drain: Option<String>,
    /// Its detector has not been heard from since then (the drainer's watchdog: silent).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) silent_since: Option<Timestamp>,
}

#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub(crate) struct ConditionSummary {
    #[serde(rename = "type")]
    pub(crate) type_: String,
    pub(crate) status: String,
    pub(crate) reason: String,
    pub(crate) since: Option<Timestamp>,
}

/// Summarise a node (pure): its detector's conditions, its drain record, and whether its detector
/// is silent at `now` by the watchdog settings in `cfg` (the selector is not applied: every node
/// is shown).
/// The kubelet's own condition types: the READY and SCHEDULABLE columns say what matters of them.
const KUBELET_CONDITIONS: &[&str] = &[
    "Ready",
    "MemoryPressure",
    "DiskPressure",
    "PIDPressure",
    "NetworkUnavailable",
];

/// The condition types a node's row shows, in this order, each once: those its detector says it
/// owns (the annotation), those the settings watch or name as the detector's (`--config`,
/// `--detector-conditions`), then any other the node reports that is not the kubelet's (NPD writes
/// its conditions without the annotation).
fn shown_types<'a>(
    annotation: Option<&'a String>,
    cfg: &'a crate::config::Config,
    present: impl Iterator<Item = &'a str>,
) -> Vec<&'a str> {
    let mut shown: Vec<&str> = Vec::new();
    let named = annotation
        .into_iter()
        .flat_map(|s| s.split(','))
        .map(str::trim)
        .chain(cfg.conditions.iter().map(|c| c.type_.as_str()))
        .chain(cfg.watchdog.conditions.iter().map(String::as_str))
        .chain(present.filter(|t| !KUBELET_CONDITIONS.contains(t)));
    for t in named {
        if !t.is_empty() && !shown.contains(&t) {
            shown.push(t);
        }
    }
    shown
}

pub(crate) fn summarise(
    node: &Node,
    cfg: &crate::config::Config,
    placement: &crate::decide::silence::Placement,
    now: Timestamp,
) -> NodeSummary {
    let silent_since = crate::decide::silence::silence(&NodeView::of(node), cfg, placement, now)
        .map(|s| s.last_heard);
    let annotations = node.metadata.annotations.as_ref();
    let conditions = node
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .map(|c| c.as_slice())
        .unwrap_or_default();
    let owned = shown_types(
        annotations.and_then(|a| a.get(OWNED_CONDITIONS_ANNOTATION)),
        cfg,
        conditions.iter().map(|c| c.type_.as_str()),
    );
    let ready = conditions
        .iter()
        .find(|c| c.type_ == "Ready")
        .map(|c| c.status.clone())
        .unwrap_or_else(|| "Unknown".into());
    let conditions = owned
        .iter()
        .map(|t| match conditions.iter().find(|c| c.type_ == *t) {
            Some(c) => ConditionSummary {
                type_: c.type_.clone(),
                status: c.status.clone(),
                reason: c.reason.clone().unwrap_or_default(),
                since: c.last_transition_time.as_ref().map(|t| t.0),
            },
            None => ConditionSummary {
                type_: t.to_string(),
                status: "absent".into(),
                reason: String::new(),
                since: None,
            },
        })
        .collect();
    let drain = annotations
        .and_then(|a| a.get(DRAIN_RECORD_ANNOTATION))
        .map(|raw| match serde_json::from_str::<Record>(raw) {
            Ok(r) => describe(&r),
            Err(e) => format!("unreadable record: {e}"),
        });
    NodeSummary {
        node: node.metadata.name.clone().unwrap_or_default(),
        ready,
        schedulable: !node
            .spec
            .as_ref()
            .and_then(|s| s.unschedulable)
            .unwrap_or(false),
        conditions,
        drain,
        silent_since,
    }
}

pub(crate) fn describe(r: &Record) -> String {
    let owner = if r.owner.is_empty() {
        String::new()
    } else {
        format!(" by {}", r.owner)
    };
    let phase = serde_json::to_value(r.phase)
        .ok()
        .and_then(|v| v.as_str().map(String::from))
        .unwrap_or_default();
    use crate::model::record::Phase;
    let when = match (r.finished_at, r.drain_started, r.retry_at) {
        (_, _, Some(retry)) if r.phase == Phase::Failed => {
            format!(", retry at {retry}")
        }
        _ if matches!(r.phase, Phase::Rebooting | Phase::Replacing) => {
            let ladder = r.ladder.map(|l| format!(" of {l}")).unwrap_or_default();
            let until = r
                .step_until
                .map(|t| format!(", proof due {t}"))
                .unwrap_or_default();
            format!(" (ladder step{ladder}){until}")
        }
        _ if r.phase == Phase::NeedsPerson => format!(" ({})", r.escalated),
        (Some(f), _, _) => format!(", finished {f}"),
        (None, Some(s), _) => format!(", draining since {s}"),
        _ => format!(", cordoned {}, drain at {}", r.cordoned_at, r.drain_at),
    };
    format!("{phase}{owner}{when}: {}", r.reason)
}

/// One node's row of the table.
fn cells_of(r: &NodeSummary) -> [String; 6] {
    let conditions = if r.conditions.is_empty() {
        "-".to_string()
    } else {
        r.conditions
            .iter()
            .map(|c| match c.status.as_str() {
                "False" => format!("{}=False", c.type_),
                _ if c.reason.is_empty() => format!("{}={}", c.type_, c.status),
                _ => format!("{}={} ({})", c.type_, c.status, c.reason),
            })
            .collect::<Vec<_>>()
            .join(" ")
    };
    [
        r.node.clone(),
        r.ready.to_string(),
        if r.schedulable { "yes" } else { "cordoned" }.to_string(),
        conditions,
        r.silent_since
            .map(nodemedic_common::time::rfc3339)
            .unwrap_or_else(|| "-".into()),
        r.drain.clone().unwrap_or_else(|| "-".into()),
    ]
}

/// Print the summaries as a table (text) or one JSON object per line.
pub(crate) fn print_summaries(
    rows: &[NodeSummary],
    json: bool,
    out: &mut impl Write,
) -> std::io::Result<()> {
    if json {
        for r in rows {
            serde_json::to_writer(&mut *out, r)?;
            writeln!(out)?;
        }
        return Ok(());
    }
    // Each column as wide as its widest cell: long condition lists kept the next columns apart.
    let cells: Vec<[String; 6]> = rows.iter().map(cells_of).collect();
    let header = [
        "NODE",
        "READY",
        "SCHEDULABLE",
        "CONDITIONS",
        "SILENT SINCE",
        "DRAIN",
    ]
    .map(String::from);
    let mut widths = [0usize; 6];
    for row in std::iter::once(&header).chain(&cells) {
        for (w, c) in widths.iter_mut().zip(row) {
            *w = (*w).max(c.chars().count());
        }
    }
    for row in std::iter::once(&header).chain(&cells) {
        let mut line = String::new();
        for (i, (c, w)) in row.iter().zip(widths).enumerate() {
            if i == 5 {
                line.push_str(c);
            } else {
                line.push_str(&format!("{c:<w$}  "));
            }
        }
        writeln!(out, "{}", line.trim_end())?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decide::silence::Placement;

    #[test]
    fn a_refusal_says_the_api_servers_words_and_where_the_read_is_granted() {
        let forbidden = "configmaps \"nodemedic-drainer-settings\" is forbidden: User \"alice\" cannot get resource \"configmaps\" in API group \"\" in the namespace \"kube-system\"";
        let e = LiveError::Get {
            what: "ConfigMap kube-system/nodemedic-drainer-settings".into(),
            source: kube::Error::Api(
                kube::core::Status::failure(forbidden, "Forbidden")
                    .with_code(403)
                    .boxed(),
            ),
        };
        let said = e.to_string();
        assert!(said.contains(forbidden), "{said}");
        assert!(said.contains("(Forbidden, HTTP 403)"), "{said}");
        assert!(
            said.contains("kubectl apply -k deploy/kubectl-plugin"),
            "{said}"
        );
        let e = LiveError::List {
            what: "nodes",
            source: kube::Error::Api(
                kube::core::Status::failure("etcd down", "InternalError")
                    .with_code(500)
                    .boxed(),
            ),
        };
        assert!(!e.to_string().contains("deploy/kubectl-plugin"), "{e}");
    }

    fn node(v: serde_json::Value) -> Node {
        serde_json::from_value(v).unwrap()
    }

    /// A row whose conditions run long keeps every later column in line with the header's.
    #[test]
    fn the_conditions_table_keeps_its_columns_in_line_however_long_a_cell() {
        let condition = |t: &str, reason: &str| ConditionSummary {
            type_: t.into(),
            status: "True".into(),
            reason: reason.into(),
            since: None,
        };
        let row =
            |node: &str, conditions: Vec<ConditionSummary>, drain: Option<&str>| NodeSummary {
                node: node.into(),
                ready: "True".into(),
                schedulable: drain.is_none(),
                conditions,
                drain: drain.map(String::from),
                silent_since: None,
            };
        let rows = [
            row("a", vec![], None),
            row(
                "node-with-a-longer-name",
                vec![
                    condition("KernelDeadlock", "DockerHung"),
                    condition("ReadonlyFilesystem", "FilesystemIsReadOnly"),
                    condition("FrequentContainerdRestart", "ContainerdRestarted"),
                ],
                Some("draining"),
            ),
        ];
        let mut out = Vec::new();
        print_summaries(&rows, false, &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        let at = |line: &str, what: &str| {
            line.find(what)
                .unwrap_or_else(|| panic!("{what} in {line}"))
        };
        let silent = at(lines[0], "SILENT SINCE");
        let drain = at(lines[0], "DRAIN");
        assert!(silent > at(lines[2], "ContainerdRestarted"), "{text}");
        for line in &lines[1..] {
            assert_eq!(line[silent..].chars().next(), Some('-'), "{text}");
        }
        assert_eq!(at(lines[2], "draining"), drain, "{text}");
        let schedulable = at(lines[0], "SCHEDULABLE");
        assert_eq!(at(lines[1], "yes"), schedulable, "{text}");
        assert_eq!(at(lines[2], "cordoned"), schedulable, "{text}");
    }

    fn summarise(n: &Node) -> NodeSummary {
        let now = "2026-11-22T10:00:00Z".parse().unwrap();
        super::summarise(
            n,
            &crate::config::Config::default(),
            &Placement::Unknown,
            now,
        )
    }

    #[test]
    fn a_node_whose_detector_fell_silent_shows_since_when() {
        let n = node(serde_json::json!({
            "metadata": {"name": "quiet", "annotations": {OWNED_CONDITIONS_ANNOTATION: "KernelDeadlock"}},
            "status": {"conditions": [
                {"type": "KernelDeadlock", "status": "False", "lastHeartbeatTime": "2026-11-22T09:30:00Z",
                 "lastTransitionTime": "2026-11-20T00:00:00Z"}]}
        }));
        let s = summarise(&n);
        assert_eq!(
            s.silent_since,
            Some("2026-11-22T09:30:00Z".parse().unwrap())
        );
        let mut out = Vec::new();
        print_summaries(&[s], false, &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert!(
            text.lines().next().unwrap().contains("SILENT SINCE"),
            "{text}"
        );
        assert!(text.contains("2026-11-22T09:30:00Z"), "{text}");
        // Heard 5 minutes ago (the default limit is 15m): not silent.
        let mut fresh = n.clone();
        fresh.status.as_mut().unwrap().conditions.as_mut().unwrap()[0].last_heartbeat_time =
            Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                "2026-11-22T09:55:00Z".parse().unwrap(),
            ));
        assert_eq!(summarise(&fresh).silent_since, None);
    }

    #[test]
    fn a_node_is_summarised_by_its_owned_conditions_and_its_record() {
        let record = Record {
            owner: "nodemedic-drainer".into(),
            episode: "e".into(),
            reason: "KernelDeadlock=True since 2026-11-22T09:00:00Z".into(),
            phase: crate::model::record::Phase::Drained,
            cordoned_at: "2026-11-22T09:10:00Z".parse().unwrap(),
            drain_at: "2026-11-22T09:20:00Z".parse().unwrap(),
            drain_started: Some("2026-11-22T09:20:00Z".parse().unwrap()),
            finished_at: Some("2026-11-22T09:21:00Z".parse().unwrap()),
            attempts: 1,
            retry_at: None,
            ..Default::default()
        };
        let n = node(serde_json::json!({
            "metadata": {"name": "n1", "annotations": {
                OWNED_CONDITIONS_ANNOTATION: "KernelDeadlock,ReadonlyFilesystem,Gone",
                DRAIN_RECORD_ANNOTATION: record.to_annotation(&crate::model::seal::RecordTrust::Unchecked)}},
            "spec": {"unschedulable": true},
            "status": {"conditions": [
                {"type": "Ready", "status": "True"},
                {"type": "KernelDeadlock", "status": "True", "reason": "DockerHung", "lastTransitionTime": "2026-11-22T09:00:00Z"},
                {"type": "ReadonlyFilesystem", "status": "False", "reason": "FilesystemIsNotReadOnly"},
                {"type": "MemoryPressure", "status": "False"}]}
        }));
        let s = summarise(&n);
        assert_eq!(s.ready, "True");
        assert!(!s.schedulable);
        assert_eq!(
            s.conditions
                .iter()
                .map(|c| (c.type_.as_str(), c.status.as_str()))
                .collect::<Vec<_>>(),
            vec![
                ("KernelDeadlock", "True"),
                ("ReadonlyFilesystem", "False"),
                ("Gone", "absent")
            ],
            "only the detector's own conditions"
        );
        assert_eq!(
            s.drain.as_deref(),
            Some(
                "drained by nodemedic-drainer, finished 2026-11-22T09:21:00Z: KernelDeadlock=True since 2026-11-22T09:00:00Z"
            )
        );
        let mut out = Vec::new();
        print_summaries(&[s], false, &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert!(
            text.contains("KernelDeadlock=True (DockerHung) ReadonlyFilesystem=False Gone=absent"),
            "{text}"
        );
        assert!(text.contains("cordoned"), "{text}");
    }

    #[test]
    fn a_bare_node_and_an_unreadable_record() {
        let s = summarise(&node(serde_json::json!({"metadata": {"name": "bare"}})));
        assert_eq!(
            (s.ready.as_str(), s.schedulable, s.conditions.len(), s.drain),
            ("Unknown", true, 0, None)
        );
        let s = summarise(&node(serde_json::json!({"metadata": {"name": "x",
            "annotations": {DRAIN_RECORD_ANNOTATION: "{not json"}}})));
        assert!(s.drain.unwrap().starts_with("unreadable record: "));
    }
}
