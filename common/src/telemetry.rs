//! Structured logs through `tracing`, as text for people or JSON for log pipelines. The level comes
//! from `RUST_LOG` (default `info`). Colours only on a terminal.
//!
//! The kube client logs a whole response body at WARN when it cannot decode one (pod specs, env
//! values, annotations in the logs), its watch timeouts at WARN too, and every failed request at
//! ERROR from its tracing layer (`kube_client::client::builder`, one line per retry during an API
//! outage). So unless `RUST_LOG` names `kube_client` itself, `kube_client::client` is kept at ERROR
//! and that layer off. The errors reach our own code, which logs them once, without the body.

use std::io::IsTerminal;

use tracing_subscriber::EnvFilter;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    #[default]
    Text,
    Json,
}

/// A log format that is neither `text` nor `json`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown log format {0:?} (expected text or json)")]
pub struct UnknownLogFormat(pub String);

impl std::str::FromStr for LogFormat {
    type Err = UnknownLogFormat;
    fn from_str(s: &str) -> Result<Self, UnknownLogFormat> {
        match s {
            "text" => Ok(LogFormat::Text),
            "json" => Ok(LogFormat::Json),
            other => Err(UnknownLogFormat(other.to_string())),
        }
    }
}

/// The filter for `RUST_LOG` = `env` (see the module comment).
pub fn filter(env: Option<&str>) -> EnvFilter {
    let spec = env.filter(|e| !e.trim().is_empty()).unwrap_or("info");
    let mut f = EnvFilter::try_new(spec).unwrap_or_else(|e| {
        eprintln!("RUST_LOG {spec:?} is not a valid filter ({e}); logging at info");
        EnvFilter::new("info")
    });
    if !spec.contains("kube_client") {
        for d in [
            "kube_client::client=error",
            "kube_client::client::builder=off",
            // Its CA bundle warning (it has a `path` field) stays; "Server cert bypassed", said at
            // every TLS handshake of a kubeconfig that turns verification off, goes: the client's
            // builder says that once (`client::from_config`).
            "kube_client::client::tls=error",
            "kube_client::client::tls[{path}]=warn",
        ] {
            if let Ok(d) = d.parse() {
                f = f.add_directive(d);
            }
        }
    }
    // kube's watcher says each failed list or watch at WARN as a Rust `Debug` dump of the API's
    // Status ("watch list error with 403: Api(Status { ... })"), every few seconds while it lasts;
    // the error reaches the watch's owner, which says it once in its own words.
    if !spec.contains("kube_runtime")
        && let Ok(d) = "kube_runtime::watcher=error".parse()
    {
        f = f.add_directive(d);
    }
    f
}

/// Install the global subscriber; logs go to stderr so stdout stays free for command output.
pub fn init(format: LogFormat) {
    init_with_default(format, None)
}

/// As [`init`], with `default` as the filter when `RUST_LOG` is not set (e.g. from NPD's `-v`).
pub fn init_with_default(format: LogFormat, default: Option<&str>) {
    let env = std::env::var("RUST_LOG")
        .ok()
        .filter(|e| !e.trim().is_empty())
        .or(default.map(str::to_string));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter(env.as_deref()))
        .with_ansi(std::io::stderr().is_terminal())
        .with_writer(std::io::stderr);
    let _ = match format {
        LogFormat::Text => builder.try_init(),
        LogFormat::Json => builder.json().flatten_event(true).try_init(),
    };
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};

    #[derive(Clone, Default)]
    struct Buf(Arc<Mutex<Vec<u8>>>);

    impl std::io::Write for Buf {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    fn logged(env: Option<&str>) -> String {
        let buf = Buf::default();
        let w = buf.clone();
        let sub = tracing_subscriber::fmt()
            .with_env_filter(filter(env))
            .with_ansi(false)
            .with_writer(move || w.clone())
            .finish();
        tracing::subscriber::with_default(sub, || {
            tracing::warn!(target: "kube_client::client", "{{\"kind\":\"Pod\",\"env\":\"SECRET\"}}, missing field");
            tracing::warn!(target: "kube_client::client::tls", path = ?"/ca.crt", "failed to reload CA bundle");
            tracing::warn!(target: "kube_client::client::tls", "Server cert bypassed");
            tracing::error!(target: "kube_client::client::builder", "failed with error client error (Connect)");
            tracing::warn!(target: "kube_runtime::watcher", "watch list error with 403: Api(Status {{ code: 403 }})");
            tracing::warn!(target: "nodemedic", "our own warning");
        });
        String::from_utf8(buf.0.lock().unwrap().clone()).unwrap()
    }

    #[test]
    fn the_kube_clients_response_bodies_stay_out_of_the_logs() {
        for env in [None, Some("info"), Some("debug"), Some("")] {
            let out = logged(env);
            assert!(!out.contains("SECRET"), "{env:?}: {out}");
            assert!(out.contains("our own warning"), "{env:?}: {out}");
            assert!(out.contains("CA bundle"), "{env:?}: {out}");
            assert!(!out.contains("Connect"), "{env:?}: {out}");
            assert!(!out.contains("Server cert bypassed"), "{env:?}: {out}");
            assert!(!out.contains("Api(Status"), "{env:?}: {out}");
        }
        assert!(logged(Some("info,kube_runtime=warn")).contains("Api(Status"));
        // Asked for by name, it is the operator's choice.
        assert!(logged(Some("info,kube_client=warn")).contains("SECRET"));
    }
}
