//! The playground example, run the way a newcomer runs it with `--script`:
//! its walk-through must show the hold, the decision and the release, the
//! folder prompt with its answer, and a hold no one answers ending at its
//! deadline. The example's own source is compiled
//! in here, so the test runs exactly its code without needing the example
//! binary built first.

#[allow(dead_code)]
#[path = "../../examples/playground.rs"]
mod example;

use approval_gate_testkit::fixture::EngineFixture;
use clap::Parser;
use example::{Args, Choice, Decisions};

use crate::common::start_in_process;

/// Runs the walk-through with `argv` and returns what it printed.
async fn run(argv: &[&str]) -> (Result<(), String>, String) {
    let args = Args::try_parse_from(std::iter::once("playground").chain(argv.iter().copied()))
        .expect("arguments parse");
    let decisions = Decisions::script(args.script.as_deref().unwrap_or_default());
    let mut out: Vec<u8> = Vec::new();
    let result = tokio::time::timeout(
        std::time::Duration::from_secs(120),
        example::run(args, decisions, &mut out),
    )
    .await
    .expect("the walk-through finishes within two minutes");
    (result, String::from_utf8_lossy(&out).into_owned())
}

/// The lines of `out` in order, each found after the previous one.
fn assert_in_order(out: &str, needles: &[&str]) {
    let mut from = 0;
    for needle in needles {
        match out[from..].find(needle) {
            Some(at) => from += at + needle.len(),
            None => panic!("expected {needle:?} after position {from} in:\n{out}"),
        }
    }
}

/// What a `--script allow,deny,session` walk-through of session `play`
/// shows, in order.
const ALLOW_DENY_SESSION: &[&str] = &[
    // 1: held, in the inbox (redacted), allowed, run, announced
    "agent    calls demo::deploy",
    "hook     pre_trigger approval::gate → hold  (held: no rule matched)",
    "event    approval::pending-created play/c1 demo::deploy, kind function",
    "inbox    approval::list-pending {\"session_id\":\"play\"} → 1 held",
    "· play/c1 demo::deploy function, in \"Release prep\"",
    "\"api_key\":\"<redacted>\"",
    "decide   allow | deny [reason] > allow   (from --script)",
    "console  approval::resolve {\"decision\":\"allow\",\"function_call_id\":\"c1\",\"session_id\":\"play\"}",
    "→ {\"resolved\":true,\"turn_resumed\":true}",
    "target   demo::deploy ran",
    "agent    got demo::deploy's result:",
    "event    approval::pending-resolved play/c1 demo::deploy, outcome allow",
    // 2: held, denied, the agent gets the operator's denial
    "agent    calls demo::deploy {\"env\":\"prod\"}",
    "hook     pre_trigger approval::gate → hold",
    "decide   allow | deny [reason] > deny   (from --script)",
    "agent    got an error result (denied_by user): Denied by a human: Rejected by operator.",
    "event    approval::pending-resolved play/c2 demo::deploy, outcome deny",
    // 3: the jail rejects, the grant watch asks, a session grant releases
    "console  approval::approve-always",
    "agent    calls shell::run",
    "hook     pre_trigger approval::gate → continue  (allowed: approved_always entry shell::run)",
    "target   shell::run failed: S215 path escapes the fs jail roots [/w/play]: /data/reports/q3.csv (+ filesystem_access_request)",
    "hook     post_trigger approval::filesystem-access-watch → hold  (a folder prompt instead of the error)",
    "event    approval::pending-created play/c3 shell::run, kind filesystem_access, dir /data/reports",
    "· play/c3 shell::run filesystem_access /data/reports (S215)",
    "decide   once | session | always | deny [reason] > session   (from --script)",
    "\"grant_scope\":\"session\"",
    "target   shell::run ran",
    "agent    got shell::run's result:",
    "event    approval::pending-resolved play/c3 shell::run, outcome allow",
    "harness  durable filesystem grants of play: /data/reports",
    // 4: the grant holds for the next read
    "agent    calls shell::run {\"cmd\":\"cat\",\"path\":\"/data/reports/q4.csv\"}",
    "target   shell::run ran",
    "note     no prompt this time",
    // 5: no one answers: escalated, then denied for want of an answer
    "console  configuration::set approval-gate + {\"escalate_after_ms\":1500,\"pending_timeout_ms\":3000}",
    "\"deadline_ms\":3000",
    "agent    calls demo::deploy {\"env\":\"prod\",\"version\":\"2.4.1\"}",
    "hook     pre_trigger approval::gate → hold",
    "· play/c5 demo::deploy: escalate_at +1.5 s, expires_at +3.0 s (after pending_at)",
    "note     no one decides this time",
    "event    approval::pending-escalated play/c5 demo::deploy, still held",
    "agent    got an error result (denied_by timeout): Approval timed out: no one approved demo::deploy within 3 seconds, so it was not run. Ask the user to approve it, or try another way.",
    "event    approval::pending-resolved play/c5 demo::deploy, outcome timeout, reason \"timeout\"",
    "the stored configuration is back",
    // the end: nothing held, the session's memory gone with it
    "approval::list-pending {\"session_id\":\"play\"} → 0 held",
    "get-settings source: defaults",
];

