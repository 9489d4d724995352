//! The ladder on command fields (`architecture/contract.md` § Commands):
//! deny and ask rules read widely, allow rules and grants strictly, with
//! coverage across the allow sources in force.

use serde_json::{json, Value};

use super::*;
use crate::policy::reasons::OPAQUE_COMMAND_RULE;
use crate::policy::rules::RuleSpec;
use crate::policy::trace::Step;
use crate::terms::{ApprovalSettings, ArgConstraint, GrantedBy};

fn rules(v: Value) -> CompiledRules {
    let specs: Vec<RuleSpec> = serde_json::from_value(v).expect("specs");
    CompiledRules::compile(&specs)
        .expect("compiles")
        .with_precedence(RulePrecedence::DenyAskAllow)
}

fn first_match(v: Value) -> CompiledRules {
    let specs: Vec<RuleSpec> = serde_json::from_value(v).expect("specs");
    CompiledRules::compile(&specs).expect("compiles")
}

fn mode(mode: Mode) -> CompiledSettings {
    CompiledSettings::new(&ApprovalSettings::new(mode))
}

fn deny_rm() -> CompiledRules {
    rules(
        json!([{"function": "shell::*", "action": "deny", "rule_id": "no-rm",
                  "args": {"command": {"prefix": "rm"}}}]),
    )
}

fn ask_curl() -> CompiledRules {
    rules(
        json!([{"function": "shell::*", "action": "ask", "rule_id": "ask-curl",
                  "args": {"command": {"prefix": "curl"}}}]),
    )
}

fn allow(prefixes: &[&str]) -> CompiledRules {
    let specs: Vec<Value> = prefixes
        .iter()
        .map(|p| {
            json!({"function": "shell::exec", "action": "allow", "rule_id": format!("allow {p}"),
                        "args": {"command": {"prefix": p}}})
        })
        .collect();
    first_match(Value::Array(specs))
}

fn judge<'r>(s: &'r CompiledSettings, r: &'r CompiledRules, args: &'r Value) -> Decision<'r> {
    decide(
        s,
        r,
        &Call {
            function_id: "shell::exec",
            arguments: Some(args),
        },
    )
}

fn bash(command: &str) -> Value {
    json!({ "command": command })
}

#[test]
fn rule_25_6_deny_catches_every_way_of_running_the_program() {
    let (s, r) = (mode(Mode::Full), deny_rm());
    for command in [
        "rm -rf /tmp/x",
        "'rm' -rf /tmp/x",
        "\"rm\" -rf /tmp/x",
        "r''m -rf /tmp/x",
        "\\rm -rf /tmp/x",
        "/bin/rm -rf /tmp/x",
        "(rm -rf /tmp/x)",
        "{ rm -rf /tmp/x; }",
        "X=1 rm -rf /tmp/x",
        "if true; then rm -rf /tmp/x; fi",
        "true && rm -rf /tmp/x",
        "! rm -rf /tmp/x",
        "time rm -rf /tmp/x",
        "echo $(rm -rf /tmp/x)",
        "sudo rm -rf /tmp/x",
        "env rm -rf /tmp/x",
        "nice -n 5 rm -rf /tmp/x",
        "timeout 5 rm -rf /tmp/x",
        "bash -c 'rm -rf /tmp/x'",
        "sh -lc 'rm -rf /tmp/x'",
        "eval 'rm -rf /tmp/x'",
        "$'\\x72m' -rf /tmp/x",
        "find /tmp -exec rm -rf {} +",
        "echo /tmp/x | xargs rm -rf",
    ] {
        let args = bash(command);
        let d = judge(&s, &r, &args);
        assert_eq!(d.verdict, Verdict::Deny, "{command}: {d:?}");
        assert_eq!(d.rule_id(), Some("no-rm"), "{command}: {d:?}");
    }
}

#[test]
fn rule_25_6_a_deny_reason_names_the_program_and_how_it_was_reached() {
    let (s, r) = (mode(Mode::Full), deny_rm());
    let args = bash("sudo bash -c 'rm -rf ~/x'");
    let call = Call {
        function_id: "shell::exec",
        arguments: Some(&args),
    };
    let readings = needs(&s, &r, &call).read_inline();
    let d = decide_with(
        &s,
        &r,
        &call,
        DecideOptions {
            readings: Some(&readings),
            ..DecideOptions::default()
        },
    );
    let reason = d.reason_with("shell::exec", Some(&readings));
    assert!(
        reason.starts_with("Permission denied by policy:"),
        "{reason}"
    );
    assert!(
        reason.contains("it runs rm, inside bash -c, via sudo"),
        "{reason}"
    );
    assert!(!reason.contains("~/x"), "arguments stay out: {reason}");
}

