//! The fuzz targets' properties (see `fuzz/`), as bounded property tests so
//! that `cargo test` exercises them on every run:
//!
//! 1. hook inputs → parse → the gate's pure path → a valid `HookOutput`, and
//!    `approval::evaluate`'s explanation agrees with the gate's judgement;
//! 2. rules JSON → compile → `decide` never panics and explains itself;
//! 3. grant hints → every hint has an absolute, clean dir; containment is by
//!    components;
//! 4. cursors → `decode` is total and accepts only what `encode` writes;
//! 5. redaction → safe, bounded and idempotent.

use approval_gate::{build_record, parse_hook_input, SessionContext};
use approval_gate::{
    builtin_guard, decide, explain, is_valid_id, judge, Basis, Call, CompiledRules,
    CompiledSettings, DenialEnvelope, Judgement, RuleAction, RulePrecedence, RuleSpec, Verdict,
    WireVerdict,
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
                mode,
                always_allow: entries(always),
                approved_always,
                mode_set_at: 0,
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
            } else if mode == Mode::Full && rules.precedence() == RulePrecedence::FirstMatch {
                // Only an ask rule (a human floor) stops a call in full mode.
                prop_assert!(
                    matches!(judgement, Judgement::Continue { .. } | Judgement::Hold { ask: Some(_) }),
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
                    Judgement::Hold { ask } => (WireVerdict::NeedsApproval, ask.map(|a| a.rule_id), None),
                };
                prop_assert_eq!(explained.verdict, verdict, "{:?}", explained);
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
            mode,
            always_allow: entries(&ids),
            approved_always: entries(&ids[..ids.len().min(1)]),
            mode_set_at: 0,
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
                Basis::NoMatch => Verdict::Hold,
                _ => Verdict::Allow,
            };
            prop_assert_eq!(d.verdict, expected);
            if d.verdict == Verdict::Deny {
                let prefix = format!("Permission denied: {fid} matched rule ");
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
