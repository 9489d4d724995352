//! A reference reviewer for the approval gate (contract §22): a worker that
//! registers one function, `review::reference`, and answers every review
//! from fixed patterns over the call's arguments — deterministic, no model.
//! It shows the wire both ways; a model-backed reviewer answers the same
//! input with the same shape (`architecture/integration.md` § A reviewer).
//!
//! ```text
//! cargo run --example reference_reviewer -- --url ws://127.0.0.1:49134
//! # then, in the gate's configuration entry:
//! #   "reviewer": {"function_id": "review::reference", "modes": ["auto"]}
//! cargo test --example reference_reviewer      # its own checks
//! ```
//!
//! What it says, first match wins, over every string inside `arguments`
//! (keys and values, at any depth):
//!
//! | pattern | verdict | risk |
//! |---|---|---|
//! | `rm -rf`, `mkfs`, `dd if=`, `shutdown`, `:(){`, `chmod -R 777`, `curl … \| sh` | deny | high |
//! | `git push --force`, `DROP TABLE`, `DELETE FROM`, `sudo ` | escalate | high |
//! | the arguments were clipped (the reviewer did not see all of them) | escalate | medium |
//! | a function id in the read-only families (`*::read`, `*::list`, `*::get`, `*::status`, `fs::stat`) | allow | low |
//! | `git status`, `git diff`, `git log`, `ls`, `cat`, `pwd`, `echo` as the whole command | allow | low |
//! | anything else | escalate | medium |
//!
//! A reviewer that escalates what it does not know keeps the human in the
//! loop; the gate holds every escalation for a human anyway.

use clap::Parser;
use iii_sdk::runtime::WorkerMetadata;
use iii_sdk::{register_worker, InitOptions, RegisterFunction};
use serde_json::{json, Value};

/// The function id this reviewer registers.
const FUNCTION_ID: &str = "review::reference";

#[derive(Parser)]
#[command(about = "A deterministic reference reviewer for the approval gate")]
struct Args {
    #[arg(long, env = "III_URL", default_value = "ws://127.0.0.1:49134")]
    url: String,
    /// The function id to register.
    #[arg(long, default_value = FUNCTION_ID)]
    function_id: String,
}

/// Substrings that refuse the call outright.
const DENY: [&str; 7] = [
    "rm -rf",
    "mkfs",
    "dd if=",
    "shutdown",
    ":(){",
    "chmod -r 777",
    "| sh",
];

/// Substrings a human should see.
const ESCALATE: [&str; 4] = ["git push --force", "drop table", "delete from", "sudo "];

/// Function-id endings that only read.
const READ_ONLY: [&str; 5] = ["::read", "::list", "::get", "::status", "fs::stat"];

/// Whole commands that only read.
const READ_COMMANDS: [&str; 7] = [
    "git status",
    "git diff",
    "git log",
    "ls",
    "cat",
    "pwd",
    "echo",
];

/// Every string inside `value` (keys and values), lowercased.
fn texts(value: &Value, out: &mut Vec<String>) {
    match value {
        Value::String(s) => out.push(s.to_lowercase()),
        Value::Array(items) => items.iter().for_each(|v| texts(v, out)),
        Value::Object(map) => {
            for (k, v) in map {
                out.push(k.to_lowercase());
                texts(v, out);
            }
        }
        _ => {}
    }
}

/// Whether a command only reads: one of [`READ_COMMANDS`], alone or with
/// plain arguments, and nothing that chains or substitutes.
fn reads_only(command: &str) -> bool {
    let command = command.trim();
    if command.contains([';', '&', '|', '`', '$', '>', '<', '\n']) {
        return false;
    }
    READ_COMMANDS.iter().any(|read| {
        command == *read
            || command
                .strip_prefix(read)
                .is_some_and(|rest| rest.starts_with(' '))
    })
}

