//! Micro benchmarks of the pure hot paths: the decision ladder, rule
//! compilation, redaction, the pending index and its boot rebuild, the
//! command model's reading of a command field.
//!
//! `cargo bench --bench micro` (add a filter such as `decide/` to run one
//! group). Medians are what the README reports: the machine is shared, so
//! means are pulled around by other work.

mod common;

use std::hint::black_box;
use std::time::{Duration, Instant};

use approval_gate::{decide, Call, CompiledRules, CompiledSettings, RulePrecedence, RuleSpec};
use approval_gate::{decide_with, needs, DecideOptions};
use approval_gate::{read as read_command, Limits, Source};
use approval_gate::{redact, redact_text};
use approval_gate::{simulate_offline, ApprovalConfig, SimCall, Snapshot, WhatIf};
use approval_gate::{ApprovalSettings, Entry, GrantedBy, Mode};
use approval_gate::{ListQuery, PendingIndex};
use approval_gate::{PendingRecord, SortKey};
use criterion::{criterion_group, criterion_main, BatchSize, BenchmarkId, Criterion};
use serde_json::{json, Map, Value};

const RULE_SIZES: [usize; 4] = [10, 100, 1_000, 10_000];
const INDEX_SIZES: [usize; 3] = [1_000, 10_000, 100_000];

/// A manual-mode session with a few grants, as the gate sees most sessions
/// (allow-lists are checked before the rules, so they are part of the cost).
fn session() -> CompiledSettings {
    let entry = |id: &str| Entry::new(id, 0, GrantedBy::UserClick);
    CompiledSettings::new(&ApprovalSettings {
        always_allow: vec![entry("state::get"), entry("mcp::*::read")],
        approved_always: vec![entry("coder::*"), entry("web::fetch")],
        ..ApprovalSettings::new(Mode::Manual)
    })
}

fn bench_decide(c: &mut Criterion) {
    let settings = session();
    let mut group = c.benchmark_group("decide");
    for n in RULE_SIZES {
        let rules = common::rules(n);
        let mut cases = common::call_cases(n);
        cases.push(common::CallCase {
            name: "mode_scoped",
            function_id: format!("svc{}::op", n.saturating_sub(10) + 9),
            arguments: None,
        });
        for case in &cases {
            let call = Call {
                function_id: &case.function_id,
                arguments: case.arguments.as_ref(),
            };
            let verdict = decide(&settings, &rules, &call).verdict;
            group.bench_with_input(
                BenchmarkId::new(format!("{n}/{}", case.name), verdict.as_str()),
                &call,
                |b, call| b.iter(|| black_box(decide(&settings, &rules, black_box(call)))),
            );
        }
    }
    group.finish();
}

