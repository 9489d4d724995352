//! The field checks that make a configuration value usable or not as a
//! whole (`architecture/contract.md` § Configuration, contract §26.2): what
//! serde cannot say about a field that parsed. PURE.
//!
//! A value with any finding here is refused whole, exactly like one whose
//! rules do not compile: the snapshot in force stays, the findings are
//! reported in `health.config` and on `approval::evaluate`, and no field of
//! the refused value applies. The fields whose mistakes v3 already treated
//! as a configuration error (a wrong type, an unknown key, a `reviewer` or
//! `decision_log` that does not parse, a deadline under a second) are
//! refused by the parser itself; these are the ones it lets through.
//! Findings that v3 reported without refusing the value (an unusable
//! `links`, a short `inbox_token`) stay out of here: links are then off,
//! the rest applies.

use globset::GlobBuilder;

use super::ApprovalConfig;
use crate::policy::MIN_DEADLINE_MS;

/// The largest integer every JSON reader keeps exact (2^53 − 1): a
/// `gate_priority` past it would be ordered differently by a harness that
/// reads numbers as doubles.
pub(super) const MAX_SAFE_INTEGER: i64 = (1 << 53) - 1;
/// The smallest such integer, −(2^53 − 1): `gate_priority`'s floor.
pub(super) const MIN_SAFE_INTEGER: i64 = -MAX_SAFE_INTEGER;

/// Characters a command prefix must not hold: shell structure, quotes,
/// expansions and globs (a prefix is words a command starts with, compared
/// as words; contract §25.6, §25.9).
const PREFIX_FORBIDDEN: &[char] = &[
    ';', '&', '|', '<', '>', '(', ')', '`', '$', '\\', '"', '\'', '*', '?', '[', ']', '{', '}',
    '~', '#', '\n', '\r',
];

/// Every finding of `config`'s fields, in field order: empty when the value
/// may be used. `rules` are compiled elsewhere (their errors carry an
/// index); everything else is here.
pub(super) fn findings(config: &ApprovalConfig) -> Vec<String> {
    let mut out = Vec::new();
    for (i, glob) in config.human_only_extra.iter().enumerate() {
        if let Err(why) = function_glob(glob) {
            out.push(format!(
                "human_only_extra {i}: {why}; the value is refused whole (a guard is never dropped or half applied)"
            ));
        }
    }
    if config.gate_priority.abs() > MAX_SAFE_INTEGER {
        out.push(format!(
            "gate_priority must be between -{MAX_SAFE_INTEGER} and {MAX_SAFE_INTEGER}, got {}",
            config.gate_priority
        ));
    }
    for (field, ms) in [
        (
            "binding_check_interval_ms",
            config.binding_check_interval_ms,
        ),
        ("release_timeout_ms", config.release_timeout_ms),
        ("edit_ttl_max_ms", config.edit_ttl_max_ms),
    ] {
        if ms < MIN_DEADLINE_MS {
            out.push(format!(
                "{field} must be at least {MIN_DEADLINE_MS} ms, got {ms}"
            ));
        }
    }
    for (i, prefix) in config.suggest_prefixes.iter().enumerate() {
        if let Err(why) = command_prefix(prefix) {
            out.push(format!("suggest_prefixes {i}: {why}"));
        }
    }
    for (i, glob) in config.protected_paths.iter().enumerate() {
        if let Err(why) = path_glob(glob) {
            out.push(format!("protected_paths {i}: {why}"));
        }
    }
    for (i, glob) in config.protected_path_functions.iter().enumerate() {
        if let Err(why) = function_glob(glob) {
            out.push(format!("protected_path_functions {i}: {why}"));
        }
    }
    out
}

/// A function-id glob as rules and guards read it (`*` crosses `::`,
/// `\` escapes): non-empty, no surrounding whitespace, and it compiles.
fn function_glob(glob: &str) -> Result<(), String> {
    non_blank(glob)?;
    GlobBuilder::new(glob)
        .literal_separator(false)
        .backslash_escape(true)
        .build()
        .map(|_| ())
        .map_err(|err| format!("invalid glob {glob:?} ({})", err.kind()))
}

/// A path glob (`*` stays within one path segment, `**` crosses them):
/// non-empty, no surrounding whitespace, and it compiles.
fn path_glob(glob: &str) -> Result<(), String> {
    non_blank(glob)?;
    GlobBuilder::new(glob)
        .literal_separator(true)
        .backslash_escape(true)
        .build()
        .map(|_| ())
        .map_err(|err| format!("invalid path glob {glob:?} ({})", err.kind()))
}

