//! The gate: `approval::gate`, the pre-trigger hook that answers continue,
//! deny or hold for every call (`architecture/contract.md` § The gate).
//!
//! * [`hook`] — the harness's hook protocol (shared with the grant watch);
//! * [`judge`] — the answer as a pure function of input, settings and rules;
//! * [`record`] — what a hold writes (shared with the grant watch);
//! * [`binding`] — the durable binding that makes a dead gate deny.
//!
//! Continue and deny read the in-memory settings and the compiled rules: no
//! engine round trip. The gate never returns a handler error: every failure
//! is an explicit deny. On hold: idempotency check, soft session context
//! under a budget, durable write before answering, `pending-created` after.

pub(crate) mod binding;
pub(crate) mod budget;
pub(crate) mod hook;
mod judge;
pub(crate) mod record;

use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;

use crate::config::ApprovalConfig;
use crate::functions::register_hook;
use crate::inbox::{HoldLimits, RecordKind, Written};
use crate::settings::Known;
use crate::worker::Worker;
use budget::Deadline;
use hook::{deny, parse_hook_input, HookCall, HookInput, HookOutput};

pub use judge::{ids_are_valid, judge, Judgement};
pub(crate) use judge::{settings_unknown, GATE_UNAVAILABLE};

/// `approval::gate`.
pub(crate) const ID: &str = "approval::gate";

/// How long a cold session's settings read may take.
const SETTINGS_BUDGET: Duration = Duration::from_millis(2000);
/// Time kept for the durable write of a hold.
const WRITE_RESERVE: Duration = Duration::from_millis(1500);

/// The gate.
pub(crate) async fn gate(worker: &Worker, input: Value) -> HookOutput {
    let deadline = Deadline::hook();
    let input = match parse_hook_input(input) {
        Ok(input) => input,
        Err(_) => {
            tracing::warn!("malformed pre_trigger hook input; denying");
            return deny(
                "approval-gate received a malformed pre_trigger hook input; the call is denied",
            );
        }
    };
    let Some(call) = input.call.as_ref() else {
        return deny(judge::NO_CALL);
    };
    let known = if ids_are_valid(&input, call) {
        let budget = deadline.cap(SETTINGS_BUDGET, WRITE_RESERVE);
        match worker.settings.known(&input.session_id, budget).await {
            Ok(known) => known,
            Err(err) => {
                tracing::warn!(session_id = %input.session_id, function_call_id = %call.id, function_id = %call.function_id, error = %err, decision = "deny", rule = GATE_UNAVAILABLE, "session settings unknown; denying");
                return deny(settings_unknown(
                    &input.session_id,
                    &call.function_id,
                    err.code(),
                ));
            }
        }
    } else {
        // The call is denied for its ids (or as human-only): no settings needed.
        Known::Absent
    };
    let snapshot = worker.config.load();
    let settings = match &known {
        Known::Stored(stored) => &stored.compiled,
        Known::Absent => &snapshot.defaults,
    };
    match judge(&input, settings, &snapshot.rules) {
        Judgement::Continue { rule } => {
            tracing::debug!(session_id = %input.session_id, function_call_id = %call.id, function_id = %call.function_id, decision = "continue", rule, "gate");
            HookOutput::Continue
        }
        Judgement::Deny { reason, rule } => {
            tracing::debug!(session_id = %input.session_id, function_call_id = %call.id, function_id = %call.function_id, decision = "deny", rule, "gate");
            deny(reason)
        }
        Judgement::Hold { limits } => {
            hold(worker, &input, call, limits, &snapshot.config, deadline).await
        }
    }
}

/// The hold path: idempotent on redelivery, context under a budget, the
/// record written durably before the answer — all before the deadline, or
/// the call is denied and nothing is left behind.
async fn hold(
    worker: &Worker,
    input: &HookInput,
    call: &HookCall,
    limits: HoldLimits,
    config: &ApprovalConfig,
    deadline: Deadline,
) -> HookOutput {
    let (sid, cid) = (input.session_id.as_str(), call.id.as_str());
    if worker.inbox.get(sid, cid).is_some() {
        return HookOutput::Hold;
    }
    let budget = deadline.cap(record::SESSION_BUDGET, WRITE_RESERVE);
    let context = record::session_context(&worker.engine, sid, budget).await;
    let mut record = record::build_record(input, call, RecordKind::Function, context);
    // The deadlines of the decision's rule, or the configuration it was
    // made under, counted from when the record is built.
    record::set_deadlines(&mut record, limits, config);
    let _lock = worker.inbox.lock(sid, cid).await;
    if worker.inbox.get(sid, cid).is_some() {
        return HookOutput::Hold;
    }
    let written = tokio::time::timeout_at(deadline.instant(), worker.inbox.write(record)).await;
    let Ok(written) = written else {
        worker.inbox.discard(sid, cid).await;
        tracing::warn!(session_id = sid, function_call_id = cid, function_id = %call.function_id, decision = "deny", "hold not recorded within the hook's budget; denying");
        return deny(format!(
            "approval-gate could not record the held call to {} in time; the call is denied rather than held without a record",
            call.function_id
        ));
    };
    match written {
        Err(err) => {
            tracing::warn!(session_id = sid, function_call_id = cid, function_id = %call.function_id, error = %err, "hold not recorded; denying");
            deny(format!(
                "approval-gate could not record the held call to {} ({}); the call is denied rather than held without a record",
                call.function_id,
                err.code()
            ))
        }
        Ok(Written::DuplicateWon) => HookOutput::Hold,
        Ok(Written::New) => {
            tracing::info!(session_id = sid, function_call_id = cid, function_id = %call.function_id, decision = "hold", rule = "no_match", "call held");
            HookOutput::Hold
        }
    }
}

/// Registers `approval::gate` (raw input, typed schema published).
pub(crate) fn register(worker: &Arc<Worker>) {
    register_hook(
        worker,
        ID,
        "Pre-trigger hook: decides continue, deny or hold for one function call. Harness only.",
        |worker, input| async move { gate(&worker, input).await },
    );
}