/// The review: a pure function of the gate's input.
fn review(input: &Value) -> Value {
    let answer = |verdict: &str, risk: &str, rationale: String| json!({"verdict": verdict, "rationale": rationale, "risk": risk});
    let function_id = input["function_id"].as_str().unwrap_or_default();
    let mut all = Vec::new();
    texts(&input["arguments"], &mut all);
    for text in &all {
        if let Some(hit) = DENY.iter().find(|p| text.contains(*p)) {
            return answer(
                "deny",
                "high",
                format!("the arguments contain {hit:?}, which destroys data or runs unseen code"),
            );
        }
    }
    for text in &all {
        if let Some(hit) = ESCALATE.iter().find(|p| text.contains(*p)) {
            return answer(
                "escalate",
                "high",
                format!("the arguments contain {hit:?}: a human should decide"),
            );
        }
    }
    if input["clipped"] == true {
        return answer(
            "escalate",
            "medium",
            "the arguments were clipped; I did not see all of them".into(),
        );
    }
    if READ_ONLY.iter().any(|end| function_id.ends_with(end)) {
        return answer("allow", "low", format!("{function_id} only reads"));
    }
    let command = ["command", "cmd"]
        .iter()
        .find_map(|k| input["arguments"][k].as_str());
    if command.is_some_and(reads_only) {
        return answer("allow", "low", "a read-only command".into());
    }
    answer(
        "escalate",
        "medium",
        format!("no pattern covers {function_id}; a human should decide"),
    )
}

#[tokio::main]
async fn main() {
    let args = Args::parse();
    let iii = register_worker(
        &args.url,
        InitOptions {
            metadata: Some(WorkerMetadata {
                name: "reference-reviewer".into(),
                description: Some("deterministic reviewer for the approval gate".into()),
                ..WorkerMetadata::default()
            }),
            ..InitOptions::default()
        },
    );
    iii.register_function(
        args.function_id.clone(),
        RegisterFunction::new_async(|input: Value| async move {
            Ok::<Value, iii_sdk::Error>(review(&input))
        })
        .description("Reviews one call for the approval gate: {verdict, rationale, risk}"),
    );
    println!(
        "reviewing as {} on {}; Ctrl-C stops",
        args.function_id, args.url
    );
    let _ = tokio::signal::ctrl_c().await;
    let _ = iii.shutdown_async().await;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn verdict(function_id: &str, arguments: Value, clipped: bool) -> String {
        let input = json!({"session_id": "s", "turn_id": "t", "function_call_id": "c",
                           "function_id": function_id, "arguments": arguments, "clipped": clipped,
                           "session": {}, "mode": "auto", "recent": []});
        review(&input)["verdict"].as_str().unwrap().to_string()
    }

    #[test]
    fn patterns_decide_in_order() {
        assert_eq!(
            verdict("shell::exec", json!({"command": "rm -rf /"}), false),
            "deny"
        );
        assert_eq!(
            verdict("shell::exec", json!({"command": "curl x | sh"}), false),
            "deny"
        );
        assert_eq!(
            verdict(
                "shell::exec",
                json!({"argv": ["git", "push --force"]}),
                false
            ),
            "escalate"
        );
        assert_eq!(
            verdict("shell::exec", json!({"command": "git status"}), false),
            "allow"
        );
        assert_eq!(
            verdict("shell::exec", json!({"command": "ls -la"}), false),
            "allow"
        );
        assert_eq!(
            verdict("shell::exec", json!({"command": "ls; curl x"}), false),
            "escalate"
        );
        assert_eq!(
            verdict("shell::exec", json!({"command": "lsof"}), false),
            "escalate"
        );
        assert_eq!(verdict("fs::read", json!({"path": "/a"}), false), "allow");
        assert_eq!(verdict("fs::read", json!({"path": "/a"}), true), "escalate");
        assert_eq!(verdict("deploy::prod", json!({}), false), "escalate");
        // A denial pattern wins over a read-only family.
        assert_eq!(
            verdict("fs::read", json!({"path": "x; rm -rf /"}), false),
            "deny"
        );
    }

    #[test]
    fn every_answer_has_the_contract_shape() {
        for args in [
            json!({"command": "rm -rf /"}),
            json!({}),
            json!({"command": "pwd"}),
        ] {
            let a = review(&json!({"function_id": "shell::exec", "arguments": args}));
            assert!(["allow", "deny", "escalate"].contains(&a["verdict"].as_str().unwrap()));
            assert!(a["rationale"].as_str().is_some_and(|r| !r.is_empty()));
            assert!(["low", "medium", "high"].contains(&a["risk"].as_str().unwrap()));
        }
    }
}
