//! The fuzz targets' properties (see `fuzz/`), as bounded property tests so
//! that `cargo test` exercises them on every run:
//!
//! 1. hook inputs → parse → the gate's pure path → a valid `HookOutput`, and
//!    `approval::evaluate`'s explanation agrees with the gate's judgement;
//! 2. rules JSON → compile → `decide` never panics and explains itself;
//! 3. grant hints → every hint has an absolute, clean dir; containment is by
//!    components;
//! 4. cursors → `decode` is total and accepts only what `encode` writes;
//! 5. redaction → safe, bounded and idempotent;
//! 6. the decision ladder agrees with its naive reference
//!    (`approval-gate-reference`, the oracle the fuzz targets use too) on
//!    random rule sets, precedences, modes, typed constraints and command
//!    prefixes, exact and pattern grants, seeds and their suppression,
//!    rules removed under a stored record, and the lockdown; and on command
//!    fields (contract §25): `prefix` and `runs` on `command` in several
//!    spellings and on other fields, commands drawn from a grammar of the
//!    classes that once stepped around a rule (quoting, paths, wrappers,
//!    nested shells, substitutions, lists, redirections, assignments,
//!    globs) and benign ones, allow lists that cover a list's commands
//!    together, grants with uses. Command fields are read once, before the
//!    ladder, as the gate reads them, at a budget no busy machine reaches.
//!    Where the two disagree on purpose the case is an ignored test that
//!    names the disagreement (`--ignored` runs them).
//!
//! The ladder's differential tests live here rather than beside the code:
//! the reference depends on the worker crate, which a unit test of the
//! worker could only see as a second, different copy of its types.

use approval_gate::{build_record, parse_hook_input, SessionContext};
use approval_gate::{
    builtin_guard, decide, explain, is_valid_id, judge, Basis, Call, CompiledRules,
    CompiledSettings, DenialEnvelope, Judgement, RuleAction, RulePrecedence, RuleSpec, Verdict,
    WireVerdict, LOCKDOWN_RULE,
};
use approval_gate::{contains, find_hint, recognise, JAIL_CODES};
use approval_gate::{decode_cursor as decode, encode_cursor as encode};
use approval_gate::{
    is_secret_key, redact, MAX_CLIPPED_CHARS, MAX_DEPTH, MAX_ENTRIES, MAX_OUTPUT_BYTES, REDACTED,
};
use approval_gate::{ApprovalConfig, Snapshot};
use approval_gate::{ApprovalSettings, Entry, GrantedBy, Mode};
use approval_gate::{PendingRecord, RecordKind, SortKey};
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use proptest::prelude::*;
use serde_json::{json, Map, Value};

use crate::common::SECRET_NAMES;

fn config() -> ProptestConfig {
    ProptestConfig {
        cases: 256,
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

// ---- values ----

fn key() -> impl Strategy<Value = String> {
    prop_oneof![
        prop::sample::select(SECRET_NAMES.to_vec()).prop_map(str::to_owned),
        prop::sample::select(SECRET_NAMES.to_vec())
            .prop_map(|n| format!("DB_{}", n.to_ascii_uppercase())),
        prop::sample::select(vec!["user", "cmd", "command", "tokens", "<truncated>", ""])
            .prop_map(str::to_owned),
        "[a-z_]{0,6}",
        (250usize..262, "[a-z_]{0,6}").prop_map(|(n, tail)| format!("{}{tail}", "k".repeat(n))),
    ]
}

fn leaf() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(Value::from),
        ".{0,12}".prop_map(Value::String),
        (250usize..300, prop::char::any())
            .prop_map(|(n, c)| Value::String(std::iter::repeat_n(c, n).collect())),
        prop::sample::select(vec![
            "<redacted>",
            "<max-depth>",
            "<+2 more>",
            "push x --force"
        ])
        .prop_map(|m| Value::String(m.to_owned())),
    ]
}

fn value() -> impl Strategy<Value = Value> {
    leaf().prop_recursive(4, 400, 40, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..40).prop_map(Value::Array),
            prop::collection::vec((key(), inner), 0..40)
                .prop_map(|entries| Value::Object(entries.into_iter().collect())),
        ]
    })
}

/// `n` nested containers around `v`, alternating array / object.
fn nest(n: usize, v: Value) -> Value {
    (0..n).fold(v, |v, i| {
        if i % 2 == 0 {
            Value::Array(vec![v])
        } else {
            let mut map = Map::new();
            map.insert("k".into(), v);
            Value::Object(map)
        }
    })
}

/// A redacted value's invariants, or the first one broken: every scalar
/// under a secret key (at any depth) is `<redacted>`, the walk's markers
/// aside (contract §21.6); strings, keys, containers and depth within their
/// limits.
fn redaction_violation(out: &Value) -> Option<String> {
    let mut stack = vec![(out, 0usize, false)];
    while let Some((v, depth, secret)) = stack.pop() {
        match v {
            Value::String(s) if s.chars().count() > MAX_CLIPPED_CHARS => {
                return Some(format!("a string of {} code points", s.chars().count()));
            }
            Value::String(s) if secret && s != REDACTED && s != "<max-depth>" => {
                return Some(format!("{s:?} under a secret key"));
            }
            Value::Array(items) => {
                if depth >= MAX_DEPTH || items.len() > MAX_ENTRIES + 1 {
                    return Some(format!("an array of {} at depth {depth}", items.len()));
                }
                let marked = items
                    .last()
                    .and_then(Value::as_str)
                    .is_some_and(|m| m.starts_with("<+") && m.ends_with(" more>"));
                for (i, item) in items.iter().enumerate() {
                    let marker = marked && i + 1 == items.len();
                    stack.push((item, depth + 1, secret && !marker));
                }
            }
            Value::Object(map) => {
                if depth >= MAX_DEPTH || map.len() > MAX_ENTRIES + 1 {
                    return Some(format!("an object of {} at depth {depth}", map.len()));
                }
                for (k, item) in map {
                    if k.chars().count() > MAX_CLIPPED_CHARS {
                        return Some(format!("a key of {} code points", k.chars().count()));
                    }
                    let marker = k == "<truncated>" && item.is_u64();
                    stack.push((item, depth + 1, (secret || is_secret_key(k)) && !marker));
                }
            }
            Value::String(_) => {}
            scalar if secret => return Some(format!("{scalar} under a secret key")),
            _ => {}
        }
    }
    let size = out.to_string().len();
    (size > MAX_OUTPUT_BYTES).then(|| format!("{size} bytes"))
}

// ---- 1. hook inputs ----

fn entries(ids: &[&str]) -> Vec<Entry> {
    ids.iter()
        .map(|id| Entry::new(*id, 0, GrantedBy::UserClick))
        .collect()
}

fn rich_rules() -> Value {
    json!([
        "!approval::*",
        "!shell::rm*",
        {"function": "shell::exec", "action": "deny", "rule_id": "no-force",
         "args": {"command": {"matches": "push .*--force"}}},
        {"function": "shell::exec", "action": "allow", "modes": ["auto"],
         "args": {"/opts/dry_run": {"equals": true}}},
        {"function": "state::{get,list}", "action": "allow"},
        {"function": "demo::*", "action": "allow", "modes": ["auto"]},
        "?x::*",
        {"function": "shell::exec", "action": "ask", "modes": ["manual", "full"],
         "args": {"command": {"prefix": "sudo "}}, "timeout_ms": 60000},
        "!*::delete"
    ])
}

/// `(mode, settings, rules)` the gate may run with, under both precedences.
fn fixtures() -> Vec<(Mode, CompiledSettings, CompiledRules)> {
    let specs: Vec<RuleSpec> = serde_json::from_value(rich_rules()).expect("rules parse");
    let dry = Entry {
        args: Some(serde_json::from_value(json!({"command": {"prefix": "git "}})).expect("args")),
        uses_left: Some(2),
        ..Entry::new("shell::exec", 0, GrantedBy::UserClick)
    };
    let mut out = Vec::new();
    for precedence in [RulePrecedence::FirstMatch, RulePrecedence::DenyAskAllow] {
        for (mode, always, approved) in [
            (Mode::Manual, &[][..], &[][..]),
            (
                Mode::Auto,
                &["demo::*", "shell::ls"][..],
                &["state::set"][..],
            ),
            (Mode::Full, &[][..], &[][..]),
        ] {
            let mut approved_always = entries(approved);
            approved_always.push(dry.clone());
            let settings = CompiledSettings::new(&ApprovalSettings {
                always_allow: entries(always),
                approved_always,
                ..ApprovalSettings::new(mode)
            });
            let rules = CompiledRules::compile(&specs)
                .expect("rules compile")
                .with_precedence(precedence);
            out.push((mode, settings, rules));
        }
        let config =
            ApprovalConfig::from_value(&json!({"default_mode": "auto", "rules": rich_rules(),
                "rule_precedence": precedence}))
            .expect("config parses");
        let snapshot = Snapshot::compile(config);
        out.push((Mode::Auto, snapshot.defaults, snapshot.rules));
        // The lockdown, with grants that would allow everything.
        let everything = CompiledSettings::new(&ApprovalSettings {
            always_allow: entries(&["*"]),
            approved_always: entries(&["*"]),
            ..ApprovalSettings::new(Mode::Full)
        });
        out.push((
            Mode::Full,
            everything,
            CompiledRules::lockdown().with_precedence(precedence),
        ));
    }
    out
}

fn function_id() -> impl Strategy<Value = String> {
    prop_oneof![
        prop::sample::select(vec![
            "approval::resolve",
            "APPROVAL::set-mode",
            "ns::configuration::set",
            "shell::exec",
            "x::y",
            "shell::rm",
            "state::get",
            "state::set",
            "demo::echo",
            "x::delete",
            "",
        ])
        .prop_map(str::to_owned),
        "[a-z:/ ]{0,12}",
    ]
}

