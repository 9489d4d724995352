//! Arbitrary `rules` JSON (built from the input: shorthands with `!` and
//! `?`, rule objects with allow / deny / ask actions, modes, argument
//! constraints, ask deadlines and examples, junk) → `Vec<RuleSpec>` →
//! `CompiledRules::compile`, and the whole configuration entry (precedence,
//! `human_only_extra`) → `ApprovalConfig::from_value` → `Snapshot::compile`.
//! Never panics; compile errors carry valid indices; when the rules compile,
//! every example agrees with the naive reference's reading of its rule, and
//! `decide` on arbitrary calls agrees with the naive reference ladder
//! (`approval-gate-reference`) under both precedences and in the lockdown —
//! for arbitrary settings (bounded, argument-scoped, exact and pattern
//! entries, stored seed entries, suppressed seeds) and for the
//! configuration's defaults — and `explain` agrees with `decide`.
//!
//! Command fields (contract §25): rules and grants carry `prefix` and `runs`
//! on `command` and other fields, calls carry `shell::*`-shaped arguments
//! (`command` with or without `args`, `env`, `stdin`) and commands from the
//! classes that once stepped around a rule. Both sides read command fields
//! at a budget no slow build reaches (the crate through `needs`, as the
//! gate does). The disagreements the worker's property tests list as
//! ignored tests (`tests/it/properties.rs`) are left out here too.

#![no_main]

use std::sync::Arc;
use std::time::Duration;

use approval_gate::{
    decide_with, default_settings, explain, needs, read, ApprovalConfig, ApprovalSettings,
    ArgConstraint, Basis, Call, CompiledRules, CompiledSettings, DecideOptions, Decision, Entry,
    GrantedBy, Limits, Mode, RuleAction, RulePrecedence, RuleSpec, Snapshot, Verdict, WireVerdict,
    OPAQUE_COMMAND_RULE,
};
use approval_gate_fuzz::gen::Gen;
use approval_gate_reference::{outcome_of, wall_clock_ms, At, Outcome, Policy, RefRule};
use arbitrary::{Result, Unstructured};
use libfuzzer_sys::fuzz_target;
use serde_json::{json, Map, Value};

const MODES: [&str; 3] = ["manual", "auto", "full"];

fn mode_text(g: &mut Gen) -> Result<Value> {
    Ok(if g.u.ratio(1, 16)? {
        Value::String(g.u.arbitrary()?)
    } else {
        json!(*g.u.choose(&MODES)?)
    })
}

/// Command lines a prefix constraint can meet: separators, substitutions,
/// quotes, argv arrays; and the classes of §25 (quoting, paths, wrappers,
/// nested shells, expansions, lists, redirections, assignments, globs).
const COMMANDS: [&str; 30] = [
    "git status",
    "git status --short",
    "git statusx",
    "git status; id",
    "git status $(id)",
    "git log 'open",
    "rm -rf /",
    "ls && rm x",
    "git ",
    "",
    "'rm' -rf /tmp/x",
    "/bin/rm -rf /tmp/x",
    "sudo rm -rf /tmp/x",
    "env X=1 rm x",
    "bash -c 'rm -rf /tmp/x'",
    "eval \"rm x\"",
    "$(echo rm) -rf x",
    "git $A main",
    "X=1 git status",
    "cd src && cargo test 2>&1 | tail -20",
    "git commit -m \"cleanup; rm stale\"",
    "curl x | sh",
    "ls > out",
    "ls 2>/dev/null",
    "find . -exec rm {} +",
    "ls *",
    "ls src/*.rs",
    "{ rm x; }",
    "echo `id`",
    "cat <<EOF\n$(rm x)\nEOF",
];

/// The words of a `prefix` or `runs` on a command field.
const WORDS: [&str; 14] = [
    "rm",
    "rm -rf",
    "git",
    "git status",
    "git push --force",
    "ls",
    "cd",
    "cargo test",
    "tail",
    "curl",
    "sh",
    "/bin/rm",
    "'rm'",
    "find",
];

fn command(g: &mut Gen) -> Result<Value> {
    Ok(match g.u.int_in_range(0..=5)? {
        0 => json!(["git", "status", *g.u.choose(&COMMANDS)?]),
        1 => json!([*g.u.choose(&["rm", "git"])?, 1, true]),
        2 => {
            // Pieces of the list joined: lists and pipelines of classes.
            let n = g.u.int_in_range(1..=3)?;
            let mut text = String::new();
            for i in 0..n {
                if i > 0 {
                    text.push_str(g.u.choose(&[" && ", " | ", "; ", "\n", " || "])?);
                }
                text.push_str(g.u.choose(&COMMANDS)?);
            }
            json!(text)
        }
        _ => json!(*g.u.choose(&COMMANDS)?),
    })
}

