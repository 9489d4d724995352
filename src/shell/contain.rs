//! Containment (§25.10): readings run off the caller's thread, on a small
//! fixed pool of threads with an explicit stack, under a wall-clock budget
//! for the whole batch. Past the budget, or when the pool's queue is full,
//! an unanswered value is `Model::opaque_budget()`: a stuck reading never
//! blocks a later call (the queue is bounded, the pool keeps working, and a
//! reading stops itself at its own budget). Models of values read before
//! are kept (bounded), so a repeated command is not parsed again.

use std::collections::HashMap;
use std::sync::mpsc::{self, SyncSender, TrySendError};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Instant;

use tokio::sync::oneshot;

use super::{read, Limits, Model, OwnedSource};

/// Threads in the pool.
const THREADS: usize = 2;
/// Each pool thread's stack: far above what a reading under the limits
/// needs (no reading recurses on its input).
const STACK_BYTES: usize = 16 * 1024 * 1024;
/// The longest a batch waits for the pool: far above what its readings
/// take (each stops at its own budget of work), and well inside a hook's
/// time, so a waiting thread on a loaded machine does not make a command
/// opaque, and a stuck pool still cannot hold a call past its hook.
const WAIT: std::time::Duration = std::time::Duration::from_secs(1);
/// Readings waiting for a thread; past it, a value is opaque at once.
const QUEUE: usize = 64;
/// Models kept for values read before (agents repeat their commands): a
/// model is a pure function of its value and the limits, so a kept one is
/// the one a new reading would give. Cleared whole when full.
const KEPT: usize = 1_024;
/// Values longer than this are not kept (the memory bound: at most
/// `KEPT` × this many bytes of keys).
const KEPT_BYTES: usize = 4_096;

struct Task {
    source: OwnedSource,
    reply: oneshot::Sender<Arc<Model>>,
}

/// The pool that reads command values for the gate.
pub struct Reader {
    limits: Limits,
    queue: Option<SyncSender<Task>>,
    kept: Mutex<HashMap<OwnedSource, Arc<Model>>>,
}

impl Reader {
    /// Start the pool. If no thread can be started, every reading answers
    /// `Model::opaque_budget()` (a gate that cannot read a command denies
    /// or holds it; it never lets it through).
    pub fn new(limits: Limits) -> Self {
        let (sender, receiver) = mpsc::sync_channel::<Task>(QUEUE);
        let receiver = Arc::new(Mutex::new(receiver));
        let mut started = 0;
        for n in 0..THREADS {
            let receiver = Arc::clone(&receiver);
            let thread_limits = limits.clone();
            let spawned = thread::Builder::new()
                .name(format!("command-model-{n}"))
                .stack_size(STACK_BYTES)
                .spawn(move || loop {
                    let task = {
                        let Ok(guard) = receiver.lock() else {
                            return;
                        };
                        match guard.recv() {
                            Ok(task) => task,
                            Err(_) => return,
                        }
                    };
                    let model = read(task.source.as_source(), &thread_limits);
                    // The caller may have stopped waiting: nothing to do then.
                    let _ = task.reply.send(Arc::new(model));
                });
            if spawned.is_ok() {
                started += 1;
            }
        }
        Reader {
            limits,
            queue: (started > 0).then_some(sender),
            kept: Mutex::new(HashMap::new()),
        }
    }

    /// The limits every reading runs under.
    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    /// Read every value, in order. Each reading stops itself at its budget
    /// of work; the batch waits at most [`WAIT`] for the pool (a queue that
    /// long means the pool is stuck: what is unanswered then is opaque).
    pub async fn read_all(&self, sources: Vec<OwnedSource>) -> Vec<Arc<Model>> {
        let deadline = Instant::now() + WAIT;
        let mut pending: Vec<Pending> = Vec::with_capacity(sources.len());
        for source in sources {
            if let Some(model) = self.kept(&source) {
                pending.push(Pending::Kept(model));
                continue;
            }
            let Some(queue) = &self.queue else {
                pending.push(Pending::Late);
                continue;
            };
            let key = (size(&source) <= KEPT_BYTES).then(|| source.clone());
            let (reply, answer) = oneshot::channel();
            match queue.try_send(Task { source, reply }) {
                Ok(()) => pending.push(Pending::Asked(answer, key)),
                Err(TrySendError::Full(_)) | Err(TrySendError::Disconnected(_)) => {
                    pending.push(Pending::Late)
                }
            }
        }
        let mut models = Vec::with_capacity(pending.len());
        for answer in pending {
            let model = match answer {
                Pending::Kept(model) => model,
                Pending::Asked(answer, key) => {
                    let left = deadline.saturating_duration_since(Instant::now());
                    match tokio::time::timeout(left, answer).await {
                        Ok(Ok(model)) => {
                            if let Some(key) = key {
                                self.keep(key, &model);
                            }
                            model
                        }
                        _ => Arc::new(Model::opaque_budget()),
                    }
                }
                Pending::Late => Arc::new(Model::opaque_budget()),
            };
            models.push(model);
        }
        models
    }

    fn kept(&self, source: &OwnedSource) -> Option<Arc<Model>> {
        let kept = self.kept.lock().ok()?;
        kept.get(source).cloned()
    }

    /// Keep a model unless its reading ran out of time (another reading
    /// of the same value, on a quieter machine, could go further).
    fn keep(&self, source: OwnedSource, model: &Arc<Model>) {
        if model
            .opaque
            .iter()
            .any(|o| matches!(o.why, super::OpaqueWhy::Budget))
        {
            return;
        }
        let Ok(mut kept) = self.kept.lock() else {
            return;
        };
        if kept.len() >= KEPT {
            kept.clear();
        }
        kept.insert(source, Arc::clone(model));
    }
}

/// One value of a batch.
enum Pending {
    /// Read before.
    Kept(Arc<Model>),
    /// Asked of the pool; kept under this key when it answers.
    Asked(oneshot::Receiver<Arc<Model>>, Option<OwnedSource>),
    /// Not asked: no pool, or its queue was full.
    Late,
}

fn size(source: &OwnedSource) -> usize {
    match source {
        OwnedSource::Bash(text) | OwnedSource::Words(text) => text.len(),
        OwnedSource::Argv(words) => words.iter().map(|w| w.len() + 1).sum(),
    }
}
