//! Redaction inside a value that can run (contract §25.8): the approver
//! must see what runs, so a secret found in a command hides the whole
//! literal argument word it lies in — never a program word, a substitution
//! or the shell's structure.
//!
//! # How a command string is redacted
//!
//! 1. The value detectors of `detect.rs` run on the whole text, as for any
//!    string. Nothing found: the text stays as it is (and the command model
//!    is never read, so secret-free commands cost what they cost before).
//! 2. The text is read as bash by the command model (`crate::shell::read`).
//!    Every simple command that is not a speculative start gives its
//!    *places*: the argument words (not the program word) that are fully
//!    literal and lie directly in the text, the values of its leading
//!    assignments and its redirection targets when literal. A word that
//!    holds code (a shell's `-c` string, found because a nested command
//!    lies inside it) is a *code place*; the words after it in that
//!    command are the positional words the code reads (`sh -c '$1 -rf ~' _
//!    rm`): they can be programs and are never places.
//! 3. Each secret span a detector found hides the places it overlaps,
//!    whole: `mysql -pSECRET db` → `mysql <redacted> db` (the flag word
//!    whole: the form `-p<redacted>` would need a reading of every tool's
//!    options, and the word is what the contract hides); `export
//!    TOKEN=abc && gh pr list` → `export <redacted> && gh pr list`;
//!    `DB_PASSWORD=x psql` → `DB_PASSWORD=<redacted> psql`. A code place
//!    is redacted by the same rule, recursively, and single-quoted again
//!    (`bash -c 'mysql <redacted> db'`); when the inner reading hides
//!    nothing the detector saw, the whole code word goes. A span that
//!    takes a program word from its start stays visible (`PASSWORD= rm
//!    -rf ~/x` keeps `rm`);
//!    substitutions are never in a span (`subst.rs`). A span inside a word
//!    that is not wholly literal (`"--password=x$SUFFIX"`), or starting
//!    inside a program word (`a.client.secret=x`), is replaced where it
//!    is, as outside commands: no secret is left for a word's sake.
//! 4. The provider token formats (`providers.rs`: `ghp_…`, `AKIA…`, …) are
//!    replaced where they are, anywhere, as outside commands: their shape
//!    is a secret whatever word carries it.
//! 5. A text the model cannot read whole (a parse error, too long, too
//!    deep, past its budget) falls back to the detectors' spans, as for any
//!    string: nothing found is ever left visible.
//!
//! Whatever was replaced, [`Redacted::hidden`] says so: the reviewer never
//! allows such a call (§22, `gate/review.rs`).

use std::ops::Range;

use super::detect::{apply, scan, Found};
use super::REDACTED;
use crate::shell::{base_name, read, Limits, Source, WordKind};

/// How deep `-c` strings are redacted inside each other; deeper, the whole
/// code word is hidden.
const MAX_NESTED: usize = 4;

/// Programs whose `-c` string is code.
const SHELLS: [&str; 6] = ["sh", "bash", "dash", "ksh", "zsh", "busybox"];

/// A command string after redaction.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Redacted {
    /// The text, with whole words (and provider tokens) replaced.
    pub text: String,
    /// Whether anything was replaced.
    pub hidden: bool,
}

/// The words of a command string a secret may hide, and its program words,
/// which it never hides.
#[derive(Debug)]
struct Places {
    places: Vec<Place>,
    programs: Vec<Range<usize>>,
}

/// One word a secret may hide.
#[derive(Debug)]
struct Place {
    span: Range<usize>,
    /// The word as bash reads it (for a code place: the code).
    text: String,
    /// It holds code read again as bash.
    code: bool,
}

/// Redacts a command string (see the module docs).
pub(super) fn redact_command(text: &str) -> Redacted {
    redact_at(text, 0)
}

fn redact_at(text: &str, nested: usize) -> Redacted {
    let found = scan(text, true);
    if found.spans.is_empty() {
        return Redacted {
            text: text.to_owned(),
            hidden: false,
        };
    }
    let Some(places) = places(text, nested) else {
        return fallback(text, &found);
    };
    let mut replaced: Vec<(Range<usize>, String)> = Vec::new();
    let mut hit = vec![false; places.places.len()];
    for span in &found.spans {
        if found.providers.contains(span) {
            continue;
        }
        let mut placed = false;
        for (i, place) in places.places.iter().enumerate() {
            if overlaps(span, &place.span) {
                hit[i] = true;
                placed = true;
            }
        }
        // A span that takes a program word from its start was read off
        // something before it (`PASSWORD= rm`: the empty value's next
        // word): the program stays. Any other span that found no place —
        // inside a word that is not wholly literal (`"pw=x$HOME"`), or
        // after the start of a program word (`a.client.secret=x`) — goes
        // itself, as outside commands: a secret is never left visible for
        // the sake of a word.
        let names_a_program = places
            .programs
            .iter()
            .any(|p| overlaps(span, p) && span.start <= p.start);
        if !placed && !names_a_program {
            replaced.push((span.clone(), REDACTED.to_owned()));
        }
    }
    for (place, _) in places.places.iter().zip(&hit).filter(|(_, hit)| **hit) {
        let with = if place.code {
            let inner = redact_at(&place.text, nested + 1);
            if inner.hidden {
                single_quoted(&inner.text)
            } else {
                REDACTED.to_owned()
            }
        } else {
            REDACTED.to_owned()
        };
        replaced.push((place.span.clone(), with));
    }
    for span in &found.providers {
        let inside = replaced
            .iter()
            .any(|(r, _)| r.start <= span.start && span.end <= r.end);
        if !inside {
            replaced.push((span.clone(), REDACTED.to_owned()));
        }
    }
    if replaced.is_empty() {
        return Redacted {
            text: text.to_owned(),
            hidden: false,
        };
    }
    Redacted {
        text: splice(text, replaced),
        hidden: true,
    }
}

