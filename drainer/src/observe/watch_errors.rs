//! Watch errors in operator words, logged the first time and then at most once a minute while
//! they go on: shared by every watch of `observe`. I/O (logs).

use nodemedic_common::throttle::Throttle;

/// A watch error, logged the first time and then at most once a minute while it keeps failing (the
/// watcher retries with backoff; `/healthz` fails once it has been failing for 5 minutes).
pub(super) fn watch_failed(failing: &mut Throttle, what: &str, e: &kube::runtime::watcher::Error) {
    if let Some(quiet) = failing.allow(std::time::Instant::now()) {
        let error = watch_error(e);
        tracing::warn!(watch = what, %error, earlier_errors_not_logged = quiet, "watch error; the watcher retries (logged at most once a minute)");
    }
}

/// A watch error in operator words: what failed, and the API server's answer as it said it (the
/// watcher's own `Display` carries kube's `Debug` dump of the answer).
pub(super) fn watch_error(e: &kube::runtime::watcher::Error) -> String {
    use kube::runtime::watcher::Error;
    use nodemedic_common::client::said;
    match e {
        Error::InitialListFailed(k) => format!("the initial list failed: {}", said(k)),
        Error::WatchStartFailed(k) => format!("the watch could not start: {}", said(k)),
        Error::WatchFailed(k) => format!("the watch failed: {}", said(k)),
        Error::WatchError(s) => format!(
            "the API server ended the watch: {} ({}, HTTP {})",
            s.message, s.reason, s.code
        ),
        other => other.to_string(),
    }
}