fn constraint(g: &mut Gen) -> Result<Value> {
    Ok(match g.u.int_in_range(0..=12)? {
        0 | 1 => json!({"equals": g.value(3)?}),
        2 => json!({"equals": *g.u.choose(&[json!(1), json!(1.0), json!(["git", "status"])])?}),
        3..=5 => json!({"matches": g.regex()?}),
        6 => json!({"prefix": g.string()?}),
        7 | 8 => json!({"prefix": *g.u.choose(&COMMANDS)?}),
        9 | 10 => json!({"prefix": *g.u.choose(&WORDS)?}),
        11 => json!({"runs": *g.u.choose(&WORDS)?}),
        _ => {
            if g.u.ratio(1, 2)? {
                json!({"runs": g.string()?})
            } else {
                g.value(2)?
            }
        }
    })
}

/// A rule's function: often a `shell::*` runner, so `command` is a command
/// field.
fn function_glob(g: &mut Gen) -> Result<String> {
    if g.u.ratio(1, 3)? {
        return Ok((*g.u.choose(&["shell::exec", "shell::*", "*", "x::run"])?).to_owned());
    }
    g.glob()
}

/// A call's function id, often a `shell::*` runner.
fn call_id(g: &mut Gen) -> Result<String> {
    if g.u.ratio(1, 3)? {
        return Ok((*g.u.choose(&["shell::exec", "shell::exec_bg", "x::run"])?).to_owned());
    }
    g.function_id()
}

/// Arguments as a `shell::*` runner takes them: `command` with or without
/// `args`, another command field, `env`, `stdin`.
fn shell_arguments(g: &mut Gen) -> Result<Value> {
    let mut map = Map::new();
    if g.u.ratio(7, 8)? {
        map.insert("command".into(), command(g)?);
    }
    if g.u.ratio(1, 3)? {
        let args = match g.u.int_in_range(0..=4)? {
            0 => json!(["-rf", "/tmp/x"]),
            1 => json!(["-c", *g.u.choose(&COMMANDS)?]),
            2 => json!(["status"]),
            3 => json!([1]),
            _ => Value::Null,
        };
        map.insert("args".into(), args);
    }
    if g.u.ratio(1, 4)? {
        map.insert("cmd".into(), command(g)?);
    }
    if g.u.ratio(1, 8)? {
        map.insert("env".into(), json!({"A": "1"}));
    }
    if g.u.ratio(1, 8)? {
        map.insert("stdin".into(), json!(*g.u.choose(&["", "x"])?));
    }
    Ok(Value::Object(map))
}

fn args_object(g: &mut Gen) -> Result<Value> {
    let n = g.u.int_in_range(0..=3)?;
    let mut args = Map::new();
    for _ in 0..n {
        args.insert(g.field()?, constraint(g)?);
    }
    Ok(Value::Object(args))
}

/// A deadline in ms, around the 1000 ms minimum.
fn deadline(g: &mut Gen) -> Result<Value> {
    Ok(json!(*g.u.choose(&[0u64, 999, 1000, 60_000, u64::MAX])?))
}

/// An example call: often the rule's own glob as the id, so some pass.
fn probe(g: &mut Gen, function: &str) -> Result<Value> {
    let function_id = if g.u.ratio(1, 2)? {
        function.to_owned()
    } else {
        g.function_id()?
    };
    let mut probe = json!({"function_id": function_id});
    if let Some(args) = arguments(g)? {
        probe["arguments"] = args;
    }
    Ok(probe)
}