/// A command prefix: one to eight words separated by single spaces, none of
/// them holding shell structure, a quote, an expansion or a glob, and the
/// program not a path (`git status`, `ls`; not `git status;`, `/bin/ls`,
/// `rm *`).
fn command_prefix(prefix: &str) -> Result<(), String> {
    non_blank(prefix)?;
    if let Some(c) = prefix.chars().find(|c| PREFIX_FORBIDDEN.contains(c)) {
        return Err(format!(
            "{prefix:?} holds {c:?}: a prefix is plain words a command starts with"
        ));
    }
    let words: Vec<&str> = prefix.split(' ').collect();
    if words
        .iter()
        .any(|w| w.is_empty() || w.contains(char::is_whitespace))
    {
        return Err(format!("{prefix:?}: words are separated by single spaces"));
    }
    if words.len() > 8 {
        return Err(format!("{prefix:?} has more than 8 words"));
    }
    if words[0].contains('/') || words[0].starts_with('-') {
        return Err(format!(
            "{prefix:?}: the first word is a program name, not a path or a flag"
        ));
    }
    Ok(())
}

fn non_blank(text: &str) -> Result<(), String> {
    if text.trim().is_empty() {
        return Err("must not be empty".to_string());
    }
    if text.trim() != text {
        return Err(format!("{text:?} must not start or end with whitespace"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn findings_of(value: serde_json::Value) -> Vec<String> {
        findings(&ApprovalConfig::from_value(&value).expect("parses"))
    }

    #[test]
    fn rule_26_2_the_defaults_have_no_finding() {
        assert!(findings(&ApprovalConfig::default()).is_empty());
    }

    #[test]
    fn rule_26_2_each_field_says_what_is_wrong() {
        let cases = [
            (
                json!({"human_only_extra": ["secrets::{get,put"]}),
                "human_only_extra 0: invalid glob",
            ),
            (
                json!({"human_only_extra": ["ok::*", ""]}),
                "human_only_extra 1: must not be empty",
            ),
            (
                json!({"human_only_extra": [" deploy::*"]}),
                "human_only_extra 0: \" deploy::*\" must not start or end",
            ),
            (
                json!({"gate_priority": 9_007_199_254_740_992_i64}),
                "gate_priority must be between",
            ),
            (
                json!({"binding_check_interval_ms": 10}),
                "binding_check_interval_ms must be at least 1000",
            ),
            (
                json!({"release_timeout_ms": 0}),
                "release_timeout_ms must be at least 1000",
            ),
            (
                json!({"edit_ttl_max_ms": 999}),
                "edit_ttl_max_ms must be at least 1000",
            ),
            (
                json!({"suggest_prefixes": ["git status; curl x"]}),
                "suggest_prefixes 0: \"git status; curl x\" holds ';'",
            ),
            (
                json!({"suggest_prefixes": ["ls", "git  log"]}),
                "suggest_prefixes 1: \"git  log\": words are separated",
            ),
            (
                json!({"suggest_prefixes": ["/bin/ls"]}),
                "suggest_prefixes 0: \"/bin/ls\": the first word",
            ),
            (
                json!({"suggest_prefixes": ["rm *"]}),
                "suggest_prefixes 0: \"rm *\" holds '*'",
            ),
            (
                json!({"suggest_prefixes": ["a b c d e f g h i"]}),
                "suggest_prefixes 0: \"a b c d e f g h i\" has more than 8 words",
            ),
            (
                json!({"protected_paths": ["**/config/{a,b"]}),
                "protected_paths 0: invalid path glob",
            ),
            (
                json!({"protected_path_functions": ["shell::[x"]}),
                "protected_path_functions 0: invalid glob",
            ),
        ];
        for (value, expected) in cases {
            let found = findings_of(value.clone());
            assert_eq!(found.len(), 1, "{value}: {found:?}");
            assert!(found[0].starts_with(expected), "{value}: {found:?}");
        }
    }

    #[test]
    fn rule_26_2_good_values_of_each_field_pass() {
        let good = json!({
            "human_only_extra": ["deploy::prod*", "billing::{charge,refund}", "exact::id"],
            "gate_priority": -5,
            "binding_check_interval_ms": 1000,
            "release_timeout_ms": 1000,
            "edit_ttl_max_ms": 60_000,
            "suggest_prefixes": ["git status", "ls", "kubectl get pods"],
            "protected_paths": ["/opt/iii/**", "**/config/approval-gate*.yaml"],
            "protected_path_functions": ["shell::*", "fp::*"],
        });
        assert_eq!(findings_of(good), Vec::<String>::new());
    }
}
