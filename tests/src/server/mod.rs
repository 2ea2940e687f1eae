//! The test API server: our own stand-in for kube-apiserver, for what a real one cannot do on demand:
//! injected 500s/429s/503s ([`TestApiServer::fail_next`]), cut watches, and exact request logs. Every
//! scenario runs against the real control plane when `KUBEBUILDER_ASSETS` is set (see
//! `crate::envtest`); this server is their fallback without it and the only home of fault injection.
//!
//! Generic storage of JSON objects by (group/version, resource, namespace, name), routed from the
//! request path, so new resources (pods, leases, PDBs) need no new routes.

mod admit;
mod discovery;
mod evict;
mod identity;
mod managed;
pub mod order;
mod patch;
mod policy;
mod store;
mod terminate;
mod watch;

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{Query, State};
use axum::http::{HeaderMap, Method, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

pub use identity::User;
pub use store::{Key, Store};

/// One request as the server saw it (for "nothing else was written" assertions).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Logged {
    pub method: String,
    pub path: String,
    pub content_type: Option<String>,
    pub status: u16,
    /// The client's User-Agent (which component made it).
    pub user_agent: Option<String>,
}

/// What an injected fault does to a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FaultKind {
    /// Answer with this status and a Status body.
    Status(u16),
    /// Wait this long, then serve the request normally (a slow API server).
    Delay(std::time::Duration),
    /// Never answer (the client's own timeout must save it).
    Hang,
    /// Abort the connection without an answer.
    Drop,
    /// Hold the request until the test lets it go ([`TestApiServer::hold_next`]; the number
    /// names the hold), then serve it normally.
    Held(usize),
}

/// A request held by [`TestApiServer::hold_next`]: served once this is released or dropped.
pub struct Release(tokio::sync::watch::Sender<bool>);

impl Release {
    pub fn release(self) {
        let _ = self.0.send(true);
    }
}

/// A fault to inject: the next `times` requests whose method matches (any method for `None`) and
/// whose path contains `path_contains`.
#[derive(Debug, Clone)]
struct Fault {
    method: Option<Method>,
    path_contains: String,
    kind: FaultKind,
    times: usize,
}

#[derive(Default)]
pub(crate) struct Inner {
    pub(crate) store: Store,
    faults: Vec<Fault>,
    /// What each [`FaultKind::Held`] waits on.
    holds: Vec<tokio::sync::watch::Receiver<bool>>,
    log: Vec<Logged>,
    /// Terminating pods stay until a test deletes them (see [`TestApiServer::stop_kubelets`]).
    pub(crate) no_kubelets: bool,
    /// Bearer tokens of other identities than the administrator ([`TestApiServer::client_as`]).
    pub(crate) users: std::collections::HashMap<String, identity::User>,
    /// The minor release discovery answers as (None: 1.30).
    minor: Option<u32>,
}

/// A running test API server.
#[derive(Clone)]
pub struct TestApiServer {
    pub addr: SocketAddr,
    inner: Arc<Mutex<Inner>>,
    watches: watch::Hub,
}

#[derive(Clone)]
struct App {
    inner: Arc<Mutex<Inner>>,
    watches: watch::Hub,
}

impl TestApiServer {
    /// Start on an ephemeral loopback port.
    pub async fn start() -> TestApiServer {
        let inner = Arc::new(Mutex::new(Inner::default()));
        let watches = watch::Hub::default();
        let app = Router::new().fallback(handle).with_state(App {
            inner: inner.clone(),
            watches: watches.clone(),
        });
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind loopback");
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        TestApiServer {
            addr,
            inner,
            watches,
        }
    }

    /// Answer discovery as Kubernetes 1.`minor` does: its version, and only the kinds it served
    /// (before 1.30, no ValidatingAdmissionPolicy v1).
    pub fn pretend_minor(&self, minor: u32) {
        self.inner.lock().unwrap().minor = Some(minor);
    }

    /// A real kube::Client talking HTTP to this server.
    pub fn client(&self) -> kube::Client {
        let url: axum::http::Uri = format!("http://{}", self.addr).parse().unwrap();
        let mut config = kube::Config::new(url);
        // As the binaries build theirs (nodemedic_common::client): no hidden client-side retries.
        config.default_retry = false;
        kube::Client::try_from(config).expect("client for the test server")
    }

