//! The explained decision: every step of the ladder `decide` considered, in
//! order, as `approval::evaluate` reports it (`architecture/contract.md`
//! § Evaluate). The gate runs the same ladder without a trace; recording
//! costs nothing when no trace is asked for.
//!
//! # Format
//!
//! ```json
//! [ { "step": "human_only", "outcome": "pass" },
//!   { "step": "ask", "outcome": "pass", "detail": "no ask rule matches" },
//!   { "step": "mode", "outcome": "pass", "detail": "mode auto" },
//!   { "step": "approved_always", "outcome": "pass", "detail": "no entry matches" },
//!   { "step": "always_allow", "outcome": "pass",
//!     "detail": "seed entry shell::* passed over: a seed never beats a deny rule" },
//!   { "step": "rule", "outcome": "deny", "detail": "rule 0 !shell::rm matched" } ]
//! ```

use schemars::JsonSchema;
use serde::Serialize;

/// A step of the ladder.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Step {
    /// The gate's own levers (§ The gate guards its own levers).
    HumanOnly,
    /// No configuration has ever compiled: every other call holds.
    Lockdown,
    /// `deny_ask_allow` only: one deny rule whose function glob matched.
    DenyRule,
    /// `harness::spawn` / `harness::send` only: whether a root it asks for
    /// lies outside the calling turn's roots (a human decides).
    WideningRoot,
    /// One ask rule whose function glob matched (or none).
    Ask,
    /// The session's mode (`full` allows).
    Mode,
    /// The session's `approved_always` entries.
    ApprovedAlways,
    /// The session's `always_allow` entries (honoured in `auto` mode).
    AlwaysAllow,
    /// One allow or deny rule whose function glob matched, in rule order
    /// (or none).
    Rule,
    /// Nothing decided: the call is held.
    Default,
}

/// What a step did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// Considered; did not decide.
    Pass,
    /// Decided: the call runs.
    Allow,
    /// Decided: the call is denied.
    Deny,
    /// Decided: the call waits for a human.
    Hold,
}

/// One step of the trace.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
pub struct TraceStep {
    /// Which step.
    pub step: Step,
    /// What it did.
    pub outcome: Outcome,
    /// Why, for an operator: the guard that matched, the rule and its
    /// constraint, the entry, or why one was passed over.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
}
