//! The policy: the configuration's rules compiled once, and the pure decision
//! ladder the gate, `approval::evaluate` and the benches all run.
//!
//! The modules depend on each other in one direction only:
//! `glob`, `command` ← `args`, `guard` ← `rules` ← `grants` ← `decide` ←
//! `reasons`; `trace` (the explained decision's steps), `envelope` and
//! `widening` (a root asked for outside the turn's roots) stand alone. The wire words they share with the settings (`Mode`,
//! `ArgConstraint`) live in the leaf `crate::terms`.
//!
//! Three stages, kept apart: the wire types ([`RuleSpec`]) are parsed by
//! serde; [`CompiledRules::compile`] validates and compiles them once per
//! configuration change (every error, with its index); [`decide`] evaluates
//! one call against a [`CompiledSettings`] snapshot — no I/O, no locks, no
//! allocation once warm. [`Decision::reason`] and [`DenialEnvelope`] turn a
//! decision into what the model and the console see.
//!
//! The differential oracle of all this lives outside the product, in the
//! workspace crate `approval-gate-reference` (`reference/`), shared by the
//! property tests (`tests/it/properties.rs`) and the fuzz targets.

mod args;
mod command;
mod commands;
mod compile_error;
mod decide;
mod envelope;
mod glob;
mod grants;
mod guard;
mod protected;
mod reasons;
mod rules;
mod subscription;
mod trace;
mod widening;

pub(crate) use args::check_args;
pub use commands::{
    suggested_prefix, CommandHit, Needs, ReadingKind, Readings, Runs, DEFAULT_SUGGEST_PREFIXES,
};
pub use compile_error::CompileError;
pub use decide::{
    decide, decide_with, needs, Basis, Call, DecideOptions, Decision, Verdict, HARNESS_ASK,
    HUMAN_ONLY_RULE, IMPLICIT_ASK_RULE, LOCKDOWN_RULE,
};
pub use envelope::DenialEnvelope;
pub use grants::{CompiledSettings, GrantRef};
pub use guard::{builtin_guard, is_guarded_scope, is_human_only, Family, Guard};
pub use protected::{HitKind, ProtectedHit, ProtectedNote, ProtectedPaths, PROTECTED_PATH_RULE};
pub use reasons::OPAQUE_COMMAND_RULE;
pub use rules::{
    default_rules, CompiledRules, Probe, RuleAction, RuleError, RuleExamples, RuleObject,
    RulePrecedence, RuleSpec, MIN_DEADLINE_MS,
};
pub(crate) use subscription::is_control as is_subscription_control;
pub use trace::{Outcome, Step, TraceStep};
pub(crate) use widening::{harness_stamps, STAMP};
pub use widening::{widening_root, Widening, WIDENING_ROOT_RULE};