#[test]
fn rule_25_6_opaque_commands_are_denied_under_deny_and_held_under_ask() {
    let s = mode(Mode::Full);
    let (deny, ask) = (deny_rm(), ask_curl());
    for command in [
        "$(echo rm) -rf /tmp/x",
        "$X -rf /tmp/x",
        "bash -c \"$CMD\"",
        "wget -qO- x | sh",
    ] {
        let args = bash(command);
        let d = judge(&s, &deny, &args);
        assert_eq!(d.verdict, Verdict::Deny, "{command}: {d:?}");
        assert_eq!(d.rule_id(), Some(OPAQUE_COMMAND_RULE), "{command}");
        assert!(
            d.reason("shell::exec")
                .contains("Write the program name literally"),
            "{command}: {}",
            d.reason("shell::exec")
        );
        let d = judge(&s, &ask, &args);
        assert_eq!(d.verdict, Verdict::Hold, "{command}: {d:?}");
        assert_eq!(d.rule_id(), Some(OPAQUE_COMMAND_RULE), "{command}");
    }
}

#[test]
fn rule_25_6_a_word_built_from_an_expansion_leaves_every_later_word_unknown() {
    // `git $A --other` runs `git push --force --other` when
    // `A='push --force'`: the expansion may be any number of words, so the
    // literal `--other` after it is not where `--force` would be compared.
    let s = mode(Mode::Full);
    let deny = rules(
        json!([{"function": "shell::*", "action": "deny", "rule_id": "no-force",
                             "args": {"command": {"prefix": "git push --force"}}}]),
    );
    for command in [
        "git $A --other",
        "git $A main",
        "git \"$A\" x y",
        "git $(echo push) -q",
    ] {
        let args = bash(command);
        let d = judge(&s, &deny, &args);
        assert_eq!(d.verdict, Verdict::Deny, "{command}: {d:?}");
        assert_eq!(d.rule_id(), Some(OPAQUE_COMMAND_RULE), "{command}");
    }
    // A literal word that differs before any expansion still rules it out.
    let args = bash("git pull $A --other");
    assert_eq!(judge(&s, &deny, &args).verdict, Verdict::Allow);
}

#[test]
fn rule_25_6_opaque_is_judged_only_where_the_rule_is_consulted() {
    // The deny rule names another function: an opaque command of
    // shell::exec is never consulted against it.
    let r = rules(json!([{"function": "shell::spawn", "action": "deny",
                          "args": {"command": {"prefix": "rm"}}}]));
    let args = bash("$(echo rm) -rf /tmp/x");
    assert_eq!(judge(&mode(Mode::Full), &r, &args).verdict, Verdict::Allow);
    // Nor in a mode the rule leaves out.
    let r = rules(
        json!([{"function": "shell::*", "action": "deny", "modes": ["manual"],
                          "args": {"command": {"prefix": "rm"}}}]),
    );
    assert_eq!(judge(&mode(Mode::Full), &r, &args).verdict, Verdict::Allow);
}

#[test]
fn rule_25_6_benign_commands_that_mention_the_word_continue() {
    let (s, r) = (mode(Mode::Full), deny_rm());
    for command in [
        "git commit -m \"cleanup; rm stale files\"",
        "grep -rn rm src/",
        "echo rm",
        "ls ./rmdir-notes",
        "man rm",
        "cargo run -- --rm",
        "rmdir empty",
    ] {
        let args = bash(command);
        let d = judge(&s, &r, &args);
        assert_eq!(d.verdict, Verdict::Allow, "{command}: {d:?}");
    }
    let args = bash("curlie https://example.com");
    assert_eq!(judge(&s, &ask_curl(), &args).verdict, Verdict::Allow);
}

