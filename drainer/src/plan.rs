//! `drainer plan`: the decision, offline, over `kubectl get -o json` files.

use std::io::Write;
use std::path::Path;

use crate::model::node::NodeView;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::jiff::Timestamp;
use nodemedic_common::lenient::Lenient;
use serde::Deserialize;
use serde::de::DeserializeOwned;

use crate::config::Config;
use crate::decide::{self, NodeDecision, PodAction};
use crate::model::pod::PodInfo;

/// An object of a file that was skipped: the API server takes values our types cannot hold (a time
/// past 9999-12-30T22:00Z), and one such object must not stop the plan of every other, as it does not
/// stop `plan --live` or the controller.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Skipped {
    pub file: std::path::PathBuf,
    /// 1-based position in the list.
    pub item: usize,
    /// `namespace/name` or `name`, when readable.
    pub id: String,
    pub error: String,
}

impl std::fmt::Display for Skipped {
    fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        write!(
            f,
            "{}: skipped {} (item {}): cannot decode it: {}",
            self.file.display(),
            self.id,
            self.item,
            self.error
        )
    }
}

/// What a file held: the items read, and the ones skipped.
#[derive(Debug)]
pub struct Read<U> {
    pub items: Vec<U>,
    pub skipped: Vec<Skipped>,
}

impl<U> Read<U> {
    /// The items, with what was skipped added to `skipped`.
    pub fn items_noting(self, skipped: &mut Vec<Skipped>) -> Vec<U> {
        skipped.extend(self.skipped);
        self.items
    }
}

/// Read the `items` of a List file (`kubectl get nodes -o json`), or a single object; `-` is stdin.
pub fn read_items<T: DeserializeOwned + kube::Resource>(path: &Path) -> Result<Read<T>, String> {
    read_items_map(path, |t: T| t)
}

/// [`read_items`], each item turned into what is kept (`f`) as soon as it is read: the file is parsed
/// once, as it streams in (no text copy, no `Value` of the whole list, no list of full objects), so
/// memory is what the kept values take. Each item is decoded on its own, as the watches do
/// ([`Lenient`]): one that does not fit its type is skipped and named in [`Read::skipped`]; a file
/// that is not JSON or YAML at all is an error with its position.
pub fn read_items_map<T: DeserializeOwned + kube::Resource, U>(
    path: &Path,
    mut f: impl FnMut(T) -> U,
) -> Result<Read<U>, String> {
    let reader: Box<dyn std::io::Read> = if path == Path::new("-") {
        Box::new(std::io::stdin().lock())
    } else {
        Box::new(
            std::fs::File::open(path)
                .map_err(|e| format!("{}: cannot read: {e}", path.display()))?,
        )
    };
    let mut reader = std::io::BufReader::with_capacity(256 * 1024, reader);
    // `kubectl get -o yaml` dumps are read whole through a JSON tree (YAML has no streaming reader
    // here); JSON, the large case, streams.
    let first = {
        use std::io::BufRead;
        let buf = reader
            .fill_buf()
            .map_err(|e| format!("{}: cannot read: {e}", path.display()))?;
        buf.iter().copied().find(|b| !b.is_ascii_whitespace())
    };
    if first.is_some_and(|b| b != b'{' && b != b'[') {
        let mut text = String::new();
        std::io::Read::read_to_string(&mut reader, &mut text)
            .map_err(|e| format!("{}: cannot read: {e}", path.display()))?;
        let value: serde_json::Value =
            nodemedic_common::yaml::parse_all(&text).map_err(|errors| {
                errors
                    .iter()
                    .map(|e| format!("{}:{}:{}: {}", path.display(), e.line, e.column, e.message))
                    .collect::<Vec<_>>()
                    .join("\n")
            })?;
        let mut bad = Vec::new();
        let seed = ListOrOne {
            f: &mut f,
            bad: &mut bad,
            _t: std::marker::PhantomData,
        };
        let items = serde::de::DeserializeSeed::deserialize(seed, value)
            .map_err(|e| format!("{}: {e}", path.display()))?;
        return Ok(Read {
            items,
            skipped: skipped(path, bad),
        });
    }
    let mut de = serde_json::Deserializer::from_reader(reader);
    let mut bad = Vec::new();
    let seed = ListOrOne {
        f: &mut f,
        bad: &mut bad,
        _t: std::marker::PhantomData,
    };
    let items = serde::de::DeserializeSeed::deserialize(seed, &mut de)
        .and_then(|items| de.end().map(|()| items))
        .map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(Read {
        items,
        skipped: skipped(path, bad),
    })
}

