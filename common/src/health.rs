//! Liveness beats. Every long-running loop (each input, the report loop) registers with a maximum
//! silence and beats while it makes progress or idles normally. `/healthz` fails, naming the loop,
//! when one has not beaten within its maximum silence: a hung reader or a report loop stuck in a call
//! makes the pod restart instead of looking healthy forever (NPD's /healthz always answers ok).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

#[derive(Clone, Default)]
pub struct Health {
    inner: Arc<Mutex<State>>,
}

#[derive(Default)]
struct State {
    loops: BTreeMap<String, Beat>,
    /// Things `/healthz` names while answering ok (e.g. a check that keeps failing to run).
    notes: BTreeMap<String, String>,
    ready: bool,
}

struct Beat {
    last: Instant,
    max_silence: Duration,
}

impl std::fmt::Debug for Health {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Health")
            .field("loops", &self.loops())
            .finish()
    }
}

/// A handle one loop beats with. Dropping it unregisters the loop (a loop that ended on purpose, e.g.
/// a monitor removed by a reload, is not "stuck").
pub struct Beater {
    name: String,
    health: Health,
}

impl Beater {
    pub fn beat(&self) {
        if let Some(b) = self.health.inner.lock().unwrap().loops.get_mut(&self.name) {
            b.last = Instant::now();
        }
    }
}

impl Drop for Beater {
    fn drop(&mut self) {
        let mut s = self.health.inner.lock().unwrap();
        s.loops.remove(&self.name);
        s.notes.remove(&self.name);
    }
}

/// One loop that is overdue.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Stuck {
    pub name: String,
    pub silent_for_secs: u64,
}

impl Health {
    /// Register `name`; it is considered stuck when silent for longer than `max_silence`.
    pub fn register(&self, name: impl Into<String>, max_silence: Duration) -> Beater {
        let name = name.into();
        self.inner.lock().unwrap().loops.insert(
            name.clone(),
            Beat {
                last: Instant::now(),
                max_silence,
            },
        );
        Beater {
            name,
            health: self.clone(),
        }
    }

    /// Loops silent for longer than allowed at `now`.
    pub fn stuck_at(&self, now: Instant) -> Vec<Stuck> {
        self.inner
            .lock()
            .unwrap()
            .loops
            .iter()
            .filter_map(|(name, b)| {
                let silent = now.saturating_duration_since(b.last);
                (silent > b.max_silence).then(|| Stuck {
                    name: name.clone(),
                    silent_for_secs: silent.as_secs(),
                })
            })
            .collect()
    }

    pub fn stuck(&self) -> Vec<Stuck> {
        self.stuck_at(Instant::now())
    }

    /// Loops that became stuck, and loops that recovered, since `before` (the names stuck then);
    /// `before` becomes the names stuck now. Pure over the stuck list.
    pub fn changes(
        before: &mut std::collections::BTreeSet<String>,
        now: &[Stuck],
    ) -> (Vec<Stuck>, Vec<String>) {
        let current: std::collections::BTreeSet<String> =
            now.iter().map(|s| s.name.clone()).collect();
        let stalled = now
            .iter()
            .filter(|s| !before.contains(&s.name))
            .cloned()
            .collect();
        let recovered = before.difference(&current).cloned().collect();
        *before = current;
        (stalled, recovered)
    }

    /// Names of the registered loops.
    pub fn loops(&self) -> Vec<String> {
        self.inner.lock().unwrap().loops.keys().cloned().collect()
    }

    /// Set (or clear, with `None`) a note `/healthz` shows about `name` while it answers ok: something
    /// an operator should see that a restart would not fix.
    pub fn note(&self, name: &str, note: Option<String>) {
        let mut s = self.inner.lock().unwrap();
        match note {
            Some(n) => {
                s.notes.insert(name.to_string(), n);
            }
            None => {
                s.notes.remove(name);
            }
        }
    }

    /// The notes, by name.
    pub fn notes(&self) -> Vec<(String, String)> {
        let s = self.inner.lock().unwrap();
        s.notes
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    }

    pub fn set_ready(&self, ready: bool) {
        self.inner.lock().unwrap().ready = ready;
    }

    pub fn is_ready(&self) -> bool {
        self.inner.lock().unwrap().ready
    }
}

#[cfg(test)]
mod tests {

    #[test]
    fn changes_name_the_loops_that_stalled_and_recovered() {
        let stuck = |n: &str| Stuck {
            name: n.into(),
            silent_for_secs: 90,
        };
        let mut before = std::collections::BTreeSet::new();
        let (stalled, recovered) = Health::changes(&mut before, &[stuck("input:kmsg")]);
        assert_eq!((stalled.len(), recovered.len()), (1, 0));
        let (stalled, _) = Health::changes(&mut before, &[stuck("input:kmsg")]);
        assert!(stalled.is_empty(), "still stuck: said once");
        let (_, recovered) = Health::changes(&mut before, &[]);
        assert_eq!(recovered, ["input:kmsg"]);
    }
    use super::*;

    #[test]
    fn a_silent_loop_is_stuck_and_a_dropped_one_is_forgotten() {
        let h = Health::default();
        let a = h.register("input:kmsg", Duration::from_secs(10));
        let _b = h.register("report", Duration::from_secs(60));
        let later = Instant::now() + Duration::from_secs(30);
        let stuck = h.stuck_at(later);
        assert_eq!(stuck.len(), 1);
        assert_eq!(stuck[0].name, "input:kmsg");
        drop(a);
        assert!(h.stuck_at(later).is_empty());
        assert_eq!(h.loops(), vec!["report"]);
    }

    #[test]
    fn beating_keeps_a_loop_alive() {
        // Judged at explicit instants, so a busy machine cannot make the loop look silent.
        let h = Health::default();
        let a = h.register("x", Duration::from_secs(50));
        let after = |d: u64| Instant::now() + Duration::from_secs(d);
        assert!(h.stuck_at(after(10)).is_empty());
        assert_eq!(h.stuck_at(after(80)).len(), 1);
        a.beat();
        assert!(h.stuck_at(after(10)).is_empty());
        assert_eq!(
            h.stuck_at(after(80)).len(),
            1,
            "silent again 80 s after the beat"
        );
    }
}
