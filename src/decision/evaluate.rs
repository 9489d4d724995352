//! `approval::evaluate` — the gate's ladder, read-only and explained
//! (`architecture/contract.md` § Evaluate): the verdict, the rule that
//! decided, every step considered, and the rule errors. Never writes, never
//! holds, never spends a grant's use.
//!
//! The gate and this function run the same ladder ([`decide_with`]); only
//! the trace is extra, and [`explain`] is the whole of the difference. In
//! the lockdown (no configuration has ever compiled) every call but the
//! human-only surface answers `needs_approval` with `rule_id: "lockdown"`
//! and a `lockdown` trace step.
//!
//! # Format
//!
//! In: `{ session_id, function_id, arguments?, metadata? }` (`metadata`: the
//! calling turn's, as the hook input carries it; its `fs_scope` is what a
//! widening root asked for by any call is judged against)
//! Out: `{ verdict: "allow"|"deny"|"needs_approval", rule_id?, reason,
//!         trace: [{step, outcome, detail?}], rule_errors?, deadline_ms?, reviewer? }`

use std::sync::Arc;
use std::time::Duration;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::config::ApprovalConfig;
use crate::error::{validate_function_id, validate_id, ApprovalError};
use crate::functions::register_typed;
use crate::gate::{
    secret_id_reason, settings_unknown, turn_with_durable_grants, GATE_UNAVAILABLE, SECRET_IN_ID,
};
use crate::pending::{timeout_ms, HoldLimits};
use crate::policy::{
    decide_with, Call, CompiledRules, CompiledSettings, DecideOptions, Readings, TraceStep, Verdict,
};
use crate::settings::Known;
use crate::worker::Worker;

/// `approval::evaluate`.
pub(crate) const ID: &str = "approval::evaluate";

/// `approval::evaluate` request.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
pub(crate) struct EvaluateRequest {
    /// The session whose settings apply.
    pub session_id: String,
    /// The function to evaluate.
    pub function_id: String,
    /// The call's arguments.
    #[serde(default)]
    pub arguments: Option<Value>,
    /// The calling turn's metadata, as the harness hands it to the gate
    /// (`fs_scope.root` and `fs_scope.grants`: the roots a
    /// `harness::spawn` / `harness::send` may ask for without a human).
    #[serde(default)]
    pub metadata: Option<Map<String, Value>>,
}

/// The verdict on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum WireVerdict {
    /// The gate would continue.
    Allow,
    /// The gate would deny.
    Deny,
    /// The gate would hold for a human.
    NeedsApproval,
}

impl WireVerdict {
    /// A ladder's verdict as the wire says it.
    pub fn of(verdict: Verdict) -> WireVerdict {
        match verdict {
            Verdict::Allow => WireVerdict::Allow,
            Verdict::Deny => WireVerdict::Deny,
            Verdict::Hold => WireVerdict::NeedsApproval,
        }
    }

    /// `"allow"`, `"deny"` or `"needs_approval"`.
    pub fn as_str(self) -> &'static str {
        crate::wire::spelling(&self)
    }
}

/// `approval::evaluate` response.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct EvaluateResponse {
    /// What the gate would answer.
    pub verdict: WireVerdict,
    /// The rule that decided, when one did.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rule_id: Option<String>,
    /// Why.
    pub reason: String,
    /// Every step of the ladder considered, in order: the guard, the deny
    /// rules (`deny_ask_allow`), the ask rules, the mode, the grants, each
    /// rule whose glob matched up to the one that decided, the default hold.
    /// Rule errors include failed examples.
    pub trace: Vec<TraceStep>,
    /// Rules that do not compile (the rule set is then empty).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub rule_errors: Vec<String>,
    /// On needs_approval: how long the hold would wait before it is denied
    /// for want of an answer (absent: until a human answers).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub deadline_ms: Option<u64>,
    /// On needs_approval by the default hold in a mode the configured
    /// reviewer covers: the reviewer's function id, which the gate asks
    /// first (its allow continues the call, its deny denies it; anything
    /// else holds). Evaluate never asks it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reviewer: Option<String>,
    /// On needs_approval outside the lockdown: the unused one-shot grant of
    /// a human's edit that covers exactly this call (contract §28). The
    /// gate lets the next such call continue on it, once.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub edit_grant: Option<EditGrantShown>,
}

/// An edit's grant as `approval::evaluate` names it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
pub struct EditGrantShown {
    /// The held call the edit was made on.
    pub made_on: String,
    /// When the grant ends (ms since the epoch).
    pub expires_at: u64,
}

/// The gate's decision on one call, explained: what `approval::evaluate`
/// answers before the rule errors are added. Pure.
pub fn explain(
    settings: &CompiledSettings,
    rules: &CompiledRules,
    config: &ApprovalConfig,
    function_id: &str,
    arguments: Option<&Value>,
) -> EvaluateResponse {
    explain_in_turn(settings, rules, config, function_id, arguments, None, None)
}

