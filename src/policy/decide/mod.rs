//! The decision ladder: one call, one settings snapshot, one rule set in; a
//! verdict and the reason for it out (`architecture/contract.md`
//! § Permission model). Pure and allocation-free once a thread is warm (the
//! glob matcher reuses a thread-local buffer) unless a trace is asked for.
//!
//! `first_match` (the default precedence; the first step that applies wins):
//!
//! 1. the call pulls one of the gate's own levers ([`super::guard`]) → deny,
//!    rule `human_only_function`, in every mode;
//! 2. an ask rule applies → hold (a human floor: before `full` mode and the
//!    grants, whatever its position in `rules`);
//! 3. mode `full` → allow;
//! 4. an `approved_always` entry applies → allow (every mode);
//! 5. mode `auto` and an `always_allow` entry applies → allow;
//! 6. the first allow or deny rule whose glob, `modes` and `args` all match
//!    → its action;
//! 7. nothing matched → hold.
//!
//! `deny_ask_allow`: 1; then every matching deny rule → deny (it beats
//! `full` mode and grants); then 2–5; then the first matching allow rule →
//! allow; then 7.
//!
//! Before step 2 (in both precedences): a `harness::spawn` / `harness::send`
//! that asks for a root outside the calling turn's own roots → hold, rule
//! `widening_root`, in every mode ([`super::widening`]).
//!
//! An entry applies when its pattern matches (its exact id when
//! `pattern: false`) and it has not expired, has uses left and its `args`
//! hold (read strictly, as allow rules read them). In step 5 the seeds of
//! the rules in force come first — those the session did not suppress, and
//! only when the rules alone would not deny the call: a seed never beats a
//! deny rule — then the session's own entries.
//!
//! The **lockdown** rule set (no configuration has ever compiled) stops the
//! ladder right after step 1: every other call holds, rule `lockdown`, in
//! every mode, whatever the grants say.

use serde_json::{Map, Value};

use super::args::{args_hold, MatchedConstraint, Reading};
use super::grants::{CompiledSettings, GrantArgs, GrantRef};
use super::guard::{builtin_guard, Guard};
use super::rules::{CompiledRule, CompiledRules, RuleAction, RulePrecedence};
use super::trace::{Recorder, Step, TraceStep};
use super::widening::{widening_root, Widening};
use crate::terms::Mode;
use crate::terms::{Entry, GrantList};

mod observe;

pub(crate) use observe::{Event, Lane, Miss, Observer, PassedOver, Silent};

/// The rule id reported for calls to the human-only surface.
pub const HUMAN_ONLY_RULE: &str = "human_only_function";

/// The rule id reported for the holds of the lockdown.
pub const LOCKDOWN_RULE: &str = "lockdown";

/// One call to decide on.
#[derive(Debug, Clone, Copy)]
pub struct Call<'a> {
    /// The target function id.
    pub function_id: &'a str,
    /// The call's arguments, when it has any.
    pub arguments: Option<&'a Value>,
}

/// What happens to the call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Verdict {
    /// The call runs.
    Allow,
    /// The call is denied with a reason.
    Deny,
    /// The call waits for a human.
    Hold,
}

impl Verdict {
    /// `"allow"`, `"deny"` or `"hold"`.
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Allow => "allow",
            Verdict::Deny => "deny",
            Verdict::Hold => "hold",
        }
    }
}

