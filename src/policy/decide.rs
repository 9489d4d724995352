//! The decision ladder: one call, one settings snapshot, one rule set in; a
//! verdict and the reason for it out. Pure and allocation-free once a thread
//! is warm (the glob matcher reuses a thread-local buffer).
//!
//! Order (first step that applies wins):
//!
//! 1. the call pulls one of the gate's own levers ([`super::guard`]) → deny,
//!    rule `human_only_function`, in every mode;
//! 2. mode `full` → allow;
//! 3. an `approved_always` entry matches → allow (every mode);
//! 4. mode `auto` and an `always_allow` entry matches → allow;
//! 5. the first rule whose glob, `modes` and `args` all match → its action;
//! 6. nothing matched → hold.

use serde_json::Value;

use super::args::MatchedConstraint;
use super::glob::{Pattern, PatternTable};
use super::guard::{builtin_guard, Guard};
use super::rules::{CompiledRules, RuleAction};
use crate::settings::{ApprovalSettings, Entry, Mode};

/// The rule id reported for calls to the human-only surface.
pub const HUMAN_ONLY_RULE: &str = "human_only_function";

/// One call to decide on.
#[derive(Debug, Clone, Copy)]
pub struct Call<'a> {
    /// The target function id.
    pub function_id: &'a str,
    /// The call's arguments, when it has any.
    pub arguments: Option<&'a Value>,
}

/// What happens to the call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Verdict {
    /// The call runs.
    Allow,
    /// The call is denied with a reason.
    Deny,
    /// The call waits for a human.
    Hold,
}

impl Verdict {
    /// `"allow"`, `"deny"` or `"hold"`.
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Allow => "allow",
            Verdict::Deny => "deny",
            Verdict::Hold => "hold",
        }
    }
}

/// Why a verdict was reached. Borrows from the compiled settings and rules.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Basis<'r> {
    /// Step 1: the call pulls one of the gate's own levers.
    HumanOnly {
        /// Which guard matched.
        guard: Guard<'r>,
    },
    /// Step 2: the session mode is `full`.
    ModeFull,
    /// Step 3: this `approved_always` entry matched.
    ApprovedAlways {
        /// The entry's `function_id` (an id or glob).
        entry: &'r str,
    },
    /// Step 4: mode `auto` and this `always_allow` entry matched.
    AlwaysAllow {
        /// The entry's `function_id` (an id or glob).
        entry: &'r str,
    },
    /// Step 5: this rule matched first.
    Rule {
        /// Its index in the `rules` array.
        index: usize,
        /// Its rule id.
        rule_id: &'r str,
        /// Its action (the verdict).
        action: RuleAction,
        /// Its first argument constraint, when it has `args`.
        constraint: Option<MatchedConstraint<'r>>,
    },
    /// Step 6: no rule matched.
    NoMatch,
}

/// A verdict and its basis.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Decision<'r> {
    /// What happens to the call.
    pub verdict: Verdict,
    /// Why.
    pub basis: Basis<'r>,
}

/// An allow-list, prepared for matching.
#[derive(Debug, Clone, Default)]
struct EntryList {
    /// Entry texts, in list order (the table's slots index it).
    texts: Vec<Box<str>>,
    table: PatternTable,
}

impl EntryList {
    /// An entry whose glob does not compile matches only its exact text; if
    /// the globs cannot be compiled together, the offenders (or, failing
    /// that, every glob) fall back the same way: fewer allows, never more.
    fn new(entries: &[Entry]) -> EntryList {
        let texts: Vec<Box<str>> = entries
            .iter()
            .map(|e| e.function_id.as_str().into())
            .collect();
        let patterns = |exact_only: &dyn Fn(u32) -> bool| -> Vec<(Pattern, u32)> {
            texts
                .iter()
                .zip(0u32..)
                .map(|(text, slot)| {
                    let pattern = if exact_only(slot) {
                        Pattern::Exact(text.clone())
                    } else {
                        Pattern::parse_or_exact(text)
                    };
                    (pattern, slot)
                })
                .collect()
        };
        let table = match PatternTable::build(patterns(&|_| false)) {
            Ok(table) => table,
            Err(err) => {
                let culprits: Vec<u32> = err.culprits.iter().map(|(slot, _)| *slot).collect();
                PatternTable::build(patterns(&|slot| culprits.contains(&slot)))
                    .or_else(|_| PatternTable::build(patterns(&|_| true)))
                    .unwrap_or_default()
            }
        };
        EntryList { texts, table }
    }

    fn first(&self, function_id: &str) -> Option<&str> {
        let slot = self.table.first_match(function_id, |_| true)?;
        self.texts.get(slot as usize).map(|t| &**t)
    }
}

