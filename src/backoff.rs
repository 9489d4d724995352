//! PURE, a leaf: exponential backoff — the wait before each retry, doubling
//! from a first delay up to a cap. It only says how long: the caller sleeps,
//! so a clock can be put in its place without touching the arithmetic.

use std::time::Duration;

/// Waits that double from `first` up to `cap`.
///
/// Read by attempt ([`Backoff::delay`]: a record's timer retries keep their
/// own count) or in order ([`Backoff::next_delay`], or as an endless
/// [`Iterator`]: `RETRY.take(5)` is five waits).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Backoff {
    first: Duration,
    cap: Duration,
    /// How many waits [`Backoff::next_delay`] handed out since the start
    /// or the last reset.
    attempt: u32,
}

impl Backoff {
    /// Waits of `first`, then twice that, … at most `cap` each.
    pub(crate) const fn new(first: Duration, cap: Duration) -> Backoff {
        Backoff {
            first,
            cap,
            attempt: 0,
        }
    }

    /// The wait before retry number `attempt + 1` (0: the first retry):
    /// `first × 2^attempt`, at most the cap; never overflows.
    pub(crate) fn delay(&self, attempt: u32) -> Duration {
        let factor = 1u32.checked_shl(attempt).unwrap_or(u32::MAX);
        self.first.saturating_mul(factor).min(self.cap)
    }

    /// The next wait in order; the one after it is doubled.
    pub(crate) fn next_delay(&mut self) -> Duration {
        let wait = self.delay(self.attempt);
        self.attempt = self.attempt.saturating_add(1);
        wait
    }

    /// Back to the first wait (what was retried succeeded).
    pub(crate) fn reset(&mut self) {
        self.attempt = 0;
    }
}

impl Iterator for Backoff {
    type Item = Duration;

    fn next(&mut self) -> Option<Duration> {
        Some(self.next_delay())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECOND: Duration = Duration::from_secs(1);

    #[test]
    fn waits_double_from_the_first_up_to_the_cap() {
        let waits: Vec<u64> = Backoff::new(SECOND, Duration::from_secs(60))
            .take(9)
            .map(|wait| wait.as_secs())
            .collect();
        assert_eq!(waits, [1, 2, 4, 8, 16, 32, 60, 60, 60]);
    }

    #[test]
    fn by_attempt_is_the_same_sequence_and_never_overflows() {
        let backoff = Backoff::new(Duration::from_millis(250), Duration::from_secs(4));
        let in_order: Vec<Duration> = backoff.take(6).collect();
        let by_attempt: Vec<Duration> = (0..6).map(|a| backoff.delay(a)).collect();
        assert_eq!(in_order, by_attempt);
        assert_eq!(by_attempt[4], Duration::from_millis(4000));
        for attempt in [31, 32, 64, u32::MAX] {
            assert_eq!(backoff.delay(attempt), Duration::from_secs(4));
        }
        let uncapped = Backoff::new(SECOND, Duration::MAX);
        assert_eq!(uncapped.delay(u32::MAX), SECOND * u32::MAX);
    }

    #[test]
    fn a_reset_starts_again_from_the_first_wait() {
        let mut backoff = Backoff::new(SECOND, Duration::from_secs(60));
        assert_eq!(backoff.next_delay(), SECOND);
        assert_eq!(backoff.next_delay(), 2 * SECOND);
        backoff.reset();
        assert_eq!(backoff.next_delay(), SECOND);
    }
}
