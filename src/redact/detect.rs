//! Value detectors: the secret spans inside a piece of text.
//!
//! One multi-pattern automaton finds every candidate in a single
//! left-to-right pass and says which pattern matched. Its literal prefixes
//! (`-----BEGIN`, `://`, `eyJ`, `ghp_`, the secret names …) drive the
//! search, and no pattern uses a Unicode word boundary, so the lazy DFA
//! never gives up on non-ASCII text. Each candidate is then checked and
//! measured by a few lines of code that know its shape. What each detector
//! replaces:
//!
//! | detector | recognises | replaces |
//! |---|---|---|
//! | private key | `-----BEGIN … PRIVATE KEY-----` | the whole block through `-----END … PRIVATE KEY-----`, or to the end of the text when the end line is missing |
//! | URL userinfo | `scheme://user:password@` | the password |
//! | user flag | `-u user:password`, `--user user:password` (after a space, a quote or the start) | the password; not when `user` is all digits (`-u 1000:1000` is a uid:gid) |
//! | auth scheme | `Bearer <credential>`, `Basic <credential>` (any case) | the credential, when it has 16+ characters, or 8+ with a digit, a symbol or two inner capitals (`Bearer tokens`, `Basic usage`, `Basic JavaScript` stay) |
//! | JWT | `eyJ…​.…​.…` (three base64url segments) | the token |
//! | provider token | the formats of `providers.rs` | the token (a webhook: its path) |
//! | assignment | `NAME=value`, `NAME: value`, `NAME := value`, `NAME => value`, the name optionally quoted (`"api_key": "…"`, `\"token\":\"…\"`), where `NAME` (up to three space-separated words: `API key: …`) is secret-named by `keys.rs` | the value: a quoted value's inside (to the end of the text if the quote never closes), else up to a space, a quote or one of `; & \| < > ( )` |
//! | header assignment | the same with a name ending in `authorization` or `cookie(s)` | the value to the end of the line (or a quote); for `authorization`, a first word followed by a space is the auth scheme (`Bearer`, `Basic`, `token`, `Api-Token` …) and stays |
//! | secret flag | `--NAME value` with a secret-named `NAME` | the value (not a following `--flag`) |
//!
//! Unquoted values starting with `<` or `$` are left alone (placeholders
//! such as `<token>`, redirections, the marker itself, and variable reads
//! such as `$GITHUB_TOKEN` or `$(cat /run/secrets/t)`, which show where a
//! secret comes from without being one); a quoted value is always replaced.
//! A name right after `$` or `${` is a variable read, not an assignment
//! (`-v $PWD:/src`). Every replaced span that ends inside an ASCII word is
//! extended to the word's end, so a marker is never glued to the rest of a
//! secret and the text around it keeps its word boundaries: redacting the
//! output again finds nothing new.
//!
//! Known over-redaction, accepted: a secret-named field's type in code
//! (`password: string` becomes `password: <redacted>`), `-u user:group` of
//! tools other than curl (`docker run -u app:app`), and an empty shell
//! assignment followed by a word (`TOKEN= cmd` hides `cmd`). Not detected:
//! XML elements (`<password>…</password>`), short flags (`mysql -pSECRET`,
//! `sshpass -p …`), and provider formats gitleaks can only match next to
//! the provider's name.
//!
//! Each accepted candidate also yields a *guard*: the range from its first
//! character (the name, the scheme, `-u`, `://`) to the end of its value.
//! Clipping never cuts inside a guard (see `clip` in the parent module), so
//! a clipped output never ends in half a construct that a second pass would
//! read differently (`Authorization: Bea…`).

use std::ops::Range;
use std::sync::LazyLock;

use regex::Regex;
use regex_automata::meta;

use super::keys::{is_header_name, last_words, secret_name};
use super::providers::{Provider, Shape, PROVIDERS};
use super::REDACTED;

/// Where the secrets of a text are.
#[derive(Debug, Default)]
pub(super) struct Found {
    /// Byte ranges to replace with [`REDACTED`], in the order found.
    pub spans: Vec<Range<usize>>,
    /// Byte ranges a clip must not cut into.
    pub guards: Vec<Range<usize>>,
}

/// A text with its spans replaced, and its guards in output coordinates.
#[derive(Debug)]
pub(super) struct Applied {
    pub text: String,
    pub guards: Vec<Range<usize>>,
}

