//! What a CEL selector reads of a node, and the node as CEL sees it.
//!
//! [`Fields::read_by`] walks a compiled expression once, at load, and names the parts of the node's
//! view it can reach (`metadata.name`, `metadata.labels`, `metadata.annotations`,
//! `spec.unschedulable`, `status.conditions`), down to the keys of labels and annotations when the
//! expression names them (`metadata.labels['pool']`, `has(metadata.labels.pool)`). The controller
//! re-evaluates a node's selection only when one of those changed ([`Fields::same`]), and
//! [`variables`] builds only those parts, straight into CEL's values and borrowing the view's own
//! strings (the conversions of a whole node's labels through `cel::Value` were a third of a label
//! change's CPU, issue 39). Anything the walk does not understand (a map indexed by a computed key,
//! passed whole to a function or `in`) counts as reading all of it: the analysis may
//! over-approximate, never miss. Pure.

use std::collections::HashMap;

use cel::common::ast::{EntryExpr, Expr, IdedExpr, LiteralValue};
use cel::common::types::{CelBool, CelList, CelMap, CelMapKey, CelString};
use cel::common::value::Val;

use crate::model::intern::Map;
use crate::model::node::NodeView;

/// Which keys of a node's labels (or annotations) a selector reads.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) enum Keys {
    #[default]
    None,
    /// These keys only, sorted: the expression names each as a literal.
    Some(Vec<String>),
    All,
}

impl Keys {
    fn add(&mut self, key: &str) {
        match self {
            Keys::None => *self = Keys::Some(vec![key.to_string()]),
            Keys::Some(keys) => {
                if let Err(at) = keys.binary_search_by(|k| k.as_str().cmp(key)) {
                    keys.insert(at, key.to_string());
                }
            }
            Keys::All => {}
        }
    }

    /// Do `a` and `b` agree on every key read?
    fn same(&self, a: &Map, b: &Map) -> bool {
        // A map decoded unchanged is the earlier one reused (`Map::read`): nothing to look up.
        if a.shares(b) {
            return true;
        }
        match self {
            Keys::None => true,
            Keys::Some(keys) => keys.iter().all(|k| a.get(k) == b.get(k)),
            Keys::All => a == b,
        }
    }

    /// The entries of `m` that are read, as a CEL map.
    fn of<'v>(&'v self, m: &'v Map) -> Box<dyn Val + 'v> {
        match self {
            Keys::None => map([]),
            Keys::Some(keys) => map(keys
                .iter()
                .filter_map(|k| m.get(k).map(|v| (k.as_str(), string(v))))),
            Keys::All => map(m.iter().map(|(k, v)| (k, string(v)))),
        }
    }
}

/// The parts of a node's view a selector reads.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Fields {
    pub(crate) name: bool,
    pub(crate) labels: Keys,
    pub(crate) annotations: Keys,
    pub(crate) unschedulable: bool,
    pub(crate) conditions: bool,
}

/// What a selector that reads nothing reads (`Selector::All`).
pub(crate) static NONE: Fields = Fields::NONE;

impl Fields {
    pub(crate) const NONE: Fields = Fields {
        name: false,
        labels: Keys::None,
        annotations: Keys::None,
        unschedulable: false,
        conditions: false,
    };