/// Policy v2 at 1,000 rules plus 100 ask rules (half of them argument-
/// scoped), for a session whose grants are bounded by arguments, count and
/// time; under both precedences. Cases: an ask rule holds; a call passes the
/// ask step and meets a deny rule; an argument-scoped grant allows, or its
/// constraint fails and the call falls to the rules; a `state::*` call on a
/// guarded scope (the guard parses `scope`) and on an unguarded one.
fn bench_decide_v2(c: &mut Criterion) {
    let mut specs = common::rule_specs(1_000);
    let asks: Vec<RuleSpec> = serde_json::from_value(Value::Array(
        (0..100)
            .map(|i| {
                if i % 2 == 0 {
                    json!(format!("?ask{i}::*"))
                } else {
                    json!({"function": format!("tool{i}::run"), "action": "ask",
                           "args": {"cmd": {"prefix": "sudo "}}})
                }
            })
            .collect(),
    ))
    .expect("ask specs");
    specs.extend(asks);
    let first_match = CompiledRules::compile(&specs).expect("compiles");
    let deny_first = CompiledRules::compile(&specs)
        .expect("compiles")
        .with_precedence(RulePrecedence::DenyAskAllow);
    let entry = |id: &str| Entry::new(id, 0, GrantedBy::UserClick);
    let mut approved: Vec<Entry> = (0..20)
        .map(|i| Entry {
            args: Some(
                serde_json::from_value(json!({"cmd": {"prefix": format!("git{i} ")}}))
                    .expect("grant args"),
            ),
            ..entry(&format!("git{i}::run"))
        })
        .collect();
    approved.push(Entry {
        uses_left: Some(1_000_000),
        ..entry("deploy::*")
    });
    approved.push(Entry {
        expires_at: Some(u64::MAX),
        ..entry("web::*")
    });
    approved.extend([entry("coder::*"), entry("web::fetch")]);
    let settings = CompiledSettings::new(&ApprovalSettings {
        always_allow: vec![entry("state::get"), entry("mcp::*::read")],
        approved_always: approved,
        ..ApprovalSettings::new(Mode::Manual)
    });
    let cases: Vec<(&str, &str, Option<Value>)> = vec![
        ("ask_hit", "ask42::deploy", None),
        (
            "ask_args_hit",
            "tool41::run",
            Some(json!({"cmd": "sudo rm -rf /"})),
        ),
        (
            "past_asks_to_deny_rule",
            "shell998::exec",
            Some(json!({"cmd": "rm -rf /tmp/build", "opts": {"force": true}})),
        ),
        (
            "grant_args_hit",
            "git7::run",
            Some(json!({"cmd": "git7 status"})),
        ),
        (
            "grant_args_miss",
            "git7::run",
            Some(json!({"cmd": "rm -rf /"})),
        ),
        ("grant_counted_hit", "deploy::prod", None),
        (
            "state_guarded_scope",
            "state::set",
            Some(json!({"scope": "approval_settings", "key": "s_1", "value": {"mode": "full"}})),
        ),
        (
            "state_unguarded_scope",
            "state::set",
            Some(json!({"scope": "app_cache", "key": "k", "value": {"n": 1}})),
        ),
        ("miss_hold", "nothing::matches::here", None),
    ];
    let mut group = c.benchmark_group("decide_v2");
    for (precedence, rules) in [
        ("first_match", &first_match),
        ("deny_ask_allow", &deny_first),
    ] {
        for (name, function_id, arguments) in &cases {
            let call = Call {
                function_id,
                arguments: arguments.as_ref(),
            };
            let verdict = decide(&settings, rules, &call).verdict;
            group.bench_with_input(
                BenchmarkId::new(format!("1100/{precedence}/{name}"), verdict.as_str()),
                &call,
                |b, call| b.iter(|| black_box(decide(&settings, rules, black_box(call)))),
            );
        }
    }
    group.finish();
}

/// Where the time of one decision goes: the human-only scan, the session's
/// allow-lists, and the rule table split into exact ids and globs.
fn bench_decide_parts(c: &mut Criterion) {
    let miss = Call {
        function_id: "nothing::matches::here",
        arguments: None,
    };
    let bare = CompiledSettings::new(&ApprovalSettings {
        always_allow: Vec::new(),
        approved_always: Vec::new(),
        ..ApprovalSettings::new(Mode::Manual)
    });
    let granted = session();
    let empty = CompiledRules::empty();
    let specs = |f: &dyn Fn(usize) -> Value| -> CompiledRules {
        let specs: Vec<_> = (0..1_000).map(f).collect();
        CompiledRules::compile(
            &serde_json::from_value::<Vec<_>>(Value::Array(specs)).expect("specs"),
        )
        .expect("compiles")
    };
    let exact = specs(&|i| json!(format!("svc{i}::op")));
    let prefix = specs(&|i| json!(format!("!ns{i}::*")));
    let suffix = specs(&|i| json!(format!("*::danger{i}")));
    let alternation = specs(&|i| json!(format!("{{tool,kit}}{i}::[gs]et")));
    let mut group = c.benchmark_group("decide_parts");
    group.bench_function("human_only_scan", |b| {
        b.iter(|| black_box(approval_gate::is_human_only(black_box(miss.function_id))))
    });
    group.bench_function("no_rules/no_grants", |b| {
        b.iter(|| black_box(decide(&bare, &empty, black_box(&miss))))
    });
    group.bench_function("no_rules/4_grants", |b| {
        b.iter(|| black_box(decide(&granted, &empty, black_box(&miss))))
    });
    for (name, rules) in [
        ("1000_exact", &exact),
        ("1000_prefix_globs", &prefix),
        ("1000_suffix_globs", &suffix),
        ("1000_alternation_globs", &alternation),
    ] {
        group.bench_function(format!("{name}/no_grants_miss"), |b| {
            b.iter(|| black_box(decide(&bare, rules, black_box(&miss))))
        });
    }
    group.finish();
}

