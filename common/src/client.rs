//! Building a `kube::Client`: in-cluster service account first, then `KUBECONFIG` / `~/.kube/config`,
//! the same order `kube::Client::try_default` uses, with our own user agent so API audit logs and
//! managedFields name us.

use kube::{Client, Config};

/// A kube error as an operator reads it: the API server's own message with its reason and code
/// (kube's `Display` of an error answer appends the whole `Status` in Rust's `Debug` form:
/// `NotFound (Status { status: Some(Failure) ...`), else the error and its causes.
pub fn said(e: &kube::Error) -> String {
    match e {
        kube::Error::Api(s) => {
            let reason = if s.reason.is_empty() {
                String::new()
            } else {
                format!("{}, ", s.reason)
            };
            format!("{} ({reason}HTTP {})", s.message, s.code)
        }
        // Its causes, said as every error chain is (`error_chain`).
        other => {
            let out = other.to_string();
            match std::error::Error::source(other).map(error_chain) {
                // hyper's client error wraps one of the same words: said once.
                Some(rest) if rest.starts_with(&out) => rest,
                Some(rest) if out.ends_with(rest.split(": ").next().unwrap_or_default()) => {
                    let first = rest.split(": ").next().unwrap_or_default();
                    format!("{out}{}", &rest[first.len()..])
                }
                Some(rest) if !out.contains(&rest) => format!("{out}: {rest}"),
                _ => out,
            }
        }
    }
}

/// Whether `e` says the API server could not be reached or is not serving yet (no connection, a
/// connection cut, a timeout, HTTP 5xx or 429): worth waiting for with backoff, unlike a refusal
/// (401, 403, 404, 409, 422), which waiting does not change.
pub fn unreachable(e: &kube::Error) -> bool {
    match e {
        kube::Error::Api(s) => s.code >= 500 || s.code == 429,
        kube::Error::Service(_) | kube::Error::HyperError(_) => true,
        _ => false,
    }
}

/// Errors building a client.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(
        "no Kubernetes configuration found (neither in-cluster service account nor KUBECONFIG): {0}"
    )]
    Infer(#[source] kube::config::InferConfigError),
    #[error("cannot build a Kubernetes client: {}", said(.0))]
    Build(#[source] kube::Error),
    #[error("kubeconfig {path}: {source}")]
    Kubeconfig {
        path: std::path::PathBuf,
        #[source]
        source: kube::config::KubeconfigError,
    },
    #[error("{url:?}: not an API server URL ({reason})")]
    Master { url: String, reason: String },
    #[error(
        "the in-cluster service account is not there (inClusterConfig=true outside a pod): {0}"
    )]
    InCluster(#[source] kube::config::InClusterError),
}

/// Infer the configuration and build a client whose requests carry `user_agent`.
pub async fn infer(user_agent: &str) -> Result<Client, Error> {
    Ok(infer_with_credential(user_agent).await?.0)
}

/// Which credential a client authenticates with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Credential {
    /// The pod's ServiceAccount token (in-cluster).
    ServiceAccount,
    /// A kubeconfig's (a node's kubelet kubeconfig, a person's).
    Kubeconfig,
}

/// [`infer`], saying which credential it found.
pub async fn infer_with_credential(user_agent: &str) -> Result<(Client, Credential), Error> {
    let (client, credential, _) = infer_with_server(user_agent).await?;
    Ok((client, credential))
}

/// [`infer_with_credential`], and the API server's URL (for what a process says at start and when
/// it cannot reach it).
pub async fn infer_with_server(user_agent: &str) -> Result<(Client, Credential, String), Error> {
    connect(user_agent, &Options::default()).await
}

