//! The deadline timer (`architecture/contract.md` § Holds that end): one
//! task that escalates held calls at their `escalate_at` and denies them at
//! their `expires_at`.
//!
//! It is driven by the index's deadline view (`crate::pending::index`), which holds
//! only the records that have a deadline ahead, ordered by it: the task sleeps
//! until the first one (at most [`MAX_SLEEP`], so a wall clock that jumps is
//! caught up with), takes every record whose deadline has come, and acts on
//! each. A hold written with a nearer deadline wakes it at once. There is no
//! task per record and no scan of the inbox; a record without deadlines
//! costs the timer nothing.
//!
//! At most [`IN_FLIGHT`] records are acted on at once: a burst of expiries
//! (thousands of holds made in the same second by one configuration) becomes
//! a bounded stream of harness calls, and the gate's handlers, which share
//! the runtime and the engine connection, keep answering.
//!
//! An expiry is a decision made by the timer, carried by the one release
//! path ([`super::Releaser`]): exactly one of a human's decision, the expiry
//! or a purge takes a record out. Order: the claim, then
//! `harness::function::resolve` with a `denied_by: "timeout"` denial, then
//! the emit-gated removal, then `pending-resolved` with outcome `timeout`. A
//! harness that fails leaves the record pending, and the timer tries again
//! with backoff (1 s, doubling, at most a minute) for as long as the record
//! is held: the decision is never lost. A harness that answers `resolved:
//! false` no longer holds the call: the record leaves with outcome
//! `aborted`, reason `not_held`, as a resolve's would. A record whose release
//! is under way is left to that release.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tokio::task::{JoinHandle, JoinSet};

use super::{Answer, Releaser, Request, Ruling};
use crate::backoff::Backoff;
use crate::pending::{PendingRecord, PendingStore, ReleaseVia};
use crate::time::now_ms;

/// Records acted on at once (each is one harness call and two state calls).
pub(crate) const IN_FLIGHT: usize = 16;
/// The longest the timer sleeps without looking at the clock again.
const MAX_SLEEP: Duration = Duration::from_secs(30);
/// The retries after a harness or state failure: a second, doubled each
/// time, at most a minute between two retries of one record.
const RETRY: Backoff = Backoff::new(Duration::from_secs(1), Duration::from_secs(60));
/// How long the timer waits when another decision on the record is under
/// way (if it ends the hold, the retry finds nothing to do).
const BUSY_RETRY_MS: u64 = 1_000;

/// What became of one record the timer acted on.
enum Done {
    /// Nothing more to do: escalated, expired, or no longer held as taken
    /// (resolved, purged, replaced, or written again with its own deadlines).
    Finished,
    /// Act on it again at `at` (ms since the epoch).
    Retry {
        record: Arc<PendingRecord>,
        attempt: u32,
        at: u64,
    },
}

/// The running timer. Dropping it stops the task at once; [`Timer::stop`]
/// lets the records being acted on finish first.
pub(crate) struct Timer {
    stop: watch::Sender<bool>,
    task: JoinHandle<()>,
}

impl Timer {
    /// Starts the timer. Boot calls this after the ready line, so records
    /// whose deadline passed while the worker was down are acted on at once.
    pub(crate) fn start(releaser: Arc<Releaser>) -> Timer {
        let (stop, stopped) = watch::channel(false);
        Timer {
            stop,
            task: tokio::spawn(run(releaser, stopped)),
        }
    }

    /// Stops taking records, and waits up to `drain` for those being acted
    /// on.
    pub(crate) async fn stop(mut self, drain: Duration) {
        let _ = self.stop.send(true);
        let _ = tokio::time::timeout(drain, &mut self.task).await;
    }
}

impl Drop for Timer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// The timer's loop.
async fn run(releaser: Arc<Releaser>, mut stopped: watch::Receiver<bool>) {
    let store = &releaser.pending;
    let mut jobs: JoinSet<Done> = JoinSet::new();
    // Records to act on again, by time (and a sequence number, so two
    // retries at the same millisecond are both kept).
    let mut retries: BTreeMap<(u64, u64), (Arc<PendingRecord>, u32)> = BTreeMap::new();
    let mut seq = 0u64;
    while !*stopped.borrow() {
        // While the next deadline is worked out, every new one wakes us.
        store.arm_timer(u64::MAX);
        let now = now_ms();
        while jobs.len() < IN_FLIGHT {
            let retry_due = retries
                .first_key_value()
                .is_some_and(|((at, _), _)| *at <= now);
            let (record, attempt) = if retry_due {
                match retries.pop_first() {
                    Some((_, entry)) => entry,
                    None => break,
                }
            } else {
                match store.take_due(now) {
                    Some(record) => (record, 0),
                    None => break,
                }
            };
            jobs.spawn(act(releaser.clone(), record, attempt));
        }
        let next = [
            store.next_due(),
            retries.first_key_value().map(|((at, _), _)| *at),
        ]
        .into_iter()
        .flatten()
        .min();
        store.arm_timer(next.unwrap_or(u64::MAX));
        let sleep = next
            .map(|at| Duration::from_millis(at.saturating_sub(now_ms())))
            .unwrap_or(MAX_SLEEP)
            .min(MAX_SLEEP);
        let full = jobs.len() >= IN_FLIGHT;
        tokio::select! {
            Some(done) = jobs.join_next(), if !jobs.is_empty() => {
                let mut finished = vec![done];
                while let Some(done) = jobs.try_join_next() {
                    finished.push(done);
                }
                for done in finished {
                    match done {
                        Ok(Done::Finished) => {}
                        Ok(Done::Retry { record, attempt, at }) => {
                            seq += 1;
                            retries.insert((at, seq), (record, attempt));
                        }
                        Err(err) if err.is_cancelled() => {}
                        Err(err) => tracing::error!(error = %err, "a deadline action failed; its record waits for a human or a purge"),
                    }
                }
            }
            () = tokio::time::sleep(sleep), if !full => {}
            () = store.deadline_written(), if !full => {}
            changed = stopped.changed() => {
                // The handle is gone: nothing can stop us gracefully any more.
                if changed.is_err() {
                    break;
                }
            }
        }
    }
    while jobs.join_next().await.is_some() {}
}

