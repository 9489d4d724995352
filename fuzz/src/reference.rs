//! A naive decision ladder: a linear scan over the rules and the allow-lists,
//! each glob compiled and matched on its own, each regex on its own, pointers
//! resolved by `serde_json`. It shares no matching code with the crate's
//! pattern table, so a disagreement points at the table or the ladder.

use approval_gate::policy::{is_human_only, ArgConstraint, Basis, Decision, RuleAction, RuleSpec};
use approval_gate::settings::model::{ApprovalSettings, Entry, Mode};
use globset::GlobBuilder;
use regex::Regex;
use serde_json::Value;

/// Where the reference's decision came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Step 1.
    HumanOnly,
    /// Step 2.
    Full,
    /// Step 3, with the entry text.
    Approved(String),
    /// Step 4, with the entry text.
    Always(String),
    /// Step 5: the index of the first rule that applies.
    Rule(usize),
    /// Step 6.
    NoMatch,
}

/// The crate's decision in the same terms.
pub fn outcome_of(d: &Decision<'_>) -> Outcome {
    match d.basis {
        Basis::HumanOnly => Outcome::HumanOnly,
        Basis::ModeFull => Outcome::Full,
        Basis::ApprovedAlways { entry } => Outcome::Approved(entry.to_owned()),
        Basis::AlwaysAllow { entry } => Outcome::Always(entry.to_owned()),
        Basis::Rule { index, .. } => Outcome::Rule(index),
        Basis::NoMatch => Outcome::NoMatch,
    }
}

const GLOB_META: &[char] = &['*', '?', '[', ']', '{', '}', '\\'];

/// Whether the pattern `text` matches `id`: a glob when it has a glob
/// metacharacter and compiles, else the exact text.
pub fn pattern_matches(text: &str, id: &str) -> bool {
    if !text.contains(GLOB_META) {
        return text == id;
    }
    match GlobBuilder::new(text)
        .literal_separator(false)
        .backslash_escape(true)
        .build()
    {
        Ok(glob) => glob.compile_matcher().is_match(id),
        Err(_) => text == id,
    }
}

enum Test {
    Equals(Value),
    Matches(Regex),
}

/// One rule as the reference sees it.
pub struct RefRule {
    function: String,
    action: RuleAction,
    modes: Option<Vec<Mode>>,
    args: Option<Vec<(String, Test)>>,
}

impl RefRule {
    /// The rule of `spec`, or `None` when the spec would not compile here
    /// (only used once the crate compiled the whole set).
    pub fn of(spec: &RuleSpec) -> Option<RefRule> {
        Some(match spec {
            RuleSpec::Shorthand(text) => {
                let (action, function) = match text.strip_prefix('!') {
                    Some(rest) => (RuleAction::Deny, rest),
                    None => (RuleAction::Allow, text.as_str()),
                };
                RefRule {
                    function: function.to_owned(),
                    action,
                    modes: None,
                    args: None,
                }
            }
            RuleSpec::Object(obj) => {
                let args = match &obj.args {
                    None => None,
                    Some(map) => {
                        let mut out = Vec::new();
                        for (field, c) in map {
                            let test = match c {
                                ArgConstraint::Equals(v) => Test::Equals(v.clone()),
                                ArgConstraint::Matches(re) => Test::Matches(Regex::new(re).ok()?),
                            };
                            out.push((field.clone(), test));
                        }
                        Some(out)
                    }
                };
                RefRule {
                    function: obj.function.clone(),
                    action: obj.action,
                    modes: obj.modes.clone(),
                    args,
                }
            }
        })
    }

    /// The rule's action.
    pub fn action(&self) -> RuleAction {
        self.action
    }

    /// Whether the rule applies to the call.
    fn applies(&self, mode: Mode, fid: &str, args: Option<&Value>) -> bool {
        if let Some(modes) = &self.modes {
            if !modes.contains(&mode) {
                return false;
            }
        }
        if !pattern_matches(&self.function, fid) {
            return false;
        }
        let Some(constraints) = &self.args else {
            return true;
        };
        let Some(args @ Value::Object(map)) = args else {
            return false;
        };
        constraints.iter().all(|(field, test)| {
            let found = if field.starts_with('/') {
                args.pointer(field)
            } else {
                map.get(field)
            };
            match test {
                Test::Equals(expected) => found.unwrap_or(&Value::Null) == expected,
                Test::Matches(re) => matches!(found, Some(Value::String(s)) if re.is_match(s)),
            }
        })
    }
}

fn first_entry(entries: &[Entry], fid: &str) -> Option<String> {
    entries
        .iter()
        .find(|e| pattern_matches(&e.function_id, fid))
        .map(|e| e.function_id.clone())
}

/// The ladder of contract §2, step by step.
pub fn decide(
    settings: &ApprovalSettings,
    rules: &[RefRule],
    fid: &str,
    args: Option<&Value>,
) -> Outcome {
    if is_human_only(fid) {
        return Outcome::HumanOnly;
    }
    if settings.mode == Mode::Full {
        return Outcome::Full;
    }
    if let Some(e) = first_entry(&settings.approved_always, fid) {
        return Outcome::Approved(e);
    }
    if settings.mode == Mode::Auto {
        if let Some(e) = first_entry(&settings.always_allow, fid) {
            return Outcome::Always(e);
        }
    }
    rules
        .iter()
        .position(|r| r.applies(settings.mode, fid, args))
        .map_or(Outcome::NoMatch, Outcome::Rule)
}
