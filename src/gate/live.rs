//! A call that meets a live record under its key (`architecture/contract.md`
//! § One held call, one identity). The record decides alone, before the
//! ladder:
//!
//! * the same call, record pending → `hold`, nothing written (a redelivery);
//! * the same call, record releasing → deny (no one may run it a second
//!   time on the one decision);
//! * another call under the same id (another turn, function or arguments),
//!   or a record too old to say → deny, led `Permission denied by policy:`,
//!   with a WARN; the record is untouched.

use crate::hook::{deny, HookCall, HookInput, HookOutput};
use crate::pending::{Identity, Meeting, PendingRecord};
use crate::terms::leads;
use crate::worker::Worker;

/// The rule the logs and the decision log name for a redelivery's hold.
pub(crate) const REDELIVERY: &str = "redelivery";
/// The rule they name for another call under a held call's id.
pub(crate) const CALL_ID_IN_USE: &str = "call_id_in_use";
/// The rule they name for a delivery of a call whose release is under way.
pub(crate) const RELEASE_UNDER_WAY: &str = "release_under_way";

/// The identity of the call a hook input carries.
pub(crate) fn identity(input: &HookInput, call: &HookCall) -> Identity {
    Identity::of(
        &input.session_id,
        &call.id,
        &input.turn_id,
        &call.function_id,
        call.arguments.as_ref(),
    )
}

/// What the gate answers a call that meets `record`, its key's live
/// record, and the rule it names.
pub(crate) fn answer(
    worker: &Worker,
    input: &HookInput,
    call: &HookCall,
    record: &PendingRecord,
) -> (HookOutput, &'static str) {
    let (sid, cid) = (input.session_id.as_str(), call.id.as_str());
    match identity(input, call).meets(record) {
        Meeting::Same if !worker.pending.is_releasing(record) => {
            tracing::debug!(session_id = sid, function_call_id = cid, function_id = %call.function_id, decision = "hold", "a redelivered call finds its own record");
            (HookOutput::Hold, REDELIVERY)
        }
        Meeting::Same => {
            tracing::warn!(session_id = sid, function_call_id = cid, function_id = %call.function_id, decision = "deny", "a call whose release is under way was delivered again; denying");
            (
                deny(release_under_way(cid, &call.function_id)),
                RELEASE_UNDER_WAY,
            )
        }
        meeting @ (Meeting::Other | Meeting::Unknown) => {
            tracing::warn!(session_id = sid, function_call_id = cid, function_id = %call.function_id, held_function_id = %record.function_id, known = meeting == Meeting::Other, decision = "deny", "another call arrived under the id of a held call; denying it and leaving the held call as it is");
            (deny(call_id_in_use(cid, &call.function_id)), CALL_ID_IN_USE)
        }
    }
}

/// The reason for another call under a held call's id.
pub(crate) fn call_id_in_use(function_call_id: &str, function_id: &str) -> String {
    format!(
        "{} call id {function_call_id} is already held for another call in this session, so this call to {function_id} is denied. Send it again under a new call id.",
        leads::POLICY
    )
}

/// The reason for a delivery of a call whose release is under way.
fn release_under_way(function_call_id: &str, function_id: &str) -> String {
    format!(
        "{} a decision on call {function_call_id} to {function_id} is already on its way; this delivery of it is denied.",
        leads::POLICY
    )
}
