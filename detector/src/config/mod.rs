//! Rule files: parsed (`raw`), validated (`build`, `input`, `patterns`) and compiled, then frozen as a
//! [`RuleSet`] (`model`); NPD's JSON files are converted first (`npd`). Pure but for `load`, which
//! reads the files.
//!
//! Every error names `file:line:column` and what is wrong, so an operator can fix a ConfigMap
//! without guessing; loading never stops at the first bad file, it reports all of them.

mod build;
mod errors;
mod gauge;
mod input;
mod load;
mod model;
pub mod npd;
pub(crate) mod patterns;
mod raw;

pub use errors::{ConfigError, ConfigErrors};
pub use load::{bundled_defaults, convert_npd, load_paths, load_sources};
pub use model::{
    Check, ConditionDef, DEFAULT_BUFFER_SIZE, DEFAULT_SAMPLE_INTERVAL, ExecSettings, Gauge,
    GaugeTest, Input, Level, LineFormat, MAX_BUFFER_SIZE, MAX_CONCURRENCY, Monitor,
    ResourceSettings, Rule, RuleKind, RuleSet, RunAs,
};

#[cfg(test)]
mod tests;