/// (1-based item, id, error) of each malformed item.
type Bad = Vec<(usize, String, String)>;

fn skipped(path: &Path, bad: Bad) -> Vec<Skipped> {
    bad.into_iter()
        .map(|(item, id, error)| Skipped {
            file: path.to_path_buf(),
            item,
            id,
            error,
        })
        .collect()
}

/// One item, decoded leniently: kept through `f`, or noted in `bad`.
fn keep<T: kube::Resource, U>(
    item: Lenient<T>,
    n: usize,
    f: &mut impl FnMut(T) -> U,
    bad: &mut Bad,
) -> Option<U> {
    match item {
        Lenient::Ok(t) => Some(f(t)),
        Lenient::Malformed { ref error, .. } => {
            bad.push((n, item.id(), error.clone()));
            None
        }
    }
}

/// A List's `items`, each mapped as it is read, or one object.
struct ListOrOne<'f, T, F> {
    f: &'f mut F,
    bad: &'f mut Bad,
    _t: std::marker::PhantomData<fn() -> T>,
}

impl<'de, T: DeserializeOwned + kube::Resource, U, F: FnMut(T) -> U> serde::de::DeserializeSeed<'de>
    for ListOrOne<'_, T, F>
{
    type Value = Vec<U>;
    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<Vec<U>, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de, T: DeserializeOwned + kube::Resource, U, F: FnMut(T) -> U> serde::de::Visitor<'de>
    for ListOrOne<'_, T, F>
{
    type Value = Vec<U>;
    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a Kubernetes List (kubectl get -o json) or one object")
    }
    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Vec<U>, A::Error> {
        let mut items = None;
        let mut rest = serde_json::Map::new();
        while let Some(k) = map.next_key::<String>()? {
            if k == "items" && items.is_none() {
                items = Some(map.next_value_seed(Items {
                    f: &mut *self.f,
                    bad: &mut *self.bad,
                    _t: std::marker::PhantomData,
                })?);
            } else {
                rest.insert(k, map.next_value::<serde_json::Value>()?);
            }
        }
        match items {
            Some(items) => Ok(items),
            None => Lenient::<T>::deserialize(serde_json::Value::Object(rest))
                .map(|one| keep(one, 1, self.f, self.bad).into_iter().collect())
                .map_err(serde::de::Error::custom),
        }
    }
}

/// The `items` array, mapped element by element.
struct Items<'f, T, F> {
    f: &'f mut F,
    bad: &'f mut Bad,
    _t: std::marker::PhantomData<fn() -> T>,
}

impl<'de, T: DeserializeOwned + kube::Resource, U, F: FnMut(T) -> U> serde::de::DeserializeSeed<'de>
    for Items<'_, T, F>
{
    type Value = Vec<U>;
    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<Vec<U>, D::Error> {
        d.deserialize_seq(self)
    }
}

impl<'de, T: DeserializeOwned + kube::Resource, U, F: FnMut(T) -> U> serde::de::Visitor<'de>
    for Items<'_, T, F>
{
    type Value = Vec<U>;
    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a list of objects")
    }
    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Vec<U>, A::Error> {
        let mut out = Vec::with_capacity(seq.size_hint().unwrap_or(0));
        let mut n = 0;
        while let Some(item) = seq.next_element::<Lenient<T>>()? {
            n += 1;
            out.extend(keep(item, n, self.f, self.bad));
        }
        Ok(out)
    }
}

/// Feasibility before acting: for each pod a cordon or drain would evict, the
/// PodDisruptionBudgets selecting it (`matchLabels` and `matchExpressions`, with kube's own
/// selector types) that allow no disruption now. Such a pod waits on the PDB: its eviction is
/// retried until the budget allows it, or the drain fails at its deadline.
pub fn annotate_pdbs(plans: &mut [NodeDecision], pods: &[PodInfo], pdbs: &[PodDisruptionBudget]) {
    use kube::core::{Selector, SelectorExt};
    let budgets: Vec<(&PodDisruptionBudget, Option<Selector>)> = pdbs
        .iter()
        .map(|b| {
            let sel = b
                .spec
                .as_ref()
                .and_then(|s| s.selector.clone())
                .and_then(|s| Selector::try_from(s).ok());
            (b, sel)
        })
        .collect();
    for plan in plans.iter_mut() {
        for p in plan
            .pods
            .iter_mut()
            .filter(|p| p.action == PodAction::Evict)
        {
            let Some(pod) = pods
                .iter()
                .find(|x| *x.name == *p.name && *x.namespace == *p.namespace)
            else {
                continue;
            };
            let blocking: Vec<String> = budgets
                .iter()
                .filter(|(b, _)| b.metadata.namespace.as_deref() == Some(&*pod.namespace))
                // A PDB with an empty or missing selector selects nothing (policy/v1).
                .filter(|(_, sel)| {
                    sel.as_ref()
                        .is_some_and(|s| !s.selects_all() && s.matches(pod.labels()))
                })
                .filter(|(b, _)| b.status.as_ref().map_or(0, |s| s.disruptions_allowed) <= 0)
                .map(|(b, _)| b.metadata.name.clone().unwrap_or_default())
                .collect();
            if !blocking.is_empty() {
                p.reason = format!(
                    "evictable; would wait on PDB {} (0 disruptions allowed now; eviction retried until it allows one)",
                    blocking.join(", ")
                );
            }
        }
    }
}

