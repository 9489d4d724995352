//! The hot path's budget: `decide` allocates nothing once a thread is warm,
//! and (run with `--release -- --ignored --nocapture`) its median stays
//! under 1 µs at 1,000 rules.
//!
//! The allocation count comes from a counting global allocator, installed
//! for this crate's unit-test binary only; it counts per thread, so tests
//! running in parallel do not disturb each other.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::time::Instant;

use serde_json::{json, Value};

use super::*;
use crate::settings::{ApprovalSettings, Entry, GrantedBy, Mode};

struct Counting;

thread_local! {
    static ALLOCATIONS: Cell<u64> = const { Cell::new(0) };
}

// SAFETY: forwards every call to `System` unchanged; only counts.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let _ = ALLOCATIONS.try_with(|c| c.set(c.get() + 1));
        // SAFETY: same contract as the caller's.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: same contract as the caller's.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let _ = ALLOCATIONS.try_with(|c| c.set(c.get() + 1));
        // SAFETY: same contract as the caller's.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

fn allocations() -> u64 {
    ALLOCATIONS.with(Cell::get)
}

/// A realistic 1,000-rule set: exact ids, prefix / suffix / class /
/// alternate globs, mode-scoped rules and argument rules.
fn thousand_rules() -> CompiledRules {
    let mut specs = Vec::new();
    for i in 0..1000 {
        let spec = match i % 10 {
            0..=3 => json!(format!("svc{i}::op")),
            4 => json!(format!("!ns{i}::*")),
            5 => json!({"function": format!("ns{i}::*"), "action": "allow", "modes": ["auto"]}),
            6 => json!(format!("*::danger{i}")),
            7 => json!(format!("{{tool,kit}}{i}::[gs]et")),
            8 => json!({"function": format!("shell{i}::exec"), "action": "deny",
                        "args": {"cmd": {"matches": "rm -rf"}, "/opts/force": {"equals": true}}}),
            _ => json!({"function": format!("svc{i}::op"), "action": "deny", "modes": ["manual"]}),
        };
        specs.push(spec);
    }
    specs.push(json!("!approval::*"));
    // Ask rules: a floor checked on every call before the grants.
    for i in 0..10 {
        specs.push(json!(format!("?ask{i}::*")));
    }
    specs.push(
        json!({"function": "shell::exec", "action": "ask", "args": {"cmd": {"prefix": "sudo "}}}),
    );
    let specs: Vec<RuleSpec> = serde_json::from_value(Value::Array(specs)).expect("specs");
    CompiledRules::compile(&specs).expect("compiles")
}

fn session(mode: Mode) -> CompiledSettings {
    let entry = |id: &str| Entry::new(id, 0, GrantedBy::UserClick);
    // Bounded grants: by arguments, by count, by time (far in the future).
    let scoped = Entry {
        args: Some(serde_json::from_value(json!({"cmd": {"prefix": "git "}})).expect("args")),
        ..entry("shell::exec")
    };
    let counted = Entry {
        uses_left: Some(3),
        ..entry("deploy::*")
    };
    let timed = Entry {
        expires_at: Some(u64::MAX),
        ..entry("web::*")
    };
    CompiledSettings::new(&ApprovalSettings {
        mode,
        always_allow: vec![entry("state::get"), entry("mcp::*::read")],
        approved_always: vec![
            entry("coder::*"),
            scoped,
            counted,
            timed,
            entry("web::fetch"),
        ],
        mode_set_at: 0,
    })
}

/// Calls covering every step of the ladder.
fn calls<'a>(args: &'a Value, git: &'a Value) -> Vec<Call<'a>> {
    let plain = |function_id| Call {
        function_id,
        arguments: None,
    };
    vec![
        plain("svc0::op"),
        plain("svc9::op"),
        plain("ns14::deep::x"),
        plain("ns15::x"),
        plain("a::b::danger16"),
        plain("kit17::set"),
        Call {
            function_id: "shell18::exec",
            arguments: Some(args),
        },
        plain("shell18::exec"),
        plain("nothing::matches"),
        plain("svc1::op::nope"),
        plain("approval::resolve"),
        plain("coder::run"),
        plain("state::get"),
        plain("mcp::srv::read"),
        plain("ask3::deploy"),
        Call {
            function_id: "shell::exec",
            arguments: Some(git),
        },
        plain("deploy::prod"),
        plain("web::search"),
    ]
}