/// The wait before retry number `attempt + 1`, in ms.
fn backoff(attempt: u32) -> u64 {
    RETRY.delay(attempt).as_millis() as u64
}

/// Acts on one record whose deadline has come: expires it, or escalates it.
async fn act(releaser: Arc<Releaser>, record: Arc<PendingRecord>, attempt: u32) -> Done {
    let store = &releaser.pending;
    let Some(current) = store.get(&record.session_id, &record.function_call_id) else {
        return Done::Finished;
    };
    // Another record under the key, or this hold escalated (it is in the
    // deadline view again on its own): the index tracks whatever deadline
    // the current one has. A release under way settles the record itself.
    if !current.is_same_hold(&record) || current.escalated_at != record.escalated_at {
        return Done::Finished;
    }
    if current.releasing {
        // A decision on it is under way: if it gives the record back, the
        // deadline still holds.
        return Done::Retry {
            at: now_ms() + BUSY_RETRY_MS,
            record: current,
            attempt,
        };
    }
    let record = current;
    let now = now_ms();
    if record.expires_at.is_some_and(|at| at <= now) {
        // Past both deadlines (the worker was down): the expiry alone; an
        // escalation now would ask someone to answer a call that is over.
        expire(&releaser, record, attempt).await
    } else if record.next_due().is_some_and(|at| at <= now) {
        escalate(store, record, attempt, now).await
    } else {
        // Not due after all (the wall clock moved back): wait for it.
        match record.next_due() {
            Some(at) => Done::Retry {
                record,
                attempt,
                at,
            },
            None => Done::Finished,
        }
    }
}

/// Denies a held call no one answered in time, through the release path.
async fn expire(releaser: &Arc<Releaser>, record: Arc<PendingRecord>, attempt: u32) -> Done {
    let (sid, cid) = (record.session_id.as_str(), record.function_call_id.as_str());
    let request = Request {
        session_id: sid.to_string(),
        function_call_id: cid.to_string(),
        expected: Some((record.pending_at, record.kind)),
        decision: Ruling::Timeout,
        via: ReleaseVia::Timer,
        caller: None,
    };
    match releaser.release(request, None).await {
        Answer::Taken { announced, .. } => {
            tracing::info!(session_id = sid, function_call_id = cid, function_id = %record.function_id, decision = "deny", rule = super::TIMEOUT, announced, "held call expired");
            Done::Finished
        }
        // Settled otherwise (not held, unknown), already gone or replaced:
        // nothing more for the timer.
        Answer::NotHeld | Answer::Unknown | Answer::Absent | Answer::Stale => Done::Finished,
        // Carried by another decision: if that one gives the record back,
        // the deadline still holds.
        Answer::Releasing => Done::Retry {
            at: now_ms() + BUSY_RETRY_MS,
            record,
            attempt,
        },
        Answer::Unavailable(_) | Answer::State(_) => {
            let wait = backoff(attempt);
            tracing::warn!(session_id = sid, function_call_id = cid, function_id = %record.function_id, attempt, retry_in_ms = wait, "the timeout was not carried to the harness; the call stays held and the timer tries again");
            // The record given back is a new revision in the index; retry
            // with whatever is under the key then.
            Done::Retry {
                at: now_ms() + wait,
                attempt: attempt.saturating_add(1),
                record,
            }
        }
    }
}

/// Escalates a held call no one answered by its `escalate_at`.
async fn escalate(
    store: &PendingStore,
    record: Arc<PendingRecord>,
    attempt: u32,
    now: u64,
) -> Done {
    let lock = store
        .lock(&record.session_id, &record.function_call_id)
        .await;
    match lock.escalate(&record, now).await {
        Ok(escalated) => {
            if escalated {
                tracing::info!(session_id = %record.session_id, function_call_id = %record.function_call_id, function_id = %record.function_id, "held call escalated");
            }
            Done::Finished
        }
        Err(err) => {
            let wait = backoff(attempt);
            tracing::warn!(session_id = %record.session_id, function_call_id = %record.function_call_id, error = %err, retry_in_ms = wait, "escalation not recorded; trying again");
            Done::Retry {
                at: now_ms() + wait,
                attempt: attempt.saturating_add(1),
                record,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_from_a_second_up_to_a_minute() {
        let waits: Vec<u64> = (0..9).map(backoff).collect();
        assert_eq!(
            waits,
            [1_000, 2_000, 4_000, 8_000, 16_000, 32_000, 60_000, 60_000, 60_000]
        );
        assert_eq!(backoff(u32::MAX), 60_000);
    }
}
