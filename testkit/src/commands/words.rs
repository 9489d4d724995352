//! Splitting text with shell-words rules: how today's shell turns a
//! `shell::exec` `command` without `args` into the argv it runs (no shell).
//!
//! Written here from the rules, not borrowed from the worker, so the oracle
//! runs what today's shell runs even where the worker's own splitter errs:
//! blanks (space, tab, newline) separate words; single quotes keep
//! everything; inside double quotes a backslash escapes only `$`, `` ` ``,
//! `"`, `\` and a newline; outside quotes a backslash escapes any character
//! and a backslash-newline disappears; a `#` that starts a word starts a
//! comment up to the end of the line; `;`, `|`, `&` are ordinary characters.

use thiserror::Error;

/// The text ends inside a quote or right after a backslash: today's shell
/// refuses it and runs nothing.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("unbalanced quote or a trailing backslash")]
pub struct Unbalanced;

#[derive(Clone, Copy, PartialEq, Eq)]
enum State {
    Between,
    Word,
    Single,
    Double,
    Comment,
}

/// The words of `text`, as today's shell splits them.
pub fn split(text: &str) -> Result<Vec<String>, Unbalanced> {
    let mut words = Vec::new();
    let mut word = String::new();
    let mut state = State::Between;
    let mut chars = text.chars();
    while let Some(ch) = chars.next() {
        state = match (state, ch) {
            (State::Comment, '\n') => State::Between,
            (State::Comment, _) => State::Comment,
            (State::Between, ' ' | '\t' | '\n') => State::Between,
            (State::Between, '#') => State::Comment,
            (State::Between | State::Word, '\\') => match chars.next() {
                None => return Err(Unbalanced),
                // A backslash-newline joins lines: it starts no word.
                Some('\n') => state,
                Some(next) => {
                    word.push(next);
                    State::Word
                }
            },
            (State::Between | State::Word, '\'') => State::Single,
            (State::Between | State::Word, '"') => State::Double,
            (State::Word, ' ' | '\t' | '\n') => {
                words.push(std::mem::take(&mut word));
                State::Between
            }
            (State::Between | State::Word, _) => {
                word.push(ch);
                State::Word
            }
            (State::Single, '\'') => State::Word,
            (State::Single, _) => {
                word.push(ch);
                State::Single
            }
            (State::Double, '"') => State::Word,
            (State::Double, '\\') => {
                match chars.next() {
                    None => return Err(Unbalanced),
                    Some('\n') => {}
                    Some(next @ ('$' | '`' | '"' | '\\')) => word.push(next),
                    Some(next) => {
                        word.push('\\');
                        word.push(next);
                    }
                }
                State::Double
            }
            (State::Double, _) => {
                word.push(ch);
                State::Double
            }
        };
    }
    match state {
        State::Single | State::Double => Err(Unbalanced),
        State::Word => {
            words.push(word);
            Ok(words)
        }
        State::Between | State::Comment => Ok(words),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(text: &str) -> Vec<String> {
        split(text).unwrap_or_else(|e| panic!("{text:?}: {e}"))
    }

    #[test]
    fn quotes_group_and_operators_are_text() {
        assert_eq!(
            ok("git commit -m \"a; rm b\""),
            ["git", "commit", "-m", "a; rm b"]
        );
        assert_eq!(
            ok("echo a;rm x | sh &"),
            ["echo", "a;rm", "x", "|", "sh", "&"]
        );
        assert_eq!(ok("r''m 'a b'c"), ["rm", "a bc"]);
        assert_eq!(ok("''"), [""]);
        assert_eq!(ok("  a \t b\n"), ["a", "b"]);
    }

    #[test]
    fn backslashes_follow_the_quote_they_are_in() {
        assert_eq!(ok("\\rm"), ["rm"]);
        assert_eq!(ok("\"\\rm\""), ["\\rm"]);
        assert_eq!(ok("\"\\$x \\\" \\\\\""), ["$x \" \\"]);
        assert_eq!(ok("'\\n'"), ["\\n"]);
        assert_eq!(ok("r\\\nm x"), ["rm", "x"]);
        assert_eq!(ok("a \\\n b"), ["a", "b"]);
        assert_eq!(ok("$'rm'"), ["$rm"]);
    }

    #[test]
    fn a_hash_starts_a_comment_only_at_a_word_start() {
        assert_eq!(ok("ls # ; rm x"), ["ls"]);
        assert_eq!(ok("ls #\nrm x"), ["ls", "rm", "x"]);
        assert_eq!(ok("echo a#b"), ["echo", "a#b"]);
        assert_eq!(ok("ls \\# rm"), ["ls", "#", "rm"]);
        assert_eq!(ok("#!/bin/sh\nrm x"), ["rm", "x"]);
    }

    #[test]
    fn unbalanced_text_is_refused() {
        assert_eq!(split("echo 'a"), Err(Unbalanced));
        assert_eq!(split("echo \"a"), Err(Unbalanced));
        assert_eq!(split("echo a\\"), Err(Unbalanced));
    }
}
