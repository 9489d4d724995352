//! A call that meets a live record under its key (`architecture/contract.md`
//! § One held call, one identity). The record decides alone, before the
//! ladder:
//!
//! * the same call, record pending → `hold`, nothing written (a redelivery);
//! * the same call, record releasing on an allow → `continue`, once per
//!   release, while the engine has two bindings of the gate (during a
//!   `gate_priority` change the new binding is made before the old one
//!   goes, and today's harness resumes a released call after the *first*
//!   holder only, so the second binding runs the gate again inside
//!   `execute`: a `hold` there would park the call after its record is
//!   gone, and strand the turn — harness issue #797); otherwise deny;
//! * another call under the same id (another turn, function or arguments),
//!   or a record too old to say → deny, led `Permission denied by policy:`,
//!   with a WARN; the record is untouched.

use std::time::Duration;

use crate::hook::budget::Deadline;
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
/// The rule they name for a released call let through by a second binding
/// of the gate.
pub(crate) const RELEASED: &str = "released";

/// How long the engine's list of bindings may take, of the hook's budget.
const BINDINGS_BUDGET: Duration = Duration::from_millis(1500);
/// Time kept after it for the answer.
const ANSWER_RESERVE: Duration = Duration::from_millis(500);

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
pub(crate) async fn answer(
    worker: &Worker,
    input: &HookInput,
    call: &HookCall,
    record: &PendingRecord,
    deadline: Deadline,
) -> (HookOutput, &'static str) {
    let (sid, cid) = (input.session_id.as_str(), call.id.as_str());
    match identity(input, call).meets(record) {
        Meeting::Same if !worker.pending.is_releasing(record) => {
            tracing::debug!(session_id = sid, function_call_id = cid, function_id = %call.function_id, decision = "hold", "a redelivered call finds its own record");
            (HookOutput::Hold, REDELIVERY)
        }
        Meeting::Same
            if second_binding(worker, deadline).await && worker.pending.pass_release(record) =>
        {
            tracing::info!(session_id = sid, function_call_id = cid, function_id = %call.function_id, decision = "continue", "a released call meets the gate's second binding; it runs on its release");
            (HookOutput::Continue, RELEASED)
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

/// Whether the engine has (at least) two bindings of the gate now: one,
/// but two for a moment while a replacement (a changed `gate_priority`)
/// makes the new binding before the old one goes, or until a check removes
/// a duplicate. A list that fails or comes too late says no: the call is
/// denied.
async fn second_binding(worker: &Worker, deadline: Deadline) -> bool {
    let budget = deadline.cap(BINDINGS_BUDGET, ANSWER_RESERVE);
    let listed = tokio::time::timeout(budget, worker.engine.registered_triggers()).await;
    match listed {
        Ok(Ok(triggers)) => {
            // Whoever made them: the worker's own (new before old), or an
            // operator's duplicate the next check removes.
            let spec = &crate::bindings::durable::GATE;
            triggers
                .iter()
                .filter(|t| {
                    t.function_id == spec.function_id && t.trigger_type == spec.trigger_type
                })
                .count()
                >= 2
        }
        Ok(Err(err)) => {
            tracing::warn!(error = %err, "the gate's bindings could not be listed; a released call delivered again is denied");
            false
        }
        Err(_) => {
            tracing::warn!("the gate's bindings were not listed in time; a released call delivered again is denied");
            false
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
