//! The configuration entry's JSON schema (draft-07), registered with the
//! entry so the console renders a form and the engine rejects bad values
//! before they are stored.

use serde_json::{json, Value};

use super::check::MAX_SAFE_INTEGER;
use super::reviewer::{
    DEFAULT_MAX_CONSECUTIVE_DENIALS, DEFAULT_MAX_DENIALS_PER_50, DEFAULT_REVIEWER_TIMEOUT_MS,
    MIN_REVIEWER_TIMEOUT_MS, REVIEWER_TIMEOUT_CEILING_MS,
};
use super::{
    BREAKER_WINDOW, DEFAULT_BINDING_CHECK_INTERVAL_MS, DEFAULT_DECISION_LOG_QUEUE,
    DEFAULT_EDIT_TTL_MAX_MS, DEFAULT_GATE_PRIORITY, DEFAULT_GRANT_REASK_LIMIT,
    DEFAULT_PROTECTED_PATHS, DEFAULT_PROTECTED_PATH_FUNCTIONS, DEFAULT_RELEASE_TIMEOUT_MS,
    DEFAULT_RESOLVE_WAIT_MS, DEFAULT_SUGGEST_PREFIXES,
};
use crate::link_token::token::MIN_SECRET_CHARS;
use crate::policy::MIN_DEADLINE_MS;

