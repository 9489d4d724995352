//! The decision plane (`architecture/contract.md` § Resolve, § Settings,
//! § Evaluate): what humans and consoles call. `approval::resolve` releases a
//! held call; the settings RPCs change a session's mode and allow-lists;
//! `approval::evaluate` runs the gate's ladder read-only;
//! `approval::simulate` compares its verdicts under the configuration in
//! force and a draft (§ What-if and batch decisions; the pure core is
//! `whatif`); `approval::resolve-batch` decides a turn's held calls at once
//! through the same release path as `approval::resolve`.

pub(crate) mod batch;
pub(crate) mod configuration_id;
pub(crate) mod edit;
pub(crate) mod evaluate;
pub(crate) mod resolve;
pub(crate) mod settings;
pub(crate) mod simulate;
pub(crate) mod whatif;

use std::sync::Arc;

use crate::worker::Worker;

/// Registers the decision plane's functions.
pub(crate) fn register(worker: &Arc<Worker>) {
    resolve::register(worker);
    batch::register(worker);
    settings::register(worker);
    evaluate::register(worker);
    simulate::register(worker);
}
