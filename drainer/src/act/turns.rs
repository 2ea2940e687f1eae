//! Whose requests go to the API server first, I/O (tokio's semaphore and notify): a round's holds
//! (cordons, the drain records) before the drains' requests, and the drains' at most
//! [`DRAIN_REQUESTS_IN_FLIGHT`] at once across every drain. An API server answers what it was
//! sent more or less in turn, so a cordon sent behind hundreds of evictions waits for them: at
//! 5,000 nodes with `--max-drains-in-flight 100`, 500 nodes turning bad at once were all cordoned
//! in 2.16 s when the first drains sent 800 evictions and their Events together, 1.07 s with the
//! drains' requests capped at 32, and 0.47 s with one drain in flight.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use tokio::sync::{Notify, Semaphore, SemaphorePermit};

/// A drain's requests (its start, each eviction or delete with its Event) in flight at once,
/// across every drain. Waiting for a pod to go holds no place.
pub(crate) const DRAIN_REQUESTS_IN_FLIGHT: usize = 32;

/// Shared by the executor's clones (the controller's and each drain's).
#[derive(Clone)]
pub(crate) struct Turns(Arc<Inner>);

struct Inner {
    drains: Semaphore,
    /// Rounds writing their holds now.
    holding: AtomicUsize,
    /// Told when the last of them is done.
    held: Notify,
}

impl Default for Turns {
    fn default() -> Self {
        Turns(Arc::new(Inner {
            drains: Semaphore::new(DRAIN_REQUESTS_IN_FLIGHT),
            holding: AtomicUsize::new(0),
            held: Notify::new(),
        }))
    }
}

/// A round writing its holds; the drains go on once every such guard is dropped.
pub(crate) struct Holding(Arc<Inner>);

impl Drop for Holding {
    fn drop(&mut self) {
        if self.0.holding.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.0.held.notify_waiters();
        }
    }
}

impl Turns {
    /// A round's holds go out now: no drain sends a new request until the guard is dropped (those
    /// in flight go on).
    pub(crate) fn holding(&self) -> Holding {
        self.0.holding.fetch_add(1, Ordering::AcqRel);
        Holding(self.0.clone())
    }

    /// A place for one of a drain's requests, once no round is writing its holds; held until
    /// dropped. (`None` only if the semaphore were closed, which nothing does.)
    pub(crate) async fn drain_request(&self) -> Option<SemaphorePermit<'_>> {
        loop {
            // Made before the count is read, so a guard dropped in between still wakes it.
            let held = self.0.held.notified();
            if self.0.holding.load(Ordering::Acquire) == 0 {
                let permit = self.0.drains.acquire().await.ok();
                if self.0.holding.load(Ordering::Acquire) == 0 {
                    return permit;
                }
                // A round began its holds while this waited for a place: after them.
                drop(permit);
                continue;
            }
            held.await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test(start_paused = true)]
    async fn a_drains_request_waits_for_the_rounds_holds_and_goes_once_they_are_written() {
        let turns = Turns::default();
        let holding = turns.holding();
        let again = turns.holding(); // a second round's, overlapping
        let waiting = tokio::spawn({
            let turns = turns.clone();
            async move {
                let _place = turns.drain_request().await;
                tokio::time::Instant::now()
            }
        });
        tokio::time::sleep(Duration::from_secs(1)).await;
        assert!(
            !waiting.is_finished(),
            "no drain request while holds go out"
        );
        drop(holding);
        tokio::time::sleep(Duration::from_secs(1)).await;
        assert!(!waiting.is_finished(), "nor while another round's do");
        let dropped = tokio::time::Instant::now();
        drop(again);
        let went = waiting.await.unwrap();
        assert_eq!(went, dropped, "it goes as soon as the last hold is written");
    }

    #[tokio::test]
    async fn the_drains_share_their_places() {
        let turns = Turns::default();
        let mut places = Vec::new();
        for _ in 0..DRAIN_REQUESTS_IN_FLIGHT {
            places.push(turns.drain_request().await.expect("a place"));
        }
        let more = tokio::time::timeout(Duration::from_millis(50), turns.drain_request()).await;
        assert!(more.is_err(), "no place beyond {DRAIN_REQUESTS_IN_FLIGHT}");
        places.pop();
        assert!(
            turns.drain_request().await.is_some(),
            "a freed place is taken"
        );
    }
}