/// As [`explain`], for a call made in a turn with `turn` as its metadata.
pub(crate) fn explain_in_turn(
    settings: &CompiledSettings,
    rules: &CompiledRules,
    config: &ApprovalConfig,
    function_id: &str,
    arguments: Option<&Value>,
    turn: Option<&Map<String, Value>>,
    readings: Option<&Readings>,
) -> EvaluateResponse {
    explain_mediated(
        settings,
        rules,
        config,
        &Call {
            function_id,
            arguments,
        },
        turn,
        readings,
        false,
    )
}

/// As [`explain_in_turn`]; `subscriptions` as the gate decides it
/// ([`crate::gate::subscriptions_mediated`]).
fn explain_mediated(
    settings: &CompiledSettings,
    rules: &CompiledRules,
    config: &ApprovalConfig,
    call: &Call<'_>,
    turn: Option<&Map<String, Value>>,
    readings: Option<&Readings>,
    subscriptions: bool,
) -> EvaluateResponse {
    let Call {
        function_id,
        arguments,
    } = *call;
    let mut trace = Vec::new();
    let decision = decide_with(
        settings,
        rules,
        &Call {
            function_id,
            arguments,
        },
        DecideOptions {
            trace: Some(&mut trace),
            turn,
            readings,
            subscriptions,
            ..DecideOptions::default()
        },
    );
    let mut reason = decision.reason_with(function_id, readings);
    if matches!(decision.basis, crate::policy::Basis::ProtectedPath { .. }) {
        // The path that matched, as the trace's step names it.
        if let Some(path) = trace
            .iter()
            .find(|s| s.step == crate::policy::Step::ProtectedPath)
            .and_then(|s| s.detail.as_deref())
        {
            reason = format!("held: {function_id}: {path}; a human decides");
        }
    }
    EvaluateResponse {
        verdict: WireVerdict::of(decision.verdict),
        rule_id: decision.rule_id().map(str::to_string),
        reason,
        trace,
        rule_errors: Vec::new(),
        deadline_ms: (decision.verdict == Verdict::Hold)
            .then(|| timeout_ms(HoldLimits::of(&decision), config))
            .flatten(),
        reviewer: config
            .reviewer_for(decision.is_default_hold(), settings.mode)
            .map(|r| r.function_id.clone()),
        edit_grant: None,
    }
}

/// How long evaluate may wait for a cold session's settings.
const SETTINGS_BUDGET: Duration = Duration::from_secs(5);

/// Evaluates a call without side effects.
pub(crate) async fn evaluate(
    worker: &Worker,
    request: &EvaluateRequest,
) -> Result<EvaluateResponse, ApprovalError> {
    validate_id("session_id", &request.session_id)?;
    validate_function_id(&request.function_id)?;
    let snapshot = worker.config.load();
    // As the gate: an id that holds a secret is denied before anything is
    // read under it (§26.5).
    let secret = [
        ("session_id", &request.session_id),
        ("call.function_id", &request.function_id),
    ]
    .into_iter()
    .find(|(_, id)| crate::redact::holds_secret(id));
    if let Some((field, _)) = secret {
        return Ok(EvaluateResponse {
            verdict: WireVerdict::Deny,
            rule_id: Some(SECRET_IN_ID.to_string()),
            reason: secret_id_reason(field),
            trace: Vec::new(),
            rule_errors: snapshot.errors(),
            deadline_ms: None,
            reviewer: None,
            edit_grant: None,
        });
    }
    let known = match worker
        .settings
        .known(&request.session_id, SETTINGS_BUDGET)
        .await
    {
        Ok(known) => known,
        Err(err) => {
            return Ok(EvaluateResponse {
                verdict: WireVerdict::Deny,
                rule_id: Some(GATE_UNAVAILABLE.to_string()),
                reason: settings_unknown(&request.session_id, &request.function_id, err.code()),
                trace: Vec::new(),
                rule_errors: snapshot.errors(),
                deadline_ms: None,
                reviewer: None,
                edit_grant: None,
            })
        }
    };
    let settings = match &known {
        Known::Stored(stored) => &stored.compiled,
        Known::Absent => &snapshot.defaults,
    };
    // As the gate: the session's durable grants count as the turn's granted
    // roots, read only when a root asked for lies outside the metadata's.
    let turn = turn_with_durable_grants(
        worker,
        &request.session_id,
        &request.function_id,
        request.arguments.as_ref(),
        request.metadata.as_ref(),
        crate::gate::GRANTS_BUDGET,
    )
    .await;
    let readings = crate::gate::read_commands(
        worker,
        settings,
        &snapshot.rules,
        &request.function_id,
        request.arguments.as_ref(),
    )
    .await;
    let subscriptions = crate::gate::subscriptions_mediated(
        worker,
        &request.function_id,
        crate::hook::budget::Deadline::hook(),
    )
    .await;
    let mut out = EvaluateResponse {
        rule_errors: snapshot.errors(),
        ..explain_mediated(
            settings,
            &snapshot.rules,
            &snapshot.config,
            &Call {
                function_id: &request.function_id,
                arguments: request.arguments.as_ref(),
            },
            turn.as_ref().or(request.metadata.as_ref()),
            Some(&readings),
            subscriptions,
        )
    };
    if out.verdict == WireVerdict::NeedsApproval && !snapshot.rules.is_lockdown() {
        out.edit_grant = edit_grant(worker, request).await;
    }
    Ok(out)
}