/// Where a client's configuration comes from, when not inferred (`--kubeconfig`, NPD's
/// `--apiserver-override`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Options {
    /// A kubeconfig file (else the in-cluster service account, then `KUBECONFIG` or
    /// `~/.kube/config`).
    pub kubeconfig: Option<std::path::PathBuf>,
    /// The in-cluster service account only (NPD's `inClusterConfig=true`, its default).
    pub in_cluster: bool,
    /// The API server's URL, in place of the configuration's.
    pub server: Option<String>,
    /// The API server's certificate not checked (NPD's `insecure=true`): said once at start.
    pub insecure: bool,
}

/// A client as `options` say, with the credential it authenticates with and the API server's URL.
pub async fn connect(
    user_agent: &str,
    options: &Options,
) -> Result<(Client, Credential, String), Error> {
    let mut config = match (&options.kubeconfig, options.in_cluster) {
        (Some(path), _) => from_kubeconfig(path).await?,
        (None, true) => Config::incluster().map_err(Error::InCluster)?,
        (None, false) => Config::infer().await.map_err(Error::Infer)?,
    };
    if let Some(server) = &options.server {
        config.cluster_url = server.parse().map_err(|e| Error::Master {
            url: server.clone(),
            reason: format!("{e}"),
        })?;
    }
    if options.insecure {
        config.accept_invalid_certs = true;
    }
    // kube's in-cluster configuration reads the mounted token file; a kubeconfig names its own.
    let in_cluster = config.auth_info.token_file.as_deref()
        == Some("/var/run/secrets/kubernetes.io/serviceaccount/token");
    let credential = if in_cluster {
        Credential::ServiceAccount
    } else {
        Credential::Kubeconfig
    };
    let server = config
        .cluster_url
        .to_string()
        .trim_end_matches('/')
        .to_string();
    Ok((from_config(config, user_agent)?, credential, server))
}

/// A client as draino's `--kubeconfig` and `--master` say: the kubeconfig file when given (else as
/// [`infer`]), its server replaced by `master` when given.
pub async fn for_flags(
    user_agent: &str,
    kubeconfig: Option<&std::path::Path>,
    master: Option<&str>,
) -> Result<Client, Error> {
    let mut config = match kubeconfig {
        None => Config::infer().await.map_err(Error::Infer)?,
        Some(path) => from_kubeconfig(path).await?,
    };
    if let Some(m) = master {
        config.cluster_url = m.parse().map_err(|e| Error::Master {
            url: m.to_string(),
            reason: format!("{e}"),
        })?;
    }
    // Said before any call, so a process that cannot reach its API server has said which.
    tracing::info!(
        api_server = %config.cluster_url.to_string().trim_end_matches('/'),
        "using the API server"
    );
    from_config(config, user_agent)
}

/// The configuration a kubeconfig file gives (its current context).
async fn from_kubeconfig(path: &std::path::Path) -> Result<Config, Error> {
    let said = |e| Error::Kubeconfig {
        path: path.to_path_buf(),
        source: e,
    };
    let file = kube::config::Kubeconfig::read_from(path).map_err(said)?;
    Config::from_custom_kubeconfig(file, &kube::config::KubeConfigOptions::default())
        .await
        .map_err(said)
}

/// Build a client from an explicit configuration (tests point it at a loopback test API server).
///
/// kube's default retry layer is turned off: it retries 429/503/504 up to 15 times with delays up to
/// 1000 s, which would hide a PodDisruptionBudget's 429 from the drainer's own deadline and stall a
/// detector status write for minutes. Both binaries retry with their own, bounded policies.
pub fn from_config(config: Config, user_agent: &str) -> Result<Client, Error> {
    if config.accept_invalid_certs {
        // Said here once, not by kube at every TLS handshake (`telemetry::filter`).
        static SAID: std::sync::Once = std::sync::Once::new();
        SAID.call_once(|| {
            tracing::warn!(
                api_server = %config.cluster_url.to_string().trim_end_matches('/'),
                "the kubeconfig turns TLS verification off (insecure-skip-tls-verify): the API server's certificate is not checked"
            )
        });
    }
    let mut config = without_trust_store_for_http(config);
    config.default_retry = false;
    config.headers.push((
        http_user_agent(),
        user_agent
            .parse()
            .expect("user agent is a valid header value"),
    ));
    Client::try_from(config).map_err(Error::Build)
}

