//! The time a hook may spend (`architecture/contract.md` § The gate, "Never
//! ungated"). The harness waits `timeout_ms` (5 s) for a hook and then applies
//! its `on_error` policy: the gate's call is denied, the grant watch's
//! skipped. A hook must finish its work, including any durable write, before
//! that, or it would leave a record for a call the harness already answered.

use std::time::Duration;

use tokio::time::Instant;

/// What the hooks allow themselves: a second under the harness's 5 s, for
/// the answer's trip back.
pub(crate) const HOOK_BUDGET: Duration = Duration::from_millis(4000);

/// A point in time a hook's work must end by.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Deadline(Instant);

impl Deadline {
    /// [`HOOK_BUDGET`] from now.
    pub(crate) fn hook() -> Deadline {
        Deadline(Instant::now() + HOOK_BUDGET)
    }

    /// The instant itself.
    pub(crate) fn instant(self) -> Instant {
        self.0
    }

    /// At most `step`, and never past the deadline less `reserve` (the time
    /// kept for what follows).
    pub(crate) fn cap(self, step: Duration, reserve: Duration) -> Duration {
        let left = self
            .0
            .saturating_duration_since(Instant::now())
            .saturating_sub(reserve);
        step.min(left)
    }
}