fn bench_compile(c: &mut Criterion) {
    let mut group = c.benchmark_group("compile");
    for n in RULE_SIZES {
        let specs = common::rule_specs(n);
        if n >= 1_000 {
            group.sample_size(10);
        }
        group.bench_with_input(BenchmarkId::from_parameter(n), &specs, |b, specs| {
            b.iter(|| black_box(CompiledRules::compile(black_box(specs)).map(|r| r.len())))
        });
    }
    group.finish();
}

fn bench_redact(c: &mut Criterion) {
    let mut group = c.benchmark_group("redact");
    for (name, bytes) in [("10KB", 10 << 10), ("1MB", 1 << 20)] {
        let args = common::argument_object(bytes);
        let out = serde_json::to_vec(&redact(&args))
            .map(|v| v.len())
            .unwrap_or(0);
        eprintln!(
            "redact/{name}: input {} bytes, output {out} bytes",
            serde_json::to_vec(&args).map(|v| v.len()).unwrap_or(0)
        );
        group.bench_with_input(BenchmarkId::from_parameter(name), &args, |b, args| {
            b.iter_with_large_drop(|| redact(black_box(args)))
        });
    }
    group.finish();
}

// ---- redaction v2: value detectors on long free text ----

/// Size of the shell commands of [`bench_redact_text`].
const SHELL_BYTES: usize = 20 << 10;

/// A long shell command as an agent sends one: builds, deploys with
/// `curl -H 'Authorization: Bearer …'`, exported tokens, a database URL, a
/// private key written to a file, all mixed with plain text. With
/// `secrets: false`, the same shapes without a secret (no detector fires,
/// but the literals they look for are all there).
fn shell_command(secrets: bool) -> String {
    let jwt = "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiJGQUtFIn0.RkFLRXNpZ25hdHVyZUZBS0VzaWduYXR1cmU";
    let mut cmd = String::with_capacity(SHELL_BYTES + 512);
    let mut i = 0;
    while cmd.len() < SHELL_BYTES {
        cmd.push_str(&format!(
            "cd /workspace/project-{i} && git fetch origin --prune && cargo build --release --features metrics 2>&1 | tee /tmp/build-{i}.log && "
        ));
        if secrets {
            cmd.push_str(&format!(
                "curl -sS -X POST https://api.example.com/v1/deploy/{i} -H 'Content-Type: application/json' -H 'Authorization: Bearer {jwt}' -d '{{\"ref\":\"main\",\"env\":\"staging\"}}' && "
            ));
            cmd.push_str(&format!(
                "export X_TOKEN=FAKEtoken{i:04}abcdef0123456789 && export GITHUB_TOKEN=ghp_FAKE0123456789abcdefghijklmnop{i:04} && "
            ));
            cmd.push_str("psql postgres://app:FAKEdbPass42@db.internal:5432/prod -c 'select count(*) from jobs' && ");
        } else {
            cmd.push_str(&format!(
                "curl -sS -X POST https://api.example.com/v1/deploy/{i} -H 'Content-Type: application/json' -H 'Accept: application/json' -d '{{\"ref\":\"main\",\"env\":\"staging\"}}' && "
            ));
            cmd.push_str(&format!(
                "export X_TOKEN_FILE=/run/secrets/token-{i} && export GITHUB_REPOSITORY=org/project-{i} && "
            ));
            cmd.push_str(
                "psql postgres://app@db.internal:5432/prod -c 'select count(*) from jobs' && ",
            );
        }
        if i % 8 == 7 {
            if secrets {
                cmd.push_str("printf '%s\\n' '-----BEGIN RSA PRIVATE KEY-----\nMIIEFAKEpAIBAAKCAQEAFAKEFAKEFAKE\n-----END RSA PRIVATE KEY-----' > /tmp/deploy.pem && ");
            } else {
                cmd.push_str("printf '%s\\n' '-----BEGIN PUBLIC KEY-----\nMIIBFAKEIjANBgkqhkiG9w0BAQEFAAOC\n-----END PUBLIC KEY-----' > /tmp/deploy.pub && ");
            }
        }
        cmd.push_str(&format!(
            "echo \"step {i} done: tests passed, the token cache is warm, moving on to the next service\" && "
        ));
        i += 1;
    }
    cmd.push_str("true");
    cmd
}