#[tokio::test]
async fn scripted_walk_through_shows_hold_decision_release_and_the_folder_prompt() {
    let (result, out) = run(&["--script", "allow,deny,session"]).await;
    println!("{out}");
    result.unwrap_or_else(|e| panic!("playground failed: {e}\n{out}"));
    assert_in_order(&out, ALLOW_DENY_SESSION);
    // The agent's line shows the secret as sent; the inbox only redacted.
    let inbox: Vec<&str> = out.lines().filter(|l| l.contains("· play/")).collect();
    assert!(
        !inbox.is_empty() && inbox.iter().all(|l| !l.contains("sk-live-4242")),
        "{out}"
    );
}

#[tokio::test]
async fn against_a_real_engine_where_the_worker_runs() {
    let Some(engine) = EngineFixture::start_real("playground --url").await else {
        return;
    };
    let worker = start_in_process(&engine).await;
    let url = engine.url();
    let (result, out) = run(&[
        "--url",
        &url,
        "--session",
        "play",
        "--script",
        "allow,deny,session",
    ])
    .await;
    println!("{out}");
    result.unwrap_or_else(|e| panic!("playground failed: {e}\n{out}"));
    assert!(
        out.contains("setup    worker: approval-gate, already running there"),
        "{out}"
    );
    assert_in_order(&out, ALLOW_DENY_SESSION);
    worker.shutdown(std::time::Duration::from_secs(2)).await;
}

#[tokio::test]
async fn a_denied_folder_is_not_asked_again() {
    let (result, out) = run(&["--script", "allow,deny:not on prod,deny"]).await;
    result.unwrap_or_else(|e| panic!("playground failed: {e}\n{out}"));
    assert_in_order(
        &out,
        &[
            "\"reason\":\"not on prod\"",
            "agent    got an error result (denied_by user): Denied by a human: not on prod",
            "outcome deny, reason \"not on prod\"",
            "decide   once | session | always | deny [reason] > deny",
            "agent    got an error result (denied_by user): Denied by a human: user denied folder access to /data/reports",
            "gate     /data/reports is remembered as denied for play",
            // the next read stands down: the shell's own error reaches the agent
            "agent    calls shell::run {\"cmd\":\"cat\",\"path\":\"/data/reports/q4.csv\"}",
            "hook     post_trigger approval::filesystem-access-watch → continue",
            "agent    got shell::run's error: path escapes the fs jail roots",
            "note     no prompt this time",
        ],
    );
}

#[tokio::test]
async fn with_links_every_hold_prints_its_own_link_on_the_http_worker() {
    let (result, out) = run(&["--links", "--script", "allow,deny,session"]).await;
    result.unwrap_or_else(|e| panic!("playground failed: {e}\n{out}"));
    assert_in_order(&out, ALLOW_DENY_SESSION);
    let links: Vec<&str> = out
        .lines()
        .filter_map(|l| l.strip_prefix("link     "))
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    assert_eq!(links.len(), 3, "one link per hold:\n{out}");
    let base = out
        .lines()
        .find_map(|l| l.split("HTTP worker at ").nth(1))
        .and_then(|rest| rest.split(';').next())
        .unwrap_or_else(|| panic!("no HTTP worker line:\n{out}"));
    for link in &links {
        assert!(link.starts_with(&format!("{base}/approvals/")), "{link}");
    }
    assert_eq!(
        links.iter().collect::<std::collections::HashSet<_>>().len(),
        3
    );
}

#[tokio::test]
async fn a_script_that_runs_out_says_so() {
    let (result, out) = run(&["--script", "allow"]).await;
    let err = result.expect_err("two decisions are missing");
    assert!(
        err.contains("--script ran out of decisions"),
        "{err}\n{out}"
    );
}

#[test]
fn answers_parse_as_a_person_types_them() {
    assert_eq!(Choice::parse("allow", false), Ok(Choice::Allow(None)));
    assert_eq!(Choice::parse(" y ", false), Ok(Choice::Allow(None)));
    assert_eq!(Choice::parse("deny", false), Ok(Choice::Deny(None)));
    assert_eq!(
        Choice::parse("deny not on prod", false),
        Ok(Choice::Deny(Some("not on prod".into())))
    );
    assert_eq!(
        Choice::parse("deny:not on prod", true),
        Ok(Choice::Deny(Some("not on prod".into())))
    );
    assert_eq!(
        Choice::parse("allow", true),
        Ok(Choice::Allow(Some("once")))
    );
    assert_eq!(
        Choice::parse("Session", true),
        Ok(Choice::Allow(Some("session")))
    );
    assert_eq!(
        Choice::parse("always", true),
        Ok(Choice::Allow(Some("always")))
    );
    assert!(Choice::parse("session", false).is_err());
    assert!(Choice::parse("maybe", true).is_err());
}