/// The kinds of candidate, one pattern each, in priority order.
#[derive(Clone, Copy, Debug)]
enum Kind {
    PrivateKey,
    Userinfo,
    UserFlag,
    Scheme,
    Jwt,
    Provider(usize),
    Assignment,
    SecretFlag,
}

struct Detectors {
    /// One pattern per kind, leftmost-first in this order: a match says
    /// which pattern found it, so no capture groups are needed and the
    /// search stays in the lazy DFA.
    all: meta::Regex,
    kinds: Vec<Kind>,
    pem_end: Regex,
}

/// Longest secret name looked at to the left of its last word.
const MAX_NAME_BYTES: usize = 256;

static DETECTORS: LazyLock<Detectors> = LazyLock::new(|| {
    let words = last_words().join("|");
    let mut kinds = Vec::new();
    let mut alternatives = Vec::new();
    let mut add = |kind: Kind, pattern: String| {
        kinds.push(kind);
        alternatives.push(pattern);
    };
    add(
        Kind::PrivateKey,
        r"(?i:-----BEGIN[ A-Z0-9_-]{0,100}PRIVATE KEY(?: BLOCK)?-----)".into(),
    );
    add(
        Kind::Userinfo,
        r#"://[^\s/?#@:'"<>`]*:[^\s/?#@'"<>`]*@"#.into(),
    );
    add(Kind::UserFlag, r"(?:--user|-u)[ \t=]+".into());
    add(
        Kind::Scheme,
        r"(?-u:\b)(?i:bearer|basic)[ \t]+[A-Za-z0-9._~+/-]+=*".into(),
    );
    add(
        Kind::Jwt,
        r"(?-u:\b)eyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{2,}\.[A-Za-z0-9_=-]*".into(),
    );
    for (i, provider) in PROVIDERS.iter().enumerate() {
        let boundary = match provider.shape {
            Shape::Token => r"(?-u:\b)",
            Shape::AfterSlash(_) | Shape::Before { .. } => "",
        };
        add(
            Kind::Provider(i),
            format!("{boundary}(?:{})", provider.pattern),
        );
    }
    add(
        Kind::Assignment,
        format!(r#"(?i:{words})(?:\\?["'])?[ \t]{{0,8}}(?::=|=>|=|:)"#),
    );
    add(
        Kind::SecretFlag,
        format!(r"--[A-Za-z0-9_.-]*(?i:{words})[ \t]{{1,8}}"),
    );
    let all = meta::Regex::new_many(&alternatives).expect("the detector patterns compile");
    let pem_end = Regex::new(r"(?i:-----END[ A-Z0-9_-]{0,100}PRIVATE KEY(?: BLOCK)?-----)")
        .expect("the private-key end pattern compiles");
    Detectors {
        all,
        kinds,
        pem_end,
    }
});

/// The names of the provider formats, in table order (for the tests).
#[cfg(test)]
pub(super) fn provider_names() -> impl Iterator<Item = &'static str> {
    PROVIDERS.iter().map(|p: &Provider| p.name)
}

/// The shortest text with something to replace (`pwd=x`).
const SHORTEST_SECRET: usize = 5;

/// Finds the secrets in `text`, in time linear in its length.
pub(super) fn scan(text: &str) -> Found {
    let mut found = Found::default();
    if text.len() < SHORTEST_SECRET {
        return found;
    }
    let detectors = &*DETECTORS;
    let mut ends = Ends::default();
    for m in detectors.all.find_iter(text) {
        let kind = detectors.kinds[m.pattern().as_usize()];
        candidate(detectors, kind, text, m.range(), &mut ends, &mut found);
    }
    found
}

/// The last answers to the forward searches a candidate makes, reused by
/// the candidates after it: `TOKEN=TOKEN=TOKEN=…` or a run of `-----BEGIN`
/// lines without an end would otherwise search the same rest of the text
/// once per candidate.
#[derive(Default)]
struct Ends {
    /// `(from, end)`: the first stop character at or after any position in
    /// `from..=end` is at `end`; one entry for plain values, one for header
    /// values.
    value: [Option<(usize, usize)>; 2],
    /// `(from, end)`: the first private-key end line at or after `from`
    /// ends at `end` (`None`: there is none).
    pem: Option<(usize, Option<Range<usize>>)>,
}

