//! An agent's subscription controls on a harness that mediates them
//! (`architecture/contract.md` § Today's harness, subscriptions): judged by
//! what they would call, never binding a hook or the gate's own types.

use serde_json::{json, Value};

use super::*;
use crate::policy::rules::RuleSpec;
use crate::policy::trace::{Outcome, Step};
use crate::terms::ApprovalSettings;

fn rules(v: Value) -> CompiledRules {
    let specs: Vec<RuleSpec> = serde_json::from_value(v).expect("specs");
    CompiledRules::compile(&specs).expect("compiles")
}

fn settings(mode: Mode) -> CompiledSettings {
    CompiledSettings::new(&ApprovalSettings::new(mode))
}

const REGISTER: &str = "engine::register_trigger";
const UNREGISTER: &str = "engine::unregister_trigger";

/// The decision on `function_id` with `arguments`, with the trace, mediated
/// or not.
fn judge<'r>(
    s: &'r CompiledSettings,
    rs: &'r CompiledRules,
    function_id: &'r str,
    arguments: &'r Value,
    mediated: bool,
) -> (Verdict, Option<&'r str>, String, Vec<TraceStep>) {
    let mut trace = Vec::new();
    let d = decide_with(
        s,
        rs,
        &Call {
            function_id,
            arguments: Some(arguments),
        },
        DecideOptions {
            subscriptions: mediated,
            trace: Some(&mut trace),
            ..DecideOptions::default()
        },
    );
    // The gate's ladder (no trace) agrees with the explained one.
    let silent = decide_with(
        s,
        rs,
        &Call {
            function_id,
            arguments: Some(arguments),
        },
        DecideOptions {
            subscriptions: mediated,
            ..DecideOptions::default()
        },
    );
    assert_eq!(silent.verdict, d.verdict);
    (d.verdict, d.rule_id(), d.reason(function_id), trace)
}

fn subscribe(target: &str) -> Value {
    json!({"trigger_type": "cron", "config": {"expression": "* * * * *"}, "function_id": target})
}

#[test]
fn rule_27_4_a_subscription_whose_target_the_policy_allows_is_allowed_in_every_mode() {
    let rs = rules(json!(["!approval::*", "demo::tick"]));
    for mode in [Mode::Manual, Mode::Auto, Mode::Full] {
        let s = settings(mode);
        let args = subscribe("demo::tick");
        let (verdict, rule, reason, trace) = judge(&s, &rs, REGISTER, &args, true);
        assert_eq!(verdict, Verdict::Allow, "{mode:?}: {reason}");
        assert_eq!(rule, Some("subscription"));
        assert!(reason.contains("demo::tick"), "{reason}");
        let last = trace.last().expect("steps");
        assert_eq!(
            (last.step, last.outcome),
            (Step::Subscription, Outcome::Allow)
        );
        // Not mediated (another harness, or none): the guard refuses it.
        let (verdict, rule, _, _) = judge(&s, &rs, REGISTER, &args, false);
        assert_eq!((verdict, rule), (Verdict::Deny, Some(HUMAN_ONLY_RULE)));
    }
}

