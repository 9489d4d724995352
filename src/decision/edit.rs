//! `approval::resolve` with `decision: "edit"` (`architecture/contract.md`
//! § Edit, then approve): a human fixes the held call instead of only
//! allowing or denying it.
//!
//! The harness cannot change a held call's arguments, so the edit is done
//! in the open, in this order:
//! 1. the edited call is judged read-only with the gate's own ladder; a
//!    deny (a deny rule, a guard, an id check) or the lockdown refuses the
//!    edit, as do arguments that still hold a redaction mark and folder
//!    prompts — the held call stays held;
//! 2. the one-shot grant is written (`crate::edits`);
//! 3. the held call is denied through the one release path, the denial
//!    giving the model the call to make instead;
//! 4. unless the harness answered `resolved: true`, the grant is removed.

use serde_json::{Map, Value};

use super::resolve::{operator_reason, response, ResolveRequest, ResolveResponse};
use crate::edits::{self, EditGrant, Refusal};
use crate::error::ApprovalError;
use crate::gate::Judgement;
use crate::hook::{HookCall, HookInput};
use crate::pending::{digest, ReleaseVia};
use crate::policy::{harness_stamps, PROTECTED_PATH_RULE, STAMP};
use crate::provenance::Caller;
use crate::release::{Answer, Request, Ruling};
use crate::settings::Known;
use crate::worker::Worker;

/// How long the edited call's session settings may take to read.
const SETTINGS_BUDGET: std::time::Duration = std::time::Duration::from_secs(5);

/// One human's edit of one held call, however it came (`approval::resolve`,
/// a link).
#[derive(Debug, Clone)]
pub(crate) struct Edit {
    /// The session (validated by the caller).
    pub session_id: String,
    /// The held call (validated by the caller).
    pub function_call_id: String,
    /// The revision (`pending_at`) the human saw, when the surface names
    /// one (a link): any other record is left alone.
    pub expected: Option<u64>,
    /// The edited call's arguments.
    pub arguments: Value,
    /// The human's reason, told to the model before the call to make.
    pub reason: Option<String>,
    /// How long the grant lives (default and cap: [`edits::ttl`]).
    pub ttl_ms: Option<u64>,
    /// How the decision came.
    pub via: ReleaseVia,
    /// Who carried it.
    pub caller: Option<Caller>,
}

impl Edit {
    /// The edit an `approval::resolve` request carries.
    pub(crate) fn of(request: ResolveRequest, arguments: Value, caller: Option<Caller>) -> Edit {
        Edit {
            session_id: request.session_id,
            function_call_id: request.function_call_id,
            expected: None,
            arguments,
            reason: operator_reason(&request.reason),
            ttl_ms: request.ttl_ms,
            via: ReleaseVia::Resolve,
            caller,
        }
    }
}