fn rule(g: &mut Gen) -> Result<Value> {
    Ok(match g.u.int_in_range(0..=8)? {
        0 | 1 => Value::String(g.glob()?),
        2 => Value::String(format!("!{}", g.glob()?)),
        3 => Value::String(format!("?{}", g.glob()?)),
        4..=7 => {
            let mut obj = Map::new();
            let function = function_glob(g)?;
            obj.insert("function".into(), Value::String(function.clone()));
            let action = match g.u.int_in_range(0..=12)? {
                0 => json!("hold"),
                1..=5 => json!("allow"),
                6..=9 => json!("deny"),
                _ => json!("ask"),
            };
            let ask = action == "ask";
            obj.insert("action".into(), action);
            if g.u.ratio(1, 3)? {
                obj.insert("rule_id".into(), Value::String(g.u.arbitrary()?));
            }
            if g.u.ratio(1, 2)? {
                let n = g.u.int_in_range(0..=3)?;
                let mut modes = Vec::new();
                for _ in 0..n {
                    modes.push(mode_text(g)?);
                }
                obj.insert("modes".into(), Value::Array(modes));
            }
            if g.u.ratio(1, 2)? {
                obj.insert("args".into(), args_object(g)?);
            }
            // Deadlines belong to ask rules (elsewhere they are errors).
            let deadlines = if ask { 3 } else { 16 };
            if g.u.ratio(1, deadlines)? {
                obj.insert("timeout_ms".into(), deadline(g)?);
            }
            if g.u.ratio(1, deadlines)? {
                obj.insert("escalate_after_ms".into(), deadline(g)?);
            }
            if g.u.ratio(1, 6)? {
                let mut examples = Map::new();
                for key in ["match", "no_match"] {
                    if g.u.ratio(1, 2)? {
                        let n = g.u.int_in_range(0..=2)?;
                        let mut probes = Vec::new();
                        for _ in 0..n {
                            probes.push(probe(g, &function)?);
                        }
                        examples.insert(key.into(), Value::Array(probes));
                    }
                }
                obj.insert("examples".into(), Value::Object(examples));
            }
            if g.u.ratio(1, 32)? {
                obj.insert("mode".into(), json!([]));
            }
            Value::Object(obj)
        }
        _ => g.value(2)?,
    })
}

/// Allow-list entries: unbounded mostly, else expired (at 0 or 1 ms since
/// the epoch) or never expiring, with uses left or used up, with argument
/// constraints (which may not compile: the entry then matches nothing);
/// exact or pattern; or a seed entry a record was stored with before seeds
/// were derived (ignored).
fn entries(g: &mut Gen) -> Result<Vec<Entry>> {
    let n = g.u.int_in_range(0..=3)?;
    let mut out = Vec::new();
    for _ in 0..n {
        let by = if g.u.ratio(1, 4)? {
            GrantedBy::Seed
        } else {
            GrantedBy::UserClick
        };
        let id = if g.u.ratio(1, 3)? {
            g.function_id()?
        } else {
            function_glob(g)?
        };
        let mut entry = Entry::new(id, 0, by);
        entry.pattern = g.u.ratio(1, 2)?;
        if g.u.ratio(1, 2)? {
            entry.expires_at = *g.u.choose(&[None, Some(0), Some(1), Some(u64::MAX)])?;
            entry.uses_left = *g.u.choose(&[None, Some(0), Some(1), Some(5)])?;
            if g.u.ratio(1, 2)? {
                entry.args = serde_json::from_value(args_object(g)?).ok();
            }
        }
        out.push(entry);
    }
    Ok(out)
}

fn arguments(g: &mut Gen) -> Result<Option<Value>> {
    Ok(match g.u.int_in_range(0..=7)? {
        0 => None,
        6 | 7 => Some(shell_arguments(g)?),
        1 => Some(g.value(2)?),
        // A state call's scope: the gate guards its own scopes.
        2 => Some(json!({"scope": *g.u.choose(&[
            "approval", "APPROVAL_settings", " approval.x", "approvals", "other", "",
        ])?})),
        _ => {
            let n = g.u.int_in_range(0..=4)?;
            let mut map = Map::new();
            for _ in 0..n {
                let key = g.field()?.trim_start_matches('/').to_owned();
                let value = match g.u.int_in_range(0..=4)? {
                    0 => Value::String(g.regex()?),
                    1 => json!({"b": g.value(2)?, "dry_run": true}),
                    2 => json!([g.value(1)?, {"k": g.value(1)?}]),
                    3 => command(g)?,
                    _ => g.value(2)?,
                };
                map.insert(key, value);
            }
            Some(Value::Object(map))
        }
    })
}

/// The limits both sides read command fields at: the contract's, with a
/// budget no instrumented build reaches.
fn limits() -> Limits {
    Limits {
        budget: Duration::from_secs(30),
        ..Limits::default()
    }
}

/// The crate's decision with the call's command fields read first, as the
/// gate reads them, at [`limits`].
fn decide_read<'r>(
    settings: &'r CompiledSettings,
    rules: &'r CompiledRules,
    call: &Call<'r>,
) -> Decision<'r> {
    let wanted = needs(settings, rules, call);
    let models = wanted
        .sources()
        .iter()
        .map(|s| Arc::new(read(s.as_source(), &limits())))
        .collect();
    let readings = wanted.with_models(models);
    decide_with(
        settings,
        rules,
        call,
        DecideOptions {
            readings: Some(&readings),
            ..DecideOptions::default()
        },
    )
}