fn git() -> Value {
    json!({"cmd": "git status"})
}

#[test]
fn decide_does_not_allocate_once_warm() {
    let rules = thousand_rules();
    let args = json!({"cmd": "rm -rf /", "opts": {"force": true}});
    let git = git();
    let calls = calls(&args, &git);
    let deny_first = thousand_rules().with_precedence(crate::policy::RulePrecedence::DenyAskAllow);
    for (mode, rules) in [Mode::Manual, Mode::Auto, Mode::Full]
        .into_iter()
        .flat_map(|m| [(m, &rules), (m, &deny_first)])
    {
        let settings = session(mode);
        let mut verdicts = Vec::with_capacity(calls.len());
        for call in &calls {
            verdicts.push(decide(&settings, rules, call).verdict);
        }
        let before = allocations();
        for _ in 0..10 {
            for (call, verdict) in calls.iter().zip(&verdicts) {
                let d = decide(&settings, rules, call);
                assert_eq!(d.verdict, *verdict);
                std::hint::black_box(d);
            }
        }
        assert_eq!(allocations() - before, 0, "decide allocated in {mode:?}");
    }
}

#[test]
fn the_counter_counts() {
    let before = allocations();
    let v: Vec<u8> = std::hint::black_box(Vec::with_capacity(8));
    drop(v);
    assert!(allocations() > before);
}

#[test]
fn the_mix_exercises_every_step() {
    let rules = thousand_rules();
    assert_eq!(rules.len(), 1012);
    let args = json!({"cmd": "rm -rf /", "opts": {"force": true}});
    let git = git();
    let manual = session(Mode::Manual);
    let auto = session(Mode::Auto);
    let kinds: Vec<String> = calls(&args, &git)
        .iter()
        .flat_map(|c| [decide(&manual, &rules, c), decide(&auto, &rules, c)])
        .map(|d| {
            format!("{:?}", d.basis)
                .split([' ', '{'])
                .next()
                .unwrap_or_default()
                .to_owned()
        })
        .collect();
    for kind in [
        "HumanOnly",
        "Ask",
        "ApprovedAlways",
        "AlwaysAllow",
        "Rule",
        "NoMatch",
    ] {
        assert!(
            kinds.iter().any(|k| k == kind),
            "{kind} missing from {kinds:?}"
        );
    }
    let d = decide(
        &manual,
        &rules,
        &Call {
            function_id: "shell18::exec",
            arguments: Some(&args),
        },
    );
    assert_eq!(d.verdict, Verdict::Deny);
    assert_eq!(
        decide(
            &manual,
            &rules,
            &Call {
                function_id: "svc9::op",
                arguments: None
            }
        )
        .verdict,
        Verdict::Deny
    );
    assert_eq!(
        decide(
            &auto,
            &rules,
            &Call {
                function_id: "svc9::op",
                arguments: None
            }
        )
        .verdict,
        Verdict::Hold
    );
}

#[test]
#[ignore = "timing: run with --release -- --ignored --nocapture"]
fn decide_median_at_1000_rules() {
    let rules = thousand_rules();
    let args = json!({"cmd": "rm -rf /", "opts": {"force": true}});
    let git = git();
    let calls = calls(&args, &git);
    let settings = session(Mode::Auto);
    let mut samples = Vec::new();
    for call in &calls {
        for _ in 0..200 {
            std::hint::black_box(decide(&settings, &rules, call));
        }
        let mut per_call = Vec::new();
        for _ in 0..200 {
            let start = Instant::now();
            for _ in 0..50 {
                std::hint::black_box(decide(&settings, &rules, std::hint::black_box(call)));
            }
            per_call.push(start.elapsed().as_nanos() as f64 / 50.0);
        }
        per_call.sort_by(f64::total_cmp);
        let median = per_call[per_call.len() / 2];
        println!("{:>20}: {median:>8.0} ns", call.function_id);
        samples.extend(per_call);
    }
    samples.sort_by(f64::total_cmp);
    let median = samples[samples.len() / 2];
    println!("median over the mix: {median:.0} ns");
    assert!(median < 1_000.0, "median {median:.0} ns ≥ 1 µs");
}
