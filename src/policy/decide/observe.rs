//! What the ladder reports while it decides: a decision plus diagnostics,
//! as Cedar's authorizer returns them. Events are facts — which step, which
//! rule or entry, why one did not apply — never text; the trace's
//! [`Recorder`](crate::policy::trace::Recorder) turns them into the steps an
//! operator reads. The gate decides with [`Silent`], whose `ON` is false:
//! the compiler drops every event and the work of describing one.

use crate::policy::args::CompiledConstraint;
use crate::policy::guard::Guard;
use crate::policy::protected::ProtectedHit;
use crate::policy::rules::CompiledRule;
use crate::policy::trace::Step;
use crate::policy::widening::Widening;
use crate::terms::{Entry, GrantList, Mode};

/// Receives the ladder's events.
pub(crate) trait Observer<'r> {
    /// Whether anyone listens: when false, the ladder skips the work of
    /// describing a miss.
    const ON: bool;

    /// One event.
    fn see(&mut self, event: Event<'r>);
}

/// The gate's observer: listens to nothing.
pub(crate) struct Silent;

impl<'r> Observer<'r> for Silent {
    const ON: bool = false;

    #[inline(always)]
    fn see(&mut self, _: Event<'r>) {}
}

/// Which rules a rule step looked at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Lane {
    /// `deny_ask_allow`'s first step: the deny rules.
    Deny,
    /// The ask rules.
    Ask,
    /// `deny_ask_allow`'s last step: the allow rules.
    Allow,
    /// `first_match`: the allow and deny rules in order.
    AllowOrDeny,
}

/// Why a rule whose function glob matched did not apply.
#[derive(Debug, Clone)]
pub(crate) enum Miss<'r> {
    /// Its `modes` leave out the session's mode.
    Mode(Mode),
    /// This constraint does not hold.
    Constraint(&'r CompiledConstraint),
    /// Its `args` need an arguments object (read strictly).
    NotAnObject,
    /// This command constraint of an allow rule: what its field runs that
    /// no allow rule or grant covers, or why it cannot be allowed.
    Command(&'r CompiledConstraint, String),
}

/// Why a matching entry (or seed) did not apply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PassedOver {
    Expired,
    UsedUp,
    Args,
    Unwritten,
    SeedUnderDeny,
    Suppressed,
}

/// One thing the ladder did.
#[derive(Debug, Clone)]
pub(crate) enum Event<'r> {
    /// Step 1: the guard that matched, or none.
    Guard(Option<Guard<'r>>),
    /// No configuration has compiled: every other call holds.
    Lockdown,
    /// A root asked for outside the calling turn's roots, or none (only
    /// for the functions that can ask for one).
    Widening(Option<Widening<'r>>),
    /// The configuration has no ask rules.
    NoAskRules,
    /// The protected path a judged call names, or none.
    Protected(Option<ProtectedHit>),
    /// A rule whose function glob matched did not apply.
    RuleMissed {
        slot: u32,
        rule: &'r CompiledRule,
        why: Miss<'r>,
    },
    /// A rule step ended; `hit` decided, or none did.
    RuleStep {
        step: Step,
        lane: Lane,
        /// The rule that decided, with what it found in a command field.
        hit: Option<(u32, &'r CompiledRule, Option<String>)>,
    },
    /// The session's mode; `allows` when it is `full`.
    Mode { mode: Mode, allows: bool },
    /// `always_allow` is not honoured in this mode.
    AlwaysAllowOff { mode: Mode },
    /// An entry or seed whose pattern matched did not apply.
    EntryMissed {
        slot: u32,
        entry: &'r Entry,
        why: PassedOver,
    },
    /// An entry or seed applied.
    EntryHit { slot: u32, entry: &'r Entry },
    /// A grants step ended.
    GrantStep { list: GrantList, allows: bool },
    /// No rule decided and the call is `harness::ask`: the implicit rule
    /// allows it.
    ImplicitAsk,
    /// Nothing decided: the call is held.
    Default,
    /// An agent's subscription control, judged by what it would call: the
    /// first function that is not allowed (with the ladder's verdict on it),
    /// or the first function and `Allow` when all are.
    Subscription {
        target: Option<&'r str>,
        verdict: crate::policy::Verdict,
    },
}
