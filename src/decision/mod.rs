//! The decision plane (`architecture/contract.md` § Resolve, § Settings,
//! § Evaluate): what humans and consoles call. `approval::resolve` releases a
//! held call; the settings RPCs change a session's mode and allow-lists;
//! `approval::evaluate` runs the gate's ladder read-only.

pub(crate) mod evaluate;
pub(crate) mod resolve;
pub(crate) mod settings;

use std::sync::Arc;

use crate::worker::Worker;

/// Registers the decision plane's functions.
pub(crate) fn register(worker: &Arc<Worker>) {
    resolve::register(worker);
    settings::register(worker);
    evaluate::register(worker);
}
