//! What-if: the gate's verdict on calls under the configuration in force and
//! under a draft, side by side (`architecture/contract.md` § What-if and
//! batch decisions). PURE — the core of `approval::simulate` and of the
//! offline `approval-gate simulate` command.
//!
//! Both verdicts come from the one ladder the gate and `approval::evaluate`
//! run ([`decide_with`]); a call's `mode` goes in as
//! [`DecideOptions::mode`], so nothing here re-implements a step of it.
//!
//! The draft is what the gate would run if the draft were stored: a draft
//! whose rules do not all compile is refused whole (contract §21.1), so its
//! verdicts are the current ones and its errors are reported. A session with
//! stored settings is judged with them on both sides; a session with none is
//! judged with each side's own defaults (its `default_mode`, the seeds of its
//! rules). `changed` compares verdicts only: a rule renumbered or renamed
//! that decides the same way is not a change.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::evaluate::WireVerdict;
use crate::config::{ApprovalConfig, Snapshot};
use crate::policy::{
    decide_with, Call, CompiledRules, CompiledSettings, DecideOptions, Needs, ProtectedNote,
    PROTECTED_PATH_RULE,
};
use crate::terms::Mode;

/// One call to judge, as a client supplies it.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
pub struct SimCall {
    /// The client's name for the call, echoed in its result.
    #[serde(default)]
    pub id: Option<String>,
    /// The session whose settings apply (none: each side's defaults).
    #[serde(default)]
    pub session_id: Option<String>,
    /// The target function.
    pub function_id: String,
    /// The call's arguments.
    #[serde(default)]
    pub arguments: Option<Value>,
    /// Judge the call in this mode on both sides, instead of the session's.
    #[serde(default)]
    pub mode: Option<Mode>,
}

/// One call's verdicts, now and under the draft.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct SimResult {
    /// The supplied call's `id`, when it had one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// The session, when the call named one (always, for a held call).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
    /// The held call's id (`from_pending` only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub function_call_id: Option<String>,
    /// The target function.
    pub function_id: String,
    /// What the gate answers with the configuration in force.
    pub verdict_now: WireVerdict,
    /// What it would answer with the draft.
    pub verdict_draft: WireVerdict,
    /// The rule that decides now (null: no rule decided).
    pub rule_id_now: Option<String>,
    /// The rule that would decide with the draft.
    pub rule_id_draft: Option<String>,
    /// The verdicts differ.
    pub changed: bool,
    /// Judged on the held call's stored, redacted arguments: a rule on an
    /// argument that redaction replaced or clipped may judge differently.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub approximate: Option<bool>,
    /// The protected path the call names, when one side holds it for that
    /// (rule `protected_path`): what matched, and which glob.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub protected_path: Option<String>,
}

/// What a simulation answers.
#[derive(Debug, Clone, Default, PartialEq, Serialize, JsonSchema)]
pub struct SimulateResponse {
    /// One per supplied call, in order, then one per held call.
    pub results: Vec<SimResult>,
    /// Why the draft cannot be used: its rule errors (failed examples
    /// included), unusable `human_only_extra` globs, an unusable `links`.
    /// With rule errors the draft is refused whole, so every
    /// `verdict_draft` is the current verdict.
    pub rule_errors: Vec<String>,
}

impl SimulateResponse {
    /// How many results changed.
    pub fn changed(&self) -> usize {
        self.results.iter().filter(|r| r.changed).count()
    }
}

/// The configuration in force and a draft, ready to judge calls on both.
pub struct WhatIf<'n> {
    now: &'n Snapshot,
    draft: Snapshot,
    errors: Vec<String>,
}

