//! Inputs shared by the benches: a realistic rule set of any size, the calls
//! that exercise it, and held-call records of a realistic size (about 1 KB of
//! JSON each), so every bench measures the same shapes; and the worker booted
//! in-process, as the integration tests boot it.
#![allow(dead_code)]

use std::time::Duration;

use approval_gate::{boot, BootOptions, Running};
use approval_gate::{CompiledRules, RuleSpec};
use approval_gate::{PendingRecord, RecordKind};
use serde_json::{json, Map, Value};

/// `n` rules in a repeating mix of ten kinds: four exact ids, a prefix-glob
/// deny, an `auto`-only prefix-glob allow, a suffix glob spanning
/// namespaces, an alternation with a class, an `args` rule (regex and JSON
/// Pointer equality) and a `manual`-only deny; the default `!approval::*`
/// closes the list.
pub fn rule_specs(n: usize) -> Vec<RuleSpec> {
    let mut specs: Vec<Value> = (0..n)
        .map(|i| match i % 10 {
            0..=3 => json!(format!("svc{i}::op")),
            4 => json!(format!("!ns{i}::*")),
            5 => json!({"function": format!("ns{i}::*"), "action": "allow", "modes": ["auto"]}),
            6 => json!(format!("*::danger{i}")),
            7 => json!(format!("{{tool,kit}}{i}::[gs]et")),
            8 => json!({"function": format!("shell{i}::exec"), "action": "deny",
                        "rule_id": format!("no-force-{i}"),
                        "args": {"cmd": {"matches": "rm -rf|--force"}, "/opts/force": {"equals": true}}}),
            _ => json!({"function": format!("svc{i}::op"), "action": "deny", "modes": ["manual"]}),
        })
        .collect();
    specs.push(json!("!approval::*"));
    serde_json::from_value(Value::Array(specs)).expect("rule specs parse")
}

/// [`rule_specs`], compiled.
pub fn rules(n: usize) -> CompiledRules {
    CompiledRules::compile(&rule_specs(n)).expect("rules compile")
}

/// One call kind of the decide benches: a name, the target, its arguments.
pub struct CallCase {
    pub name: &'static str,
    pub function_id: String,
    pub arguments: Option<Value>,
}

/// Calls that hit rules in the last block of ten (so a rule set of `n`
/// rules is matched at its end), plus a miss that falls through to hold.
pub fn call_cases(n: usize) -> Vec<CallCase> {
    let base = n.saturating_sub(10);
    let case = |name, function_id: String, arguments| CallCase {
        name,
        function_id,
        arguments,
    };
    vec![
        case("exact", format!("svc{base}::op"), None),
        case("prefix_glob", format!("ns{}::deep::x", base + 4), None),
        case("suffix_glob", format!("a::b::danger{}", base + 6), None),
        case("alternation", format!("kit{}::set", base + 7), None),
        case(
            "args",
            format!("shell{}::exec", base + 8),
            Some(json!({"cmd": "rm -rf /tmp/build", "opts": {"force": true}, "cwd": "/w"})),
        ),
        case("miss_hold", "nothing::matches::here".to_string(), None),
    ]
}

/// Sessions per tenant filter value: `tenant` takes ten values, so a
/// `{"tenant": "tenant-3"}` filter selects a tenth of the inbox.
pub const TENANTS: usize = 10;

