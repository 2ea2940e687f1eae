//! The running drainer's settings as it publishes them, for `kubectl nodemedic plan` and `explain`
//! to decide with what it decides with (issue 42: with default flags the plugin said "breaker
//! open: 2 of 5 nodes unhealthy" while the drainer, with its own settings, saw 1 of 4 and a closed
//! breaker). The leader writes a ConfigMap named after its Lease (`<lease>-settings`, beside it)
//! holding the policy flags it was started with and the config file's text it last accepted; a
//! reader builds the same [`Config`] from them with the same code (`build`). Read-only for the
//! plugin; nothing decides on it in the drainer. Notification URLs (they carry tokens) are left
//! out. Pure.

use std::collections::BTreeMap;
use std::path::PathBuf;

use crate::config::Config;
use crate::config::build::{self, PolicyError};
use crate::config::flags::PolicyArgs;

/// The ConfigMap's keys.
pub(crate) const ARGS_KEY: &str = "args.json";
pub(crate) const FILE_KEY: &str = "config.yaml";
pub(crate) const IDENTITY_KEY: &str = "identity";
pub(crate) const AT_KEY: &str = "published";

/// The ConfigMap of the drainer whose Lease is `lease` (in the Lease's namespace).
pub(crate) fn configmap_name(lease: &str) -> String {
    format!("{lease}-settings")
}

/// What the running drainer decides with.
#[derive(Debug, Clone)]
pub struct Published {
    pub(crate) args: PolicyArgs,
    /// The config file's text, when it has one.
    pub(crate) file: Option<String>,
}

/// Published settings that cannot be read back.
#[derive(Debug, thiserror::Error)]
pub(crate) enum PublishedError {
    #[error("its {ARGS_KEY} is missing")]
    NoArgs,
    #[error("its {ARGS_KEY} cannot be read: {0}")]
    Args(#[from] serde_json::Error),
}

impl Published {
    /// The settings of `args` and the file's `text`, notification URLs left out.
    pub fn new(args: &PolicyArgs, text: Option<String>) -> Published {
        let mut args = args.clone();
        args.notify_urls.clear();
        args.notify_url_files.clear();
        // Its scheme, host and port only (a path or query may carry a credential): enough for a
        // plan to know power-cycles are configured, and where.
        args.power_cycle_url = args
            .power_cycle_url
            .as_deref()
            .map(crate::config::url::origin);
        args.power_cycle_token_file = None;
        args.power_cycle_ca_file = None;
        Published {
            args,
            file: text.map(|t| without_notify_urls(&t)),
        }
    }

    /// The ConfigMap's data, saying who published it and when.
    pub(crate) fn to_data(&self, identity: &str, at: &str) -> BTreeMap<String, String> {
        let mut data = BTreeMap::new();
        data.insert(
            ARGS_KEY.to_string(),
            serde_json::to_string(&self.args).unwrap_or_default(),
        );
        if let Some(f) = &self.file {
            data.insert(FILE_KEY.to_string(), f.clone());
        }
        data.insert(IDENTITY_KEY.to_string(), identity.to_string());
        data.insert(AT_KEY.to_string(), at.to_string());
        data
    }

    /// Read back from a ConfigMap's data.
    pub(crate) fn from_data(data: &BTreeMap<String, String>) -> Result<Published, PublishedError> {
        let args = data.get(ARGS_KEY).ok_or(PublishedError::NoArgs)?;
        let mut args: PolicyArgs = serde_json::from_str(args)?;
        let file = data.get(FILE_KEY).cloned();
        // The file's path on the drainer's host means nothing here: it names the text in errors.
        if file.is_some() {
            args.config = Some(PathBuf::from(format!("published {FILE_KEY}")));
        } else {
            args.config = None;
        }
        Ok(Published { args, file })
    }

    /// What `now` loosens of these settings' safety limits (`config::ceilings`): a drainer started
    /// looser than the one that published them says so. Settings that no longer build (published
    /// by another release) compare as nothing.
    pub(crate) fn loosened_by(&self, now: &Config) -> Vec<String> {
        match self.config() {
            Ok(then) => crate::config::ceilings::Ceilings::of(&then).loosened_by(now),
            Err(_) => Vec::new(),
        }
    }

