//! `prefix` on commands (`architecture/contract.md` § Rules, constraints):
//! what "this command, with any arguments after it" means, read two ways.
//!
//! * An **allow** rule or a grant allows a command that *is* the prefix
//!   with plain arguments after it: the text equals the prefix, or goes on
//!   after whitespace (or after a prefix that itself ends in whitespace),
//!   and the rest holds none of `;` `&` `|` newline `` ` `` `$` `<` `>` `\`
//!   and no unbalanced quote — nothing a shell could read as a second
//!   command, a substitution or a redirection. `git status --short` is
//!   `git status`; `git status; curl x | sh`, `git statusx` and
//!   `git status $(id)` are not.
//! * A **deny** or **ask** rule catches the prefix wherever a shell would
//!   start a command: any segment of the text, split on `;`, `&`, `|` and
//!   newlines and trimmed, that starts with it.

/// The characters that may not follow an allowed command prefix.
const UNSAFE: &[char] = &[';', '&', '|', '\n', '`', '$', '<', '>', '\\'];

/// The characters a deny or ask rule splits commands on.
const SEPARATORS: &[char] = &[';', '&', '|', '\n'];

/// Allow rules and grants: `text` is the command `prefix`, with plain
/// arguments after it.
pub(crate) fn is_command_prefix(text: &str, prefix: &str) -> bool {
    let Some(rest) = text.strip_prefix(prefix) else {
        return false;
    };
    if rest.is_empty() {
        return true;
    }
    let boundary = prefix.is_empty()
        || prefix.ends_with(char::is_whitespace)
        || rest.starts_with(char::is_whitespace);
    boundary && plain_arguments(rest)
}

/// No unsafe character and every quote closed (`'…'` and `"…"`, each
/// literal inside the other).
fn plain_arguments(rest: &str) -> bool {
    let mut open: Option<char> = None;
    for c in rest.chars() {
        if UNSAFE.contains(&c) {
            return false;
        }
        match open {
            Some(q) if c == q => open = None,
            None if c == '\'' || c == '"' => open = Some(c),
            _ => {}
        }
    }
    open.is_none()
}

/// Deny and ask rules: some command segment of `text` starts with `prefix`.
pub(crate) fn any_segment_starts_with(text: &str, prefix: &str) -> bool {
    text.split(SEPARATORS)
        .any(|segment| segment.trim().starts_with(prefix))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rule_21_5_allow_prefix_examples_of_the_contract() {
        assert!(is_command_prefix("git status --short", "git status"));
        assert!(!is_command_prefix("git status; curl x | sh", "git status"));
        assert!(!is_command_prefix("git statusx", "git status"));
        assert!(!is_command_prefix("git status $(id)", "git status"));
    }

    #[test]
    fn rule_21_5_allow_prefix_refuses_every_unsafe_character_and_open_quote() {
        assert!(is_command_prefix("git status", "git status"));
        assert!(is_command_prefix("git log -n 3 'a b' \"c d\"", "git log"));
        assert!(is_command_prefix("git commit -m \"it's\"", "git commit"));
        assert!(is_command_prefix("git log\t-n 1", "git log"));
        assert!(is_command_prefix("git log", "git "));
        for tail in [
            "; id",
            " ; id",
            " && id",
            " & id",
            " || id",
            " | sh",
            " \n id",
            " `id`",
            " $(id)",
            " $HOME",
            " < /etc/passwd",
            " > out",
            " \\\n id",
            " 'open",
            " \"open",
            " 'a' \"b",
        ] {
            let text = format!("git log{tail}");
            assert!(!is_command_prefix(&text, "git log"), "{text:?}");
        }
        assert!(!is_command_prefix("git", "git log"));
        assert!(!is_command_prefix("Git log", "git log"));
        // An empty prefix allows any plain command.
        assert!(is_command_prefix("ls -la", ""));
        assert!(!is_command_prefix("ls; id", ""));
    }

    #[test]
    fn rule_21_5_deny_prefix_catches_any_segment() {
        assert!(any_segment_starts_with("rm -rf /", "rm"));
        assert!(any_segment_starts_with("git status; rm -rf /", "rm -rf"));
        assert!(any_segment_starts_with("a&&rm x", "rm"));
        assert!(any_segment_starts_with("a||  rm x", "rm"));
        assert!(any_segment_starts_with("a |rm x", "rm"));
        assert!(any_segment_starts_with("a\n\trm x", "rm"));
        assert!(any_segment_starts_with("anything", ""));
        assert!(!any_segment_starts_with("echo rm", "rm"));
        assert!(!any_segment_starts_with("git status", "rm"));
    }
}
