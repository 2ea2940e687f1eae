//! Notifications: a JSON POST to each `--notify-url` for what matters to the people on call
//! (cordon, drain start, drain result, uncordon, breaker open and close, outage start and end, a
//! node flapping). The body carries a Slack-compatible `text` (Slack, Mattermost and Teams
//! incoming webhooks read it) and the facts as fields. A task of its own sends them, retrying with
//! backoff, so a slow or failing endpoint never holds up a decision; a full queue drops (counted),
//! as does an endpoint failing every try. I/O (the sending task); the body is made purely.

use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use crate::config::url::NotifyUrl;
use crate::metrics::{Metrics, NotifyResult};

/// Notifications waiting at most (beyond, new ones are dropped and counted).
const QUEUE: usize = 1024;
/// Tries per endpoint and notification, and the first backoff (doubling).
const TRIES: u32 = 5;
const FIRST_BACKOFF: Duration = Duration::from_millis(500);
/// One POST, connection included.
const TIMEOUT: Duration = Duration::from_secs(10);

/// A condition of the node, as notified.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub(crate) struct ConditionNote {
    #[serde(rename = "type")]
    pub(crate) type_: String,
    pub(crate) status: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub(crate) reason: String,
    pub(crate) since: String,
}

/// What a notification is about (its `event` field, snake_case).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum NotifyKind {
    Cordoned,
    DrainStarted,
    Drained,
    DrainFailed,
    Uncordoned,
    BreakerOpened,
    BreakerClosed,
    OutageStarted,
    OutageEnded,
    NodeFlapping,
    DetectorSilent,
    DetectorHeard,
    CommonCause,
    RebootRequested,
    Replacing,
    NeedsPerson,
    SlowStart,
    DomainKept,
    LeftToPeer,
}

impl NotifyKind {
    /// In words, for chat text.
    pub(crate) fn words(self) -> &'static str {
        use NotifyKind::*;
        match self {
            Cordoned => "cordoned",
            DrainStarted => "drain started",
            Drained => "drained",
            DrainFailed => "drain failed",
            Uncordoned => "uncordoned",
            BreakerOpened => "breaker opened",
            BreakerClosed => "breaker closed",
            OutageStarted => "outage started",
            OutageEnded => "outage ended",
            NodeFlapping => "node flapping",
            DetectorSilent => "detector silent",
            DetectorHeard => "detector heard again",
            CommonCause => "common cause",
            RebootRequested => "reboot requested",
            Replacing => "replacing",
            NeedsPerson => "needs a person",
            SlowStart => "slow start",
            DomainKept => "failure domain kept",
            LeftToPeer => "left to another remediator",
        }
    }
}

/// One notification (the JSON body).
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub(crate) struct Notification {
    pub(crate) event: NotifyKind,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) node: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) domain: Option<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) conditions: Vec<ConditionNote>,
    pub(crate) reason: String,
    pub(crate) time: String,
    /// The drainer that acted (its Lease name).
    pub(crate) drainer: String,
    /// For chat webhooks.
    pub(crate) text: String,
}

impl Notification {
    /// With the chat `text` made from the rest.
    pub(crate) fn new(
        event: NotifyKind,
        node: Option<String>,
        domain: Option<String>,
        reason: String,
        drainer: &str,
        at: k8s_openapi::jiff::Timestamp,
    ) -> Notification {
        let subject = match (&node, &domain) {
            (Some(n), _) => format!("node {n}"),
            (None, Some(d)) => format!("domain {d}"),
            (None, None) => "the cluster".to_string(),
        };
        let what = event.words();
        Notification {
            text: format!("nodemedic ({drainer}): {what}: {subject}: {reason}"),
            event,
            node,
            domain,
            conditions: Vec::new(),
            reason,
            time: nodemedic_common::time::rfc3339(at),
            drainer: drainer.to_string(),
        }
    }
}

