//! The texts that explain a decision. Deny reasons are written for the model,
//! so it can adapt (contract §2, verbatim):
//!
//! ```text
//! Permission denied by policy: <fid> matched rule <rule_id> on <field> <equals|matches> <json value>. Try different arguments or use a different function.
//! Permission denied by policy: <fid> matched rule <rule_id>. This function is blocked by policy; try a different function.
//! ```
//!
//! Allow and hold texts are short notes for logs and `approval::evaluate`.

use super::args::MatchedConstraint;
use super::commands::{self, CommandHit, Readings};
use super::decide::{Basis, Decision, Verdict, HUMAN_ONLY_RULE, IMPLICIT_ASK_RULE, LOCKDOWN_RULE};
use super::protected::{HitKind, PROTECTED_PATH_RULE};
use super::subscription::{SUBSCRIPTION_RULE, SUBSCRIPTION_TARGET_RULE};
use super::widening::WIDENING_ROOT_RULE;

/// The rule id reported when a deny or ask rule is consulted on a command
/// that cannot be known without running it (`architecture/contract.md`
/// § Commands): denied under a deny rule, held under an ask rule.
pub const OPAQUE_COMMAND_RULE: &str = "opaque_command";

impl<'r> Decision<'r> {
    /// The rule behind the decision: `human_only_function` for a human-only
    /// target, `lockdown` for a hold of the lockdown, the matching rule's id
    /// for a rule or ask decision, else `None`.
    pub fn rule_id(&self) -> Option<&'r str> {
        match self.basis {
            Basis::HumanOnly { .. } => Some(HUMAN_ONLY_RULE),
            Basis::Lockdown => Some(LOCKDOWN_RULE),
            Basis::WideningRoot { .. } => Some(WIDENING_ROOT_RULE),
            Basis::ProtectedPath { .. } => Some(PROTECTED_PATH_RULE),
            Basis::ImplicitAsk => Some(IMPLICIT_ASK_RULE),
            Basis::Subscription {
                target_verdict: Verdict::Allow,
                ..
            } => Some(SUBSCRIPTION_RULE),
            Basis::Subscription { .. } => Some(SUBSCRIPTION_TARGET_RULE),
            Basis::Rule {
                command: Some(hit), ..
            }
            | Basis::Ask {
                command: Some(hit), ..
            } if hit.is_opaque() => Some(OPAQUE_COMMAND_RULE),
            Basis::Rule { rule_id, .. } | Basis::Ask { rule_id, .. } => Some(rule_id),
            _ => None,
        }
    }

    /// The rule the configuration names behind the decision (the rule id of
    /// a rule or ask decision, also when it was consulted as
    /// `opaque_command`).
    pub fn configured_rule_id(&self) -> Option<&'r str> {
        match self.basis {
            Basis::Rule { rule_id, .. } | Basis::Ask { rule_id, .. } => Some(rule_id),
            _ => self.rule_id(),
        }
    }

    /// The decision as text, for a call to `function_id`.
    pub fn reason(&self, function_id: &str) -> String {
        self.reason_with(function_id, None)
    }

    /// The decision as text, for a call to `function_id`, naming the
    /// program a command rule found when `readings` (the call's) are given.
    pub fn reason_with(&self, function_id: &str, readings: Option<&Readings>) -> String {
        match (self.verdict, self.basis) {
            (_, Basis::HumanOnly { .. }) => format!(
                "Permission denied by policy: {function_id} changes approvals or the gate \
                 itself, which only a human may do."
            ),
            (
                Verdict::Deny,
                Basis::Rule {
                    rule_id,
                    constraint,
                    command: Some(hit),
                    ..
                },
            ) => command_deny_text(function_id, rule_id, constraint.as_ref(), hit, readings),
            (
                Verdict::Deny,
                Basis::Rule {
                    rule_id,
                    constraint,
                    ..
                },
            ) => deny_text(function_id, rule_id, constraint.as_ref()),
            (
                _,
                Basis::Rule {
                    rule_id,
                    constraint,
                    ..
                },
            ) => match constraint {
                Some(c) => format!("allowed: matched rule {rule_id} on {}", constraint_text(&c)),
                None => format!("allowed: matched rule {rule_id}"),
            },
            (
                _,
                Basis::Ask {
                    rule_id,
                    constraint: Some(c),
                    command: Some(hit),
                    ..
                },
            ) if hit.is_opaque() => format!(
                "held: {OPAQUE_COMMAND_RULE} under ask rule {rule_id} on {}: it cannot be told \
                 whether this runs {}; a human decides",
                constraint_text(&c),
                c.value
            ),
            (
                _,
                Basis::Ask {
                    rule_id,
                    constraint,
                    ..
                },
            ) => match constraint {
                Some(c) => format!(
                    "held: ask rule {rule_id} on {}; a human decides",
                    constraint_text(&c)
                ),
                None => format!("held: ask rule {rule_id}; a human decides"),
            },
            (_, Basis::ModeFull) => "allowed: session mode is full".to_owned(),
            (_, Basis::ApprovedAlways { entry, .. }) => {
                format!("allowed: approved_always entry {}", entry.function_id)
            }
            (_, Basis::AlwaysAllow { entry, .. }) => format!(
                "allowed: always_allow entry {} (session mode is auto)",
                entry.function_id
            ),
            (_, Basis::Seed { entry, rule }) => format!(
                "allowed: always_allow seed entry {} of rule {rule} (session mode is auto)",
                entry.function_id
            ),
            (_, Basis::Lockdown) => {
                "held: lockdown (no configuration has compiled yet); a human decides".to_owned()
            }
            (_, Basis::ImplicitAsk) => {
                "allowed: no rule matched, and the implicit rule allows harness::ask (the model asks the user a question)".to_owned()
            }
            (_, Basis::NoMatch) => "held: no rule matched".to_owned(),
            (
                _,
                Basis::Subscription {
                    target,
                    target_verdict: Verdict::Allow,
                },
            ) => match target {
                Some(t) => format!("allowed: a subscription the harness keeps for this session; {t} is allowed for it"),
                None => "allowed: a subscription control the harness keeps to this session; it calls nothing".to_owned(),
            },
            (
                _,
                Basis::Subscription {
                    target,
                    target_verdict,
                },
            ) => format!(
                "Permission denied by policy: {function_id} would make a subscription that calls {} unattended, and it is {} for this session. Subscribe only to functions this session may call without asking.",
                target.unwrap_or("a function"),
                super::trace::unattended(target_verdict)
            ),
            (_, Basis::ProtectedPath { how }) => format!(
                "held: {function_id} {}; a human decides",
                match how {
                    HitKind::Literal => "names a protected path (the gate's or an engine worker's configuration file)",
                    HitKind::Pattern => "has a word that could expand to a protected path",
                    HitKind::Opaque => "cannot be known without running it and could write a protected path",
                }
            ),
            (_, Basis::WideningRoot { widening }) => format!(
                "held: {function_id} asks for a root outside the calling turn's roots ({}); a human decides",
                widening.describe()
            ),
        }
    }
}