    /// What a label selector whose terms name `keys` reads: those labels.
    pub(crate) fn labels<'a>(keys: impl IntoIterator<Item = &'a str>) -> Fields {
        let mut f = Fields::NONE;
        for k in keys {
            f.labels.add(k);
        }
        f
    }

    /// The fields `expr` reads.
    pub(crate) fn read_by(expr: &IdedExpr) -> Fields {
        let mut f = Fields::NONE;
        f.walk(expr);
        f
    }

    /// Do `a` and `b` agree on every field read? (Then a selection of `a` holds for `b`.)
    pub(crate) fn same(&self, a: &NodeView, b: &NodeView) -> bool {
        (!self.name || a.name == b.name)
            && self.labels.same(&a.labels, &b.labels)
            && self.annotations.same(&a.annotations, &b.annotations)
            && (!self.unschedulable || a.unschedulable == b.unschedulable)
            && (!self.conditions
                || (a.conditions.len() == b.conditions.len()
                    && a.conditions
                        .iter()
                        .zip(&*b.conditions)
                        .all(|(x, y)| x.same_state(y))))
    }

    /// The keys of `metadata.labels` or `metadata.annotations` (by `field`), if that is one.
    fn keys_of(&mut self, field: &str) -> Option<&mut Keys> {
        match field {
            "labels" => Some(&mut self.labels),
            "annotations" => Some(&mut self.annotations),
            _ => None,
        }
    }

    /// Mark what `variable.field` reaches (`field` None: the whole variable).
    fn reach(&mut self, variable: &str, field: Option<&str>) {
        match (variable, field) {
            ("metadata", Some("name")) => self.name = true,
            ("metadata", Some("labels")) => self.labels = Keys::All,
            ("metadata", Some("annotations")) => self.annotations = Keys::All,
            // A field the view does not have: the evaluation fails whatever the node holds.
            ("metadata", Some(_)) => {}
            ("metadata", None) => {
                self.name = true;
                self.labels = Keys::All;
                self.annotations = Keys::All;
            }
            ("spec", _) => self.unschedulable = true,
            ("status", _) => self.conditions = true,
            _ => {}
        }
    }

    /// Mark `key` of `operand` read, if `operand` is `metadata.labels` or `metadata.annotations`
    /// (either spelling); whether it was.
    fn reach_key(&mut self, operand: &IdedExpr, key: &str) -> bool {
        let field = match &operand.expr {
            Expr::Select(s) if matches!(&s.operand.expr, Expr::Ident(v) if v == "metadata") => {
                s.field.as_str()
            }
            Expr::Call(c) if c.func_name == "_[_]" && c.target.is_none() => match c.args.as_slice()
            {
                [target, field] if matches!(&target.expr, Expr::Ident(v) if v == "metadata") => {
                    match &field.expr {
                        Expr::Literal(LiteralValue::String(f)) => f.inner(),
                        _ => return false,
                    }
                }
                _ => return false,
            },
            _ => return false,
        };
        match self.keys_of(field) {
            Some(keys) => {
                keys.add(key);
                true
            }
            None => false,
        }
    }

    fn walk(&mut self, e: &IdedExpr) {
        match &e.expr {
            Expr::Select(s) => {
                // `metadata.labels.pool` and `has(metadata.labels.pool)`: one key.
                if self.reach_key(&s.operand, &s.field) {
                    return;
                }
                match &s.operand.expr {
                    Expr::Ident(v) => self.reach(v, Some(&s.field)),
                    _ => self.walk(&s.operand),
                }
            }
            Expr::Call(c) => {
                // `metadata['labels']` and `metadata.labels['pool']`: an index by a literal string
                // is a field, or a key.
                if c.func_name == "_[_]"
                    && c.target.is_none()
                    && let [target, key] = c.args.as_slice()
                    && let Expr::Literal(LiteralValue::String(k)) = &key.expr
                {
                    if self.reach_key(target, k.inner()) {
                        return;
                    }
                    if let Expr::Ident(v) = &target.expr {
                        self.reach(v, Some(k.inner()));
                        return;
                    }
                }
                if let Some(t) = &c.target {
                    self.walk(t);
                }
                c.args.iter().for_each(|a| self.walk(a));
            }
            Expr::Ident(v) => self.reach(v, None),
            Expr::Comprehension(c) => {
                for x in [
                    &c.iter_range,
                    &c.accu_init,
                    &c.loop_cond,
                    &c.loop_step,
                    &c.result,
                ] {
                    self.walk(x);
                }
            }
            Expr::List(l) => l.elements.iter().for_each(|x| self.walk(x)),
            Expr::Map(m) => m.entries.iter().for_each(|x| self.walk_entry(x)),
            Expr::Struct(s) => s.entries.iter().for_each(|x| self.walk_entry(x)),
            Expr::Literal(_) | Expr::Unspecified => {}
        }
    }

    fn walk_entry(&mut self, x: &cel::common::ast::IdedEntryExpr) {
        match &x.expr {
            EntryExpr::MapEntry(m) => {
                self.walk(&m.key);
                self.walk(&m.value);
            }
            EntryExpr::StructField(f) => self.walk(&f.value),
        }
    }
}

/// A CEL string borrowing `s`.
fn string(s: &str) -> Box<dyn Val + '_> {
    Box::new(CelString::from(s))
}

