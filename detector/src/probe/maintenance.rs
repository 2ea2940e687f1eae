//! `detector probe cloud-maintenance`: asks the cloud's instance metadata service what it announces
//! for this machine (scheduled maintenance, reboots, retirement, spot interruptions, preemption) and
//! says it in one line, with its time: a problem (exit 1) when it begins within `--ahead`, so a
//! condition set from it lets the drainer drain the node before it comes. I/O: the HTTP requests
//! each provider documents (no cloud SDK: plain HTTP to the link-local address); what they say
//! is read by `super::notices`.
//!
//! HTTP/1.1 through hyper (the client the metrics server and kube already link), on a runtime of
//! its own: the probe runs as a process of its own for each check.

use std::time::Duration;

use http_body_util::{BodyExt, Empty, Limited};
use hyper::body::Bytes;
use k8s_openapi::jiff::Timestamp;

use super::notices::{self, Notice};
use super::{Found, unknown};

/// Whose metadata service to ask.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Provider {
    Aws,
    Azure,
    Gcp,
}

/// The link-local address every one of them answers on.
pub(crate) const DEFAULT_ENDPOINT: &str = "http://169.254.169.254";
/// The most of an answer read.
const MAX_BODY: usize = 256 * 1024;

/// Ask `provider`'s service at `endpoint`; the verdict on what it announces within `ahead`.
pub(crate) fn probe(
    provider: Provider,
    endpoint: &str,
    ahead: Duration,
    timeout: Duration,
) -> Found {
    let rt = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => return unknown(format!("cannot start: {e}")),
    };
    let base = endpoint.trim_end_matches('/').to_string();
    let asked = rt.block_on(async {
        match provider {
            Provider::Aws => aws(&base, timeout).await,
            Provider::Azure => azure(&base, timeout).await,
            Provider::Gcp => gcp(&base, timeout).await,
        }
    });
    match asked {
        Ok(notices) => notices::verdict(notices, Timestamp::now(), ahead),
        Err(why) => unknown(why),
    }
}

/// An answer: its status and body.
struct Answer {
    status: u16,
    body: String,
}

/// One request to `url` with `headers`; an error says what could not be done, in words.
async fn request(
    method: http::Method,
    url: &str,
    headers: &[(&str, &str)],
    timeout: Duration,
) -> Result<Answer, String> {
    let exchange = async {
        let uri: http::Uri = url.parse().map_err(|e| format!("{url}: {e}"))?;
        let host = uri
            .host()
            .ok_or_else(|| format!("{url}: no host"))?
            .to_string();
        let port = uri.port_u16().unwrap_or(80);
        let stream = tokio::net::TcpStream::connect((host.as_str(), port))
            .await
            .map_err(|e| format!("cannot reach {url}: {e}"))?;
        let (mut send, conn) =
            hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream))
                .await
                .map_err(|e| format!("{url}: {e}"))?;
        tokio::spawn(conn);
        let mut req = http::Request::builder()
            .method(method)
            .uri(uri.path_and_query().map_or("/", |p| p.as_str()))
            .header(http::header::HOST, &host)
            .header(http::header::USER_AGENT, "nodemedic-detector");
        for (k, v) in headers {
            req = req.header(*k, *v);
        }
        let req = req
            .body(Empty::<Bytes>::new())
            .map_err(|e| format!("{url}: {e}"))?;
        let resp = send
            .send_request(req)
            .await
            .map_err(|e| format!("{url}: {e}"))?;
        let status = resp.status().as_u16();
        let body = Limited::new(resp.into_body(), MAX_BODY)
            .collect()
            .await
            .map_err(|e| format!("{url}: reading the answer: {e}"))?
            .to_bytes();
        Ok(Answer {
            status,
            body: String::from_utf8_lossy(&body).into_owned(),
        })
    };
    tokio::time::timeout(timeout, exchange)
        .await
        .unwrap_or_else(|_| {
            Err(format!(
                "{url}: no answer within {}",
                humantime::format_duration(timeout)
            ))
        })
}

async fn get(url: &str, headers: &[(&str, &str)], timeout: Duration) -> Result<Answer, String> {
    request(http::Method::GET, url, headers, timeout).await
}

/// An answer other than 200 (and 404, where it means "none"), as an error: its status and size,
/// never its body (the line becomes a condition's message, readable cluster-wide).
fn unexpected(url: &str, a: &Answer) -> String {
    format!("{url} answered {} ({} bytes)", a.status, a.body.len())
}

/// The metadata service's address, `--endpoint`: `http://` or `https://`, a host and a port at
/// most. A path, a query or a fragment would aim the probe's requests elsewhere on the service (a
/// `#` once turned GCP's maintenance path into its token's).
pub(crate) fn endpoint(s: &str) -> Result<String, String> {
    let why = || {
        format!(
            "{s}: the metadata service's address is scheme://host[:port] (http or https, no path, query or fragment), e.g. {DEFAULT_ENDPOINT}"
        )
    };
    let uri: http::Uri = s.parse().map_err(|_| why())?;
    let scheme_ok = matches!(uri.scheme_str(), Some("http" | "https"));
    let path_ok = uri
        .path_and_query()
        .is_none_or(|p| p.as_str() == "/" || p.as_str().is_empty());
    if !scheme_ok || uri.host().is_none() || !path_ok || s.contains('#') || s.contains('@') {
        return Err(why());
    }
    Ok(s.trim_end_matches('/').to_string())
}

