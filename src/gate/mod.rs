//! The gate: `approval::gate`, the pre-trigger hook that answers continue,
//! deny or hold for every call (`architecture/contract.md` § The gate).
//!
//! * [`judge`] — the answer as a pure function of input, settings and rules;
//!
//! Continue and deny read the in-memory settings and the compiled rules: no
//! engine round trip. The gate never returns a handler error: every failure
//! is an explicit deny. On hold: idempotency check, soft session context
//! under a budget, durable write before answering, `pending-created` after.

mod judge;
mod live;
mod review;

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Map, Value};
use tokio::sync::watch;

use crate::bindings::durable::{self as binding, DurableBinding, Status};
use crate::config::{ApprovalConfig, ReviewerConfig, Snapshot};
use crate::edits::store::Used;
use crate::edits::EDIT_RULE;
use crate::engine::CallError;
use crate::functions::register_hook;
use crate::hook::budget::Deadline;
use crate::hook::record;
use crate::hook::{deny, parse_hook_input, HookCall, HookInput, HookOutput};
use crate::pending::{HoldLimits, RecordKind, Written};
use crate::policy::{Call, CompiledRules, CompiledSettings, Readings, Runs};
use crate::provenance::{DecidedBy, DecidedVia, LogRecord};
use crate::review::Reviewed;
use crate::settings::Known;
use crate::terms::Mode;
use crate::worker::Worker;

pub(crate) use judge::{ids_are_valid, judge_in_turn, judge_mediated};
pub use judge::{judge, judge_passing_over, secret_in_ids, AskHold, Judgement, Spend};
pub(crate) use judge::{secret_id_reason, settings_unknown, GATE_UNAVAILABLE, SECRET_IN_ID};

/// `approval::gate`.
pub(crate) const ID: &str = binding::GATE_ID;

/// How long a cold session's settings read may take.
const SETTINGS_BUDGET: Duration = Duration::from_millis(2000);
/// How long the session's durable grants may take to read, when a root
/// asked for lies outside the turn's own.
pub(crate) const GRANTS_BUDGET: Duration = Duration::from_millis(1500);
/// Time kept for the durable write of a hold.
const WRITE_RESERVE: Duration = Duration::from_millis(1500);

/// How long finding the harness's generation may take when a call is a
/// subscription control.
const GENERATION_BUDGET: Duration = Duration::from_millis(1500);

/// Whether `function_id` is an agent's subscription control that the
/// harness mediates: today's harness (generation 2) makes
/// `engine::register_trigger` / `engine::unregister_trigger` of a turn a
/// subscription owned by the session instead of handing it to the engine.
/// Any doubt (no harness found, another generation, the lookup failed or
/// ran out of time) answers false, and the `bindings` guard refuses them.
/// Looked up afresh for each such call (they are rare), never from the
/// folder plane's kept answer: a harness replaced by one that hands the
/// calls to the engine must never find them let through.
pub(crate) async fn subscriptions_mediated(
    worker: &Worker,
    function_id: &str,
    deadline: Deadline,
) -> bool {
    if !crate::policy::is_subscription_control(function_id) {
        return false;
    }
    let budget = deadline.cap(GENERATION_BUDGET, WRITE_RESERVE);
    matches!(
        tokio::time::timeout(budget, worker.engine.harness_generation()).await,
        Ok(Ok(Some(crate::engine::Generation::G2)))
    )
}

