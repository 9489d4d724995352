//! The ladder's unit tests (`super`): every step, both precedences, traces.

use serde_json::json;

use super::*;
use crate::policy::rules::RuleSpec;
use crate::policy::trace::{Outcome, Step};
use crate::terms::ApprovalSettings;
use crate::terms::ConstraintOp;
use crate::terms::GrantedBy;

/// `("approved" | "always", entry id)` of a grant decision.
fn granted<'a>(d: &Decision<'a>) -> Option<(&'static str, &'a str)> {
    match d.basis {
        Basis::ApprovedAlways { entry, .. } => Some(("approved", &entry.function_id)),
        Basis::AlwaysAllow { entry, .. } => Some(("always", &entry.function_id)),
        Basis::Seed { entry, .. } => Some(("seed", &entry.function_id)),
        _ => None,
    }
}

const MODES: [Mode; 3] = [Mode::Manual, Mode::Auto, Mode::Full];

fn entries(ids: &[&str]) -> Vec<Entry> {
    ids.iter()
        .map(|id| Entry::new(*id, 0, GrantedBy::UserClick))
        .collect()
}

fn settings(mode: Mode, always_allow: &[&str], approved_always: &[&str]) -> CompiledSettings {
    CompiledSettings::new(&ApprovalSettings {
        always_allow: entries(always_allow),
        approved_always: entries(approved_always),
        ..ApprovalSettings::new(mode)
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
        assert_eq!(granted(&d), Some(("approved", "shell::*")), "{mode:?}");
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
    assert_eq!(granted(&d), Some(("always", "state::get")));
    let manual = settings(Mode::Manual, &["state::get"], &[]);
    let d = decide(&manual, &deny_all, &call("state::get"));
    assert_eq!(rule_hit(&d), (Verdict::Deny, 0));
    // approved_always is consulted before always_allow.
    let both = settings(Mode::Auto, &["state::get"], &["state::*"]);
    let d = decide(&both, &deny_all, &call("state::get"));
    assert_eq!(granted(&d), Some(("approved", "state::*")));
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
                        Basis::Ask { .. } => "ask",
                        Basis::Seed { .. } => "seed",
                        Basis::Lockdown => "lockdown",
                        Basis::WideningRoot { .. } => "widening",
                        Basis::ProtectedPath { .. } => "protected",
                        Basis::ImplicitAsk => "implicit",
                        Basis::Subscription { .. } => "subscription",
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
    // In auto mode the rule's seed allows first.
    assert!(matches!(
        decide(&auto, &rs, &call("a")).basis,
        Basis::Seed { rule: 1, .. }
    ));
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
    // A deny rule reads arguments that are not an object as matching;
    // the allow rule with `args` never matches them.
    for not_object in [json!(["--force"]), json!("--force"), json!(null), json!(3)] {
        let d = decide(&s, &rs, &with_args("shell::exec", &not_object));
        assert_eq!(rule_hit(&d), (Verdict::Deny, 0), "{not_object}");
    }
    let d = decide(&s, &rs, &call("shell::exec"));
    assert_eq!(rule_hit(&d), (Verdict::Deny, 0));
    let allow_only = rules(json!([
        {"function": "shell::exec", "action": "allow", "args": {}},
        {"function": "shell::exec", "action": "deny", "rule_id": "fallback"}
    ]));
    let d = decide(&s, &allow_only, &call("shell::exec"));
    assert_eq!(rule_hit(&d), (Verdict::Deny, 1));
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
        granted(&decide(&s, &rs, &call("weird::["))),
        Some(("always", "weird::["))
    );
    assert_eq!(decide(&s, &rs, &call("weird::x")).verdict, Verdict::Hold);
    assert_eq!(
        granted(&decide(&s, &rs, &call("{a,b"))),
        Some(("approved", "{a,b"))
    );
    assert_eq!(decide(&s, &rs, &call("a")).verdict, Verdict::Hold);
    assert_eq!(
        granted(&decide(&s, &rs, &call("ok::go"))),
        Some(("always", "ok::*"))
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

fn rules_with(v: Value, precedence: RulePrecedence) -> CompiledRules {
    rules(v).with_precedence(precedence)
}

fn bounded(
    id: &str,
    expires_at: Option<u64>,
    uses_left: Option<u64>,
    args: Option<Value>,
) -> Entry {
    Entry {
        expires_at,
        uses_left,
        args: args.map(|a| serde_json::from_value(a).expect("args")),
        ..Entry::new(id, 0, GrantedBy::UserClick)
    }
}

fn with_entries(
    mode: Mode,
    always_allow: Vec<Entry>,
    approved_always: Vec<Entry>,
) -> CompiledSettings {
    CompiledSettings::new(&ApprovalSettings {
        always_allow,
        approved_always,
        ..ApprovalSettings::new(mode)
    })
}

fn at(now: u64) -> DecideOptions<'static> {
    DecideOptions {
        now_ms: Some(now),
        ..DecideOptions::default()
    }
}

#[test]
fn ask_rules_hold_before_full_mode_and_every_grant_wherever_they_stand() {
    let rs = rules(json!([
        "deploy::*",
        "!deploy::staging",
        "?deploy::*",
        {"function": "db::*", "action": "ask", "rule_id": "db", "modes": ["manual", "auto"],
         "timeout_ms": 60000, "escalate_after_ms": 30000},
        {"function": "shell::exec", "action": "ask", "args": {"cmd": {"prefix": "rm "}}}
    ]));
    for mode in MODES {
        let s = settings(mode, &["*"], &["*"]);
        let d = decide(&s, &rs, &call("deploy::prod"));
        assert_eq!(d.verdict, Verdict::Hold, "{mode:?}");
        assert!(
            matches!(
                d.basis,
                Basis::Ask {
                    index: 2,
                    rule_id: "?deploy::*",
                    timeout_ms: None,
                    ..
                }
            ),
            "{mode:?}"
        );
        // The ask rule is checked before the earlier deny too.
        assert_eq!(
            decide(&s, &rs, &call("deploy::staging")).verdict,
            Verdict::Hold
        );
        let rm = json!({"cmd": "rm -rf /"});
        let ls = json!({"cmd": "ls"});
        assert_eq!(
            decide(&s, &rs, &with_args("shell::exec", &rm)).verdict,
            Verdict::Hold
        );
        assert_eq!(
            decide(&s, &rs, &with_args("shell::exec", &ls)).verdict,
            Verdict::Allow
        );
    }
    // `modes` narrows an ask rule: db::* asks in manual and auto only.
    let full = settings(Mode::Full, &[], &[]);
    assert_eq!(decide(&full, &rs, &call("db::drop")).basis, Basis::ModeFull);
    let manual = settings(Mode::Manual, &[], &["db::*"]);
    let d = decide(&manual, &rs, &call("db::drop"));
    assert_eq!(
        d.basis,
        Basis::Ask {
            index: 3,
            rule_id: "db",
            timeout_ms: Some(60000),
            escalate_after_ms: Some(30000),
            constraint: None,
            command: None,
        }
    );
    // The guard still comes first.
    let guarded = rules(json!(["?approval::*"]));
    let d = decide(&full, &guarded, &call("approval::resolve"));
    assert!(matches!(d.basis, Basis::HumanOnly { .. }));
}

#[test]
fn deny_ask_allow_lets_a_deny_rule_beat_full_mode_and_grants() {
    let spec = json!(["shell::*", "?shell::deploy", "!shell::rm", "!*::write"]);
    let first = rules_with(spec.clone(), RulePrecedence::FirstMatch);
    let dap = rules_with(spec, RulePrecedence::DenyAskAllow);
    for mode in MODES {
        let s = settings(mode, &["*"], &["*"]);
        let d = decide(&s, &dap, &call("shell::rm"));
        assert_eq!(rule_hit(&d), (Verdict::Deny, 2), "{mode:?}");
        let d = decide(&s, &dap, &call("shell::write"));
        assert_eq!(rule_hit(&d), (Verdict::Deny, 3), "{mode:?}");
        assert_eq!(
            decide(&s, &dap, &call("shell::deploy")).verdict,
            Verdict::Hold
        );
        // Under first_match the mode and grants come first.
        assert_eq!(
            decide(&s, &first, &call("shell::rm")).verdict,
            Verdict::Allow,
            "{mode:?}"
        );
    }
    // With nothing else deciding, allow rules follow, then hold.
    let s = settings(Mode::Manual, &[], &[]);
    assert_eq!(
        rule_hit(&decide(&s, &dap, &call("shell::ls"))),
        (Verdict::Allow, 0)
    );
    assert_eq!(
        rule_hit(&decide(&s, &first, &call("shell::rm"))),
        (Verdict::Allow, 0)
    );
    assert_eq!(decide(&s, &dap, &call("coder::run")).basis, Basis::NoMatch);
    // An earlier allow does not shadow a later deny.
    let d = decide(&s, &dap, &call("shell::write"));
    assert_eq!(rule_hit(&d), (Verdict::Deny, 3));
}

#[test]
fn a_seed_entry_never_beats_an_earlier_deny_rule() {
    // `!shell::rm`, then an auto allow of shell::* (whose seed matches).
    let rs = rules(
        json!(["!shell::rm", {"function": "shell::*", "action": "allow", "modes": ["auto"]}]),
    );
    let s = with_entries(Mode::Auto, vec![], vec![]);
    assert_eq!(
        rule_hit(&decide(&s, &rs, &call("shell::rm"))),
        (Verdict::Deny, 0)
    );
    let d = decide(&s, &rs, &call("shell::ls"));
    assert_eq!(granted(&d), Some(("seed", "shell::*")));
    assert!(matches!(d.basis, Basis::Seed { rule: 1, .. }));
    // A human's entry still wins (a remembered decision).
    let user = Entry::new("shell::*", 0, GrantedBy::UserClick);
    let s = with_entries(Mode::Auto, vec![user], vec![]);
    let d = decide(&s, &rs, &call("shell::rm"));
    assert_eq!(
        d.basis,
        Basis::AlwaysAllow {
            entry: &s.always_allow.entries[0],
            slot: 0
        }
    );
}

#[test]
fn rule_21_3_a_stored_seed_entry_is_ignored_and_a_removed_rule_takes_its_seed() {
    // A record stored before seeds were derived, whose rule is gone.
    let stale = Entry::new("shell::*", 0, GrantedBy::Seed);
    let s = with_entries(Mode::Auto, vec![stale.clone()], vec![stale]);
    let none = CompiledRules::empty();
    let d = decide(&s, &none, &call("shell::exec"));
    assert_eq!((d.verdict, d.basis), (Verdict::Hold, Basis::NoMatch));
    // With the rule in force, the seed is its.
    let rs = rules(json!([{"function": "shell::*", "action": "allow", "modes": ["auto"]}]));
    assert_eq!(
        granted(&decide(&s, &rs, &call("shell::exec"))),
        Some(("seed", "shell::*"))
    );
    // Seeds are always_allow entries: honoured in auto mode only.
    let manual = with_entries(Mode::Manual, vec![], vec![]);
    assert_eq!(
        decide(&manual, &rs, &call("shell::exec")).basis,
        Basis::NoMatch
    );
}

#[test]
fn rule_21_3_a_suppressed_seed_is_passed_over() {
    let rs = rules(json!([
        {"function": "shell::*", "action": "allow", "modes": ["auto"]},
        {"function": "state::get", "action": "allow", "modes": ["auto"]}
    ]));
    let s = CompiledSettings::new(&ApprovalSettings {
        suppressed_seeds: vec!["shell::*".into()],
        ..ApprovalSettings::new(Mode::Auto)
    });
    assert_eq!(s.mode(), Mode::Auto);
    // The rule itself still decides in auto mode; the seed does not.
    let d = decide(&s, &rs, &call("shell::exec"));
    assert_eq!(rule_hit(&d), (Verdict::Allow, 0));
    assert_eq!(
        granted(&decide(&s, &rs, &call("state::get"))),
        Some(("seed", "state::get"))
    );
    let mut trace = Vec::new();
    let options = DecideOptions {
        trace: Some(&mut trace),
        ..DecideOptions::default()
    };
    decide_with(&s, &rs, &call("shell::exec"), options);
    assert!(
        trace.iter().any(|t| t.step == Step::AlwaysAllow
            && t.detail.as_deref()
                == Some("seed entry shell::* passed over: removed from this session")),
        "{trace:?}"
    );
}

#[test]
fn rule_21_2_an_exact_entry_matches_only_its_own_id() {
    let exact = |id: &str| Entry {
        pattern: false,
        ..Entry::new(id, 0, GrantedBy::UserClick)
    };
    let s = with_entries(
        Mode::Auto,
        vec![exact("fs::*")],
        vec![exact("*"), exact("shell::[ab]"), exact("{a,b")],
    );
    let rs = CompiledRules::empty();
    for other in ["shell::exec", "shell::a", "a", "fs::read", "x"] {
        assert_eq!(
            decide(&s, &rs, &call(other)).basis,
            Basis::NoMatch,
            "{other}"
        );
    }
    for own in ["*", "shell::[ab]", "{a,b"] {
        assert_eq!(
            granted(&decide(&s, &rs, &call(own))),
            Some(("approved", own))
        );
    }
    assert_eq!(
        granted(&decide(&s, &rs, &call("fs::*"))),
        Some(("always", "fs::*"))
    );
    // An entry that is a pattern (stored without the field) stays a glob.
    let glob = with_entries(Mode::Manual, vec![], entries(&["shell::*"]));
    assert_eq!(
        granted(&decide(&glob, &rs, &call("shell::exec"))),
        Some(("approved", "shell::*"))
    );
}

#[test]
fn rule_21_1_the_lockdown_holds_every_call_but_the_human_only_surface() {
    let lockdown = CompiledRules::lockdown();
    let (guarded, _) = CompiledRules::lockdown().with_extra_guards(&["ops::*".to_owned()]);
    for mode in MODES {
        let s = settings(mode, &["*"], &["*"]);
        for fid in ["shell::exec", "state::get", "*", "coder::run"] {
            let d = decide(&s, &lockdown, &call(fid));
            assert_eq!(
                (d.verdict, d.basis),
                (Verdict::Hold, Basis::Lockdown),
                "{fid} {mode:?}"
            );
            assert_eq!(d.rule_id(), Some(LOCKDOWN_RULE));
        }
        let d = decide(&s, &lockdown, &call("approval::resolve"));
        assert!(matches!(d.basis, Basis::HumanOnly { .. }), "{mode:?}");
        let d = decide(&s, &guarded, &call("ops::restart"));
        assert!(matches!(d.basis, Basis::HumanOnly { .. }), "{mode:?}");
    }
    let s = settings(Mode::Full, &[], &[]);
    let mut trace = Vec::new();
    let options = DecideOptions {
        trace: Some(&mut trace),
        ..DecideOptions::default()
    };
    decide_with(&s, &lockdown, &call("shell::exec"), options);
    let steps: Vec<_> = trace.iter().map(|t| (t.step, t.outcome)).collect();
    assert_eq!(
        steps,
        vec![
            (Step::HumanOnly, Outcome::Pass),
            (Step::Lockdown, Outcome::Hold)
        ]
    );
}

#[test]
fn rule_21_4_a_deny_rule_on_a_command_meets_its_argv_array() {
    let rs = rules(json!([
        {"function": "shell::exec", "action": "deny", "args": {"command": {"matches": "rm -rf"}}},
        "shell::exec"
    ]));
    let s = settings(Mode::Manual, &[], &[]);
    let argv = json!({"command": ["rm", "-rf", "/"]});
    assert_eq!(
        rule_hit(&decide(&s, &rs, &with_args("shell::exec", &argv))),
        (Verdict::Deny, 0)
    );
    for odd in [json!("rm -rf /"), json!(["rm", "-rf"]), json!(null)] {
        assert_eq!(
            rule_hit(&decide(&s, &rs, &with_args("shell::exec", &odd))),
            (Verdict::Deny, 0),
            "{odd}"
        );
    }
    let ls = json!({"command": ["ls", "-la"]});
    assert_eq!(
        rule_hit(&decide(&s, &rs, &with_args("shell::exec", &ls))),
        (Verdict::Allow, 1)
    );
}

#[test]
fn rule_21_4_grants_read_arguments_strictly() {
    let rs = CompiledRules::empty();
    let s = with_entries(
        Mode::Manual,
        vec![],
        vec![
            bounded(
                "shell::exec",
                None,
                None,
                Some(json!({"cmd": {"prefix": "git status"}})),
            ),
            bounded("n::f", None, None, Some(json!({"n": {"equals": 1}}))),
        ],
    );
    let allowed =
        |fid: &str, args: Value| decide(&s, &rs, &with_args(fid, &args)).verdict == Verdict::Allow;
    assert!(allowed("shell::exec", json!({"cmd": "git status --short"})));
    assert!(allowed("shell::exec", json!({"cmd": ["git", "status"]})));
    assert!(!allowed(
        "shell::exec",
        json!({"cmd": "git status; curl x | sh"})
    ));
    assert!(!allowed(
        "shell::exec",
        json!({"cmd": ["git status", "&&", "id"]})
    ));
    assert!(!allowed("shell::exec", json!("git status")));
    assert!(allowed("n::f", json!({"n": 1})));
    assert!(!allowed("n::f", json!({"n": 1.0})));
    assert!(!allowed("n::f", json!({"n": "1"})));
}

#[test]
fn bounded_grants_apply_until_they_expire_or_are_used_up() {
    let rs = CompiledRules::empty();
    let s = with_entries(
        Mode::Auto,
        vec![
            bounded("a", Some(100), None, None),
            bounded("b", None, Some(0), None),
        ],
        vec![bounded("c", None, Some(2), None)],
    );
    let decide_at = |fid: &'static str, now| decide_with(&s, &rs, &call(fid), at(now));
    assert_eq!(decide_at("a", 99).verdict, Verdict::Allow);
    assert_eq!(decide_at("a", 100).verdict, Verdict::Hold);
    assert_eq!(decide_at("b", 0).verdict, Verdict::Hold);
    let d = decide_at("c", 0);
    assert_eq!(d.verdict, Verdict::Allow);
    // A uses-bounded grant asks for a use to be written; others do not.
    assert_eq!(
        d.use_to_spend().map(|(g, e)| (g, e.function_id.as_str())),
        Some((
            GrantRef {
                list: GrantList::ApprovedAlways,
                slot: 0
            },
            "c"
        ))
    );
    assert_eq!(decide_at("a", 0).use_to_spend(), None);
    // Passed over (its use could not be written): the ladder goes on.
    let passed = [GrantRef {
        list: GrantList::ApprovedAlways,
        slot: 0,
    }];
    let options = DecideOptions {
        passed_over: &passed,
        ..at(0)
    };
    assert_eq!(
        decide_with(&s, &rs, &call("c"), options).basis,
        Basis::NoMatch
    );
}

#[test]
fn argument_scoped_grants_need_their_constraints() {
    let rs = rules(json!(["!shell::exec"]));
    let s = with_entries(
        Mode::Manual,
        vec![],
        vec![
            bounded(
                "shell::exec",
                None,
                None,
                Some(json!({"cmd": {"prefix": "git "}})),
            ),
            bounded(
                "shell::*",
                None,
                None,
                Some(json!({"/opts/dry": {"equals": true}})),
            ),
            bounded(
                "shell::bad",
                None,
                None,
                Some(json!({"cmd": {"matches": "("}})),
            ),
        ],
    );
    let git = json!({"cmd": "git status"});
    let dry = json!({"cmd": "rm -rf /", "opts": {"dry": true}});
    let rm = json!({"cmd": "rm -rf /"});
    assert_eq!(
        granted(&decide(&s, &rs, &with_args("shell::exec", &git))),
        Some(("approved", "shell::exec"))
    );
    assert_eq!(
        granted(&decide(&s, &rs, &with_args("shell::exec", &dry))),
        Some(("approved", "shell::*"))
    );
    assert_eq!(
        rule_hit(&decide(&s, &rs, &with_args("shell::exec", &rm))),
        (Verdict::Deny, 0)
    );
    assert_eq!(
        rule_hit(&decide(&s, &rs, &call("shell::exec"))),
        (Verdict::Deny, 0)
    );
    let any = json!({"cmd": "("});
    assert_eq!(
        decide(&s, &rs, &with_args("shell::bad", &any)).basis,
        Basis::NoMatch
    );
}

#[test]
fn the_trace_lists_every_step_considered_in_order() {
    let rs = rules(json!([
        "!shell::rm",
        {"function": "shell::exec", "action": "deny", "rule_id": "no-force",
         "args": {"cmd": {"matches": "--force"}}},
        {"function": "shell::*", "action": "allow", "modes": ["auto"]},
        "?deploy::*"
    ]));
    let seed = Entry::new("shell::*", 0, GrantedBy::Seed);
    let s = with_entries(
        Mode::Auto,
        vec![seed],
        vec![bounded("shell::exec", Some(5), None, None)],
    );
    let trace_of = |fid: &str, args: Option<&Value>| {
        let mut trace = Vec::new();
        let options = DecideOptions {
            trace: Some(&mut trace),
            ..at(10)
        };
        let d = decide_with(
            &s,
            &rs,
            &Call {
                function_id: fid,
                arguments: args,
            },
            options,
        );
        assert_eq!(
            d,
            decide_with(
                &s,
                &rs,
                &Call {
                    function_id: fid,
                    arguments: args
                },
                at(10)
            )
        );
        trace
            .into_iter()
            .map(|t| (t.step, t.outcome, t.detail.unwrap_or_default()))
            .collect::<Vec<_>>()
    };
    let force = json!({"cmd": "git push --force"});
    assert_eq!(
        trace_of("shell::exec", Some(&force)),
        vec![
            (Step::HumanOnly, Outcome::Pass, String::new()),
            (Step::Ask, Outcome::Pass, "no ask rule matches".into()),
            (Step::Mode, Outcome::Pass, "mode auto".into()),
            (
                Step::ApprovedAlways,
                Outcome::Pass,
                "entry shell::exec (expires at 5) passed over: expired".into()
            ),
            (
                Step::AlwaysAllow,
                Outcome::Pass,
                "seed entry shell::* passed over: a seed entry never beats a deny rule".into()
            ),
            (
                Step::Rule,
                Outcome::Deny,
                "rule 1 no-force (deny) matched on cmd matches \"--force\"".into()
            ),
        ]
    );
    let ls = json!({"cmd": "ls"});
    let steps = trace_of("shell::exec", Some(&ls));
    assert_eq!(
        steps[4],
        (
            Step::AlwaysAllow,
            Outcome::Allow,
            "seed entry shell::* applies".into()
        )
    );
    assert_eq!(steps.len(), 5);
    let steps = trace_of("shell::cat", None);
    assert_eq!(
        steps[3],
        (
            Step::ApprovedAlways,
            Outcome::Pass,
            "no entry matches".into()
        )
    );
    let steps = trace_of("deploy::prod", None);
    assert_eq!(
        steps.last(),
        Some(&(
            Step::Ask,
            Outcome::Hold,
            "rule 3 ?deploy::* (ask) matched".into()
        ))
    );
    let steps = trace_of("coder::run", None);
    assert_eq!(
        steps[4..],
        [
            (Step::AlwaysAllow, Outcome::Pass, "no entry matches".into()),
            (Step::Rule, Outcome::Pass, "no rule matches".into()),
            (
                Step::Default,
                Outcome::Hold,
                "no rule decided: a human decides".into()
            ),
        ]
    );
    // Rules whose glob matched but that did not apply are listed with why.
    let manual = with_entries(Mode::Manual, vec![], vec![]);
    let mut trace = Vec::new();
    let options = DecideOptions {
        trace: Some(&mut trace),
        ..DecideOptions::default()
    };
    decide_with(&manual, &rs, &with_args("shell::exec", &ls), options);
    let details: Vec<_> = trace
        .iter()
        .map(|t| (t.step, t.outcome, t.detail.clone().unwrap_or_default()))
        .collect();
    assert_eq!(
        details[4..],
        [
            (
                Step::AlwaysAllow,
                Outcome::Pass,
                "mode manual: always_allow is honoured in auto mode only".into()
            ),
            (
                Step::Rule,
                Outcome::Pass,
                "rule 1 no-force (deny) does not apply: cmd matches \"--force\" does not hold"
                    .into()
            ),
            (
                Step::Rule,
                Outcome::Pass,
                "rule 2 shell::* (allow) does not apply in mode manual".into()
            ),
            (
                Step::Default,
                Outcome::Hold,
                "no rule decided: a human decides".into()
            ),
        ]
    );
    // The guard names its family and argument.
    let mut trace = Vec::new();
    let args = json!({"scope": "approval_settings"});
    let options = DecideOptions {
        trace: Some(&mut trace),
        ..DecideOptions::default()
    };
    decide_with(&manual, &rs, &with_args("state::set", &args), options);
    assert_eq!(trace.len(), 1);
    assert_eq!(
        trace[0].detail.as_deref(),
        Some("state scope approval_settings")
    );
}

#[test]
fn the_deny_ask_allow_trace_shows_the_deny_rules_first() {
    let rs = rules_with(
        json!(["shell::*", "!shell::rm"]),
        RulePrecedence::DenyAskAllow,
    );
    let s = settings(Mode::Full, &[], &[]);
    let mut trace = Vec::new();
    let options = DecideOptions {
        trace: Some(&mut trace),
        ..DecideOptions::default()
    };
    decide_with(&s, &rs, &call("shell::rm"), options);
    let steps: Vec<_> = trace.iter().map(|t| (t.step, t.outcome)).collect();
    assert_eq!(
        steps,
        vec![
            (Step::HumanOnly, Outcome::Pass),
            (Step::DenyRule, Outcome::Deny)
        ]
    );
    let mut trace = Vec::new();
    let options = DecideOptions {
        trace: Some(&mut trace),
        ..DecideOptions::default()
    };
    decide_with(
        &settings(Mode::Manual, &[], &[]),
        &rs,
        &call("shell::ls"),
        options,
    );
    let steps: Vec<_> = trace.iter().map(|t| (t.step, t.outcome)).collect();
    assert_eq!(
        steps,
        vec![
            (Step::HumanOnly, Outcome::Pass),
            (Step::DenyRule, Outcome::Pass),
            (Step::Ask, Outcome::Pass),
            (Step::Mode, Outcome::Pass),
            (Step::ApprovedAlways, Outcome::Pass),
            (Step::AlwaysAllow, Outcome::Pass),
            (Step::Rule, Outcome::Allow),
        ]
    );
}

#[test]
fn compiled_settings_are_shareable_across_threads() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<CompiledSettings>();
}

fn protected(rules: CompiledRules) -> CompiledRules {
    rules.with_protected(
        &["**/config/approval-gate*.yaml".into()],
        &["shell::*".into(), "coder::*".into()],
    )
}

#[test]
fn rule_29_3_a_protected_path_holds_in_every_mode_whatever_the_grants() {
    let rs = protected(rules(json!(["!approval::*", "shell::*", "coder::*"])));
    let args = json!({"path": "/opt/iii/config/approval-gate.yaml", "content": "x"});
    for mode in [Mode::Manual, Mode::Auto, Mode::Full] {
        let s = settings(mode, &["coder::write"], &["coder::write"]);
        let d = decide(&s, &rs, &with_args("coder::write", &args));
        assert_eq!(d.verdict, Verdict::Hold, "{mode:?}");
        assert!(
            matches!(d.basis, Basis::ProtectedPath { .. }),
            "{mode:?}: {d:?}"
        );
        assert_eq!(d.rule_id(), Some("protected_path"));
        // Not the default hold: a reviewer is never asked.
        assert!(!d.is_default_hold());
    }
    // Another path, or a function outside the list, follows the ladder.
    let other = json!({"path": "/opt/iii/src/lib.rs"});
    let s = settings(Mode::Full, &[], &[]);
    assert_eq!(
        decide(&s, &rs, &with_args("coder::write", &other)).verdict,
        Verdict::Allow
    );
    assert_eq!(
        decide(&s, &rs, &with_args("docs::write", &args)).basis,
        Basis::ModeFull,
        "a function outside protected_path_functions follows the ladder"
    );
}

#[test]
fn rule_29_3_deny_rules_still_deny_a_protected_path() {
    let args = json!({"command": "rm /opt/iii/config/approval-gate.yaml"});
    let deny =
        json!({"function": "shell::exec", "action": "deny", "args": {"command": {"prefix": "rm"}}});
    let ask =
        json!({"function": "shell::exec", "action": "ask", "args": {"command": {"prefix": "rm"}}});
    let s = settings(Mode::Full, &[], &[]);
    for precedence in [RulePrecedence::FirstMatch, RulePrecedence::DenyAskAllow] {
        let rs = protected(rules(json!([deny.clone()]))).with_precedence(precedence);
        let d = decide(&s, &rs, &with_args("shell::exec", &args));
        assert_eq!(d.verdict, Verdict::Deny, "{precedence:?}: {d:?}");
        // An ask rule does not turn it into an ask: the protected path holds first.
        let rs = protected(rules(json!([ask.clone()]))).with_precedence(precedence);
        let d = decide(&s, &rs, &with_args("shell::exec", &args));
        assert_eq!(d.rule_id(), Some("protected_path"), "{precedence:?}");
    }
}

#[test]
fn rule_27_4_harness_ask_is_allowed_by_an_implicit_rule_after_the_configured_ones() {
    // No rule names it: the implicit rule allows it, in every mode and both
    // precedences; any other unmatched call still holds.
    for precedence in [RulePrecedence::FirstMatch, RulePrecedence::DenyAskAllow] {
        let r = rules_with(json!(["shell::*"]), precedence);
        for mode in [Mode::Manual, Mode::Auto] {
            let s = settings(mode, &[], &[]);
            let d = decide(&s, &r, &call(HARNESS_ASK));
            assert_eq!(
                (d.verdict, d.basis),
                (Verdict::Allow, Basis::ImplicitAsk),
                "{precedence:?} {mode:?}"
            );
            assert_eq!(d.rule_id(), Some(IMPLICIT_ASK_RULE));
            let other = decide(&s, &r, &call("harness::asked"));
            assert_eq!(other.basis, Basis::NoMatch, "exactly harness::ask");
        }
    }
    // Any configured rule decides first: a deny, an ask rule, a rule limited
    // to other modes does not (and the implicit rule then allows).
    let s = settings(Mode::Auto, &[], &[]);
    let deny = rules(json!(["!harness::*"]));
    assert_eq!(
        rule_hit(&decide(&s, &deny, &call(HARNESS_ASK))),
        (Verdict::Deny, 0)
    );
    let ask = rules(json!(["?harness::ask"]));
    let held = decide(&s, &ask, &call(HARNESS_ASK));
    assert!(
        matches!(held.basis, Basis::Ask { index: 0, .. }),
        "{held:?}"
    );
    let elsewhere =
        rules(json!([{"function": "harness::ask", "action": "deny", "modes": ["manual"]}]));
    let d = decide(&s, &elsewhere, &call(HARNESS_ASK));
    assert_eq!(d.basis, Basis::ImplicitAsk);
    // Off in the lockdown.
    let lockdown = CompiledRules::lockdown();
    let d = decide(&s, &lockdown, &call(HARNESS_ASK));
    assert_eq!(d.basis, Basis::Lockdown);
    // The trace names it.
    let shell = rules(json!(["shell::*"]));
    let mut trace = Vec::new();
    let options = DecideOptions {
        trace: Some(&mut trace),
        ..DecideOptions::default()
    };
    decide_with(&s, &shell, &call(HARNESS_ASK), options);
    let last = trace.last().expect("a step");
    assert_eq!(
        (last.step, last.outcome),
        (Step::ImplicitAsk, Outcome::Allow)
    );
    assert!(!trace.iter().any(|t| t.step == Step::Default), "{trace:?}");
}
