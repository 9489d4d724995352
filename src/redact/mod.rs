//! Redaction of call arguments and free text before they are stored, shown,
//! emitted or logged (contract §4 and §16, "Redaction v2"). Raw arguments
//! never leave the gate; this is the only way out.
//!
//! # What is redacted
//!
//! * **Secret keys.** A value under a key that [`is_secret_key`] names
//!   becomes `"<redacted>"`, whatever its type (a nested object or array
//!   included). Key names are split into words (ASCII case, camelCase,
//!   kebab-case, dots, spaces, underscores) and secret when their words end
//!   in a name of [`SECRET_NAMES`]: `password passwords passwd pwd passphrase
//!   secret secrets client-secret secret-key token access-token refresh-token
//!   session-token auth-token api-token id-token api-key api-keys apikey
//!   access-key access-keys private-key private-keys account-key signing-key
//!   encryption-key master-key auth authorization proxy-authorization cookie
//!   cookies set-cookie credential credentials creds` — every version-1 name
//!   included, and version 1's `*_token` rule generalised. The rule, the
//!   run-together forms (`PGPASSWORD`) and the look-alikes decided either way
//!   (`author`, `max_tokens`, `auth_mode`, `passage`, `keyboard`, `PWD`) are
//!   documented in `keys.rs`.
//! * **Secret spans in strings.** Every string — values and object keys in
//!   [`redact`], any free text in [`redact_text`] — passes the value
//!   detectors of `detect.rs`, which replace only the secret span with
//!   `<redacted>`: auth schemes (`Authorization: Bearer <redacted>`,
//!   `Basic <redacted>`), JWTs, URL userinfo passwords
//!   (`postgres://app:<redacted>@db/prod`), `curl -u user:<redacted>`,
//!   secret-named assignments (`export GITHUB_TOKEN=<redacted> && gh pr list`,
//!   `password: "<redacted>"`, `--api-key <redacted>`), PEM private-key blocks
//!   (the whole block), and the provider token formats of `providers.rs`
//!   (AWS, GitHub, GitLab, Slack, OpenAI, Anthropic, Stripe, Google, npm,
//!   PyPI, Twilio, SendGrid, Shopify, DigitalOcean, Hugging Face, Azure and
//!   about fifty more), whose patterns come from the gitleaks default rule
//!   set (`config/gitleaks.toml`, github.com/gitleaks/gitleaks).
//!
//! # Limits (unchanged from version 1)
//!
//! * a string longer than 256 Unicode code points keeps its first 256 and
//!   gets `…`; object keys are clipped the same way (keys are output too);
//! * an array or object at depth 64 or more becomes `"<max-depth>"`, the
//!   root being at depth 0 — so 64 nested containers survive, the 65th is
//!   replaced;
//! * a container keeps at most 256 entries, and entries stop being added
//!   once the output reaches [`OUTPUT_BUDGET`] bytes; an array marks what it
//!   dropped with a trailing `"<+N more>"`, an object with a
//!   `"<truncated>": N` entry. The serialized output never exceeds
//!   [`MAX_OUTPUT_BYTES`].
//!
//! # Order of operations
//!
//! For each object entry: the secret-key test on the original key (so a key
//! clipped or redacted on output still hides its value); then the key and
//! every string value are *detected, then clipped*: the detectors run on the
//! string before it is cut, so a secret straddling code point 256 is
//! replaced whole instead of leaving its first half visible. Detection looks
//! at the first 256 code points plus [`DETECT_WINDOW_BYTES`] — what starts
//! later is cut anyway, and a construct still open at the window's end (a
//! private key without its end line, an unclosed quote) is redacted to that
//! end. The cut never falls inside a detected construct: it moves back to
//! the construct's start (`… TOKEN=<redacted>` or `…`, never `TOKEN=<reda…`
//! or `Authorization: Bea…`), so the output may hold fewer than 256 code
//! points before the `…`.
//!
//! Redacting twice changes nothing: the clip of a clipped string is itself,
//! the detectors find nothing new in their own output (a marker keeps the
//! word boundaries around it, and a value starting with `<` is not a
//! secret), the markers are recognised and carried over (their counts
//! included), and the output budget is charged by the output, so a second
//! pass sees the same — or smaller — costs at every point and keeps every
//! entry.
//!
//! # Cost
//!
//! The walk recurses at most [`MAX_DEPTH`] levels, so arbitrarily deep input
//! is safe. Detection is one pass of one multi-pattern automaton over each
//! string, linear in its length (a candidate's forward searches are shared
//! with the candidates after it). Medians on the two-core development
//! machine (`cargo bench --bench micro -- redact`): [`redact_text`] on a
//! 20 KB shell command with 127 secrets (bearer JWTs, exported tokens,
//! database URLs, private keys) 91 µs, on the same shapes without a secret
//! 35 µs; [`redact`] on an argument object holding that command 38 µs, on a
//! 10 KB argument object 38 µs, on a 1 MB one 295 µs.

