//! Fault injection: make the engine answer chosen calls with an error, or
//! late.
//!
//! A rule names one function id and applies to every call the engine routes
//! for it — from a worker or from the engine itself (trigger deliveries), to a
//! built-in or to a worker's function — for the next `times` calls, or for
//! good when `times` is `None`.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use super::wire::ErrorBody;

/// How many more calls a rule applies to; `None` is every call until cleared.
type Remaining = Option<usize>;

#[derive(Debug, Clone)]
struct FailRule {
    error: ErrorBody,
    remaining: Remaining,
}

#[derive(Debug, Clone)]
struct StallRule {
    delay: Duration,
    remaining: Remaining,
}

#[derive(Debug, Default, Clone)]
struct Rules {
    fail: Option<FailRule>,
    stall: Option<StallRule>,
}

/// What the rules decided for one call.
#[derive(Debug, Default)]
pub(crate) struct Verdict {
    /// Answer with this instead of running the call.
    pub fail: Option<ErrorBody>,
    /// Hold the answer back this long.
    pub delay: Option<Duration>,
}

/// The fault rules of one [`TestEngine`](super::TestEngine), by function id.
///
/// A failure replaces the call: the function does not run and the caller gets
/// `{code, message}`. A stall does not stop the call: it runs (a built-in's
/// write happens, a worker's handler is invoked) and only its answer reaches
/// the caller `delay` later — a long delay is an answer that never comes, so
/// the caller's own timeout decides. Both may be set at once: the failure is
/// then delivered late.
#[derive(Debug, Default)]
pub struct Faults {
    rules: Mutex<HashMap<String, Rules>>,
}

fn take(remaining: &mut Remaining) -> bool {
    match remaining {
        None => true,
        Some(0) => false,
        Some(left) => {
            *left -= 1;
            true
        }
    }
}

impl Faults {
    fn rules(&self) -> MutexGuard<'_, HashMap<String, Rules>> {
        self.rules
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The next `times` calls (`None`: all) to `function_id` answer
    /// `{code, message}` without running.
    pub fn fail(&self, function_id: &str, code: &str, message: &str, times: Option<usize>) {
        self.rules()
            .entry(function_id.to_string())
            .or_default()
            .fail = Some(FailRule {
            error: ErrorBody::new(code, message),
            remaining: times,
        });
    }

    /// The answers of the next `times` calls (`None`: all) to `function_id`
    /// reach their callers `delay` late.
    pub fn stall(&self, function_id: &str, delay: Duration, times: Option<usize>) {
        self.rules()
            .entry(function_id.to_string())
            .or_default()
            .stall = Some(StallRule {
            delay,
            remaining: times,
        });
    }

    /// Removes every rule for `function_id`.
    pub fn clear(&self, function_id: &str) {
        self.rules().remove(function_id);
    }

    /// Removes every rule.
    pub fn clear_all(&self) {
        self.rules().clear();
    }

    /// Consumes one use of each rule that applies to a call of `function_id`.
    pub(crate) fn verdict(&self, function_id: &str) -> Verdict {
        let mut rules = self.rules();
        let Some(entry) = rules.get_mut(function_id) else {
            return Verdict::default();
        };
        let mut verdict = Verdict::default();
        if let Some(rule) = entry.fail.as_mut() {
            if take(&mut rule.remaining) {
                verdict.fail = Some(rule.error.clone());
            }
        }
        if let Some(rule) = entry.stall.as_mut() {
            if take(&mut rule.remaining) {
                verdict.delay = Some(rule.delay);
            }
        }
        verdict
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_counted_rule_runs_out() {
        let faults = Faults::default();
        faults.fail("f", "boom", "no", Some(2));
        assert!(faults.verdict("f").fail.is_some());
        assert!(faults.verdict("f").fail.is_some());
        assert!(faults.verdict("f").fail.is_none());
        assert!(faults.verdict("g").fail.is_none());
    }

    #[test]
    fn rules_combine_and_clear() {
        let faults = Faults::default();
        faults.fail("f", "boom", "no", None);
        faults.stall("f", Duration::from_millis(5), Some(1));
        let first = faults.verdict("f");
        assert!(first.fail.is_some() && first.delay.is_some());
        let second = faults.verdict("f");
        assert!(second.fail.is_some() && second.delay.is_none());
        faults.clear("f");
        assert!(faults.verdict("f").fail.is_none());
    }
}