/// A deny reason, per contract §2.
pub(crate) fn deny_text(
    function_id: &str,
    rule_id: &str,
    constraint: Option<&MatchedConstraint<'_>>,
) -> String {
    match constraint {
        Some(c) => format!(
            "Permission denied by policy: {function_id} matched rule {rule_id} on {}. \
             Try different arguments or use a different function.",
            constraint_text(c)
        ),
        None => format!(
            "Permission denied by policy: {function_id} matched rule {rule_id}. \
             This function is blocked by policy; try a different function."
        ),
    }
}

/// A deny reason of a command rule: what the program found was (never
/// its arguments), or, for a command that cannot be known, that the model
/// should write the program name literally.
fn command_deny_text(
    function_id: &str,
    rule_id: &str,
    constraint: Option<&MatchedConstraint<'_>>,
    hit: CommandHit,
    readings: Option<&Readings>,
) -> String {
    let on = constraint
        .map(|c| format!(" on {}", constraint_text(c)))
        .unwrap_or_default();
    let prefix = constraint.map_or_else(String::new, |c| match c.value {
        serde_json::Value::String(s) => s.clone(),
        other => other.to_string(),
    });
    if hit.is_opaque() {
        let why = readings
            .and_then(|r| match hit {
                CommandHit::Opaque { .. } => r.opaque(hit).map(|o| format!(" ({o})")),
                _ => None,
            })
            .unwrap_or_default();
        return format!(
            "Permission denied by policy: {function_id} is denied as {OPAQUE_COMMAND_RULE} under \
             rule {rule_id}{on}: it cannot be told whether this runs `{prefix}`{why}. Write the \
             program name literally, without building it from a variable, a substitution or a \
             glob."
        );
    }
    let runs = readings
        .and_then(|r| r.command(hit))
        .map(|c| format!(" (it runs {})", commands::describe_program(c)))
        .unwrap_or_default();
    format!(
        "Permission denied by policy: {function_id} matched rule {rule_id}{on}{runs}. \
         Try different arguments or use a different function."
    )
}