use std::borrow::Cow;

use serde_json::{Map, Number, Value};

mod detect;
mod keys;
mod providers;

pub use keys::{is_secret_key, SECRET_NAMES};

/// What a secret-keyed value becomes.
pub const REDACTED: &str = "<redacted>";
/// What a container nested too deep becomes.
pub(crate) const MAX_DEPTH_MARK: &str = "<max-depth>";
/// Appended to a clipped string.
pub(crate) const CLIP_MARK: char = '…';
/// The object key that counts the entries an object lost.
pub(crate) const TRUNCATED_KEY: &str = "<truncated>";
/// Strings (and keys) longer than this many code points are clipped.
pub const MAX_STRING_CHARS: usize = 256;
/// Containers at this depth or deeper (root = 0) are replaced.
pub const MAX_DEPTH: usize = 64;
/// A container keeps at most this many entries.
pub const MAX_ENTRIES: usize = 256;
/// Entries stop being added once the output reaches this many bytes.
pub(crate) const OUTPUT_BUDGET: usize = 64 * 1024;
/// Hard bound on the serialized (compact JSON) size of any output: the
/// budget, plus the last entry admitted below it (at most a clipped key and a
/// clipped string, fully escaped) and one marker per open container.
pub const MAX_OUTPUT_BYTES: usize = OUTPUT_BUDGET + 8 * 1024;

/// Bytes after the first [`MAX_STRING_CHARS`] code points that the detectors
/// still read before a string is clipped.
pub(crate) const DETECT_WINDOW_BYTES: usize = 8 * 1024;

/// Upper bound of a serialized number (`-2.2250738585072014e-308`).
const NUMBER_COST: usize = 24;

/// The redacted copy of `value` (see the module docs for the rules).
pub fn redact(value: &Value) -> Value {
    #[cfg(test)]
    calls::count();
    Redactor { used: 0 }.value(value, 0)
}

/// `text` with every secret span the value detectors find replaced by
/// `<redacted>`, for free text that leaves the worker outside an argument
/// object: session titles, descriptions and metadata values, log fields.
/// Nothing is clipped; text without a secret is returned as it is.
pub fn redact_text(text: &str) -> Cow<'_, str> {
    #[cfg(test)]
    calls::count();
    let found = detect::scan(text);
    if found.spans.is_empty() {
        return Cow::Borrowed(text);
    }
    Cow::Owned(detect::apply(text, &found).text)
}

/// How many times this thread entered the redactor (unit tests only): the
/// gate's tests prove continue and deny never do.
#[cfg(test)]
pub(crate) mod calls {
    use std::cell::Cell;

    thread_local! {
        static CALLS: Cell<u64> = const { Cell::new(0) };
    }

    pub(super) fn count() {
        CALLS.with(|c| c.set(c.get() + 1));
    }

    /// Entries into [`super::redact`] and [`super::redact_text`] so far on
    /// this thread.
    pub(crate) fn so_far() -> u64 {
        CALLS.with(Cell::get)
    }
}

/// A string value or key: detected, then clipped (see "Order of
/// operations" in the module docs).
fn redact_string(s: &str) -> String {
    let (window, whole) = match s.char_indices().nth(MAX_STRING_CHARS) {
        None => (s, true),
        Some((cut, _)) => {
            let mut end = cut + DETECT_WINDOW_BYTES;
            if end >= s.len() {
                (s, true)
            } else {
                while !s.is_char_boundary(end) {
                    end -= 1;
                }
                (&s[..end], false)
            }
        }
    };
    let found = detect::scan(window);
    let applied = detect::apply(window, &found);
    clip(applied.text, &applied.guards, !whole)
}

/// `s` cut to its first 256 code points plus `…` when longer (or when
/// `cut_short`, its input having been longer than what was read), the cut
/// moved back to the start of any guard it would fall inside.
fn clip(mut s: String, guards: &[std::ops::Range<usize>], cut_short: bool) -> String {
    let mut cut = match s.char_indices().nth(MAX_STRING_CHARS) {
        Some((cut, _)) => cut,
        None if cut_short => s.len(),
        None => return s,
    };
    while let Some(guard) = guards.iter().find(|g| g.start < cut && cut < g.end) {
        cut = guard.start;
    }
    s.truncate(cut);
    s.push(CLIP_MARK);
    s
}

