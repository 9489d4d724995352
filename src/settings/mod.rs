//! Per-session approval settings (`architecture/contract.md` § Settings):
//! the record and its mutations ([`model`], pure) and the store with its
//! in-memory view ([`store`]). The gate reads them; the decision plane
//! changes them.

mod cache;
mod model;
pub(crate) mod store;

pub use model::{ApprovalSettings, Bounds, Entry, GrantList, GrantedBy};
// The record's mode, for the modules that read it with the record; the word
// itself lives in `terms`, shared with the rules.
pub use crate::terms::Mode;
pub(crate) use store::{event_key, Known, SettingsSource};
