//! The hot path's allocation budget: `decide` allocates nothing once a
//! thread is warm, at 1,000 rules, in every mode, under both precedences,
//! over every step of the ladder (guard, ask rules, seeds, bounded grants,
//! argument rules, the default hold).
//!
//! Its own test binary because it installs a counting global allocator:
//! the library's unit tests and the integration suite keep the system
//! allocator. The allocator counts per thread, so tests running in
//! parallel do not disturb each other. Timing lives in the micro bench
//! (`cargo bench --bench micro -- decide/`).

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

use approval_gate::{
    decide, ApprovalSettings, Call, CompiledRules, CompiledSettings, Entry, GrantedBy, Mode,
    RulePrecedence, RuleSpec, Verdict,
};
use serde_json::{json, Value};

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
/// alternate globs, mode-scoped rules (some of them seeds) and argument
/// rules, plus ask rules.
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
        json!({"function": "shell::exec", "action": "ask", "args": {"cmd": {"prefix": "sudo"}}}),
    );
    let specs: Vec<RuleSpec> = serde_json::from_value(Value::Array(specs)).expect("specs");
    CompiledRules::compile(&specs).expect("compiles")
}

fn session(mode: Mode) -> CompiledSettings {
    let entry = |id: &str| Entry::new(id, 0, GrantedBy::UserClick);
    // Bounded grants: by arguments, by count, by time (far in the future);
    // an exact one; a suppressed seed.
    let scoped = Entry {
        args: Some(serde_json::from_value(json!({"cmd": {"prefix": "git"}})).expect("args")),
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
    let exact = Entry {
        pattern: false,
        ..entry("web::fetch")
    };
    CompiledSettings::new(&ApprovalSettings {
        always_allow: vec![entry("state::get"), entry("mcp::*::read")],
        approved_always: vec![entry("coder::*"), scoped, counted, timed, exact],
        suppressed_seeds: vec!["ns25::*".to_owned()],
        ..ApprovalSettings::new(mode)
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
        plain("ns25::x"),
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
        plain("web::fetch"),
    ]
}

#[test]
fn decide_does_not_allocate_once_warm() {
    let rules = thousand_rules();
    let args = json!({"cmd": "rm -rf /", "opts": {"force": true}});
    let git = json!({"cmd": "git status"});
    let calls = calls(&args, &git);
    let deny_first = thousand_rules().with_precedence(RulePrecedence::DenyAskAllow);
    let lockdown = CompiledRules::lockdown();
    for (mode, rules) in [Mode::Manual, Mode::Auto, Mode::Full]
        .into_iter()
        .flat_map(|m| [(m, &rules), (m, &deny_first), (m, &lockdown)])
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
    let git = json!({"cmd": "git status"});
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
        "Seed",
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
}