    /// A client whose requests carry `user_agent`: the manager its writes are recorded under in
    /// `managedFields`, as kube-apiserver derives it.
    pub fn client_with_agent(&self, user_agent: &str) -> kube::Client {
        let url: axum::http::Uri = format!("http://{}", self.addr).parse().unwrap();
        let mut config = kube::Config::new(url);
        config.default_retry = false;
        config.headers.push((
            axum::http::header::USER_AGENT,
            axum::http::HeaderValue::from_str(user_agent).expect("a user agent"),
        ));
        kube::Client::try_from(config).expect("client for the test server")
    }

    /// A client that authenticates as the node identity `system:node:NAME` (group `system:nodes`),
    /// as a kubelet does: Node authorization and NodeRestriction admission confine it to its own
    /// Node, as recordings 60-62 show. (A request without a token is the cluster's administrator.)
    pub fn client_as_node(&self, name: &str) -> kube::Client {
        self.client_as(User::node(name))
    }

    /// A client that authenticates as `user` (a bearer token this server maps to it). Writes are
    /// then subject to the ValidatingAdmissionPolicies stored here, and node identities to Node
    /// authorization as well.
    pub fn client_as(&self, user: User) -> kube::Client {
        let token = self.token_for(user);
        let url: axum::http::Uri = format!("http://{}", self.addr).parse().unwrap();
        let mut config = kube::Config::new(url);
        config.default_retry = false;
        config.auth_info.token = Some(token.into());
        kube::Client::try_from(config).expect("client for the test server")
    }

    /// A bearer token for `user`, e.g. for [`TestApiServer::write_kubeconfig_with_token`].
    pub fn token_for(&self, user: User) -> String {
        let mut inner = self.inner.lock().unwrap();
        let token = format!("token-{}", inner.users.len());
        inner.users.insert(token.clone(), user);
        token
    }

    /// The base URL (for plain HTTP requests in tests).
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Make the next `times` matching requests fail with `status` (429, 500, 503 ...).
    /// A kubeconfig naming this server (plain HTTP, no credentials), for a binary run as its own
    /// process.
    pub fn write_kubeconfig(&self, path: &std::path::Path) {
        self.write_kubeconfig_as(path, "{}");
    }

    /// A kubeconfig naming this server and a token of [`TestApiServer::token_for`].
    pub fn write_kubeconfig_with_token(&self, path: &std::path::Path, token: &str) {
        self.write_kubeconfig_as(path, &format!("{{token: \"{token}\"}}"));
    }

    fn write_kubeconfig_as(&self, path: &std::path::Path, user: &str) {
        std::fs::write(
            path,
            format!(
                "apiVersion: v1\nkind: Config\nclusters: [{{name: c, cluster: {{server: \"{}\"}}}}]\n\
                 users: [{{name: u, user: {user}}}]\ncontexts: [{{name: c, context: {{cluster: c, user: u}}}}]\ncurrent-context: c\n",
                self.url()
            ),
        )
        .expect("kubeconfig");
    }

    pub fn fail_next(&self, method: &str, path_contains: &str, status: u16, times: usize) {
        self.inject(method, path_contains, FaultKind::Status(status), times);
    }

    /// Do `kind` to the next `times` requests with `method` (`"*"`: any) and a path containing
    /// `path_contains`.
    pub fn inject(&self, method: &str, path_contains: &str, kind: FaultKind, times: usize) {
        self.inner.lock().unwrap().faults.push(Fault {
            method: (method != "*").then(|| method.parse().unwrap()),
            path_contains: path_contains.to_string(),
            kind,
            times,
        });
    }

    /// Hold the next request with `method` and a path containing `path_contains` until the
    /// returned [`Release`] is released (or dropped): a slow answer the test ends when it has seen
    /// what happens meanwhile.
    pub fn hold_next(&self, method: &str, path_contains: &str) -> Release {
        let (tx, rx) = tokio::sync::watch::channel(false);
        let n = {
            let mut inner = self.inner.lock().unwrap();
            inner.holds.push(rx);
            inner.holds.len() - 1
        };
        self.inject(method, path_contains, FaultKind::Held(n), 1);
        Release(tx)
    }