#[test]
fn rule_25_2_argv_shape_is_read_as_the_shell_runs_it() {
    let (s, r) = (mode(Mode::Full), deny_rm());
    for args in [
        json!({"command": "/bin/rm", "args": ["-rf", "/tmp/x"]}),
        json!({"command": "env", "args": ["rm", "-rf", "/tmp/x"]}),
        json!({"command": "sh", "args": ["-c", "rm -rf /tmp/x"]}),
        json!({"command": "find", "args": [".", "-exec", "rm", "{}", ";"]}),
    ] {
        assert_eq!(judge(&s, &r, &args).verdict, Verdict::Deny, "{args}");
    }
    // An argv word is never split: a quoted `;` is an argument.
    let args = json!({"command": "git", "args": ["commit", "-m", "x; rm -rf /"]});
    assert_eq!(judge(&s, &r, &args).verdict, Verdict::Allow);
    // args that are not strings: unreadable, so a deny rule matches.
    let args = json!({"command": "ls", "args": [1, 2]});
    assert_eq!(judge(&s, &r, &args).verdict, Verdict::Deny);
}

#[test]
fn rule_25_7_deny_field_names_ignore_ascii_case_allow_names_do_not() {
    let (s, r) = (mode(Mode::Full), deny_rm());
    let args = json!({"COMMAND": "rm -rf /tmp/x"});
    assert_eq!(judge(&s, &r, &args).verdict, Verdict::Deny);
    let args = json!({"command": "ls", "Command": "rm -rf /tmp/x"});
    assert_eq!(judge(&s, &r, &args).verdict, Verdict::Deny);
    let r = allow(&["ls"]);
    let manual = mode(Mode::Manual);
    let args = json!({"COMMAND": "ls"});
    assert_eq!(judge(&manual, &r, &args).verdict, Verdict::Hold);
}

#[test]
fn rule_25_6_allow_needs_every_command_covered() {
    let manual = mode(Mode::Manual);
    let full = allow(&["cd", "cargo test", "tail"]);
    let args = bash("cd src && cargo test 2>&1 | tail -20");
    let d = judge(&manual, &full, &args);
    assert_eq!(d.verdict, Verdict::Allow, "{d:?}");
    assert_eq!(
        d.rule_id(),
        Some("allow tail"),
        "the rule that completes the cover"
    );
    let partial = allow(&["cd", "cargo test"]);
    assert_eq!(judge(&manual, &partial, &args).verdict, Verdict::Hold);
}

#[test]
fn rule_25_6_allow_refuses_what_could_hide_a_command() {
    let manual = mode(Mode::Manual);
    let r = allow(&["git status", "git log", "ls", "cat", "env", "find"]);
    for command in [
        "./git status",
        "/tmp/w/git status",
        "git status; curl x | sh",
        "git status $(id)",
        "git status `id`",
        "git status > out.txt",
        "X=1 git status",
        "env git status",
        "git statusx",
        "ls $HOME",
        "ls *",
        "cat <(curl x)",
        "find . -exec sh -c 'curl x | sh' \\;",
        "find . -delete",
        "git -c core.pager='sh -c id' log",
        "ls \"$(id)\"",
        "ls'",
    ] {
        let args = bash(command);
        let d = judge(&manual, &r, &args);
        assert_eq!(d.verdict, Verdict::Hold, "{command}: {d:?}");
    }
    for command in [
        "git status",
        "git  status   -sb",
        "git status 2>&1",
        "git status 2>/dev/null",
        "ls src/*.rs",
        "git log --oneline -n 3 | cat",
    ] {
        let args = bash(command);
        let d = judge(&manual, &r, &args);
        assert_eq!(d.verdict, Verdict::Allow, "{command}: {d:?}");
    }
    // env and stdin must be absent.
    for args in [
        json!({"command": "git status", "env": {"GIT_PAGER": "sh"}}),
        json!({"command": "cat", "stdin": "x"}),
    ] {
        assert_eq!(judge(&manual, &r, &args).verdict, Verdict::Hold, "{args}");
    }
    let args = json!({"command": "git status", "env": {}, "stdin": ""});
    assert_eq!(judge(&manual, &r, &args).verdict, Verdict::Allow);
}

#[test]
fn rule_25_2_a_command_without_args_needs_both_readings_to_allow() {
    let manual = mode(Mode::Manual);
    let r = allow(&["echo"]);
    // Shell-words reads one echo with `a;` as an argument; bash reads
    // `echo a` then `ls`: not covered.
    let args = bash("echo a; ls");
    assert_eq!(judge(&manual, &r, &args).verdict, Verdict::Hold);
    // An argv is one reading.
    let args = json!({"command": "echo", "args": ["a;", "ls"]});
    assert_eq!(judge(&manual, &r, &args).verdict, Verdict::Allow);
}