/// `redact_text` over a 20 KB shell command with and without secrets, and
/// `redact` over an argument object holding it (where only the first 256
/// code points plus the detection window are read).
fn bench_redact_text(c: &mut Criterion) {
    let mut group = c.benchmark_group("redact_text");
    for (name, secrets) in [("redact_20kb_shell", true), ("redact_20kb_plain", false)] {
        let cmd = shell_command(secrets);
        let out = redact_text(&cmd);
        let markers = out.matches("<redacted>").count();
        eprintln!(
            "redact_text/{name}: input {} bytes, output {} bytes, {markers} secrets replaced",
            cmd.len(),
            out.len()
        );
        group.throughput(criterion::Throughput::Bytes(cmd.len() as u64));
        group.bench_with_input(BenchmarkId::from_parameter(name), &cmd, |b, cmd| {
            b.iter(|| redact_text(black_box(cmd)).len())
        });
    }
    let args = json!({"command": shell_command(true), "cwd": "/workspace", "timeout_ms": 600_000});
    group.bench_with_input(
        BenchmarkId::from_parameter("redact_args_20kb_shell"),
        &args,
        |b, args| b.iter_with_large_drop(|| redact(black_box(args))),
    );
    group.finish();
}

/// The gate's check that no id of a call holds a secret (contract §26.5),
/// which every call pays before it is judged: four ids of the shapes
/// harnesses send, and the same with a token in the function id.
fn bench_ids(c: &mut Criterion) {
    let input = |function_id: &str| {
        approval_gate::parse_hook_input(json!({
            "point": "pre_trigger",
            "session_id": "0b9a3f2e-6c1d-4e8f-9a7b-5c4d3e2f1a0b",
            "turn_id": "turn_01J9ZK3BXWQ1D8M2NLXR5VYT7U",
            "call": {"id": "toolu_01A09q90qw90lq917835lq9", "function_id": function_id,
                     "arguments": {"command": "git status"}}
        }))
        .expect("a hook input")
    };
    let mut group = c.benchmark_group("ids");
    for (name, function_id) in [
        ("secret_in_ids/ordinary", "shell::exec"),
        (
            "secret_in_ids/token_in_function_id",
            "notes::ghp_FAKExJvv9Nl46wmyhw32J7bYzpzH2tvUuM4B",
        ),
    ] {
        let input = input(function_id);
        let call = input.call.as_ref().expect("a call");
        group.bench_function(name, |b| {
            b.iter(|| black_box(approval_gate::secret_in_ids(black_box(&input), call)))
        });
    }
    group.finish();
}

// ---- end of redaction v2 ----

fn index_of(n: usize) -> PendingIndex {
    let mut index = PendingIndex::new();
    for i in 0..n {
        index.insert(common::record(i));
    }
    index
}

/// The sort key of the record `depth` of the way into the inbox (0.9 = a
/// console that paged nine tenths of the way through).
fn cursor_at(index: &PendingIndex, depth: f64) -> SortKey {
    let n = index.len();
    let pos = ((n as f64) * depth) as usize;
    index
        .iter()
        .nth(pos.min(n.saturating_sub(1)))
        .map(|r| r.sort_key())
        .expect("index is not empty")
}

fn obj(v: Value) -> Map<String, Value> {
    match v {
        Value::Object(m) => m,
        _ => Map::new(),
    }
}

/// A named `list` query: its metadata filter and its cursor.
type ListCase<'a> = (&'a str, Option<&'a Map<String, Value>>, Option<&'a SortKey>);

