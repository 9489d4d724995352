//! The held calls (`architecture/contract.md` § The pending inbox, § Storage):
//! their durable store, their index, and the trigger types that announce
//! them. Below every surface: the gate and the grant watch write here, the
//! release path claims and settles here, the inbox surface (`crate::inbox`)
//! reads here.
//!
//! * pure: [`record`] (the record), [`compact`] (its in-memory JSON),
//!   [`index`] (by key, session, turn, list order and deadline), [`cursor`],
//!   [`deadline`] (when a hold is escalated and expires);
//! * [`store`] — state as the source of truth, what is kept in memory
//!   behind one lock, the emit gate; the one place that emits
//!   `pending-created`, `pending-resolved` and `pending-escalated`;
//! * [`key_lock`] — `KeyLock`, the only way to write or remove a key;
//! * [`claim`] — `Claim` (a release's guard) and the releases under way;
//! * [`announce`] — the one announcer every exit calls (the event, the
//!   decision log record, the recent removals);
//! * [`load`] — boot's read of the buckets; [`bucket`] (PURE) — where a
//!   record is stored;
//! * [`events`] — the trigger types, their bindings and the fan-out;
//! * [`identity`] (PURE) — a call's identity, and how it meets the record
//!   under its key.

mod announce;
mod bucket;
mod claim;
mod compact;
pub(crate) mod cursor;
mod deadline;
mod events;
pub(crate) mod identity;
pub(crate) mod index;
mod key_lock;
mod load;
mod record;
mod removed;
pub(crate) mod store;
mod unreadable;

pub use bucket::{all_scopes, bucket_scope, state_key};
pub(crate) use claim::{Claim, Take};
pub use deadline::HoldLimits;
pub(crate) use deadline::{deadlines, timeout_denial, timeout_ms};
pub(crate) use events::Resolution;
pub use events::{PENDING_CREATED, PENDING_ESCALATED, PENDING_RESOLVED};
pub(crate) use identity::{digest, Identity, Meeting};
pub(crate) use key_lock::{Purged, Written};
pub use load::LOAD_CONCURRENCY;
pub(crate) use record::ShownRecord;
pub(crate) use record::{AccessRequest, Metadata, RecordKey, ReleaseNote, ReleaseVia, RulingKind};
pub use record::{GrantRequest, PendingRecord, RecordKind, SortKey};
pub(crate) use record::{NO_MATCH_HOLD, REVIEWER_HOLD};
pub(crate) use removed::Removal;
pub(crate) use store::{PendingStore, WholeArguments};
pub(crate) use unreadable::UnreadableRecord;

#[cfg(test)]
mod tests;
