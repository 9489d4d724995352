//! The function table: [`register_all`] reads like the contract's function
//! table (`architecture/contract.md` § Functions), and [`FUNCTION_IDS`] is
//! made of each function module's own `ID`.

use std::sync::Arc;

use crate::worker::Worker;
use crate::{config, console, decision, gate, grant_watch, health, inbox, lifecycle, links};

/// Registers every function of the worker, in the order of
/// `architecture/contract.md` § Functions.
pub(crate) fn register_all(worker: &Arc<Worker>) {
    gate::register(worker);
    grant_watch::register(worker);
    decision::register(worker);
    inbox::register(worker);
    lifecycle::register(worker);
    health::register(worker);
    links::register(worker);
    console::register(worker);
    config::identity::register(worker);
}

/// The ids [`register_all`] registers, in the contract's order.
pub const FUNCTION_IDS: &[&str] = &[
    gate::ID,
    grant_watch::ID,
    grant_watch::ALIAS_ID,
    decision::resolve::ID,
    decision::batch::ID,
    inbox::LIST_ID,
    inbox::GET_ID,
    decision::settings::SET_MODE_ID,
    decision::settings::ADD_ALWAYS_ALLOW_ID,
    decision::settings::REMOVE_ALWAYS_ALLOW_ID,
    decision::settings::APPROVE_ALWAYS_ID,
    decision::settings::GET_SETTINGS_ID,
    decision::settings::CLEAR_SETTINGS_ID,
    decision::evaluate::ID,
    decision::simulate::ID,
    lifecycle::SESSION_DELETED_ID,
    lifecycle::TURN_COMPLETED_ID,
    lifecycle::HARNESS_READY_ID,
    config::ID,
    decision::settings::ON_SETTINGS_CHANGE_ID,
    health::ID,
    links::PAGE_ID,
    links::DECIDE_ID,
    links::INBOX_ID,
    console::ID,
    config::identity::ID,
];