fn bench_index(c: &mut Criterion) {
    let mut group = c.benchmark_group("index");
    group.measurement_time(Duration::from_secs(3));
    for n in INDEX_SIZES {
        let mut index = index_of(n);
        // Records the index does not hold yet: an insert adds one, a remove
        // takes one of the held ones away; both are undone outside the
        // timed section so the index stays at `n`.
        let fresh: Vec<PendingRecord> = (n..n + 1_000).map(common::record).collect();
        group.bench_function(BenchmarkId::new("insert", n), |b| {
            b.iter_custom(|iters| {
                let mut total = Duration::ZERO;
                for k in 0..iters {
                    let record = fresh[(k as usize) % fresh.len()].clone();
                    let (sid, cid) = (record.session_id.clone(), record.function_call_id.clone());
                    let start = Instant::now();
                    black_box(index.insert(record));
                    total += start.elapsed();
                    index.remove(&sid, &cid);
                }
                total
            })
        });
        let held: Vec<PendingRecord> = (0..1_000).map(|k| common::record((k * 7919) % n)).collect();
        group.bench_function(BenchmarkId::new("remove", n), |b| {
            b.iter_custom(|iters| {
                let mut total = Duration::ZERO;
                for k in 0..iters {
                    let record = &held[(k as usize) % held.len()];
                    let start = Instant::now();
                    let removed =
                        black_box(index.remove(&record.session_id, &record.function_call_id));
                    total += start.elapsed();
                    drop(removed);
                    index.insert(record.clone());
                }
                total
            })
        });
        let deep = cursor_at(&index, 0.9);
        let tenant = obj(json!({"tenant": "tenant-3"}));
        let disjoint = obj(json!({"tenant": "tenant-3", "project": "proj-004"}));
        let queries: [ListCase<'_>; 5] = [
            ("first_page", None, None),
            ("first_page_tenant", Some(&tenant), None),
            ("deep_cursor", None, Some(&deep)),
            ("deep_cursor_tenant", Some(&tenant), Some(&deep)),
            ("no_match_two_keys", Some(&disjoint), None),
        ];
        for (name, metadata, after) in queries {
            let query = ListQuery {
                session_id: None,
                metadata,
                after,
                limit: 50,
            };
            let page = index.list(&query);
            eprintln!(
                "index/list_{name}/{n}: {} items, more: {}",
                page.items.len(),
                page.next.is_some()
            );
            group.bench_with_input(
                BenchmarkId::new(format!("list_{name}"), n),
                &query,
                |b, query| b.iter(|| black_box(index.list(black_box(query)))),
            );
        }
    }
    group.finish();
}

/// What `PendingStore::load` does with the buckets' `state::list` replies:
/// skip tombstones, deserialize each value, insert it.
fn rebuild(values: Vec<Value>) -> PendingIndex {
    let mut index = PendingIndex::new();
    for value in values.into_iter().filter(|v| !v.is_null()) {
        if let Ok(record) = serde_json::from_value::<PendingRecord>(value) {
            index.insert(record);
        }
    }
    index
}

fn bench_rebuild(c: &mut Criterion) {
    const N: usize = 100_000;
    let values: Vec<Value> = (0..N).map(common::record_value).collect();
    let text = serde_json::to_string(&values).expect("serializes");
    eprintln!(
        "rebuild: {N} records, {} bytes of JSON ({} per record)",
        text.len(),
        text.len() / N
    );
    let mut group = c.benchmark_group("rebuild");
    group.sample_size(10);
    group.measurement_time(Duration::from_secs(20));
    group.bench_function(BenchmarkId::new("from_values", N), |b| {
        b.iter_batched(|| values.clone(), rebuild, BatchSize::PerIteration)
    });
    // The same records without deadlines: what the deadline view adds to a
    // rebuild, measured in the same run.
    let bare: Vec<Value> = values
        .iter()
        .cloned()
        .map(|mut v| {
            if let Some(record) = v.as_object_mut() {
                record.remove("expires_at");
                record.remove("escalate_at");
            }
            v
        })
        .collect();
    group.bench_function(BenchmarkId::new("from_values_without_deadlines", N), |b| {
        b.iter_batched(|| bare.clone(), rebuild, BatchSize::PerIteration)
    });
    group.bench_function(BenchmarkId::new("from_text", N), |b| {
        b.iter_with_large_drop(|| {
            let values: Vec<Value> = serde_json::from_str(black_box(&text)).unwrap_or_default();
            rebuild(values)
        })
    });
    group.finish();
}