impl Ends {
    fn pem_end(&mut self, pem_end: &Regex, text: &str, at: usize) -> usize {
        let cached = self
            .pem
            .as_ref()
            .filter(|(from, end)| *from <= at && end.as_ref().is_none_or(|end| at <= end.start));
        let end = match cached {
            Some((_, end)) => end.clone(),
            None => {
                let end = pem_end.find_at(text, at).map(|m| m.range());
                self.pem = Some((at, end.clone()));
                end
            }
        };
        end.map_or(text.len(), |end| end.end)
    }

    fn value_end(&mut self, text: &str, at: usize, header: bool) -> usize {
        let slot = &mut self.value[usize::from(header)];
        if let Some((from, end)) = *slot {
            if from <= at && at <= end {
                return end;
            }
        }
        let rest = &text[at..];
        let end = if header {
            rest.find(['\r', '\n', '"', '\'', '`', '…'])
        } else {
            rest.find(|c: char| {
                c.is_ascii_whitespace()
                    || matches!(
                        c,
                        '"' | '\'' | '`' | ';' | '&' | '|' | '<' | '>' | '(' | ')' | '…'
                    )
            })
        }
        .map_or(text.len(), |end| at + end);
        *slot = Some((at, end));
        end
    }
}

/// Checks one candidate and records what it redacts.
fn candidate(
    detectors: &Detectors,
    kind: Kind,
    text: &str,
    m: Range<usize>,
    ends: &mut Ends,
    found: &mut Found,
) {
    let bytes = text.as_bytes();
    match kind {
        Kind::PrivateKey => {
            let end = ends.pem_end(&detectors.pem_end, text, m.end);
            found.secret(text, m.start, m.start..end);
        }
        Kind::Userinfo => {
            // `://user:password@`: the password is after the first colon.
            let colon = m.start + 3 + text[m.start + 3..m.end].find(':').unwrap_or(0);
            found.secret(text, m.start, colon + 1..m.end - 1);
        }
        Kind::UserFlag => {
            let after_space = m.start == 0
                || matches!(
                    bytes[m.start - 1],
                    b' ' | b'\t' | b'\n' | b'\r' | b'"' | b'\''
                );
            if !after_space {
                return;
            }
            let value = value_at(text, m.end, false, ends);
            let word = &text[value.inner.clone()];
            // A URL (`redis-cli -u redis://:pw@host`) is the userinfo detector's.
            let Some(colon) = word.find(':').filter(|_| !word.contains("://")) else {
                return;
            };
            let user = &word[..colon];
            if !user.is_empty() && user.bytes().all(|b| b.is_ascii_digit()) {
                return;
            }
            let password = value.inner.start + colon + 1..value.inner.end;
            found.value(text, m.start..value.outer_end, password, value.quoted);
        }
        Kind::Scheme => {
            let credential_start = m.start
                + text[m.start..m.end]
                    .find([' ', '\t'])
                    .unwrap_or(m.end - m.start);
            let credential = text[credential_start..m.end].trim_start_matches([' ', '\t']);
            let start = m.end - credential.len();
            if looks_like_credential(credential) {
                found.secret(text, m.start, start..m.end);
            }
        }
        Kind::Jwt => found.secret(text, m.start, m.clone()),
        Kind::Provider(i) => provider(&PROVIDERS[i], text, m, found),
        Kind::Assignment => assignment(text, m, ends, found),
        Kind::SecretFlag => {
            let name = text[m.start + 2..m.end].trim_end_matches([' ', '\t']);
            if secret_name(name).is_none() {
                return;
            }
            let value = value_at(text, m.end, false, ends);
            if text[value.inner.start..].starts_with('-') && !value.quoted {
                return;
            }
            found.value(text, m.start..value.outer_end, value.inner, value.quoted);
        }
    }
}

/// A provider token: the match, adjusted by its shape.
fn provider(provider: &Provider, text: &str, m: Range<usize>, found: &mut Found) {
    let bytes = text.as_bytes();
    match provider.shape {
        Shape::Token => found.secret(text, m.start, m),
        Shape::AfterSlash(n) => {
            let Some((slash, _)) = text[m.clone()].match_indices('/').nth(n - 1) else {
                return;
            };
            found.secret(text, m.start, m.start + slash + 1..m.end);
        }
        Shape::Before { min, max, digits } => {
            let fits = |b: u8| {
                if digits {
                    b.is_ascii_digit()
                } else {
                    b.is_ascii_alphanumeric() || matches!(b, b'_' | b'~' | b'.')
                }
            };
            let mut start = m.start;
            while start > 0 && m.start - start < max && fits(bytes[start - 1]) {
                start -= 1;
            }
            // Digits may follow a word (`…/bot123456789:AA…`): the `:A…`
            // tail is distinctive enough.
            let before_is_word = !digits && start > 0 && is_word_byte(bytes[start - 1]);
            if m.start - start < min || before_is_word {
                return;
            }
            found.secret(text, start, start..m.end);
        }
    }
}