/// The JSON schema (draft-07) registered with the entry: titles, descriptions,
/// defaults and an example so the console renders a form; unknown keys rejected.
pub fn schema() -> Value {
    let mode = json!({"type": "string", "enum": ["manual", "auto", "full"]});
    let constraint = json!({
        "oneOf": [
            {"type": "object", "additionalProperties": false, "required": ["equals"], "properties": {"equals": {"description": "Type-strict JSON equality; a missing field is null."}}},
            {"type": "object", "additionalProperties": false, "required": ["matches"], "properties": {"matches": {"description": "Unanchored regular expression; strings only.", "type": "string"}}},
            {"type": "object", "additionalProperties": false, "required": ["prefix"], "properties": {"prefix": {"description": "The string value starts with this text (no regex, case-sensitive); strings only.", "type": "string"}}}
        ]
    });
    let probe = json!({
        "title": "Example call",
        "type": "object",
        "additionalProperties": false,
        "required": ["function_id"],
        "properties": {
            "function_id": {"title": "Function id", "description": "The example call's function id.", "type": "string", "minLength": 1, "examples": ["shell::exec"]},
            "arguments": {"title": "Arguments", "description": "The example call's arguments (any JSON; a rule with args matches objects only). Default: none.", "examples": [{"command": "git push --force"}]}
        }
    });
    let deadline = |title: &str, description: &str, example: u64| json!({"title": title, "description": description, "type": ["integer", "null"], "minimum": MIN_DEADLINE_MS, "default": null, "examples": [example]});
    let rule_object = json!({
        "title": "Rule",
        "type": "object",
        "additionalProperties": false,
        "required": ["function", "action"],
        "properties": {
            "function": {"title": "Function", "description": "Function id or glob (*, ?, [..], {a,b}).", "type": "string", "minLength": 1},
            "action": {"title": "Action", "description": "allow runs the call, deny refuses it, ask holds it for a human. Ask rules are a floor: checked before full mode and the allow-lists, wherever they stand in the list.", "type": "string", "enum": ["allow", "deny", "ask"]},
            "rule_id": {"title": "Rule id", "description": "Name shown in deny reasons and evaluations.", "type": "string"},
            "modes": {"title": "Modes", "description": "Apply only in these modes (absent: every mode; empty: never).", "type": "array", "items": mode},
            "args": {
                "title": "Argument constraints",
                "description": "All must hold. Keys are top-level argument names or JSON Pointers starting with /.",
                "type": "object",
                "additionalProperties": constraint
            },
            "timeout_ms": deadline(
                "Hold timeout (ms)",
                "Ask rules only: how long a call this rule holds may wait for a human before it is denied. Wins over the global pending timeout. Default: the global setting.",
                1_800_000,
            ),
            "escalate_after_ms": deadline(
                "Escalate after (ms)",
                "Ask rules only: when a call this rule holds is escalated to a second approver. Wins over the global setting. Default: the global setting.",
                600_000,
            ),
            "examples": {
                "title": "Examples",
                "description": "Calls the rule must match and must not match, checked against the rule alone (its function glob and args, not its modes) every time the policy loads. A failed example is a rule error: the rule set falls back to empty and the error is logged and shown by approval::evaluate and approval::health.",
                "type": "object",
                "additionalProperties": false,
                "default": {},
                "properties": {
                    "match": {"title": "Must match", "description": "Calls the rule must match.", "type": "array", "items": probe, "default": [],
                              "examples": [[{"function_id": "shell::exec", "arguments": {"command": "git push --force"}}]]},
                    "no_match": {"title": "Must not match", "description": "Calls the rule must not match.", "type": "array", "items": probe, "default": [],
                                 "examples": [[{"function_id": "shell::exec", "arguments": {"command": "git push"}}]]}
                },
                "examples": [{
                    "match": [{"function_id": "shell::exec", "arguments": {"command": "git push --force"}}],
                    "no_match": [{"function_id": "shell::exec", "arguments": {"command": "git push"}}]
                }]
            }
        }
    });
    json!({
        "$schema": "http://json-schema.org/draft-07/schema#",
        "title": "Approval gate",
        "description": "Policy for the approval gate: which agent function calls run, are denied, or wait for a human.",
        "type": "object",
        "additionalProperties": false,
        "properties": {
            "default_mode": {
                "title": "Default mode",
                "description": "Mode of sessions with no stored settings. manual: every call no rule covers waits for a human. auto: as manual, but the session's always-allow list is honoured. full: every call runs except the approval and configuration surfaces.",
                "type": "string",
                "enum": ["manual", "auto", "full"],
                "default": "manual"
            },
            "rules": {
                "title": "Rules",
                "description": "A string \"glob\" allows, \"!glob\" denies, \"?glob\" asks a human. An object can scope a rule to modes, constrain arguments and carry examples. Ask rules hold first; then, under first_match, the first allow or deny rule that matches wins; no match holds the call for a human. A value in which any rule does not compile, or any example fails, is refused whole: the previous configuration stays in force (with none, every call is held) and approval::health reports the errors.",
                "type": "array",
                "default": ["!approval::*"],
                "items": {
                    "oneOf": [
                        {
                            "title": "Shorthand",
                            "description": "\"glob\" allows matching functions; \"!glob\" denies them; \"?glob\" holds them for a human.",
                            "type": "string",
                            "minLength": 1
                        },
                        rule_object
                    ]
                }
            },
            "rule_precedence": {
                "title": "Rule precedence",
                "description": "How rules combine with the session's mode and grants. first_match: the guard, then ask rules, then full mode, approved_always, always_allow (auto), then the first allow or deny rule that matches. deny_ask_allow: the guard, then any matching deny rule (it beats full mode, allow-lists and grants), then ask rules, full mode, approved_always, always_allow, then allow rules. No match holds.",
                "type": "string",
                "enum": ["first_match", "deny_ask_allow"],
                "default": "first_match",
                "examples": ["deny_ask_allow"]
            },
            "grant_reask_limit": {
                "title": "Folder-access re-ask limit",
                "description": "How many times the grant watch may ask about folders for one held call before standing down (0 = never ask).",
                "type": "integer",
                "minimum": 0,
                "default": DEFAULT_GRANT_REASK_LIMIT
            },
            "human_only_extra": {
                "title": "Extra human-only functions",
                "description": "Function-id globs that only a human may call, in every mode and whatever the rules and allow-lists say. They add to the built-in guards (the approval and configuration surfaces, harness releases and folder grants, binding changes, and state calls on this worker's scopes), which cannot be removed. A glob that does not compile refuses the whole value (the previous configuration stays in force).",
                "type": "array",
                "items": {"type": "string", "minLength": 1},
                "default": [],
                "examples": [["deploy::prod*", "billing::*"]]
            },
            "gate_priority": {
                "title": "Gate priority",
                "description": "Priority of the gate's pre-trigger binding. The harness runs hooks in ascending priority and each sees the arguments as the previous one rewrote them, so the gate should run last: give every other pre-trigger hook a lower priority. A change replaces the binding (the new one is made before the old one is removed).",
                "type": "integer",
                "minimum": -MAX_SAFE_INTEGER,
                "maximum": MAX_SAFE_INTEGER,
                "default": DEFAULT_GATE_PRIORITY,
                "examples": [1000]
            },
            "binding_check_interval_ms": {
                "title": "Binding check interval (ms)",
                "description": "How often the worker checks that the gate's binding still exists, and makes it again if the engine lost it. While it is missing every check logs an ERROR.",
                "type": "integer",
                "minimum": 1000,
                "default": DEFAULT_BINDING_CHECK_INTERVAL_MS,
                "examples": [30000]
            },
            "release_timeout_ms": {
                "title": "Release timeout (ms)",
                "description": "How long a decision waits for the harness's answer. Today's harness answers an allowed call only when it has run, which can take many minutes. Past this, the worker asks the harness what became of the call: still held, it is pending again; otherwise its outcome is unknown.",
                "type": "integer",
                "minimum": 1000,
                "default": DEFAULT_RELEASE_TIMEOUT_MS,
                "examples": [1800000]
            },
            "resolve_wait_ms": {
                "title": "Resolve wait (ms)",
                "description": "How long approval::resolve (and a link's decision) waits for the release's outcome before answering {resolved: false, releasing: true}: the decision is taken and under way, and approval::pending-resolved follows when the harness answers. Keep it below the 10 s that consoles wait.",
                "type": "integer",
                "minimum": 0,
                "default": DEFAULT_RESOLVE_WAIT_MS,
                "examples": [8000]
            },
            "links": {
                "title": "Approval links",
                "description": "A signed link per held call, served through the engine's HTTP worker (iii-http) at <public_base_url>/approvals/<token>, where a human decides the call in a browser; records and pending-created events carry it as approval_url. Null: off. Also set the iii-http worker's cors.allowed_origins to the base URL's origin.",
                "type": ["object", "null"],
                "default": null,
                "additionalProperties": false,
                "required": ["secret", "public_base_url"],
                "properties": {
                    "secret": {
                        "title": "Link secret",
                        "description": "Signs every link (HMAC-SHA256); at least 32 characters. Write ${APPROVAL_LINK_SECRET} so the value comes from the environment. Changing it voids every outstanding link.",
                        "type": "string",
                        "minLength": MIN_SECRET_CHARS,
                        "examples": ["${APPROVAL_LINK_SECRET}"]
                    },
                    "public_base_url": {
                        "title": "Public base URL",
                        "description": "Where a browser reaches the engine's HTTP port (scheme, host, port, optional path prefix). Decisions are accepted only from this origin.",
                        "type": "string",
                        "pattern": "^[Hh][Tt][Tt][Pp][Ss]?://",
                        "examples": ["https://approvals.example.com"]
                    },
                    "inbox_token": {
                        "title": "Inbox token",
                        "description": "Bearer token of GET /approvals, the list of held calls; at least 32 characters, like the secret (a shorter one keeps the page off and is reported). Write ${APPROVAL_INBOX_TOKEN} so the value comes from the environment. Without it that page answers 404.",
                        "type": "string",
                        "minLength": 1,
                        "examples": ["${APPROVAL_INBOX_TOKEN}"]
                    }
                },
                "examples": [{"secret": "${APPROVAL_LINK_SECRET}", "public_base_url": "https://approvals.example.com"}]
            },
            "reviewer": {
                "title": "Reviewer",
                "description": "An automated reviewer asked about calls that would otherwise wait for a human only because no rule decided them (the default hold), in the listed modes. Never asked about an ask rule, a human-only function, a denied call or while the gate is in lockdown. Its allow lets the call run (unless the arguments it saw were clipped); its deny refuses it, led 'Denied by the reviewer:'; anything else (escalate, an error, a timeout, a malformed answer) holds the call for a human, and the record carries the review. Only a human may call the reviewer's function. Null: off.",
                "type": ["object", "null"],
                "default": null,
                "additionalProperties": false,
                "required": ["function_id"],
                "properties": {
                    "function_id": {
                        "title": "Reviewer function",
                        "description": "The function the gate calls with {session_id, turn_id, function_call_id, function_id, arguments, clipped, session, mode, recent}; it answers {verdict: allow|deny|escalate, rationale, risk?}.",
                        "type": "string",
                        "minLength": 1,
                        "pattern": "^\\S(.*\\S)?$",
                        "examples": ["review::call"]
                    },
                    "modes": {
                        "title": "Reviewed modes",
                        "description": "Sessions in these modes are reviewed.",
                        "type": "array",
                        "items": mode,
                        "default": ["auto"]
                    },
                    "timeout_ms": {
                        "title": "Reviewer timeout (ms)",
                        "description": format!("How long the gate waits for the reviewer; clamped to {REVIEWER_TIMEOUT_CEILING_MS} (the hook budget less 1000 ms, kept to record the hold). No answer in time holds the call for a human."),
                        "type": "integer",
                        "minimum": MIN_REVIEWER_TIMEOUT_MS,
                        "default": DEFAULT_REVIEWER_TIMEOUT_MS
                    },
                    "max_consecutive_denials": {
                        "title": "Denials in a row before a human",
                        "description": "After this many reviewer denials in a row in a session, its denials hold the call for a human until a human decides a call of the session (0: every denial goes to a human).",
                        "type": "integer",
                        "minimum": 0,
                        "default": DEFAULT_MAX_CONSECUTIVE_DENIALS
                    },
                    "max_denials_per_50": {
                        "title": "Denials per 50 reviews before a human",
                        "description": "After this many reviewer denials among a session's last 50 reviews, its denials hold the call for a human until a human decides a call of the session (0: every denial goes to a human).",
                        "type": "integer",
                        "minimum": 0,
                        "maximum": BREAKER_WINDOW,
                        "default": DEFAULT_MAX_DENIALS_PER_50
                    }
                },
                "examples": [{"function_id": "review::call", "modes": ["auto"], "timeout_ms": 2000}]
            },
            "decision_log": {
                "title": "Decision log",
                "description": "Send one record {decision, rule_id?, decided_by, session_id, function_call_id, function_id, at} per gate verdict (continue, deny, hold) and per held call that leaves the inbox to this function, fire-and-forget, from a queue of its own: the gate never waits for it. Ids only, no arguments, every string redacted. A full queue drops its oldest record (counted in approval::health). The function becomes a human-only target. Null: off.",
                "type": ["object", "null"],
                "default": null,
                "additionalProperties": false,
                "required": ["function_id"],
                "properties": {
                    "function_id": {
                        "title": "Log function",
                        "description": "The function that receives each record (void calls).",
                        "type": "string",
                        "minLength": 1,
                        "examples": ["audit::approval-decision"]
                    },
                    "queue": {
                        "title": "Queue size",
                        "description": "Records waiting to be sent at most; past it the oldest is dropped.",
                        "type": "integer",
                        "minimum": 1,
                        "default": DEFAULT_DECISION_LOG_QUEUE,
                        "examples": [10000]
                    }
                },
                "examples": [{"function_id": "audit::approval-decision"}]
            },
            "pending_timeout_ms": {
                "title": "Pending timeout (ms)",
                "description": "Deny a held call that no one answered within this many milliseconds: the agent is told no one approved it in time, and approval::pending-resolved reports outcome timeout. null: held calls wait until a human answers or their turn ends. Applies to calls held after the change; an ask rule's own timeout_ms wins.",
                "type": ["integer", "null"],
                "minimum": MIN_DEADLINE_MS,
                "default": null,
                "examples": [1_800_000]
            },
            "suggest_prefixes": {
                "title": "Suggested session grants",
                "description": "Commands (a program, or a program and its subcommand) for which a held call's page may offer \"Allow <prefix> … in this session\": only when the held command is one simple command an allow prefix could cover, never for shells, interpreters, build or test runners, package managers. Plain words separated by single spaces; an entry with shell structure, a quote, an expansion or a glob refuses the whole value.",
                "type": "array",
                "items": {"type": "string", "minLength": 1},
                "default": DEFAULT_SUGGEST_PREFIXES,
                "examples": [["git status", "git log", "ls", "cat"]]
            },
            "protected_paths": {
                "title": "Protected paths",
                "description": "Path globs (* within a segment, ** across) that no call of the functions below may touch without a human, in every mode and whatever the grants say: the engine's configuration files by default. The running entry's own file (**/config/<id>.yaml) is always added. Add the engine's directory (e.g. /opt/iii/**) and the state adapter's files.",
                "type": "array",
                "items": {"type": "string", "minLength": 1},
                "default": DEFAULT_PROTECTED_PATHS,
                "examples": [["**/config/approval-gate*.yaml", "/opt/iii/**"]]
            },
            "protected_path_functions": {
                "title": "Functions judged for protected paths",
                "description": "Function-id globs whose calls are judged against the protected paths (every word of every command that can run, and every string argument).",
                "type": "array",
                "items": {"type": "string", "minLength": 1},
                "default": DEFAULT_PROTECTED_PATH_FUNCTIONS,
                "examples": [["shell::*", "coder::*", "fp::*"]]
            },
            "edit_ttl_max_ms": {
                "title": "Longest life of an edit's grant (ms)",
                "description": "An edited call (\"Edit and allow\") becomes a one-shot grant for the edited arguments; its ttl_ms (default 600000) is capped at this.",
                "type": "integer",
                "minimum": MIN_DEADLINE_MS,
                "default": DEFAULT_EDIT_TTL_MAX_MS,
                "examples": [3600000]
            },
            "escalate_after_ms": {
                "title": "Escalate after (ms)",
                "description": "Emit approval::pending-escalated, once, for a held call that no one answered within this many milliseconds (a notifier can then ask a second approver); the call stays held. null: never. Applies to calls held after the change; an ask rule's own escalate_after_ms wins.",
                "type": ["integer", "null"],
                "minimum": MIN_DEADLINE_MS,
                "default": null,
                "examples": [600_000]
            }
        },
        "examples": [{
            "default_mode": "manual",
            "rules": ["!approval::*", {"function": "state::get", "action": "allow", "modes": ["auto"]}],
            "grant_reask_limit": 3
        }, {
            "default_mode": "auto",
            "rule_precedence": "deny_ask_allow",
            "rules": [
                "!approval::*",
                {"function": "shell::exec", "action": "deny", "rule_id": "no-force-push",
                 "args": {"command": {"matches": "push .*--force"}},
                 "examples": {"match": [{"function_id": "shell::exec", "arguments": {"command": "git push --force"}}],
                              "no_match": [{"function_id": "shell::exec", "arguments": {"command": "git push"}}]}},
                {"function": "deploy::*", "action": "ask", "timeout_ms": 1_800_000, "escalate_after_ms": 600_000},
                {"function": "shell::*", "action": "allow", "modes": ["auto"]}
            ]
        }]
    })
}
