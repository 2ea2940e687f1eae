//! A node taint as the settings name it (`KEY[=VALUE]:EFFECT`: problem, probation and after-drain
//! taints), parsed and checked. Pure.

use crate::model::node::{NodeTaint, TaintEffect};

/// A node taint, `KEY[=VALUE]:EFFECT`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Taint {
    pub(crate) key: String,
    pub(crate) value: Option<String>,
    pub(crate) effect: String,
}

/// A taint that is not one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TaintError {
    #[error("{0:?}: expected KEY[=VALUE]:EFFECT")]
    Form(String),
    #[error("{0:?}: the effect must be NoSchedule, PreferNoSchedule or NoExecute")]
    Effect(String),
    #[error("{0:?}: the key is empty")]
    EmptyKey(String),
}

impl std::str::FromStr for Taint {
    type Err = TaintError;
    fn from_str(s: &str) -> Result<Taint, TaintError> {
        let (kv, effect) = s
            .rsplit_once(':')
            .ok_or_else(|| TaintError::Form(s.into()))?;
        if !["NoSchedule", "PreferNoSchedule", "NoExecute"].contains(&effect) {
            return Err(TaintError::Effect(s.into()));
        }
        let (key, value) = match kv.split_once('=') {
            Some((k, v)) => (k, Some(v.to_string())),
            None => (kv, None),
        };
        if key.is_empty() {
            return Err(TaintError::EmptyKey(s.into()));
        }
        Ok(Taint {
            key: key.to_string(),
            value,
            effect: effect.to_string(),
        })
    }
}

impl Taint {
    /// The taint as a node carries it.
    pub(crate) fn node_taint(&self) -> NodeTaint {
        NodeTaint::new(
            &self.key,
            self.value.as_deref(),
            TaintEffect::parse(&self.effect),
        )
    }
}

impl std::fmt::Display for Taint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.node_taint().fmt(f)
    }
}