/// Hands notifications to the sending task (cheap to clone; a no-op without URLs).
#[derive(Clone)]
pub(crate) struct Notifier {
    tx: Option<mpsc::Sender<Notification>>,
    metrics: Option<Metrics>,
}

impl Notifier {
    pub(crate) fn disabled() -> Notifier {
        Notifier {
            tx: None,
            metrics: None,
        }
    }

    /// Start the sending task for `urls` (none: disabled, no task).
    pub(crate) fn start(
        urls: Vec<NotifyUrl>,
        metrics: Metrics,
    ) -> (Notifier, Option<JoinHandle<()>>) {
        if urls.is_empty() {
            return (Notifier::disabled(), None);
        }
        let (tx, rx) = mpsc::channel(QUEUE);
        let task = tokio::spawn(send_all(urls, rx, metrics.clone()));
        (
            Notifier {
                tx: Some(tx),
                metrics: Some(metrics),
            },
            Some(task),
        )
    }

    /// Queue `n`; never waits.
    pub(crate) fn send(&self, n: Notification) {
        let Some(tx) = &self.tx else {
            return;
        };
        if tx.try_send(n).is_err()
            && let Some(m) = &self.metrics
        {
            m.notification(NotifyResult::Dropped);
        }
    }
}

pub(crate) type HttpClient = Client<
    hyper_rustls::HttpsConnector<hyper_util::client::legacy::connect::HttpConnector>,
    Full<Bytes>,
>;

pub(crate) fn client() -> Result<HttpClient, std::io::Error> {
    let https = hyper_rustls::HttpsConnectorBuilder::new()
        .with_provider_and_native_roots(rustls::crypto::ring::default_provider())?
        .https_or_http()
        .enable_http1()
        .build();
    Ok(Client::builder(TokioExecutor::new()).build(https))
}

async fn send_all(urls: Vec<NotifyUrl>, mut rx: mpsc::Receiver<Notification>, metrics: Metrics) {
    let client = match client() {
        Ok(c) => c,
        Err(e) => {
            tracing::error!(error = %e, "cannot set up HTTPS for notifications: none will be sent");
            while rx.recv().await.is_some() {
                metrics.notification(NotifyResult::Failed);
            }
            return;
        }
    };
    while let Some(n) = rx.recv().await {
        let body = match serde_json::to_vec(&n) {
            Ok(b) => Bytes::from(b),
            Err(_) => continue,
        };
        for url in &urls {
            let result = post_with_retries(&client, url, &body).await;
            match &result {
                Ok(()) => metrics.notification(NotifyResult::Sent),
                Err(e) => {
                    // `url` shows as scheme and host only: the rest may be a credential.
                    // The event as the notification's JSON names it (`drain_started`).
                    let event = serde_json::to_value(n.event)
                        .ok()
                        .and_then(|v| v.as_str().map(String::from))
                        .unwrap_or_default();
                    tracing::warn!(%url, %event, error = %e, "notification not delivered");
                    metrics.notification(NotifyResult::Failed);
                }
            }
        }
    }
}