/// Why a verdict was reached. Borrows from the compiled settings and rules.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Basis<'r> {
    /// The call pulls one of the gate's own levers.
    HumanOnly {
        /// Which guard matched.
        guard: Guard<'r>,
    },
    /// No configuration has ever compiled: a human decides every call.
    Lockdown,
    /// The call asks for a root outside the calling turn's roots: a human
    /// decides, in every mode.
    WideningRoot {
        /// What it asked for.
        widening: Widening<'r>,
    },
    /// This ask rule applied: a human decides.
    Ask {
        /// Its index in the `rules` array.
        index: usize,
        /// Its rule id.
        rule_id: &'r str,
        /// The hold's own deadline (ms), when the rule sets one.
        timeout_ms: Option<u64>,
        /// The hold's own escalation delay (ms), when the rule sets one.
        escalate_after_ms: Option<u64>,
        /// Its first argument constraint, when it has `args`.
        constraint: Option<MatchedConstraint<'r>>,
    },
    /// The session mode is `full`.
    ModeFull,
    /// This `approved_always` entry applied.
    ApprovedAlways {
        /// The entry.
        entry: &'r Entry,
        /// Its index in the list.
        slot: u32,
    },
    /// Mode `auto` and this `always_allow` entry applied.
    AlwaysAllow {
        /// The entry.
        entry: &'r Entry,
        /// Its index in the list.
        slot: u32,
    },
    /// Mode `auto` and this seed of the rules in force applied.
    Seed {
        /// The seed entry (`granted_by: "seed"`).
        entry: &'r Entry,
        /// The index of the allow rule it comes from.
        rule: usize,
    },
    /// This allow or deny rule decided.
    Rule {
        /// Its index in the `rules` array.
        index: usize,
        /// Its rule id.
        rule_id: &'r str,
        /// Its action (the verdict).
        action: RuleAction,
        /// Its first argument constraint, when it has `args`.
        constraint: Option<MatchedConstraint<'r>>,
    },
    /// No rule matched.
    NoMatch,
}

/// A verdict and its basis.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Decision<'r> {
    /// What happens to the call.
    pub verdict: Verdict,
    /// Why.
    pub basis: Basis<'r>,
}

impl<'r> Decision<'r> {
    /// Whether this is the ladder's default hold: no rule, grant or mode
    /// decided (in either precedence) — not an ask rule, not the lockdown,
    /// not a guard. The only hold the reviewer may be asked about
    /// (`architecture/contract.md` § The reviewer).
    pub fn is_default_hold(&self) -> bool {
        self.verdict == Verdict::Hold && matches!(self.basis, Basis::NoMatch)
    }

    /// The grant that allowed the call, when it is bounded by uses: the gate
    /// spends one use of it (a state write) before the call continues.
    pub fn use_to_spend(&self) -> Option<(GrantRef, &'r Entry)> {
        let (list, entry, slot) = match self.basis {
            Basis::ApprovedAlways { entry, slot } => (GrantList::ApprovedAlways, entry, slot),
            Basis::AlwaysAllow { entry, slot } => (GrantList::AlwaysAllow, entry, slot),
            _ => return None,
        };
        entry.uses_left.map(|_| (GrantRef { list, slot }, entry))
    }
}

/// What one decision may take beyond its inputs. The default is the gate's:
/// the clock read only when an expiring grant matches, no grant passed over,
/// no trace.
#[derive(Debug, Default)]
pub struct DecideOptions<'t> {
    /// The time to judge expiring grants at (ms since the epoch).
    pub now_ms: Option<u64>,
    /// Grants to pass over: uses-bounded grants whose use could not be
    /// written, so they must not allow this call.
    pub passed_over: &'t [GrantRef],
    /// Where to record every step considered (`approval::evaluate`).
    pub trace: Option<&'t mut Vec<TraceStep>>,
    /// The calling turn's metadata (its `fs_scope`: own root and grants),
    /// against which a widening root is judged; `None`: the turn has no
    /// root, so every root asked for widens.
    pub turn: Option<&'t Map<String, Value>>,
    /// The mode to judge in instead of the session's (`approval::simulate`
    /// with a call that names its mode); `None`: the session's.
    pub mode: Option<Mode>,
}

/// Runs the ladder for one call, as the gate does.
pub fn decide<'r>(
    settings: &'r CompiledSettings,
    rules: &'r CompiledRules,
    call: &Call<'r>,
) -> Decision<'r> {
    decide_with(settings, rules, call, DecideOptions::default())
}

/// Runs the ladder for one call with `options`: the one implementation the
/// gate, `approval::evaluate` and the benches share. With a trace asked
/// for, a [`Recorder`] listens and writes the steps; without, nothing does.
pub fn decide_with<'r>(
    settings: &'r CompiledSettings,
    rules: &'r CompiledRules,
    call: &Call<'r>,
    options: DecideOptions<'_>,
) -> Decision<'r> {
    match options.trace {
        None => observed(settings, rules, call, &options, Silent).0,
        Some(out) => {
            let recorder = Recorder::default();
            let (decision, recorder) = observed(
                settings,
                rules,
                call,
                &DecideOptions {
                    trace: None,
                    ..options
                },
                recorder,
            );
            out.extend(recorder.finish());
            decision
        }
    }
}