/// The places of `text`'s simple commands, or `None` when the model cannot
/// read it whole (or it is nested too deep).
fn places(text: &str, nested: usize) -> Option<Places> {
    if nested >= MAX_NESTED {
        return None;
    }
    let model = read(Source::Bash(text), &Limits::default());
    if !model.complete {
        return None;
    }
    let commands: Vec<_> = model.commands.iter().filter(|c| !c.speculative).collect();
    let programs: Vec<Range<usize>> = commands
        .iter()
        .filter_map(|c| c.words.first().and_then(|w| w.span.clone()))
        .collect();
    let holds_code = |span: &Range<usize>| {
        model.commands.iter().any(|n| {
            !n.via.is_empty()
                && !n.span.is_empty()
                && span.start <= n.span.start
                && n.span.end <= span.end
        })
    };
    let mut out: Vec<Place> = Vec::new();
    let mut push = |place: Place| {
        if !programs.iter().any(|p| overlaps(p, &place.span))
            && !out.iter().any(|o| o.span == place.span)
        {
            out.push(place);
        }
    };
    for command in &commands {
        let shell = command.words.first().is_some_and(|w| is_shell(&w.text));
        let mut after_dash_c = false;
        for word in command.words.iter().skip(1) {
            let dash_c = after_dash_c;
            after_dash_c = shell && is_dash_c(&word.text);
            let Some(span) = word.span.clone() else {
                continue;
            };
            if word.kind != WordKind::Literal {
                continue;
            }
            let code = dash_c || holds_code(&span);
            push(Place {
                span,
                text: word.text.clone(),
                code,
            });
            if code {
                // The words after the code are its positional words.
                break;
            }
        }
        for assignment in &command.assignments {
            let value = &assignment.value;
            if let (Some(span), WordKind::Literal, false) =
                (value.span.clone(), value.kind, value.text.is_empty())
            {
                push(Place {
                    span,
                    text: value.text.clone(),
                    code: false,
                });
            }
        }
        for target in command.redirects.iter().filter_map(|r| r.target.as_ref()) {
            if let (Some(span), WordKind::Literal) = (target.span.clone(), target.kind) {
                push(Place {
                    span,
                    text: target.text.clone(),
                    code: false,
                });
            }
        }
    }
    Some(Places {
        places: out,
        programs,
    })
}

/// Whether `program` is a shell whose `-c` string is code.
pub(super) fn is_shell(program: &str) -> bool {
    SHELLS.contains(&base_name(program))
}

/// The names of the variables a command string runs as its program
/// (`$TOOL -x`, `${TOOL} -x`): their `env` values are shown even when
/// secret-named, since they say what runs.
pub(super) fn env_programs(command: &str) -> Vec<String> {
    if !command.contains('$') {
        return Vec::new();
    }
    let model = read(Source::Bash(command), &Limits::default());
    let mut names: Vec<String> = Vec::new();
    for command in model.commands.iter().filter(|c| !c.speculative) {
        let Some(program) = command.words.first() else {
            continue;
        };
        let text = program.text.as_str();
        let name = text
            .strip_prefix("${")
            .and_then(|t| t.strip_suffix('}'))
            .or_else(|| text.strip_prefix('$'));
        if let Some(name) = name {
            let plain =
                !name.is_empty() && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
            if plain && !names.iter().any(|n| n == name) {
                names.push(name.to_owned());
            }
        }
    }
    names
}

/// `text` with only the provider token formats replaced (words a `-c`
/// string reads as its positional parameters: they can be programs).
pub(super) fn providers_only(text: &str) -> String {
    let found = scan(text, true);
    if found.providers.is_empty() {
        return text.to_owned();
    }
    splice(
        text,
        found
            .providers
            .iter()
            .map(|span| (span.clone(), REDACTED.to_owned()))
            .collect(),
    )
}

