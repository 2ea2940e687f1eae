//! Notification URLs (`--notify-url`, `--notify-url-file`), checked at start and kept secret (pure):
//! Slack's and Teams' incoming webhooks carry their credential in the path, so a URL is shown only
//! as its scheme and host in every log line, error, Event and printed setting.

/// A `--notify-url` that is not one (the URL as [`redact`] shows it).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum UrlError {
    #[error("notification URL {url}: {reason}")]
    Unparsable { url: String, reason: String },
    #[error("notification URL {url}: expected an https:// URL with a host")]
    NotHttps { url: String },
    #[error(
        "notification URL {url}: plain http sends its credential in the clear; use https, or allow it with --notify-allow-http (notifyAllowHttp)"
    )]
    PlainHttp { url: String },
}

/// A notification URL: sent to as it is, shown only redacted (its `Debug` and `Display` too).
#[derive(Clone, PartialEq, Eq)]
pub struct NotifyUrl(String);

impl NotifyUrl {
    /// Taken as given (a test's local endpoint); [`check`] is how settings make one.
    pub fn new(url: impl Into<String>) -> NotifyUrl {
        NotifyUrl(url.into())
    }

    /// The URL itself, to send to.
    pub(crate) fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Display for NotifyUrl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&redact(&self.0))
    }
}

impl std::fmt::Debug for NotifyUrl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?}", redact(&self.0))
    }
}

/// `url` as it may be shown: scheme, host and port; path, query and user info replaced by `…`.
pub(crate) fn redact(url: &str) -> String {
    match origin(url) {
        o if o.is_empty() => "<a notification URL that does not parse>".into(),
        o => format!("{o}…"),
    }
}

/// `url`'s scheme, host and port as a URL of its own (`https://gw.example:8443/`): what may be
/// published of it.
pub(crate) fn origin(url: &str) -> String {
    match url.parse::<axum::http::Uri>() {
        Ok(u) => match (u.scheme_str(), u.host()) {
            (Some(scheme), Some(host)) => {
                let port = u.port_u16().map(|p| format!(":{p}")).unwrap_or_default();
                format!("{scheme}://{host}{port}/")
            }
            _ => String::new(),
        },
        Err(_) => String::new(),
    }
}

/// Check a notification URL: https with a host, or http with `allow_http`.
pub(crate) fn check(url: &str, allow_http: bool) -> Result<NotifyUrl, UrlError> {
    let uri: axum::http::Uri =
        url.parse()
            .map_err(|e: axum::http::uri::InvalidUri| UrlError::Unparsable {
                url: redact(url),
                reason: e.to_string(),
            })?;
    match (uri.scheme_str(), uri.host()) {
        (Some("https"), Some(_)) => Ok(NotifyUrl::new(url)),
        (Some("http"), Some(_)) if allow_http => Ok(NotifyUrl::new(url)),
        (Some("http"), Some(_)) => Err(UrlError::PlainHttp { url: redact(url) }),
        _ => Err(UrlError::NotHttps { url: redact(url) }),
    }
}

/// The URLs in a file (a mounted Secret): one a line; blank lines and `#` comments skipped.
pub(crate) fn from_file(text: &str) -> impl Iterator<Item = &str> {
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
}

#[cfg(test)]
mod tests {
    use super::*;

    const SLACK: &str = "https://hooks.slack.com/services/T000/B000/XXXXSECRETXXXX";

    #[test]
    fn https_with_a_host_and_http_only_when_allowed() {
        assert!(check(SLACK, false).is_ok());
        assert!(check("http://127.0.0.1:9000/hook", true).is_ok());
        let e = check("http://hooks.example.com/secret-path", false).unwrap_err();
        assert!(matches!(e, UrlError::PlainHttp { .. }), "{e}");
        assert!(check("ftp://x/y", true).is_err());
        assert!(check("not a url", true).is_err());
    }

    #[test]
    fn a_url_never_shows_its_path_query_or_user() {
        let u = check(SLACK, false).unwrap();
        for shown in [
            u.to_string(),
            format!("{u:?}"),
            format!("{:?}", vec![u.clone()]),
        ] {
            assert!(
                !shown.contains("SECRET") && !shown.contains("T000"),
                "{shown}"
            );
            assert!(shown.contains("https://hooks.slack.com/…"), "{shown}");
        }
        assert_eq!(u.expose(), SLACK);
        let e = check(
            "http://user:pw@hooks.example.com:8443/a?token=s3cret",
            false,
        )
        .unwrap_err();
        let shown = e.to_string();
        assert!(
            !shown.contains("s3cret") && !shown.contains("pw"),
            "{shown}"
        );
        assert!(shown.contains("http://hooks.example.com:8443/…"), "{shown}");
        assert_eq!(
            origin("https://user:pw@gw.example:8443/power?token=s3cret"),
            "https://gw.example:8443/"
        );
        assert_eq!(
            from_file("# team hook\n\nhttps://a.example/x\n  https://b.example/y  \n")
                .collect::<Vec<_>>(),
            ["https://a.example/x", "https://b.example/y"]
        );
    }
}