fn map<'v>(entries: impl IntoIterator<Item = (&'v str, Box<dyn Val + 'v>)>) -> Box<dyn Val + 'v> {
    let map: HashMap<CelMapKey<'v>, Box<dyn Val + 'v>> = entries
        .into_iter()
        .map(|(k, v)| (CelMapKey::from(k), v))
        .collect();
    Box::new(CelMap::from(map))
}

/// The CEL variables (`metadata`, `spec`, `status`) of `node`, with the parts in `read` filled (a
/// part not read is left out: nothing can reach it), borrowing the view's strings.
pub(crate) fn variables<'v>(
    node: &'v NodeView,
    read: &'v Fields,
) -> [(&'static str, Box<dyn Val + 'v>); 3] {
    let mut metadata = Vec::with_capacity(3);
    if read.name {
        metadata.push(("name", string(&node.name)));
    }
    if read.labels != Keys::None {
        metadata.push(("labels", read.labels.of(&node.labels)));
    }
    if read.annotations != Keys::None {
        metadata.push(("annotations", read.annotations.of(&node.annotations)));
    }
    let spec = if read.unschedulable {
        map([(
            "unschedulable",
            Box::new(CelBool::from(node.unschedulable)) as _,
        )])
    } else {
        map([])
    };
    let conditions: Vec<Box<dyn Val + 'v>> = if read.conditions {
        node.conditions
            .iter()
            .map(|c| {
                let since = nodemedic_common::time::rfc3339(c.since);
                map([
                    ("type", string(&c.type_)),
                    ("status", string(c.status.as_str())),
                    ("reason", string(c.reason.as_deref().unwrap_or(""))),
                    ("lastTransitionTime", Box::new(CelString::from(since)) as _),
                ])
            })
            .collect()
    } else {
        Vec::new()
    };
    [
        ("metadata", map(metadata)),
        ("spec", spec),
        (
            "status",
            map([("conditions", Box::new(CelList::from(conditions)) as _)]),
        ),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fields(expr: &str) -> Fields {
        Fields::read_by(cel::Program::compile(expr).unwrap().expression())
    }

    fn labels(keys: &[&str]) -> Fields {
        Fields {
            labels: Keys::Some(keys.iter().map(|k| k.to_string()).collect()),
            ..Fields::NONE
        }
    }

    /// Every label.
    const LABELS: Fields = Fields {
        labels: Keys::All,
        ..Fields::NONE
    };

    #[test]
    fn the_walk_names_each_part_and_key_an_expression_reaches() {
        assert_eq!(
            fields("metadata.labels['draino'] == 'node'"),
            labels(&["draino"])
        );
        assert_eq!(fields("has(metadata.labels.pool)"), labels(&["pool"]));
        assert_eq!(
            fields("metadata['labels']['pool'] == 'a'"),
            labels(&["pool"])
        );
        assert_eq!(
            fields(
                "metadata.labels.zone == 'b' || metadata.labels['pool'] == 'a' && has(metadata.labels.zone)"
            ),
            labels(&["pool", "zone"]),
            "each key once, sorted"
        );
        assert_eq!(
            fields("metadata.annotations['x'] == '1' && metadata.labels.pool == 'a'"),
            Fields {
                annotations: Keys::Some(vec!["x".into()]),
                ..labels(&["pool"])
            }
        );
        assert_eq!(
            fields("metadata.name.startsWith('gpu-') && !spec.unschedulable"),
            Fields {
                name: true,
                unschedulable: true,
                ..Fields::NONE
            }
        );
        assert_eq!(
            fields("status.conditions.exists(c, c.type == 'Ready' && c.status == 'False')"),
            Fields {
                conditions: true,
                ..Fields::NONE
            }
        );
        assert_eq!(fields("true"), Fields::NONE);
    }

    #[test]
    fn what_the_walk_cannot_follow_reads_the_whole_map_or_variable() {
        let all_labels = LABELS.clone();
        // The map itself, not one key of it: `in`, a comprehension, a computed key, size().
        assert_eq!(fields("'pool' in metadata.labels"), all_labels);
        assert_eq!(fields("metadata.labels.exists(k, k == 'pool')"), all_labels);
        assert_eq!(fields("metadata.labels['po' + 'ol'] == 'a'"), all_labels);
        assert_eq!(
            fields("metadata.labels.pool == 'a' && size(metadata.labels) > 2"),
            all_labels,
            "one key and the whole map: the whole map"
        );
        assert_eq!(
            fields("metadata.annotations.all(k, k != 'x')"),
            Fields {
                annotations: Keys::All,
                ..Fields::NONE
            }
        );
        // A computed field, the variable as a value, the variable passed whole to a function.
        let meta = Fields {
            name: true,
            labels: Keys::All,
            annotations: Keys::All,
            ..Fields::NONE
        };
        assert_eq!(fields("metadata['lab' + 'els']['a'] == 'b'"), meta);
        assert_eq!(fields("size(metadata) == 3"), meta);
        assert_eq!(fields("[metadata][0].labels['a'] == 'b'"), meta);
        // A comprehension variable named like one of the node's shadows it: read all, to be safe.
        assert_eq!(
            fields("[1].exists(metadata, metadata == 1)"),
            meta,
            "over-approximated, never missed"
        );
    }

    #[test]
    fn same_compares_only_what_is_read() {
        let a = NodeView {
            name: "n".into(),
            labels: [("pool", "a"), ("zone", "1")].into_iter().collect(),
            annotations: [("x", "1")].into_iter().collect(),
            ..NodeView::default()
        };
        let mut b = a.clone();
        b.annotations = [("x", "2")].into_iter().collect();
        assert!(LABELS.same(&a, &b));
        assert!(labels(&["pool"]).same(&a, &b));
        let everything = Fields {
            name: true,
            labels: Keys::All,
            annotations: Keys::All,
            unschedulable: true,
            conditions: true,
        };
        assert!(!everything.same(&a, &b));
        // A label the expression does not name changes: the selection holds.
        b.labels = [("pool", "a"), ("zone", "2")].into_iter().collect();
        assert!(labels(&["pool"]).same(&a, &b));
        assert!(!labels(&["zone"]).same(&a, &b));
        assert!(!LABELS.same(&a, &b));
        // One it names appears, or goes.
        b.labels = [("zone", "1")].into_iter().collect();
        assert!(!labels(&["pool"]).same(&a, &b));
        assert!(labels(&["gpu"]).same(&a, &b));
        assert!(NONE.same(&a, &b));
    }

    #[test]
    fn only_the_keys_read_are_built_and_the_answers_are_those_of_the_whole_node() {
        let node = NodeView {
            name: "n".into(),
            labels: [("pool", "a"), ("zone", "1"), ("gpu", "")]
                .into_iter()
                .collect(),
            ..NodeView::default()
        };
        let read = labels(&["pool", "tier"]);
        let [(_, metadata), _, _] = variables(&node, &read);
        let metadata = format!("{metadata:?}");
        assert!(metadata.contains("pool"), "{metadata}");
        assert!(
            !metadata.contains("zone") && !metadata.contains("gpu"),
            "{metadata}"
        );
        // The same answers as over every label, a missing key included.
        for expr in [
            "metadata.labels['pool'] == 'a'",
            "has(metadata.labels.tier)",
            "metadata.labels['tier'] == 'x'",
            "metadata.labels.pool == 'a' && !has(metadata.labels.zone)",
            "'zone' in metadata.labels && metadata.labels.zone == '1'",
        ] {
            let sel = super::super::Selector::cel(expr).unwrap();
            let whole = {
                let env = std::sync::Arc::new(cel::Env::stdlib());
                let mut ctx = cel::Context::with_env(env);
                for (name, value) in variables(
                    &node,
                    &Fields {
                        name: true,
                        labels: Keys::All,
                        annotations: Keys::All,
                        unschedulable: true,
                        conditions: true,
                    },
                ) {
                    ctx.add_variable_as_val(name, value);
                }
                let program = cel::Program::compile(expr).unwrap();
                program.execute(&ctx).map_err(|e| e.to_string())
            };
            let narrow = sel.evaluate(&node);
            match whole {
                Ok(cel::Value::Bool(b)) => assert_eq!(
                    narrow,
                    Ok(if b {
                        super::super::Outcome::Selected
                    } else {
                        super::super::Outcome::NotSelected
                    }),
                    "{expr}"
                ),
                Err(e) => assert!(
                    matches!(narrow, Ok(super::super::Outcome::MissingKey(_))),
                    "{expr}: {e} vs {narrow:?}"
                ),
                other => panic!("{expr}: {other:?}"),
            }
        }
    }
}
