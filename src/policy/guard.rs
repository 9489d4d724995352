//! The gate's own levers (`architecture/contract.md` § The gate guards its
//! own levers): the calls only a human may make, whatever the session's mode,
//! allow-lists, grants or rules say. One session's trust must never release,
//! grant, rebind or rewrite anything for another session or for the gate.
//!
//! The families:
//!
//! | family | calls | why |
//! |---|---|---|
//! | `approval` | the `approval::` namespace | resolving one's own held call, changing one's own settings |
//! | `approval-gate` | the `approval-gate::` namespace (`ui-content`, `configuration-id`) | the worker's console family: nothing for an agent to call |
//! | `configuration` | the `configuration::` namespace | rewriting the gate's policy (or any worker's) |
//! | `release` | `harness::function::resolve`, `::cancel`, `::trigger`, `harness::{workspace,filesystem}::grant`, `harness::{workspace,filesystem}::revoke` | releasing a held call, stopping any session's running call, running a call in any session, and granting a folder are human decisions |
//! | `bindings` | `engine::register_trigger`, `engine::unregister_trigger` (on a harness that makes them a session's own subscription, judged by what they would call: [`super::subscription`]) | the gate is a binding: removing it ungates everyone |
//! | `state` | every `state::` function whose `scope` argument is one of this worker's scopes (`approval`, `approval_…`, `approval.…`, ASCII case ignored) | settings, held calls and grant memory are the gate's state |
//! | `extra` | the operator's `human_only_extra` globs | anything else a deployment wants behind a human |
//! | `configured` | the function ids the configuration names for the gate's own use (`ApprovalConfig::configured_ids`: the reviewer) | an agent must not ask its own reviewer, nor reach what the gate records |
//!
//! # How a name is recognised
//!
//! A family matches when the id **starts with** its name, ignoring ASCII
//! case; a single-function family (`release`, `bindings`) must be the whole
//! id. Leading whitespace, control and invisible characters are skipped, and
//! for single functions trailing ones too.
//!
//! Why a prefix and nothing wider: the engine routes a call by the exact
//! bytes of its id, in one namespace (iii 0.23, `architecture/integration.md`
//! § Function ids are routed by their exact bytes). No qualifier reaches the
//! gate or the engine's built-ins: `ns/approval::resolve`,
//! `ns::approval::resolve`, `default::configuration::list`,
//! `acme::approval::sync` all answer `function_not_found` unless some worker
//! registered that very id — and then the call reaches *that* worker, not
//! the gate. So `github::configuration::get` and `acme::approval::sync` are
//! ordinary functions that follow the ladder. The case and padding
//! tolerances are fail-safe extras: the engine routes `Approval::Resolve` or
//! ` approval::resolve` nowhere, and no legitimate id is spelled that way, so
//! denying them costs nothing and keeps the guard right should a router ever
//! fold case or trim.

use serde_json::Value;

use super::glob::{Pattern, PatternTable};

/// Namespaces only a human may call.
const NAMESPACES: [(&str, Family); 3] = [
    ("approval::", Family::Approval),
    ("approval-gate::", Family::ApprovalGate),
    ("configuration::", Family::Configuration),
];

/// Single functions only a human may call.
const FUNCTIONS: [(&str, Family); 9] = [
    ("harness::function::resolve", Family::Release),
    // Stop any session's running call; run a call in any session.
    ("harness::function::cancel", Family::Release),
    ("harness::function::trigger", Family::Release),
    ("harness::workspace::grant", Family::Release),
    ("harness::workspace::revoke", Family::Release),
    // Today's harness: the same grants under another family.
    ("harness::filesystem::grant", Family::Release),
    ("harness::filesystem::revoke", Family::Release),
    ("engine::register_trigger", Family::Bindings),
    ("engine::unregister_trigger", Family::Bindings),
];

/// The namespace of the engine's state worker.
const STATE_NAMESPACE: &str = "state::";

