//! `ReviewerDouble`: an SDK worker named `reviewer` that registers one
//! reviewer function (`review::call` unless told otherwise) for the gate's
//! automated review (contract §22), answers as a test sets it, and records
//! every review it was asked.
//!
//! # Format
//!
//! In: the gate's review input `{session_id, turn_id, function_call_id,
//! function_id, arguments, clipped, session, mode, recent}` (recorded without
//! the engine's `_caller_worker_id`).
//! Out, by [`Answer`]: `{verdict: "allow"|"deny"|"escalate", rationale, risk}`;
//! a structured error `{code: "reviewer_failed", …}`; no answer before a
//! delay far past any hook budget; or a reply of another shape.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::Duration;

use iii_sdk::{Error, IIIClient, RegisterFunction};
use serde_json::{json, Value};

use super::harness::peer;

pub const WORKER_NAME: &str = "reviewer";
/// The function id the double registers by default.
pub const REVIEW_CALL: &str = "review::call";

/// The key the engine adds to object payloads sent by workers.
const CALLER_KEY: &str = "_caller_worker_id";

/// What the double answers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
    /// `{verdict: "allow", …}`.
    Allow,
    /// `{verdict: "deny", …}`.
    Deny,
    /// `{verdict: "escalate", …}`.
    Escalate,
    /// A structured error.
    Error,
    /// No answer for this long (the gate must not wait for it).
    Slow(Duration),
    /// A reply without the contract's shape.
    Garbage,
}

impl Answer {
    /// A reply that never comes within a hook's budget.
    pub fn times_out() -> Answer {
        Answer::Slow(Duration::from_secs(8))
    }
}

#[derive(Default)]
struct Core {
    answer: Mutex<Option<Answer>>,
    by_function: Mutex<HashMap<String, Answer>>,
    delay: Mutex<Duration>,
    reviews: Mutex<Vec<Value>>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// A running reviewer double. Cheap to clone; disconnects when the last
/// clone drops.
#[derive(Clone)]
pub struct ReviewerDouble {
    iii: IIIClient,
    core: Arc<Core>,
    function_id: String,
    _closer: Arc<peer::Closer>,
}

impl ReviewerDouble {
    /// Registers [`REVIEW_CALL`] answering `answer`; returns once it is live.
    pub async fn start(url: &str, answer: Answer) -> ReviewerDouble {
        ReviewerDouble::start_at(url, REVIEW_CALL, answer).await
    }

    /// Registers `function_id` answering `answer`; returns once it is live.
    pub async fn start_at(url: &str, function_id: &str, answer: Answer) -> ReviewerDouble {
        let iii = peer::connect(url, WORKER_NAME);
        let core = Arc::new(Core {
            answer: Mutex::new(Some(answer)),
            ..Core::default()
        });
        let weak: Weak<Core> = Arc::downgrade(&core);
        iii.register_function(
            function_id,
            RegisterFunction::new_async(move |payload: Value| {
                let core = weak.upgrade();
                async move {
                    let core = core.ok_or_else(|| Error::Handler("reviewer stopped".into()))?;
                    core.review(payload).await
                }
            })
            .description("test reviewer: answers as the test sets it"),
        );
        peer::wait_live(&iii, &[function_id], &[]).await;
        ReviewerDouble {
            _closer: Arc::new(peer::Closer(iii.clone())),
            iii,
            core,
            function_id: function_id.to_string(),
        }
    }

    /// The function id it serves.
    pub fn function_id(&self) -> &str {
        &self.function_id
    }

    /// Every later review answers `answer`.
    pub fn set(&self, answer: Answer) {
        *lock(&self.core.answer) = Some(answer);
    }

    /// Later reviews of calls to `function_id` answer `answer` (wins over
    /// [`set`](Self::set)).
    pub fn set_for(&self, function_id: &str, answer: Answer) {
        lock(&self.core.by_function).insert(function_id.to_string(), answer);
    }

    /// Every later answer comes after `delay` (a quick reviewer that still
    /// takes a moment: a race between two deliveries of one hook).
    pub fn set_delay(&self, delay: Duration) {
        *lock(&self.core.delay) = delay;
    }

    /// Every review asked so far, oldest first.
    pub fn reviews(&self) -> Vec<Value> {
        lock(&self.core.reviews).clone()
    }

    /// How many reviews were asked.
    pub fn count(&self) -> usize {
        lock(&self.core.reviews).len()
    }

    /// The reviews asked about one call.
    pub fn reviews_of(&self, function_call_id: &str) -> Vec<Value> {
        self.reviews()
            .into_iter()
            .filter(|r| r["function_call_id"] == function_call_id)
            .collect()
    }

    pub fn client(&self) -> &IIIClient {
        &self.iii
    }

    pub async fn shutdown(&self) {
        peer::shutdown(&self.iii).await;
    }
}

impl Core {
    async fn review(&self, mut payload: Value) -> Result<Value, Error> {
        if let Some(o) = payload.as_object_mut() {
            o.remove(CALLER_KEY);
        }
        lock(&self.reviews).push(payload.clone());
        let function_id = payload["function_id"].as_str().unwrap_or_default();
        let answer = lock(&self.by_function)
            .get(function_id)
            .cloned()
            .or_else(|| lock(&self.answer).clone())
            .unwrap_or(Answer::Escalate);
        let delay = *lock(&self.delay);
        if !delay.is_zero() {
            tokio::time::sleep(delay).await;
        }
        let verdict = |v: &str| {
            Ok(json!({
                "verdict": v,
                "rationale": format!("the double says {v} for {function_id}"),
                "risk": "medium"
            }))
        };
        match answer {
            Answer::Allow => verdict("allow"),
            Answer::Deny => verdict("deny"),
            Answer::Escalate => verdict("escalate"),
            Answer::Error => Err(Error::Remote {
                code: "reviewer_failed".into(),
                message: "reviewer_failed: the double was told to fail".into(),
                stacktrace: None,
            }),
            Answer::Slow(delay) => {
                tokio::time::sleep(delay).await;
                verdict("allow")
            }
            Answer::Garbage => Ok(json!({"verdict": "maybe", "why": 42})),
        }
    }
}
