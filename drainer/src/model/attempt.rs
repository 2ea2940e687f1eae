//! How each attempt at a ladder step ended, as NVSentinel's remediation attempts do (ADR-056):
//! succeeded (its proof came), a transient failure (the provider could not be reached within the
//! retries its budget allows; the step waits out its deadline, as the provider may still act), a
//! permanent failure (refused, given up, or no proof by the deadline: the next step now), superseded
//! (a newer attempt took its place) or cancelled (a veto or a person ended it). Kept in the node's
//! record (the last [`KEPT`]), said in Events and counted. Pure.

use k8s_openapi::jiff::Timestamp;

use super::ladder::Step;

/// How many ended attempts a record keeps.
pub(crate) const KEPT: usize = 8;
/// The longest reason kept with one.
const MAX_WHY: usize = 256;

/// How an attempt ended.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum Outcome {
    Succeeded,
    #[serde(rename = "transient failure")]
    TransientFailure,
    #[serde(rename = "permanent failure")]
    PermanentFailure,
    Superseded,
    Cancelled,
    /// Its request was withdrawn before it was carried out and stayed so past its deadline (a
    /// gate or the slow start held it): started again, and not counted among the day's reboots.
    Withheld,
}

impl Outcome {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Outcome::Succeeded => "succeeded",
            Outcome::TransientFailure => "transient failure",
            Outcome::PermanentFailure => "permanent failure",
            Outcome::Superseded => "superseded",
            Outcome::Cancelled => "cancelled",
            Outcome::Withheld => "withheld",
        }
    }
}

impl std::fmt::Display for Outcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One attempt at a step, ended.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Attempt {
    pub(crate) step: Step,
    pub(crate) outcome: Outcome,
    /// When the attempt started (with the step, what identifies it) and when it ended.
    pub(crate) started: Timestamp,
    pub(crate) ended: Timestamp,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub(crate) why: String,
}

impl Attempt {
    pub(crate) fn new(
        step: Step,
        outcome: Outcome,
        started: Option<Timestamp>,
        ended: Timestamp,
        why: &str,
    ) -> Attempt {
        let mut why = why.to_string();
        if why.len() > MAX_WHY {
            let mut cut = MAX_WHY;
            while !why.is_char_boundary(cut) {
                cut -= 1;
            }
            why.truncate(cut);
            why.push('…');
        }
        Attempt {
            step,
            outcome,
            started: started.unwrap_or(ended),
            ended,
            why,
        }
    }
}

impl std::fmt::Display for Attempt {
    /// `power-cycle started 10:00, permanent failure at 10:01: FenceAgentFailed ...`
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let ts = nodemedic_common::time::rfc3339;
        write!(
            f,
            "{} started {}: {} at {}",
            self.step,
            ts(self.started),
            self.outcome,
            ts(self.ended)
        )?;
        if !self.why.is_empty() {
            write!(f, " ({})", self.why)?;
        }
        Ok(())
    }
}

/// `attempts` with `a` added: one entry per attempt (a step from one start), its latest verdict
/// (a transient failure is later a permanent one, at the deadline); the oldest beyond [`KEPT`]
/// dropped.
pub(crate) fn with(mut attempts: Vec<Attempt>, a: Attempt) -> Vec<Attempt> {
    match (attempts.iter_mut()).find(|x| x.step == a.step && x.started == a.started) {
        Some(x) if x.outcome != a.outcome => *x = a,
        Some(_) => {}
        None => attempts.push(a),
    }
    let drop = attempts.len().saturating_sub(KEPT);
    attempts.drain(..drop);
    attempts
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(s: i64) -> Timestamp {
        Timestamp::from_second(1_800_000_000 + s).unwrap()
    }

    #[test]
    fn attempts_are_kept_once_each_bounded_and_said() {
        let a = Attempt::new(
            Step::PowerCycle,
            Outcome::PermanentFailure,
            Some(t(0)),
            t(60),
            "FenceAgentFailed",
        );
        let kept = with(Vec::new(), a.clone());
        assert_eq!(with(kept.clone(), a.clone()), kept, "once");
        let transient = Attempt::new(
            Step::PowerCycle,
            Outcome::TransientFailure,
            Some(t(0)),
            t(10),
            "503",
        );
        let later = with(vec![transient], a.clone());
        assert_eq!(later, kept, "the latest verdict on one attempt");
        let many = (0..20).fold(Vec::new(), |v, i| {
            with(
                v,
                Attempt::new(Step::Reboot, Outcome::Succeeded, Some(t(i)), t(i), ""),
            )
        });
        assert_eq!(many.len(), KEPT);
        assert_eq!(many[0].started, t(20 - KEPT as i64), "the oldest go");
        let long = Attempt::new(
            Step::Reboot,
            Outcome::Cancelled,
            None,
            t(0),
            &"é".repeat(400),
        );
        assert!(long.why.len() <= MAX_WHY + '…'.len_utf8());
        assert!(
            a.to_string().contains("power-cycle started")
                && a.to_string()
                    .ends_with("permanent failure at 2027-01-15T08:01:00Z (FenceAgentFailed)"),
            "{a}"
        );
        let text = serde_json::to_string(&a).unwrap();
        assert!(text.contains("\"outcome\":\"permanent failure\""), "{text}");
    }
}