    /// Stop standing in for kubelets: a pod deleted or evicted with a grace period stays terminating
    /// (with its deletionTimestamp) until deleted again with grace 0, as on a control plane without
    /// kubelets (see `terminate`).
    pub fn stop_kubelets(&self) {
        self.inner.lock().unwrap().no_kubelets = true;
    }

    /// Abort every open watch mid-stream.
    pub fn cut_watches(&self) {
        self.watches.cut_all();
    }

    /// The next `n` watches that resume from a resourceVersion get `410 Gone`.
    pub fn gone_on_resume(&self, n: usize) {
        self.watches.gone_on_resume(n);
    }

    /// What clients see of a restart: every watch cut, the change history gone (resuming gets 410).
    pub fn restart(&self) {
        self.watches.restart();
    }

    /// Requests seen so far.
    pub fn log(&self) -> Vec<Logged> {
        self.inner.lock().unwrap().log.clone()
    }

    /// Count requests matching method and a path fragment (successful or not).
    pub fn count(&self, method: &str, path_contains: &str) -> usize {
        self.log()
            .iter()
            .filter(|l| l.method == method && l.path.contains(path_contains))
            .count()
    }

    /// Read an object directly from storage.
    pub fn object(
        &self,
        api: &str,
        resource: &str,
        namespace: Option<&str>,
        name: &str,
    ) -> Option<Value> {
        self.inner
            .lock()
            .unwrap()
            .store
            .get(&Key::new(api, resource, namespace, name))
    }

    /// Store an object directly (as if a controller wrote it) and notify watchers.
    pub fn put_object(
        &self,
        api: &str,
        resource: &str,
        namespace: Option<&str>,
        obj: Value,
    ) -> Value {
        let name = obj["metadata"]["name"]
            .as_str()
            .expect("object has metadata.name")
            .to_string();
        let key = Key::new(api, resource, namespace, &name);
        let mut inner = self.inner.lock().unwrap();
        let existed = inner.store.contains(&key);
        let stored = inner.store.put(&key, obj);
        self.watches.publish(
            &key,
            if existed { "MODIFIED" } else { "ADDED" },
            stored.clone(),
        );
        stored
    }

    /// All objects of a resource.
    pub fn objects(&self, api: &str, resource: &str) -> Vec<Value> {
        self.inner.lock().unwrap().store.list(api, resource, None)
    }
}

/// A Kubernetes `Status` failure body, as the real server writes it.
pub fn status_body(
    code: u16,
    reason: Option<&str>,
    message: &str,
    details: Option<Value>,
) -> Value {
    let mut s = json!({
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "code": code,
    });
    if let Some(r) = reason {
        s["reason"] = json!(r);
    }
    if let Some(d) = details {
        s["details"] = d;
    }
    s
}

pub(crate) fn error(
    code: u16,
    reason: Option<&str>,
    message: &str,
    details: Option<Value>,
) -> Response {
    json_response(
        StatusCode::from_u16(code).unwrap(),
        &status_body(code, reason, message, details),
    )
}

/// 400 for a body that is not JSON, worded as the real server words it.
pub(crate) fn bad_body(e: &serde_json::Error) -> Response {
    error(
        400,
        Some("BadRequest"),
        &format!("the body of the request was in an unknown format: {e}"),
        None,
    )
}

pub(crate) fn json_response(status: StatusCode, v: &Value) -> Response {
    (
        status,
        [(header::CONTENT_TYPE, "application/json")],
        order::to_string(v),
    )
        .into_response()
}

/// Path shapes: /api/v1/... and /apis/GROUP/VERSION/..., then [namespaces/NS/]RESOURCE[/NAME[/SUB]].
#[derive(Debug, Clone)]
pub(crate) struct Target {
    pub api: String,
    pub namespace: Option<String>,
    pub resource: String,
    pub name: Option<String>,
    pub sub: Option<String>,
}

/// Who sends a write, and whether it is a dry run (`?dryRun=All`: admitted and answered as if
/// stored, but neither stored nor seen by watches).
pub(crate) struct Caller {
    pub(crate) user: User,
    pub(crate) dry_run: bool,
    /// Who the write's fields are recorded as set by ([`managed::manager`]).
    pub(crate) manager: String,
}

