//! The configuration entry's JSON schema (draft-07), registered with the
//! entry so the console renders a form and the engine rejects bad values
//! before they are stored.

use serde_json::{json, Value};

use super::{
    DEFAULT_BINDING_CHECK_INTERVAL_MS, DEFAULT_GATE_PRIORITY, DEFAULT_GRANT_REASK_LIMIT,
    MIN_DEADLINE_MS,
};

/// The JSON schema (draft-07) registered with the entry: titles, descriptions,
/// defaults and an example so the console renders a form; unknown keys rejected.
pub fn schema() -> Value {
    let mode = json!({"type": "string", "enum": ["manual", "auto", "full"]});
    let constraint = json!({
        "oneOf": [
            {"type": "object", "additionalProperties": false, "required": ["equals"], "properties": {"equals": {"description": "Type-strict JSON equality; a missing field is null."}}},
            {"type": "object", "additionalProperties": false, "required": ["matches"], "properties": {"matches": {"description": "Unanchored regular expression; strings only.", "type": "string"}}}
        ]
    });
    let rule_object = json!({
        "title": "Rule",
        "type": "object",
        "additionalProperties": false,
        "required": ["function", "action"],
        "properties": {
            "function": {"title": "Function", "description": "Function id or glob (*, ?, [..], {a,b}).", "type": "string", "minLength": 1},
            "action": {"title": "Action", "description": "allow or deny.", "type": "string", "enum": ["allow", "deny"]},
            "rule_id": {"title": "Rule id", "description": "Name shown in deny reasons and evaluations.", "type": "string"},
            "modes": {"title": "Modes", "description": "Apply only in these modes (absent: every mode; empty: never).", "type": "array", "items": mode},
            "args": {
                "title": "Argument constraints",
                "description": "All must hold. Keys are top-level argument names or JSON Pointers starting with /.",
                "type": "object",
                "additionalProperties": constraint
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
                "description": "Evaluated in order, first match wins; no match holds the call for a human. A string \"glob\" allows, \"!glob\" denies. An object can scope a rule to modes and constrain arguments.",
                "type": "array",
                "default": ["!approval::*"],
                "items": {
                    "oneOf": [
                        {
                            "title": "Shorthand",
                            "description": "\"glob\" allows matching functions; \"!glob\" denies them.",
                            "type": "string",
                            "minLength": 1
                        },
                        rule_object
                    ]
                }
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
                "description": "Function-id globs that only a human may call, in every mode and whatever the rules and allow-lists say. They add to the built-in guards (the approval and configuration surfaces, harness releases and folder grants, binding changes, and state calls on this worker's scopes), which cannot be removed.",
                "type": "array",
                "items": {"type": "string", "minLength": 1},
                "default": [],
                "examples": [["deploy::prod*", "billing::*"]]
            },
            "gate_priority": {
                "title": "Gate priority",
                "description": "Priority of the gate's pre-trigger binding. The harness runs hooks in ascending priority and each sees the arguments as the previous one rewrote them, so the gate should run last: give every other pre-trigger hook a lower priority. A change replaces the binding (the new one is made before the old one is removed).",
                "type": "integer",
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
            "pending_timeout_ms": {
                "title": "Pending timeout (ms)",
                "description": "Deny a held call that no one answered within this many milliseconds: the agent is told no one approved it in time, and approval::pending-resolved reports outcome timeout. null: held calls wait until a human answers or their turn ends. Applies to calls held after the change; an ask rule's own timeout_ms wins.",
                "type": ["integer", "null"],
                "minimum": MIN_DEADLINE_MS,
                "default": null,
                "examples": [1_800_000]
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
        }]
    })
}
