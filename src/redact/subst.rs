//! Command and process substitutions in a text (contract §21.6, "the
//! approver sees what will run").
//!
//! A value the detectors replace (`API_TOKEN="…"`, `--token "…"`,
//! `Cookie: …`) keeps the text of every substitution that starts inside it:
//! `$(…)`, `` `…` ``, `<(…)` and `>(…)`. This module finds them, in one
//! left-to-right pass over the text, with the rules a shell uses to find
//! where each one ends:
//!
//! * outside any substitution, quotes are not tracked: a substitution inside
//!   single quotes is found too (`sh -c "… '$(id)' …"` runs it), and a
//!   backslash makes the next character literal (`\$(x)` is no substitution);
//! * inside `$(…)`, `<(…)` and `>(…)`, parentheses nest, `'…'` and `"…"` are
//!   skipped (a `)` inside them does not close), `"…"` may hold further
//!   substitutions, and a backslash escapes the next character;
//! * a backtick substitution ends at the next unescaped backtick;
//! * `<(` and `>(` open one only at a word's start or after an operator
//!   (`diff <(a) <(b)`, `x=<(y)`), not right after a letter or a digit.
//!
//! Two decisions:
//!
//! * **A backtick span is a command only when it reads like one**: when its
//!   text holds whitespace or one of `| ; & < > ( )`. A single bare word
//!   between backticks (`` password: `hunter2` ``) is far more often a
//!   Markdown code span holding a literal than a command run with no
//!   arguments, so it stays a literal value and is redacted. Accepted: a
//!   bare command in backticks used as a secret value (`` TOKEN=`whoami` ``)
//!   is hidden.
//! * **An unclosed substitution** is a literal in a complete text (a shell
//!   refuses the line, nothing runs), but runs to the end of a text that is
//!   only the first part of a longer one (the detection window of a long
//!   string): there, what follows is cut anyway, and the approver still sees
//!   that a substitution starts.
//!
//! Nested substitutions are all listed, each with its own range: the
//! detectors run everywhere, so a secret inside a shown substitution
//! (`$(curl -u admin:pw …)`) is still replaced.

use std::ops::Range;

/// The substitutions of one text, sorted by start (nested ones included).
#[derive(Debug, Default)]
pub(super) struct Substitutions {
    ranges: Vec<Range<usize>>,
}

/// What the scanner is inside of.
enum Frame {
    /// `$(`, `<(` or `>(`, whose range is `ranges[slot]`.
    Paren { slot: usize },
    /// `` ` ``, whose range is `ranges[slot]`.
    Backtick { slot: usize },
    /// A plain `(` inside a substitution.
    Group,
    /// `"…"` inside a substitution.
    DoubleQuote,
}

/// A range not yet closed.
const OPEN: usize = usize::MAX;

impl Substitutions {
    /// Finds the substitutions of `text`; `complete` says whether `text` is
    /// a whole string or only its first part.
    pub(super) fn of(text: &str, complete: bool) -> Substitutions {
        let bytes = text.as_bytes();
        if !bytes.iter().any(|&b| b == b'(' || b == b'`') {
            return Substitutions::default();
        }
        let mut ranges: Vec<Range<usize>> = Vec::new();
        let mut literal: Vec<usize> = Vec::new();
        let mut stack: Vec<Frame> = Vec::new();
        // `<(` and `>(` only at a word's start or after an operator (never
        // `<redacted>(`, a marker followed by a parenthesis).
        let opens_paren = |i: usize| {
            bytes.get(i + 1) == Some(&b'(')
                && match bytes[i] {
                    b'$' => true,
                    b'<' | b'>' => i == 0 || !is_word(bytes[i - 1]),
                    _ => false,
                }
        };
        let mut i = 0;
        while i < bytes.len() {
            let b = bytes[i];
            if b == b'\\' {
                i += 2;
                continue;
            }
            match stack.last() {
                None => {
                    if opens_paren(i) {
                        stack.push(Frame::Paren { slot: ranges.len() });
                        ranges.push(i..OPEN);
                        i += 2;
                        continue;
                    }
                    if b == b'`' {
                        stack.push(Frame::Backtick { slot: ranges.len() });
                        ranges.push(i..OPEN);
                    }
                }
                Some(Frame::Paren { .. } | Frame::Group) => {
                    if opens_paren(i) {
                        stack.push(Frame::Paren { slot: ranges.len() });
                        ranges.push(i..OPEN);
                        i += 2;
                        continue;
                    }
                    match b {
                        b'\'' => match text[i + 1..].find('\'') {
                            Some(close) => i += close + 1,
                            None => i = bytes.len(),
                        },
                        b'"' => stack.push(Frame::DoubleQuote),
                        b'`' => {
                            stack.push(Frame::Backtick { slot: ranges.len() });
                            ranges.push(i..OPEN);
                        }
                        b'(' => stack.push(Frame::Group),
                        b')' => {
                            if let Some(Frame::Paren { slot }) = stack.pop() {
                                ranges[slot].end = i + 1;
                            }
                        }
                        _ => {}
                    }
                }
                Some(Frame::DoubleQuote) => {
                    if b == b'$' && bytes.get(i + 1) == Some(&b'(') {
                        stack.push(Frame::Paren { slot: ranges.len() });
                        ranges.push(i..OPEN);
                        i += 2;
                        continue;
                    }
                    match b {
                        b'"' => {
                            stack.pop();
                        }
                        b'`' => {
                            stack.push(Frame::Backtick { slot: ranges.len() });
                            ranges.push(i..OPEN);
                        }
                        _ => {}
                    }
                }
                Some(Frame::Backtick { slot }) => {
                    if b == b'`' {
                        let slot = *slot;
                        stack.pop();
                        ranges[slot].end = i + 1;
                        if !reads_like_a_command(&text[ranges[slot].start + 1..i]) {
                            literal.push(slot);
                        }
                    }
                }
            }
            i += 1;
        }
        let mut keep = vec![true; ranges.len()];
        for slot in literal {
            keep[slot] = false;
        }
        for (range, keep) in ranges.iter_mut().zip(keep.iter_mut()) {
            if range.end == OPEN {
                if complete {
                    *keep = false;
                } else {
                    range.end = text.len();
                }
            }
        }
        let mut keep = keep.into_iter();
        ranges.retain(|_| keep.next().unwrap_or(false));
        Substitutions { ranges }
    }