#[test]
fn rule_27_4_a_target_that_is_not_allowed_is_refused_with_its_verdict() {
    let rs = rules(json!([
        "!approval::*",
        "demo::tick",
        "!demo::drop",
        {"function": "demo::ask", "action": "ask"}
    ]));
    let s = settings(Mode::Manual);
    for (target, says) in [
        ("demo::other", "not allowed without a human"),
        ("demo::ask", "not allowed without a human"),
        ("demo::drop", "denied"),
        ("approval::resolve", "denied"),
        ("harness::ask", "denied"),
        ("harness::function::trigger", "denied"),
        (REGISTER, "denied"),
        ("", "denied"),
    ] {
        let args = subscribe(target);
        let (verdict, rule, reason, trace) = judge(&s, &rs, REGISTER, &args, true);
        assert_eq!(verdict, Verdict::Deny, "{target}: {reason}");
        assert_eq!(rule, Some("subscription_target"), "{target}");
        assert!(
            reason.starts_with("Permission denied by policy:"),
            "{reason}"
        );
        assert!(reason.contains(says), "{target}: {reason}");
        let last = trace.last().expect("steps");
        assert_eq!(
            (last.step, last.outcome),
            (Step::Subscription, Outcome::Deny)
        );
    }
    // In full mode an unruled target is allowed; an ask rule still refuses
    // it (a human floor), and so does a deny rule under `deny_ask_allow`.
    let full = settings(Mode::Full);
    let (verdict, ..) = judge(&full, &rs, REGISTER, &subscribe("demo::other"), true);
    assert_eq!(verdict, Verdict::Allow);
    let (verdict, ..) = judge(&full, &rs, REGISTER, &subscribe("demo::ask"), true);
    assert_eq!(verdict, Verdict::Deny);
    let strict =
        rules(json!(["!approval::*", "!demo::drop"])).with_precedence(RulePrecedence::DenyAskAllow);
    let (verdict, ..) = judge(&full, &strict, REGISTER, &subscribe("demo::drop"), true);
    assert_eq!(verdict, Verdict::Deny);
    let (verdict, ..) = judge(&full, &strict, REGISTER, &subscribe("demo::other"), true);
    assert_eq!(verdict, Verdict::Allow);
}

#[test]
fn rule_27_4_every_condition_must_be_allowed_too_and_the_payload_is_judged() {
    let rs = rules(json!([
        "!approval::*",
        "demo::tick",
        "demo::check",
        {"function": "demo::write", "action": "deny", "args": {"path": {"prefix": "/etc"}}},
        "demo::write"
    ]));
    let s = settings(Mode::Manual);
    let args = json!({"trigger_type": "queue", "function_id": "demo::tick",
                      "conditions": [{"function_id": "demo::check"}, {"function_id": "demo::gate"}]});
    let (verdict, rule, reason, _) = judge(&s, &rs, REGISTER, &args, true);
    assert_eq!(
        (verdict, rule),
        (Verdict::Deny, Some("subscription_target"))
    );
    assert!(reason.contains("demo::gate"), "{reason}");
    let args = json!({"trigger_type": "queue", "function_id": "demo::tick",
                      "conditions": [{"function_id": "demo::check"}]});
    assert_eq!(judge(&s, &rs, REGISTER, &args, true).0, Verdict::Allow);
    // The payload the target would get is what the rules read.
    let args = json!({"trigger_type": "cron", "target": {"function_id": "demo::write", "payload": {"path": "/etc/passwd"}}});
    assert_eq!(judge(&s, &rs, REGISTER, &args, true).0, Verdict::Deny);
    let args = json!({"trigger_type": "cron", "target": {"function_id": "demo::write", "payload": {"path": "/tmp/x"}}});
    assert_eq!(judge(&s, &rs, REGISTER, &args, true).0, Verdict::Allow);
}

#[test]
fn rule_27_4_no_hook_type_and_none_of_the_gates_types_can_be_bound() {
    let rs = rules(json!(["!approval::*", "*"]));
    let s = settings(Mode::Full);
    for trigger_type in [
        "harness::hook::pre-trigger",
        "harness::hook::post-trigger",
        "harness::hook::post-turn",
        "Harness::Hook::Pre-Trigger",
        "approval::pending-created",
        "configuration::changed",
        "console:script",
        "engine::functions-available",
    ] {
        let args = json!({"trigger_type": trigger_type, "function_id": "demo::tick"});
        let (verdict, rule, _, trace) = judge(&s, &rs, REGISTER, &args, true);
        assert_eq!(
            (verdict, rule),
            (Verdict::Deny, Some(HUMAN_ONLY_RULE)),
            "{trigger_type}"
        );
        assert_eq!(trace[0].step, Step::HumanOnly);
        assert_eq!(trace[0].outcome, Outcome::Deny);
    }
    // A malformed request stays human-only too.
    for args in [json!({}), json!({"trigger_type": 1}), json!([])] {
        let (verdict, rule, ..) = judge(&s, &rs, REGISTER, &args, true);
        assert_eq!(
            (verdict, rule),
            (Verdict::Deny, Some(HUMAN_ONLY_RULE)),
            "{args}"
        );
    }
}

