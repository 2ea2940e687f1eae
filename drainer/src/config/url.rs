//! Checking a notification URL (`--notify-url`) at start: http or https, with a host. Pure.

/// A `--notify-url` that is not one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UrlError {
    #[error("--notify-url {url:?}: {reason}")]
    Unparsable { url: String, reason: String },
    #[error("--notify-url {url:?}: expected an http:// or https:// URL with a host")]
    NotHttp { url: String },
}

/// Check a `--notify-url` at start (http or https, with a host).
pub fn check(url: &str) -> Result<(), UrlError> {
    let uri: axum::http::Uri =
        url.parse()
            .map_err(|e: axum::http::uri::InvalidUri| UrlError::Unparsable {
                url: url.to_string(),
                reason: e.to_string(),
            })?;
    match (uri.scheme_str(), uri.host()) {
        (Some("http" | "https"), Some(_)) => Ok(()),
        _ => Err(UrlError::NotHttp {
            url: url.to_string(),
        }),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn http_and_https_with_a_host_only() {
        assert!(super::check("https://hooks.slack.com/services/T/B/X").is_ok());
        assert!(super::check("http://127.0.0.1:9000/hook").is_ok());
        assert!(super::check("ftp://x/y").is_err());
        assert!(super::check("not a url").is_err());
    }
}