impl<'n> WhatIf<'n> {
    /// Compiles `draft` (none: the configuration in force again) as the gate
    /// would if it were stored: refused whole when a rule does not compile.
    pub fn new(now: &'n Snapshot, draft: Option<ApprovalConfig>) -> WhatIf<'n> {
        let draft = match draft {
            Some(config) => Snapshot::succeed(now, config),
            None => now.keeping(Vec::new()),
        };
        let errors = draft.errors();
        WhatIf { now, draft, errors }
    }

    /// The draft's problems.
    pub fn errors(&self) -> &[String] {
        &self.errors
    }

    /// Judges one call on both sides. `stored`: the session's stored
    /// settings (none: each side's defaults).
    pub fn compare(
        &self,
        stored: Option<&CompiledSettings>,
        function_id: &str,
        arguments: Option<&Value>,
        mode: Option<Mode>,
    ) -> Verdicts {
        let now = verdict_of(
            stored.unwrap_or(&self.now.defaults),
            &self.now.rules,
            function_id,
            arguments,
            mode,
        );
        let draft = verdict_of(
            stored.unwrap_or(&self.draft.defaults),
            &self.draft.rules,
            function_id,
            arguments,
            mode,
        );
        let protected = [(&now, &self.now.rules), (&draft, &self.draft.rules)]
            .into_iter()
            .find(|(side, _)| side.1.as_deref() == Some(PROTECTED_PATH_RULE))
            .and_then(|(_, rules)| protected_path(rules, function_id, arguments));
        Verdicts {
            now,
            draft,
            protected,
        }
    }

    /// [`WhatIf::compare`] for a supplied call, as its result.
    pub fn supplied(&self, stored: Option<&CompiledSettings>, call: &SimCall) -> SimResult {
        let verdicts = self.compare(
            stored,
            &call.function_id,
            call.arguments.as_ref(),
            call.mode,
        );
        verdicts.result(
            call.id.clone(),
            call.session_id.clone(),
            None,
            &call.function_id,
        )
    }
}

/// A call's verdicts on both sides.
#[derive(Debug, Clone, PartialEq)]
pub struct Verdicts {
    /// With the configuration in force: the verdict, the rule that decided.
    pub now: (WireVerdict, Option<String>),
    /// With the draft.
    pub draft: (WireVerdict, Option<String>),
    /// The protected path the call names, when a side holds it for that.
    pub protected: Option<String>,
}

impl Verdicts {
    /// Both sides alike (a session whose settings cannot be read is denied
    /// whatever the configuration says).
    pub fn same(side: (WireVerdict, Option<String>)) -> Verdicts {
        Verdicts {
            now: side.clone(),
            draft: side,
            protected: None,
        }
    }

