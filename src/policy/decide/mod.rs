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
//! 7. nothing matched → `harness::ask` (the model asks the user a
//!    question) is allowed by an implicit rule placed after the configured
//!    ones, so any configured rule can hold or deny it;
//! 8. nothing matched → hold.
//!
//! `deny_ask_allow`: 1; then every matching deny rule → deny (it beats
//! `full` mode and grants); then 2–5; then the first matching allow rule →
//! allow; then 7, 8.
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
//! every mode, whatever the grants say (`harness::ask` included).

use serde_json::{Map, Value};

use std::cell::{Cell, OnceCell};

use super::args::{
    failing_wide, strict_failing, wide_hold, CompiledConstraint, MatchedConstraint, Reading, Wide,
};
use super::commands::{self, CommandHit, Needs, Readings};
use super::grants::{CompiledSettings, GrantArgs, GrantRef};
use super::guard::{builtin_guard, Family, Guard};
use super::protected::HitKind;
use super::rules::{CompiledRule, CompiledRules, RuleAction, RulePrecedence};
use super::subscription;
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

/// The function today's harness offers the model to ask the user a
/// question (a card of questions; the answer arrives as the next message).
/// Asking the user is what a hold would do anyway, so when no configured
/// rule decides it, it runs ([`IMPLICIT_ASK_RULE`]).
pub const HARNESS_ASK: &str = "harness::ask";

/// The rule id reported when the implicit rule allows [`HARNESS_ASK`].
pub const IMPLICIT_ASK_RULE: &str = "implicit_harness_ask";

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
    /// The call names a protected path (the gate's or an engine worker's
    /// configuration file): a human decides, in every mode, whatever the
    /// grants say.
    ProtectedPath {
        /// How the path was found.
        how: HitKind,
    },
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
        /// The command (or the doubt) that made a command constraint hold.
        command: Option<CommandHit>,
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
        /// Deny rules: the command (or the doubt) that made a command
        /// constraint hold.
        command: Option<CommandHit>,
    },
    /// No rule matched, and the call is [`HARNESS_ASK`]: the implicit rule
    /// after the configured ones allows it.
    ImplicitAsk,
    /// An agent's subscription control on a harness that mediates it
    /// ([`super::subscription`]): allowed when every function it would call
    /// is allowed for the session, else denied naming the first that is not.
    Subscription {
        /// The first function the subscription would call (none for a wake
        /// or an unsubscribe), or the one that is not allowed.
        target: Option<&'r str>,
        /// What the ladder made of `target` (`Allow` when allowed).
        target_verdict: Verdict,
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
    /// The models of the call's command fields, read off the hook's thread
    /// before the ladder runs ([`needs`]); `None`: read here when a command
    /// constraint needs them (tests, benches, the offline what-if).
    pub readings: Option<&'t Readings>,
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
    /// The harness mediates an agent's `engine::register_trigger` /
    /// `engine::unregister_trigger` as a session-owned subscription (today's
    /// harness): they are judged by what they would call
    /// ([`super::subscription`]) instead of refused by the `bindings` guard.
    pub subscriptions: bool,
}

/// Runs the ladder for one call, as the gate does (reading its command
/// fields here when a command constraint needs them).
pub fn decide<'r>(
    settings: &'r CompiledSettings,
    rules: &'r CompiledRules,
    call: &Call<'r>,
) -> Decision<'r> {
    decide_with(settings, rules, call, DecideOptions::default())
}