/// Runs the ladder with `observer` listening; gives it back with the
/// decision.
pub(crate) fn observed<'r, O: Observer<'r>>(
    settings: &'r CompiledSettings,
    rules: &'r CompiledRules,
    call: &Call<'r>,
    options: &DecideOptions<'_>,
    observer: O,
) -> (Decision<'r>, O) {
    Ladder {
        settings,
        rules,
        call: *call,
        mode: options.mode.unwrap_or(settings.mode),
        now: options.now_ms,
        passed_over: options.passed_over,
        turn: options.turn,
        scan: None,
        observer,
    }
    .run()
}

/// What one pass over the allow and deny rules found.
#[derive(Debug, Clone, Copy)]
struct Scan {
    /// `first_match`: the first rule that applies. `deny_ask_allow`: the
    /// first deny rule that applies.
    first: Option<u32>,
    /// `deny_ask_allow`: the first allow rule that applies (complete only
    /// when no deny rule applies).
    allow: Option<u32>,
}

/// One decision in progress, reporting to `O` as it goes.
struct Ladder<'r, 't, O> {
    settings: &'r CompiledSettings,
    rules: &'r CompiledRules,
    call: Call<'r>,
    mode: Mode,
    now: Option<u64>,
    passed_over: &'t [GrantRef],
    turn: Option<&'t Map<String, Value>>,
    scan: Option<Scan>,
    observer: O,
}

impl<'r, O: Observer<'r>> Ladder<'r, '_, O> {
    fn run(mut self) -> (Decision<'r>, O) {
        let decision = self.decide();
        (decision, self.observer)
    }