#[test]
fn rule_25_6_first_match_keeps_a_deny_placed_before_the_allow_that_would_cover() {
    let manual = mode(Mode::Manual);
    let r = first_match(json!([
        {"function": "shell::exec", "action": "allow", "rule_id": "cd", "args": {"command": {"prefix": "cd"}}},
        {"function": "shell::exec", "action": "deny", "rule_id": "no-cargo", "args": {"command": {"prefix": "cargo"}}},
        {"function": "shell::exec", "action": "allow", "rule_id": "cargo-test", "args": {"command": {"prefix": "cargo test"}}}
    ]));
    let args = bash("cd src && cargo test");
    let d = judge(&manual, &r, &args);
    assert_eq!((d.verdict, d.rule_id()), (Verdict::Deny, Some("no-cargo")));
}

#[test]
fn rule_25_6_grants_cover_with_each_other_and_a_bounded_grant_only_for_itself() {
    let entry = |prefix: &str, uses: Option<u64>| {
        let mut e = Entry::new("shell::exec", 0, GrantedBy::UserClick);
        e.args = Some(
            [("command".to_owned(), ArgConstraint::Prefix(prefix.into()))]
                .into_iter()
                .collect(),
        );
        e.uses_left = uses;
        e
    };
    let settings = |entries: Vec<Entry>| {
        CompiledSettings::new(&ApprovalSettings {
            approved_always: entries,
            ..ApprovalSettings::new(Mode::Manual)
        })
    };
    let r = first_match(json!([]));
    let args = bash("cd src && curl -s x");
    // Both unbounded: covered together.
    let s = settings(vec![entry("cd", None), entry("curl", None)]);
    assert_eq!(judge(&s, &r, &args).verdict, Verdict::Allow);
    // The bounded one allows with an unbounded partner, and is the one spent.
    let s = settings(vec![entry("cd", None), entry("curl", Some(1))]);
    let d = judge(&s, &r, &args);
    assert_eq!(d.verdict, Verdict::Allow);
    let (grant, spent) = d.use_to_spend().expect("a use to spend");
    assert_eq!(grant.slot, 1);
    assert_eq!(spent.uses_left, Some(1));
    // Order within a list does not matter; the bounded grant is the one
    // that applies (and is spent).
    let s = settings(vec![entry("cd", Some(1)), entry("curl", None)]);
    let d = judge(&s, &r, &args);
    assert_eq!(d.verdict, Verdict::Allow);
    assert_eq!(d.use_to_spend().map(|(g, _)| g.slot), Some(0));
    // A bounded grant never covers for another source (its use would not
    // be spent).
    let s = settings(vec![entry("cd", Some(1)), entry("curl", Some(1))]);
    assert_eq!(judge(&s, &r, &args).verdict, Verdict::Hold);
    // A grant covering none of the commands itself does not apply, even
    // when others cover them all.
    let s = settings(vec![
        entry("ls", None),
        entry("cd", None),
        entry("curl", None),
    ]);
    let d = judge(&s, &r, &args);
    assert!(
        matches!(d.basis, Basis::ApprovedAlways { slot: 1, .. }),
        "{d:?}"
    );
}

