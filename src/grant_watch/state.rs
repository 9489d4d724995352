//! What the grant watch keeps while the worker runs.

use crate::engine::Engine;

use super::memory::GrantMemory;

/// The grant watch's state: its memory, and the lock that serializes its
/// read-merge-writes of the shell's configuration (two `always` grants in
/// flight at once must both land).
pub(crate) struct GrantWatch {
    pub(crate) memory: GrantMemory,
    pub(super) shell_config: tokio::sync::Mutex<()>,
}

impl GrantWatch {
    pub(crate) fn new(engine: Engine) -> GrantWatch {
        GrantWatch {
            memory: GrantMemory::new(engine),
            shell_config: tokio::sync::Mutex::new(()),
        }
    }
}
