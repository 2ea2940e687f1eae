//! ValidatingAdmissionPolicy (`admissionregistration.k8s.io/v1`), as kube-apiserver's admission
//! evaluates it on a write, for the parts the shipped policies use: each binding's policy, matched by
//! its `resourceRules` (group, version, operation, `resource/subresource`), then its
//! `matchConditions` (all true, else the policy does not apply), its `variables` (in order, each
//! seeing the ones before), its `validations` (the first false one denies). An expression that fails
//! to evaluate denies under `failurePolicy: Fail` (the default) and is skipped under `Ignore`. A
//! denial is the real server's: 403, `<resource> "<name>" is forbidden: ValidatingAdmissionPolicy
//! '<policy>' with binding '<binding>' denied request: <message>` (admission.NewForbidden in
//! k8s.io/apiserver's validating policy plugin; the message is the first denying validation's).
//!
//! CEL here is the `cel` crate over the objects' JSON, not cel-go over typed objects: expressions
//! are not type-checked, so a policy that kube-apiserver would refuse to compile may still pass
//! here. The real-control-plane scenario (tests/tests/deploy/own_node.rs) covers that.
//! Not modelled: `paramKind`, `matchResources` of bindings, `auditAnnotations`, `Warn`/`Audit`.

use std::collections::HashMap;

use serde_json::{Value, json};

use super::store::{Key, Store};
use super::{Target, error};
use crate::server::identity::User;
use axum::response::Response;

const API: &str = "admissionregistration.k8s.io/v1";

/// What is being written, for policies to match and see.
pub(crate) struct Write<'a> {
    pub user: &'a User,
    /// `CREATE`, `UPDATE` (a PATCH is an UPDATE to admission) or `DELETE`.
    pub operation: &'static str,
    pub target: &'a Target,
    pub old: Option<&'a Value>,
    pub new: &'a Value,
    pub dry_run: bool,
}

/// Whether every bound policy lets `w` through; the refusal as the real server words it.
#[allow(clippy::result_large_err)] // a refusal is an HTTP response, made once per refused request
pub(crate) fn admit(store: &Store, w: &Write<'_>) -> Result<(), Response> {
    for binding in store.list(API, "validatingadmissionpolicybindings", None) {
        let Some(policy_name) = binding.pointer("/spec/policyName").and_then(Value::as_str) else {
            continue;
        };
        let Some(policy) = store.get(&Key::new(
            API,
            "validatingadmissionpolicies",
            None,
            policy_name,
        )) else {
            continue;
        };
        if let Some(message) = denial(&policy["spec"], w) {
            let binding_name = binding["metadata"]["name"].as_str().unwrap_or_default();
            let name = w.target.name.clone().unwrap_or_else(|| {
                w.new["metadata"]["name"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string()
            });
            return Err(error(
                403,
                Some("Forbidden"),
                &format!(
                    "{} \"{name}\" is forbidden: ValidatingAdmissionPolicy '{policy_name}' with binding \
                     '{binding_name}' denied request: {message}",
                    w.target.resource
                ),
                Some(json!({"name": name, "kind": w.target.resource})),
            ));
        }
    }
    Ok(())
}

/// The message of the validation of `spec` that denies `w`, if one does.
fn denial(spec: &Value, w: &Write<'_>) -> Option<String> {
    let rules = spec
        .pointer("/matchConstraints/resourceRules")
        .and_then(Value::as_array)?;
    if !rules.iter().any(|r| rule_matches(r, w)) {
        return None;
    }
    let fail_closed = spec["failurePolicy"].as_str() != Some("Ignore");
    let on_error = |what: &str, e: String| fail_closed.then(|| format!("{what}: {e}"));
    let mut vars: HashMap<String, cel::Value> = HashMap::new();
    let request = request_of(w);
    let eval = |expr: &str, vars: &HashMap<String, cel::Value>| -> Result<cel::Value, String> {
        let program = cel::Program::compile(expr).map_err(|e| e.to_string())?;
        let mut ctx = cel::Context::default();
        ctx.add_variable("request", request.clone())
            .map_err(|e| e.to_string())?;
        ctx.add_variable("object", w.new.clone())
            .map_err(|e| e.to_string())?;
        ctx.add_variable("oldObject", w.old.cloned().unwrap_or(Value::Null))
            .map_err(|e| e.to_string())?;
        ctx.add_variable_from_value("variables", vars.clone());
        program.execute(&ctx).map_err(|e| e.to_string())
    };
    for m in spec["matchConditions"].as_array().into_iter().flatten() {
        let expr = m["expression"].as_str().unwrap_or_default();
        match eval(expr, &vars) {
            Ok(cel::Value::Bool(true)) => {}
            Ok(_) => return None,
            Err(e) => return on_error("matchCondition failed", e),
        }
    }
    for v in spec["variables"].as_array().into_iter().flatten() {
        let (name, expr) = (
            v["name"].as_str().unwrap_or_default(),
            v["expression"].as_str().unwrap_or_default(),
        );
        match eval(expr, &vars) {
            Ok(value) => {
                vars.insert(name.to_string(), value);
            }
            Err(e) => return on_error("variable failed", e),
        }
    }
    for v in spec["validations"].as_array().into_iter().flatten() {
        let expr = v["expression"].as_str().unwrap_or_default();
        match eval(expr, &vars) {
            Ok(cel::Value::Bool(true)) => {}
            Ok(_) => {
                return Some(
                    v["message"]
                        .as_str()
                        .map_or_else(|| format!("failed expression: {expr}"), str::to_string),
                );
            }
            Err(e) => {
                if let Some(m) = on_error("expression failed", e) {
                    return Some(m);
                }
            }
        }
    }
    None
}

/// One `resourceRules` entry against the write: `*` matches anything, `nodes/status` only the
/// subresource, `nodes` only the resource itself, `nodes/*` both's subresources.
fn rule_matches(rule: &Value, w: &Write<'_>) -> bool {
    let has = |field: &str, want: &str| {
        rule[field]
            .as_array()
            .is_some_and(|l| l.iter().any(|x| x == "*" || x == want))
    };
    let (group, version) = w.target.api.rsplit_once('/').unwrap_or(("", &w.target.api));
    let resource = match &w.target.sub {
        Some(sub) => format!("{}/{sub}", w.target.resource),
        None => w.target.resource.clone(),
    };
    let resource_ok = rule["resources"].as_array().is_some_and(|l| {
        l.iter().filter_map(Value::as_str).any(|r| {
            r == resource
                || (r == "*" && w.target.sub.is_none())
                || r == "*/*"
                || r.strip_suffix("/*").is_some_and(|base| {
                    w.target.sub.is_some() && (base == w.target.resource || base == "*")
                })
        })
    });
    has("apiGroups", group)
        && has("apiVersions", version)
        && has("operations", w.operation)
        && resource_ok
}

/// The `request` variable: the admission attributes a policy may read.
fn request_of(w: &Write<'_>) -> Value {
    let (group, version) = w.target.api.rsplit_once('/').unwrap_or(("", &w.target.api));
    let mut user = json!({"username": w.user.name, "groups": w.user.groups});
    if !w.user.extra.is_empty() {
        user["extra"] = json!(w.user.extra);
    }
    json!({
        "operation": w.operation,
        "userInfo": user,
        "resource": {"group": group, "version": version, "resource": w.target.resource},
        "subResource": w.target.sub.clone().unwrap_or_default(),
        "name": w.target.name.clone().unwrap_or_default(),
        "namespace": w.target.namespace.clone().unwrap_or_default(),
        "dryRun": w.dry_run,
    })
}