/// `<field> <equals|matches> <json value>`, the value as compact JSON.
fn constraint_text(c: &MatchedConstraint<'_>) -> String {
    format!("{} {} {}", c.field, c.operator.as_str(), c.value)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::policy::{decide, Call, CompiledRules, CompiledSettings, RuleSpec};
    use crate::terms::Mode;
    use crate::terms::{ApprovalSettings, Entry, GrantedBy};

    fn settings(mode: Mode, always_allow: &[&str], approved_always: &[&str]) -> CompiledSettings {
        let entries = |ids: &[&str]| {
            ids.iter()
                .map(|id| Entry::new(*id, 0, GrantedBy::UserClick))
                .collect()
        };
        CompiledSettings::new(&ApprovalSettings {
            always_allow: entries(always_allow),
            approved_always: entries(approved_always),
            ..ApprovalSettings::new(mode)
        })
    }

    fn rules(v: serde_json::Value) -> CompiledRules {
        let specs: Vec<RuleSpec> = serde_json::from_value(v).expect("specs");
        CompiledRules::compile(&specs).expect("compiles")
    }

    fn reason_of(
        s: &CompiledSettings,
        r: &CompiledRules,
        fid: &str,
        args: Option<&serde_json::Value>,
    ) -> String {
        decide(
            s,
            r,
            &Call {
                function_id: fid,
                arguments: args,
            },
        )
        .reason(fid)
    }

    #[test]
    fn deny_without_constraint_is_verbatim() {
        let r = rules(json!(["!shell::*"]));
        let s = settings(Mode::Manual, &[], &[]);
        assert_eq!(
            reason_of(&s, &r, "shell::exec", None),
            "Permission denied by policy: shell::exec matched rule !shell::*. \
             This function is blocked by policy; try a different function."
        );
    }

    #[test]
    fn a_guarded_call_is_told_only_a_human_may_do_it() {
        let s = settings(Mode::Full, &[], &[]);
        for fid in ["approval::resolve", "harness::function::resolve"] {
            assert_eq!(
                reason_of(&s, &CompiledRules::empty(), fid, None),
                format!(
                    "Permission denied by policy: {fid} changes approvals or the gate itself, \
                     which only a human may do."
                )
            );
        }
    }

    #[test]
    fn deny_with_constraint_is_verbatim() {
        let r = rules(json!([
            {"function": "shell::exec", "action": "deny", "rule_id": "no-force-push",
             "args": {"command": {"matches": "push .*--force"}, "z": {"equals": null}}},
            {"function": "fs::write", "action": "deny", "rule_id": "etc",
             "args": {"/target/dir": {"equals": {"root": "/etc", "n": [1, 2.5]}}}}
        ]));
        let s = settings(Mode::Manual, &[], &[]);
        let args = json!({"command": "git push origin --force"});
        assert_eq!(
            reason_of(&s, &r, "shell::exec", Some(&args)),
            "Permission denied by policy: shell::exec matched rule no-force-push on command matches \"push .*--force\". \
             Try different arguments or use a different function."
        );
        let args = json!({"target": {"dir": {"n": [1, 2.5], "root": "/etc"}}});
        assert_eq!(
            reason_of(&s, &r, "fs::write", Some(&args)),
            "Permission denied by policy: fs::write matched rule etc on /target/dir equals {\"n\":[1,2.5],\"root\":\"/etc\"}. \
             Try different arguments or use a different function."
        );
    }

    #[test]
    fn allow_and_hold_texts() {
        let r = rules(json!([
            "state::get",
            {"function": "shell::exec", "action": "allow", "args": {"cmd": {"equals": "ls"}}}
        ]));
        let manual = settings(Mode::Manual, &[], &["coder::*"]);
        assert_eq!(
            reason_of(&manual, &r, "state::get", None),
            "allowed: matched rule state::get"
        );
        let args = json!({"cmd": "ls"});
        assert_eq!(
            reason_of(&manual, &r, "shell::exec", Some(&args)),
            "allowed: matched rule shell::exec on cmd equals \"ls\""
        );
        assert_eq!(
            reason_of(&manual, &r, "coder::run", None),
            "allowed: approved_always entry coder::*"
        );
        assert_eq!(
            reason_of(&manual, &r, "x::y", None),
            "held: no rule matched"
        );
        let auto = settings(Mode::Auto, &["x::*"], &[]);
        assert_eq!(
            reason_of(&auto, &r, "x::y", None),
            "allowed: always_allow entry x::* (session mode is auto)"
        );
        let full = settings(Mode::Full, &[], &[]);
        assert_eq!(
            reason_of(&full, &r, "x::y", None),
            "allowed: session mode is full"
        );
    }

    #[test]
    fn ask_holds_name_their_rule() {
        let r = rules(json!([
            "?deploy::*",
            {"function": "shell::exec", "action": "ask", "rule_id": "ask-rm",
             "args": {"cmd": {"prefix": "rm "}}}
        ]));
        let s = settings(Mode::Full, &[], &[]);
        assert_eq!(
            reason_of(&s, &r, "deploy::prod", None),
            "held: ask rule ?deploy::*; a human decides"
        );
        let args = json!({"cmd": "rm -rf /tmp/x"});
        assert_eq!(
            reason_of(&s, &r, "shell::exec", Some(&args)),
            "held: ask rule ask-rm on cmd prefix \"rm \"; a human decides"
        );
    }

    #[test]
    fn rule_ids_by_basis() {
        let r = rules(json!(["!a", {"function": "b", "action": "allow", "rule_id": "rb"}]));
        let s = settings(Mode::Auto, &["c"], &["d"]);
        let id = |fid: &str| {
            decide(
                &s,
                &r,
                &Call {
                    function_id: fid,
                    arguments: None,
                },
            )
            .rule_id()
            .map(str::to_owned)
        };
        assert_eq!(id("approval::x").as_deref(), Some(HUMAN_ONLY_RULE));
        let asks = rules(json!(["?q"]));
        let ask = decide(
            &s,
            &asks,
            &Call {
                function_id: "q",
                arguments: None,
            },
        );
        assert_eq!(ask.rule_id(), Some("?q"));
        assert_eq!(id("a").as_deref(), Some("!a"));
        assert_eq!(id("b").as_deref(), Some("rb"));
        assert_eq!(id("c"), None);
        assert_eq!(id("d"), None);
        assert_eq!(id("e"), None);
    }

    #[test]
    fn rule_21_1_a_lockdown_hold_names_the_lockdown() {
        let lockdown = CompiledRules::lockdown();
        let s = settings(Mode::Full, &["*"], &["*"]);
        let d = decide(
            &s,
            &lockdown,
            &Call {
                function_id: "shell::exec",
                arguments: None,
            },
        );
        assert_eq!(d.rule_id(), Some(LOCKDOWN_RULE));
        assert_eq!(
            d.reason("shell::exec"),
            "held: lockdown (no configuration has compiled yet); a human decides"
        );
    }

    #[test]
    fn a_seed_names_its_rule() {
        let r = rules(json!(["!z", {"function": "x::*", "action": "allow", "modes": ["auto"]}]));
        let auto = settings(Mode::Auto, &[], &[]);
        assert_eq!(
            reason_of(&auto, &r, "x::y", None),
            "allowed: always_allow seed entry x::* of rule 1 (session mode is auto)"
        );
    }
}
