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

use super::decide::{Event, Lane, Miss, Observer, PassedOver};
use super::rules::{CompiledRule, RuleAction};
use crate::terms::{Entry, GrantList, GrantedBy};

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
    /// The functions of `protected_path_functions` only: whether the call
    /// names a protected path (a human decides).
    ProtectedPath,
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
    /// `harness::ask` only: no configured rule decided, and the implicit
    /// rule after them allows the model to ask the user a question.
    ImplicitAsk,
    /// Nothing decided: the call is held.
    Default,
    /// An agent's `engine::register_trigger` / `engine::unregister_trigger`
    /// on a harness that makes it a session-owned subscription: judged by
    /// the functions it would call unattended.
    Subscription,
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

/// Listens to the ladder (`super::decide::Observer`) and writes the steps
/// an operator reads: every text of the explained decision is built here.
#[derive(Debug, Default)]
pub(crate) struct Recorder<'r> {
    steps: Vec<TraceStep>,
    /// The rules looked at that did not apply, in the order the scans met
    /// them (a rule step shows those of its lane below its hit, by slot).
    missed: Vec<(u32, &'r CompiledRule, Miss<'r>)>,
    /// The entries (or seeds) of the current grants step passed over, not
    /// yet written.
    passed: Vec<(u32, &'r Entry, PassedOver)>,
    /// The grants step's lines so far.
    lines: Vec<String>,
}

impl<'r> Observer<'r> for Recorder<'r> {
    const ON: bool = true;

    fn see(&mut self, event: Event<'r>) {
        match event {
            Event::Guard(None) => self.push(Step::HumanOnly, Outcome::Pass, None),
            Event::Guard(Some(guard)) => {
                self.push(Step::HumanOnly, Outcome::Deny, Some(guard.describe()));
            }
            Event::Lockdown => self.push(
                Step::Lockdown,
                Outcome::Hold,
                Some("no configuration has compiled yet: every call waits for a human".into()),
            ),
            Event::Widening(Some(widening)) => {
                self.push(Step::WideningRoot, Outcome::Hold, Some(widening.describe()));
            }
            Event::Widening(None) => self.push(
                Step::WideningRoot,
                Outcome::Pass,
                Some("no root outside the calling turn's roots".into()),
            ),
            Event::NoAskRules => self.push(Step::Ask, Outcome::Pass, Some("no ask rules".into())),
            Event::Protected(Some(hit)) => {
                self.push(Step::ProtectedPath, Outcome::Hold, Some(hit.describe()));
            }
            Event::Protected(None) => self.push(
                Step::ProtectedPath,
                Outcome::Pass,
                Some("no protected path named".into()),
            ),
            Event::RuleMissed { slot, rule, why } => self.missed.push((slot, rule, why)),
            Event::RuleStep { step, lane, hit } => self.rule_step(step, lane, hit),
            Event::Mode { mode, allows: true } => {
                self.push(
                    Step::Mode,
                    Outcome::Allow,
                    Some(format!("mode {}", mode.as_str())),
                );
            }
            Event::Mode {
                mode,
                allows: false,
            } => {
                self.push(
                    Step::Mode,
                    Outcome::Pass,
                    Some(format!("mode {}", mode.as_str())),
                );
            }
            Event::AlwaysAllowOff { mode } => self.push(
                Step::AlwaysAllow,
                Outcome::Pass,
                Some(format!(
                    "mode {}: always_allow is honoured in auto mode only",
                    mode.as_str()
                )),
            ),
            Event::EntryMissed { slot, entry, why } => {
                let same_kind = self
                    .passed
                    .last()
                    .is_none_or(|(_, last, _)| last.granted_by == entry.granted_by);
                if !same_kind {
                    self.flush_passed(None);
                }
                self.passed.push((slot, entry, why));
            }
            Event::EntryHit { slot, entry } => {
                self.flush_passed(Some(slot));
                self.lines
                    .push(format!("{} applies", describe_entry(entry)));
            }
            Event::GrantStep { list, allows } => {
                self.flush_passed(None);
                let step = match list {
                    GrantList::ApprovedAlways => Step::ApprovedAlways,
                    GrantList::AlwaysAllow => Step::AlwaysAllow,
                };
                let outcome = if allows {
                    Outcome::Allow
                } else {
                    Outcome::Pass
                };
                let detail = if self.lines.is_empty() {
                    "no entry matches".to_owned()
                } else {
                    std::mem::take(&mut self.lines).join("; ")
                };
                self.push(step, outcome, Some(detail));
            }
            Event::ImplicitAsk => self.push(
                Step::ImplicitAsk,
                Outcome::Allow,
                Some(
                    "implicit rule after the configured ones: harness::ask asks the user a question"
                        .into(),
                ),
            ),
            Event::Default => self.push(
                Step::Default,
                Outcome::Hold,
                Some("no rule decided: a human decides".into()),
            ),
            Event::Subscription { target, verdict } => {
                let (outcome, detail) = match (target, verdict) {
                    (None, _) => (
                        Outcome::Allow,
                        "a subscription the harness keeps for this session; it calls nothing"
                            .to_owned(),
                    ),
                    (Some(t), crate::policy::Verdict::Allow) => (
                        Outcome::Allow,
                        format!("a subscription the harness keeps for this session; {t} (and every condition) is allowed for it"),
                    ),
                    (Some(t), v) => (
                        Outcome::Deny,
                        format!(
                            "a subscription calls {t} unattended, and {t} is {} for this session",
                            unattended(v)
                        ),
                    ),
                };
                self.push(Step::Subscription, outcome, Some(detail));
            }
        }
    }
}

