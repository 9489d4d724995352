//! The pending inbox (`architecture/contract.md` § The pending inbox): the
//! held calls, their durable store, their index, and the trigger types that
//! announce them.
//!
//! * pure: [`record`] (the record), [`compact`] (its in-memory JSON),
//!   [`index`] (by key, session, turn, list order and deadline), [`cursor`],
//!   [`deadline`] (when a hold is escalated and expires);
//! * [`store`] — state as the source of truth, the index, the emit gate; the
//!   one place that emits `pending-created`, `pending-resolved` and
//!   `pending-escalated`;
//! * [`events`] — the trigger types, their bindings and the fan-out;
//! * [`list`] — `approval::list-pending` and `approval::get-pending`;
//! * [`timer`] — the one task that escalates and expires holds at their
//!   deadlines.

mod compact;
pub(crate) mod cursor;
mod deadline;
mod events;
pub(crate) mod index;
mod list;
mod record;
mod removed;
pub(crate) mod store;

use std::sync::Arc;

use crate::worker::Worker;

pub use deadline::HoldLimits;
pub(crate) use deadline::{deadlines, timeout_denial, timeout_ms};
pub use events::{Outcome, PENDING_CREATED, PENDING_ESCALATED, PENDING_RESOLVED};
pub(crate) use list::{list_pending, ListPendingRequest, GET_ID, LIST_ID};
pub use record::{
    AccessRequest, GrantRequest, Metadata, NoteDecision, PendingRecord, RecordKey, RecordKind,
    ReleaseNote, SortKey, Via,
};
pub(crate) use removed::Removal;
pub use store::{all_scopes, bucket_scope, state_key, LOAD_CONCURRENCY};
pub(crate) use store::{Claim, PendingStore, Purged, StoreError, Take, Written};

/// Registers the inbox reads.
pub(crate) fn register(worker: &Arc<Worker>) {
    list::register(worker);
}
