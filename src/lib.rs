//! approval-gate: decides, one function call at a time, whether an agent's
//! call may run, must be denied, or must wait for a human, and routes the
//! human's answer back to the parked turn.
//!
//! The worker serves four surfaces, one module each:
//!
//! * `gate` — `approval::gate`, the pre-trigger hook (continue / deny / hold);
//! * `grant_watch` — `approval::grant-watch`, jail rejections → folder prompts;
//! * `decision` — `approval::resolve`, the settings RPCs, `approval::evaluate`;
//! * `inbox` — held calls, `list-pending` / `get-pending`, the trigger types.
//!
//! They share a pure core — `policy` (rule compilation and the decision
//! ladder), `redact`, `settings` (the per-session record), the inbox's record,
//! index and cursor — and a thin shell: `engine` (the one typed client of the
//! engine and its siblings), `config` (the reactive configuration), `boot`.
//! `architecture/internals.md` draws the layout; `architecture/contract.md`
//! is the wire contract.
//!
//! Every module is private. What follows is the crate's API: what the binary
//! runs, and the pure core that tests, benches and fuzz targets exercise.

#![warn(unreachable_pub)]

mod backoff;
mod bindings;
mod boot;
mod config;
mod console;
mod decision;
mod deep;
mod edits;
mod engine;
mod error;
mod folders;
mod function_table;
mod functions;
mod gate;
mod grant_watch;
mod health;
mod hook;
mod inbox;
mod lifecycle;
mod lineage;
mod link_token;
mod links;
mod logs;
mod manifest;
pub mod metrics;
mod pending;
mod policy;
mod provenance;
mod reconnect;
mod redact;
mod release;
mod review;
mod schema;
mod settings;
mod shell;
mod shutdown;
mod sync;
mod terms;
mod time;
mod wire;
mod worker;

// Running the worker.
pub use boot::{
    boot, standing_by, unbind, BootError, BootOptions, Running, DEFAULT_STANDBY_RETRY, DESCRIPTION,
    NAME_CONFIRM_WINDOW, RECONCILE_AGE, WORKER_NAME,
};
pub use config::{
    check_config_id, config_id_from_env, load_seed, ApprovalConfig, BadConfigName, BootstrapError,
    ConfigError, SeedError, CONFIG_ID, CONFIG_NAME_VAR,
};
pub use function_table::FUNCTION_IDS;
pub use logs::{allowed as log_allowed, filter as log_filter, RedactingStderr};
pub use manifest::manifest_json;
pub use shutdown::signal;

// The pure core.
pub use config::{default_settings, schema as config_schema, Snapshot};
pub use decision::evaluate::{explain, EvaluateResponse, WireVerdict};
pub use decision::whatif::{
    render_table, simulate_offline, verdict_of, SimCall, SimResult, SimulateResponse, Verdicts,
    WhatIf,
};
pub use engine::SessionContext;
pub use error::is_valid_id;
pub use folders::contains;
pub use gate::{judge, judge_passing_over, secret_in_ids, AskHold, Judgement, Spend};
pub use grant_watch::hint::{find_hint, recognise, JAIL_CODES};
pub use grant_watch::{folder_request, StandDown};
pub use hook::record::build_record;
pub use hook::{parse_hook_input, HookCall, HookInput, HookOutput, MalformedInput};
pub use pending::cursor::{decode as decode_cursor, encode as encode_cursor, CursorError};
pub use pending::identity::digest as arguments_digest;
pub use pending::index::{ListPage, ListQuery, PendingIndex};
pub use pending::{
    all_scopes, bucket_scope, state_key, GrantRequest, HoldLimits, PendingRecord, RecordKind,
    SortKey, LOAD_CONCURRENCY, PENDING_CREATED, PENDING_ESCALATED, PENDING_RESOLVED,
};
pub use policy::{
    builtin_guard, decide, decide_with, default_rules, is_guarded_scope, is_human_only, Basis,
    Call, CompiledRules, CompiledSettings, DecideOptions, Decision, DenialEnvelope, Family,
    GrantRef, Guard, Outcome, Probe, RuleAction, RuleError, RuleExamples, RuleObject,
    RulePrecedence, RuleSpec, Step, TraceStep, Verdict, HARNESS_ASK, HUMAN_ONLY_RULE,
    IMPLICIT_ASK_RULE, LOCKDOWN_RULE, MIN_DEADLINE_MS,
};
pub use policy::{
    needs, suggested_prefix, CommandHit, CompileError, Needs, ReadingKind, Readings, Runs,
    DEFAULT_SUGGEST_PREFIXES, OPAQUE_COMMAND_RULE,
};
pub use policy::{widening_root, Widening, WIDENING_ROOT_RULE};
pub use policy::{HitKind, ProtectedHit, ProtectedNote, ProtectedPaths, PROTECTED_PATH_RULE};
pub use redact::{
    holds_secret, is_secret_key, redact, redact_call, redact_call_full, redact_full, redact_text,
    Full, FULL_ARGUMENTS_CAP, MAX_CLIPPED_CHARS, MAX_DEPTH, MAX_ENTRIES, MAX_OUTPUT_BYTES,
    MAX_STRING_CHARS, REDACTED, SECRET_NAMES,
};
// The command model (§25): what a command field runs, as facts.
pub use settings::{ApprovalSettings, Bounds, Entry, GrantList, GrantedBy};
pub use shell::{
    base_name, hands_on_markdown, parses, read, wrappers_markdown, Assignment, Command, Form,
    HandOn, HandOnCheck, Limits, Model, Opaque, OpaqueWhy, OwnedSource, Reader, Redirect, Source,
    Via, Word, WordKind, Wrapper, COMMAND_ENV, HANDS_ON, LOADER_ENV, WRAPPERS,
};
pub use terms::leads;
pub use terms::{constraint_docs, ArgConstraint, ConstraintOp, Mode};

/// Every state scope the worker reads or writes. Each falls under the
/// prefix the gate guards: no agent call can reach the gate's own state.
pub fn owned_scopes() -> Vec<String> {
    engine::Scope::owned()
        .iter()
        .map(ToString::to_string)
        .collect()
}