/// The scope name every scope of this worker is, or starts with.
const SCOPE_ROOT: &str = "approval";

/// Which kind of lever a guarded call pulls.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Family {
    /// The `approval::` namespace.
    Approval,
    /// The `approval-gate::` namespace (the console family).
    ApprovalGate,
    /// The `configuration::` namespace.
    Configuration,
    /// Releasing held calls and granting folders through the harness.
    Release,
    /// Making and removing bindings.
    Bindings,
    /// The worker's own state scopes.
    State,
    /// An operator's `human_only_extra` glob.
    Extra,
    /// A function the configuration names for the gate's own use (the
    /// reviewer).
    Configured,
}

impl Family {
    /// The family's name, as `approval::evaluate` reports it.
    pub fn as_str(self) -> &'static str {
        match self {
            Family::Approval => "approval",
            Family::ApprovalGate => "approval-gate",
            Family::Configuration => "configuration",
            Family::Release => "release",
            Family::Bindings => "bindings",
            Family::State => "state",
            Family::Extra => "extra",
            Family::Configured => "configured",
        }
    }
}

/// The guard a call matched.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Guard<'a> {
    /// Which family.
    pub family: Family,
    /// What matched: the namespace or function name, the `scope` argument,
    /// or the operator's glob.
    pub matched: &'a str,
}

impl Guard<'_> {
    /// `family` plus what matched, for an operator: `state scope approval_settings`.
    pub fn describe(&self) -> String {
        match self.family {
            Family::State => format!("state scope {}", self.matched),
            Family::Extra => format!("human_only_extra {}", self.matched),
            Family::Configured => format!("configured {}", self.matched),
            family => format!("{} {}", family.as_str(), self.matched),
        }
    }
}

/// The built-in guard `function_id` (with `arguments`) matches, if any.
/// The operator's extra globs are matched by the compiled rules.
pub fn builtin_guard<'a>(function_id: &'a str, arguments: Option<&'a Value>) -> Option<Guard<'a>> {
    for (namespace, family) in NAMESPACES {
        if names(function_id, namespace, true) {
            return Some(Guard {
                family,
                matched: namespace,
            });
        }
    }
    for (function, family) in FUNCTIONS {
        if names(function_id, function, false) {
            return Some(Guard {
                family,
                matched: function,
            });
        }
    }
    if names(function_id, STATE_NAMESPACE, true) {
        let scope = arguments
            .and_then(|a| a.get("scope"))
            .and_then(Value::as_str)?;
        if is_guarded_scope(scope.trim()) {
            return Some(Guard {
                family: Family::State,
                matched: scope,
            });
        }
    }
    None
}

/// The operator's `human_only_extra` globs, compiled once per configuration
/// change. A glob that does not compile guards its exact text and is
/// reported: the list can only add guards, so an error never removes one
/// that compiles.
#[derive(Debug, Clone, Default)]
pub(crate) struct ExtraGuards {
    texts: Vec<Box<str>>,
    table: PatternTable,
}

impl ExtraGuards {
    /// Compiles `globs`; returns the guards and a message per glob that
    /// had to fall back to its exact text.
    pub(crate) fn compile(globs: &[String]) -> (ExtraGuards, Vec<String>) {
        let mut errors = Vec::new();
        let patterns: Vec<(Pattern, u32)> = globs
            .iter()
            .zip(0u32..)
            .map(|(glob, slot)| {
                let pattern = Pattern::parse(glob).unwrap_or_else(|err| {
                    errors.push(format!(
                        "human_only_extra {slot}: invalid glob {glob:?} ({err}); it guards its exact text"
                    ));
                    Pattern::Exact(glob.as_str().into())
                });
                (pattern, slot)
            })
            .collect();
        let exact = || -> Vec<(Pattern, u32)> {
            globs
                .iter()
                .zip(0u32..)
                .map(|(glob, slot)| (Pattern::Exact(glob.as_str().into()), slot))
                .collect()
        };
        let table = PatternTable::build(patterns).unwrap_or_else(|err| {
            errors.push(format!(
                "human_only_extra: the globs are too large to compile together ({}); each guards its exact text",
                err.message
            ));
            PatternTable::build(exact()).unwrap_or_default()
        });
        let texts = globs.iter().map(|g| g.as_str().into()).collect();
        (ExtraGuards { texts, table }, errors)
    }

