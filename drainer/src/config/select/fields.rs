//! What a CEL selector reads of a node, and the node as CEL sees it.
//!
//! [`Fields::read_by`] walks a compiled expression once, at load, and names the parts of the node's
//! view it can reach (`metadata.name`, `metadata.labels`, `metadata.annotations`,
//! `spec.unschedulable`, `status.conditions`). The controller re-evaluates a node's selection only
//! when one of those changed ([`Fields::same`]), and [`variables`] builds only those parts, straight
//! into CEL's values (no JSON in between). Anything the walk does not understand (a variable indexed
//! by a computed key, passed whole to a function) counts as reading all of that variable: the
//! analysis may over-approximate, never miss. Pure.

use std::collections::HashMap;
use std::sync::Arc;

use cel::common::ast::{EntryExpr, Expr, IdedExpr, LiteralValue};
use cel::objects::{Key, Map as CelMap, Value};

use crate::model::intern::Map;
use crate::model::node::NodeView;

/// The parts of a node's view a selector reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Fields {
    pub(crate) name: bool,
    pub(crate) labels: bool,
    pub(crate) annotations: bool,
    pub(crate) unschedulable: bool,
    pub(crate) conditions: bool,
}

impl Fields {
    pub(crate) const NONE: Fields = Fields {
        name: false,
        labels: false,
        annotations: false,
        unschedulable: false,
        conditions: false,
    };
    pub const ALL: Fields = Fields {
        name: true,
        labels: true,
        annotations: true,
        unschedulable: true,
        conditions: true,
    };
    /// A label selector's.
    pub(crate) const LABELS: Fields = Fields {
        labels: true,
        ..Fields::NONE
    };

    /// The fields `expr` reads.
    pub(crate) fn read_by(expr: &IdedExpr) -> Fields {
        let mut f = Fields::NONE;
        f.walk(expr);
        f
    }

    /// Do `a` and `b` agree on every field read? (Then a selection of `a` holds for `b`.)
    pub(crate) fn same(&self, a: &NodeView, b: &NodeView) -> bool {
        (!self.name || a.name == b.name)
            && (!self.labels || a.labels == b.labels)
            && (!self.annotations || a.annotations == b.annotations)
            && (!self.unschedulable || a.unschedulable == b.unschedulable)
            && (!self.conditions
                || (a.conditions.len() == b.conditions.len()
                    && a.conditions
                        .iter()
                        .zip(&*b.conditions)
                        .all(|(x, y)| x.same_state(y))))
    }

    /// Mark what `variable.field` reaches (`field` None: the whole variable).
    fn reach(&mut self, variable: &str, field: Option<&str>) {
        match (variable, field) {
            ("metadata", Some("name")) => self.name = true,
            ("metadata", Some("labels")) => self.labels = true,
            ("metadata", Some("annotations")) => self.annotations = true,
            // A field the view does not have: the evaluation fails whatever the node holds.
            ("metadata", Some(_)) => {}
            ("metadata", None) => {
                self.name = true;
                self.labels = true;
                self.annotations = true;
            }
            ("spec", _) => self.unschedulable = true,
            ("status", _) => self.conditions = true,
            _ => {}
        }
    }

    fn walk(&mut self, e: &IdedExpr) {
        match &e.expr {
            Expr::Select(s) => match &s.operand.expr {
                Expr::Ident(v) => self.reach(v, Some(&s.field)),
                _ => self.walk(&s.operand),
            },
            Expr::Call(c) => {
                // `metadata['labels']`: an index by a literal string is a field.
                if c.func_name == "_[_]"
                    && let [target, key] = c.args.as_slice()
                    && let Expr::Ident(v) = &target.expr
                    && let Expr::Literal(LiteralValue::String(k)) = &key.expr
                {
                    self.reach(v, Some(k.inner()));
                    return;
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
            Expr::Map(m) => m.entries.iter().for_each(|x| match &x.expr {
                EntryExpr::MapEntry(m) => {
                    self.walk(&m.key);
                    self.walk(&m.value);
                }
                EntryExpr::StructField(f) => self.walk(&f.value),
            }),
            Expr::Struct(s) => s.entries.iter().for_each(|x| match &x.expr {
                EntryExpr::MapEntry(m) => {
                    self.walk(&m.key);
                    self.walk(&m.value);
                }
                EntryExpr::StructField(f) => self.walk(&f.value),
            }),
            Expr::Literal(_) | Expr::Unspecified => {}
        }
    }
}

fn string(s: &str) -> Value {
    Value::String(Arc::new(s.to_string()))
}

fn map<'a>(entries: impl IntoIterator<Item = (&'a str, Value)>) -> Value {
    let map: HashMap<Key, Value> = entries
        .into_iter()
        .map(|(k, v)| (Key::String(Arc::new(k.to_string())), v))
        .collect();
    Value::Map(CelMap { map: Arc::new(map) })
}

fn strings(m: &Map) -> Value {
    map(m.iter().map(|(k, v)| (k, string(v))))
}

/// The CEL variables (`metadata`, `spec`, `status`) of `node`, with the parts in `read` filled (a
/// part not read is left out: nothing can reach it).
pub(crate) fn variables(node: &NodeView, read: Fields) -> [(&'static str, Value); 3] {
    let mut metadata = Vec::new();
    if read.name {
        metadata.push(("name", string(&node.name)));
    }
    if read.labels {
        metadata.push(("labels", strings(&node.labels)));
    }
    if read.annotations {
        metadata.push(("annotations", strings(&node.annotations)));
    }
    let spec = if read.unschedulable {
        map([("unschedulable", Value::Bool(node.unschedulable))])
    } else {
        map([])
    };
    let conditions = if read.conditions {
        node.conditions
            .iter()
            .map(|c| {
                map([
                    ("type", string(&c.type_)),
                    ("status", string(c.status.as_str())),
                    ("reason", string(c.reason.as_deref().unwrap_or(""))),
                    (
                        "lastTransitionTime",
                        string(&nodemedic_common::time::rfc3339(c.since)),
                    ),
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
            map([("conditions", Value::List(Arc::new(conditions)))]),
        ),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fields(expr: &str) -> Fields {
        Fields::read_by(cel::Program::compile(expr).unwrap().expression())
    }

    #[test]
    fn the_walk_names_each_part_an_expression_reaches() {
        let labels = Fields::LABELS;
        assert_eq!(fields("metadata.labels['draino'] == 'node'"), labels);
        assert_eq!(fields("'pool' in metadata.labels"), labels);
        assert_eq!(fields("has(metadata.labels.pool)"), labels);
        assert_eq!(fields("metadata['labels']['pool'] == 'a'"), labels);
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
        assert_eq!(
            fields("metadata.annotations.all(k, k != 'x')"),
            Fields {
                annotations: true,
                ..Fields::NONE
            }
        );
        assert_eq!(fields("true"), Fields::NONE);
    }

    #[test]
    fn what_the_walk_cannot_follow_reads_the_whole_variable() {
        // A computed key, the variable as a value, the variable passed whole to a function.
        let meta = Fields {
            name: true,
            labels: true,
            annotations: true,
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
            labels: [("pool", "a")].into_iter().collect(),
            annotations: [("x", "1")].into_iter().collect(),
            ..NodeView::default()
        };
        let mut b = a.clone();
        b.annotations = [("x", "2")].into_iter().collect();
        assert!(Fields::LABELS.same(&a, &b));
        assert!(!Fields::ALL.same(&a, &b));
        b.labels = [("pool", "b")].into_iter().collect();
        assert!(!Fields::LABELS.same(&a, &b));
        assert!(Fields::NONE.same(&a, &b));
    }
}