/// The `i`-th held record: about 1 KB of JSON (see [`record_json_len`]),
/// four calls per session, two per turn, ascending `pending_at`, each with
/// an `escalate_at` and an `expires_at`.
pub fn record(i: usize) -> PendingRecord {
    let mut meta = Map::new();
    meta.insert("tenant".into(), json!(format!("tenant-{}", i % TENANTS)));
    meta.insert("project".into(), json!(format!("proj-{:03}", i % 100)));
    meta.insert("user".into(), json!(format!("user-{:04}", i % 1000)));
    PendingRecord {
        session_id: format!("sess-{:07}", i / 4),
        turn_id: format!("turn-{:07}", i / 2),
        function_call_id: format!(
            "toolu_01{:016x}{i:08}",
            (i as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15)
        ),
        function_id: "shell::exec".into(),
        kind: RecordKind::Function,
        fs_scope: None,
        arguments_excerpt: json!({
            "command": format!("cargo test --workspace --all-features -- --test-threads 2 --nocapture 2>&1 | tee /workspace/project-{:03}/target/test-run-{i}.log", i % 100),
            "cwd": format!("/workspace/project-{:03}", i % 100),
            "env": {"RUST_LOG": "info,approval_gate=debug", "CARGO_TERM_COLOR": "never", "api_token": "<redacted>"},
            "timeout_ms": 600_000,
            "background": false,
        })
        .into(),
        pending_at: 1_750_000_000_000 + i as u64 * 7,
        depth: (i % 3) as u64,
        session_title: Some(format!(
            "Fix the flaky integration test in project {:03}",
            i % 100
        )),
        session_description: Some(
            "Investigate why the scenario suite times out under load, add tracing around the \
             retry loop and make the test deterministic."
                .into(),
        ),
        session_metadata: Some(meta.into()),
        grant_request: None,
        access_request: None,
        assistant_excerpt: Some(
            "I'll run the full test suite with two threads so the timing matches CI, and keep \
             the log so we can compare the failing case against a passing run."
                .into(),
        ),
        // Every held call carries both deadlines, far enough ahead that
        // none fires while a bench runs (the timer only keeps them ordered).
        expires_at: Some(FAR_FUTURE_MS + i as u64 * 7),
        escalate_at: Some(FAR_FUTURE_MS - 1_200_000 + i as u64 * 7),
        escalated_at: None,
        releasing: false,
        release: None,
        uncertain: false,
        review: None,
        runs: None,
        suggested_prefix: None,
        protected_path: None,
        digest: None,
        held_by_rule: Some("no_match".into()),
    }
}

/// 2100-01-01 in ms since the epoch: the held calls' deadlines start here.
pub const FAR_FUTURE_MS: u64 = 4_102_444_800_000;

/// The serialized size of [`record`]`(i)` in bytes.
pub fn record_json_len(i: usize) -> usize {
    serde_json::to_vec(&record(i)).map(|v| v.len()).unwrap_or(0)
}

/// The `i`-th record as the JSON value `state::list` returns.
pub fn record_value(i: usize) -> Value {
    serde_json::to_value(record(i)).expect("record serializes")
}

/// An argument object of about `bytes` bytes of JSON: a mix of short
/// fields, long strings (clipped by redaction), secret keys, nesting and
/// arrays, as a tool call carrying a file or a diff would look.
pub fn argument_object(bytes: usize) -> Value {
    let mut files = Vec::new();
    let mut size = 0;
    let mut i = 0;
    while size < bytes {
        let content =
            "fn main() { println!(\"hello\"); } // padding line of source code\n".repeat(8);
        let file = json!({
            "path": format!("src/module_{i}/file_{i}.rs"),
            "content": content,
            "mode": 0o644,
            "meta": {"lines": 8, "lang": "rust", "api_key": format!("sk-{i:032}"), "tags": ["a", "b", i]},
        });
        size += serde_json::to_vec(&file).map(|v| v.len()).unwrap_or(0) + 1;
        files.push(file);
        i += 1;
    }
    json!({
        "command": "apply_patch",
        "password": "hunter2",
        "files": files,
        "options": {"dry_run": false, "nested": {"deeper": {"access_token": "abc", "n": 1}}},
    })
}

/// Boots the worker in-process against `url` (OTel off).
pub async fn start_in_process(url: &str) -> Running {
    start_in_process_with(url, None).await
}

/// Boots the worker in-process with a configuration seed.
pub async fn start_in_process_with(url: &str, seed: Option<Value>) -> Running {
    boot(BootOptions {
        url: url.to_string(),
        seed,
        connect_timeout: Duration::from_secs(15),
        otel: false,
        ..BootOptions::new(url)
    })
    .await
    .unwrap_or_else(|e| panic!("worker did not boot: {e}"))
}

/// A developer's command line of about `size` bytes starting with `head`:
/// lists, pipelines, quotes (one holds the word `rm`), a substitution, a
/// wrapper, redirections; nothing the default protected paths (§29) hold
/// (`find … | xargs` would be: its paths cannot be known). At 200 B it
/// ends in a three-stage pipeline. The e2e bench's `shell::exec` commands; the micro
/// bench reads one (`shell/read/line/…`).
pub fn command_line(head: &str, size: usize) -> String {
    const TAIL: [&str; 4] = [
        "cargo test --lib policy:: 2>&1 | tail -20",
        "git log --oneline -n 5 | grep \"fix: $(date +%Y)\" > /dev/null",
        "timeout 60 npm test -- --grep 'rm stale' || echo failed",
        "wc -l src/*.rs | sort -n | tail -3",
    ];
    let mut out = head.to_string();
    let mut i = 0;
    while out.len() < size {
        out.push_str(" && ");
        out.push_str(TAIL[i % TAIL.len()]);
        i += 1;
    }
    out
}