/// `approval::simulate`'s core: 10,000 calls judged under 1,000 rules now
/// and under a draft of 1,000 rules (contract §24: ≤ 50 ms in process).
/// `compare`: the two snapshots compiled beforehand; `whole`: the offline
/// command's work, both rule sets compiled within the iteration.
fn bench_simulate(c: &mut Criterion) {
    const CALLS: usize = 10_000;
    const RULES: usize = 1_000;
    let now = ApprovalConfig {
        rules: common::rule_specs(RULES),
        ..ApprovalConfig::default()
    };
    // The draft: every tenth rule's target moved, so some verdicts change.
    let mut draft_specs = common::rule_specs(RULES);
    draft_specs.rotate_left(RULES / 2);
    let draft = ApprovalConfig {
        rules: draft_specs,
        ..ApprovalConfig::default()
    };
    let cases = common::call_cases(RULES);
    let modes = [None, Some(Mode::Auto), Some(Mode::Full)];
    let calls: Vec<SimCall> = (0..CALLS)
        .map(|i| {
            let (function_id, arguments) = match i % 4 {
                0 => {
                    let case = &cases[i % cases.len()];
                    (case.function_id.clone(), case.arguments.clone())
                }
                1 => (format!("svc{}::op", (i * 7_919) % RULES), None),
                2 => (
                    format!("ns{}::x", (i * 104_729) % RULES),
                    Some(json!({"k": i})),
                ),
                _ => (format!("other{i}::op"), None),
            };
            SimCall {
                id: Some(i.to_string()),
                session_id: None,
                function_id,
                arguments,
                mode: modes[i % modes.len()],
            }
        })
        .collect();
    let snapshot = Snapshot::compile(now.clone());
    let whatif = WhatIf::new(&snapshot, Some(draft.clone()));
    let changed = calls
        .iter()
        .filter(|c| whatif.supplied(None, c).changed)
        .count();
    eprintln!("simulate: {changed} of {CALLS} calls change under the draft");
    let mut group = c.benchmark_group("simulate");
    group.sample_size(10);
    group.bench_function(format!("{CALLS}_calls_x_{RULES}_rules/compare"), |b| {
        b.iter(|| {
            let results: Vec<_> = calls.iter().map(|c| whatif.supplied(None, c)).collect();
            black_box(results)
        })
    });
    group.bench_function(format!("{CALLS}_calls_x_{RULES}_rules/whole"), |b| {
        b.iter(|| black_box(simulate_offline(now.clone(), draft.clone(), &calls)))
    });
    // One 50 ms check outside criterion's statistics, printed for the record.
    let started = Instant::now();
    let out = simulate_offline(now.clone(), draft.clone(), &calls);
    eprintln!(
        "simulate: one whole run, {} results, {:?}",
        out.results.len(),
        started.elapsed()
    );
    group.finish();
}

/// A developer's command line of about `size` bytes: lists, pipelines,
/// quotes, a substitution, a wrapper, a redirection.
fn typical_command(size: usize) -> String {
    const LINES: [&str; 4] = [
        "cd src && cargo test --lib policy:: 2>&1 | tail -20",
        "git log --oneline -n 5 | grep \"fix: $(date +%Y)\" > /dev/null",
        "timeout 60 npm test -- --grep 'rm stale' || echo failed",
        "find . -name '*.rs' -type f | xargs wc -l | sort -n | tail -3",
    ];
    let mut out = String::new();
    let mut i = 0;
    while out.len() < size {
        if !out.is_empty() {
            out.push_str("; ");
        }
        out.push_str(LINES[i % LINES.len()]);
        i += 1;
    }
    // Cut at a statement boundary at or under the size.
    match out[..size.min(out.len())].rfind("; ") {
        Some(at) if out.len() > size => out.truncate(at),
        _ => {}
    }
    out
}