/// A session's settings prepared for matching: the allow-list globs are
/// compiled once per settings change, not per call.
#[derive(Debug, Clone)]
pub struct CompiledSettings {
    mode: Mode,
    approved_always: EntryList,
    always_allow: EntryList,
}

impl CompiledSettings {
    /// Prepares `settings`.
    pub fn new(settings: &ApprovalSettings) -> CompiledSettings {
        CompiledSettings {
            mode: settings.mode,
            approved_always: EntryList::new(&settings.approved_always),
            always_allow: EntryList::new(&settings.always_allow),
        }
    }

    /// The session's mode.
    pub fn mode(&self) -> Mode {
        self.mode
    }
}

/// Runs the ladder for one call.
pub fn decide<'r>(
    settings: &'r CompiledSettings,
    rules: &'r CompiledRules,
    call: &Call<'r>,
) -> Decision<'r> {
    let fid = call.function_id;
    if let Some(guard) = builtin_guard(fid, call.arguments).or_else(|| rules.extra_guard(fid)) {
        return Decision {
            verdict: Verdict::Deny,
            basis: Basis::HumanOnly { guard },
        };
    }
    let mode = settings.mode;
    if mode == Mode::Full {
        return Decision {
            verdict: Verdict::Allow,
            basis: Basis::ModeFull,
        };
    }
    if let Some(entry) = settings.approved_always.first(fid) {
        return Decision {
            verdict: Verdict::Allow,
            basis: Basis::ApprovedAlways { entry },
        };
    }
    if mode == Mode::Auto {
        if let Some(entry) = settings.always_allow.first(fid) {
            return Decision {
                verdict: Verdict::Allow,
                basis: Basis::AlwaysAllow { entry },
            };
        }
    }
    let hit = rules.table.first_match(fid, |slot| {
        rules
            .rules
            .get(slot as usize)
            .is_some_and(|rule| rule.applies(mode, call.arguments))
    });
    let rule = hit.and_then(|slot| Some((slot as usize, rules.rules.get(slot as usize)?)));
    match rule {
        Some((index, rule)) => Decision {
            verdict: match rule.action {
                RuleAction::Allow => Verdict::Allow,
                RuleAction::Deny => Verdict::Deny,
            },
            basis: Basis::Rule {
                index,
                rule_id: &rule.rule_id,
                action: rule.action,
                constraint: rule
                    .args
                    .as_deref()
                    .and_then(<[_]>::first)
                    .map(|c| c.matched()),
            },
        },
        None => Decision {
            verdict: Verdict::Hold,
            basis: Basis::NoMatch,
        },
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::policy::args::ConstraintOp;
    use crate::policy::rules::RuleSpec;
    use crate::settings::GrantedBy;

    const MODES: [Mode; 3] = [Mode::Manual, Mode::Auto, Mode::Full];

    fn entries(ids: &[&str]) -> Vec<Entry> {
        ids.iter()
            .map(|id| Entry::new(*id, 0, GrantedBy::UserClick))
            .collect()
    }

    fn settings(mode: Mode, always_allow: &[&str], approved_always: &[&str]) -> CompiledSettings {
        CompiledSettings::new(&ApprovalSettings {
            mode,
            always_allow: entries(always_allow),
            approved_always: entries(approved_always),
            mode_set_at: 0,
        })
    }

    fn rules(v: Value) -> CompiledRules {
        let specs: Vec<RuleSpec> = serde_json::from_value(v).expect("specs");
        CompiledRules::compile(&specs).expect("compiles")
    }

    fn call(function_id: &str) -> Call<'_> {
        Call {
            function_id,
            arguments: None,
        }
    }

    fn with_args<'a>(function_id: &'a str, arguments: &'a Value) -> Call<'a> {
        Call {
            function_id,
            arguments: Some(arguments),
        }
    }

    /// `(verdict, rule index)` of a rule decision; panics on another basis.
    fn rule_hit(d: &Decision<'_>) -> (Verdict, usize) {
        match d.basis {
            Basis::Rule { index, .. } => (d.verdict, index),
            other => panic!("expected a rule decision, got {other:?}"),
        }
    }

    #[test]
    fn human_only_targets_are_denied_in_every_mode_whatever_else_allows() {
        let permissive = rules(json!(["*", "approval::*", "configuration::*"]));
        for mode in MODES {
            let s = settings(mode, &["*", "approval::*"], &["*", "approval::resolve"]);
            for fid in [
                "approval::resolve",
                "approval::set-mode",
                "configuration::set",
                "approval::",
            ] {
                let d = decide(&s, &permissive, &call(fid));
                assert_eq!(d.verdict, Verdict::Deny, "{fid} in {mode:?}");
                assert!(
                    matches!(d.basis, Basis::HumanOnly { .. }),
                    "{fid} in {mode:?}"
                );
                assert_eq!(d.rule_id(), Some(HUMAN_ONLY_RULE));
            }
        }
    }

    #[test]
    fn full_mode_allows_everything_but_the_human_only_surface() {
        let deny_all = rules(json!(["!*"]));
        let s = settings(Mode::Full, &[], &[]);
        let d = decide(&s, &deny_all, &call("shell::exec"));
        assert_eq!(d.verdict, Verdict::Allow);
        assert_eq!(d.basis, Basis::ModeFull);
        assert_eq!(d.rule_id(), None);
        assert_eq!(s.mode(), Mode::Full);
    }

    #[test]
    fn approved_always_allows_in_every_mode_before_the_rules() {
        let deny_all = rules(json!(["!*"]));
        for mode in [Mode::Manual, Mode::Auto] {
            let s = settings(mode, &[], &["shell::*", "shell::exec"]);
            let d = decide(&s, &deny_all, &call("shell::exec"));
            assert_eq!(d.verdict, Verdict::Allow, "{mode:?}");
            // The first entry in list order is reported.
            assert_eq!(
                d.basis,
                Basis::ApprovedAlways { entry: "shell::*" },
                "{mode:?}"
            );
            let d = decide(&s, &deny_all, &call("coder::run"));
            assert_eq!(rule_hit(&d), (Verdict::Deny, 0));
        }
        // Under full the mode decides first.
        let s = settings(Mode::Full, &[], &["shell::*"]);
        assert_eq!(
            decide(&s, &deny_all, &call("shell::exec")).basis,
            Basis::ModeFull
        );
    }

    #[test]
    fn always_allow_counts_only_under_auto() {
        let deny_all = rules(json!(["!*"]));
        let auto = settings(Mode::Auto, &["state::get"], &[]);
        let d = decide(&auto, &deny_all, &call("state::get"));
        assert_eq!(d.verdict, Verdict::Allow);
        assert_eq!(
            d.basis,
            Basis::AlwaysAllow {
                entry: "state::get"
            }
        );
        let manual = settings(Mode::Manual, &["state::get"], &[]);
        let d = decide(&manual, &deny_all, &call("state::get"));
        assert_eq!(rule_hit(&d), (Verdict::Deny, 0));
        // approved_always is consulted before always_allow.
        let both = settings(Mode::Auto, &["state::get"], &["state::*"]);
        let d = decide(&both, &deny_all, &call("state::get"));
        assert_eq!(d.basis, Basis::ApprovedAlways { entry: "state::*" });
    }

    #[test]
    fn every_mode_and_list_combination() {
        // Rule set: allow `r::allow`, deny `r::deny`, everything else holds.
        let rs = rules(json!(["r::allow", "!r::deny"]));
        for mode in MODES {
            for in_approved in [false, true] {
                for in_always in [false, true] {
                    for (fid, rule_verdict) in [
                        ("r::allow", Verdict::Allow),
                        ("r::deny", Verdict::Deny),
                        ("r::none", Verdict::Hold),
                    ] {
                        let approved: &[&str] = if in_approved { &[fid] } else { &[] };
                        let always: &[&str] = if in_always { &[fid] } else { &[] };
                        let s = settings(mode, always, approved);
                        let d = decide(&s, &rs, &call(fid));
                        let expected = match () {
                            _ if mode == Mode::Full => (Verdict::Allow, "full"),
                            _ if in_approved => (Verdict::Allow, "approved"),
                            _ if mode == Mode::Auto && in_always => (Verdict::Allow, "always"),
                            _ => (rule_verdict, "rules"),
                        };
                        let basis = match d.basis {
                            Basis::ModeFull => "full",
                            Basis::ApprovedAlways { .. } => "approved",
                            Basis::AlwaysAllow { .. } => "always",
                            Basis::Rule { .. } | Basis::NoMatch => "rules",
                            Basis::HumanOnly { .. } => "human",
                        };
                        assert_eq!(
                            (d.verdict, basis),
                            expected,
                            "{fid} mode={mode:?} approved={in_approved} always={in_always}"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn rules_first_match_wins_and_no_match_holds() {
        let rs = rules(json!(["!shell::rm", "shell::*", "!*::write", "state::*"]));
        let s = settings(Mode::Manual, &[], &[]);
        assert_eq!(
            rule_hit(&decide(&s, &rs, &call("shell::rm"))),
            (Verdict::Deny, 0)
        );
        assert_eq!(
            rule_hit(&decide(&s, &rs, &call("shell::ls"))),
            (Verdict::Allow, 1)
        );
        assert_eq!(
            rule_hit(&decide(&s, &rs, &call("shell::write"))),
            (Verdict::Allow, 1)
        );
        assert_eq!(
            rule_hit(&decide(&s, &rs, &call("state::write"))),
            (Verdict::Deny, 2)
        );
        assert_eq!(
            rule_hit(&decide(&s, &rs, &call("state::get"))),
            (Verdict::Allow, 3)
        );
        let d = decide(&s, &rs, &call("coder::run"));
        assert_eq!(d.verdict, Verdict::Hold);
        assert_eq!(d.basis, Basis::NoMatch);
        assert_eq!(d.rule_id(), None);
        let none = CompiledRules::empty();
        let d = decide(&s, &none, &call("anything"));
        assert_eq!((d.verdict, d.basis), (Verdict::Hold, Basis::NoMatch));
    }

    #[test]
    fn default_rules_deny_approval_and_hold_the_rest() {
        let rs = CompiledRules::compile(&crate::policy::default_rules()).expect("compiles");
        let s = settings(Mode::Manual, &[], &[]);
        // Human-only wins before the rule could.
        assert!(matches!(
            decide(&s, &rs, &call("approval::resolve")).basis,
            Basis::HumanOnly { .. }
        ));
        assert_eq!(decide(&s, &rs, &call("state::get")).verdict, Verdict::Hold);
    }

    #[test]
    fn rule_modes_scope_rules() {
        let rs = rules(json!([
            {"function": "a", "action": "deny", "modes": []},
            {"function": "a", "action": "allow", "modes": ["auto"]},
            {"function": "a", "action": "deny", "modes": ["manual"]},
            {"function": "b", "action": "allow", "modes": ["full"]},
            {"function": "b", "action": "deny"}
        ]));
        let manual = settings(Mode::Manual, &[], &[]);
        let auto = settings(Mode::Auto, &[], &[]);
        assert_eq!(
            rule_hit(&decide(&manual, &rs, &call("a"))),
            (Verdict::Deny, 2)
        );
        assert_eq!(
            rule_hit(&decide(&auto, &rs, &call("a"))),
            (Verdict::Allow, 1)
        );
        // A full-only rule never gets to apply: full mode allows at step 2.
        assert_eq!(
            rule_hit(&decide(&manual, &rs, &call("b"))),
            (Verdict::Deny, 4)
        );
        assert_eq!(
            rule_hit(&decide(&auto, &rs, &call("b"))),
            (Verdict::Deny, 4)
        );
    }

    #[test]
    fn args_rules_need_object_arguments_that_satisfy_every_constraint() {
        let rs = rules(json!([
            {"function": "shell::exec", "action": "deny", "rule_id": "no-force",
             "args": {"cmd": {"matches": "--force"}, "cwd": {"equals": "/prod"}}},
            {"function": "shell::exec", "action": "allow", "rule_id": "any-object", "args": {}},
            {"function": "shell::exec", "action": "deny", "rule_id": "fallback"}
        ]));
        let s = settings(Mode::Manual, &[], &[]);
        let both = json!({"cmd": "git push --force", "cwd": "/prod"});
        let d = decide(&s, &rs, &with_args("shell::exec", &both));
        assert_eq!(rule_hit(&d), (Verdict::Deny, 0));
        assert_eq!(d.rule_id(), Some("no-force"));
        // The first constraint in key order is reported.
        let Basis::Rule { constraint, .. } = d.basis else {
            panic!("rule basis")
        };
        let c = constraint.expect("constraint");
        assert_eq!(
            (c.field, c.operator, c.value),
            ("cmd", ConstraintOp::Matches, &json!("--force"))
        );
        let one = json!({"cmd": "git push --force", "cwd": "/dev"});
        assert_eq!(
            rule_hit(&decide(&s, &rs, &with_args("shell::exec", &one))),
            (Verdict::Allow, 1)
        );
        let empty = json!({});
        assert_eq!(
            rule_hit(&decide(&s, &rs, &with_args("shell::exec", &empty))),
            (Verdict::Allow, 1)
        );
        for not_object in [json!(["--force"]), json!("--force"), json!(null), json!(3)] {
            let d = decide(&s, &rs, &with_args("shell::exec", &not_object));
            assert_eq!(rule_hit(&d), (Verdict::Deny, 2), "{not_object}");
        }
        let d = decide(&s, &rs, &call("shell::exec"));
        assert_eq!(rule_hit(&d), (Verdict::Deny, 2));
        let Basis::Rule { constraint, .. } = d.basis else {
            panic!("rule basis")
        };
        assert_eq!(constraint, None);
    }

    #[test]
    fn args_pointer_and_missing_fields() {
        let rs = rules(json!([
            {"function": "f", "action": "deny", "args": {"/opts/force": {"equals": true}}},
            {"function": "f", "action": "deny", "rule_id": "no-mode", "args": {"mode": {"equals": null}}},
            {"function": "f", "action": "allow"}
        ]));
        let s = settings(Mode::Auto, &[], &[]);
        let forced = json!({"opts": {"force": true}, "mode": "x"});
        assert_eq!(
            rule_hit(&decide(&s, &rs, &with_args("f", &forced))),
            (Verdict::Deny, 0)
        );
        let one = json!({"opts": {"force": 1}, "mode": "x"});
        assert_eq!(
            rule_hit(&decide(&s, &rs, &with_args("f", &one))),
            (Verdict::Allow, 2)
        );
        let missing = json!({"opts": {}});
        assert_eq!(
            rule_hit(&decide(&s, &rs, &with_args("f", &missing))),
            (Verdict::Deny, 1)
        );
    }

    #[test]
    fn glob_rules_span_namespaces() {
        let rs = rules(json!([
            "!*::delete",
            "!{shell,coder}::*",
            "state::[gs]et",
            "mcp::*"
        ]));
        let s = settings(Mode::Manual, &[], &[]);
        assert_eq!(
            rule_hit(&decide(&s, &rs, &call("a::b::delete"))),
            (Verdict::Deny, 0)
        );
        assert_eq!(
            rule_hit(&decide(&s, &rs, &call("coder::x::y"))),
            (Verdict::Deny, 1)
        );
        assert_eq!(
            rule_hit(&decide(&s, &rs, &call("state::set"))),
            (Verdict::Allow, 2)
        );
        assert_eq!(decide(&s, &rs, &call("state::list")).verdict, Verdict::Hold);
        assert_eq!(
            rule_hit(&decide(&s, &rs, &call("mcp::"))),
            (Verdict::Allow, 3)
        );
        assert_eq!(
            rule_hit(&decide(&s, &rs, &call("mcp::srv/tool"))),
            (Verdict::Allow, 3)
        );
        assert_eq!(decide(&s, &rs, &call("mcp:")).verdict, Verdict::Hold);
    }

    #[test]
    fn entries_that_are_not_valid_globs_match_their_exact_text() {
        let rs = CompiledRules::empty();
        let s = settings(Mode::Auto, &["weird::[", "ok::*"], &["{a,b"]);
        assert_eq!(
            decide(&s, &rs, &call("weird::[")).basis,
            Basis::AlwaysAllow { entry: "weird::[" }
        );
        assert_eq!(decide(&s, &rs, &call("weird::x")).verdict, Verdict::Hold);
        assert_eq!(
            decide(&s, &rs, &call("{a,b")).basis,
            Basis::ApprovedAlways { entry: "{a,b" }
        );
        assert_eq!(decide(&s, &rs, &call("a")).verdict, Verdict::Hold);
        assert_eq!(
            decide(&s, &rs, &call("ok::go")).basis,
            Basis::AlwaysAllow { entry: "ok::*" }
        );
    }

    #[test]
    fn entry_ids_without_wildcards_are_exact() {
        let rs = CompiledRules::empty();
        let s = settings(Mode::Auto, &["state::get"], &[]);
        assert_eq!(decide(&s, &rs, &call("state::get")).verdict, Verdict::Allow);
        for other in [
            "state::get2",
            "state::ge",
            "xstate::get",
            "STATE::GET",
            "state::get ",
        ] {
            assert_eq!(
                decide(&s, &rs, &call(other)).verdict,
                Verdict::Hold,
                "{other}"
            );
        }
    }

    #[test]
    fn verdict_and_operator_spellings() {
        assert_eq!(Verdict::Allow.as_str(), "allow");
        assert_eq!(Verdict::Deny.as_str(), "deny");
        assert_eq!(Verdict::Hold.as_str(), "hold");
        assert_eq!(ConstraintOp::Equals.as_str(), "equals");
        assert_eq!(ConstraintOp::Matches.as_str(), "matches");
        assert_eq!(
            serde_json::to_value(ConstraintOp::Matches).ok(),
            Some(json!("matches"))
        );
    }

    #[test]
    fn compiled_settings_are_shareable_across_threads() {
        fn assert_send_sync<T: Send + Sync>() {}
        assert_send_sync::<CompiledSettings>();
    }
}
