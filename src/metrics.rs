//! The gate's metrics (`architecture/contract.md` § Metrics, §27.5), through
//! the SDK's OpenTelemetry (the `iii-helpers` re-export, so one
//! `opentelemetry` in the build): the engine's `/otel` socket carries them and
//! the engine lists them under `engine::metrics::list`.
//!
//! Why a process-wide set of instruments: the SDK installs one global meter
//! provider when its OpenTelemetry starts (in the background, after the
//! client is made), and instruments taken from the no-op provider before
//! that would stay no-ops. So the instruments are made on the first record
//! after the SDK says it started, and never before; with OpenTelemetry off
//! (`III_OTEL=0`, the test engine) every record is one atomic load.
//!
//! No label carries a session id, a call id or an argument: outcomes,
//! decider kinds, reviewer verdicts and failure classes are fixed words, and
//! a rule id is the operator's configuration.

use std::sync::OnceLock;
use std::time::Duration;

use iii_helpers::observability::opentelemetry::metrics::{
    Counter, Histogram, Meter, ObservableGauge,
};
use iii_helpers::observability::opentelemetry::{global, KeyValue};

/// The meter's name (the instrumentation scope).
pub const METER: &str = "approval-gate";

/// The instruments' names, as `engine::metrics::list` shows them.
pub mod names {
    /// Gate verdicts: `outcome` (`continue`, `deny`, `hold`), `rule`.
    pub const VERDICTS: &str = "approval_gate.gate.verdicts";
    /// The gate's own latency in milliseconds, hook in to answer out:
    /// `outcome`.
    pub const GATE_LATENCY: &str = "approval_gate.gate.latency";
    /// Held calls leaving the inbox: `outcome` (`allow`, `deny`, `aborted`,
    /// `timeout`, `unknown`), `decided_by` (`human`, `timeout`,
    /// `lifecycle`).
    pub const REMOVALS: &str = "approval_gate.removals";
    /// Milliseconds from a hold to its decision: `kind` (the decider's).
    pub const TIME_TO_DECISION: &str = "approval_gate.decision.time";
    /// The reviewer's verdicts: `verdict`.
    pub const REVIEWER_VERDICTS: &str = "approval_gate.reviewer.verdicts";
    /// A session's reviewer breaker opening.
    pub const BREAKER_TRIPS: &str = "approval_gate.reviewer.breaker_trips";
    /// Releases the harness did not take, or whose answer was lost:
    /// `reason` (`unavailable`, `answer_lost`).
    pub const RELEASE_FAILURES: &str = "approval_gate.release.failures";
    /// Held calls whose outcome is unknown (an answer lost, the call may
    /// have run).
    pub const UNKNOWN_OUTCOMES: &str = "approval_gate.release.unknown";
    /// Calls held now.
    pub const HELD: &str = "approval_gate.held";
}

/// Label names: the only ones the gate's metrics use.
pub mod labels {
    /// A verdict's or a removal's outcome.
    pub const OUTCOME: &str = "outcome";
    /// The rule id that decided a gate verdict.
    pub const RULE: &str = "rule";
    /// The decider's kind (`decided_by.kind`) of a removal.
    pub const DECIDED_BY: &str = "decided_by";
    /// The decider's kind, for the time to decision.
    pub const KIND: &str = "kind";
    /// The reviewer's verdict.
    pub const VERDICT: &str = "verdict";
    /// Why a release failed.
    pub const REASON: &str = "reason";
}

/// The instruments, made from one meter.
pub(crate) struct Instruments {
    verdicts: Counter<u64>,
    gate_latency: Histogram<f64>,
    removals: Counter<u64>,
    time_to_decision: Histogram<f64>,
    reviewer_verdicts: Counter<u64>,
    breaker_trips: Counter<u64>,
    release_failures: Counter<u64>,
    unknown_outcomes: Counter<u64>,
    /// Kept so the callback stays registered.
    _held: ObservableGauge<u64>,
}

