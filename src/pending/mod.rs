//! The held calls (`architecture/contract.md` § The pending inbox, § Storage):
//! their durable store, their index, and the trigger types that announce
//! them. Below every surface: the gate and the grant watch write here, the
//! release path claims and settles here, the inbox surface (`crate::inbox`)
//! reads here.
//!
//! * pure: [`record`] (the record), [`compact`] (its in-memory JSON),
//!   [`index`] (by key, session, turn, list order and deadline), [`cursor`],
//!   [`deadline`] (when a hold is escalated and expires);
//! * [`store`] — state as the source of truth, the index, the emit gate; the
//!   one place that emits `pending-created`, `pending-resolved` and
//!   `pending-escalated`; `KeyLock` (the only way to write a key) and
//!   `Claim` (a release's guard);
//! * [`events`] — the trigger types, their bindings and the fan-out.

mod compact;
pub(crate) mod cursor;
mod deadline;
mod events;
pub(crate) mod index;
mod record;
mod removed;
pub(crate) mod store;
mod unreadable;

pub use deadline::HoldLimits;
pub(crate) use deadline::{deadlines, timeout_denial, timeout_ms};
pub(crate) use events::Outcome;
pub use events::{PENDING_CREATED, PENDING_ESCALATED, PENDING_RESOLVED};
pub(crate) use record::ShownRecord;
pub(crate) use record::{AccessRequest, Metadata, NoteDecision, RecordKey, ReleaseNote, Via};
pub use record::{GrantRequest, PendingRecord, RecordKind, SortKey};
pub(crate) use removed::Removal;
pub use store::{all_scopes, bucket_scope, state_key, LOAD_CONCURRENCY};
pub(crate) use store::{Claim, PendingStore, Purged, StoreError, Take, WholeArguments, Written};
pub(crate) use unreadable::UnreadableRecord;