    fn decide(&mut self) -> Decision<'r> {
        let fid = self.call.function_id;
        let guard = builtin_guard(fid, self.call.arguments).or_else(|| self.rules.extra_guard(fid));
        self.observer.see(Event::Guard(guard));
        if let Some(guard) = guard {
            return Decision {
                verdict: Verdict::Deny,
                basis: Basis::HumanOnly { guard },
            };
        }
        if self.rules.is_lockdown() {
            self.observer.see(Event::Lockdown);
            return Decision {
                verdict: Verdict::Hold,
                basis: Basis::Lockdown,
            };
        }
        if self.rules.precedence == RulePrecedence::DenyAskAllow {
            if let Some(decision) = self.deny_rules() {
                return decision;
            }
        }
        if let Some(decision) = self.widening_root() {
            return decision;
        }
        if let Some(decision) = self.ask_rules() {
            return decision;
        }
        let mode = self.mode;
        self.observer.see(Event::Mode {
            mode,
            allows: mode == Mode::Full,
        });
        if mode == Mode::Full {
            return Decision {
                verdict: Verdict::Allow,
                basis: Basis::ModeFull,
            };
        }
        if let Some(decision) = self.grants(GrantList::ApprovedAlways) {
            return decision;
        }
        if mode == Mode::Auto {
            if let Some(decision) = self.grants(GrantList::AlwaysAllow) {
                return decision;
            }
        } else {
            self.observer.see(Event::AlwaysAllowOff { mode });
        }
        self.allow_or_deny_rules()
    }

    fn rule(&self, slot: u32) -> Option<&'r CompiledRule> {
        self.rules.rules.get(slot as usize)
    }

    /// The allow and deny rules, looked at once per call (the seeds' check
    /// and the rule step share it). `first_match`: the first that applies.
    /// `deny_ask_allow`: the first deny that applies, and the first allow.
    fn scan(&mut self) -> Scan {
        if let Some(scan) = self.scan {
            return scan;
        }
        let rules = self.rules;
        let (mode, args) = (self.mode, self.call.arguments);
        let deny_first = rules.precedence == RulePrecedence::DenyAskAllow;
        let observer = &mut self.observer;
        let mut allow: Option<u32> = None;
        let first = rules.table.first_match(self.call.function_id, |slot| {
            let Some(rule) = rules.rules.get(slot as usize) else {
                return false;
            };
            let applies = rule.applies(mode, args);
            if !applies && O::ON {
                observer.see(Event::RuleMissed {
                    slot,
                    rule,
                    why: Miss::of(rule, mode, args),
                });
            }
            if deny_first && rule.action != RuleAction::Deny {
                if applies && allow.is_none_or(|a| slot < a) {
                    allow = Some(slot);
                }
                return false;
            }
            applies
        });
        let scan = Scan {
            first,
            allow: if deny_first { allow } else { first },
        };
        self.scan = Some(scan);
        scan
    }

    /// Whether the rules alone deny the call (`first_match`: the first rule
    /// that applies is a deny).
    fn rules_deny(&mut self) -> bool {
        let first = self.scan().first;
        first
            .and_then(|slot| self.rule(slot))
            .is_some_and(|rule| rule.action == RuleAction::Deny)
    }

    /// `deny_ask_allow`: a deny rule that applies denies, before the mode
    /// and the grants.
    fn deny_rules(&mut self) -> Option<Decision<'r>> {
        let first = self.scan().first;
        self.rule_step(Step::DenyRule, Lane::Deny, first);
        self.rule_decision(first?)
    }

    /// A root outside the calling turn's roots holds the call for a human.
    fn widening_root(&mut self) -> Option<Decision<'r>> {
        let call = self.call;
        let widening = widening_root(call.function_id, call.arguments, self.turn);
        if widening.is_some() || super::widening::asks_for_roots(call.function_id) {
            self.observer.see(Event::Widening(widening));
        }
        Some(Decision {
            verdict: Verdict::Hold,
            basis: Basis::WideningRoot {
                widening: widening?,
            },
        })
    }

    /// Ask rules: the first that applies holds the call for a human.
    fn ask_rules(&mut self) -> Option<Decision<'r>> {
        let rules = self.rules;
        if rules.asks.is_empty() {
            self.observer.see(Event::NoAskRules);
            return None;
        }
        let (mode, args) = (self.mode, self.call.arguments);
        let observer = &mut self.observer;
        let hit = rules.asks.first_match(self.call.function_id, |slot| {
            let Some(rule) = rules.rules.get(slot as usize) else {
                return false;
            };
            let applies = rule.applies(mode, args);
            if !applies && O::ON {
                observer.see(Event::RuleMissed {
                    slot,
                    rule,
                    why: Miss::of(rule, mode, args),
                });
            }
            applies
        });
        self.rule_step(Step::Ask, Lane::Ask, hit);
        let index = hit? as usize;
        let rule = rules.rules.get(index)?;
        Some(Decision {
            verdict: Verdict::Hold,
            basis: Basis::Ask {
                index,
                rule_id: &rule.rule_id,
                timeout_ms: rule.timeout_ms,
                escalate_after_ms: rule.escalate_after_ms,
                constraint: first_constraint(rule),
            },
        })
    }

    /// The last rule step: `first_match` → the first allow or deny rule
    /// that applies; `deny_ask_allow` → the first allow rule that applies
    /// (no deny applies, or the call was denied already). Else hold.
    fn allow_or_deny_rules(&mut self) -> Decision<'r> {
        let hit = self.scan().allow;
        let lane = match self.rules.precedence {
            RulePrecedence::DenyAskAllow => Lane::Allow,
            RulePrecedence::FirstMatch => Lane::AllowOrDeny,
        };
        self.rule_step(Step::Rule, lane, hit);
        if let Some(decision) = hit.and_then(|slot| self.rule_decision(slot)) {
            return decision;
        }
        self.observer.see(Event::Default);
        Decision {
            verdict: Verdict::Hold,
            basis: Basis::NoMatch,
        }
    }

    /// Reports the end of a rule step.
    fn rule_step(&mut self, step: Step, lane: Lane, hit: Option<u32>) {
        if O::ON {
            let hit = hit.and_then(|slot| Some((slot, self.rule(slot)?)));
            self.observer.see(Event::RuleStep { step, lane, hit });
        }
    }

    fn rule_decision(&self, slot: u32) -> Option<Decision<'r>> {
        let rule = self.rule(slot)?;
        Some(Decision {
            verdict: match rule.action {
                RuleAction::Allow => Verdict::Allow,
                RuleAction::Deny => Verdict::Deny,
                RuleAction::Ask => Verdict::Hold,
            },
            basis: Basis::Rule {
                index: slot as usize,
                rule_id: &rule.rule_id,
                action: rule.action,
                constraint: first_constraint(rule),
            },
        })
    }

    /// An allow-list: the first entry in list order that applies allows.
    /// For `always_allow`, the seeds of the rules in force come first.
    fn grants(&mut self, list: GrantList) -> Option<Decision<'r>> {
        let decision = match list {
            GrantList::AlwaysAllow => self.seeds(),
            GrantList::ApprovedAlways => None,
        }
        .or_else(|| self.entries(list));
        self.observer.see(Event::GrantStep {
            list,
            allows: decision.is_some(),
        });
        decision
    }

    /// The seeds of the rules in force: the first that the session did not
    /// suppress allows — unless the rules alone deny the call, which no
    /// seed beats. The rules are scanned first, never inside the seed
    /// table's match (the glob matcher's scratch buffer is one per thread),
    /// so one pass over the seeds both decides and explains.
    fn seeds(&mut self) -> Option<Decision<'r>> {
        let rules = self.rules;
        if rules.seed_table.is_empty() {
            return None;
        }
        let settings = self.settings;
        let denied = self.rules_deny();
        let observer = &mut self.observer;
        let hit = rules.seed_table.first_match(self.call.function_id, |slot| {
            let Some(seed) = rules.seeds.get(slot as usize) else {
                return false;
            };
            let why = if settings.suppresses(&seed.entry.function_id) {
                PassedOver::Suppressed
            } else if denied {
                PassedOver::SeedUnderDeny
            } else {
                return true;
            };
            observer.see(Event::EntryMissed {
                slot,
                entry: &seed.entry,
                why,
            });
            false
        });
        let seed = rules.seeds.get(hit? as usize)?;
        self.observer.see(Event::EntryHit {
            slot: hit?,
            entry: &seed.entry,
        });
        Some(Decision {
            verdict: Verdict::Allow,
            basis: Basis::Seed {
                entry: &seed.entry,
                rule: seed.rule,
            },
        })
    }

    /// The session's own entries of `list`: the first that applies allows.
    fn entries(&mut self, list: GrantList) -> Option<Decision<'r>> {
        let settings = self.settings;
        let entries = settings.list(list);
        let mut now = self.now;
        let passed_over = self.passed_over;
        let args = self.call.arguments;
        let observer = &mut self.observer;
        let hit = entries.table.first_match(self.call.function_id, |slot| {
            match entry_applies(settings, list, slot, args, passed_over, &mut now) {
                Ok(()) => true,
                Err(why) => {
                    if let Some(entry) = entries.entries.get(slot as usize) {
                        observer.see(Event::EntryMissed { slot, entry, why });
                    }
                    false
                }
            }
        });
        self.now = now;
        let slot = hit?;
        let entry = entries.entries.get(slot as usize)?;
        self.observer.see(Event::EntryHit { slot, entry });
        Some(Decision {
            verdict: Verdict::Allow,
            basis: match list {
                GrantList::ApprovedAlways => Basis::ApprovedAlways { entry, slot },
                GrantList::AlwaysAllow => Basis::AlwaysAllow { entry, slot },
            },
        })
    }
}