fn hook_input() -> impl Strategy<Value = Value> {
    let id = prop_oneof![Just("s".to_owned()), Just(String::new()), "[a-z/]{1,4}"];
    let arguments = prop_oneof![
        value(),
        Just(json!({"command": "git push --force", "token": "t"})),
        Just(json!({"command": "sudo rm -rf /"})),
        Just(json!({"command": "git status"})),
        Just(json!({"opts": {"dry_run": true}})),
        (0usize..80).prop_map(|n| nest(n, json!({"password": "p"}))),
    ];
    let call =
        (id.clone(), function_id(), prop::option::of(arguments)).prop_map(|(cid, fid, args)| {
            let mut call = json!({"id": cid, "function_id": fid});
            if let Some(a) = args {
                call["arguments"] = a;
            }
            call
        });
    let input = (
        id,
        prop::option::of(call),
        prop::option::of(value()),
        0u64..3,
    )
        .prop_map(|(sid, call, session, depth)| {
            let mut input = json!({"point": "pre_trigger", "session_id": sid, "turn_id": "t",
                                   "depth": depth, "metadata": {"working_dir": "/w"}});
            if let Some(c) = call {
                input["call"] = c;
            }
            if let Some(s) = session {
                input["_session"] = json!({"meta": {"title": s.clone(), "metadata": s}});
            }
            input
        });
    prop_oneof![8 => input, 1 => value()]
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn hook_inputs_get_a_valid_answer(input in hook_input()) {
        let session_reply = input.get("_session").cloned().unwrap_or(Value::Null);
        let Ok(hook) = parse_hook_input(input) else {
            return Ok(());
        };
        for (mode, settings, rules) in fixtures() {
            let judgement = judge(&hook, &settings, &rules);
            let Some(call) = hook.call.as_ref() else {
                prop_assert!(matches!(judgement, Judgement::Deny { .. }), "{:?}", judgement);
                continue;
            };
            let ids_ok = is_valid_id(&hook.session_id) && is_valid_id(&call.id);
            let guarded = builtin_guard(&call.function_id, call.arguments.as_ref()).is_some();
            if guarded || !ids_ok {
                prop_assert!(matches!(judgement, Judgement::Deny { .. }), "{:?}", judgement);
            } else if rules.is_lockdown() {
                // The lockdown holds every other call, whatever the grants.
                prop_assert!(matches!(judgement, Judgement::Hold { ask: None, by_default: false, .. }), "{:?}", judgement);
            } else if mode == Mode::Full && rules.precedence() == RulePrecedence::FirstMatch {
                // Only an ask rule (a human floor) stops a call in full mode.
                prop_assert!(
                    matches!(judgement, Judgement::Continue { .. } | Judgement::Hold { ask: Some(_), .. }),
                    "{:?}", judgement
                );
            }
            // The gate and approval::evaluate run one ladder: they agree on
            // every call they can both see (evaluate refuses unusable ids).
            if ids_ok || guarded {
                let explained = explain(&settings, &rules, &ApprovalConfig::default(), &call.function_id, call.arguments.as_ref());
                let (verdict, rule, reason) = match &judgement {
                    Judgement::Continue { rule, .. } => (WireVerdict::Allow, *rule, None),
                    Judgement::Deny { reason, rule } => (WireVerdict::Deny, *rule, Some(reason.as_str())),
                    Judgement::Hold { ask: None, .. } if rules.is_lockdown() => (WireVerdict::NeedsApproval, Some(LOCKDOWN_RULE), None),
                    Judgement::Hold { ask, .. } => (WireVerdict::NeedsApproval, ask.map(|a| a.rule_id), None),
                };
                prop_assert_eq!(explained.verdict, verdict, "{:?}", explained);
                // Contract §22: the reviewer's only hold is the default one —
                // a hold no rule, guard or lockdown decided.
                if let Judgement::Hold { ask, by_default, .. } = &judgement {
                    prop_assert_eq!(*by_default, ask.is_none() && !rules.is_lockdown(), "{:?}", judgement);
                }
                prop_assert_eq!(explained.rule_id.as_deref(), rule, "{:?}", explained);
                if let Some(reason) = reason {
                    prop_assert_eq!(explained.reason.as_str(), reason);
                }
                let last = explained.trace.last().map(|s| serde_json::to_value(s.outcome).expect("outcome"));
                let expected = match verdict {
                    WireVerdict::Allow => "allow",
                    WireVerdict::Deny => "deny",
                    WireVerdict::NeedsApproval => "hold",
                };
                prop_assert_eq!(last, Some(json!(expected)), "{:?}", explained.trace);
            }
            match &judgement {
                Judgement::Deny { reason, .. } => prop_assert!(!reason.is_empty()),
                Judgement::Continue { spend, .. } => {
                    // Only a uses-bounded grant asks for a use to be written.
                    if let Some(spend) = spend {
                        prop_assert!(spend.entry.uses_left.is_some());
                    }
                }
                Judgement::Hold { .. } => {
                    let record = build_record(&hook, call, RecordKind::Function,
                        SessionContext::of(&session_reply));
                    prop_assert_eq!(redaction_violation(&record.arguments_excerpt.to_value()), None);
                    let text = serde_json::to_string(&record).expect("serializes");
                    let back: PendingRecord = serde_json::from_str(&text).expect("reads back");
                    prop_assert_eq!(back.key(), record.key());
                    let envelope = DenialEnvelope::by_user(&call.function_id, "no",
                        Some(record.arguments_excerpt.to_value()));
                    if let Some(excerpt) = &envelope.args_excerpt {
                        prop_assert_eq!(redaction_violation(excerpt), None);
                    }
                }
            }
        }
    }
}

// ---- 2. rules ----

fn glob() -> impl Strategy<Value = String> {
    prop::collection::vec(
        prop::sample::select(vec![
            "*", "?", "[", "]", "[!", "{", "}", ",", "\\", "!", "a", "::", "/", "shell::", "**",
        ]),
        0..6,
    )
    .prop_map(|t| t.concat())
}

fn regex_text() -> impl Strategy<Value = String> {
    prop::collection::vec(
        prop::sample::select(vec![
            "(", ")", "|", "*", "+", "?", "{2}", "\\w", ".", "^", "$", "[a-z]", "a", "--force",
        ]),
        0..6,
    )
    .prop_map(|t| t.concat())
}

fn rule() -> impl Strategy<Value = Value> {
    let constraint = prop_oneof![
        leaf().prop_map(|v| json!({"equals": v})),
        regex_text().prop_map(|r| json!({"matches": r})),
    ];
    let field = prop::sample::select(vec!["cmd", "/a", "/a/0", "/x~1y", "/a~2", ""]);
    let modes = prop::collection::vec(prop::sample::select(vec!["manual", "auto", "full"]), 0..3);
    prop_oneof![
        glob().prop_map(Value::String),
        glob().prop_map(|g| Value::String(format!("!{g}"))),
        glob().prop_map(|g| Value::String(format!("?{g}"))),
        (
            glob(),
            prop::sample::select(vec!["allow", "deny", "ask"]),
            prop::option::of(modes),
            prop::option::of(prop::collection::btree_map(field, constraint, 0..3)),
        )
            .prop_map(|(function, action, modes, args)| {
                let mut rule = json!({"function": function, "action": action});
                if let Some(m) = modes {
                    rule["modes"] = json!(m);
                }
                if let Some(a) = args {
                    rule["args"] = json!(a);
                }
                rule
            }),
        leaf(),
    ]
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn compiled_rules_decide_without_panicking(
        rules in prop::collection::vec(rule(), 0..6),
        mode in prop::sample::select(vec![Mode::Manual, Mode::Auto, Mode::Full]),
        allow in prop::collection::vec(glob(), 0..3),
        calls in prop::collection::vec((glob(), prop::option::of(value())), 1..4),
    ) {
        let Ok(specs) = serde_json::from_value::<Vec<RuleSpec>>(Value::Array(rules)) else {
            return Ok(());
        };
        let compiled = match CompiledRules::compile(&specs) {
            Ok(c) => c,
            Err(errors) => {
                prop_assert!(!errors.is_empty());
                prop_assert!(errors.iter().all(|e| e.index < specs.len()));
                return Ok(());
            }
        };
        let ids: Vec<&str> = allow.iter().map(String::as_str).collect();
        let settings = CompiledSettings::new(&ApprovalSettings {
            always_allow: entries(&ids),
            approved_always: entries(&ids[..ids.len().min(1)]),
            ..ApprovalSettings::new(mode)
        });
        for (fid, args) in &calls {
            let d = decide(&settings, &compiled, &Call { function_id: fid, arguments: args.as_ref() });
            let expected = match d.basis {
                Basis::HumanOnly { .. } => Verdict::Deny,
                Basis::Rule { index, action, .. } => {
                    prop_assert!(index < specs.len());
                    prop_assert_ne!(action, RuleAction::Ask);
                    if action == RuleAction::Deny { Verdict::Deny } else { Verdict::Allow }
                }
                Basis::Ask { index, .. } => {
                    prop_assert!(index < specs.len());
                    Verdict::Hold
                }
                Basis::NoMatch | Basis::Lockdown | Basis::WideningRoot { .. } => Verdict::Hold,
                _ => Verdict::Allow,
            };
            prop_assert_eq!(d.verdict, expected);
            if d.verdict == Verdict::Deny {
                let prefix = format!("Permission denied by policy: {fid} matched rule ");
                prop_assert!(d.reason(fid).starts_with(&prefix));
            }
        }
    }
}

// ---- 3. grant hints ----

fn dir_text() -> impl Strategy<Value = String> {
    prop::collection::vec(
        prop::sample::select(vec!["/", "a", "b", ".", "..", "//", " ", "~", "\u{e9}"]),
        0..6,
    )
    .prop_map(|t| t.concat())
}

fn hint_json() -> impl Strategy<Value = String> {
    let v = prop::sample::select(vec![json!(1), json!(1), json!(2), json!("1"), json!(1.0)]);
    (
        v,
        dir_text(),
        dir_text(),
        prop::sample::select(JAIL_CODES.to_vec()),
    )
        .prop_map(|(v, dir, path, code)| {
            json!({"v": v, "dir": dir, "path": path, "code": code}).to_string()
        })
}

fn hint_text() -> impl Strategy<Value = String> {
    let piece = prop_oneof![
        ".{0,8}",
        Just("grant_hint=".to_owned()),
        hint_json(),
        hint_json().prop_map(|h| format!(" grant_hint={h}")),
        Just(" and more".to_owned()),
    ];
    prop::collection::vec(piece, 0..4).prop_map(|p| p.concat())
}

fn clean_absolute(dir: &str) -> bool {
    dir.starts_with('/') && dir.split('/').all(|seg| seg != "." && seg != "..")
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn grant_hints_are_absolute_and_clean(
        text in hint_text(),
        message in hint_text(),
        code in prop_oneof![prop::sample::select(JAIL_CODES.to_vec()).prop_map(str::to_owned), "[A-Z][0-9]{3}"],
        generic in any::<bool>(),
        a in dir_text(),
        b in dir_text(),
    ) {
        if let Some(h) = find_hint(&text) {
            prop_assert!(clean_absolute(&h.dir), "{:?}", h.dir);
            prop_assert!(text.contains("grant_hint="));
            prop_assert!(contains(&h.dir, &h.dir));
            let sep = if h.dir.ends_with('/') { "" } else { "/" };
            let child = format!("{}{sep}x", h.dir);
            prop_assert!(contains(&h.dir, &child));
            if !h.dir.ends_with('/') {
                let sibling = format!("{}x", h.dir);
                prop_assert!(!contains(&h.dir, &sibling));
            }
        }
        let (outer, message) = if generic {
            ("E000".to_owned(), json!({"code": code, "message": message}).to_string())
        } else {
            (code, message)
        };
        let result = json!({"is_error": true, "content": [{"type": "text", "text": text}],
                            "details": {"error": {"code": outer, "message": message}}});
        if let Some(g) = recognise(&result) {
            prop_assert!(JAIL_CODES.contains(&g.error_code.as_str()));
            prop_assert!(clean_absolute(&g.dir), "{:?}", g.dir);
        }
        let _ = contains(&a, &b);
        if !a.is_empty() {
            prop_assert!(contains(&a, &a));
        }
        prop_assert!(!contains("", &b));
    }
}

// ---- 4. cursors ----

proptest! {
    #![proptest_config(config())]

    #[test]
    fn cursors_decode_totally_and_canonically(
        text in ".{0,40}",
        bytes in prop::collection::vec(any::<u8>(), 0..48),
        json_text in prop::collection::vec(
            prop::sample::select(vec!["[", "]", ",", " ", "\n", "1", "-0", "1.0", "\"s\"", "\"\\u0073\"", "null"]),
            0..8,
        ),
        pending_at in any::<u64>(),
        s in ".{0,8}",
        c in ".{0,8}",
    ) {
        for cursor in [text, URL_SAFE_NO_PAD.encode(bytes), URL_SAFE_NO_PAD.encode(json_text.concat())] {
            if let Ok(key) = decode(&cursor) {
                prop_assert_eq!(encode(&key), cursor);
            }
        }
        let key = SortKey::new(pending_at, &s, &c);
        prop_assert_eq!(decode(&encode(&key)), Ok(key));
    }

    #[test]
    fn a_spaced_or_escaped_cursor_is_not_a_second_name_for_a_key(
        pending_at in any::<u64>(),
        spaced in any::<bool>(),
    ) {
        let text = if spaced {
            format!("[{pending_at}, \"s\", \"c\"]")
        } else {
            format!("[{pending_at},\"\\u0073\",\"c\"]")
        };
        prop_assert!(decode(&URL_SAFE_NO_PAD.encode(text)).is_err());
    }
}

// ---- 5. redaction ----

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, ..config() })]

    #[test]
    fn redaction_is_safe_bounded_and_idempotent(v in value(), wrap in 0usize..70) {
        let v = nest(wrap, v);
        let copy = v.clone();
        let once = redact(&v);
        prop_assert_eq!(&v, &copy);
        prop_assert_eq!(redaction_violation(&once), None);
        prop_assert_eq!(redact(&once), once);
    }
}

// ---- 6. the decision ladder against its reference ----

mod ladder {
    use std::sync::Arc;
    use std::time::Duration;

    use approval_gate::{
        builtin_guard, decide, decide_with, default_settings, needs, read, ApprovalConfig,
        ApprovalSettings, ArgConstraint, Call, CompiledRules, CompiledSettings, DecideOptions,
        Decision, Entry, GrantList, GrantRef, GrantedBy, Limits, Mode, Outcome as Step, Probe,
        RuleAction, RuleExamples, RuleObject, RulePrecedence, RuleSpec, Snapshot, Verdict,
    };
    use approval_gate_reference::{outcome_of, At, Outcome, Policy, RefRule};
    use proptest::prelude::*;
    use serde_json::{json, Map, Value};

    /// The time every generated decision is made at.
    const NOW: u64 = 1_000_000;