#[derive(serde::Serialize)]
struct JsonPlan<'a> {
    node: &'a str,
    action: decide::Action,
    reason: &'a str,
    pods: &'a [decide::PodPlan],
}

/// Run the decision over the objects and print it; `recorded` is what the cluster recorded besides
/// them (a pause on the drainer's Lease, nodes reported flapping).
#[allow(clippy::too_many_arguments)]
pub fn run(
    cfg: &Config,
    nodes: &[NodeView],
    pods: &[PodInfo],
    pdbs: &[PodDisruptionBudget],
    recorded: &crate::decide::gates::snapshot::Recorded,
    now: Timestamp,
    json: bool,
    out: &mut impl Write,
) -> std::io::Result<Vec<NodeDecision>> {
    let mut plans = decide::decide_views(nodes, pods, cfg, recorded, now);
    annotate_pdbs(&mut plans, pods, pdbs);
    if json {
        for p in &plans {
            serde_json::to_writer(
                &mut *out,
                &JsonPlan {
                    node: &p.node,
                    action: p.action,
                    reason: &p.reason,
                    pods: &p.pods,
                },
            )?;
            writeln!(out)?;
        }
    } else {
        let w = plans.iter().map(|p| p.node.len()).max().unwrap_or(4).max(4);
        writeln!(out, "{:<w$}  {:<8}  REASON", "NODE", "ACTION")?;
        for p in &plans {
            let action = serde_json::to_value(p.action).unwrap();
            writeln!(
                out,
                "{:<w$}  {:<8}  {}",
                p.node,
                action.as_str().unwrap_or(""),
                p.reason
            )?;
            for pod in &p.pods {
                let a = serde_json::to_value(pod.action).unwrap();
                writeln!(
                    out,
                    "{:<w$}    {:<6} {}/{}: {}",
                    "",
                    a.as_str().unwrap_or(""),
                    pod.namespace,
                    pod.name,
                    pod.reason
                )?;
            }
        }
    }
    Ok(plans)
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{Node, Pod};

    #[test]
    fn lists_and_single_objects_are_read_and_errors_say_where() {
        let dir = tempfile::tempdir().unwrap();
        let list = dir.path().join("nodes.json");
        std::fs::write(
            &list,
            r#"{"apiVersion": "v1", "kind": "List", "metadata": {"resourceVersion": ""},
                "items": [{"metadata": {"name": "a"}}, {"metadata": {"name": "b"}}]}"#,
        )
        .unwrap();
        let nodes: Vec<Node> = read_items(&list).unwrap().items;
        let names: Vec<_> = nodes
            .iter()
            .map(|n| n.metadata.name.clone().unwrap())
            .collect();
        assert_eq!(names, ["a", "b"]);
        let one = dir.path().join("node.json");
        std::fs::write(&one, r#"{"kind": "Node", "metadata": {"name": "c"}}"#).unwrap();
        let nodes: Vec<Node> = read_items(&one).unwrap().items;
        assert_eq!(nodes[0].metadata.name.as_deref(), Some("c"));
        let bad = dir.path().join("bad.json");
        std::fs::write(
            &bad,
            "{\"items\": [\n{\"metadata\": {\"name\": \"x\"}},\n{]}",
        )
        .unwrap();
        let e = read_items::<Node>(&bad).unwrap_err();
        assert!(e.contains("bad.json") && e.contains("line 3"), "{e}");
        std::fs::write(&bad, "{\"items\": []} trailing").unwrap();
        assert!(
            read_items::<Node>(&bad).is_err(),
            "trailing garbage is an error"
        );
        let e = read_items::<Node>(&dir.path().join("missing.json")).unwrap_err();
        assert!(e.contains("cannot read"), "{e}");
    }

    #[test]
    fn an_object_our_types_cannot_hold_is_skipped_and_named_the_rest_are_read() {
        let dir = tempfile::tempdir().unwrap();
        let far = r#"{"metadata": {"name": "far", "creationTimestamp": "9999-12-31T23:59:59Z"},
            "status": {"conditions": [{"type": "Ready", "status": "True", "lastHeartbeatTime": "9999-12-31T23:59:59Z"}]}}"#;
        let good = |n: &str| format!(r#"{{"metadata": {{"name": "{n}"}}}}"#);
        let list = dir.path().join("nodes.json");
        std::fs::write(
            &list,
            format!(
                r#"{{"kind": "List", "items": [{}, {far}, {}, {{"metadata": {{"name": 7}}}}]}}"#,
                good("a"),
                good("b")
            ),
        )
        .unwrap();
        let read = read_items::<Node>(&list).unwrap();
        let names: Vec<_> = read
            .items
            .iter()
            .map(|n| n.metadata.name.clone().unwrap())
            .collect();
        assert_eq!(names, ["a", "b"]);
        let said: Vec<(usize, &str)> = read
            .skipped
            .iter()
            .map(|s| (s.item, s.id.as_str()))
            .collect();
        assert_eq!(said, [(2, "far"), (4, "(unnamed)")]);
        let line = read.skipped[0].to_string();
        assert!(
            line.contains("nodes.json: skipped far (item 2): cannot decode it: "),
            "{line}"
        );
        // The same in a YAML dump, and as a single object.
        let yaml = dir.path().join("nodes.yaml");
        std::fs::write(
            &yaml,
            "kind: List\nitems:\n- metadata: {name: a}\n- metadata: {name: far, creationTimestamp: '9999-12-31T23:59:59Z'}\n",
        )
        .unwrap();
        let read = read_items::<Node>(&yaml).unwrap();
        assert_eq!(read.items.len(), 1);
        assert_eq!(read.skipped[0].id, "far");
        let one = dir.path().join("one.json");
        std::fs::write(&one, far).unwrap();
        let read = read_items::<Node>(&one).unwrap();
        assert!(read.items.is_empty());
        assert_eq!(read.skipped.len(), 1);
    }
    use crate::decide::PodPlan;

    fn pdb(name: &str, selector: serde_json::Value, allowed: i32) -> PodDisruptionBudget {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"selector": selector},
            "status": {"disruptionsAllowed": allowed, "currentHealthy": 1, "desiredHealthy": 1, "expectedPods": 1}
        }))
        .unwrap()
    }

    #[test]
    fn pods_a_pdb_selects_by_labels_or_expressions_would_wait_on_it() {
        let pod: Pod = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "api-1", "namespace": "default", "labels": {"app": "api", "tier": "web"}},
            "spec": {"nodeName": "n1", "containers": [{"name": "c"}]}
        }))
        .unwrap();
        let info = PodInfo::from_pod(&pod, None);
        let plan = |pdbs: &[PodDisruptionBudget]| {
            let mut d = vec![NodeDecision {
                node: "n1".into(),
                action: crate::decide::Action::Cordon,
                why: crate::decide::Why::Healthy,
                reason: String::new(),
                effect: crate::decide::Effect::Nothing,
                pods: vec![PodPlan {
                    namespace: "default".into(),
                    name: "api-1".into(),
                    action: PodAction::Evict,
                    reason: "evictable".into(),
                }],
                wake: None,
            }];
            annotate_pdbs(&mut d, std::slice::from_ref(&info), pdbs);
            d.remove(0).pods.remove(0).reason
        };
        let exprs = serde_json::json!({"matchExpressions": [
            {"key": "tier", "operator": "In", "values": ["web", "edge"]},
            {"key": "canary", "operator": "DoesNotExist"}]});
        assert_eq!(
            plan(&[pdb("api-pdb", exprs.clone(), 0)]),
            "evictable; would wait on PDB api-pdb (0 disruptions allowed now; eviction retried until it allows one)"
        );
        assert_eq!(
            plan(&[pdb("api-pdb", exprs, 1)]),
            "evictable",
            "it allows one"
        );
        let other = serde_json::json!({"matchExpressions": [{"key": "tier", "operator": "NotIn", "values": ["web"]}]});
        assert_eq!(plan(&[pdb("other", other, 0)]), "evictable", "not selected");
        assert_eq!(
            plan(&[pdb("empty", serde_json::json!({}), 0)]),
            "evictable",
            "an empty selector selects nothing in policy/v1"
        );
        let labels = serde_json::json!({"matchLabels": {"app": "api"}});
        assert!(plan(&[pdb("a", labels.clone(), 0), pdb("b", labels, 0)]).contains("PDB a, b"));
    }
}
