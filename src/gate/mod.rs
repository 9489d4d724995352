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
pub(crate) mod hook;
mod judge;
pub(crate) mod record;

use std::sync::Arc;

use serde_json::Value;

use crate::functions::register_hook;
use crate::inbox::{RecordKind, Written};
use crate::worker::Worker;
use hook::{deny, parse_hook_input, HookCall, HookInput, HookOutput};

pub use judge::{ids_are_valid, judge, Judgement};

/// `approval::gate`.
pub(crate) const ID: &str = "approval::gate";

/// The gate.
pub(crate) async fn gate(worker: &Worker, input: Value) -> HookOutput {
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
    let snapshot = worker.config.load();
    let cached = if ids_are_valid(&input, call) {
        worker.settings.cached(&input.session_id)
    } else {
        None
    };
    let settings = cached
        .as_ref()
        .map(|s| &s.compiled)
        .unwrap_or(&snapshot.defaults);
    match judge(&input, settings, &snapshot.rules) {
        Judgement::Continue { rule } => {
            tracing::debug!(session_id = %input.session_id, function_call_id = %call.id, function_id = %call.function_id, decision = "continue", rule, "gate");
            HookOutput::Continue
        }
        Judgement::Deny { reason, rule } => {
            tracing::debug!(session_id = %input.session_id, function_call_id = %call.id, function_id = %call.function_id, decision = "deny", rule, "gate");
            deny(reason)
        }
        Judgement::Hold => hold(worker, &input, call).await,
    }
}

/// The hold path: idempotent on redelivery, context under a budget, the
/// record written durably before the answer.
async fn hold(worker: &Worker, input: &HookInput, call: &HookCall) -> HookOutput {
    let (sid, cid) = (input.session_id.as_str(), call.id.as_str());
    if worker.inbox.get(sid, cid).is_some() {
        return HookOutput::Hold;
    }
    let context = record::session_context(&worker.engine, sid).await;
    let record = record::build_record(input, call, RecordKind::Function, context);
    let _lock = worker.inbox.lock(sid, cid).await;
    if worker.inbox.get(sid, cid).is_some() {
        return HookOutput::Hold;
    }
    match worker.inbox.write(record).await {
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