    /// The limits both sides read command fields at: the contract's, with a
    /// budget no busy machine reaches, so that a reading is never opaque on
    /// one side only because a thread waited for a core.
    fn limits() -> Limits {
        Limits {
            budget: Duration::from_secs(10),
            ..Limits::default()
        }
    }

    /// The crate's decision with the call's command fields read first, as
    /// the gate reads them (`needs`, then the models), at [`limits`].
    fn decide_read<'r>(
        settings: &'r CompiledSettings,
        rules: &'r CompiledRules,
        call: &Call<'r>,
        passed_over: &[GrantRef],
        trace: Option<&mut Vec<approval_gate::TraceStep>>,
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
                now_ms: Some(NOW),
                passed_over,
                trace,
                turn: None,
                mode: None,
                readings: Some(&readings),
                subscriptions: false,
            },
        )
    }

    fn config() -> ProptestConfig {
        ProptestConfig {
            cases: 384,
            failure_persistence: None,
            ..ProptestConfig::default()
        }
    }

    /// A glob as the test generates it: rendered to text for the crate,
    /// matched token by token here (the reference itself uses `globset`).
    #[derive(Debug, Clone)]
    enum Tok {
        Lit(String),
        Any,
        Star,
        Class(Vec<u8>, bool),
        Alt(Vec<String>),
    }

    fn render(toks: &[Tok]) -> String {
        let mut out = String::new();
        for t in toks {
            match t {
                Tok::Lit(s) => out.push_str(s),
                Tok::Any => out.push('?'),
                Tok::Star => out.push('*'),
                Tok::Class(set, negated) => {
                    out.push('[');
                    if *negated {
                        out.push('!');
                    }
                    out.extend(set.iter().map(|&b| char::from(b)));
                    out.push(']');
                }
                Tok::Alt(alts) => {
                    out.push('{');
                    out.push_str(&alts.join(","));
                    out.push('}');
                }
            }
        }
        out
    }

    /// Byte-wise backtracking match (`?` and classes take one byte, as in
    /// globset).
    fn glob_match(toks: &[Tok], s: &[u8]) -> bool {
        let Some((first, rest)) = toks.split_first() else {
            return s.is_empty();
        };
        match first {
            Tok::Star => (0..=s.len()).any(|i| glob_match(rest, &s[i..])),
            Tok::Any => !s.is_empty() && glob_match(rest, &s[1..]),
            Tok::Lit(lit) => s.starts_with(lit.as_bytes()) && glob_match(rest, &s[lit.len()..]),
            Tok::Class(set, negated) => s
                .first()
                .is_some_and(|b| set.contains(b) != *negated && glob_match(rest, &s[1..])),
            Tok::Alt(alts) => alts
                .iter()
                .any(|a| s.starts_with(a.as_bytes()) && glob_match(rest, &s[a.len()..])),
        }
    }

    // ---- generators ----

    const SEGMENTS: &[&str] = &[
        "a",
        "b",
        "ab",
        "x.y",
        "shell",
        "approval",
        "configuration",
        "get",
        "é",
    ];

    /// Ids that calls, exact rules and exact grants all draw from often, so
    /// that exact ids and globs compete for the same call.
    const COMMON_IDS: &[&str] = &[
        "a::b",
        "shell::get",
        "a",
        "x.y::ab",
        "a/b",
        "ab::b::get",
        "*",
        "a::*",
    ];

    fn segment() -> impl Strategy<Value = String> {
        prop::sample::select(SEGMENTS).prop_map(str::to_owned)
    }

    fn id_strategy() -> impl Strategy<Value = String> {
        prop_oneof![
            1 => prop::sample::select(COMMON_IDS).prop_map(str::to_owned),
            2 => any_id_strategy(),
        ]
    }

    fn any_id_strategy() -> impl Strategy<Value = String> {
        let sep = prop::sample::select(vec!["::", "::", "/", ".", "-", ":"]);
        let prefix = prop::sample::select(vec![
            "",
            "",
            "",
            " ",
            "ns/",
            "ns::",
            "my",
            "\u{200b}",
            "APPROVAL::",
            "Configuration::",
        ]);
        (
            prefix,
            segment(),
            prop::collection::vec((sep, segment()), 0..3),
        )
            .prop_map(|(p, first, rest)| {
                let mut id = format!("{p}{first}");
                for (s, seg) in rest {
                    id.push_str(s);
                    id.push_str(&seg);
                }
                id
            })
    }

    fn tok_strategy() -> impl Strategy<Value = Tok> {
        prop_oneof![
            4 => segment().prop_map(Tok::Lit),
            3 => Just(Tok::Lit("::".to_owned())),
            1 => prop::sample::select(vec![".", "-", ":"]).prop_map(|s| Tok::Lit(s.to_owned())),
            3 => Just(Tok::Star),
            1 => Just(Tok::Any),
            1 => (prop::sample::subsequence(b"abgx.:".to_vec(), 1..3), any::<bool>())
                .prop_map(|(set, neg)| Tok::Class(set, neg)),
            1 => prop::collection::vec(segment(), 2..4).prop_map(Tok::Alt),
        ]
    }

    fn glob_strategy() -> impl Strategy<Value = Vec<Tok>> {
        prop_oneof![
            3 => prop::collection::vec(tok_strategy(), 1..5),
            1 => prop::sample::select(&COMMON_IDS[..6]).prop_map(|id| vec![Tok::Lit(id.to_owned())]),
            1 => Just(vec![Tok::Star]),
        ]
    }

    /// An entry's `function_id`: a glob, text that is not a valid glob, or
    /// an id the calls use.
    fn entry_text() -> impl Strategy<Value = String> {
        prop_oneof![
            6 => glob_strategy().prop_map(|t| render(&t)),
            2 => prop::sample::select(COMMON_IDS).prop_map(str::to_owned),
            1 => prop::sample::select(vec!["a[", "{a,b", "shell::[", "a\\"]).prop_map(str::to_owned),
        ]
    }

    /// Entries as a human grants them (unbounded most of the time, exact or
    /// pattern), and now and then a seed entry a record was stored with
    /// before seeds were derived (it must be ignored).
    fn entry_strategy() -> impl Strategy<Value = Entry> {
        let expires_at = prop::sample::select(vec![
            None,
            None,
            None,
            Some(NOW - 1),
            Some(NOW),
            Some(NOW + 1),
        ]);
        let uses_left = prop::sample::select(vec![None, None, None, Some(0), Some(1), Some(5)]);
        let args = prop::option::weighted(
            0.3,
            prop::collection::btree_map(field(), constraint(), 0..3),
        );
        (
            entry_text(),
            prop::bool::weighted(0.15),
            any::<bool>(),
            expires_at,
            uses_left,
            args,
        )
            .prop_map(
                |(text, stored_seed, pattern, expires_at, uses_left, args)| Entry {
                    pattern,
                    expires_at,
                    uses_left,
                    args,
                    ..Entry::new(
                        text,
                        0,
                        if stored_seed {
                            GrantedBy::Seed
                        } else {
                            GrantedBy::UserClick
                        },
                    )
                },
            )
    }

    fn mode_strategy() -> impl Strategy<Value = Mode> {
        prop::sample::select(vec![Mode::Manual, Mode::Auto, Mode::Full])
    }

    /// Argument values: scalars of every type, numbers that are equal by
    /// value only, commands with and without shell separators, argv arrays.
    fn pool_value() -> impl Strategy<Value = Value> {
        prop::sample::select(vec![
            Value::Null,
            json!(1),
            json!(1.0),
            json!(12),
            json!("v"),
            json!("vv"),
            json!("x9"),
            json!("1"),
            json!(true),
            json!({"p": 1}),
            json!([1]),
            json!([1.0]),
            json!(["v", "x"]),
            json!(["v", 1, null]),
            json!("git status"),
            json!("git status --short"),
            json!("git statusx"),
            json!("git status; rm -rf /"),
            json!("git status $(id)"),
            json!("git log 'a b'"),
            json!("git log 'open"),
            json!("rm -rf /"),
            json!("ls && rm x"),
            json!(["rm", "-rf", "/"]),
            json!(["git", "status"]),
        ])
    }

    fn field() -> impl Strategy<Value = String> {
        prop::sample::select(vec![
            "k", "n", "cmd", "/o/p", "/arr/0", "/o", "/o~1p", "command", "K",
        ])
        .prop_map(str::to_owned)
    }

    fn constraint() -> impl Strategy<Value = ArgConstraint> {
        prop_oneof![
            1 => Just(ArgConstraint::Equals(Value::Null)),
            3 => pool_value().prop_map(ArgConstraint::Equals),
            2 => prop::sample::select(vec![
                "^v", "v$", "[0-9]", "x|v", "", "rm -rf", "^1$", "^true$", "^v x$", "^git status$",
            ])
            .prop_map(|r| ArgConstraint::Matches(r.to_owned())),
            2 => prop::sample::select(vec!["v", "vv", "x", "", "1", "git status", "git ", "rm", "ls"])
                .prop_map(|p| ArgConstraint::Prefix(p.to_owned())),
            1 => prop::sample::select(vec!["rm", "git status", "ls", "v"])
                .prop_map(|p| ArgConstraint::Runs(p.to_owned())),
        ]
    }

    #[derive(Debug, Clone)]
    struct GenRule {
        function: Vec<Tok>,
        shorthand: bool,
        action: RuleAction,
        rule_id: Option<String>,
        modes: Option<Vec<Mode>>,
        args: Option<std::collections::BTreeMap<String, ArgConstraint>>,
        timeout_ms: Option<u64>,
        escalate_after_ms: Option<u64>,
    }

    impl GenRule {
        fn spec(&self) -> RuleSpec {
            self.spec_with(None)
        }

        fn spec_with(&self, examples: Option<RuleExamples>) -> RuleSpec {
            let function = render(&self.function);
            if self.shorthand && examples.is_none() {
                let marker = match self.action {
                    RuleAction::Allow => "",
                    RuleAction::Deny => "!",
                    RuleAction::Ask => "?",
                };
                return RuleSpec::Shorthand(format!("{marker}{function}"));
            }
            RuleSpec::Object(RuleObject {
                function,
                action: self.action,
                rule_id: self.rule_id.clone(),
                modes: self.modes.clone(),
                args: self.args.clone(),
                timeout_ms: self.timeout_ms,
                escalate_after_ms: self.escalate_after_ms,
                examples,
            })
        }
    }

    fn rule_strategy() -> impl Strategy<Value = GenRule> {
        let action = prop::sample::select(vec![
            RuleAction::Allow,
            RuleAction::Allow,
            RuleAction::Deny,
            RuleAction::Deny,
            RuleAction::Ask,
        ]);
        // Auto often, so that seeds are common.
        let modes = prop::option::weighted(
            0.6,
            prop_oneof![
                2 => Just(vec![Mode::Auto]),
                3 => prop::collection::vec(mode_strategy(), 0..3),
            ],
        );
        let rule_id =
            prop::option::of(prop::sample::select(vec!["r1", "r2"]).prop_map(str::to_owned));
        let args = prop::option::weighted(
            0.5,
            prop::collection::btree_map(field(), constraint(), 0..3),
        );
        let deadline = prop::sample::select(vec![None, None, Some(1000), Some(60_000)]);
        (
            glob_strategy(),
            any::<bool>(),
            action,
            rule_id,
            modes,
            args,
            (deadline.clone(), deadline),
        )
            .prop_map(
                |(
                    function,
                    shorthand,
                    action,
                    rule_id,
                    modes,
                    args,
                    (timeout_ms, escalate_after_ms),
                )| {
                    // A shorthand has no id, modes, args or deadlines of its
                    // own; an allow shorthand cannot start with `?` (that
                    // marks ask).
                    let shorthand = shorthand
                        && !(action == RuleAction::Allow
                            && matches!(function.first(), Some(Tok::Any)));
                    let asks = action == RuleAction::Ask && !shorthand;
                    GenRule {
                        function,
                        shorthand,
                        action,
                        rule_id: rule_id.filter(|_| !shorthand),
                        modes: modes.filter(|_| !shorthand),
                        args: args.filter(|_| !shorthand),
                        timeout_ms: timeout_ms.filter(|_| asks),
                        escalate_after_ms: escalate_after_ms.filter(|_| asks),
                    }
                },
            )
    }

    fn precedence_strategy() -> impl Strategy<Value = RulePrecedence> {
        prop::sample::select(vec![
            RulePrecedence::FirstMatch,
            RulePrecedence::DenyAskAllow,
        ])
    }

    fn passed_over_strategy() -> impl Strategy<Value = Vec<GrantRef>> {
        prop::collection::vec(
            (any::<bool>(), 0u32..4).prop_map(|(approved, slot)| GrantRef {
                list: if approved {
                    GrantList::ApprovedAlways
                } else {
                    GrantList::AlwaysAllow
                },
                slot,
            }),
            0..2,
        )
    }

    fn args_strategy() -> impl Strategy<Value = Option<Value>> {
        let object = (
            prop::option::of(pool_value()),
            prop::option::of(pool_value()),
            prop::option::of(pool_value()),
            prop::option::of(pool_value()),
            prop::option::of(pool_value()),
            prop::option::of(pool_value()),
            // The same names in another case (§25.7), and a shell command.
            prop::option::weighted(0.15, pool_value()),
            prop::option::weighted(0.3, pool_value()),
        )
            .prop_map(|(k, n, cmd, p, a0, slash, upper_k, command)| {
                let mut m = Map::new();
                for (key, value) in [
                    ("k", k),
                    ("n", n),
                    ("cmd", cmd),
                    ("o/p", slash),
                    ("K", upper_k),
                    ("command", command),
                ] {
                    if let Some(v) = value {
                        m.insert(key.into(), v);
                    }
                }
                if let Some(p) = p {
                    m.insert("o".into(), json!({ "p": p }));
                }
                if let Some(a0) = a0 {
                    m.insert("arr".into(), json!([a0]));
                }
                Value::Object(m)
            });
        prop_oneof![
            1 => Just(None),
            1 => prop::sample::select(vec![json!([1]), json!("k"), Value::Null, json!(["rm", "-rf"])]).prop_map(Some),
            5 => object.prop_map(Some),
        ]
    }

    fn specs_of(rules: &[GenRule]) -> Vec<RuleSpec> {
        rules.iter().map(GenRule::spec).collect()
    }

    /// The crate's rules and the reference's policy for the same specs (or
    /// the lockdown for both).
    fn both(
        specs: &[RuleSpec],
        precedence: RulePrecedence,
        lockdown: bool,
    ) -> (CompiledRules, Policy) {
        if lockdown {
            return (
                CompiledRules::lockdown().with_precedence(precedence),
                Policy::lockdown().with_precedence(precedence),
            );
        }
        let compiled = CompiledRules::compile(specs)
            .expect("generated rules are valid")
            .with_precedence(precedence);
        let policy = Policy::new(specs)
            .expect("generated constraints compile")
            .with_precedence(precedence)
            .with_limits(limits());
        (compiled, policy)
    }

    /// An outcome as the two sides are compared: whole, except what a rule
    /// with two or more command constraints found. There the crate reports
    /// the rule's own id when one constraint saw a command and another only
    /// doubted, and the reference `opaque_command` (the rule held on a
    /// doubt): `a_rule_that_holds_on_a_doubt_is_consulted_as_opaque` shows
    /// it; the verdict is compared all the same.
    fn comparable(outcome: Outcome, policy: &Policy, id: &str) -> Outcome {
        match outcome {
            Outcome::Rule {
                index,
                rule_id,
                action,
                constraint,
                command: Some(_),
            } if policy.rules()[index].command_constraints(id) > 1 => Outcome::Rule {
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
            } if policy.rules()[index].command_constraints(id) > 1 => Outcome::Ask {
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

    /// `decide` agrees with the reference on every call, with and without
    /// a trace; the trace ends with the decision.
    fn agree(
        settings: &ApprovalSettings,
        rules: &CompiledRules,
        policy: &Policy,
        passed_over: &[GrantRef],
        calls: &[(String, Option<Value>)],
    ) -> Result<(), TestCaseError> {
        let compiled = CompiledSettings::new(settings);
        for (id, args) in calls {
            let call = Call {
                function_id: id,
                arguments: args.as_ref(),
            };
            let d = decide_read(&compiled, rules, &call, passed_over, None);
            let expected = policy.decide(
                settings,
                id,
                args.as_ref(),
                At {
                    now_ms: NOW,
                    passed_over,
                },
            );
            prop_assert_eq!(
                &comparable(outcome_of(&d), policy, id),
                &comparable(expected.clone(), policy, id),
                "id {:?} args {:?}",
                id,
                args
            );
            prop_assert_eq!(d.verdict, expected.verdict());
            let rule = matches!(expected, Outcome::Rule { .. } | Outcome::Ask { .. });
            if rule && comparable(expected.clone(), policy, id) == expected {
                // `opaque_command` when a rule was consulted on a doubt.
                prop_assert_eq!(d.rule_id(), expected.rule_id());
            }
            let mut trace = Vec::new();
            let traced = decide_read(&compiled, rules, &call, passed_over, Some(&mut trace));
            prop_assert_eq!(traced, d);
            let last = trace.last().map(|t| t.outcome);
            prop_assert_eq!(
                last,
                Some(match d.verdict {
                    Verdict::Allow => Step::Allow,
                    Verdict::Deny => Step::Deny,
                    Verdict::Hold => Step::Hold,
                }),
                "{:?}",
                trace
            );
            prop_assert!(
                trace[..trace.len() - 1]
                    .iter()
                    .all(|t| t.outcome == Step::Pass),
                "{:?}",
                trace
            );
        }
        Ok(())
    }

    proptest! {
        #![proptest_config(config())]

        /// The whole ladder: random rules (typed constraints, command
        /// prefixes), both precedences, every mode, exact and pattern
        /// grants with bounds, stored seed entries (ignored), seeds and
        /// suppressed seeds, grants passed over, and now and then the
        /// lockdown.
        #[test]
        fn rule_21_decide_agrees_with_the_reference(
            rules in prop::collection::vec(rule_strategy(), 0..12),
            precedence in precedence_strategy(),
            lockdown in prop::bool::weighted(0.1),
            mode in mode_strategy(),
            always in prop::collection::vec(entry_strategy(), 0..4),
            approved in prop::collection::vec(entry_strategy(), 0..3),
            suppress in prop::collection::vec(any::<prop::sample::Index>(), 0..3),
            passed_over in passed_over_strategy(),
            calls in prop::collection::vec((id_strategy(), args_strategy()), 1..8),
        ) {
            let specs = specs_of(&rules);
            let (compiled, policy) = both(&specs, precedence, lockdown);
            let seeds = policy.seeds();
            prop_assert_eq!(
                compiled.auto_seed_globs(),
                seeds.iter().map(|(glob, _)| glob.clone()).collect::<Vec<_>>()
            );
            let suppressed_seeds = if seeds.is_empty() {
                Vec::new()
            } else {
                suppress.iter().map(|i| seeds[i.index(seeds.len())].0.clone()).collect()
            };
            let settings = ApprovalSettings {
                always_allow: always,
                approved_always: approved,
                suppressed_seeds,
                ..ApprovalSettings::new(mode)
            };
            agree(&settings, &compiled, &policy, &passed_over, &calls)?;
        }

        /// A record stored before seeds were derived, and rules removed
        /// since: the seeds of the removed rules allow nothing, the stored
        /// seed entries are ignored, a suppressed seed stays out.
        #[test]
        fn rule_21_3_rules_removed_under_a_stored_record_take_their_seeds(
            rules in prop::collection::vec(rule_strategy(), 1..10),
            removed in prop::collection::vec(any::<prop::sample::Index>(), 1..4),
            precedence in precedence_strategy(),
            own in prop::collection::vec(entry_strategy(), 0..3),
            suppress_first in any::<bool>(),
            calls in prop::collection::vec((id_strategy(), args_strategy()), 1..8),
        ) {
            let before = specs_of(&rules);
            let (old_rules, old_policy) = both(&before, precedence, false);
            // As a pre-v3 worker stored it: the seeds materialised.
            let config = ApprovalConfig {
                default_mode: Mode::Auto,
                rules: before.clone(),
                rule_precedence: precedence,
                protected_path_functions: Vec::new(), // the reference judges no §29 paths
                ..ApprovalConfig::default()
            };
            let mut stored = default_settings(&config, &old_rules, 7);
            stored.always_allow.extend(own.into_iter().filter(|e| e.granted_by == GrantedBy::UserClick));
            if suppress_first {
                if let Some((glob, _)) = old_policy.seeds().first() {
                    stored.remove_always_allow(glob, &old_rules.auto_seed_globs());
                }
            }
            let mut after = rules.clone();
            for index in &removed {
                if !after.is_empty() {
                    after.remove(index.index(after.len()));
                }
            }
            let after = specs_of(&after);
            let (new_rules, new_policy) = both(&after, precedence, false);
            agree(&stored, &new_rules, &new_policy, &[], &calls)?;
            // Whatever allows a call now, it is not a seed the rules in
            // force do not make.
            let compiled = CompiledSettings::new(&stored);
            let live = new_rules.auto_seed_globs();
            for (id, args) in &calls {
                let d = decide(&compiled, &new_rules, &Call { function_id: id, arguments: args.as_ref() });
                if let Outcome::Seed { function_id, .. } = outcome_of(&d) {
                    prop_assert!(live.contains(&function_id), "{} is not a seed of {:?}", function_id, after);
                    prop_assert!(!stored.suppressed_seeds.contains(&function_id));
                }
            }
            // What a console sees: the live seeds, not the stored ones.
            let view = stored.with_seeds(&live);
            let shown: Vec<&str> = view.always_allow.iter()
                .filter(|e| e.granted_by == GrantedBy::Seed)
                .map(|e| e.function_id.as_str())
                .collect();
            let expected: Vec<&str> = live.iter()
                .filter(|g| !stored.suppressed_seeds.contains(g))
                .map(String::as_str)
                .collect();
            prop_assert_eq!(shown, expected);
        }

        /// Seeding respects order: whatever the rules, a call the rules
        /// alone deny in auto mode is never allowed for a session with
        /// nothing stored, and seeds change no verdict the rules reach on
        /// their own.
        #[test]
        fn a_seed_never_allows_what_the_rules_alone_deny(
            rules in prop::collection::vec(rule_strategy(), 0..12),
            precedence in precedence_strategy(),
            calls in prop::collection::vec((id_strategy(), args_strategy()), 1..8),
        ) {
            let specs = specs_of(&rules);
            let config = ApprovalConfig {
                default_mode: Mode::Auto,
                rules: specs.clone(),
                rule_precedence: precedence,
                protected_path_functions: Vec::new(), // the reference judges no §29 paths
                ..ApprovalConfig::default()
            };
            let snapshot = Snapshot::compile(config);
            prop_assert!(snapshot.rule_errors.is_empty());
            let policy = Policy::new(&specs).expect("constraints compile")
                .with_precedence(precedence).with_limits(limits());
            let nothing = ApprovalSettings::new(Mode::Auto);
            for (id, args) in &calls {
                let call = Call { function_id: id, arguments: args.as_ref() };
                let d = decide_read(&snapshot.defaults, &snapshot.rules, &call, &[], None);
                if policy.rules_deny(&nothing, id, args.as_ref(), At::time(NOW)) {
                    prop_assert_ne!(d.verdict, Verdict::Allow, "id {:?} args {:?} specs {:?}", id, args, specs);
                }
                let expected = policy.decide(&nothing, id, args.as_ref(), At::time(NOW));
                prop_assert_eq!(d.verdict, expected.verdict(), "id {:?} args {:?} specs {:?}", id, args, specs);
            }
        }

        /// Examples sorted by the reference compile; one put in the wrong
        /// list is a rule error at that rule's index.
        #[test]
        fn examples_agree_with_the_reference(
            rules in prop::collection::vec(rule_strategy(), 1..6),
            probes in prop::collection::vec((id_strategy(), args_strategy()), 1..6),
            victim in any::<prop::sample::Index>(),
        ) {
            let examples: Vec<RuleExamples> = rules.iter().map(|rule| {
                let reference = RefRule::of(&rule.spec()).expect("constraints compile");
                let mut ex = RuleExamples::default();
                for (id, args) in &probes {
                    let probe = Probe { function_id: id.clone(), arguments: args.clone() };
                    if reference.matches(id, args.as_ref()) {
                        ex.matching.push(probe);
                    } else {
                        ex.no_match.push(probe);
                    }
                }
                ex
            }).collect();
            let specs: Vec<RuleSpec> = rules.iter().zip(&examples).map(|(r, e)| r.spec_with(Some(e.clone()))).collect();
            prop_assert!(CompiledRules::compile(&specs).is_ok(), "{:?}", specs);
            let index = victim.index(rules.len());
            let mut wrong = examples[index].clone();
            std::mem::swap(&mut wrong.matching, &mut wrong.no_match);
            let mut specs = specs;
            specs[index] = rules[index].spec_with(Some(wrong));
            let errors = CompiledRules::compile(&specs).expect_err("a misplaced example fails");
            prop_assert!(errors.iter().all(|e| e.index == index), "{:?}", errors);
            prop_assert_eq!(errors.len(), probes.len());
        }

        #[test]
        fn generated_globs_match_their_reference(glob in glob_strategy(), id in id_strategy()) {
            let text = render(&glob);
            let specs = [RuleSpec::Object(RuleObject {
                function: text.clone(),
                action: RuleAction::Allow,
                rule_id: None,
                modes: None,
                args: None,
                timeout_ms: None,
                escalate_after_ms: None,
                examples: None,
            })];
            let compiled = CompiledRules::compile(&specs).expect("valid glob");
            let settings = CompiledSettings::new(&ApprovalSettings::new(Mode::Manual));
            let d = decide(&settings, &compiled, &Call { function_id: &id, arguments: None });
            let expected = if builtin_guard(&id, None).is_some() {
                Verdict::Deny
            } else if glob_match(&glob, id.as_bytes()) {
                Verdict::Allow
            } else {
                Verdict::Hold
            };
            prop_assert_eq!(d.verdict, expected, "glob {:?} id {:?}", text, id);
            prop_assert_eq!(approval_gate_reference::pattern_matches(&text, &id), glob_match(&glob, id.as_bytes()));
        }
    }

    /// Command lines and their look-alikes: every shell character the
    /// allow side refuses, quotes open and closed, separators the deny side
    /// splits on, argv arrays, and values of other types.
    fn command_value() -> impl Strategy<Value = Value> {
        prop::sample::select(vec![
            json!("git status"),
            json!("git status --short"),
            json!("git statusx"),
            json!("git status; id"),
            json!("git status && id"),
            json!("git status & id"),
            json!("git status | sh"),
            json!("git status $(id)"),
            json!("git status `id`"),
            json!("git status > f"),
            json!("git status < f"),
            json!("git status \\\n id"),
            json!("git status\nid"),
            json!("git status a\\ b"),
            json!("git log 'a b'"),
            json!("git log 'open"),
            json!("git log \"it's\""),
            json!("git log \"open"),
            json!("git\tstatus"),
            json!("rm -rf /"),
            json!("ls\n  rm x"),
            json!("  rm -rf"),
            json!(""),
            json!(["git", "status"]),
            json!(["git", "status;", "id"]),
            json!(["rm", "-rf", "/"]),
            json!(["git", 1]),
            json!([]),
            json!(1),
            json!(1.0),
            json!(true),
            Value::Null,
            json!({"a": "git status"}),
        ])
    }

    /// Numbers and their look-alikes of other types.
    fn number_value() -> impl Strategy<Value = Value> {
        prop::sample::select(vec![
            json!(1),
            json!(1.0),
            json!(12),
            json!(-1),
            json!("1"),
            json!(true),
            json!([1]),
            json!([1.0]),
            Value::Null,
        ])
    }

    /// A constraint on the command (`cmd`) or on a number (`n`).
    fn command_constraint() -> impl Strategy<Value = (String, ArgConstraint)> {
        let on_cmd = prop_oneof![
            3 => prop::sample::select(vec!["git status", "git ", "git", "rm", "rm -rf", "", "ls"])
                .prop_map(|p| ArgConstraint::Prefix(p.to_owned())),
            2 => prop::sample::select(vec!["rm -rf", "^git status$", "status", "^$", "^-rf$"])
                .prop_map(|r| ArgConstraint::Matches(r.to_owned())),
            1 => prop::sample::select(vec![json!("git status"), json!(["git", "status"]), Value::Null])
                .prop_map(ArgConstraint::Equals),
        ];
        let on_n = prop_oneof![
            4 => number_value().prop_map(ArgConstraint::Equals),
            1 => prop::sample::select(vec!["^1$", "^true$", "^1.0$"])
                .prop_map(|r| ArgConstraint::Matches(r.to_owned())),
            1 => prop::sample::select(vec!["1", "tr"]).prop_map(|p| ArgConstraint::Prefix(p.to_owned())),
        ];
        prop_oneof![
            2 => on_cmd.prop_map(|c| ("cmd".to_owned(), c)),
            1 => on_n.prop_map(|c| ("n".to_owned(), c)),
        ]
    }

    fn command_args(
    ) -> impl Strategy<Value = Option<std::collections::BTreeMap<String, ArgConstraint>>> {
        prop::option::weighted(
            0.9,
            prop::collection::vec(command_constraint(), 1..3)
                .prop_map(|pairs| pairs.into_iter().collect()),
        )
    }

    /// One function, many constraints on its command: rules and grants
    /// dense enough that every typed reading and every prefix rule meets
    /// the calls.
    fn command_rule() -> impl Strategy<Value = GenRule> {
        (
            prop::sample::select(vec![RuleAction::Allow, RuleAction::Deny, RuleAction::Ask]),
            prop::option::weighted(0.3, prop::collection::vec(mode_strategy(), 0..3)),
            command_args(),
        )
            .prop_map(|(action, modes, args)| GenRule {
                function: vec![Tok::Lit("shell::exec".to_owned())],
                shorthand: false,
                action,
                rule_id: None,
                modes,
                args,
                timeout_ms: None,
                escalate_after_ms: None,
            })
    }

    fn command_grant() -> impl Strategy<Value = Entry> {
        (
            prop::sample::select(vec!["shell::exec", "shell::*", "*"]),
            any::<bool>(),
            command_args(),
        )
            .prop_map(|(id, pattern, args)| Entry {
                pattern,
                args,
                ..Entry::new(id, 0, GrantedBy::UserClick)
            })
    }

    fn command_call() -> impl Strategy<Value = Option<Value>> {
        prop_oneof![
            8 => (prop::option::of(command_value()), prop::option::of(number_value()))
                .prop_map(|(cmd, n)| {
                    let mut m = Map::new();
                    if let Some(c) = cmd {
                        m.insert("cmd".into(), c);
                    }
                    if let Some(n) = n {
                        m.insert("n".into(), n);
                    }
                    Some(Value::Object(m))
                }),
            1 => Just(None),
            1 => command_value().prop_map(Some),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 1024, ..config() })]

        /// Typed constraints and command prefixes, densely: every rule and
        /// grant constrains the command of one function.
        #[test]
        fn rule_21_4_and_21_5_constraints_agree_with_the_reference(
            rules in prop::collection::vec(command_rule(), 0..4),
            precedence in precedence_strategy(),
            mode in mode_strategy(),
            approved in prop::collection::vec(command_grant(), 0..3),
            always in prop::collection::vec(command_grant(), 0..2),
            calls in prop::collection::vec(command_call(), 1..16),
        ) {
            let specs = specs_of(&rules);
            let (compiled, policy) = both(&specs, precedence, false);
            let settings = ApprovalSettings {
                always_allow: always,
                approved_always: approved,
                ..ApprovalSettings::new(mode)
            };
            let calls: Vec<(String, Option<Value>)> =
                calls.into_iter().map(|args| ("shell::exec".to_owned(), args)).collect();
            agree(&settings, &compiled, &policy, &[], &calls)?;
        }
    }

    // ---- configuration all or nothing (contract §26.2) ----

    /// One field the worker cannot use, injected into an otherwise good
    /// value: each is a kind the contract lists.
    #[derive(Debug, Clone, Copy)]
    enum Defect {
        GuardGlob,
        Deadline,
        CheckInterval,
        SuggestPrefix,
        PathGlob,
        PathFunction,
        GatePriority,
        Reviewer,
        DecisionLog,
        UnknownKey,
        WrongType,
    }

    fn defect_strategy() -> impl Strategy<Value = Option<Defect>> {
        prop_oneof![
            3 => Just(None),
            2 => prop::sample::select(vec![
                Defect::GuardGlob,
                Defect::Deadline,
                Defect::CheckInterval,
                Defect::SuggestPrefix,
                Defect::PathGlob,
                Defect::PathFunction,
                Defect::GatePriority,
                Defect::Reviewer,
                Defect::DecisionLog,
                Defect::UnknownKey,
                Defect::WrongType,
            ])
            .prop_map(Some),
        ]
    }

    fn inject(defect: Defect, value: &mut Value) {
        let map = value.as_object_mut().expect("an object");
        match defect {
            Defect::GuardGlob => {
                let globs = map.entry("human_only_extra").or_insert_with(|| json!([]));
                globs
                    .as_array_mut()
                    .expect("a list")
                    .push(json!("secrets::{get,put"));
            }
            Defect::Deadline => {
                map.insert("pending_timeout_ms".into(), json!(5));
            }
            Defect::CheckInterval => {
                map.insert("binding_check_interval_ms".into(), json!(0));
            }
            Defect::SuggestPrefix => {
                map.insert("suggest_prefixes".into(), json!(["ls; rm -rf /"]));
            }
            Defect::PathGlob => {
                map.insert("protected_paths".into(), json!(["**/config/{a"]));
            }
            Defect::PathFunction => {
                map.insert("protected_path_functions".into(), json!(["shell::[x"]));
            }
            Defect::GatePriority => {
                map.insert("gate_priority".into(), json!(9_007_199_254_740_992_i64));
            }
            Defect::Reviewer => {
                map.insert("reviewer".into(), json!({"function_id": ""}));
            }
            Defect::DecisionLog => {
                map.insert(
                    "decision_log".into(),
                    json!({"function_id": "audit::log", "queue": 0}),
                );
            }
            Defect::UnknownKey => {
                map.insert("defualt_mode".into(), json!("full"));
            }
            Defect::WrongType => {
                map.insert("grant_reask_limit".into(), json!("three"));
            }
        }
    }

    fn guard_glob_strategy() -> impl Strategy<Value = String> {
        prop::sample::select(vec![
            "a::*",
            "shell::*",
            "x.y::ab",
            "*::get",
            "ab::{b,c}::get",
            "a",
        ])
        .prop_map(str::to_owned)
    }

    proptest! {
        #![proptest_config(config())]

        /// A run of values, some with one field the worker cannot use.
        /// Whatever the order: the snapshot in force is the last value that
        /// could be used whole (the lockdown while there is none); a refused
        /// value is reported and nothing of it applies; and the gate decides
        /// every call as the reference does under that last good value's
        /// rules, precedence, mode and guards.
        #[test]
        fn rule_26_2_the_snapshot_in_force_is_the_last_value_usable_whole(
            steps in prop::collection::vec((
                prop::collection::vec(rule_strategy(), 0..6),
                precedence_strategy(),
                mode_strategy(),
                prop::collection::vec(guard_glob_strategy(), 0..3),
                defect_strategy(),
            ), 1..6),
            calls in prop::collection::vec((id_strategy(), args_strategy()), 1..6),
        ) {
            let mut snapshot = Snapshot::lockdown(Vec::new());
            let mut last_good: Option<(Vec<RuleSpec>, RulePrecedence, Mode, Vec<String>)> = None;
            for (rules, precedence, mode, guards, defect) in steps {
                let specs = specs_of(&rules);
                let config = ApprovalConfig {
                    default_mode: mode,
                    rules: specs.clone(),
                    rule_precedence: precedence,
                    human_only_extra: guards.clone(),
                    // The reference judges no protected paths (§29 has its
                    // own tests): off, as an operator may set it.
                    protected_path_functions: Vec::new(),
                    ..ApprovalConfig::default()
                };
                let mut value = config.to_json();
                if let Some(defect) = defect {
                    inject(defect, &mut value);
                }
                snapshot = Snapshot::succeed_parsed(&snapshot, ApprovalConfig::from_value(&value));
                prop_assert_eq!(snapshot.is_refused(), defect.is_some(), "{:?}: {:?}", defect, snapshot.errors());
                if defect.is_none() {
                    prop_assert_eq!(&snapshot.config, &config);
                    last_good = Some((specs, precedence, mode, guards));
                }
                match &last_good {
                    None => {
                        prop_assert!(snapshot.lockdown);
                        prop_assert_eq!(&snapshot.config, &ApprovalConfig::default());
                    }
                    Some((specs, precedence, mode, guards)) => {
                        prop_assert!(!snapshot.lockdown);
                        prop_assert_eq!(&snapshot.config.rules, specs);
                        prop_assert_eq!(snapshot.config.rule_precedence, *precedence);
                        prop_assert_eq!(snapshot.config.default_mode, *mode);
                        prop_assert_eq!(&snapshot.config.human_only_extra, guards);
                        let policy = Policy::new(specs)
                            .expect("constraints compile")
                            .with_precedence(*precedence)
                            .with_extra_guards(guards);
                        let nothing = ApprovalSettings::new(*mode);
                        for (id, args) in &calls {
                            let call = Call { function_id: id, arguments: args.as_ref() };
                            let d = decide(&snapshot.defaults, &snapshot.rules, &call);
                            let expected = policy.decide(&nothing, id, args.as_ref(), At::time(NOW));
                            prop_assert_eq!(d.verdict, expected.verdict(), "id {:?} args {:?}", id, args);
                        }
                    }
                }
            }
        }
    }

    // ---- commands (contract §25) ----

    /// A program word in one of its spellings: plain, quoted, escaped,
    /// path-qualified, look-alikes, and built from an expansion.
    fn program_word() -> impl Strategy<Value = String> {
        prop_oneof![
            8 => prop::sample::select(vec![
                "rm", "git", "ls", "curl", "cat", "tail", "cargo", "echo", "grep", "cd", "sh",
            ]),
            4 => prop::sample::select(vec![
                "'rm'", "\"rm\"", "r''m", "\\rm", "/bin/rm", "$'\\x72m'", "'git'", "/usr/bin/git",
                "./git", "/usr/bin/curl", "curlie", "rmdir", "gitk", "/tmp/w/git",
            ]),
            1 => prop::sample::select(vec![
                "$X", "$(echo rm)", "`echo rm`", "r?", "{rm,x}", "~/rm", "${X:-rm}", "\"$@\"",
            ]),
        ]
        .prop_map(str::to_owned)
    }

    fn argument_word() -> impl Strategy<Value = String> {
        prop::sample::select(vec![
            "-rf",
            "/tmp/x",
            "status",
            "push",
            "--force",
            "-sb",
            "test",
            "log",
            "x",
            "-20",
            "$A",
            "\"$A\"",
            "*",
            "src/*.rs",
            "'a b'",
            "\"cleanup; rm stale\"",
            "-n",
            "origin",
            "main",
            "--short",
            "http://e.x",
            "-c",
            "rm",
            "{a,b}",
            "-exec",
            "{}",
            ";",
            "--",
            "$(id)",
        ])
        .prop_map(str::to_owned)
    }

    /// One simple command: maybe an assignment, maybe a wrapper, a program,
    /// arguments, maybe a redirection.
    fn simple_command() -> impl Strategy<Value = String> {
        (
            prop::option::weighted(
                0.1,
                prop::sample::select(vec!["X=1", "LD_PRELOAD=/x.so", "A=", "BASH_ENV=/x"]),
            ),
            prop::option::weighted(
                0.2,
                prop::sample::select(vec![
                    "sudo",
                    "env",
                    "nice -n 5",
                    "timeout 5",
                    "command",
                    "exec",
                    "xargs",
                    "nohup",
                    "sudo -u $U",
                    "time",
                    "busybox",
                    "find . -exec",
                    "git -c x=y",
                ]),
            ),
            program_word(),
            prop::collection::vec(argument_word(), 0..4),
            prop::option::weighted(
                0.25,
                prop::sample::select(vec![
                    "2>&1",
                    ">&2",
                    ">/dev/null",
                    "2>/dev/null",
                    "</dev/null",
                    "> out",
                    "< in",
                    ">> log",
                    "<<< x",
                    "&>/dev/null",
                ]),
            ),
        )
            .prop_map(|(assign, wrapper, program, args, redirect)| {
                let mut words: Vec<String> = Vec::new();
                words.extend(assign.map(str::to_owned));
                words.extend(wrapper.map(str::to_owned));
                words.push(program);
                words.extend(args);
                words.extend(redirect.map(str::to_owned));
                words.join(" ")
            })
    }

    /// Developer commands that only mention a denied word, and commands an
    /// allow list covers piece by piece.
    fn benign_command() -> impl Strategy<Value = String> {
        prop::sample::select(vec![
            "git commit -m \"cleanup; rm stale files\"",
            "grep -rn rm src/",
            "echo rm",
            "ls ./rmdir-notes",
            "man rm",
            "cargo run -- --rm",
            "rmdir empty",
            "curlie https://e.x",
            "git  status   -sb",
            "git status",
            "git status --short",
            "git log -n 3",
            "cargo test 2>&1 | tail -20",
            "cd src && cargo test",
            "ls src/*.rs",
            "tail -20 log",
            "cat README.md",
            "",
            "# just a comment",
        ])
        .prop_map(str::to_owned)
    }

    /// A list or pipeline of plain commands an allow list can cover piece
    /// by piece: the programs and words the generated prefixes name, quoted
    /// now and then, with the redirections an allow lets through (and a
    /// few it does not).
    fn plain_list() -> impl Strategy<Value = String> {
        let phrase = prop::sample::select(vec![
            "git status",
            "git status",
            "git status --short",
            "git log",
            "git push --force",
            "ls",
            "ls src/*.rs",
            "ls *",
            "tail -20",
            "tail",
            "cat x",
            "cd src",
            "cargo test",
            "cargo build",
            "rm -rf x",
            "'git' status",
            "curl x",
            "echo 'a b'",
            "grep -n x",
            "git $A",
        ]);
        let redirect = prop::sample::select(vec![
            "",
            "",
            "",
            "",
            "",
            " 2>&1",
            " >/dev/null",
            " 2>/dev/null",
            " > out",
            " >&2",
        ]);
        let one = (phrase, redirect).prop_map(|(p, r)| format!("{p}{r}"));
        let sep = prop::sample::select(vec![" && ", " | ", "; ", " || ", "\n"]);
        (one.clone(), prop::collection::vec((sep, one), 0..3)).prop_map(|(first, rest)| {
            let mut text = first;
            for (sep, next) in rest {
                text.push_str(sep);
                text.push_str(&next);
            }
            text
        })
    }

    /// Bash source from the classes of §25.3–5: lists, pipelines, groups,
    /// subshells, compound statements, nested shells, eval, substitutions,
    /// here-documents, functions, comments; and plain lists.
    fn command_text() -> impl Strategy<Value = String> {
        prop_oneof![2 => plain_list(), 3 => hostile_text()]
    }

    fn hostile_text() -> impl Strategy<Value = String> {
        let leaf = prop_oneof![3 => simple_command(), 1 => benign_command()];
        leaf.prop_recursive(3, 10, 2, |inner| {
            let sep = prop::sample::select(vec!["; ", " && ", " || ", " | ", " & ", "\n"]);
            prop_oneof![
                4 => (inner.clone(), sep, inner.clone()).prop_map(|(a, s, b)| format!("{a}{s}{b}")),
                1 => inner.clone().prop_map(|a| format!("({a})")),
                1 => inner.clone().prop_map(|a| format!("{{ {a}; }}")),
                2 => (prop::sample::select(vec!["bash -c", "sh -c", "sh -lc", "eval", "sudo sh -c", "zsh -c"]), inner.clone())
                    .prop_map(|(shell, a)| format!("{shell} '{}'", a.replace('\'', "'\\''"))),
                1 => inner.clone().prop_map(|a| format!("bash -c \"{}\"", a.replace(['"', '$', '`', '\\'], ""))),
                1 => inner.clone().prop_map(|a| format!("echo $({a})")),
                1 => inner.clone().prop_map(|a| format!("echo `{}`", a.replace('`', ""))),
                1 => inner.clone().prop_map(|a| format!("cat <({a})")),
                1 => (inner.clone(), inner.clone()).prop_map(|(a, b)| format!("if {a}; then {b}; fi")),
                1 => inner.clone().prop_map(|a| format!("for i in x; do {a}; done")),
                1 => inner.clone().prop_map(|a| format!("! {a}")),
                1 => inner.clone().prop_map(|a| format!("cat <<EOF\n$({a})\nEOF")),
                1 => inner.clone().prop_map(|a| format!("{a} # note")),
                1 => inner.prop_map(|a| format!("f() {{ {a}; }}; f")),
            ]
        })
    }

    /// What a `shell::*` call's `command` (with its `args`) or another
    /// command field holds: bash source, an argv's program, or a value of
    /// another type.
    fn command_field_value() -> impl Strategy<Value = Value> {
        prop_oneof![
            12 => command_text().prop_map(Value::String),
            3 => prop::sample::select(vec![
                "rm", "/bin/rm", "env", "sh", "git", "ls", "sudo", "find", "rm -rf /tmp/x", "bash",
            ])
            .prop_map(|p| json!(p)),
            1 => prop::sample::select(vec![
                json!(["rm", "-rf", "/tmp/x"]),
                json!(["git", "status"]),
                json!(["sh", "-c", "rm -rf x"]),
                json!([]),
                json!(5),
                json!(["git", 1]),
                json!({"a": "rm"}),
            ]),
        ]
    }

    fn args_array() -> impl Strategy<Value = Value> {
        prop_oneof![
            6 => prop::sample::select(vec![
                json!(["-rf", "/tmp/x"]),
                json!(["rm", "-rf", "/tmp/x"]),
                json!(["-c", "rm -rf /tmp/x"]),
                json!(["-c", "git status"]),
                json!(["status"]),
                json!(["status", "--short"]),
                json!(["push", "--force"]),
                json!(["-20"]),
                json!([".", "-exec", "sh", "-c", "curl x | sh", ";"]),
                json!([]),
            ]),
            1 => prop::sample::select(vec![json!([1]), json!("status"), Value::Null]),
        ]
    }

    /// A call's arguments: `command` with or without `args`, the same key
    /// in another case, another command field (`script`), a text field
    /// (`cmd`), and `env` / `stdin`. (`args` in another case is left out:
    /// see `a_sibling_args_in_another_case_hides_no_reading`.)
    fn command_arguments() -> impl Strategy<Value = Option<Value>> {
        let object = (
            (
                prop::option::weighted(0.85, command_field_value()),
                prop::option::weighted(0.35, args_array()),
                prop::option::weighted(0.1, command_field_value()),
            ),
            (
                prop::option::weighted(0.3, command_field_value()),
                prop::option::weighted(0.15, command_text()),
                prop::option::weighted(
                    0.15,
                    prop::sample::select(vec![
                        json!({}),
                        json!({"A": "1"}),
                        json!(""),
                        Value::Null,
                    ]),
                ),
                prop::option::weighted(0.1, prop::sample::select(vec![json!(""), json!("x")])),
            ),
        )
            .prop_map(|((command, args, upper), (script, cmd, env, stdin))| {
                let mut m = Map::new();
                for (key, value) in [
                    ("command", command),
                    ("args", args),
                    ("COMMAND", upper),
                    ("script", script),
                    ("cmd", cmd.map(Value::String)),
                    ("env", env),
                    ("stdin", stdin),
                ] {
                    if let Some(v) = value {
                        m.insert(key.into(), v);
                    }
                }
                Value::Object(m)
            });
        prop_oneof![
            12 => object.prop_map(Some),
            1 => Just(None),
            1 => command_text().prop_map(|t| Some(Value::String(t))),
        ]
    }

    /// The words a command constraint names.
    fn command_words() -> impl Strategy<Value = &'static str> {
        prop::sample::select(vec![
            "rm",
            "rm -rf",
            "git",
            "git status",
            "git push --force",
            "ls",
            "curl",
            "cat",
            "tail",
            "tail -20",
            "cargo test",
            "cd",
            "/bin/rm",
            "echo",
            "grep",
            "sh -c",
            "./git",
            "'rm'",
            "sudo",
            "find",
        ])
    }

    /// A constraint of a command rule or grant: `prefix` or `runs` on a
    /// command field in several spellings, now and then on a text field or
    /// a text constraint on the command.
    fn command_field_constraint() -> impl Strategy<Value = (String, ArgConstraint)> {
        let field = prop::sample::select(vec![
            "command", "command", "command", "COMMAND", "Command", "/command", "script", "cmd",
            "/script",
        ]);
        let constraint = prop_oneof![
            6 => command_words().prop_map(|w| ArgConstraint::Prefix(w.to_owned())),
            1 => prop::sample::select(vec!["", "git log 'open"]).prop_map(|w| ArgConstraint::Prefix(w.to_owned())),
            4 => command_words().prop_map(|w| ArgConstraint::Runs(w.to_owned())),
            1 => prop::sample::select(vec!["rm -rf", "^git status$", "curl"])
                .prop_map(|r| ArgConstraint::Matches(r.to_owned())),
            1 => prop::sample::select(vec![json!("git status"), Value::Null, json!({})])
                .prop_map(ArgConstraint::Equals),
        ];
        (field, constraint).prop_map(|(f, c)| (f.to_owned(), c))
    }

    fn command_constraints(
    ) -> impl Strategy<Value = std::collections::BTreeMap<String, ArgConstraint>> {
        prop_oneof![
            4 => command_field_constraint().prop_map(|(f, c)| [(f, c)].into_iter().collect()),
            1 => prop::collection::vec(command_field_constraint(), 2..3)
                .prop_map(|pairs| pairs.into_iter().collect()),
        ]
    }

    const COMMAND_FUNCTIONS: &[&str] = &["shell::exec", "shell::*", "*", "x::run", "shell::spawn"];

    fn command_function_glob() -> impl Strategy<Value = Vec<Tok>> {
        prop::sample::select(COMMAND_FUNCTIONS).prop_map(|f| match f {
            "*" => vec![Tok::Star],
            "shell::*" => vec![Tok::Lit("shell::".to_owned()), Tok::Star],
            id => vec![Tok::Lit(id.to_owned())],
        })
    }

    /// A rule of a command policy: any action, the functions runners are
    /// named by, modes now and then, command constraints.
    fn command_policy_rule() -> impl Strategy<Value = GenRule> {
        (
            prop::sample::select(vec![
                RuleAction::Allow,
                RuleAction::Allow,
                RuleAction::Allow,
                RuleAction::Deny,
                RuleAction::Deny,
                RuleAction::Ask,
            ]),
            command_function_glob(),
            prop::option::weighted(0.2, prop::collection::vec(mode_strategy(), 0..3)),
            prop::option::weighted(0.92, command_constraints()),
            prop::option::of(prop::sample::select(vec!["r1", "r2"])),
        )
            .prop_map(|(action, function, modes, args, rule_id)| GenRule {
                function,
                shorthand: false,
                action,
                rule_id: rule_id.map(str::to_owned),
                modes,
                args: if action == RuleAction::Allow {
                    args.map(exact_names)
                } else {
                    args
                },
                timeout_ms: None,
                escalate_after_ms: None,
            })
    }

    /// Allow rules and grants keep exact names (§25.7): they are generated
    /// on `command` itself, not on its other spellings (what a constraint
    /// on `COMMAND` means to an allow rule is left out here; see
    /// `allow_rules_on_another_spelling_of_command`).
    fn exact_names(
        args: std::collections::BTreeMap<String, ArgConstraint>,
    ) -> std::collections::BTreeMap<String, ArgConstraint> {
        args.into_iter()
            .map(|(field, c)| {
                if field.eq_ignore_ascii_case("command") {
                    ("command".to_owned(), c)
                } else {
                    (field, c)
                }
            })
            .collect()
    }

    /// A grant with command constraints: exact or pattern, unbounded most
    /// of the time, else with uses left or used up, now and then expired.
    fn command_policy_grant() -> impl Strategy<Value = Entry> {
        (
            prop::sample::select(COMMAND_FUNCTIONS),
            any::<bool>(),
            prop::option::weighted(0.9, command_constraints()),
            prop::sample::select(vec![None, None, None, None, Some(1), Some(3), Some(0)]),
            prop::sample::select(vec![
                None,
                None,
                None,
                None,
                None,
                Some(NOW - 1),
                Some(NOW + 1),
            ]),
        )
            .prop_map(|(id, pattern, args, uses_left, expires_at)| Entry {
                pattern,
                args: args.map(exact_names),
                uses_left,
                expires_at,
                ..Entry::new(id, 0, GrantedBy::UserClick)
            })
    }

    fn command_call_id() -> impl Strategy<Value = String> {
        prop::sample::select(vec![
            "shell::exec",
            "shell::exec",
            "shell::exec",
            "shell::exec_bg",
            "shell::spawn",
            "x::run",
            "SHELL::exec",
        ])
        .prop_map(str::to_owned)
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 4096, ..config() })]

        /// Commands judged as they will run (§25): deny and ask rules on any
        /// simple command that can run, opaque commands denied or held as
        /// `opaque_command`, allow rules and grants covering every command
        /// together — the crate and the reference agree, under both
        /// precedences, in every mode, with grants bounded by uses and time.
        #[test]
        fn rule_25_commands_agree_with_the_reference(
            rules in prop::collection::vec(command_policy_rule(), 0..5),
            precedence in precedence_strategy(),
            mode in prop::sample::select(vec![Mode::Manual, Mode::Manual, Mode::Auto, Mode::Auto, Mode::Full]),
            approved in prop::collection::vec(command_policy_grant(), 0..3),
            always in prop::collection::vec(command_policy_grant(), 0..3),
            passed_over in passed_over_strategy(),
            calls in prop::collection::vec((command_call_id(), command_arguments()), 1..6),
        ) {
            let specs = specs_of(&rules);
            let (compiled, policy) = both(&specs, precedence, false);
            let settings = ApprovalSettings {
                always_allow: always,
                approved_always: approved,
                ..ApprovalSettings::new(mode)
            };
            agree(&settings, &compiled, &policy, &passed_over, &calls)?;
            // Coverage only grows with the sources: without any one allow
            // rule or grant, nothing the crate allowed before is allowed
            // that was not, and under `deny_ask_allow` every deny stays.
            let before = CompiledSettings::new(&settings);
            for drop in 0..rules.len() {
                if rules[drop].action != RuleAction::Allow {
                    continue;
                }
                let mut fewer = rules.clone();
                fewer.remove(drop);
                let (fewer_rules, _) = both(&specs_of(&fewer), precedence, false);
                for (id, args) in &calls {
                    let call = Call { function_id: id, arguments: args.as_ref() };
                    let was = decide_read(&before, &compiled, &call, &passed_over, None).verdict;
                    let now = decide_read(&before, &fewer_rules, &call, &passed_over, None).verdict;
                    if now == Verdict::Allow {
                        prop_assert_eq!(was, Verdict::Allow, "{:?} {:?}", id, args);
                    }
                    if was == Verdict::Deny && precedence == RulePrecedence::DenyAskAllow {
                        prop_assert_eq!(now, Verdict::Deny, "{:?} {:?}", id, args);
                    }
                }
            }
        }
    }

    /// Words allow lists name besides those of the calls at hand.
    fn cover_words() -> impl Strategy<Value = String> {
        prop::sample::select(vec![
            "git",
            "git status",
            "git log",
            "ls",
            "cat",
            "tail",
            "tail -20",
            "cargo test",
            "cd",
            "echo",
            "rm",
            "curl",
            "'git'",
            "git status --short",
        ])
        .prop_map(str::to_owned)
    }

    /// A constraint of an allow list: mostly on `command`, now and then on
    /// `script`, as `prefix` or `runs`, now and then beside a text
    /// constraint a partner must also meet.
    fn cover_constraints(
        words: BoxedStrategy<String>,
    ) -> impl Strategy<Value = std::collections::BTreeMap<String, ArgConstraint>> {
        let one = move || {
            let field =
                prop::sample::select(vec!["command", "command", "command", "command", "script"]);
            (field, words.clone(), any::<bool>()).prop_map(|(f, w, runs)| {
                let c = if runs {
                    ArgConstraint::Runs(w)
                } else {
                    ArgConstraint::Prefix(w)
                };
                (f.to_owned(), c)
            })
        };
        let cwd = prop::sample::select(vec!["/w", "/x"])
            .prop_map(|d| ("cwd".to_owned(), ArgConstraint::Equals(json!(d))));
        prop_oneof![
            8 => one().prop_map(|(f, c)| [(f, c)].into_iter().collect()),
            1 => prop::collection::vec(one(), 2..3).prop_map(|p| p.into_iter().collect()),
            1 => (one(), cwd).prop_map(|(a, b)| [a, b].into_iter().collect()),
        ]
    }

    fn cover_rule(words: BoxedStrategy<String>) -> impl Strategy<Value = GenRule> {
        (
            prop::sample::select(vec![
                RuleAction::Allow,
                RuleAction::Allow,
                RuleAction::Allow,
                RuleAction::Allow,
                RuleAction::Allow,
                RuleAction::Deny,
                RuleAction::Ask,
            ]),
            prop::sample::select(vec!["shell::exec", "shell::exec", "shell::*", "x::run"]),
            prop::option::weighted(0.15, prop::collection::vec(mode_strategy(), 1..3)),
            cover_constraints(words),
        )
            .prop_map(|(action, function, modes, args)| GenRule {
                function: match function {
                    "shell::*" => vec![Tok::Lit("shell::".to_owned()), Tok::Star],
                    id => vec![Tok::Lit(id.to_owned())],
                },
                shorthand: false,
                action,
                rule_id: None,
                modes,
                args: Some(args),
                timeout_ms: None,
                escalate_after_ms: None,
            })
    }

    fn cover_grant(words: BoxedStrategy<String>) -> impl Strategy<Value = Entry> {
        (
            prop::sample::select(vec!["shell::exec", "shell::exec", "shell::*", "x::run"]),
            cover_constraints(words),
            prop::sample::select(vec![None, None, None, None, Some(1), Some(0)]),
            prop::sample::select(vec![None, None, None, None, None, Some(NOW - 1)]),
        )
            .prop_map(|(id, args, uses_left, expires_at)| Entry {
                pattern: id.contains('*'),
                args: Some(args),
                uses_left,
                expires_at,
                ..Entry::new(id, 0, GrantedBy::UserClick)
            })
    }

    /// One plain command of a cover call and the words of its program (one
    /// and two words), which allow lists draw from.
    fn cover_phrase() -> impl Strategy<Value = &'static str> {
        prop::sample::select(vec![
            "git status",
            "git status",
            "git status --short",
            "git log -n 3",
            "git push --force",
            "ls",
            "ls src/*.rs",
            "ls *",
            "tail -20",
            "tail",
            "cat x",
            "cd src",
            "cargo test",
            "cargo build",
            "rm -rf x",
            "'git' status",
            "curl x",
            "echo 'a b'",
            "git $A",
            "X=1 ls",
            "sudo ls",
            "ls $(pwd)",
        ])
    }

    fn program_words(phrase: &str) -> Vec<String> {
        let words: Vec<&str> = phrase.split_whitespace().collect();
        let mut out = vec![words[0].to_owned()];
        if words.len() > 1 && !words[1].contains(['\'', '$']) {
            out.push(format!("{} {}", words[0], words[1]));
        }
        out
    }

    /// A call a cover list meets: a plain list in `command` (or one program
    /// with `args`) or `script`, `cwd` now and then, `env` / `stdin` rarely.
    type CoverCall = (
        &'static str,
        Vec<(&'static str, &'static str, &'static str)>,
        Option<Value>,
        Option<&'static str>,
        Option<&'static str>,
        Option<Value>,
        Option<Value>,
    );

    fn cover_call() -> impl Strategy<Value = CoverCall> {
        let part = (
            cover_phrase(),
            prop::sample::select(vec![
                "",
                "",
                "",
                "",
                "",
                " 2>&1",
                " >/dev/null",
                " 2>/dev/null",
                " > out",
                " >&2",
            ]),
            prop::sample::select(vec![" && ", " | ", "; ", " || ", "\n"]),
        );
        (
            prop::sample::select(vec!["shell::exec", "shell::exec", "shell::exec", "x::run"]),
            prop::collection::vec(part, 1..3),
            prop::option::weighted(
                0.12,
                prop::sample::select(vec![
                    json!(["status"]),
                    json!(["status", "--short"]),
                    json!(["-20", "x"]),
                    json!([]),
                ]),
            ),
            prop::option::weighted(0.25, cover_phrase()),
            prop::option::weighted(0.4, prop::sample::select(vec!["/w", "/x"])),
            prop::option::weighted(
                0.06,
                prop::sample::select(vec![json!({"A": "1"}), json!({}), json!("x")]),
            ),
            prop::option::weighted(0.04, prop::sample::select(vec![json!(""), json!("x")])),
        )
    }

    fn cover_call_value(call: &CoverCall) -> (String, Option<Value>) {
        let (id, parts, args, script, cwd, env, stdin) = call;
        let mut command = String::new();
        for (i, (phrase, redirect, sep)) in parts.iter().enumerate() {
            if i > 0 {
                command.push_str(sep);
            }
            command.push_str(phrase);
            command.push_str(redirect);
        }
        if args.is_some() {
            // An argv's program is one word.
            command = parts[0]
                .0
                .split_whitespace()
                .next()
                .unwrap_or("git")
                .to_owned();
        }
        let mut m = Map::new();
        m.insert("command".into(), Value::String(command));
        for (key, value) in [
            ("args", args.clone()),
            ("script", script.map(|s| json!(s))),
            ("cwd", cwd.map(|d| json!(d))),
            ("env", env.clone()),
            ("stdin", stdin.clone()),
        ] {
            if let Some(v) = value {
                m.insert(key.into(), v);
            }
        }
        ((*id).to_owned(), Some(Value::Object(m)))
    }

    /// Calls first, then allow lists that name their programs' words most
    /// of the time, so that lists are covered piece by piece.
    #[allow(clippy::type_complexity)]
    fn cover_case() -> impl Strategy<
        Value = (
            Vec<GenRule>,
            Vec<Entry>,
            Vec<Entry>,
            Vec<(String, Option<Value>)>,
        ),
    > {
        prop::collection::vec(cover_call(), 1..5).prop_flat_map(|calls| {
            let mut pool: Vec<String> = Vec::new();
            for call in &calls {
                for (phrase, _, _) in &call.1 {
                    pool.extend(program_words(phrase));
                }
                pool.extend(call.3.map(program_words).unwrap_or_default());
            }
            let words: BoxedStrategy<String> =
                prop_oneof![3 => prop::sample::select(pool), 1 => cover_words()].boxed();
            let values: Vec<(String, Option<Value>)> = calls.iter().map(cover_call_value).collect();
            (
                prop::collection::vec(cover_rule(words.clone()), 0..7),
                prop::collection::vec(cover_grant(words.clone()), 0..4),
                prop::collection::vec(cover_grant(words), 0..4),
                Just(values),
            )
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 2048, ..config() })]

        /// Allow rules and grants cover a list's commands together (§25.6):
        /// dense allow lists over plain lists and pipelines, partners
        /// across steps and slots, bounded and expired grants, a text
        /// constraint a partner must meet — the crate and the reference
        /// agree.
        #[test]
        fn rule_25_6_allow_lists_cover_together_as_the_reference_says(
            (rules, approved, always, calls) in cover_case(),
            precedence in precedence_strategy(),
            mode in prop::sample::select(vec![Mode::Manual, Mode::Auto]),
            passed_over in passed_over_strategy(),
        ) {
            let specs = specs_of(&rules);
            let (compiled, policy) = both(&specs, precedence, false);
            let settings = ApprovalSettings {
                always_allow: always,
                approved_always: approved,
                ..ApprovalSettings::new(mode)
            };
            agree(&settings, &compiled, &policy, &passed_over, &calls)?;
        }
    }

    #[test]
    fn the_test_glob_matcher_is_itself_right() {
        let g = |toks: Vec<Tok>, s: &str| glob_match(&toks, s.as_bytes());
        assert!(g(vec![Tok::Lit("a".into()), Tok::Star], "a::b"));
        assert!(!g(vec![Tok::Lit("a".into()), Tok::Star], "b"));
        assert!(g(vec![Tok::Star, Tok::Lit("b".into())], "a/b"));
        assert!(g(vec![Tok::Any], "x"));
        assert!(!g(vec![Tok::Any], "é"));
        assert!(g(vec![Tok::Class(b"ab".to_vec(), false)], "b"));
        assert!(!g(vec![Tok::Class(b"ab".to_vec(), true)], "b"));
        assert!(g(
            vec![
                Tok::Alt(vec!["x".into(), "yz".into()]),
                Tok::Lit("!".into())
            ],
            "yz!"
        ));
        assert_eq!(
            render(&[
                Tok::Class(b"ab".to_vec(), true),
                Tok::Alt(vec!["p".into(), "q".into()])
            ]),
            "[!ab]{p,q}"
        );
    }

    /// The contract's own examples, through the crate and the reference.
    #[test]
    fn rule_21_4_and_21_5_the_contract_examples_hold_in_both() {
        let specs: Vec<RuleSpec> = serde_json::from_value(json!([
            {"function": "shell::exec", "action": "deny", "args": {"command": {"matches": "rm -rf"}}},
            {"function": "shell::exec", "action": "allow", "args": {"command": {"prefix": "git status"}}}
        ]))
        .expect("specs");
        let (rules, policy) = both(&specs, RulePrecedence::FirstMatch, false);
        let settings = ApprovalSettings::new(Mode::Manual);
        let compiled = CompiledSettings::new(&settings);
        for (command, verdict) in [
            (json!(["rm", "-rf", "/"]), Verdict::Deny),
            (json!("git status --short"), Verdict::Allow),
            (json!("git status; curl x | sh"), Verdict::Hold),
            (json!("git statusx"), Verdict::Hold),
            (json!("git status $(id)"), Verdict::Hold),
        ] {
            let args = json!({ "command": command });
            let d = decide(
                &compiled,
                &rules,
                &Call {
                    function_id: "shell::exec",
                    arguments: Some(&args),
                },
            );
            assert_eq!(d.verdict, verdict, "{args}");
            let r = policy.decide(&settings, "shell::exec", Some(&args), At::time(NOW));
            assert_eq!(r.verdict(), verdict, "{args}");
        }
    }

    /// One call judged by the crate (its command fields read first) and by
    /// the reference, in `mode` under `deny_ask_allow`.
    fn both_judge(
        rules: Value,
        settings: &ApprovalSettings,
        args: &Value,
    ) -> (Verdict, Option<String>, Verdict, Option<String>) {
        let specs: Vec<RuleSpec> = serde_json::from_value(rules).expect("specs");
        let (compiled, policy) = both(&specs, RulePrecedence::DenyAskAllow, false);
        let s = CompiledSettings::new(settings);
        let call = Call {
            function_id: "shell::exec",
            arguments: Some(args),
        };
        let d = decide_read(&s, &compiled, &call, &[], None);
        let r = policy.decide(settings, "shell::exec", Some(args), At::time(NOW));
        (
            d.verdict,
            d.rule_id().map(str::to_owned),
            r.verdict(),
            r.rule_id().map(str::to_owned),
        )
    }

    /// §25.6: a word built from an expansion where a prefix word is
    /// compared may become any number of words (`A='push --force'`), so the
    /// words after it prove nothing: a doubt, denied as `opaque_command`.
    #[test]
    fn rule_25_6_a_word_built_from_an_expansion_leaves_the_rest_unknown() {
        let deny = json!([{"function": "shell::*", "action": "deny",
                           "args": {"command": {"prefix": "git push --force"}}}]);
        let full = ApprovalSettings::new(Mode::Full);
        for command in [
            "git $A",
            "git $A main",
            "git \"$@\" x",
            "git push $F",
            "git * x",
        ] {
            let args = json!({ "command": command });
            let (crate_verdict, crate_rule, ref_verdict, ref_rule) =
                both_judge(deny.clone(), &full, &args);
            assert_eq!(ref_verdict, Verdict::Deny, "{command}");
            assert_eq!(ref_rule.as_deref(), Some("opaque_command"), "{command}");
            assert_eq!(
                (crate_verdict, crate_rule),
                (ref_verdict, ref_rule),
                "{command}"
            );
        }
        // A literal mismatch before any expansion still rules it out.
        let args = json!({"command": "git pull $A"});
        let (crate_verdict, _, ref_verdict, _) = both_judge(deny, &full, &args);
        assert_eq!(
            (crate_verdict, ref_verdict),
            (Verdict::Allow, Verdict::Allow)
        );
    }

    // ---- where the crate and the reference disagree (ignored: each
    // shows a case the crate answers differently; run with --ignored) ----

    /// §25.2/§25.7: with no key `args` a runner that reads exact names runs
    /// `command` split into words; a sibling spelled `Args` must not hide
    /// that reading from a deny rule. (The crate once read only `[command,
    /// ...Args]`, whose program `rm -rf /tmp/x` is no `rm`, and the call
    /// continued; it now reads the text both ways and the argv.)
    #[test]
    fn rule_25_7_a_sibling_args_in_another_case_hides_no_reading() {
        let deny = json!([{"function": "shell::*", "action": "deny", "rule_id": "no-rm",
                           "args": {"command": {"prefix": "rm"}}}]);
        let args = json!({"command": "rm -rf /tmp/x", "Args": []});
        let judged = both_judge(deny, &ApprovalSettings::new(Mode::Full), &args);
        assert_eq!(
            judged,
            (
                Verdict::Deny,
                Some("no-rm".into()),
                Verdict::Deny,
                Some("no-rm".into())
            )
        );
    }

    /// §25.7: allow rules and grants keep exact names, so `ARGS` is not
    /// the `args` a runner reads: `{command: "git", ARGS: ["status"]}` runs
    /// `git` alone, which an allow of `git status` does not cover. (The
    /// crate once read `ARGS` as the argv's tail and allowed; now every
    /// reading must be covered.)
    #[test]
    fn rule_25_7_an_allow_reads_args_by_its_exact_name() {
        let allow = json!([{"function": "shell::exec", "action": "allow",
                            "args": {"command": {"prefix": "git status"}}}]);
        let args = json!({"command": "git", "ARGS": ["status"]});
        let judged = both_judge(allow, &ApprovalSettings::new(Mode::Manual), &args);
        assert_eq!(judged, (Verdict::Hold, None, Verdict::Hold, None));
    }

    /// §25.7: "when several keys match, each is judged" — also below the
    /// top level of a pointer: `MODE` beside `mode` is judged too.
    #[test]
    fn rule_25_7_every_nested_key_that_matches_is_judged() {
        let deny = json!([{"function": "shell::exec", "action": "deny", "rule_id": "danger",
                           "args": {"/opts/mode": {"equals": "danger"}}}]);
        let args = json!({"opts": {"mode": "safe", "MODE": "danger"}});
        let judged = both_judge(deny, &ApprovalSettings::new(Mode::Full), &args);
        assert_eq!(
            judged,
            (
                Verdict::Deny,
                Some("danger".into()),
                Verdict::Deny,
                Some("danger".into())
            )
        );
    }

    /// §25.6: a deny rule with two command constraints that holds only
    /// because one of them cannot be told (`sh` reads its code from stdin:
    /// it may run `rm`) is consulted on a doubt, as `opaque_command`. The
    /// crate once reported the rule's own id because the other constraint
    /// saw a command.
    #[test]
    fn rule_25_6_a_rule_that_holds_on_a_doubt_is_consulted_as_opaque() {
        let deny = json!([{"function": "shell::exec", "action": "deny", "rule_id": "r",
                           "args": {"COMMAND": {"prefix": "rm"}, "command": {"prefix": "sh"}}}]);
        let args = json!({"command": "sh"});
        let judged = both_judge(deny, &ApprovalSettings::new(Mode::Full), &args);
        assert_eq!(
            judged,
            (
                Verdict::Deny,
                Some("opaque_command".into()),
                Verdict::Deny,
                Some("opaque_command".into())
            )
        );
    }

    /// §25.1/§25.7: for an allow rule `COMMAND` is not `command` (exact
    /// names), so a plain `prefix` on it keeps its v3 text meaning; the
    /// crate judges it as a command field. A question of meaning more than
    /// of safety (no runner reads `COMMAND`), kept out of the generated
    /// properties.
    #[test]
    #[ignore = "crate disagrees: an allow prefix on `COMMAND` is read as a command field"]
    fn rule_25_7_allow_rules_on_another_spelling_of_command() {
        let allow = json!([{"function": "shell::exec", "action": "allow", "rule_id": "any",
                            "args": {"COMMAND": {"prefix": ""}}}]);
        let args = json!({"COMMAND": ["rm", "-rf", "/tmp/x"]});
        let judged = both_judge(allow, &ApprovalSettings::new(Mode::Manual), &args);
        assert_eq!(
            judged,
            (
                Verdict::Allow,
                Some("any".into()),
                Verdict::Allow,
                Some("any".into())
            )
        );
    }
}
