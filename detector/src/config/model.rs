//! The validated configuration's types: a [`RuleSet`] of [`Monitor`]s, each an input, its conditions
//! and its rules or checks. Pure data, frozen once built.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use super::errors::ConfigError;
use crate::matcher::Compiled;

/// Default window for multi-line patterns (NPD's bufferSize default).
pub const DEFAULT_BUFFER_SIZE: usize = 10;
/// Upper bound on bufferSize: each line of the window is kept in memory per monitor.
pub const MAX_BUFFER_SIZE: usize = 1000;

/// Where lines come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Input {
    /// /dev/kmsg: the kernel's records; user-space ones (written to /dev/kmsg by any root process,
    /// facility other than kern) only with `user_space` (`input.userSpace: true`).
    Kmsg {
        user_space: bool,
    },
    Journal {
        identifiers: Vec<String>,
        /// How `identifiers` match: backed by journald's own fields (nodemedic's rules), or
        /// `SYSLOG_IDENTIFIER` alone (NPD's JSON configs).
        how: crate::parse::journal::IdentifierMatch,
        units: Vec<String>,
        directory: Option<PathBuf>,
    },
    File {
        path: PathBuf,
        format: LineFormat,
    },
    /// Checks run as programs (NPD's custom plugin monitor); the rules are in `Monitor::checks`.
    Exec(ExecSettings),
    /// The node's resources sampled at an interval; the rules are in `Monitor::gauges`.
    Resources(ResourceSettings),
}

impl Input {
    pub(crate) fn kind(&self) -> &'static str {
        match self {
            Input::Kmsg { .. } => "kmsg",
            Input::Journal { .. } => "journal",
            Input::File { .. } => "file",
            Input::Exec(_) => "exec",
            Input::Resources(_) => "resources",
        }
    }
}

/// An exec input's settings (NPD's `pluginConfig` of a custom plugin monitor, same defaults).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExecSettings {
    /// Default interval of the checks.
    pub(crate) interval: Duration,
    /// Default and longest timeout of the checks.
    pub(crate) timeout: Duration,
    /// Bytes of output kept as the message.
    pub max_output: usize,
    /// Checks of this monitor running at once.
    pub(crate) concurrency: usize,
    /// A True condition is updated (with an Event) when its check prints another message.
    pub(crate) update_on_message_change: bool,
}

impl Default for ExecSettings {
    fn default() -> Self {
        ExecSettings {
            interval: Duration::from_secs(30),
            timeout: Duration::from_secs(5),
            max_output: 80,
            concurrency: 3,
            update_on_message_change: false,
        }
    }
}

/// A `resources` input's settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResourceSettings {
    /// How often the resources are read.
    pub(crate) interval: Duration,
    /// Filesystems by signal name (`nodefs`, `imagefs`, ...) and the path to `statvfs`, in the
    /// order written.
    pub(crate) filesystems: Vec<(String, PathBuf)>,
    /// Where the kernel's files are (`pressure/`, `meminfo`, `loadavg`, `sys/kernel/`).
    pub(crate) proc_dir: PathBuf,
}

/// How often a `resources` input reads by default.
pub const DEFAULT_SAMPLE_INTERVAL: Duration = Duration::from_secs(10);

impl Default for ResourceSettings {
    /// Every 10s; the kubelet's filesystems where kubeadm and containerd put them.
    fn default() -> Self {
        ResourceSettings {
            interval: DEFAULT_SAMPLE_INTERVAL,
            filesystems: vec![
                ("nodefs".into(), PathBuf::from("/var/lib/kubelet")),
                ("imagefs".into(), PathBuf::from("/var/lib/containerd")),
            ],
            proc_dir: PathBuf::from("/proc"),
        }
    }
}

/// A rule of a `resources` input: a signal's value against a level, or its trend against a
/// deadline, sets a condition while it holds.
#[derive(Debug, Clone, PartialEq)]
pub struct Gauge {
    /// The condition (index in `Monitor::conditions`) it sets.
    pub(crate) condition: usize,
    pub(crate) reason: String,
    /// The signal it reads (`imagefs.available`, `psi.memory.some.avg10`, ...).
    pub(crate) signal: String,
    pub(crate) test: GaugeTest,
    /// How long the test must hold before the condition is set, and its opposite before it clears.
    pub(crate) sustain: Duration,
}