/// What a subscription target's verdict means for a call made unattended.
pub(crate) fn unattended(verdict: crate::policy::Verdict) -> &'static str {
    match verdict {
        crate::policy::Verdict::Allow => "allowed",
        crate::policy::Verdict::Deny => "denied (or not a binding target)",
        crate::policy::Verdict::Hold => "not allowed without a human",
    }
}

impl Recorder<'_> {
    /// The steps written.
    pub(crate) fn finish(self) -> Vec<TraceStep> {
        self.steps
    }

    fn push(&mut self, step: Step, outcome: Outcome, detail: Option<String>) {
        self.steps.push(TraceStep {
            step,
            outcome,
            detail,
        });
    }

    /// Every rule of `lane` missed below `hit` passes (in slot order, with
    /// why), then `hit` decides.
    fn rule_step(
        &mut self,
        step: Step,
        lane: Lane,
        hit: Option<(u32, &CompiledRule, Option<String>)>,
    ) {
        let mut missed: Vec<_> = self
            .missed
            .iter()
            .filter(|(slot, rule, _)| {
                in_lane(lane, rule.action) && hit.as_ref().is_none_or(|(h, _, _)| slot < h)
            })
            .map(|(slot, rule, why)| (*slot, describe_miss(*slot, rule, why)))
            .collect();
        missed.sort_unstable_by_key(|(slot, _)| *slot);
        missed.dedup_by_key(|(slot, _)| *slot);
        let any = !missed.is_empty();
        for (_, text) in missed {
            self.push(step, Outcome::Pass, Some(text));
        }
        match hit {
            Some((slot, rule, command)) => {
                let outcome = match rule.action {
                    RuleAction::Allow => Outcome::Allow,
                    RuleAction::Deny => Outcome::Deny,
                    RuleAction::Ask => Outcome::Hold,
                };
                let detail = match rule.args.as_deref().and_then(<[_]>::first) {
                    Some(c) => {
                        let c = c.matched();
                        format!(
                            "{} matched on {} {} {}",
                            describe_rule(slot, rule),
                            c.field,
                            c.operator.as_str(),
                            c.value
                        )
                    }
                    None => format!("{} matched", describe_rule(slot, rule)),
                };
                let detail = match command {
                    Some(command) => format!("{detail}: {command}"),
                    None => detail,
                };
                self.push(step, outcome, Some(detail));
            }
            None if !any => {
                let what = match step {
                    Step::DenyRule => "no deny rule matches",
                    Step::Ask => "no ask rule matches",
                    _ => "no rule matches",
                };
                self.push(step, Outcome::Pass, Some(what.into()));
            }
            None => {}
        }
    }

    /// Writes the entries passed over (below `hit`, when one applied), in
    /// slot order.
    fn flush_passed(&mut self, hit: Option<u32>) {
        let mut passed = std::mem::take(&mut self.passed);
        passed.sort_unstable_by_key(|(slot, _, _)| *slot);
        for (slot, entry, why) in passed {
            if hit.is_none_or(|h| slot < h) {
                self.lines.push(format!(
                    "{} passed over: {}",
                    describe_entry(entry),
                    passed_text(why)
                ));
            }
        }
    }
}