    /// The first glob `function_id` matches.
    pub(crate) fn matching(&self, function_id: &str) -> Option<Guard<'_>> {
        let slot = self.table.first_match(function_id, |_| true)?;
        self.texts.get(slot as usize).map(|text| Guard {
            family: Family::Extra,
            matched: text,
        })
    }
}

/// The function ids the configuration names for the gate's own use
/// (`ApprovalConfig::configured_ids`), guarded as single functions are:
/// the whole id, ASCII case and padding ignored.
#[derive(Debug, Clone, Default)]
pub(crate) struct ConfiguredGuards {
    ids: Vec<Box<str>>,
}

impl ConfiguredGuards {
    /// Guards for `ids`.
    pub(crate) fn new(ids: &[&str]) -> ConfiguredGuards {
        ConfiguredGuards {
            ids: ids.iter().map(|id| (*id).into()).collect(),
        }
    }

    /// The configured id `function_id` names, if any.
    pub(crate) fn matching(&self, function_id: &str) -> Option<Guard<'_>> {
        self.ids
            .iter()
            .find(|id| names(function_id, id, false))
            .map(|id| Guard {
                family: Family::Configured,
                matched: id,
            })
    }
}

/// Whether `function_id` targets the `approval::`, `approval-gate::` or
/// `configuration::` namespace (the worker's own human-only surface).
pub fn is_human_only(function_id: &str) -> bool {
    NAMESPACES
        .iter()
        .any(|(namespace, _)| names(function_id, namespace, true))
}

/// Whether a state scope is one of this worker's: `approval`, or a name
/// starting with `approval_` or `approval.`, ignoring ASCII case. Every scope
/// the worker uses is built from a name this accepts (checked when the
/// worker compiles), so the guard covers scopes added later too.
pub const fn is_guarded_scope(scope: &str) -> bool {
    let s = scope.as_bytes();
    let root = SCOPE_ROOT.as_bytes();
    if s.len() < root.len() {
        return false;
    }
    let mut i = 0;
    while i < root.len() {
        if s[i].to_ascii_lowercase() != root[i] {
            return false;
        }
        i += 1;
    }
    s.len() == root.len() || s[root.len()] == b'_' || s[root.len()] == b'.'
}

/// Whether `id` names `name`, ignoring ASCII case and leading blanks: as a
/// prefix of the id when `prefix`, else as the whole id (trailing blanks
/// ignored too).
pub(super) fn names(id: &str, name: &str, prefix: bool) -> bool {
    let id = id.trim_start_matches(is_blank);
    let matched = id
        .as_bytes()
        .get(..name.len())
        .is_some_and(|head| head.eq_ignore_ascii_case(name.as_bytes()));
    // `name` is ASCII, so `name.len()` is a character boundary of `id` when
    // the head matched.
    matched
        && (prefix
            || id
                .get(name.len()..)
                .is_some_and(|rest| rest.chars().all(is_blank)))
}

/// Whitespace, control and invisible characters: what a padded id may
/// carry around a guarded name.
fn is_blank(c: char) -> bool {
    c.is_whitespace() || c.is_control() || is_invisible(c)
}

/// Zero-width and byte-order characters that render as nothing.
fn is_invisible(c: char) -> bool {
    matches!(c, '\u{200b}'..='\u{200f}' | '\u{2060}'..='\u{2064}' | '\u{feff}')
}

#[cfg(test)]
mod tests;
