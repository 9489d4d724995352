//! The pending inbox surface (`architecture/contract.md` § The pending
//! inbox): `approval::list-pending` and `approval::get-pending`, served from
//! the index of `crate::pending`; `get-pending` also reads the held call's
//! whole redacted arguments from their own key (contract §21.6).

mod list;

use std::sync::Arc;

use crate::worker::Worker;

pub(crate) use list::{list_pending, ListPendingRequest, Listed, GET_ID, LIST_ID};

/// Registers the inbox reads.
pub(crate) fn register(worker: &Arc<Worker>) {
    list::register(worker);
}