    /// The settings, built as the drainer built them (no condition needed: `explain` of a node
    /// works whatever it watches).
    pub(crate) fn config(&self) -> Result<Config, Vec<PolicyError>> {
        match &self.file {
            Some(text) => build::build_with_text(&self.args, text, false),
            None => build::build_for_reading(&self.args),
        }
    }
}

/// The settings of the file `text` as the parser reads them, without `notifyUrls`, written again
/// (JSON, which YAML reads): what is published must not carry the tokens those URLs hold, and a
/// filter over the text misses them in a one-line JSON file or a YAML flow mapping. A text that
/// does not parse (the drainer accepted it, so it does) publishes nothing of the file.
fn without_notify_urls(text: &str) -> String {
    let Ok(mut v) = serde_saphyr::from_str::<serde_json::Value>(text) else {
        return String::new();
    };
    if let Some(m) = v.as_object_mut() {
        m.remove("notifyUrls");
    }
    serde_json::to_string_pretty(&v).unwrap_or_default() + "\n"
}

/// Whether two data of the settings ConfigMap say the same settings (who published them and when
/// aside): publishing again what is there writes nothing.
pub(crate) fn same(a: &BTreeMap<String, String>, b: &BTreeMap<String, String>) -> bool {
    let settings = |m: &BTreeMap<String, String>| {
        m.iter()
            .filter(|(k, _)| k.as_str() != AT_KEY && k.as_str() != IDENTITY_KEY)
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect::<Vec<_>>()
    };
    settings(a) == settings(b)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 64, point 7: a config file written as one-line JSON (or a YAML flow mapping) kept its
    /// notification URLs past a filter over the text; the published settings come from what the
    /// parser reads, and build the same settings.
    #[test]
    fn notification_urls_never_reach_the_published_settings_whatever_the_files_form() {
        for text in [
            r#"{"conditions": ["KernelDeadlock=True,10m"], "notifyUrls": ["https://hooks.example/T0KEN"], "maxCordoned": "2"}"#,
            "{conditions: ['KernelDeadlock=True,10m'], notifyUrls: [https://hooks.example/T0KEN], maxCordoned: '2'}\n",
            "conditions: ['KernelDeadlock=True,10m']\nnotifyUrls:\n  - https://hooks.example/T0KEN\nmaxCordoned: '2'\n",
        ] {
            let p = Published::new(&PolicyArgs::default(), Some(text.to_string()));
            let published = p.file.clone().unwrap();
            assert!(!published.contains("T0KEN"), "{published}");
            let back = Published::from_data(&p.to_data("me", "now")).unwrap();
            let cfg = back.config().unwrap();
            assert_eq!(
                cfg.max_cordoned,
                crate::config::Budget::Count(2),
                "{published}"
            );
            assert_eq!(cfg.conditions.len(), 1);
        }
    }

    use crate::config::flags::parsed as args;

    #[test]
    fn what_is_published_builds_the_same_settings() {
        let file = "conditions: [\"KernelDeadlock=True,10m\"]\nmaxUnhealthy: \"40%\"\nnotifyUrls:\n  - https://hooks.example/T0KEN\nbreakerWindow: 7m\n";
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("drainer.yaml");
        std::fs::write(&path, file).unwrap();
        let given = args(&[
            "Ready=Unknown,5m",
            "--config",
            path.to_str().unwrap(),
            "--max-cordoned",
            "2",
            "--node-selector",
            "pool=blue",
            "--notify-url",
            "https://hooks.example/SECRET",
        ]);
        let running = build::build(&given).unwrap();
        let p = Published::new(&given, Some(file.to_string()));
        let data = p.to_data("drainer-abc", "2026-11-26T00:00:00Z");
        let all: String = data.values().cloned().collect();
        assert!(
            !all.contains("SECRET") && !all.contains("T0KEN"),
            "no notification URL is published: {all}"
        );
        assert!(
            data[FILE_KEY].contains("\"breakerWindow\": \"7m\""),
            "{data:?}"
        );
        let read = Published::from_data(&data).unwrap().config().unwrap();
        // The same settings, but the notification URLs the reader does not need.
        let mut expected = running;
        expected.notify_urls.clear();
        assert!(
            expected.changes(&read).is_empty(),
            "differs: {:?}",
            expected.changes(&read)
        );
        assert_eq!(read.safety.breaker_window.as_secs(), 420);
    }

    #[test]
    fn unreadable_published_settings_are_an_error() {
        let mut data = BTreeMap::new();
        assert!(matches!(
            Published::from_data(&data),
            Err(PublishedError::NoArgs)
        ));
        data.insert(ARGS_KEY.into(), "{oops".into());
        assert!(Published::from_data(&data).is_err());
    }
}