/// `NAME=value` and its relatives; `m` runs from the name's last word to the
/// end of the operator.
fn assignment(text: &str, m: Range<usize>, ends: &mut Ends, found: &mut Found) {
    let bytes = text.as_bytes();
    // `==` compares and `::` is a path: neither assigns.
    let op = bytes[m.end - 1];
    if bytes.get(m.end) == Some(&op) && (op == b'=' || op == b':') {
        return;
    }
    let name_end = m.start
        + text[m.start..m.end]
            .bytes()
            .take_while(u8::is_ascii_alphabetic)
            .count();
    let Some((name_start, name)) = secret_name_before(text, m.start, name_end) else {
        return;
    };
    let value = value_at(text, m.end, is_header_name(name), ends);
    let mut inner = value.inner;
    if name.ends_with("authorization") {
        inner.start = after_scheme(text, inner.clone());
    }
    found.value(text, name_start..value.outer_end, inner, value.quoted);
}

/// The start and the matched listed name of the secret name ending at
/// `name_end`, whose last word starts at `word_start`: the identifier
/// characters (`[A-Za-z0-9_.-]`) before it, then up to two more words
/// separated by single spaces or tabs (`API key`).
fn secret_name_before(
    text: &str,
    word_start: usize,
    name_end: usize,
) -> Option<(usize, &'static str)> {
    let bytes = text.as_bytes();
    let floor = name_end.saturating_sub(MAX_NAME_BYTES);
    let ident = |b: u8| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-');
    let mut start = word_start;
    while start > floor && ident(bytes[start - 1]) {
        start -= 1;
    }
    // `$PWD:/src`, `${TOKEN:-x}`: a variable read, not an assignment.
    if text[..start].ends_with('$') || text[..start].ends_with("${") {
        return None;
    }
    for extra_words in 0..3 {
        if extra_words > 0 {
            // One more word to the left, across one space or tab.
            if start < 2 || !matches!(bytes[start - 1], b' ' | b'\t') {
                return None;
            }
            let mut earlier = start - 1;
            while earlier > floor && ident(bytes[earlier - 1]) {
                earlier -= 1;
            }
            if earlier == start - 1 {
                return None;
            }
            start = earlier;
        }
        if let Some(name) = secret_name(&text[start..name_end]) {
            return Some((start, name));
        }
    }
    None
}

/// A value after an operator or a flag.
struct Value {
    /// What may be replaced: inside the quotes, or the unquoted word.
    inner: Range<usize>,
    /// Where the construct ends (after a closing quote).
    outer_end: usize,
    quoted: bool,
}

/// The value starting at `at` (after optional spaces and tabs): quoted
/// (`"…"`, `'…'`, `` `…` ``, `\"…\"`), else up to a stop character — for a
/// header, up to the end of the line or a quote. The clip mark `…` ends an
/// unquoted value: a clipped output never reads as a longer value.
fn value_at(text: &str, at: usize, header: bool, ends: &mut Ends) -> Value {
    let bytes = text.as_bytes();
    let mut start = at;
    while start < bytes.len() && matches!(bytes[start], b' ' | b'\t') {
        start += 1;
    }
    let rest = &text[start..];
    let quote = if rest.starts_with("\\\"") {
        Some("\\\"")
    } else if rest.starts_with(['"', '\'', '`']) {
        Some(&rest[..1])
    } else {
        None
    };
    if let Some(quote) = quote {
        let open = start + quote.len();
        return match text[open..].find(quote) {
            Some(close) => Value {
                inner: open..open + close,
                outer_end: open + close + quote.len(),
                quoted: true,
            },
            None => Value {
                inner: open..text.len(),
                outer_end: text.len(),
                quoted: true,
            },
        };
    }
    let end = ends.value_end(text, start, header);
    Value {
        inner: start..end,
        outer_end: end,
        quoted: false,
    }
}