#[test]
fn rule_25_1_runs_judges_any_field_and_prefix_elsewhere_stays_text() {
    let full = mode(Mode::Full);
    let r = rules(json!([
        {"function": "ci::*", "action": "deny", "rule_id": "no-rm-script",
         "args": {"script": {"runs": "rm"}}},
        {"function": "http::*", "action": "deny", "rule_id": "no-internal",
         "args": {"url": {"prefix": "http://10."}}}
    ]));
    let call = |fid: &'static str, args: &'static str| {
        let args: Value = serde_json::from_str(args).expect("json");
        (fid, args)
    };
    for (fid, args, want) in [
        call("ci::run", r#"{"script": "make && sudo rm -rf /"}"#),
        call("ci::run", r#"{"script": ["env", "rm", "-rf", "/"]}"#),
        call("http::get", r#"{"url": "http://10.0.0.1/x"}"#),
    ]
    .map(|(f, a)| (f, a, Verdict::Deny))
    {
        let d = decide(
            &full,
            &r,
            &Call {
                function_id: fid,
                arguments: Some(&args),
            },
        );
        assert_eq!(d.verdict, want, "{fid} {args}");
    }
    let args = json!({"script": "echo rm"});
    let d = decide(
        &full,
        &r,
        &Call {
            function_id: "ci::run",
            arguments: Some(&args),
        },
    );
    assert_eq!(d.verdict, Verdict::Allow);
}

#[test]
fn rule_25_10_calls_no_command_rule_applies_to_need_no_reading() {
    let s = mode(Mode::Manual);
    let r = deny_rm();
    let args = bash("rm -rf /");
    let other = Call {
        function_id: "docs::read",
        arguments: Some(&args),
    };
    assert!(needs(&s, &r, &other).is_empty());
    let plain = first_match(
        json!(["shell::*", {"function": "shell::exec", "action": "deny",
                                                "args": {"command": {"matches": "rm"}}}]),
    );
    let shell = Call {
        function_id: "shell::exec",
        arguments: Some(&args),
    };
    assert!(needs(&s, &plain, &shell).is_empty());
    assert!(!needs(&s, &r, &shell).is_empty());
}

#[test]
fn rule_25_11_the_trace_names_the_command_and_how_it_was_reached() {
    let s = mode(Mode::Full);
    let r = deny_rm();
    let args = bash("sudo bash -c 'rm -rf ~/x'");
    let mut trace = Vec::new();
    decide_with(
        &s,
        &r,
        &Call {
            function_id: "shell::exec",
            arguments: Some(&args),
        },
        DecideOptions {
            trace: Some(&mut trace),
            ..DecideOptions::default()
        },
    );
    let deny = trace
        .iter()
        .find(|t| t.step == Step::DenyRule)
        .and_then(|t| t.detail.clone())
        .expect("a deny step");
    assert!(
        deny.ends_with(": rm -rf ~/x, inside bash -c, via sudo"),
        "{deny}"
    );
    let args = bash("$(echo rm) x");
    let mut trace = Vec::new();
    decide_with(
        &s,
        &r,
        &Call {
            function_id: "shell::exec",
            arguments: Some(&args),
        },
        DecideOptions {
            trace: Some(&mut trace),
            ..DecideOptions::default()
        },
    );
    let deny = trace
        .iter()
        .find(|t| t.step == Step::DenyRule)
        .and_then(|t| t.detail.clone())
        .expect("a deny step");
    assert!(deny.contains(": opaque: "), "{deny}");
    // An allow rule that does not cover says what is left.
    let manual = mode(Mode::Manual);
    let r = allow(&["cd"]);
    let args = bash("cd src && curl x");
    let mut trace = Vec::new();
    decide_with(
        &manual,
        &r,
        &Call {
            function_id: "shell::exec",
            arguments: Some(&args),
        },
        DecideOptions {
            trace: Some(&mut trace),
            ..DecideOptions::default()
        },
    );
    let rule = trace
        .iter()
        .find(|t| t.step == Step::Rule)
        .and_then(|t| t.detail.clone())
        .expect("a rule step");
    assert!(
        rule.contains("curl x is covered by no allow rule or grant"),
        "{rule}"
    );
}

#[test]
fn rule_25_5_unread_fields_are_opaque_never_allowed() {
    // A decision given readings that lack the value judges it opaque.
    let manual = mode(Mode::Manual);
    let r = allow(&["ls"]);
    let args = bash("ls");
    let none = Readings::none();
    let d = decide_with(
        &manual,
        &r,
        &Call {
            function_id: "shell::exec",
            arguments: Some(&args),
        },
        DecideOptions {
            readings: Some(&none),
            ..DecideOptions::default()
        },
    );
    assert_eq!(d.verdict, Verdict::Hold);
    let (full, deny) = (mode(Mode::Full), deny_rm());
    let d = decide_with(
        &full,
        &deny,
        &Call {
            function_id: "shell::exec",
            arguments: Some(&args),
        },
        DecideOptions {
            readings: Some(&none),
            ..DecideOptions::default()
        },
    );
    assert_eq!(d.rule_id(), Some(OPAQUE_COMMAND_RULE));
}