    /// As a result.
    pub fn result(
        self,
        id: Option<String>,
        session_id: Option<String>,
        function_call_id: Option<String>,
        function_id: &str,
    ) -> SimResult {
        SimResult {
            id,
            session_id,
            function_call_id,
            function_id: function_id.to_string(),
            changed: self.now.0 != self.draft.0,
            verdict_now: self.now.0,
            verdict_draft: self.draft.0,
            rule_id_now: self.now.1,
            rule_id_draft: self.draft.1,
            approximate: None,
            protected_path: self.protected,
        }
    }
}

/// What a call held by rule `protected_path` names, for the operator (the
/// call's command read inline: simulate judges off the hook's thread).
fn protected_path(
    rules: &CompiledRules,
    function_id: &str,
    arguments: Option<&Value>,
) -> Option<String> {
    let readings = Needs::for_record(function_id, arguments).read_inline();
    rules
        .protected()
        .judge(function_id, arguments, None, &readings)
        .map(ProtectedNote::from)
        .map(|note| {
            if note.path.is_empty() {
                format!("a part that cannot be known ({})", note.glob)
            } else {
                format!("{} ({})", note.path, note.glob)
            }
        })
}

/// The gate's verdict on one call: the one ladder, in `mode` when given.
pub fn verdict_of(
    settings: &CompiledSettings,
    rules: &CompiledRules,
    function_id: &str,
    arguments: Option<&Value>,
    mode: Option<Mode>,
) -> (WireVerdict, Option<String>) {
    let decision = decide_with(
        settings,
        rules,
        &Call {
            function_id,
            arguments,
        },
        DecideOptions {
            mode,
            ..DecideOptions::default()
        },
    );
    (
        WireVerdict::of(decision.verdict),
        decision.rule_id().map(str::to_string),
    )
}

/// The offline simulation (`approval-gate simulate`): no engine, no stored
/// settings, so each call is judged with each side's defaults (in its own
/// `mode` when it names one).
pub fn simulate_offline(
    current: ApprovalConfig,
    draft: ApprovalConfig,
    calls: &[SimCall],
) -> SimulateResponse {
    let now = Snapshot::compile(current);
    let mut current_errors = now.errors();
    let whatif = WhatIf::new(&now, Some(draft));
    let results = calls.iter().map(|c| whatif.supplied(None, c)).collect();
    // The current file's own errors count too: the comparison is then
    // against the lockdown, which no one meant to compare with.
    let mut rule_errors: Vec<String> = current_errors
        .drain(..)
        .map(|e| format!("current: {e}"))
        .collect();
    rule_errors.extend(whatif.errors().iter().cloned());
    SimulateResponse {
        results,
        rule_errors,
    }
}

/// The results as a plain-text table: one line per call, the changed ones
/// marked, then a summary line and the rule errors.
pub fn render_table(response: &SimulateResponse) -> String {
    let name = |r: &SimResult| match (&r.id, &r.session_id, &r.function_call_id) {
        (Some(id), _, _) => id.clone(),
        (None, Some(sid), Some(cid)) => format!("{sid}/{cid}"),
        (None, Some(sid), None) => sid.clone(),
        (None, None, _) => "-".to_string(),
    };
    let side = |v: WireVerdict, rule: &Option<String>| match rule {
        Some(rule) => format!("{} ({rule})", v.as_str()),
        None => v.as_str().to_string(),
    };
    let rows: Vec<[String; 5]> = response
        .results
        .iter()
        .map(|r| {
            [
                if r.changed { "*" } else { " " }.to_string(),
                name(r),
                r.function_id.clone(),
                side(r.verdict_now, &r.rule_id_now),
                side(r.verdict_draft, &r.rule_id_draft),
            ]
        })
        .collect();
    let header = [
        " ".to_string(),
        "call".to_string(),
        "function_id".to_string(),
        "now".to_string(),
        "draft".to_string(),
    ];
    let mut widths = [0usize; 5];
    for row in std::iter::once(&header).chain(rows.iter()) {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let mut out = String::new();
    for row in std::iter::once(&header).chain(rows.iter()) {
        let line: Vec<String> = row
            .iter()
            .zip(widths)
            .map(|(cell, w)| format!("{cell:<w$}"))
            .collect();
        out.push_str(line.join("  ").trim_end());
        out.push('\n');
    }
    out.push_str(&format!(
        "{} of {} call(s) changed\n",
        response.changed(),
        response.results.len()
    ));
    for err in &response.rule_errors {
        out.push_str(&format!("rule error: {err}\n"));
    }
    out
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn config(value: Value) -> ApprovalConfig {
        ApprovalConfig::from_value(&value).expect("config parses")
    }

    fn call(function_id: &str, mode: Option<Mode>) -> SimCall {
        SimCall {
            id: None,
            session_id: None,
            function_id: function_id.to_string(),
            arguments: None,
            mode,
        }
    }

    #[test]
    fn rule_24_a_widening_draft_changes_the_held_call_and_nothing_else() {
        let now = config(json!({"rules": ["!approval::*", "!shell::rm"]}));
        let draft = config(json!({"rules": ["!approval::*", "!shell::rm", "demo::*"]}));
        let out = simulate_offline(
            now,
            draft,
            &[
                call("demo::echo", None),
                call("shell::rm", None),
                call("x::y", None),
            ],
        );
        assert!(out.rule_errors.is_empty(), "{:?}", out.rule_errors);
        let changed: Vec<_> = out.results.iter().map(|r| r.changed).collect();
        assert_eq!(changed, [true, false, false]);
        assert_eq!(out.results[0].verdict_now, WireVerdict::NeedsApproval);
        assert_eq!(out.results[0].verdict_draft, WireVerdict::Allow);
        assert_eq!(out.results[0].rule_id_draft.as_deref(), Some("demo::*"));
        assert_eq!(out.results[1].verdict_draft, WireVerdict::Deny);
    }

    #[test]
    fn rule_24_a_calls_mode_overrides_both_sides() {
        let now = config(json!({"rules": ["!approval::*"]}));
        let draft = config(
            json!({"rules": ["!approval::*", {"function": "demo::*", "action": "allow", "modes": ["auto"]}]}),
        );
        let manual = simulate_offline(now.clone(), draft.clone(), &[call("demo::echo", None)]);
        assert!(
            !manual.results[0].changed,
            "manual by default: the rule is auto-only"
        );
        let auto = simulate_offline(now, draft, &[call("demo::echo", Some(Mode::Auto))]);
        assert!(auto.results[0].changed, "{:?}", auto.results[0]);
        assert_eq!(auto.results[0].verdict_draft, WireVerdict::Allow);
    }

    #[test]
    fn rule_24_a_broken_draft_is_refused_whole_and_reported() {
        let now = config(json!({"rules": ["!approval::*"]}));
        let draft = config(json!({"default_mode": "full", "rules": ["*", "!"]}));
        let out = simulate_offline(now, draft, &[call("demo::echo", None)]);
        assert_eq!(out.rule_errors.len(), 1, "{:?}", out.rule_errors);
        assert!(
            out.rule_errors[0].starts_with("rule 1: "),
            "{:?}",
            out.rule_errors
        );
        assert!(!out.results[0].changed, "a refused draft never applies");
        assert_eq!(out.results[0].verdict_draft, WireVerdict::NeedsApproval);
    }

    #[test]
    fn rule_24_the_human_only_surface_stays_denied_under_any_draft() {
        let now = config(json!({"rules": ["!approval::*"]}));
        let draft = config(json!({"default_mode": "full", "rules": ["*"]}));
        let out = simulate_offline(now, draft, &[call("approval::resolve", Some(Mode::Full))]);
        assert_eq!(out.results[0].verdict_draft, WireVerdict::Deny);
        assert_eq!(
            out.results[0].rule_id_draft.as_deref(),
            Some("human_only_function")
        );
    }

    #[test]
    fn the_table_marks_changes_and_counts_them() {
        let now = config(json!({"rules": ["!approval::*"]}));
        let draft = config(json!({"rules": ["!approval::*", "demo::*"]}));
        let mut c = call("demo::echo", None);
        c.id = Some("echo".into());
        let out = simulate_offline(now, draft, &[c, call("x::y", None)]);
        let table = render_table(&out);
        assert!(table.contains("*  echo"), "{table}");
        assert!(table.contains("allow (demo::*)"), "{table}");
        assert!(table.ends_with("1 of 2 call(s) changed\n"), "{table}");
    }
}