impl Instruments {
    pub(crate) fn new(meter: &Meter) -> Instruments {
        Instruments {
            verdicts: meter
                .u64_counter(names::VERDICTS)
                .with_description("Gate verdicts by outcome and rule id")
                .build(),
            gate_latency: meter
                .f64_histogram(names::GATE_LATENCY)
                .with_unit("ms")
                .with_description("The gate's own latency, hook input to answer")
                .build(),
            removals: meter
                .u64_counter(names::REMOVALS)
                .with_description("Held calls leaving the inbox by outcome and decider kind")
                .build(),
            time_to_decision: meter
                .f64_histogram(names::TIME_TO_DECISION)
                .with_unit("ms")
                .with_description("Time from a hold to its decision, by decider kind")
                .build(),
            reviewer_verdicts: meter
                .u64_counter(names::REVIEWER_VERDICTS)
                .with_description("The reviewer's verdicts")
                .build(),
            breaker_trips: meter
                .u64_counter(names::BREAKER_TRIPS)
                .with_description("Reviewer breakers opening (denials go to a human)")
                .build(),
            release_failures: meter
                .u64_counter(names::RELEASE_FAILURES)
                .with_description("Releases the harness did not take or whose answer was lost")
                .build(),
            unknown_outcomes: meter
                .u64_counter(names::UNKNOWN_OUTCOMES)
                .with_description("Held calls whose outcome is unknown")
                .build(),
            _held: meter
                .u64_observable_gauge(names::HELD)
                .with_description("Calls held now")
                .with_callback(|observer| {
                    if let Some(held) = HELD.get().and_then(|count| count()) {
                        observer.observe(held, &[]);
                    }
                })
                .build(),
        }
    }
}

/// How the gauge counts held calls: the worker's inbox, while it lives.
pub(crate) type HeldCount = Box<dyn Fn() -> Option<u64> + Send + Sync>;

static INSTRUMENTS: OnceLock<Instruments> = OnceLock::new();
static HELD: OnceLock<HeldCount> = OnceLock::new();

/// The instruments, once the SDK's OpenTelemetry has started.
fn instruments() -> Option<&'static Instruments> {
    if let Some(made) = INSTRUMENTS.get() {
        return Some(made);
    }
    if !iii_helpers::observability::telemetry::is_initialized() {
        return None;
    }
    Some(INSTRUMENTS.get_or_init(|| Instruments::new(&global::meter(METER))))
}

/// Records into instruments made from `meter` from now on (a test's own
/// meter provider); `false` when instruments were made already.
pub fn install(meter: &Meter) -> bool {
    INSTRUMENTS.set(Instruments::new(meter)).is_ok()
}

/// The gauge's source of held calls: the first worker's inbox, while it
/// lives (a gauge has one source; the first one set stays).
pub(crate) fn count_held(count: HeldCount) {
    let _ = HELD.set(count);
}

/// A gate verdict (`continue`, `deny`, `hold`) and the rule that decided it.
pub(crate) fn verdict(outcome: &'static str, rule: Option<&str>) {
    if let Some(m) = instruments() {
        let rule = KeyValue::new(labels::RULE, rule.unwrap_or("none").to_string());
        m.verdicts
            .add(1, &[KeyValue::new(labels::OUTCOME, outcome), rule]);
    }
}

/// The gate's own time for one hook call.
pub(crate) fn gate_latency(outcome: &'static str, took: Duration) {
    if let Some(m) = instruments() {
        m.gate_latency.record(
            took.as_secs_f64() * 1000.0,
            &[KeyValue::new(labels::OUTCOME, outcome)],
        );
    }
}

/// A held call left the inbox; `held_ms` is its time from hold to
/// decision, when it was held (an unreadable value has none).
pub(crate) fn removal(outcome: &'static str, decided_by: &'static str, held_ms: Option<u64>) {
    if let Some(m) = instruments() {
        m.removals.add(
            1,
            &[
                KeyValue::new(labels::OUTCOME, outcome),
                KeyValue::new(labels::DECIDED_BY, decided_by),
            ],
        );
        if let Some(ms) = held_ms {
            m.time_to_decision
                .record(ms as f64, &[KeyValue::new(labels::KIND, decided_by)]);
        }
        if outcome == "unknown" {
            m.unknown_outcomes.add(1, &[]);
        }
    }
}

/// One verdict of a reviewer.
pub(crate) fn reviewer_verdict(verdict: &'static str) {
    if let Some(m) = instruments() {
        m.reviewer_verdicts
            .add(1, &[KeyValue::new(labels::VERDICT, verdict)]);
    }
}

/// A session's reviewer breaker opened.
pub(crate) fn breaker_trip() {
    if let Some(m) = instruments() {
        m.breaker_trips.add(1, &[]);
    }
}

/// A release failed: `unavailable` (the harness did not take it) or
/// `answer_lost`.
pub(crate) fn release_failure(reason: &'static str) {
    if let Some(m) = instruments() {
        m.release_failures
            .add(1, &[KeyValue::new(labels::REASON, reason)]);
    }
}

#[cfg(test)]
mod tests {
    use std::collections::{BTreeMap, BTreeSet};

    use iii_helpers::observability::opentelemetry::metrics::MeterProvider;
    use opentelemetry_sdk::metrics::data::{AggregatedMetrics, MetricData};
    use opentelemetry_sdk::metrics::{InMemoryMetricExporter, PeriodicReader, SdkMeterProvider};

    use super::*;

    type Points = Vec<(BTreeMap<String, String>, f64)>;