/// The unused edit grant that covers the call, read only; none when the
/// grants cannot be read (evaluate then says what the ladder says).
async fn edit_grant(worker: &Worker, request: &EvaluateRequest) -> Option<EditGrantShown> {
    let digest = crate::pending::digest(&request.function_id, request.arguments.as_ref());
    match worker
        .edits
        .covering(&request.session_id, &request.function_id, &digest)
        .await
    {
        Ok(grant) => grant.map(|g| EditGrantShown {
            made_on: g.made_on,
            expires_at: g.expires_at,
        }),
        Err(err) => {
            tracing::warn!(session_id = %request.session_id, function_id = %request.function_id, error = %err, "edit grants unreadable; evaluate names none");
            None
        }
    }
}

/// Registers `approval::evaluate`.
pub(crate) fn register(worker: &Arc<Worker>) {
    register_typed(
        worker,
        ID,
        "Run the gate's ladder for a call without writing or holding: verdict, matched rule, reason, rule-compile errors.",
        |w, r: EvaluateRequest| async move { evaluate(&w, &r).await },
    );
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::policy::{Outcome, Step};
    use crate::settings::{ApprovalSettings, Entry, GrantedBy};
    use crate::terms::Mode;

    #[test]
    fn rule_21_1_evaluate_in_lockdown_answers_needs_approval_with_rule_lockdown() {
        let everything = ApprovalSettings {
            always_allow: vec![Entry::new("*", 0, GrantedBy::UserClick)],
            approved_always: vec![Entry::new("*", 0, GrantedBy::UserClick)],
            ..ApprovalSettings::new(Mode::Full)
        };
        let settings = CompiledSettings::new(&everything);
        let rules = CompiledRules::lockdown();
        let config = ApprovalConfig::default();
        let out = explain(&settings, &rules, &config, "shell::exec", Some(&json!({})));
        assert_eq!(out.verdict, WireVerdict::NeedsApproval);
        assert_eq!(out.rule_id.as_deref(), Some("lockdown"));
        assert_eq!(
            out.trace.last().map(|t| (t.step, t.outcome)),
            Some((Step::Lockdown, Outcome::Hold))
        );
        let wire = serde_json::to_value(&out).expect("serializes");
        assert_eq!(wire["verdict"], "needs_approval");
        assert_eq!(wire["trace"][1]["step"], "lockdown");
        // The human-only surface is still denied.
        let out = explain(&settings, &rules, &config, "approval::resolve", None);
        assert_eq!(out.verdict, WireVerdict::Deny);
        assert_eq!(out.rule_id.as_deref(), Some("human_only_function"));
    }

    #[test]
    fn rule_19_widening_root_evaluate_names_the_rule_in_full_mode() {
        let settings = CompiledSettings::new(&ApprovalSettings::new(Mode::Full));
        let config = ApprovalConfig::default();
        let rules = CompiledRules::compile(&[]).expect("no rules compile");
        let turn = json!({"fs_scope": {"root": "/w/s1", "grants": ["/data"]}});
        let turn = turn.as_object();
        let spawn = |root: &str| json!({"prompt": "p", "options": {"filesystem_root": root}});
        let out = explain_in_turn(
            &settings,
            &rules,
            &config,
            "harness::spawn",
            Some(&spawn("/etc")),
            turn,
            None,
        );
        assert_eq!(out.verdict, WireVerdict::NeedsApproval);
        assert_eq!(out.rule_id.as_deref(), Some("widening_root"));
        assert!(out.reason.contains("/etc"), "{}", out.reason);
        let step = out
            .trace
            .iter()
            .find(|t| t.step == Step::WideningRoot)
            .expect("a widening step");
        assert_eq!(step.outcome, Outcome::Hold);
        // Inside the turn's grants: the ladder (full mode allows).
        let out = explain_in_turn(
            &settings,
            &rules,
            &config,
            "harness::spawn",
            Some(&spawn("/data/tree")),
            turn,
            None,
        );
        assert_eq!(out.verdict, WireVerdict::Allow, "{out:?}");
        assert_eq!(out.rule_id, None);
    }
}