/// Whether a matching entry of `list` applies to a call, or why not. The
/// clock is read (once per decision) only when an expiring entry matches.
fn entry_applies(
    settings: &CompiledSettings,
    list: GrantList,
    slot: u32,
    args: Option<&Value>,
    passed_over: &[GrantRef],
    now: &mut Option<u64>,
) -> Result<(), PassedOver> {
    let Some(bounds) = settings.list(list).bounds.get(slot as usize) else {
        return Err(PassedOver::Args);
    };
    if bounds.used_up {
        return Err(PassedOver::UsedUp);
    }
    if let Some(at) = bounds.expires_at {
        let now = *now.get_or_insert_with(crate::time::now_ms);
        if now >= at {
            return Err(PassedOver::Expired);
        }
    }
    let args_hold = match &bounds.args {
        GrantArgs::Any => true,
        GrantArgs::All(constraints) => args_hold(Some(constraints), args, Reading::Strict),
        GrantArgs::Invalid => false,
    };
    if !args_hold {
        return Err(PassedOver::Args);
    }
    if passed_over.contains(&GrantRef { list, slot }) {
        return Err(PassedOver::Unwritten);
    }
    Ok(())
}

/// A rule's first argument constraint (what decisions report).
fn first_constraint(rule: &CompiledRule) -> Option<MatchedConstraint<'_>> {
    rule.args
        .as_deref()
        .and_then(<[_]>::first)
        .map(|c| c.matched())
}

#[cfg(test)]
mod tests;