/// One redaction pass; `used` estimates (from above) the bytes output so far.
struct Redactor {
    used: usize,
}

impl Redactor {
    fn value(&mut self, value: &Value, depth: usize) -> Value {
        match value {
            Value::Null => {
                self.used += 4;
                Value::Null
            }
            Value::Bool(b) => {
                self.used += 5;
                Value::Bool(*b)
            }
            Value::Number(n) => {
                self.used += NUMBER_COST;
                Value::Number(n.clone())
            }
            Value::String(s) => self.string(redact_string(s)),
            Value::Array(_) | Value::Object(_) if depth >= MAX_DEPTH => {
                self.string(MAX_DEPTH_MARK.to_owned())
            }
            Value::Array(items) => self.array(items, depth),
            Value::Object(map) => self.object(map, depth),
        }
    }

    fn string(&mut self, out: String) -> Value {
        self.used += string_cost(&out);
        Value::String(out)
    }

    fn array(&mut self, items: &[Value], depth: usize) -> Value {
        self.used += 2;
        let (items, carried) = match items.split_last() {
            Some((Value::String(last), rest)) => match parse_more_marker(last) {
                Some(n) => (rest, n),
                None => (items, 0),
            },
            _ => (items, 0),
        };
        let mut out = Vec::with_capacity(items.len().min(MAX_ENTRIES) + 1);
        for item in items {
            if out.len() == MAX_ENTRIES || self.used >= OUTPUT_BUDGET {
                break;
            }
            self.used += 1;
            out.push(self.value(item, depth + 1));
        }
        let dropped = (items.len() - out.len()) as u64;
        let more = dropped.saturating_add(carried);
        if more > 0 {
            let marker = format!("<+{more} more>");
            self.used += 1 + string_cost(&marker);
            out.push(Value::String(marker));
        }
        Value::Array(out)
    }

    fn object(&mut self, map: &Map<String, Value>, depth: usize) -> Value {
        self.used += 2;
        // A marker from an earlier pass: carried over, not counted as an entry.
        let carried = match map.get(TRUNCATED_KEY) {
            Some(Value::Number(n)) => n.as_u64().filter(|&n| n > 0),
            _ => None,
        };
        let is_marker = |k: &str| carried.is_some() && k == TRUNCATED_KEY;
        let total = map.len() - usize::from(carried.is_some());
        let mut out = Map::new();
        let mut consumed = 0usize;
        let mut collisions = 0u64;
        for (key, value) in map {
            if is_marker(key) {
                continue;
            }
            if out.len() == MAX_ENTRIES || self.used >= OUTPUT_BUDGET {
                break;
            }
            consumed += 1;
            let out_key = redact_string(key);
            if out.contains_key(&out_key) {
                // Two long keys with the same first 256 code points.
                collisions += 1;
                continue;
            }
            self.used += 2 + string_cost(&out_key);
            let out_value = if is_secret_key(key) {
                self.string(REDACTED.to_owned())
            } else {
                self.value(value, depth + 1)
            };
            out.insert(out_key, out_value);
        }
        let dropped = ((total - consumed) as u64).saturating_add(collisions);
        let mut more = dropped.saturating_add(carried.unwrap_or(0));
        if more > 0 {
            if out.contains_key(TRUNCATED_KEY) {
                // An ordinary entry of that name gives way to the marker.
                more = more.saturating_add(1);
            }
            self.used += 2 + string_cost(TRUNCATED_KEY) + NUMBER_COST;
            out.insert(TRUNCATED_KEY.to_owned(), Value::Number(Number::from(more)));
        }
        Value::Object(out)
    }
}

/// Upper bound of the serialized size of a string: quotes, and six bytes for
/// every byte that may need an escape.
fn string_cost(s: &str) -> usize {
    let escapes = s
        .bytes()
        .filter(|&b| b < 0x20 || b == b'"' || b == b'\\')
        .count();
    s.len() + 2 + escapes * 5
}

/// `N` of a `"<+N more>"` marker as this module writes it.
fn parse_more_marker(s: &str) -> Option<u64> {
    let digits = s.strip_prefix("<+")?.strip_suffix(" more>")?;
    // Only what this module writes: no leading zero, never 0.
    let canonical = !digits.is_empty()
        && digits.bytes().all(|b| b.is_ascii_digit())
        && !digits.starts_with('0');
    if !canonical {
        return None;
    }
    digits.parse().ok()
}

#[cfg(test)]
mod tests;