/// The gate.
pub(crate) async fn gate(worker: &Worker, input: Value) -> HookOutput {
    let deadline = Deadline::hook();
    let input = match parse_hook_input(input) {
        Ok(input) => input,
        Err(_) => {
            tracing::warn!("malformed pre_trigger hook input; denying");
            return deny(
                "Permission denied by policy: approval-gate received a malformed pre_trigger hook input; the call is denied",
            );
        }
    };
    let Some(call) = input.call.as_ref() else {
        return deny(judge::NO_CALL);
    };
    // An id that holds a secret: denied before the session's settings or
    // grants are read (their keys are the ids), nothing written (§26.5).
    if let Some(field) = secret_in_ids(&input, call) {
        tracing::warn!(
            field,
            decision = "deny",
            rule = SECRET_IN_ID,
            "an id of the call holds what looks like a secret; denied, nothing recorded"
        );
        let out = deny(secret_id_reason(field));
        let config = worker.config.load();
        log_secret_id_verdict(worker, &config.config, &input, call);
        return out;
    }
    let known = if ids_are_valid(&input, call) {
        // A live record under the key decides alone (§26.1).
        if let Some(record) = worker.pending.get(&input.session_id, &call.id) {
            let (out, rule) = live::answer(worker, &input, call, &record, deadline).await;
            let config = worker.config.load();
            log_verdict(
                worker,
                &config.config,
                &input,
                call,
                &out,
                Some(rule),
                false,
            );
            return out;
        }
        let budget = deadline.cap(SETTINGS_BUDGET, WRITE_RESERVE);
        match worker.settings.known(&input.session_id, budget).await {
            Ok(known) => known,
            Err(err) => {
                tracing::warn!(session_id = %input.session_id, function_call_id = %call.id, function_id = %call.function_id, error = %err, decision = "deny", rule = GATE_UNAVAILABLE, "session settings unknown; denying");
                let out = deny(settings_unknown(
                    &input.session_id,
                    &call.function_id,
                    err.code(),
                ));
                let config = worker.config.load();
                log_verdict(
                    worker,
                    &config.config,
                    &input,
                    call,
                    &out,
                    Some(GATE_UNAVAILABLE),
                    false,
                );
                return out;
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
    let budget = deadline.cap(GRANTS_BUDGET, WRITE_RESERVE);
    let turn = turn_with_durable_grants(
        worker,
        &input.session_id,
        &call.function_id,
        call.arguments.as_ref(),
        input.metadata.as_ref(),
        budget,
    )
    .await;
    let turn = turn.as_ref().or(input.metadata.as_ref());
    let readings = read_commands(
        worker,
        settings,
        &snapshot.rules,
        &call.function_id,
        call.arguments.as_ref(),
    )
    .await;
    let subscriptions = subscriptions_mediated(worker, &call.function_id, deadline).await;
    // Grants whose use could not be written: judged again without them.
    let mut passed_over = Vec::new();
    loop {
        match judge_mediated(
            &input,
            settings,
            &snapshot.rules,
            &passed_over,
            turn,
            Some(&readings),
            subscriptions,
        ) {
            Judgement::Continue { rule, spend } => {
                if let Some(spend) = spend {
                    if !spend_use(worker, &input, call, spend, deadline).await {
                        passed_over.push(spend.grant);
                        continue;
                    }
                }
                tracing::debug!(session_id = %input.session_id, function_call_id = %call.id, function_id = %call.function_id, decision = "continue", rule, "gate");
                let out = HookOutput::Continue;
                log_verdict(worker, &snapshot.config, &input, call, &out, rule, false);
                return out;
            }
            Judgement::Deny { reason, rule } => {
                tracing::debug!(session_id = %input.session_id, function_call_id = %call.id, function_id = %call.function_id, decision = "deny", rule, "gate");
                let out = deny(reason);
                log_verdict(worker, &snapshot.config, &input, call, &out, rule, false);
                return out;
            }
            Judgement::Hold {
                ask,
                by_default,
                rule,
            } => {
                // A human's edit of this very call (§28): its one-shot
                // grant turns the hold into continue. Never in the lockdown,
                // and never past a protected path (§29: no grant passes it).
                let protected =
                    ask.is_some_and(|a| a.rule_id == crate::policy::PROTECTED_PATH_RULE);
                if !snapshot.rules.is_lockdown() && !protected {
                    if let Some(made_on) = use_edit(worker, &input, call, deadline).await {
                        tracing::info!(session_id = %input.session_id, function_call_id = %call.id, function_id = %call.function_id, decision = "continue", rule = EDIT_RULE, made_on = %made_on, "the call continues on a human's edit");
                        log_edit_use(worker, &snapshot.config, &input, call);
                        return HookOutput::Continue;
                    }
                }
                let fallback = if snapshot.rules.is_lockdown() {
                    "lockdown"
                } else {
                    crate::pending::NO_MATCH_HOLD
                };
                let rule = ask.map(|a| a.rule_id).or(rule).unwrap_or(fallback);
                let limits = ask.map_or_else(HoldLimits::default, |a| HoldLimits {
                    timeout_ms: a.timeout_ms,
                    escalate_after_ms: a.escalate_after_ms,
                });
                let reviewer = snapshot.config.reviewer_for(by_default, settings.mode);
                // The path an approver must see: judged again (holds only).
                let protected = (rule == crate::policy::PROTECTED_PATH_RULE)
                    .then(|| {
                        snapshot.rules.protected().judge(
                            &call.function_id,
                            call.arguments.as_ref(),
                            turn,
                            &readings,
                        )
                    })
                    .flatten()
                    .map(Into::into);
                let (out, met) = hold(
                    worker,
                    &input,
                    call,
                    Held {
                        limits,
                        config: &snapshot.config,
                        rule,
                        reviewer,
                        mode: settings.mode,
                        readings: &readings,
                        protected,
                    },
                    deadline,
                )
                .await;
                // A continue, or a deny with the reviewer's envelope, is the
                // reviewer's verdict; any other deny is the gate's budget.
                let by_reviewer = reviewer.is_some()
                    && met.is_none()
                    && matches!(
                        out,
                        HookOutput::Continue
                            | HookOutput::Deny {
                                details: Some(_),
                                ..
                            }
                    );
                let logged = match (met, &out) {
                    (Some(met), _) => met,
                    (None, HookOutput::Hold) => rule,
                    _ if by_reviewer => "reviewer",
                    _ => GATE_UNAVAILABLE,
                };
                log_verdict(
                    worker,
                    &snapshot.config,
                    &input,
                    call,
                    &out,
                    Some(logged),
                    by_reviewer,
                );
                return out;
            }
        }
    }
}

/// Reads the call's command fields when a command rule or grant applies to
/// its function — off this thread, under the reading budget — and nothing
/// otherwise (`architecture/contract.md` § Commands: other calls never
/// parse).
pub(crate) async fn read_commands(
    worker: &Worker,
    settings: &CompiledSettings,
    rules: &CompiledRules,
    function_id: &str,
    arguments: Option<&Value>,
) -> Readings {
    let call = Call {
        function_id,
        arguments,
    };
    let needs = crate::policy::needs(settings, rules, &call);
    if needs.is_empty() {
        return Readings::none();
    }
    let models = worker.commands.read_all(needs.sources()).await;
    needs.with_models(models)
}

/// A held `shell::*` call's `command` (with its `args`), read off this
/// thread for its record (holds only, never continue or deny); nothing for
/// other calls.
async fn record_commands(worker: &Worker, call: &HookCall) -> Readings {
    let needs = crate::policy::Needs::for_record(&call.function_id, call.arguments.as_ref());
    if needs.is_empty() {
        return Readings::none();
    }
    let models = worker.commands.read_all(needs.sources()).await;
    needs.with_models(models)
}

/// Queues the decision log's record of a verdict when the log is on: an
/// in-memory push, after the answer is decided; the sending happens on the
/// log's own task (`architecture/contract.md` § Provenance).
fn log_verdict(
    worker: &Worker,
    config: &ApprovalConfig,
    input: &HookInput,
    call: &HookCall,
    out: &HookOutput,
    rule: Option<&str>,
    by_reviewer: bool,
) {
    crate::metrics::verdict(out.as_str(), rule);
    worker.pending.decision_log().push(config, || {
        let at = crate::time::now_ms();
        LogRecord {
            decision: out.as_str().to_string(),
            rule_id: rule.map(str::to_string),
            decided_by: DecidedBy::gate_verdict(by_reviewer, at),
            session_id: input.session_id.clone(),
            function_call_id: call.id.clone(),
            function_id: call.function_id.clone(),
            at,
        }
    });
}

/// The decision log's record of a call denied for a secret in its ids
/// (§26.5): every id passed through the detectors, so the log's consumer
/// never receives the secret.
fn log_secret_id_verdict(
    worker: &Worker,
    config: &ApprovalConfig,
    input: &HookInput,
    call: &HookCall,
) {
    crate::metrics::verdict("deny", Some(SECRET_IN_ID));
    let shown = |id: &str| crate::redact::redact_text(id).into_owned();
    worker.pending.decision_log().push(config, || {
        let at = crate::time::now_ms();
        LogRecord {
            decision: "deny".to_string(),
            rule_id: Some(SECRET_IN_ID.to_string()),
            decided_by: DecidedBy::gate_verdict(false, at),
            session_id: shown(&input.session_id),
            function_call_id: shown(&call.id),
            function_id: shown(&call.function_id),
            at,
        }
    });
}

/// Uses the one-shot grant of a human's edit that covers this call, if
/// any (`architecture/contract.md` § Edit, then approve): the held call the
/// edit was made on, when the call continues on it. A grant that cannot be
/// read or claimed in time does not apply: the call is held.
async fn use_edit(
    worker: &Worker,
    input: &HookInput,
    call: &HookCall,
    deadline: Deadline,
) -> Option<String> {
    let digest = crate::pending::digest(&call.function_id, call.arguments.as_ref());
    let budget = deadline.cap(GRANTS_BUDGET, WRITE_RESERVE);
    let taken = tokio::time::timeout(
        budget,
        worker
            .edits
            .take(&input.session_id, &call.function_id, &digest, &call.id),
    )
    .await;
    match taken {
        Ok(Ok(Used::Claimed { made_on } | Used::Again { made_on })) => Some(made_on),
        Ok(Ok(Used::Nothing)) => None,
        Ok(Err(err)) => {
            tracing::warn!(session_id = %input.session_id, function_call_id = %call.id, function_id = %call.function_id, error = %err, "edit grants unreadable; the call is held");
            None
        }
        Err(_) => {
            tracing::warn!(session_id = %input.session_id, function_call_id = %call.id, function_id = %call.function_id, "edit grants not read in time; the call is held");
            None
        }
    }
}

/// The decision log's record of a call that continued on an edit's grant:
/// a human decided it (`{kind: "human", via: "edit"}`).
fn log_edit_use(worker: &Worker, config: &ApprovalConfig, input: &HookInput, call: &HookCall) {
    worker.pending.decision_log().push(config, || {
        let at = crate::time::now_ms();
        LogRecord {
            decision: "continue".to_string(),
            rule_id: Some(EDIT_RULE.to_string()),
            decided_by: DecidedBy::by(DecidedVia::Edit, None, at),
            session_id: input.session_id.clone(),
            function_call_id: call.id.clone(),
            function_id: call.function_id.clone(),
            at,
        }
    });
}

/// Writes one use of a uses-bounded grant through the settings store before
/// the call continues (`architecture/contract.md` § Settings). Whether the
/// grant still applies: false when the use could not be written in time, or
/// no use is left — the grant then does not apply (fail closed).
async fn spend_use(
    worker: &Worker,
    input: &HookInput,
    call: &HookCall,
    spend: Spend<'_>,
    deadline: Deadline,
) -> bool {
    let budget = deadline.cap(SETTINGS_BUDGET, WRITE_RESERVE);
    let spent = tokio::time::timeout(
        budget,
        worker
            .settings
            .spend(&input.session_id, spend.grant.list, spend.entry),
    )
    .await;
    match spent {
        Ok(Ok(true)) => true,
        Ok(Ok(false)) => {
            tracing::info!(session_id = %input.session_id, function_call_id = %call.id, function_id = %call.function_id, grant = %spend.entry.function_id, "grant has no use left; judging without it");
            false
        }
        Ok(Err(err)) => {
            tracing::warn!(session_id = %input.session_id, function_call_id = %call.id, function_id = %call.function_id, grant = %spend.entry.function_id, error = %err, "grant use not written; judging without it");
            false
        }
        Err(_) => {
            tracing::warn!(session_id = %input.session_id, function_call_id = %call.id, function_id = %call.function_id, grant = %spend.entry.function_id, "grant use not written in time; judging without it");
            false
        }
    }
}

/// What a hold is made under.
struct Held<'a> {
    /// The deadlines of the rule that holds it.
    limits: HoldLimits,
    /// The configuration in force.
    config: &'a ApprovalConfig,
    /// The rule (or ladder step) that holds it.
    rule: &'a str,
    /// The reviewer to ask first (the default hold in a reviewed mode).
    reviewer: Option<&'a ReviewerConfig>,
    /// The session's mode.
    mode: Mode,
    /// The call's command fields as the ladder read them.
    readings: &'a Readings,
    /// The protected path the call names, when that holds it.
    protected: Option<crate::policy::ProtectedNote>,
}

/// The hold path: idempotent on redelivery, context under a budget, the
/// reviewer asked when one applies (its allow continues, its deny denies),
/// the record written durably before the answer — all before the deadline,
/// or the call is denied and nothing is left behind. A record found under
/// the key meanwhile decides as at the gate's entry (§26.1): the answer,
/// and the rule it names.
async fn hold(
    worker: &Worker,
    input: &HookInput,
    call: &HookCall,
    held: Held<'_>,
    deadline: Deadline,
) -> (HookOutput, Option<&'static str>) {
    let out = hold_unless_met(worker, input, call, held, deadline).await;
    match out {
        Ok(out) => (out, None),
        Err(record) => {
            let (out, rule) = live::answer(worker, input, call, &record, deadline).await;
            (out, Some(rule))
        }
    }
}

/// [`hold`]'s steps; `Err` with the live record found under the key.
async fn hold_unless_met(
    worker: &Worker,
    input: &HookInput,
    call: &HookCall,
    held: Held<'_>,
    deadline: Deadline,
) -> Result<HookOutput, Arc<crate::pending::PendingRecord>> {
    let Held {
        limits,
        config,
        rule,
        reviewer,
        mode,
        readings,
        protected,
    } = held;
    let (sid, cid) = (input.session_id.as_str(), call.id.as_str());
    if let Some(record) = worker.pending.get(sid, cid) {
        return Err(record);
    }
    let budget = deadline.cap(record::SESSION_BUDGET, WRITE_RESERVE);
    let mut fetched = None;
    let mut reviewed = None;
    if let Some(reviewer) = reviewer {
        // One review per call, by its identity (§26.1): a redelivery waits
        // for the first one's slot; another call under the same id is
        // reviewed on its own.
        let slot = worker.reviews.slot(live::identity(input, call));
        let answer = slot
            .get_or_init(|| async {
                let context =
                    record::session_context(&worker.engine, &worker.lineage, sid, budget).await;
                let answer =
                    review::review(worker, input, call, reviewer, mode, &context, deadline).await;
                fetched = Some(context);
                answer
            })
            .await;
        match answer {
            Reviewed::Continue(_) => return Ok(HookOutput::Continue),
            Reviewed::Deny {
                reason, envelope, ..
            } => {
                return Ok(HookOutput::Deny {
                    reason: reason.clone(),
                    details: Some(envelope.clone()),
                })
            }
            Reviewed::Hold(review) => reviewed = Some(Box::new(review.clone())),
        }
    }
    let context = match fetched {
        Some(context) => context,
        None => {
            let budget = deadline.cap(record::SESSION_BUDGET, WRITE_RESERVE);
            record::session_context(&worker.engine, &worker.lineage, sid, budget).await
        }
    };
    let mut record = record::build_record(input, call, RecordKind::Function, context);
    let arguments = record::whole_arguments(call);
    // What held it, for a batch to tell a floor from a plain hold (§26.4).
    let held_by = match reviewed {
        Some(_) => crate::pending::REVIEWER_HOLD,
        None => rule,
    };
    record.held_by_rule = Some(held_by.to_string());
    record.review = reviewed;
    // What an approver reads of the command: the `shell::*` call's
    // `command` (read now: holds only), else the `runs` fields the ladder
    // read; a suggested grant only for the former.
    let shell = record_commands(worker, call).await;
    let shown = if shell.is_empty() { readings } else { &shell };
    record.runs = Runs::of(shown.models()).map(Box::new);
    record.suggested_prefix = crate::policy::suggested_prefix(shell.models(), config.suggested());
    record.protected_path = protected.map(Box::new);
    // The deadlines of the decision's rule, or the configuration it was
    // made under, counted from when the record is built.
    record::set_deadlines(&mut record, limits, config);
    let lock = worker.pending.lock(sid, cid).await;
    if let Some(record) = lock.get() {
        return Err(record);
    }
    let written = tokio::time::timeout_at(deadline.instant(), lock.write(record, arguments)).await;
    let Ok(written) = written else {
        lock.discard().await;
        tracing::warn!(session_id = sid, function_call_id = cid, function_id = %call.function_id, decision = "deny", "hold not recorded within the hook's budget; denying");
        return Ok(deny(format!(
            "Approval gate unavailable (retry later): approval-gate could not record the held call to {} in time; the call is denied rather than held without a record",
            call.function_id
        )));
    };
    Ok(match written {
        Err(err) => {
            tracing::warn!(session_id = sid, function_call_id = cid, function_id = %call.function_id, error = %err, "hold not recorded; denying");
            deny(format!(
                "Approval gate unavailable (retry later): approval-gate could not record the held call to {} ({}); the call is denied rather than held without a record",
                call.function_id,
                err.code()
            ))
        }
        Ok(Written::DuplicateWon) => HookOutput::Hold,
        Ok(Written::New) => {
            tracing::info!(session_id = sid, function_call_id = cid, function_id = %call.function_id, decision = "hold", rule, "call held");
            HookOutput::Hold
        }
    })
}

/// Keeps a durable binding (the gate's, the watch's) in place for as long
/// as the worker runs, starting from boot's check (`first`): a check every
/// `binding_check_interval_ms`, or sooner when woken — by a reconnect, or by
/// a new configuration on `changes` (subscribed before boot's check, so none
/// is missed), whose `gate_priority` the check then applies (new binding
/// before the old one goes) and whose interval the next wait uses. Failed
/// checks are retried with backoff. Ends when the connection ends for good.
pub(crate) async fn guard_binding(
    worker: Arc<Worker>,
    which: fn(&Worker) -> &DurableBinding,
    first: Result<Status, CallError>,
    mut changes: watch::Receiver<Arc<Snapshot>>,
) {
    let mut retry = binding::FIRST_RETRY;
    let mut outcome = first;
    // Said once per stretch of being parked, not at every check.
    let mut said_parked = false;
    loop {
        let durable = which(&worker);
        let spec = *durable.spec();
        let config = worker.config.load();
        let interval = Duration::from_millis(config.config.binding_check_interval_ms);
        let wait = match &outcome {
            Ok(status) if status.gated => {
                said_parked = false;
                retry = binding::FIRST_RETRY;
                interval
            }
            Ok(status) if status.parked => {
                if !said_parked {
                    tracing::warn!(trigger_type = spec.trigger_type, function_id = spec.function_id, id = status.id, "the harness's hook type does not exist; the binding is parked until it appears");
                    said_parked = true;
                }
                retry = binding::FIRST_RETRY;
                interval
            }
            Ok(status) => {
                tracing::error!(
                    function_id = spec.function_id,
                    id = status.id,
                    "the durable binding is not active: calls are not covered; checking again"
                );
                binding::backoff(&mut retry, interval)
            }
            Err(err) => {
                let mut status = durable.status();
                status.gated = false;
                durable.set(status);
                tracing::error!(function_id = spec.function_id, error = %err, "the durable binding could not be checked or made: calls may not be covered; retrying");
                binding::backoff(&mut retry, interval)
            }
        };
        tokio::select! {
            _ = tokio::time::sleep(wait) => {}
            _ = durable.woken() => {}
            // A closed channel (never, while the worker lives) disables
            // this branch rather than spin.
            Ok(()) = changes.changed() => {}
        }
        if worker.engine.iii().fatal_error().is_some() {
            return;
        }
        if worker.engine.iii().get_connection_state()
            != iii_sdk::runtime::IIIConnectionState::Connected
        {
            // A check over a connection that is down waits for its calls to
            // time out (10 s) holding the one-check lock, which the
            // auxiliary connection of an engine restart then waits behind
            // (§26.6); the reconnect wakes this guard once it is back.
            continue;
        }
        let config = worker.config.load();
        outcome = durable.ensure(&worker.engine, &config.config).await;
    }
}

/// Registers `approval::gate` (raw input, typed schema published).
pub(crate) fn register(worker: &Arc<Worker>) {
    register_hook(
        worker,
        ID,
        "Pre-trigger hook: decides continue, deny or hold for one function call. Harness only.",
        |worker, input| async move {
            let started = std::time::Instant::now();
            let out = gate(&worker, input).await;
            crate::metrics::gate_latency(out.as_str(), started.elapsed());
            out
        },
    );
}

/// A widening root is judged against the turn's own root and its granted
/// roots (`architecture/contract.md` § A widening root). The turn's
/// metadata carries its root and the grants it was sent with; the harness's
/// durable grants of the session are granted roots too, read only when a
/// root asked for lies outside the metadata's (so no other call pays for
/// it). Returns the metadata with those grants added to `fs_scope.grants`
/// (the scope made when only the brief's `working_dir` names the root);
/// `None` (judge with the input's metadata) when nothing widens, the turn
/// has no root of its own, or the grants cannot be read in time — the call
/// is then held, and a human decides.
pub(crate) async fn turn_with_durable_grants(
    worker: &Worker,
    session_id: &str,
    function_id: &str,
    arguments: Option<&Value>,
    metadata: Option<&Map<String, Value>>,
    budget: Duration,
) -> Option<Map<String, Value>> {
    crate::policy::widening_root(function_id, arguments, metadata)?;
    let mut metadata = metadata?.clone();
    // The turn's own root: its scope's, else the brief's session workspace.
    let own = metadata
        .get("fs_scope")
        .and_then(|scope| scope.get("root"))
        .or_else(|| metadata.get("working_dir"));
    own?.as_str()?;
    let scope = metadata
        .entry("fs_scope")
        .or_insert_with(|| Value::Object(Map::new()))
        .as_object_mut()?;
    let roots = match worker.folders.granted_roots(session_id, budget).await {
        Ok(Some(roots)) if !roots.is_empty() => roots,
        Ok(_) => return None,
        Err(err) => {
            tracing::warn!(session_id, function_id, error = %err, "durable grants unreadable; a widening root waits for a human");
            return None;
        }
    };
    let mut grants: Vec<Value> = match scope.remove("grants") {
        Some(Value::Array(grants)) => grants,
        _ => Vec::new(),
    };
    grants.extend(roots.into_iter().map(Value::String));
    scope.insert("grants".into(), Value::Array(grants));
    Some(metadata)
}