/// Carries an edit through its four steps (the module doc).
pub(crate) async fn edit(worker: &Worker, edit: Edit) -> Result<ResolveResponse, ApprovalError> {
    let Edit {
        session_id,
        function_call_id,
        expected,
        arguments,
        reason,
        ttl_ms,
        via,
        caller,
    } = edit;
    let (sid, cid) = (session_id.as_str(), function_call_id.as_str());
    if !arguments.is_object() {
        return Err(ApprovalError::InvalidPayload(
            "an edit's arguments must be an object".into(),
        ));
    }
    let Some(record) = worker.pending.get(sid, cid) else {
        return Ok(ResolveResponse::default());
    };
    if expected.is_some_and(|at| at != record.pending_at) {
        return Ok(ResolveResponse::default());
    }
    if record.kind.is_folder() {
        return Err(ApprovalError::InvalidPayload(
            "a folder-access prompt cannot be edited: allow it or deny it".into(),
        ));
    }
    if record.releasing {
        return Ok(ResolveResponse {
            releasing: Some(true),
            ..ResolveResponse::default()
        });
    }
    let snapshot = worker.config.load();
    let refuse = |why: Refusal| Err(ApprovalError::InvalidPayload(why.to_string()));
    let ttl = match edits::ttl(ttl_ms, snapshot.config.edit_ttl_max_ms) {
        Ok(ttl) => ttl,
        Err(why) => return refuse(why),
    };
    if let Some(mark) = crate::redact::mark_in(&arguments) {
        return refuse(Refusal::Mark(mark));
    }
    let function_id = record.function_id.clone();
    // 1. The edited call, judged as the gate would judge it, read-only,
    // in the turn's scope as far as the record knows it.
    let (judged, turn) = in_scope(&function_id, &arguments, record.fs_scope.as_ref());
    let input = HookInput {
        point: Some("pre_trigger".into()),
        session_id: sid.to_owned(),
        turn_id: record.turn_id.clone(),
        step: None,
        depth: record.depth,
        metadata: None,
        call: Some(HookCall {
            id: cid.to_owned(),
            function_id: function_id.clone(),
            arguments: Some(judged.clone()),
        }),
        result: None,
    };
    let known = worker
        .settings
        .known(sid, SETTINGS_BUDGET)
        .await
        .map_err(ApprovalError::from)?;
    let settings = match &known {
        Known::Stored(stored) => &stored.compiled,
        Known::Absent => &snapshot.defaults,
    };
    let readings = crate::gate::read_commands(
        worker,
        settings,
        &snapshot.rules,
        &function_id,
        Some(&judged),
    )
    .await;
    let judgement = crate::gate::judge_in_turn(
        &input,
        settings,
        &snapshot.rules,
        &[],
        turn.as_ref(),
        Some(&readings),
    );
    if let Some(why) = refusal(&judgement, snapshot.rules.is_lockdown()) {
        tracing::info!(session_id = sid, function_call_id = cid, function_id = %function_id, "edit refused: {}", crate::redact::redact_text(&why.to_string()));
        return refuse(why);
    }
    // 2. The grant, before anything else happens.
    let sent = edits::to_send(&function_id, &arguments);
    let digest = digest(&function_id, Some(&sent));
    let now = crate::time::now_ms();
    let grant = EditGrant {
        made_on: cid.to_owned(),
        function_id: function_id.clone(),
        digest: digest.clone(),
        expires_at: now.saturating_add(ttl),
        used_by: None,
    };
    worker.edits.add(sid, grant, now).await?;
    // 3. The denial, through the one release path.
    let to_model = edits::instead(&function_id, &sent, reason.as_deref());
    let shown = edits::instead(
        &function_id,
        &crate::redact::redact(&sent),
        reason.as_deref().map(crate::redact::redact_text).as_deref(),
    );
    let release = Request {
        session_id: sid.to_owned(),
        function_call_id: cid.to_owned(),
        expected: Some((record.pending_at, record.kind)),
        decision: Ruling::Edit { to_model, shown },
        via,
        caller,
    };
    // 4. The grant stays only if the harness took the denial; the decider
    // waits `resolve_wait_ms` at most, the check goes on after that.
    let releaser = worker.releaser.clone();
    let store = worker.edits.clone();
    let (session, made_on) = (sid.to_owned(), cid.to_owned());
    let carried = tokio::spawn(async move {
        let answer = releaser.release(release, None).await;
        if !answer.confirmed() {
            match store.remove_unused(&session, &made_on, Some(&digest)).await {
                Ok(_) => {
                    tracing::info!(session_id = %session, function_call_id = %made_on, "the edit's denial did not go through; its grant is removed")
                }
                Err(err) => {
                    tracing::warn!(session_id = %session, function_call_id = %made_on, error = %err, "the edit's denial did not go through, and its grant could not be removed; it ends with its TTL")
                }
            }
        }
        answer
    });
    let wait = worker.releaser.resolve_wait();
    match tokio::time::timeout(wait, carried).await {
        Ok(Ok(answer)) => response(answer),
        Ok(Err(_)) | Err(_) => response(Answer::Releasing),
    }
}