/// §25.10: reading a command field. Typical inputs at 200 B, 4 KiB and
/// 64 KiB, and adversarial 64 KiB values (nesting at the limit, many tiny
/// commands, one long word, a wrapper with thousands of later words), all
/// under the production limits (10 ms budget).
fn bench_shell_read(c: &mut Criterion) {
    let mut group = c.benchmark_group("shell/read");
    let limits = Limits::default();
    let mut inputs: Vec<(String, String)> = [200usize, 4_096, 65_536]
        .iter()
        .map(|size| (format!("typical/{size}"), typical_command(*size)))
        .collect();
    // The e2e bench's line: a list ending in a three-stage pipeline.
    let line = common::command_line("cd /workspace/project-123", 200);
    inputs.push((format!("line/{}", line.len()), line));
    let nest = format!("echo {}x{}; ", "\"$(".repeat(30), ")\"".repeat(30));
    inputs.push((
        "adversarial/nesting".into(),
        nest.repeat(65_536 / nest.len()),
    ));
    inputs.push(("adversarial/tiny".into(), "a;".repeat(32_768)));
    inputs.push((
        "adversarial/long-word".into(),
        format!("echo {}", "a".repeat(65_530)),
    ));
    inputs.push((
        "adversarial/wrapper".into(),
        format!("sudo {}", "rm ".repeat(21_800)),
    ));
    for (name, text) in &inputs {
        group.bench_function(BenchmarkId::from_parameter(name), |b| {
            b.iter(|| black_box(read_command(Source::Bash(black_box(text)), &limits)))
        });
    }
    let argv: Vec<String> = typical_command(200)
        .split(' ')
        .map(str::to_string)
        .collect();
    group.bench_function(BenchmarkId::from_parameter("argv/200"), |b| {
        b.iter(|| black_box(read_command(Source::Argv(black_box(&argv)), &limits)))
    });
    group.finish();
}

/// §25.10: the gate's decision on a `shell::exec` call when a command rule
/// applies to it, as the gate makes it: the call's command field read under
/// the production limits (both readings of a `command` without `args`:
/// shell-words and bash), then the ladder with those readings. Beside it,
/// the same calls under the same rules with `matches` in place of `prefix`
/// (a text constraint: nothing parses), and under the plain rules with the
/// default protected paths (§29), which read a `shell::*` command too.
/// The typical commands hold no `rm` program (their `rm` is inside a quoted
/// argument), so the deny rule looks at every simple command; at 64 KiB
/// the value yields more simple commands than a reading may (1,000), so
/// it is opaque and denied as `opaque_command`, as the gate would.
fn bench_decide_command_rule(c: &mut Criterion) {
    let settings = session();
    let compile = |command: Value| -> CompiledRules {
        let specs: Vec<RuleSpec> = serde_json::from_value(json!([
            {"function": "shell::exec", "action": "deny", "args": {"command": command}},
            "shell::exec",
        ]))
        .expect("specs");
        CompiledRules::compile(&specs).expect("compiles")
    };
    let defaults = ApprovalConfig::default();
    let variants = [
        ("command_prefix", compile(json!({"prefix": "rm"}))),
        ("text_matches", compile(json!({"matches": "^rm( |$)"}))),
        (
            "text_matches_protected_paths",
            compile(json!({"matches": "^rm( |$)"})).with_protected(
                &defaults.protected_paths,
                &defaults.protected_path_functions,
            ),
        ),
    ];
    let mut group = c.benchmark_group("decide/command_rule");
    for size in [200usize, 4_096, 65_536] {
        let arguments = json!({"command": typical_command(size), "cwd": "/workspace/project"});
        let call = Call {
            function_id: "shell::exec",
            arguments: Some(&arguments),
        };
        for (name, rules) in &variants {
            let readings = needs(&settings, rules, &call).read_inline();
            let decision = decide_with(
                &settings,
                rules,
                &call,
                DecideOptions {
                    readings: Some(&readings),
                    ..DecideOptions::default()
                },
            );
            eprintln!(
                "decide/command_rule/{name}/{size}: {} readings, verdict {}, rule {:?}",
                readings.models().count(),
                decision.verdict.as_str(),
                decision.rule_id()
            );
            group.bench_function(
                BenchmarkId::new(format!("{name}/{size}"), decision.verdict.as_str()),
                |b| {
                    b.iter(|| {
                        let readings = needs(&settings, rules, black_box(&call)).read_inline();
                        let verdict = decide_with(
                            &settings,
                            rules,
                            &call,
                            DecideOptions {
                                readings: Some(&readings),
                                ..DecideOptions::default()
                            },
                        )
                        .verdict;
                        black_box(verdict)
                    })
                },
            );
        }
    }
    group.finish();
}

fn config() -> Criterion {
    Criterion::default()
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(2))
}

criterion_group! {
    name = micro;
    config = config();
    targets = bench_shell_read, bench_decide_command_rule, bench_simulate, bench_decide, bench_decide_v2, bench_decide_parts, bench_compile, bench_redact, bench_redact_text, bench_ids, bench_index, bench_rebuild
}
criterion_main!(micro);