/// What the call's command constraints will look at: the values to read
/// before the ladder runs. Empty — and nothing allocated — unless a rule or
/// grant with a command constraint applies to the call's function
/// (`architecture/contract.md` § Commands: other calls never parse).
pub fn needs(settings: &CompiledSettings, rules: &CompiledRules, call: &Call<'_>) -> Needs {
    let mut needs = Needs::default();
    let fid = call.function_id;
    let Some(Value::Object(obj)) = call.arguments else {
        return needs;
    };
    if fid.starts_with("shell::") && rules.protected.judges(fid) {
        needs.add(obj.get("command"), obj, true);
    }
    let mut add = |constraints: Option<&[CompiledConstraint]>| {
        for c in constraints.into_iter().flatten() {
            c.add_needs(fid, obj, &mut needs);
        }
    };
    if rules.commands {
        for table in [&rules.table, &rules.asks] {
            table.each_match(fid, |slot| {
                add(rules
                    .rules
                    .get(slot as usize)
                    .and_then(|r| r.args.as_deref()));
            });
        }
    }
    for list in [GrantList::ApprovedAlways, GrantList::AlwaysAllow] {
        let entries = settings.list(list);
        if !entries.commands {
            continue;
        }
        entries.table.each_match(fid, |slot| {
            if let Some(GrantArgs::All(constraints)) =
                entries.bounds.get(slot as usize).map(|b| &b.args)
            {
                add(Some(constraints));
            }
        });
    }
    needs
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
    let inline;
    let readings = match options.readings {
        Some(readings) => readings,
        None => {
            inline = needs(settings, rules, call).read_inline();
            &inline
        }
    };
    match options.trace {
        None => observed(settings, rules, call, readings, &options, Silent).0,
        Some(out) => {
            let (decision, recorder) = observed(
                settings,
                rules,
                call,
                readings,
                &DecideOptions {
                    trace: None,
                    ..options
                },
                Recorder::default(),
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
    readings: &Readings,
    options: &DecideOptions<'_>,
    observer: O,
) -> (Decision<'r>, O) {
    let mode = options.mode.unwrap_or(settings.mode);
    Ladder {
        judge: Judge {
            settings,
            rules,
            call: *call,
            mode,
            now: Cell::new(options.now_ms),
            passed_over: options.passed_over,
            readings,
            partners: OnceCell::new(),
        },
        turn: options.turn,
        subscriptions: options.subscriptions,
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
    first: Option<(u32, Option<CommandHit>)>,
    /// `deny_ask_allow`: the first allow rule that applies (complete only
    /// when no deny rule applies).
    allow: Option<(u32, Option<CommandHit>)>,
}

/// Where an allow source stands in the ladder: its step, then its slot.
/// An allow rule or grant covers commands together with the grants of its
/// own and earlier steps in force and, for an allow rule, the allow rules
/// before it (`first_match`: so an allow never reaches past a deny rule
/// placed between them) or all of them (`deny_ask_allow`, where every deny
/// rule was consulted first). A source applies only when it covers at
/// least one of the commands itself.
type Position = (u8, u32);

const APPROVED_ALWAYS: u8 = 0;
const ALWAYS_ALLOW: u8 = 1;
const RULES: u8 = 2;

fn step_of(list: GrantList) -> u8 {
    match list {
        GrantList::ApprovedAlways => APPROVED_ALWAYS,
        GrantList::AlwaysAllow => ALWAYS_ALLOW,
    }
}

/// An allow rule or grant that applies to the call and whose command
/// constraints all name one field: it covers commands of that field for
/// the sources at or after it.
struct Partner<'r> {
    at: Position,
    field: &'r str,
    words: &'r [Box<str>],
}

/// What a rule made of the call.
enum RuleCheck {
    /// It applies (a deny or ask rule: with the command that made it).
    Applies(Option<CommandHit>),
    /// It does not.
    Misses,
}

/// Judges rules and entries for one call; shared by the ladder's scans
/// (which also lend the observer), so it holds no `&mut`.
struct Judge<'r, 't> {
    settings: &'r CompiledSettings,
    rules: &'r CompiledRules,
    call: Call<'r>,
    mode: Mode,
    /// Read once per decision, and only when an expiring entry matches.
    now: Cell<Option<u64>>,
    passed_over: &'t [GrantRef],
    readings: &'t Readings,
    /// The allow sources that cover commands, found on first need.
    partners: OnceCell<Vec<Partner<'r>>>,
}

impl<'r> Judge<'r, '_> {
    fn args(&self) -> Option<&'r Value> {
        self.call.arguments
    }

    /// Whether `rule` (its glob matched) applies in the session's mode.
    fn rule(&self, slot: u32, rule: &'r CompiledRule) -> RuleCheck {
        if !rule.modes.contains(self.mode) {
            return RuleCheck::Misses;
        }
        let fid = self.call.function_id;
        match rule.reading() {
            Reading::Wide => match wide_hold(rule.args.as_deref(), fid, self.args(), self.readings)
            {
                Wide::Yes(hit) => RuleCheck::Applies(hit),
                Wide::No => RuleCheck::Misses,
            },
            Reading::Strict => {
                if self.strict(rule.args.as_deref(), (RULES, slot)).is_ok() {
                    RuleCheck::Applies(None)
                } else {
                    RuleCheck::Misses
                }
            }
        }
    }

    /// Why `rule` does not apply (for traces).
    fn miss(&self, slot: u32, rule: &'r CompiledRule) -> Miss<'r> {
        if !rule.modes.contains(self.mode) {
            return Miss::Mode(self.mode);
        }
        let fid = self.call.function_id;
        let args = self.args();
        match rule.reading() {
            Reading::Wide => match failing_wide(rule.args.as_deref(), fid, args, self.readings) {
                Some(c) => Miss::Constraint(c),
                None => Miss::NotAnObject,
            },
            Reading::Strict => match self.strict(rule.args.as_deref(), (RULES, slot)) {
                Err(StrictFail::Constraint(c)) => Miss::Constraint(c),
                Err(StrictFail::NotAnObject) | Ok(()) => Miss::NotAnObject,
                Err(StrictFail::Command(c, why)) => Miss::Command(c, why),
            },
        }
    }

    /// An allow rule's or grant's `args`, read strictly: every other
    /// constraint holds, and every command constraint's field runs only
    /// commands covered by this source or one at or before it.
    fn strict(
        &self,
        constraints: Option<&'r [CompiledConstraint]>,
        at: Position,
    ) -> Result<(), StrictFail<'r>> {
        let Some(constraints) = constraints else {
            return Ok(());
        };
        let fid = self.call.function_id;
        let Some(Value::Object(obj)) = self.args() else {
            return Err(StrictFail::NotAnObject);
        };
        if let Some(c) = strict_failing(Some(constraints), fid, self.args()) {
            return Err(StrictFail::Constraint(c));
        }
        for c in constraints {
            let Some(words) = c.command_words(fid) else {
                continue;
            };
            let mut own = false;
            let checked =
                commands::strict_check(self.readings, c.strict_plan(fid, obj), obj, |command| {
                    if commands::starts_exact(command, words) {
                        own = true;
                        return true;
                    }
                    self.partners().iter().any(|p| {
                        self.reaches(p.at, at)
                            && p.field == c.field()
                            && commands::starts_exact(command, p.words)
                    })
                });
            if let Err(why) = checked {
                return Err(StrictFail::Command(c, commands::describe_miss(&why)));
            }
            if !own {
                return Err(StrictFail::Command(
                    c,
                    "it covers none of the commands itself".into(),
                ));
            }
        }
        Ok(())
    }

    /// Whether a partner at `partner` covers for a source at `source`.
    fn reaches(&self, partner: Position, source: Position) -> bool {
        match partner.0.cmp(&source.0) {
            std::cmp::Ordering::Less => true,
            std::cmp::Ordering::Greater => false,
            std::cmp::Ordering::Equal => {
                source.0 != RULES
                    || self.rules.precedence == RulePrecedence::DenyAskAllow
                    || partner.1 <= source.1
            }
        }
    }

    /// The allow sources that cover commands: the unbounded entries of the
    /// lists in force and the allow rules, each applying to the call (its
    /// other constraints held, in the session's mode) with every command
    /// constraint on one field. A uses-bounded grant covers only for
    /// itself: a use is spent for it alone.
    fn partners(&self) -> &Vec<Partner<'r>> {
        self.partners.get_or_init(|| {
            let mut out = Vec::new();
            let fid = self.call.function_id;
            let args = self.args();
            let mut add = |at: Position, constraints: &'r [CompiledConstraint]| {
                let mut fields = constraints
                    .iter()
                    .filter_map(|c| Some((c.field(), c.command_words(fid)?)));
                let Some((field, _)) = fields.clone().next() else {
                    return;
                };
                if fields.clone().any(|(f, _)| f != field) {
                    return;
                }
                if strict_failing(Some(constraints), fid, args).is_some() {
                    return;
                }
                out.extend(
                    fields
                        .by_ref()
                        .map(|(field, words)| Partner { at, field, words }),
                );
            };
            let mut lists = vec![GrantList::ApprovedAlways];
            if self.mode == Mode::Auto {
                lists.push(GrantList::AlwaysAllow);
            }
            for list in lists {
                let entries = self.settings.list(list);
                if !entries.commands {
                    continue;
                }
                entries.table.each_match(fid, |slot| {
                    let Some(bounds) = entries.bounds.get(slot as usize) else {
                        return;
                    };
                    let GrantArgs::All(constraints) = &bounds.args else {
                        return;
                    };
                    let bounded = entries
                        .entries
                        .get(slot as usize)
                        .is_none_or(|e| e.uses_left.is_some());
                    if bounded || self.entry_bounds(list, slot).is_err() {
                        return;
                    }
                    add((step_of(list), slot), constraints);
                });
            }
            let rules = self.rules;
            if rules.commands {
                rules.table.each_match(fid, |slot| {
                    let Some(rule) = rules.rules.get(slot as usize) else {
                        return;
                    };
                    if rule.action != RuleAction::Allow || !rule.modes.contains(self.mode) {
                        return;
                    }
                    if let Some(constraints) = rule.args.as_deref() {
                        add((RULES, slot), constraints);
                    }
                });
            }
            out
        })
    }

    /// Whether an entry's bounds (uses, expiry, a use that could not be
    /// written) let it apply.
    fn entry_bounds(&self, list: GrantList, slot: u32) -> Result<(), PassedOver> {
        let Some(bounds) = self.settings.list(list).bounds.get(slot as usize) else {
            return Err(PassedOver::Args);
        };
        if bounds.used_up {
            return Err(PassedOver::UsedUp);
        }
        if let Some(at) = bounds.expires_at {
            let now = match self.now.get() {
                Some(now) => now,
                None => {
                    let now = crate::time::now_ms();
                    self.now.set(Some(now));
                    now
                }
            };
            if now >= at {
                return Err(PassedOver::Expired);
            }
        }
        if self.passed_over.contains(&GrantRef { list, slot }) {
            return Err(PassedOver::Unwritten);
        }
        Ok(())
    }

    /// Whether a matching entry of `list` applies to the call, or why not.
    fn entry(&self, list: GrantList, slot: u32) -> Result<(), PassedOver> {
        self.entry_bounds(list, slot)?;
        let Some(bounds) = self.settings.list(list).bounds.get(slot as usize) else {
            return Err(PassedOver::Args);
        };
        match &bounds.args {
            GrantArgs::Any => Ok(()),
            GrantArgs::All(constraints) => self
                .strict(Some(constraints), (step_of(list), slot))
                .map_err(|_| PassedOver::Args),
            GrantArgs::Invalid => Err(PassedOver::Args),
        }
    }
}