/// A plain-HTTP API server (a loopback proxy, `kubectl proxy`) needs no certificate authority, but
/// kube builds its TLS settings anyway and, with no CA in the kubeconfig, falls back to the system's
/// trust store, which the detector's image does not have ("No CA certificates were loaded from the
/// system"): an empty set of roots keeps such a kubeconfig working there. HTTPS without a CA still
/// uses the system's store.
fn without_trust_store_for_http(mut config: Config) -> Config {
    if config.cluster_url.scheme_str() == Some("http") && config.root_cert.is_none() {
        config.root_cert = Some(Vec::new());
    }
    config
}

fn http_user_agent() -> axum::http::HeaderName {
    axum::http::header::USER_AGENT
}

/// An error and its causes on one line, each said once: kube's errors repeat their source in their
/// own text (`failed to read kubeconfig from '...': No such file or directory` and then the
/// `io::Error` again), so a cause already contained in what was printed is left out.
pub fn error_chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut out = String::new();
    let mut cause = Some(e);
    while let Some(c) = cause {
        // A kube error is said in operator words with its own causes (`client::said`), never as
        // kube's Debug dump of the API server's answer.
        let (text, next) = match c.downcast_ref::<kube::Error>() {
            Some(k) => (said(k), None),
            None => (c.to_string(), c.source()),
        };
        if out.is_empty() || text.starts_with(&out) {
            out = text;
        } else if !out.contains(&text) {
            out.push_str(": ");
            out.push_str(&text);
        }
        cause = next;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_plain_http_server_needs_no_trust_store_https_keeps_the_systems() {
        let http = without_trust_store_for_http(Config::new("http://127.0.0.1:1".parse().unwrap()));
        assert_eq!(http.root_cert, Some(Vec::new()));
        let https = without_trust_store_for_http(Config::new("https://10.0.0.1".parse().unwrap()));
        assert_eq!(https.root_cert, None);
        let mut with_ca = Config::new("http://127.0.0.1:1".parse().unwrap());
        with_ca.root_cert = Some(vec![vec![1, 2]]);
        assert_eq!(
            without_trust_store_for_http(with_ca).root_cert,
            Some(vec![vec![1, 2]])
        );
    }
}

#[cfg(test)]
mod said_tests {
    #[test]
    fn an_error_answer_is_the_servers_message_not_a_dump() {
        let status: kube::core::Status = serde_json::from_value(serde_json::json!({
            "status": "Failure", "code": 404, "reason": "NotFound",
            "message": "nodes \"n1\" not found", "metadata": {}
        }))
        .unwrap();
        let e = kube::Error::Api(status.boxed());
        assert_eq!(
            super::said(&e),
            "nodes \"n1\" not found (NotFound, HTTP 404)"
        );
        assert!(
            e.to_string().contains("Status {"),
            "kube's own words carry the dump"
        );
        let chained = super::error_chain(&e);
        assert_eq!(chained, "nodes \"n1\" not found (NotFound, HTTP 404)");
    }

    /// An API server that is not there is said once per cause (it read `client error (Connect):
    /// client error (Connect): tcp connect error`).
    #[tokio::test]
    async fn an_unreachable_api_server_is_said_without_repeating_itself() {
        let config = kube::Config::new("http://127.0.0.1:1".parse().unwrap());
        let client = super::from_config(config, "test").unwrap();
        let api: kube::Api<k8s_openapi::api::core::v1::Node> = kube::Api::all(client);
        let e = api.get("n").await.unwrap_err();
        let said = super::error_chain(&e);
        let parts: Vec<&str> = said.split(": ").collect();
        for pair in parts.windows(2) {
            assert_ne!(pair[0], pair[1], "{said}");
        }
        assert!(said.contains("onnect"), "{said}");
    }
}