/// `-c`, or a cluster of single-letter options holding `c` (`-lc`, `-ec`).
pub(super) fn is_dash_c(word: &str) -> bool {
    word.strip_prefix('-').is_some_and(|flags| {
        !flags.is_empty()
            && !flags.starts_with('-')
            && flags.contains('c')
            && flags.bytes().all(|b| b.is_ascii_alphabetic())
    })
}

/// What the detectors alone make of `text`: every span replaced.
fn fallback(text: &str, found: &Found) -> Redacted {
    Redacted {
        text: apply(text, found).text,
        hidden: true,
    }
}

fn overlaps(a: &Range<usize>, b: &Range<usize>) -> bool {
    a.start < b.end && b.start < a.end
}

/// `text` with each range replaced; overlapping ranges become one
/// `<redacted>`.
fn splice(text: &str, mut replaced: Vec<(Range<usize>, String)>) -> String {
    replaced.sort_by_key(|(r, _)| (r.start, r.end));
    let mut merged: Vec<(Range<usize>, String)> = Vec::with_capacity(replaced.len());
    for (range, with) in replaced {
        match merged.last_mut() {
            Some((last, last_with)) if range.start < last.end => {
                last.end = last.end.max(range.end);
                *last_with = REDACTED.to_owned();
            }
            _ => merged.push((range, with)),
        }
    }
    let mut out = String::with_capacity(text.len());
    let mut copied = 0;
    for (range, with) in merged {
        out.push_str(&text[copied..range.start]);
        out.push_str(&with);
        copied = range.end;
    }
    out.push_str(&text[copied..]);
    out
}

/// `text` as one bash word in single quotes (`'` written `'\''`).
fn single_quoted(text: &str) -> String {
    format!("'{}'", text.replace('\'', "'\\''"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shown(text: &str) -> String {
        redact_command(text).text
    }

    #[test]
    fn rule_25_8_a_flag_word_with_a_secret_is_hidden_whole() {
        assert_eq!(shown("mysql -pSECRETpass1 db"), "mysql <redacted> db");
        assert_eq!(
            shown("curl -H \"Authorization: Bearer abcdef123456\" https://x.test"),
            "curl -H <redacted> https://x.test"
        );
    }

    #[test]
    fn rule_25_8_program_words_stay_visible() {
        let out = redact_command("PASSWORD= rm -rf ~/x");
        assert!(out.text.contains("rm -rf"), "{out:?}");
        assert_eq!(
            shown("export TOKEN=abc123456 && gh pr list"),
            "export <redacted> && gh pr list"
        );
        assert_eq!(
            shown("DB_PASSWORD=hunter2hunter psql -h db"),
            "DB_PASSWORD=<redacted> psql -h db"
        );
    }

    #[test]
    fn rule_25_8_a_dash_c_string_is_redacted_inside_and_quoted_again() {
        let out = redact_command("bash -c 'mysql -pSECRETpass1 db'");
        assert_eq!(out.text, "bash -c 'mysql <redacted> db'");
        assert!(out.hidden);
        assert_eq!(
            shown("sh -c \"mysql -pSECRETpass1 db\" _ rm"),
            "sh -c 'mysql <redacted> db' _ rm"
        );
    }

    #[test]
    fn rule_25_8_positional_words_of_a_dash_c_string_are_shown() {
        let out = redact_command("sh -c '$1 -rf ~' _ rm");
        assert_eq!(out.text, "sh -c '$1 -rf ~' _ rm");
        assert!(!out.hidden);
    }

    #[test]
    fn rule_25_8_provider_tokens_go_wherever_they_are() {
        let token = format!("ghp_{}", "a1B2c3D4e5".repeat(4).get(..36).unwrap_or(""));
        let out = redact_command(&format!("echo x$(printf {token})y"));
        assert!(!out.text.contains(&token), "{out:?}");
        assert!(out.hidden);
    }

    #[test]
    fn rule_25_8_a_command_without_a_secret_is_left_as_it_is() {
        let text = "git status --short && cargo test 2>&1 | tail -20";
        let out = redact_command(text);
        assert_eq!(out.text, text);
        assert!(!out.hidden);
    }

    #[test]
    fn rule_25_8_a_text_the_model_cannot_read_falls_back_to_the_spans() {
        let out = redact_command("mysql -pSECRETpass1 db; if then (");
        assert!(!out.text.contains("SECRETpass1"), "{out:?}");
        assert!(out.hidden);
    }

    #[test]
    fn rule_25_8_redacting_twice_changes_nothing() {
        for text in [
            "mysql -pSECRETpass1 db",
            "bash -c 'mysql -pSECRETpass1 db'",
            "export TOKEN=abc123456 && gh pr list",
            "curl -u admin:hunter22 https://x.test",
        ] {
            let once = shown(text);
            assert_eq!(shown(&once), once, "{text}");
        }
    }
}