/// Why an allow rule's or a grant's `args` do not hold.
enum StrictFail<'r> {
    Constraint(&'r CompiledConstraint),
    NotAnObject,
    /// A command constraint: what its field runs that nothing covers.
    Command(&'r CompiledConstraint, String),
}

/// One decision in progress, reporting to `O` as it goes.
struct Ladder<'r, 't, O> {
    judge: Judge<'r, 't>,
    turn: Option<&'t Map<String, Value>>,
    /// [`DecideOptions::subscriptions`].
    subscriptions: bool,
    scan: Option<Scan>,
    observer: O,
}

impl<'r, O: Observer<'r>> Ladder<'r, '_, O> {
    fn run(mut self) -> (Decision<'r>, O) {
        let decision = self.decide();
        (decision, self.observer)
    }

    fn decide(&mut self) -> Decision<'r> {
        let call = self.judge.call;
        let rules = self.judge.rules;
        let fid = call.function_id;
        let guard = builtin_guard(fid, call.arguments).or_else(|| rules.extra_guard(fid));
        if let Some(guard) = guard {
            if self.subscriptions && guard.family == Family::Bindings {
                return self.subscription();
            }
            self.observer.see(Event::Guard(Some(guard)));
            return Decision {
                verdict: Verdict::Deny,
                basis: Basis::HumanOnly { guard },
            };
        }
        self.observer.see(Event::Guard(None));
        self.after_guard()
    }

    /// An agent's subscription control, on a harness that mediates it: a
    /// guarded trigger type (or a malformed request), or an operator's guard
    /// on the control, stays human-only; then the ladder judges the control
    /// itself, whose deny or (non-default) hold stands; then every function
    /// the subscription would call must be allowed for the session.
    fn subscription(&mut self) -> Decision<'r> {
        let call = self.judge.call;
        let rules = self.judge.rules;
        let human_only = |guard| Decision {
            verdict: Verdict::Deny,
            basis: Basis::HumanOnly { guard },
        };
        let control = match subscription::read(call.function_id, call.arguments) {
            Ok(control) => control,
            Err(guard) => {
                self.observer.see(Event::Guard(Some(guard)));
                return human_only(guard);
            }
        };
        if let Some(guard) = rules.extra_guard(call.function_id) {
            self.observer.see(Event::Guard(Some(guard)));
            return human_only(guard);
        }
        self.observer.see(Event::Guard(None));
        let own = self.after_guard();
        if own.verdict == Verdict::Deny || (own.verdict == Verdict::Hold && !own.is_default_hold())
        {
            return own;
        }
        let targets = match control {
            subscription::Control::Subscribe { targets } => targets,
            subscription::Control::Unsubscribe => Vec::new(),
        };
        for target in &targets {
            let verdict = self.target_verdict(target);
            if verdict != Verdict::Allow {
                self.observer.see(Event::Subscription {
                    target: Some(target.function_id),
                    verdict,
                });
                return Decision {
                    verdict: Verdict::Deny,
                    basis: Basis::Subscription {
                        target: Some(target.function_id),
                        target_verdict: verdict,
                    },
                };
            }
        }
        let first = targets.first().map(|t| t.function_id);
        self.observer.see(Event::Subscription {
            target: first,
            verdict: Verdict::Allow,
        });
        Decision {
            verdict: Verdict::Allow,
            basis: Basis::Subscription {
                target: first,
                target_verdict: Verdict::Allow,
            },
        }
    }

    /// What the ladder makes of a function a subscription would call, for
    /// this session, in this mode. A target whose rules would read a
    /// command is not read here (on the handler's thread): it is refused
    /// as held, since it cannot be judged unattended.
    fn target_verdict(&self, target: &subscription::Target<'r>) -> Verdict {
        if !subscription::bindable(target.function_id) {
            return Verdict::Deny;
        }
        let judge = &self.judge;
        let call = Call {
            function_id: target.function_id,
            arguments: Some(&target.arguments),
        };
        if !needs(judge.settings, judge.rules, &call).is_empty() {
            return Verdict::Hold;
        }
        let empty = Readings::default();
        observed(
            judge.settings,
            judge.rules,
            &call,
            &empty,
            &DecideOptions {
                now_ms: judge.now.get(),
                turn: self.turn,
                mode: Some(judge.mode),
                ..DecideOptions::default()
            },
            Silent,
        )
        .0
        .verdict
    }

    /// The ladder after step 1.
    fn after_guard(&mut self) -> Decision<'r> {
        let rules = self.judge.rules;
        if rules.is_lockdown() {
            self.observer.see(Event::Lockdown);
            return Decision {
                verdict: Verdict::Hold,
                basis: Basis::Lockdown,
            };
        }
        if rules.precedence == RulePrecedence::DenyAskAllow {
            if let Some(decision) = self.deny_rules() {
                return decision;
            }
        }
        if let Some(decision) = self.protected_path() {
            return decision;
        }
        if let Some(decision) = self.widening_root() {
            return decision;
        }
        if let Some(decision) = self.ask_rules() {
            return decision;
        }
        let mode = self.judge.mode;
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
        self.judge.rules.rules.get(slot as usize)
    }

    /// The allow and deny rules, looked at once per call (the seeds' check
    /// and the rule step share it). `first_match`: the first that applies.
    /// `deny_ask_allow`: the first deny that applies, and the first allow.
    fn scan(&mut self) -> Scan {
        if let Some(scan) = self.scan {
            return scan;
        }
        let judge = &self.judge;
        let rules = judge.rules;
        let deny_first = rules.precedence == RulePrecedence::DenyAskAllow;
        let observer = &mut self.observer;
        let mut allow: Option<(u32, Option<CommandHit>)> = None;
        let mut first_hit = None;
        let first = rules.table.first_match(judge.call.function_id, |slot| {
            let Some(rule) = rules.rules.get(slot as usize) else {
                return false;
            };
            let hit = match judge.rule(slot, rule) {
                RuleCheck::Applies(hit) => hit,
                RuleCheck::Misses => {
                    if O::ON {
                        observer.see(Event::RuleMissed {
                            slot,
                            rule,
                            why: judge.miss(slot, rule),
                        });
                    }
                    return false;
                }
            };
            if deny_first && rule.action != RuleAction::Deny {
                if allow.is_none_or(|(a, _)| slot < a) {
                    allow = Some((slot, hit));
                }
                return false;
            }
            first_hit = hit;
            true
        });
        let first = first.map(|slot| (slot, first_hit));
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
            .and_then(|(slot, _)| self.rule(slot))
            .is_some_and(|rule| rule.action == RuleAction::Deny)
    }

    /// `deny_ask_allow`: a deny rule that applies denies, before the mode
    /// and the grants.
    fn deny_rules(&mut self) -> Option<Decision<'r>> {
        let first = self.scan().first;
        self.rule_step(Step::DenyRule, Lane::Deny, first);
        let (slot, hit) = first?;
        self.rule_decision(slot, hit)
    }

    /// A call naming a protected path holds for a human — unless a deny
    /// rule denies it (`first_match`: the first rule that applies is a
    /// deny; `deny_ask_allow` consulted every deny rule already).
    fn protected_path(&mut self) -> Option<Decision<'r>> {
        let call = self.judge.call;
        let protected = &self.judge.rules.protected;
        if !protected.judges(call.function_id) {
            return None;
        }
        let hit = protected.judge(
            call.function_id,
            call.arguments,
            self.turn,
            self.judge.readings,
        );
        let Some(hit) = hit else {
            self.observer.see(Event::Protected(None));
            return None;
        };
        if self.judge.rules.precedence == RulePrecedence::FirstMatch && self.rules_deny() {
            let first = self.scan().first;
            self.rule_step(Step::Rule, Lane::AllowOrDeny, first);
            let (slot, command) = first?;
            return self.rule_decision(slot, command);
        }
        let how = hit.how;
        if O::ON {
            self.observer.see(Event::Protected(Some(hit)));
        }
        Some(Decision {
            verdict: Verdict::Hold,
            basis: Basis::ProtectedPath { how },
        })
    }

    /// A root outside the calling turn's roots holds the call for a human.
    fn widening_root(&mut self) -> Option<Decision<'r>> {
        let call = self.judge.call;
        let widening = widening_root(call.function_id, call.arguments, self.turn);
        if widening.is_some() || super::widening::is_door(call.function_id) {
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
        let judge = &self.judge;
        let rules = judge.rules;
        if rules.asks.is_empty() {
            self.observer.see(Event::NoAskRules);
            return None;
        }
        let observer = &mut self.observer;
        let mut ask_hit = None;
        let hit = rules.asks.first_match(judge.call.function_id, |slot| {
            let Some(rule) = rules.rules.get(slot as usize) else {
                return false;
            };
            match judge.rule(slot, rule) {
                RuleCheck::Applies(hit) => {
                    ask_hit = hit;
                    true
                }
                RuleCheck::Misses => {
                    if O::ON {
                        observer.see(Event::RuleMissed {
                            slot,
                            rule,
                            why: judge.miss(slot, rule),
                        });
                    }
                    false
                }
            }
        });
        let hit = hit.map(|slot| (slot, ask_hit));
        self.rule_step(Step::Ask, Lane::Ask, hit);
        let (slot, command) = hit?;
        let index = slot as usize;
        let rule = rules.rules.get(index)?;
        Some(Decision {
            verdict: Verdict::Hold,
            basis: Basis::Ask {
                index,
                rule_id: &rule.rule_id,
                timeout_ms: rule.timeout_ms,
                escalate_after_ms: rule.escalate_after_ms,
                constraint: first_constraint(rule),
                command,
            },
        })
    }

    /// The last rule step: `first_match` → the first allow or deny rule
    /// that applies; `deny_ask_allow` → the first allow rule that applies
    /// (no deny applies, or the call was denied already). Else the implicit
    /// rule for [`HARNESS_ASK`], else hold.
    fn allow_or_deny_rules(&mut self) -> Decision<'r> {
        let hit = self.scan().allow;
        let lane = match self.judge.rules.precedence {
            RulePrecedence::DenyAskAllow => Lane::Allow,
            RulePrecedence::FirstMatch => Lane::AllowOrDeny,
        };
        self.rule_step(Step::Rule, lane, hit);
        if let Some(decision) = hit.and_then(|(slot, command)| self.rule_decision(slot, command)) {
            return decision;
        }
        if self.judge.call.function_id == HARNESS_ASK {
            self.observer.see(Event::ImplicitAsk);
            return Decision {
                verdict: Verdict::Allow,
                basis: Basis::ImplicitAsk,
            };
        }
        self.observer.see(Event::Default);
        Decision {
            verdict: Verdict::Hold,
            basis: Basis::NoMatch,
        }
    }

    /// Reports the end of a rule step.
    fn rule_step(&mut self, step: Step, lane: Lane, hit: Option<(u32, Option<CommandHit>)>) {
        if O::ON {
            let readings = self.judge.readings;
            let hit = hit.and_then(|(slot, command)| {
                let text = command.map(|hit| commands::describe_hit(readings, hit));
                Some((slot, self.rule(slot)?, text))
            });
            self.observer.see(Event::RuleStep { step, lane, hit });
        }
    }

    fn rule_decision(&self, slot: u32, command: Option<CommandHit>) -> Option<Decision<'r>> {
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
                command,
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
        let rules = self.judge.rules;
        if rules.seed_table.is_empty() {
            return None;
        }
        let settings = self.judge.settings;
        let denied = self.rules_deny();
        let observer = &mut self.observer;
        let hit = rules
            .seed_table
            .first_match(self.judge.call.function_id, |slot| {
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
        let slot = hit?;
        let seed = rules.seeds.get(slot as usize)?;
        self.observer.see(Event::EntryHit {
            slot,
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
        let judge = &self.judge;
        let entries = judge.settings.list(list);
        let observer = &mut self.observer;
        let hit = entries.table.first_match(judge.call.function_id, |slot| {
            match judge.entry(list, slot) {
                Ok(()) => true,
                Err(why) => {
                    if let Some(entry) = entries.entries.get(slot as usize) {
                        observer.see(Event::EntryMissed { slot, entry, why });
                    }
                    false
                }
            }
        });
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

/// A rule's first argument constraint (what decisions report).
fn first_constraint(rule: &CompiledRule) -> Option<MatchedConstraint<'_>> {
    rule.args
        .as_deref()
        .and_then(<[_]>::first)
        .map(|c| c.matched())
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod command_tests;

#[cfg(test)]
mod subscription_tests;