/// What a gauge tests.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum GaugeTest {
    /// A problem below `at`; healthy again at or above `clear` (above `at`: the band between
    /// them keeps the condition as it is).
    Below { at: Level, clear: Level },
    /// A problem above `at`; healthy again at or below `clear`.
    Above { at: Level, clear: Level },
    /// A problem when, at the rate of the last `trend`, the signal reaches `level` within
    /// `within`; healthy again when that is more than 1.5 times `within` away (or it is not
    /// falling).
    Reaches {
        level: Level,
        within: Duration,
        trend: Duration,
    },
}

/// A level of a signal: a quantity in its unit, or a percentage of its capacity.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Level {
    Absolute(f64),
    Percent(f64),
}

/// Most checks of one exec monitor that may run at once.
pub const MAX_CONCURRENCY: usize = 64;

/// One check of an exec monitor: a program whose exit status says how things are (0 healthy, 1 a
/// problem, anything else unknown) and whose output is the message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Check {
    pub(crate) kind: RuleKind,
    pub(crate) reason: String,
    pub program: PathBuf,
    pub args: Vec<String>,
    pub timeout: Duration,
    pub interval: Duration,
    /// Whom it runs as.
    pub(crate) run_as: RunAs,
}

/// Whom a check runs as.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum RunAs {
    /// uid and gid 65534 (nobody), no supplementary groups, no capabilities: the default.
    #[default]
    Nobody,
    /// The detector's own user (root in the shipped DaemonSet): a rule says so (`runAs: root`),
    /// and NPD's custom plugin files mean it (NPD runs its checks as root).
    Root,
}

/// How a plain log file's lines are laid out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LineFormat {
    /// `Nov 22 03:27:01 host tag[pid]: message`: the prefix is stripped before matching.
    Syslog,
    /// The whole line is the message.
    Plain,
}

/// A condition a monitor owns.
#[derive(Debug, Clone)]
pub struct ConditionDef {
    pub type_: String,
    pub healthy_reason: String,
    pub healthy_message: String,
    /// Validated recovery pattern (compiled with the monitor's rules).
    pub recovery_pattern: Option<String>,
    pub recovery_after: Option<Duration>,
}

/// What a matching rule means.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RuleKind {
    /// An Event.
    Temporary,
    /// The condition at this index of the monitor's `conditions` becomes True.
    Permanent { condition: usize },
}

#[derive(Debug, Clone)]
pub struct Rule {
    pub(crate) kind: RuleKind,
    pub(crate) reason: String,
    /// The pattern as written (its compiled form is in the monitor's `compiled`).
    pub source_pattern: String,
    pub(crate) message: Option<String>,
    /// The pattern contains a newline: it is matched against the window of recent lines.
    pub multiline: bool,
}

/// One validated rule file.
#[derive(Debug, Clone)]
pub struct Monitor {
    /// The file stem, e.g. `kernel-monitor`; names the monitor in logs, metrics and checkpoints.
    pub name: String,
    pub file: PathBuf,
    pub source: String,
    pub input: Input,
    pub lookback: Option<Duration>,
    pub buffer_size: usize,
    pub conditions: Vec<ConditionDef>,
    pub rules: Vec<Rule>,
    /// An exec monitor's checks (its `rules` are empty).
    pub checks: Vec<Check>,
    /// A resources monitor's gauges (its `rules` are empty).
    pub gauges: Vec<Gauge>,
    /// The patterns, compiled once (shared by the matcher of every monitor task for this file).
    pub(crate) compiled: Arc<Compiled>,
}

impl Monitor {
    /// Every rule's kind and reason: the pattern rules' and the checks'.
    pub(crate) fn reasons(&self) -> impl Iterator<Item = (RuleKind, &str)> {
        self.rules
            .iter()
            .map(|r| (r.kind.clone(), r.reason.as_str()))
            .chain(
                self.checks
                    .iter()
                    .map(|c| (c.kind.clone(), c.reason.as_str())),
            )
            .chain(self.gauges.iter().map(|g| {
                let kind = RuleKind::Permanent {
                    condition: g.condition,
                };
                (kind, g.reason.as_str())
            }))
    }
}

/// The frozen, validated configuration.
#[derive(Debug, Clone, Default)]
pub struct RuleSet {
    pub monitors: Vec<Monitor>,
    /// A short SHA-256 of the rule files (names and contents, in order): which rules set a
    /// node's conditions.
    pub revision: String,
    /// What NPD files said that does not carry over (logged at start, printed by `check`).
    pub(crate) notes: Vec<ConfigError>,
}

impl RuleSet {
    /// Every condition type declared by any monitor.
    pub(crate) fn condition_types(&self) -> Vec<String> {
        self.monitors
            .iter()
            .flat_map(|m| m.conditions.iter().map(|c| c.type_.clone()))
            .collect()
    }
}