    /// The first substitution that starts at or after `at`: the outermost
    /// one, when several start inside a stretch of text.
    pub(super) fn first_from(&self, at: usize) -> Option<Range<usize>> {
        let i = self.ranges.partition_point(|r| r.start < at);
        self.ranges.get(i).cloned()
    }

    /// The substitution that starts exactly at `at`.
    pub(super) fn starting_at(&self, at: usize) -> Option<Range<usize>> {
        self.first_from(at).filter(|r| r.start == at)
    }

    /// The parts of `range` outside every substitution that starts inside
    /// it (a substitution that runs past its end is cut there).
    pub(super) fn outside(&self, range: Range<usize>) -> Vec<Range<usize>> {
        let mut parts = Vec::new();
        let mut at = range.start;
        while at < range.end {
            match self.first_from(at) {
                Some(sub) if sub.start < range.end => {
                    if sub.start > at {
                        parts.push(at..sub.start);
                    }
                    at = sub.end.min(range.end);
                }
                _ => {
                    parts.push(at..range.end);
                    break;
                }
            }
        }
        parts
    }

    /// The first match of `search` (which returns where in a slice it
    /// matches) at or after `from` that is not inside a substitution starting
    /// at or after `from`, with where the last skipped substitution ended
    /// (`from` when none was).
    pub(super) fn find_outside(
        &self,
        text: &str,
        from: usize,
        search: impl Fn(&str) -> Option<usize>,
    ) -> (Option<usize>, usize) {
        let mut at = from;
        loop {
            // Searched only up to the next substitution: each byte is read once.
            let next = self.first_from(at);
            let bound = next.as_ref().map_or(text.len(), |sub| sub.start);
            if let Some(hit) = search(&text[at..bound]) {
                return (Some(at + hit), at);
            }
            match next {
                Some(sub) if sub.end < text.len() => at = sub.end,
                Some(sub) => return (None, sub.end),
                None => return (None, at),
            }
        }
    }
}

fn is_word(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

/// Whether `text` may hold a substitution: a backtick, or `$(`, `<(`, `>(`
/// as [`Substitutions::of`] reads them.
pub(super) fn may_hold_one(text: &str) -> bool {
    let bytes = text.as_bytes();
    bytes.contains(&b'`')
        || text.match_indices('(').any(|(i, _)| {
            i > 0
                && match bytes[i - 1] {
                    b'$' => true,
                    b'<' | b'>' => i < 2 || !is_word(bytes[i - 2]),
                    _ => false,
                }
        })
}

/// Whether a backtick span's text is a command rather than a code span
/// holding a literal (see the module docs).
fn reads_like_a_command(inner: &str) -> bool {
    inner.bytes().any(|b| {
        b.is_ascii_whitespace() || matches!(b, b'|' | b';' | b'&' | b'<' | b'>' | b'(' | b')')
    })
}

#[cfg(test)]
mod tests;