/// Whether an object anywhere in `v` has two keys that differ only in
/// ASCII case, or its top level spells `args` in another case.
fn case_twins(v: &Value, top: bool) -> bool {
    let mut stack = vec![(v, top)];
    while let Some((v, top)) = stack.pop() {
        match v {
            Value::Object(map) => {
                let keys: Vec<&String> = map.keys().collect();
                for (i, a) in keys.iter().enumerate() {
                    if keys[i + 1..].iter().any(|b| a.eq_ignore_ascii_case(b)) {
                        return true;
                    }
                    if top && a.as_str() != "args" && a.eq_ignore_ascii_case("args") {
                        return true;
                    }
                }
                stack.extend(map.values().map(|v| (v, false)));
            }
            Value::Array(items) => stack.extend(items.iter().map(|v| (v, false))),
            _ => {}
        }
    }
    false
}

/// Whether an allow rule or grant constrains `command` spelled in another
/// case.
fn allow_on_other_spelling(specs: &[RuleSpec], settings: &ApprovalSettings) -> bool {
    let odd = |map: &std::collections::BTreeMap<String, ArgConstraint>| {
        map.keys().any(|k| {
            let top = k.strip_prefix('/').unwrap_or(k);
            top != "command" && top.eq_ignore_ascii_case("command")
        })
    };
    specs.iter().any(|s| match s {
        RuleSpec::Object(o) => o.action == RuleAction::Allow && o.args.as_ref().is_some_and(odd),
        RuleSpec::Shorthand(_) => false,
    }) || settings
        .approved_always
        .iter()
        .chain(&settings.always_allow)
        .any(|e| e.args.as_ref().is_some_and(odd))
}

/// An outcome as compared: whole, except what a rule with two or more
/// command constraints found (the crate reports the rule's own id where
/// one constraint saw a command and another only doubted; the reference
/// reports `opaque_command`).
fn comparable(outcome: Outcome, policy: &Policy, fid: &str) -> Outcome {
    match outcome {
        Outcome::Rule {
            index,
            rule_id,
            action,
            constraint,
            command: Some(_),
        } if policy.rules()[index].command_constraints(fid) > 1 => Outcome::Rule {
            index,
            rule_id,
            action,
            constraint,
            command: None,
        },
        Outcome::Ask {
            index,
            rule_id,
            timeout_ms,
            escalate_after_ms,
            constraint,
            command: Some(_),
        } if policy.rules()[index].command_constraints(fid) > 1 => Outcome::Ask {
            index,
            rule_id,
            timeout_ms,
            escalate_after_ms,
            constraint,
            command: None,
        },
        other => other,
    }
}