/// AWS (IMDSv2 when the service issues a token, IMDSv1 otherwise): the scheduled events, a spot
/// interruption, a rebalance recommendation.
async fn aws(base: &str, timeout: Duration) -> Result<Vec<Notice>, String> {
    let token_url = format!("{base}/latest/api/token");
    let token = request(
        http::Method::PUT,
        &token_url,
        &[("X-aws-ec2-metadata-token-ttl-seconds", "300")],
        timeout,
    )
    .await
    .map_err(|e| {
        format!("{e} (outside AWS; or IMDSv2's hop limit of 1 keeps a pod off the host's network from the service: run the detector with hostNetwork)")
    })?;
    let token = match token.status {
        200 => Some(token.body.trim().to_string()),
        403 => {
            return Err(format!(
                "{token_url} answered 403: the instance metadata service is turned off for this instance"
            ));
        }
        _ => None,
    };
    let headers: Vec<(&str, &str)> = token
        .as_deref()
        .map(|t| ("X-aws-ec2-metadata-token", t))
        .into_iter()
        .collect();
    let mut out = Vec::new();
    let scheduled = format!("{base}/latest/meta-data/events/maintenance/scheduled");
    let a = get(&scheduled, &headers, timeout).await?;
    match a.status {
        200 => {
            out.extend(notices::aws_scheduled(&a.body).map_err(|e| format!("{scheduled}: {e}"))?)
        }
        404 => {}
        _ => return Err(unexpected(&scheduled, &a)),
    }
    for (path, read) in [
        (
            "spot/instance-action",
            notices::aws_spot as fn(&str) -> Result<Notice, String>,
        ),
        ("events/recommendations/rebalance", notices::aws_rebalance),
    ] {
        let url = format!("{base}/latest/meta-data/{path}");
        let a = get(&url, &headers, timeout).await?;
        match a.status {
            200 => out.push(read(&a.body).map_err(|e| format!("{url}: {e}"))?),
            404 => {}
            _ => return Err(unexpected(&url, &a)),
        }
    }
    Ok(out)
}

/// Azure: the Scheduled Events naming this machine (its name from the instance metadata).
async fn azure(base: &str, timeout: Duration) -> Result<Vec<Notice>, String> {
    let metadata = [("Metadata", "true")];
    let name_url =
        format!("{base}/metadata/instance/compute/name?api-version=2021-02-01&format=text");
    let name = get(&name_url, &metadata, timeout)
        .await
        .map_err(|e| format!("{e} (outside Azure?)"))?;
    let vm = (name.status == 200).then(|| name.body.trim().to_string());
    let url = format!("{base}/metadata/scheduledevents?api-version=2020-07-01");
    let a = get(&url, &metadata, timeout).await?;
    if a.status != 200 {
        return Err(unexpected(&url, &a));
    }
    notices::azure(&a.body, vm.as_deref()).map_err(|e| format!("{url}: {e}"))
}

/// GCP: a host maintenance event under way or 60 s ahead, and preemption.
async fn gcp(base: &str, timeout: Duration) -> Result<Vec<Notice>, String> {
    let flavor = [("Metadata-Flavor", "Google")];
    let mut out = Vec::new();
    for (path, read) in [
        (
            "maintenance-event",
            notices::gcp_maintenance as fn(&str) -> Option<Notice>,
        ),
        ("preempted", notices::gcp_preempted),
    ] {
        let url = format!("{base}/computeMetadata/v1/instance/{path}");
        let a = get(&url, &flavor, timeout)
            .await
            .map_err(|e| format!("{e} (outside GCP?)"))?;
        if a.status != 200 {
            return Err(unexpected(&url, &a));
        }
        out.extend(read(&a.body));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_endpoint_is_a_scheme_a_host_and_a_port_at_most() {
        assert_eq!(
            endpoint("http://169.254.169.254").unwrap(),
            "http://169.254.169.254"
        );
        assert_eq!(
            endpoint("http://127.0.0.1:8080/").unwrap(),
            "http://127.0.0.1:8080"
        );
        for bad in [
            "http://169.254.169.254/computeMetadata/v1/instance/service-accounts/default/token#",
            "http://metadata.google.internal/x",
            "http://169.254.169.254?a=b",
            "http://169.254.169.254#",
            "http://user@169.254.169.254",
            "ftp://169.254.169.254",
            "169.254.169.254",
        ] {
            let e = endpoint(bad).unwrap_err();
            assert!(e.contains("scheme://host[:port]"), "{bad}: {e}");
        }
    }

    #[test]
    fn an_unexpected_answer_is_said_by_its_status_and_size_never_its_body() {
        let a = Answer {
            status: 500,
            body: "{\"access_token\":\"ya29.secret\"}".into(),
        };
        let said = unexpected("http://x/y", &a);
        assert!(!said.contains("secret"), "{said}");
        assert!(said.contains("500"), "{said}");
    }
}
