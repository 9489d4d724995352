//! What `approval::health` says of the reviewer: counts by verdict and the
//! latency of recent calls.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use crate::terms::review::ReviewVerdict;

/// How many recent latencies the percentiles are taken over.
const LATENCY_SAMPLES: usize = 1024;

/// Counts and recent latencies.
#[derive(Debug, Default)]
pub(crate) struct Stats {
    calls: AtomicU64,
    allows: AtomicU64,
    denies: AtomicU64,
    escalations: AtomicU64,
    errors: AtomicU64,
    timeouts: AtomicU64,
    held_by_breaker: AtomicU64,
    /// Microseconds, newest last.
    latencies: Mutex<VecDeque<u64>>,
}

/// A copy of the counts, with the percentiles.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(crate) struct Counts {
    pub(crate) calls: u64,
    pub(crate) allows: u64,
    pub(crate) denies: u64,
    pub(crate) escalations: u64,
    pub(crate) errors: u64,
    pub(crate) timeouts: u64,
    pub(crate) held_by_breaker: u64,
    pub(crate) p50_ms: Option<f64>,
    pub(crate) p99_ms: Option<f64>,
}

impl Stats {
    /// One call to the reviewer and what came of it (`malformed` counts as
    /// an error).
    pub(crate) fn record(&self, verdict: ReviewVerdict, took: Duration) {
        self.calls.fetch_add(1, Ordering::Relaxed);
        crate::metrics::reviewer_verdict(verdict.as_str());
        let counter = match verdict {
            ReviewVerdict::Allow => &self.allows,
            ReviewVerdict::Deny => &self.denies,
            ReviewVerdict::Escalate => &self.escalations,
            ReviewVerdict::Error | ReviewVerdict::Malformed => &self.errors,
            ReviewVerdict::Timeout => &self.timeouts,
        };
        counter.fetch_add(1, Ordering::Relaxed);
        let mut latencies = crate::sync::lock(&self.latencies);
        if latencies.len() == LATENCY_SAMPLES {
            latencies.pop_front();
        }
        latencies.push_back(took.as_micros().min(u128::from(u64::MAX)) as u64);
    }

    /// A denial the breaker sent to a human.
    pub(crate) fn held_by_breaker(&self) {
        self.held_by_breaker.fetch_add(1, Ordering::Relaxed);
    }

    /// The counts now.
    pub(crate) fn counts(&self) -> Counts {
        let mut sorted: Vec<u64> = crate::sync::lock(&self.latencies).iter().copied().collect();
        sorted.sort_unstable();
        Counts {
            calls: self.calls.load(Ordering::Relaxed),
            allows: self.allows.load(Ordering::Relaxed),
            denies: self.denies.load(Ordering::Relaxed),
            escalations: self.escalations.load(Ordering::Relaxed),
            errors: self.errors.load(Ordering::Relaxed),
            timeouts: self.timeouts.load(Ordering::Relaxed),
            held_by_breaker: self.held_by_breaker.load(Ordering::Relaxed),
            p50_ms: percentile(&sorted, 50),
            p99_ms: percentile(&sorted, 99),
        }
    }
}

/// The `p`th percentile (nearest rank) of `sorted` microseconds, in ms.
fn percentile(sorted: &[u64], p: usize) -> Option<f64> {
    if sorted.is_empty() {
        return None;
    }
    let rank = (p * sorted.len()).div_ceil(100).max(1);
    Some(sorted[rank - 1] as f64 / 1000.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rule_22_counts_by_verdict_and_nearest_rank_percentiles() {
        let stats = Stats::default();
        assert_eq!(stats.counts().p50_ms, None);
        for (i, verdict) in [
            ReviewVerdict::Allow,
            ReviewVerdict::Deny,
            ReviewVerdict::Escalate,
            ReviewVerdict::Error,
            ReviewVerdict::Malformed,
            ReviewVerdict::Timeout,
        ]
        .into_iter()
        .enumerate()
        {
            stats.record(verdict, Duration::from_millis(i as u64 + 1));
        }
        let c = stats.counts();
        assert_eq!(
            (
                c.calls,
                c.allows,
                c.denies,
                c.escalations,
                c.errors,
                c.timeouts
            ),
            (6, 1, 1, 1, 2, 1)
        );
        assert_eq!(c.p50_ms, Some(3.0));
        assert_eq!(c.p99_ms, Some(6.0));
        for _ in 0..2 * LATENCY_SAMPLES {
            stats.record(ReviewVerdict::Allow, Duration::from_micros(500));
        }
        assert_eq!(stats.counts().p99_ms, Some(0.5), "old samples age out");
    }
}