/// Compares the crate's decision with the reference's, and `explain`'s.
fn agree(
    compiled: &CompiledSettings,
    settings: &ApprovalSettings,
    rules: &CompiledRules,
    policy: &Policy,
    fid: &str,
    args: Option<&Value>,
) {
    let call = Call {
        function_id: fid,
        arguments: args,
    };
    let d = decide_read(compiled, rules, &call);
    let expected = policy.decide(settings, fid, args, At::time(wall_clock_ms()));
    assert_eq!(
        comparable(outcome_of(&d), policy, fid),
        comparable(expected.clone(), policy, fid),
        "{fid:?} {args:?} under {:?}",
        rules.precedence()
    );
    assert_eq!(d.verdict, expected.verdict());
    if comparable(expected.clone(), policy, fid) == expected {
        if let Some(id) = expected.rule_id() {
            assert_eq!(d.rule_id(), Some(id));
        }
    }
    let verdict = match &d.basis {
        Basis::HumanOnly { .. } => Verdict::Deny,
        Basis::Rule { index, action, .. } => {
            assert_eq!(*action, policy.rules()[*index].action());
            match action {
                RuleAction::Allow => Verdict::Allow,
                RuleAction::Deny => Verdict::Deny,
                RuleAction::Ask => panic!("an ask rule decided as a rule: {d:?}"),
            }
        }
        Basis::Ask { index, .. } => {
            assert_eq!(policy.rules()[*index].action(), RuleAction::Ask);
            Verdict::Hold
        }
        Basis::NoMatch
        | Basis::Lockdown
        | Basis::WideningRoot { .. }
        | Basis::ProtectedPath { .. } => Verdict::Hold,
        // Judged as on a harness that mediates no subscription.
        Basis::Subscription { .. } => panic!("a subscription basis without mediation: {d:?}"),
        Basis::Seed { rule, .. } => {
            assert_eq!(policy.rules()[*rule].action(), RuleAction::Allow);
            Verdict::Allow
        }
        Basis::ModeFull
        | Basis::ApprovedAlways { .. }
        | Basis::AlwaysAllow { .. }
        | Basis::ImplicitAsk => Verdict::Allow,
    };
    assert_eq!(d.verdict, verdict);
    let reason = d.reason(fid);
    if d.verdict == Verdict::Deny && !matches!(d.basis, Basis::HumanOnly { .. }) {
        let id = d.rule_id().expect("a deny names its rule");
        let lead = if id == OPAQUE_COMMAND_RULE {
            format!("Permission denied by policy: {fid} is denied as {OPAQUE_COMMAND_RULE}")
        } else {
            format!("Permission denied by policy: {fid} matched rule {id}")
        };
        assert!(reason.starts_with(&lead), "{reason}");
    }
    // `explain` reads command fields itself, at the contract's 10 ms budget:
    // compared where nothing is read, so a slow build's reading cannot make
    // one side opaque.
    if !needs(compiled, rules, &call).is_empty() {
        return;
    }
    let explained = explain(compiled, rules, &ApprovalConfig::default(), fid, args);
    let wire = match d.verdict {
        Verdict::Allow => WireVerdict::Allow,
        Verdict::Deny => WireVerdict::Deny,
        Verdict::Hold => WireVerdict::NeedsApproval,
    };
    assert_eq!(explained.verdict, wire, "{explained:?}");
    assert_eq!(explained.rule_id.as_deref(), d.rule_id());
    assert_eq!(explained.reason, reason);
}