impl Caller {
    /// Admission by the stored policies, then (unless a dry run) store and publish; the answer.
    /// `old`: the stored object an update replaces (`None`: a create).
    pub(crate) fn commit(
        &self,
        store: &mut Store,
        hub: &watch::Hub,
        t: &Target,
        key: &Key,
        old: Option<&Value>,
        mut obj: Value,
    ) -> Response {
        let created = old.is_none();
        patch::normalise_condition_times(&mut obj, &t.resource);
        managed::track(
            old,
            &mut obj,
            &self.manager,
            &store::api_version(&t.api),
            t.sub.as_deref(),
            &store::now_rfc3339(),
        );
        let write = policy::Write {
            user: &self.user,
            operation: if created { "CREATE" } else { "UPDATE" },
            target: t,
            old,
            new: &obj,
            dry_run: self.dry_run,
        };
        if let Err(invalid) = admit::validate(&t.api, &t.resource, &obj) {
            return invalid;
        }
        if let Err(refused) = policy::admit(store, &write) {
            return refused;
        }
        let status = if created {
            StatusCode::CREATED
        } else {
            StatusCode::OK
        };
        if self.dry_run {
            return json_response(status, &obj);
        }
        let (stored, written) = match old {
            Some(old) => store.update(key, old, obj),
            None => (store.put(key, obj), true),
        };
        let answer = json_response(status, &stored);
        if written {
            hub.publish(key, if created { "ADDED" } else { "MODIFIED" }, stored);
        }
        answer
    }
}

fn parse_path(path: &str) -> Option<Target> {
    let segs: Vec<&str> = path.trim_matches('/').split('/').collect();
    let (api, rest) = match segs.as_slice() {
        ["api", v, rest @ ..] => (v.to_string(), rest),
        ["apis", g, v, rest @ ..] => (format!("{g}/{v}"), rest),
        _ => return None,
    };
    let (namespace, rest) = match rest {
        ["namespaces", ns, r, rest @ ..] => (Some(ns.to_string()), {
            let mut v = vec![*r];
            v.extend_from_slice(rest);
            v
        }),
        r => (None, r.to_vec()),
    };
    match rest.as_slice() {
        [resource] => Some(Target {
            api,
            namespace,
            resource: resource.to_string(),
            name: None,
            sub: None,
        }),
        [resource, name] => Some(Target {
            api,
            namespace,
            resource: resource.to_string(),
            name: Some(name.to_string()),
            sub: None,
        }),
        [resource, name, sub] => Some(Target {
            api,
            namespace,
            resource: resource.to_string(),
            name: Some(name.to_string()),
            sub: Some(sub.to_string()),
        }),
        _ => None,
    }
}