#[test]
fn rule_27_4_rules_on_the_control_itself_stand_and_the_operators_guard_wins() {
    let s = settings(Mode::Manual);
    let args = subscribe("demo::tick");
    let deny = rules(json!(["!approval::*", "!engine::*", "*"]));
    let (verdict, rule, ..) = judge(&s, &deny, REGISTER, &args, true);
    assert_eq!(verdict, Verdict::Deny);
    assert_ne!(rule, Some("subscription"));
    let ask = rules(
        json!(["!approval::*", {"function": "engine::register_trigger", "action": "ask"}, "*"]),
    );
    let (verdict, ..) = judge(&s, &ask, REGISTER, &args, true);
    assert_eq!(verdict, Verdict::Hold);
    let (guarded, errors) = rules(json!(["!approval::*", "*"]))
        .with_extra_guards(&["engine::register_trigger".to_owned()]);
    assert!(errors.is_empty());
    let (verdict, rule, ..) = judge(&s, &guarded, REGISTER, &args, true);
    assert_eq!((verdict, rule), (Verdict::Deny, Some(HUMAN_ONLY_RULE)));
    // The lockdown holds it, as every other call.
    let lockdown = CompiledRules::lockdown();
    let (verdict, rule, ..) = judge(&s, &lockdown, REGISTER, &args, true);
    assert_eq!((verdict, rule), (Verdict::Hold, Some(LOCKDOWN_RULE)));
}

#[test]
fn rule_27_4_a_wake_and_an_unsubscribe_call_nothing() {
    let rs = rules(json!(["!approval::*"]));
    let s = settings(Mode::Manual);
    let wake = json!({"trigger_type": "cron", "config": {"expression": "0 * * * *"}});
    let (verdict, rule, ..) = judge(&s, &rs, REGISTER, &wake, true);
    assert_eq!((verdict, rule), (Verdict::Allow, Some("subscription")));
    let unsubscribe = json!({"id": "sub_1"});
    let (verdict, rule, ..) = judge(&s, &rs, UNREGISTER, &unsubscribe, true);
    assert_eq!((verdict, rule), (Verdict::Allow, Some("subscription")));
    let (verdict, rule, ..) = judge(&s, &rs, UNREGISTER, &unsubscribe, false);
    assert_eq!((verdict, rule), (Verdict::Deny, Some(HUMAN_ONLY_RULE)));
    let numeric = json!({"id": 1});
    let (verdict, rule, ..) = judge(&s, &rs, UNREGISTER, &numeric, true);
    assert_eq!((verdict, rule), (Verdict::Deny, Some(HUMAN_ONLY_RULE)));
}

#[test]
fn rule_27_4_a_target_whose_command_would_be_read_is_not_bound_unattended() {
    let rs = rules(json!(["!approval::*", "shell::*"])).with_protected(
        &["**/config/approval-gate*.yaml".into()],
        &["shell::*".into()],
    );
    let s = settings(Mode::Full);
    let args = json!({"trigger_type": "cron", "target": {"function_id": "shell::exec", "payload": {"command": "ls"}}});
    let (verdict, rule, reason, _) = judge(&s, &rs, REGISTER, &args, true);
    assert_eq!(
        (verdict, rule),
        (Verdict::Deny, Some("subscription_target")),
        "{reason}"
    );
    // The same target without a command to read is allowed.
    let args =
        json!({"trigger_type": "cron", "target": {"function_id": "shell::exec", "payload": {}}});
    assert_eq!(judge(&s, &rs, REGISTER, &args, true).0, Verdict::Allow);
}