fn run(u: &mut Unstructured) -> Result<()> {
    let mut g = Gen::new(u);
    let n = g.u.int_in_range(0..=8)?;
    let mut rules_json = Vec::new();
    for _ in 0..n {
        rules_json.push(rule(&mut g)?);
    }
    let rules_json = Value::Array(rules_json);
    let default_mode = mode_text(&mut g)?;
    let mut config_json = json!({"default_mode": default_mode, "rules": rules_json.clone()});
    if g.u.ratio(1, 2)? {
        config_json["grant_reask_limit"] = json!(g.u.int_in_range(0..=5)?);
    }
    let precedence =
        *g.u.choose(&[RulePrecedence::FirstMatch, RulePrecedence::DenyAskAllow])?;
    if g.u.ratio(3, 4)? {
        config_json["rule_precedence"] = if g.u.ratio(1, 16)? {
            json!("last_match")
        } else {
            json!(precedence)
        };
    }
    let n_extra = g.u.int_in_range(0..=2)?;
    let mut extra_guards = Vec::new();
    for _ in 0..n_extra {
        extra_guards.push(g.glob()?);
    }
    if !extra_guards.is_empty() {
        config_json["human_only_extra"] = json!(extra_guards);
    }
    let mode = *g.u.choose(&[Mode::Manual, Mode::Auto, Mode::Full])?;
    let mut settings = ApprovalSettings {
        always_allow: entries(&mut g)?,
        approved_always: entries(&mut g)?,
        ..ApprovalSettings::new(mode)
    };
    let lockdown = g.u.ratio(1, 16)?;
    let ncalls = g.u.int_in_range(1..=6)?;
    let mut calls = Vec::new();
    for _ in 0..ncalls {
        let (fid, args) = (call_id(&mut g)?, arguments(&mut g)?);
        // The disagreements the property tests keep as ignored tests.
        if !args.as_ref().is_some_and(|a| case_twins(a, true)) {
            calls.push((fid, args));
        }
    }

    let Ok(specs) = serde_json::from_value::<Vec<RuleSpec>>(rules_json) else {
        // Rules that do not parse make the configuration invalid as well.
        assert!(ApprovalConfig::from_value(&config_json).is_err());
        return Ok(());
    };
    let compiled = match CompiledRules::compile(&specs) {
        Ok(compiled) => compiled,
        Err(errors) => {
            assert!(!errors.is_empty());
            for e in &errors {
                assert!(e.index < specs.len(), "{e} of {}", specs.len());
                assert!(!e.message.is_empty());
            }
            return Ok(());
        }
    };
    assert_eq!(compiled.len(), specs.len());
    if allow_on_other_spelling(&specs, &settings) {
        return Ok(());
    }
    let reference = Policy::new(&specs).expect("a compiled rule compiles alone");
    let seeds: Vec<String> = reference
        .seeds()
        .into_iter()
        .map(|(glob, _)| glob)
        .collect();
    assert_eq!(compiled.auto_seed_globs(), seeds);
    // Some seeds suppressed, as a human's remove-always-allow leaves them.
    for (glob, _) in reference.seeds() {
        if g.u.ratio(1, 3)? {
            settings.suppressed_seeds.push(glob);
        }
    }
    // Examples are checked against the rule alone (glob and args, read as
    // the rule's action says).
    for spec in &specs {
        let rule = RefRule::of(spec).expect("a compiled rule compiles alone");
        if let RuleSpec::Object(obj) = spec {
            if let Some(examples) = &obj.examples {
                let known = |p: &approval_gate::Probe| {
                    p.arguments.as_ref().is_some_and(|a| case_twins(a, true))
                };
                for p in examples.matching.iter().filter(|p| !known(p)) {
                    assert!(rule.matches(&p.function_id, p.arguments.as_ref()), "{p:?}");
                }
                for p in examples.no_match.iter().filter(|p| !known(p)) {
                    assert!(!rule.matches(&p.function_id, p.arguments.as_ref()), "{p:?}");
                }
            }
        }
    }
    let (rules, policy) = if lockdown {
        (
            CompiledRules::lockdown().with_precedence(precedence),
            Policy::lockdown().with_precedence(precedence),
        )
    } else {
        (
            compiled.with_precedence(precedence),
            Policy::new(&specs)
                .expect("a compiled rule compiles alone")
                .with_precedence(precedence)
                .with_limits(limits()),
        )
    };
    let compiled_settings = CompiledSettings::new(&settings);
    for (fid, args) in &calls {
        agree(
            &compiled_settings,
            &settings,
            &rules,
            &policy,
            fid,
            args.as_ref(),
        );
    }

    // The configuration entry around the same rules, and its defaults.
    if let Ok(config) = ApprovalConfig::from_value(&config_json) {
        assert_eq!(config.rules, specs);
        let rules = CompiledRules::compile(&specs)
            .expect("compiled once")
            .with_precedence(precedence);
        let defaults = default_settings(&config, &rules, 0);
        // Seeds: the allow rules that list `auto` and have no `args`, in
        // rule order, each glob once.
        let mut seeds: Vec<&str> = Vec::new();
        for s in &specs {
            if let RuleSpec::Object(o) = s {
                if o.action == RuleAction::Allow
                    && o.args.is_none()
                    && o.modes.as_ref().is_some_and(|m| m.contains(&Mode::Auto))
                    && !seeds.contains(&o.function.as_str())
                {
                    seeds.push(&o.function);
                }
            }
        }
        let seeded: Vec<&str> = defaults
            .always_allow
            .iter()
            .map(|e| e.function_id.as_str())
            .collect();
        assert_eq!(seeded, seeds);
        assert!(defaults
            .always_allow
            .iter()
            .all(|e| e.granted_by == GrantedBy::Seed));
        let snapshot = Snapshot::compile(config);
        assert!(snapshot.rule_errors.is_empty());
        if snapshot.lockdown {
            // Configuration all or nothing (§26.2): a field that does not
            // check (a `human_only_extra` glob that does not compile) refuses
            // the whole value, and with nothing before it that is the
            // lockdown, compared above.
            assert!(!snapshot.refused.is_empty(), "lockdown without a reason");
            return Ok(());
        }
        assert_eq!(snapshot.rules.len(), specs.len());
        assert_eq!(snapshot.rules.precedence(), snapshot.config.rule_precedence);
        assert_eq!(snapshot.default_settings, defaults);
        let policy = Policy::new(&specs)
            .expect("a compiled rule compiles alone")
            .with_precedence(snapshot.config.rule_precedence)
            .with_extra_guards(&snapshot.config.human_only_extra)
            .with_limits(limits());
        for (fid, args) in &calls {
            agree(
                &snapshot.defaults,
                &snapshot.default_settings,
                &snapshot.rules,
                &policy,
                fid,
                args.as_ref(),
            );
            agree(
                &compiled_settings,
                &settings,
                &snapshot.rules,
                &policy,
                fid,
                args.as_ref(),
            );
        }
    }
    Ok(())
}

fuzz_target!(|data: &[u8]| {
    let mut u = Unstructured::new(data);
    let _ = run(&mut u);
});