async fn handle(
    State(app): State<App>,
    method: Method,
    uri: Uri,
    Query(query): Query<std::collections::HashMap<String, String>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let path = uri.path().to_string();
    // A dry run is logged with its query, so counts of writes can leave it out.
    let logged = if query.get("dryRun").is_some_and(|d| d == "All") {
        format!("{path}?dryRun=All")
    } else {
        path.clone()
    };
    let agent = headers
        .get(header::USER_AGENT)
        .and_then(|v| v.to_str().ok())
        .map(String::from);
    let content_type = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .map(|s| s.split(';').next().unwrap_or(s).trim().to_string());
    // Injected faults first.
    let fault = {
        let mut inner = app.inner.lock().unwrap();
        let hit = inner.faults.iter_mut().find(|f| {
            f.times > 0
                && f.method.as_ref().is_none_or(|m| *m == method)
                && path.contains(&f.path_contains)
        });
        hit.map(|f| {
            f.times -= 1;
            f.kind
        })
        .map(|kind| match kind {
            FaultKind::Held(n) => (kind, inner.holds.get(n).cloned()),
            _ => (kind, None),
        })
    };
    let fault = match fault {
        Some((FaultKind::Held(_), Some(mut released))) => {
            // A dropped Release lets it go too (the error).
            let _ = released.wait_for(|r| *r).await;
            None
        }
        other => other.map(|(kind, _)| kind),
    };
    let fault = match fault {
        Some(FaultKind::Delay(d)) => {
            tokio::time::sleep(d).await;
            None
        }
        Some(FaultKind::Held(_)) => None,
        Some(FaultKind::Hang) => {
            std::future::pending::<()>().await;
            None
        }
        Some(FaultKind::Drop) => {
            log(&app, &method, &logged, content_type.clone(), agent, 0);
            let abort = futures::stream::once(async {
                Err::<Bytes, _>(std::io::Error::other("connection dropped by the test"))
            });
            return Response::builder()
                .status(200)
                .body(Body::from_stream(abort))
                .unwrap();
        }
        Some(FaultKind::Status(code)) => Some(code),
        None => None,
    };
    let user = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .and_then(|t| app.inner.lock().unwrap().users.get(t).cloned())
        .unwrap_or_else(User::admin);
    let refused = user.node_name().and_then(|n| {
        parse_path(&path).and_then(|t| identity::node_may(n, &method, &t, &body).err())
    });
    let caller = Caller {
        dry_run: query.get("dryRun").is_some_and(|d| d == "All"),
        user,
        manager: managed::manager(
            query.get("fieldManager").map(String::as_str),
            agent.as_deref(),
        ),
    };
    let response = if let Some(refused) = refused {
        refused
    } else if let Some(code) = fault {
        let reason = match code {
            429 => Some("TooManyRequests"),
            500 => Some("InternalError"),
            503 => Some("ServiceUnavailable"),
            409 => Some("Conflict"),
            _ => None,
        };
        error(code, reason, &format!("injected fault ({code})"), None)
    } else if method == Method::GET
        && let Some(found) = discovery::answer(
            &path,
            headers
                .get(header::HOST)
                .and_then(|h| h.to_str().ok())
                .unwrap_or(""),
            app.inner.lock().unwrap().minor.unwrap_or(30),
        )
    {
        json_response(StatusCode::OK, &found)
    } else {
        match parse_path(&path) {
            None => error(
                404,
                Some("NotFound"),
                "the server could not find the requested resource",
                None,
            ),
            Some(t) => {
                route(
                    &app,
                    &method,
                    t,
                    &query,
                    content_type.as_deref(),
                    &body,
                    &caller,
                )
                .await
            }
        }
    };
    let status = response.status().as_u16();
    log(&app, &method, &logged, content_type, agent, status);
    response
}

fn log(
    app: &App,
    method: &Method,
    path: &str,
    content_type: Option<String>,
    user_agent: Option<String>,
    status: u16,
) {
    app.inner.lock().unwrap().log.push(Logged {
        method: method.to_string(),
        path: path.to_string(),
        content_type,
        status,
        user_agent,
    });
}

async fn route(
    app: &App,
    method: &Method,
    t: Target,
    query: &std::collections::HashMap<String, String>,
    content_type: Option<&str>,
    body: &[u8],
    caller: &Caller,
) -> Response {
    let parse_body = || serde_json::from_slice::<Value>(body);
    match (method.as_str(), &t.name) {
        ("GET", None) if query.get("watch").is_some_and(|w| w == "true" || w == "1") => {
            watch::serve(&app.inner, &app.watches, &t, query)
        }
        ("GET", None) => store::list(&app.inner, &t, query),
        ("POST", None) => match parse_body() {
            Ok(obj) => store::create(&app.inner, &app.watches, &t, obj, caller),
            Err(e) => bad_body(&e),
        },
        ("POST", Some(_)) if t.sub.as_deref() == Some("eviction") => match parse_body() {
            Ok(obj) => evict::evict(&app.inner, &app.watches, &t, &obj),
            Err(e) => bad_body(&e),
        },
        ("GET", Some(_)) => store::get(&app.inner, &t),
        ("DELETE", Some(_)) => {
            // DeleteOptions ride in the body (kube sends them there); an empty body is no options.
            let options = if body.is_empty() {
                Ok(Value::Null)
            } else {
                parse_body()
            };
            match options {
                Ok(options) => store::delete(&app.inner, &app.watches, &t, &options),
                Err(e) => bad_body(&e),
            }
        }
        ("PUT", Some(_)) => match parse_body() {
            Ok(obj) => store::replace(&app.inner, &app.watches, &t, obj, caller),
            Err(e) => bad_body(&e),
        },
        ("PATCH", Some(_)) => {
            patch::handle(&app.inner, &app.watches, &t, content_type, body, caller)
        }
        _ => error(
            405,
            Some("MethodNotAllowed"),
            &format!("{method} is not supported here"),
            None,
        ),
    }
}

/// For handlers: an empty body response.
#[allow(dead_code)]
pub(crate) fn empty(status: StatusCode) -> Response {
    (status, Body::empty()).into_response()
}
