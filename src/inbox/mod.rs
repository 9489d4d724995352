//! The pending inbox (`architecture/contract.md` § The pending inbox): the
//! held calls, their durable store, their index, and the trigger types that
//! announce them.
//!
//! * pure: [`record`] (the record), [`compact`] (its in-memory JSON),
//!   [`index`] (by key, session, turn and list order), [`cursor`];
//! * [`store`] — state as the source of truth, the index, the emit gate; the
//!   one place that emits `pending-created` and `pending-resolved`;
//! * [`events`] — the trigger types, their bindings and the fan-out;
//! * [`list`] — `approval::list-pending` and `approval::get-pending`.

mod compact;
pub(crate) mod cursor;
mod events;
pub(crate) mod index;
mod list;
mod record;
mod removed;
pub(crate) mod store;

use std::sync::Arc;

use crate::worker::Worker;

pub use events::{Outcome, PENDING_CREATED, PENDING_RESOLVED};
pub(crate) use list::{list_pending, ListPendingRequest, GET_ID, LIST_ID};
pub use record::{GrantRequest, Metadata, PendingRecord, RecordKey, RecordKind, SortKey};
pub(crate) use removed::Removal;
pub use store::{all_scopes, bucket_scope, state_key, LOAD_CONCURRENCY};
pub(crate) use store::{Claim, Written};

/// Registers the inbox reads.
pub(crate) fn register(worker: &Arc<Worker>) {
    list::register(worker);
}
