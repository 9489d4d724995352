//! The policy: the configuration's rules compiled once, and the pure decision
//! ladder the gate, `approval::evaluate` and the benches all run.
//!
//! The modules depend on each other in one direction only:
//! `glob`, `args`, `guard` ← `rules` ← `decide` ← `reasons`; `envelope`
//! stands alone.
//!
//! Three stages, kept apart: the wire types ([`RuleSpec`]) are parsed by
//! serde; [`CompiledRules::compile`] validates and compiles them once per
//! configuration change (every error, with its index); [`decide`] evaluates
//! one call against a [`CompiledSettings`] snapshot — no I/O, no locks, no
//! allocation once warm. [`Decision::reason`] and [`DenialEnvelope`] turn a
//! decision into what the model and the console see.

mod args;
mod decide;
mod envelope;
mod glob;
mod guard;
mod reasons;
mod rules;

pub use args::ConstraintOp;
pub use decide::{decide, Basis, Call, CompiledSettings, Decision, Verdict, HUMAN_ONLY_RULE};
pub use envelope::DenialEnvelope;
pub use guard::{builtin_guard, is_guarded_scope, is_human_only, Family, Guard};
pub use rules::{
    default_rules, ArgConstraint, CompiledRules, RuleAction, RuleError, RuleObject, RuleSpec,
};

#[cfg(test)]
mod perf;
#[cfg(test)]
mod reference;