/// Whether a rule of this action belongs to the lane.
fn in_lane(lane: Lane, action: RuleAction) -> bool {
    match lane {
        Lane::Deny => action == RuleAction::Deny,
        Lane::Ask => action == RuleAction::Ask,
        Lane::Allow => action == RuleAction::Allow,
        Lane::AllowOrDeny => action != RuleAction::Ask,
    }
}

/// Why a rule did not apply, for an operator.
fn describe_miss(slot: u32, rule: &CompiledRule, why: &Miss<'_>) -> String {
    match why {
        Miss::Mode(mode) => format!(
            "{} does not apply in mode {}",
            describe_rule(slot, rule),
            mode.as_str()
        ),
        Miss::Constraint(c) => {
            let c = c.matched();
            format!(
                "{} does not apply: {} {} {} does not hold",
                describe_rule(slot, rule),
                c.field,
                c.operator.as_str(),
                c.value
            )
        }
        Miss::NotAnObject => format!("{} does not apply", describe_rule(slot, rule)),
        Miss::Command(c, why) => {
            let c = c.matched();
            format!(
                "{} does not apply: {} {} {}: {why}",
                describe_rule(slot, rule),
                c.field,
                c.operator.as_str(),
                c.value
            )
        }
    }
}

fn passed_text(why: PassedOver) -> &'static str {
    match why {
        PassedOver::Expired => "expired",
        PassedOver::UsedUp => "no uses left",
        PassedOver::Args => "its args do not hold",
        PassedOver::Unwritten => "its use could not be recorded",
        PassedOver::SeedUnderDeny => "a seed entry never beats a deny rule",
        PassedOver::Suppressed => "removed from this session",
    }
}

/// `rule 3 no-force-push (deny)`.
fn describe_rule(slot: u32, rule: &CompiledRule) -> String {
    format!("rule {slot} {} ({})", rule.rule_id, rule.action.as_str())
}

/// `seed entry shell::*`, `entry shell::exec (2 uses left, args)`.
fn describe_entry(entry: &Entry) -> String {
    let mut bounds = Vec::new();
    if let Some(at) = entry.expires_at {
        bounds.push(format!("expires at {at}"));
    }
    if let Some(n) = entry.uses_left {
        bounds.push(format!("{n} uses left"));
    }
    if let Some(args) = &entry.args {
        let keys: Vec<&str> = args.keys().map(String::as_str).collect();
        bounds.push(format!("args on {}", keys.join(", ")));
    }
    let kind = match entry.granted_by {
        GrantedBy::Seed => "seed entry",
        GrantedBy::UserClick => "entry",
    };
    if bounds.is_empty() {
        format!("{kind} {}", entry.function_id)
    } else {
        format!("{kind} {} ({})", entry.function_id, bounds.join(", "))
    }
}