/// The edited call as the gate will see it when the model makes it, and
/// the turn's metadata to judge it in. The hook's turn metadata is not kept
/// on a record; what is kept is the harness's stamp of a call it stamps
/// (`fs_scope`: the turn's root and grants), and the harness stamps the
/// edited call the same way. So for such a call the stamp is put back into
/// the arguments and stands for the turn's scope: a relative path is then
/// read from the same root at the edit as at use. Any other call is judged
/// without a turn (`architecture/internals.md` § Edit, then approve).
fn in_scope(
    function_id: &str,
    arguments: &Value,
    stamp: Option<&crate::pending::Metadata>,
) -> (Value, Option<Map<String, Value>>) {
    let stamp = match (stamp, arguments) {
        (Some(stamp), Value::Object(_)) if harness_stamps(function_id) => stamp.to_map(),
        _ => return (arguments.clone(), None),
    };
    let mut judged = arguments.clone();
    if let Value::Object(map) = &mut judged {
        map.insert(STAMP.to_owned(), Value::Object(stamp.clone()));
    }
    let mut turn = Map::new();
    turn.insert(STAMP.to_owned(), Value::Object(stamp));
    (judged, Some(turn))
}

/// Whether the gate's judgement of the edited call refuses the edit: a
/// deny (a deny rule, a human-only guard, an id check), a hold in the
/// lockdown, or a protected path's hold (§29: no grant passes it, so the
/// edited call would be held again whatever the grant). Any other hold
/// (`widening_root` included: a grant passes it, §28.2) or a continue lets
/// the edit go on.
fn refusal(judgement: &Judgement<'_>, lockdown: bool) -> Option<Refusal> {
    match judgement {
        Judgement::Deny { reason, rule } => Some(Refusal::Denied {
            rule: rule.unwrap_or("deny").to_owned(),
            reason: reason.clone(),
        }),
        Judgement::Hold { .. } if lockdown => Some(Refusal::Lockdown),
        Judgement::Hold { ask: Some(ask), .. } if ask.rule_id == PROTECTED_PATH_RULE => {
            Some(Refusal::Protected)
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn rule_28_1_a_deny_or_the_lockdown_refuses_an_edit() {
        let deny = Judgement::Deny {
            reason: "Permission denied by policy: no".into(),
            rule: Some("no-rm"),
        };
        let hold = Judgement::Hold {
            ask: None,
            by_default: true,
            rule: None,
        };
        let go = Judgement::Continue {
            rule: None,
            spend: None,
        };
        let refused = refusal(&deny, false).expect("refused");
        assert!(refused.to_string().contains("rule no-rm"), "{refused}");
        assert_eq!(refusal(&hold, true), Some(Refusal::Lockdown));
        assert_eq!(refusal(&hold, false), None);
        assert_eq!(refusal(&go, false), None);
        let held_as = |rule_id| Judgement::Hold {
            ask: Some(crate::gate::AskHold {
                rule_id,
                timeout_ms: None,
                escalate_after_ms: None,
            }),
            by_default: false,
            rule: Some(rule_id),
        };
        assert_eq!(
            refusal(&held_as(PROTECTED_PATH_RULE), false),
            Some(Refusal::Protected)
        );
        assert_eq!(
            refusal(&held_as(crate::policy::WIDENING_ROOT_RULE), false),
            None,
            "a grant passes a widening root"
        );
        assert_eq!(refusal(&held_as("ask-deploy"), false), None);
    }

    #[test]
    fn rule_28_1_a_stamped_call_is_judged_in_the_scope_the_harness_stamped() {
        let stamp = crate::pending::Metadata::from(
            json!({"root": "/w/s1"})
                .as_object()
                .cloned()
                .unwrap_or_default(),
        );
        let edited = json!({"command": "cat secret/key", "fs_scope": {"root": "/"}});
        let (judged, turn) = in_scope("shell::run", &edited, Some(&stamp));
        assert_eq!(
            judged,
            json!({"command": "cat secret/key", "fs_scope": {"root": "/w/s1"}}),
            "the harness's stamp, never the edit's"
        );
        assert_eq!(
            turn.map(Value::Object),
            Some(json!({"fs_scope": {"root": "/w/s1"}}))
        );
        let plain = json!({"path": "README"});
        assert_eq!(
            in_scope("demo::echo", &plain, Some(&stamp)),
            (plain.clone(), None),
            "not a stamped call"
        );
        assert_eq!(
            in_scope("shell::run", &plain, None),
            (plain.clone(), None),
            "no stamp kept"
        );
    }
}
