//! Per-session approval settings (`architecture/contract.md` § Settings):
//! the store with its in-memory view ([`store`]). The record and its
//! mutations are pure words of `crate::terms`, shared with the policy. The
//! gate reads the settings; the decision plane changes them.

mod cache;
pub(crate) mod store;

pub use crate::terms::{ApprovalSettings, Bounds, Entry, GrantList, GrantedBy};
pub(crate) use store::{event_key, Known, SettingsSource};