/// Where an `Authorization` value's credentials start: after the scheme
/// (RFC 9110: `auth-scheme [ 1*SP ( token68 / #auth-param ) ]` — a first
/// word followed by spaces and more), else at the value's start.
fn after_scheme(text: &str, value: Range<usize>) -> usize {
    let v = &text[value.clone()];
    let word_len = v
        .bytes()
        .take_while(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
        .count();
    let rest = &v[word_len..];
    let spaced = rest.trim_start_matches([' ', '\t']);
    if word_len > 0 && spaced.len() < rest.len() && !spaced.is_empty() {
        value.end - spaced.len()
    } else {
        value.start
    }
}

/// Whether the word after `Bearer`/`Basic` is a credential rather than
/// prose: 8+ characters with a digit or a symbol or two inner capitals
/// (`dXNlcjpwYXNz`, not `JavaScript`), or 16+ characters. Shortening a word
/// never turns it into a credential, so a clipped output reads the same.
fn looks_like_credential(word: &str) -> bool {
    let n = word.len();
    let bytes = word.as_bytes();
    let symbol = bytes.iter().any(|b| !b.is_ascii_alphabetic());
    let inner_capitals = bytes
        .windows(2)
        .filter(|w| w[0].is_ascii_lowercase() && w[1].is_ascii_uppercase())
        .count();
    n >= 16 || (n >= 8 && (symbol || inner_capitals >= 2))
}

fn is_word_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

impl Found {
    /// A secret that is its whole construct from `context`.
    fn secret(&mut self, text: &str, context: usize, span: Range<usize>) {
        let span = extend_to_word_end(text, span);
        self.guards.push(context.min(span.start)..span.end);
        if !span.is_empty() {
            self.spans.push(span);
        }
    }

    /// A value inside a construct `outer`; empty values, and unquoted ones
    /// starting with `<` or `$`, are kept (a quoted `<redacted>` replaces
    /// itself).
    fn value(&mut self, text: &str, outer: Range<usize>, inner: Range<usize>, quoted: bool) {
        let keep = inner.is_empty() || (!quoted && text[inner.clone()].starts_with(['<', '$']));
        if keep {
            self.guards.push(outer);
            return;
        }
        let span = extend_to_word_end(text, inner);
        self.guards.push(outer.start..outer.end.max(span.end));
        self.spans.push(span);
    }
}

/// `span`, run on to the end of the ASCII word it ends in.
fn extend_to_word_end(text: &str, span: Range<usize>) -> Range<usize> {
    let bytes = text.as_bytes();
    let mut end = span.end;
    if end > span.start && is_word_byte(bytes[end - 1]) {
        while end < bytes.len() && is_word_byte(bytes[end]) {
            end += 1;
        }
    }
    span.start..end
}

/// `text` with `found`'s spans (merged where they overlap or touch) replaced
/// by [`REDACTED`], and its guards mapped onto the output.
pub(super) fn apply(text: &str, found: &Found) -> Applied {
    let mut spans = found.spans.clone();
    spans.sort_unstable_by_key(|s| s.start);
    let mut merged: Vec<Range<usize>> = Vec::with_capacity(spans.len());
    for span in spans {
        match merged.last_mut() {
            Some(last) if span.start <= last.end => last.end = last.end.max(span.end),
            _ => merged.push(span),
        }
    }
    let mut out = String::with_capacity(text.len());
    // (input start, input end, output start) of each replaced span.
    let mut placed = Vec::with_capacity(merged.len());
    let mut copied = 0;
    for span in &merged {
        out.push_str(&text[copied..span.start]);
        placed.push((span.start, span.end, out.len()));
        out.push_str(REDACTED);
        copied = span.end;
    }
    out.push_str(&text[copied..]);
    let map = |p: usize, is_end: bool| -> usize {
        let i = placed.partition_point(|&(start, _, _)| start < p);
        match i.checked_sub(1).map(|i| placed[i]) {
            None => p,
            Some((_, end, out_start)) if p < end => {
                if is_end {
                    out_start + REDACTED.len()
                } else {
                    out_start
                }
            }
            Some((_, end, out_start)) => out_start + REDACTED.len() + (p - end),
        }
    };
    let guards = found
        .guards
        .iter()
        .map(|g| map(g.start, false)..map(g.end, true))
        .collect();
    Applied { text: out, guards }
}

#[cfg(test)]
mod tests;