/// Why one POST of a notification did not go through.
#[derive(Debug, thiserror::Error)]
pub(crate) enum DeliveryError {
    #[error("cannot build the request: {0}")]
    Request(#[source] axum::http::Error),
    #[error("no answer within {}s", TIMEOUT.as_secs())]
    Timeout,
    #[error("{0}")]
    Transport(#[source] hyper_util::client::legacy::Error),
    #[error("HTTP {0}")]
    Status(axum::http::StatusCode),
    /// Every try failed; the last one's error.
    #[error("attempt {attempts}: {last}")]
    GaveUp {
        attempts: u32,
        #[source]
        last: Box<DeliveryError>,
    },
}

async fn post_with_retries(
    client: &HttpClient,
    url: &NotifyUrl,
    body: &Bytes,
) -> Result<(), DeliveryError> {
    let mut backoff = FIRST_BACKOFF;
    let mut attempt = 1;
    loop {
        match post(client, url.expose(), body).await {
            Ok(()) => return Ok(()),
            // The endpoint refused this request (a revoked hook, a bad body): trying again cannot
            // help. 429 asks for a later try.
            Err(DeliveryError::Status(s))
                if s.is_client_error() && s != axum::http::StatusCode::TOO_MANY_REQUESTS =>
            {
                return Err(DeliveryError::Status(s));
            }
            Err(e) if attempt >= TRIES => {
                return Err(DeliveryError::GaveUp {
                    attempts: attempt,
                    last: Box::new(e),
                });
            }
            Err(_) => {}
        }
        tokio::time::sleep(backoff).await;
        backoff *= 2;
        attempt += 1;
    }
}

async fn post(client: &HttpClient, url: &str, body: &Bytes) -> Result<(), DeliveryError> {
    let req = axum::http::Request::post(url)
        .header(axum::http::header::CONTENT_TYPE, "application/json")
        .header(
            axum::http::header::USER_AGENT,
            nodemedic_common::keys::DRAINER_MANAGER,
        )
        .body(Full::new(body.clone()))
        .map_err(DeliveryError::Request)?;
    let resp = tokio::time::timeout(TIMEOUT, client.request(req))
        .await
        .map_err(|_| DeliveryError::Timeout)?
        .map_err(DeliveryError::Transport)?;
    if resp.status().is_success() {
        Ok(())
    } else {
        Err(DeliveryError::Status(resp.status()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};

    /// A local endpoint that fails the first `fail` requests, then records bodies.
    async fn endpoint(fail: usize) -> (NotifyUrl, Arc<Mutex<Vec<serde_json::Value>>>) {
        endpoint_failing_with(fail, axum::http::StatusCode::INTERNAL_SERVER_ERROR).await
    }

    /// A local endpoint that answers `status` to the first `fail` requests (counted in the second
    /// value), then records bodies.
    async fn endpoint_failing_with(
        fail: usize,
        status: axum::http::StatusCode,
    ) -> (NotifyUrl, Arc<Mutex<Vec<serde_json::Value>>>) {
        let (url, seen, _) = counting_endpoint(fail, status).await;
        (url, seen)
    }

    async fn counting_endpoint(
        fail: usize,
        status: axum::http::StatusCode,
    ) -> (
        NotifyUrl,
        Arc<Mutex<Vec<serde_json::Value>>>,
        Arc<std::sync::atomic::AtomicUsize>,
    ) {
        use axum::routing::post;
        let seen = Arc::new(Mutex::new(Vec::new()));
        let calls = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let (s, c) = (seen.clone(), calls.clone());
        let app = axum::Router::new().route(
            "/hook",
            post(move |body: String| {
                let (s, c) = (s.clone(), c.clone());
                async move {
                    if c.fetch_add(1, std::sync::atomic::Ordering::SeqCst) < fail {
                        return status;
                    }
                    s.lock().unwrap().push(serde_json::from_str(&body).unwrap());
                    axum::http::StatusCode::OK
                }
            }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await });
        (NotifyUrl::new(format!("http://{addr}/hook")), seen, calls)
    }

    fn metrics() -> (Metrics, prometheus_client::registry::Registry) {
        let mut r = prometheus_client::registry::Registry::default();
        (Metrics::register(&mut r), r)
    }

    fn sent(r: &prometheus_client::registry::Registry, result: &str) -> u64 {
        let mut out = String::new();
        prometheus_client::encoding::text::encode(&mut out, r).unwrap();
        let prefix = format!("nodemedic_drainer_notifications_total{{result=\"{result}\"}} ");
        out.lines()
            .find_map(|l| l.strip_prefix(&prefix))
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    }

    #[tokio::test]
    async fn a_notification_is_posted_as_json_with_slack_text_and_retried_after_failures() {
        let (url, seen) = endpoint(2).await;
        let (m, registry) = metrics();
        let (n, _task) = Notifier::start(vec![url], m);
        let mut note = Notification::new(
            NotifyKind::Cordoned,
            Some("node-a".into()),
            Some("zone-a".into()),
            "KernelDeadlock=True for 12m".into(),
            "nodemedic-drainer",
            "2026-11-24T10:00:00Z".parse().unwrap(),
        );
        note.conditions.push(ConditionNote {
            type_: "KernelDeadlock".into(),
            status: "True".into(),
            reason: "DockerHung".into(),
            since: "2026-11-24T09:00:00Z".into(),
        });
        n.send(note);
        // Delivered, and counted once the endpoint's answer came back (the body is seen before).
        for _ in 0..1200 {
            if sent(&registry, "sent") == 1 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let got = seen.lock().unwrap().clone();
        assert_eq!(got.len(), 1, "delivered once, after two failures");
        let b = &got[0];
        assert_eq!(b["event"], "cordoned");
        assert_eq!(b["node"], "node-a");
        assert_eq!(b["domain"], "zone-a");
        assert_eq!(b["time"], "2026-11-24T10:00:00Z");
        assert_eq!(b["conditions"][0]["reason"], "DockerHung");
        assert_eq!(
            b["text"],
            "nodemedic (nodemedic-drainer): cordoned: node node-a: KernelDeadlock=True for 12m"
        );
        assert_eq!(sent(&registry, "sent"), 1);
    }

    #[tokio::test]
    async fn an_endpoint_that_keeps_failing_is_given_up_and_counted_without_blocking() {
        let (url, seen) = endpoint(usize::MAX).await;
        let (m, registry) = metrics();
        let (n, _task) = Notifier::start(vec![url], m);
        // `send` is a plain function over a bounded queue: it cannot wait for the endpoint.
        for i in 0..3 {
            n.send(Notification::new(
                NotifyKind::Uncordoned,
                Some(format!("n{i}")),
                None,
                "ok".into(),
                "d",
                "2026-11-24T10:00:00Z".parse().unwrap(),
            ));
        }
        assert_eq!(
            sent(&registry, "failed"),
            0,
            "nothing given up while sending"
        );
        for _ in 0..1200 {
            if sent(&registry, "failed") >= 1 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        assert_eq!(
            sent(&registry, "failed"),
            1,
            "the first given up after its tries"
        );
        assert!(seen.lock().unwrap().is_empty());
    }

    #[tokio::test]
    async fn a_refused_request_is_not_retried_but_too_many_requests_is() {
        let (url, seen, calls) =
            counting_endpoint(usize::MAX, axum::http::StatusCode::FORBIDDEN).await;
        let (m, registry) = metrics();
        let (n, _task) = Notifier::start(vec![url], m);
        let note = || {
            Notification::new(
                NotifyKind::Drained,
                Some("n".into()),
                None,
                "ok".into(),
                "d",
                "2026-11-24T10:00:00Z".parse().unwrap(),
            )
        };
        n.send(note());
        for _ in 0..1200 {
            if sent(&registry, "failed") >= 1 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        assert_eq!(sent(&registry, "failed"), 1);
        assert_eq!(
            calls.load(std::sync::atomic::Ordering::SeqCst),
            1,
            "a 403 was tried again"
        );
        assert!(seen.lock().unwrap().is_empty());
        // 429: tried again, and delivered.
        let (url, seen) = endpoint_failing_with(1, axum::http::StatusCode::TOO_MANY_REQUESTS).await;
        let (m, registry) = metrics();
        let (n, _task) = Notifier::start(vec![url], m);
        n.send(note());
        for _ in 0..1200 {
            if sent(&registry, "sent") == 1 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        assert_eq!(seen.lock().unwrap().len(), 1, "delivered after the 429");
    }
}