    fn points<T: Copy>(data: &MetricData<T>, to: fn(T) -> f64) -> Points {
        let attrs = |kvs: &mut dyn Iterator<Item = &KeyValue>| {
            kvs.map(|kv| (kv.key.to_string(), kv.value.to_string()))
                .collect::<BTreeMap<_, _>>()
        };
        match data {
            MetricData::Sum(sum) => sum
                .data_points()
                .map(|p| (attrs(&mut p.attributes()), to(p.value())))
                .collect(),
            MetricData::Gauge(gauge) => gauge
                .data_points()
                .map(|p| (attrs(&mut p.attributes()), to(p.value())))
                .collect(),
            MetricData::Histogram(histogram) => histogram
                .data_points()
                .map(|p| (attrs(&mut p.attributes()), p.count() as f64))
                .collect(),
            MetricData::ExponentialHistogram(_) => Vec::new(),
        }
    }

    /// Every instrument is recorded under its name with only the fixed label
    /// names: a verdict by outcome and rule id, a removal by outcome and
    /// decider kind, its time by kind, reviewer verdicts, breaker trips,
    /// release failures, unknown outcomes, the held gauge.
    #[test]
    fn rule_27_5_metrics_are_recorded_by_name_with_labels_that_name_no_session_or_call() {
        let exporter = InMemoryMetricExporter::default();
        let provider = SdkMeterProvider::builder()
            .with_reader(PeriodicReader::builder(exporter.clone()).build())
            .build();
        assert!(
            install(&provider.meter(METER)),
            "instruments made before the test"
        );
        count_held(Box::new(|| Some(7)));
        verdict("hold", Some("ask-shell"));
        verdict("continue", None);
        gate_latency("hold", Duration::from_millis(3));
        removal("timeout", "timeout", Some(1_500));
        removal("unknown", "lifecycle", Some(10));
        reviewer_verdict("deny");
        breaker_trip();
        release_failure("answer_lost");
        provider.force_flush().expect("flushed");
        let mut seen: BTreeMap<String, Points> = BTreeMap::new();
        for resource in exporter.get_finished_metrics().expect("exported") {
            for scope in resource.scope_metrics() {
                for metric in scope.metrics() {
                    let found = match metric.data() {
                        AggregatedMetrics::U64(d) => points(d, |v| v as f64),
                        AggregatedMetrics::F64(d) => points(d, |v| v),
                        AggregatedMetrics::I64(_) => Vec::new(),
                    };
                    seen.entry(metric.name().to_string())
                        .or_default()
                        .extend(found);
                }
            }
        }
        let has = |name: &str, labels: &[(&str, &str)]| {
            seen.get(name).is_some_and(|points| {
                points.iter().any(|(attrs, value)| {
                    *value >= 1.0
                        && labels
                            .iter()
                            .all(|(k, v)| attrs.get(*k).map(String::as_str) == Some(*v))
                })
            })
        };
        assert!(
            has(
                names::VERDICTS,
                &[("outcome", "hold"), ("rule", "ask-shell")]
            ),
            "{seen:?}"
        );
        assert!(
            has(
                names::VERDICTS,
                &[("outcome", "continue"), ("rule", "none")]
            ),
            "{seen:?}"
        );
        assert!(has(names::GATE_LATENCY, &[("outcome", "hold")]), "{seen:?}");
        assert!(
            has(
                names::REMOVALS,
                &[("outcome", "timeout"), ("decided_by", "timeout")]
            ),
            "{seen:?}"
        );
        assert!(
            has(names::TIME_TO_DECISION, &[("kind", "lifecycle")]),
            "{seen:?}"
        );
        assert!(
            has(names::REVIEWER_VERDICTS, &[("verdict", "deny")]),
            "{seen:?}"
        );
        assert!(has(names::BREAKER_TRIPS, &[]), "{seen:?}");
        assert!(
            has(names::RELEASE_FAILURES, &[("reason", "answer_lost")]),
            "{seen:?}"
        );
        assert!(has(names::UNKNOWN_OUTCOMES, &[]), "{seen:?}");
        assert!(
            seen.get(names::HELD)
                .is_some_and(|p| p.iter().any(|(_, v)| *v == 7.0)),
            "{seen:?}"
        );
        let allowed: BTreeSet<&str> = [
            labels::OUTCOME,
            labels::RULE,
            labels::DECIDED_BY,
            labels::KIND,
            labels::VERDICT,
            labels::REASON,
        ]
        .into();
        for (name, points) in &seen {
            assert!(name.starts_with("approval_gate."), "{name}");
            for (attrs, _) in points {
                for key in attrs.keys() {
                    assert!(allowed.contains(key.as_str()), "{name} has label {key}");
                }
            }
        }
    }
}
