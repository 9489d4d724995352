//! The JSON walk: every string through the detectors and the clip, every
//! secret-named key's scalars replaced, containers bounded (see the parent
//! module's docs for the rules; `full.rs` for the whole form's use of it).

use serde_json::{Map, Number, Value};

use super::argv::{reads_secret_stdin, Argv, Secret};
use super::detect::{apply, scan};
use super::subst::may_hold_one;
use super::{
    is_secret_key, CLIP_MARK, DETECT_WINDOW_BYTES, MAX_DEPTH, MAX_DEPTH_MARK, REDACTED,
    TRUNCATED_KEY,
};

/// How long a string may be.
#[derive(Clone, Copy, Debug)]
pub(super) enum Limit {
    /// At most this many code points (the excerpt).
    Chars(usize),
    /// At most this many bytes of JSON text inside the quotes, escapes
    /// counted (the whole form); a string at most [`MARK_MAX_BYTES`] over
    /// it is kept whole, since clipping it would not make it shorter.
    Bytes(usize),
}

/// The longest clip mark: `…[+N chars]` with a 20-digit `N` (UTF-8 bytes).
pub(super) const MARK_MAX_BYTES: usize = 32;

/// Upper bound of a serialized number (`-2.2250738585072014e-308`).
const NUMBER_COST: usize = 24;

/// One redaction pass over a value.
pub(super) struct Walk {
    limit: Limit,
    /// Entries a container keeps at most.
    entries: Option<usize>,
    /// Entries stop being added once `used` reaches this.
    budget: Option<usize>,
    /// The input is already redacted (an earlier pass's output): a string
    /// within the limit is taken as it is.
    redacted_input: bool,
    /// An upper estimate of the bytes output so far.
    used: usize,
    /// Whether anything of the input was left out: a string cut, an entry
    /// dropped, a container too deep.
    pub clipped: bool,
}

impl Walk {
    pub(super) fn new(limit: Limit, entries: Option<usize>, budget: Option<usize>) -> Walk {
        Walk {
            limit,
            entries,
            budget,
            redacted_input: false,
            used: 0,
            clipped: false,
        }
    }

    /// A pass over an earlier pass's output.
    pub(super) fn over_redacted(mut self) -> Walk {
        self.redacted_input = true;
        self
    }

    pub(super) fn run(&mut self, value: &Value) -> Value {
        self.value(value, 0, false, None)
    }

    fn value(&mut self, value: &Value, depth: usize, secret: bool, argv: Option<Argv>) -> Value {
        match value {
            // A depth marker is the walk's own, carried over like the others.
            Value::String(s) if secret && s == MAX_DEPTH_MARK => {
                self.string_out(MAX_DEPTH_MARK.to_owned())
            }
            Value::Null | Value::Bool(_) | Value::Number(_) | Value::String(_) if secret => {
                self.string_out(REDACTED.to_owned())
            }
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
            Value::String(s) => {
                let out = self.string(s, None);
                self.string_out(out)
            }
            Value::Array(_) | Value::Object(_) if depth >= MAX_DEPTH => {
                self.clipped = true;
                self.string_out(MAX_DEPTH_MARK.to_owned())
            }
            Value::Array(items) => self.array(items, depth, secret, argv),
            Value::Object(map) => self.object(map, depth, secret),
        }
    }

    /// A string redacted and clipped; `argv`: which part of an argv array's
    /// element is a secret.
    fn string(&mut self, s: &str, argv: Option<Secret>) -> String {
        if self.redacted_input && argv.is_none() && within(s, self.limit) {
            return s.to_owned();
        }
        let (out, cut) = redact_string(s, self.limit, argv);
        self.clipped |= cut;
        out
    }

    fn string_out(&mut self, out: String) -> Value {
        self.used += string_cost(&out);
        Value::String(out)
    }

    fn full(&self, kept: usize) -> bool {
        self.entries.is_some_and(|max| kept >= max) || self.budget.is_some_and(|b| self.used >= b)
    }

    fn array(&mut self, items: &[Value], depth: usize, secret: bool, argv: Option<Argv>) -> Value {
        self.used += 2;
        let (items, carried) = match items.split_last() {
            Some((Value::String(last), rest)) => match parse_more_marker(last) {
                Some(n) => (rest, n),
                None => (items, 0),
            },
            _ => (items, 0),
        };
        let mut argv = argv.unwrap_or_default();
        let mut out = Vec::with_capacity(items.len().min(self.entries.unwrap_or(256)) + 1);
        for item in items {
            if self.full(out.len()) {
                break;
            }
            self.used += 1;
            let out_item = match item {
                Value::String(s) if !secret => {
                    // The element's role is read from its redacted text, as a
                    // second pass reads it (`-----BEGIN …` is no flag once it
                    // is `<redacted>`).
                    let plain = self.string(s, None);
                    let out = match argv.next(Some(&plain)) {
                        Some(part) => self.string(s, Some(part)),
                        None => plain,
                    };
                    self.string_out(out)
                }
                _ => {
                    argv.next(None);
                    self.value(item, depth + 1, secret, None)
                }
            };
            out.push(out_item);
        }
        let dropped = (items.len() - out.len()) as u64;
        self.clipped |= dropped > 0;
        let more = dropped.saturating_add(carried);
        if more > 0 {
            let marker = format!("<+{more} more>");
            self.used += 1 + string_cost(&marker);
            out.push(Value::String(marker));
        }
        Value::Array(out)
    }

    fn object(&mut self, map: &Map<String, Value>, depth: usize, secret: bool) -> Value {
        self.used += 2;
        // A marker from an earlier pass: carried over, not counted as an entry.
        let carried = match map.get(TRUNCATED_KEY) {
            Some(Value::Number(n)) => n.as_u64().filter(|&n| n > 0),
            _ => None,
        };
        let is_marker = |k: &str| carried.is_some() && k == TRUNCATED_KEY;
        let secret_pair = !secret && is_secret_pair(map);
        let command = command_of(map);
        let secret_stdin = !secret && feeds_a_secret(map);
        let total = map.len() - usize::from(carried.is_some());
        let mut out = Map::new();
        let mut consumed = 0usize;
        let mut collisions = 0u64;
        for (key, value) in map {
            if is_marker(key) {
                continue;
            }
            if self.full(out.len()) {
                break;
            }
            consumed += 1;
            let out_key = self.string(key, None);
            if out.contains_key(&out_key) {
                // Two keys redacted or clipped to the same text.
                collisions += 1;
                continue;
            }
            self.used += 2 + string_cost(&out_key);
            let value_secret = secret
                || is_secret_key(key)
                || (secret_pair && key.eq_ignore_ascii_case("value"))
                || (secret_stdin && key.eq_ignore_ascii_case("stdin"));
            let argv = match value {
                Value::Array(_) => command.map(Argv::after_command),
                _ => None,
            };
            let out_value = self.value(value, depth + 1, value_secret, argv);
            out.insert(out_key, out_value);
        }
        let dropped = ((total - consumed) as u64).saturating_add(collisions);
        self.clipped |= dropped > 0;
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

/// Whether `map` is a `{name, value}` / `{key, value}` pair (HAR and
/// Postman headers, Kubernetes and ECS environment lists, AWS tags; the
/// three field names in any ASCII case) whose name is secret-named.
fn is_secret_pair(map: &Map<String, Value>) -> bool {
    let has_value = map.keys().any(|k| k.eq_ignore_ascii_case("value"));
    has_value
        && map.iter().any(|(k, v)| {
            (k.eq_ignore_ascii_case("name") || k.eq_ignore_ascii_case("key"))
                && v.as_str().is_some_and(is_secret_key)
        })
}

/// Whether `map` runs a command that reads a secret from its standard input
/// (`--password-stdin`, `--askpass`, `--with-token` in its `command` or
/// one of its arrays, `args`): its `stdin` field then holds the secret.
fn feeds_a_secret(map: &Map<String, Value>) -> bool {
    map.keys().any(|k| k.eq_ignore_ascii_case("stdin"))
        && map.values().any(|v| match v {
            Value::String(s) => reads_secret_stdin(s),
            Value::Array(items) => items
                .iter()
                .any(|item| item.as_str().is_some_and(reads_secret_stdin)),
            _ => false,
        })
}

/// The command an object names for its argv arrays: its `command`, `cmd`,
/// `program`, `executable` or `entrypoint` (a string, or an array's first
/// string).
fn command_of(map: &Map<String, Value>) -> Option<&str> {
    const NAMES: [&str; 5] = ["command", "cmd", "program", "executable", "entrypoint"];
    map.iter()
        .filter(|(k, _)| NAMES.iter().any(|n| k.eq_ignore_ascii_case(n)))
        .find_map(|(_, v)| match v {
            Value::String(s) => Some(s.as_str()),
            Value::Array(items) => items.first().and_then(Value::as_str),
            _ => None,
        })
}

/// Whether a string of an earlier pass's output is within `limit` as is.
fn within(s: &str, limit: Limit) -> bool {
    match limit {
        Limit::Bytes(max) => escaped_len(s) <= max + MARK_MAX_BYTES,
        Limit::Chars(_) => false,
    }
}

/// Passes a string gets to settle (see [`redact_string`]).
const MAX_PASSES: usize = 4;

/// A string value or key: detected, then clipped. When the result may read
/// differently to a second pass — it holds a substitution (whose reading
/// depends on the whole text), or a replaced span held a quote, a backtick,
/// a backslash or a parenthesis of a construct around it — passes follow
/// until one leaves it as it is, so redacting the output again changes
/// nothing. Real text settles on the second pass; a string that has not
/// settled after [`MAX_PASSES`] becomes `<redacted>`. Returns whether
/// anything was cut.
pub(super) fn redact_string(s: &str, limit: Limit, argv: Option<Secret>) -> (String, bool) {
    let mut cut = false;
    let mut unsettling = false;
    let (mut current, changed) = one_pass(s, limit, argv, &mut cut, &mut unsettling);
    if !changed || !(unsettling || may_hold_one(&current)) {
        return (current, cut);
    }
    for _ in 1..MAX_PASSES {
        let (next, changed) = one_pass(&current, limit, argv, &mut cut, &mut unsettling);
        if !changed {
            return (next, cut);
        }
        current = next;
    }
    (REDACTED.to_owned(), cut)
}

/// One pass of [`redact_string`]: the detectors run on the string before it
/// is cut, so a secret straddling the cut is replaced whole; they read the
/// part that may be shown plus [`DETECT_WINDOW_BYTES`]. A clip mark the
/// string already ends with is carried over and its count added to. Returns
/// the text and whether it differs from `s`; `cut` is set when this pass
/// cut something.
fn one_pass(
    s: &str,
    limit: Limit,
    argv: Option<Secret>,
    cut: &mut bool,
    unsettling: &mut bool,
) -> (String, bool) {
    let (body, carried) = split_mark(s);
    let read_to = match limit {
        Limit::Chars(n) => body
            .char_indices()
            .nth(n)
            .map(|(cut, _)| cut + DETECT_WINDOW_BYTES),
        Limit::Bytes(max) => (body.len() > max).then_some(max + DETECT_WINDOW_BYTES),
    };
    let window = match read_to {
        Some(end) if end < body.len() => &body[..char_floor(body, end)],
        _ => body,
    };
    let whole = window.len() == body.len();
    // A body before a clip mark is the first part of a longer string too.
    let mut found = scan(window, whole && carried == 0);
    if let Some(from) = argv.and_then(|part| part.start(body)) {
        if from < window.len() {
            found.literal_to_end(window, from);
        }
    }
    if whole && found.spans.is_empty() && !over(window, limit, carried) {
        return (s.to_owned(), false);
    }
    *unsettling |= found.may_unsettle(window);
    let applied = apply(window, &found);
    let rest = if whole {
        0
    } else {
        body[window.len()..].chars().count()
    };
    let (out, this_cut) = clip(applied.text, &applied.guards, limit, rest, carried);
    *cut |= this_cut;
    let changed = out != s;
    (out, changed)
}

/// Whether `text` (with a carried mark) is over `limit`.
fn over(text: &str, limit: Limit, carried: u64) -> bool {
    match limit {
        Limit::Chars(n) => text.chars().nth(n).is_some(),
        Limit::Bytes(max) => {
            escaped_len(text) + if carried > 0 { mark(carried).len() } else { 0 }
                > max + MARK_MAX_BYTES
        }
    }
}

/// `s` cut to the limit and marked, when longer or when `rest` characters
/// of its input were not read; the cut moved back to the start of any guard
/// it would fall inside. `carried`: the count of a mark the input had.
fn clip(
    mut s: String,
    guards: &[std::ops::Range<usize>],
    limit: Limit,
    rest: usize,
    carried: u64,
) -> (String, bool) {
    let over = match limit {
        Limit::Chars(n) => s.char_indices().nth(n).map(|(cut, _)| cut),
        Limit::Bytes(max) => {
            let marked = escaped_len(&s) + if carried > 0 { mark(carried).len() } else { 0 };
            (marked > max + MARK_MAX_BYTES).then(|| byte_cut(&s, max))
        }
    };
    let mut cut = match over {
        Some(cut) => cut,
        None if rest > 0 => s.len(),
        None => {
            if carried > 0 {
                s.push_str(&mark(carried));
            }
            return (s, false);
        }
    };
    while let Some(guard) = guards.iter().find(|g| g.start < cut && cut < g.end) {
        cut = guard.start;
    }
    let cut_chars = (s[cut..].chars().count() + rest) as u64;
    s.truncate(cut);
    s.push_str(&mark(cut_chars.saturating_add(carried)));
    (s, true)
}

/// The clip mark for `n` characters cut: `…[+n chars]`.
pub(super) fn mark(n: u64) -> String {
    format!("{CLIP_MARK}[+{n} chars]")
}

/// `s` without the clip mark it ends with, and the mark's count (0: none).
/// Only what [`mark`] writes counts: no leading zero, never 0.
pub(super) fn split_mark(s: &str) -> (&str, u64) {
    let Some(head) = s.strip_suffix(" chars]") else {
        return (s, 0);
    };
    let Some(open) = head.rfind("[+") else {
        return (s, 0);
    };
    let digits = &head[open + 2..];
    let canonical = !digits.is_empty()
        && digits.bytes().all(|b| b.is_ascii_digit())
        && !digits.starts_with('0');
    let Some(body) = head[..open].strip_suffix(CLIP_MARK) else {
        return (s, 0);
    };
    match digits.parse::<u64>() {
        Ok(n) if canonical => (body, n),
        _ => (s, 0),
    }
}

/// Where to cut `s` so that what is kept has at most `max` bytes of JSON
/// text (escapes counted).
fn byte_cut(s: &str, max: usize) -> usize {
    let mut cost = 0;
    for (at, c) in s.char_indices() {
        cost += char_cost(c);
        if cost > max {
            return at;
        }
    }
    s.len()
}

/// The bytes `c` takes inside a JSON string as `serde_json` writes it.
fn char_cost(c: char) -> usize {
    match c {
        '"' | '\\' | '\u{8}' | '\t' | '\n' | '\u{c}' | '\r' => 2,
        c if (c as u32) < 0x20 => 6,
        c => c.len_utf8(),
    }
}

/// The bytes `s` takes inside a JSON string as `serde_json` writes it.
pub(super) fn escaped_len(s: &str) -> usize {
    s.bytes()
        .map(|b| match b {
            b'"' | b'\\' | 0x08 | b'\t' | b'\n' | 0x0c | b'\r' => 2,
            b if b < 0x20 => 6,
            _ => 1,
        })
        .sum()
}

/// Upper bound of the serialized size of a string: quotes, and six bytes for
/// every byte that may need an escape.
pub(super) fn string_cost(s: &str) -> usize {
    let escapes = s
        .bytes()
        .filter(|&b| b < 0x20 || b == b'"' || b == b'\\')
        .count();
    s.len() + 2 + escapes * 5
}

/// The largest char boundary of `s` at or below `at`.
fn char_floor(s: &str, at: usize) -> usize {
    let mut at = at.min(s.len());
    while !s.is_char_boundary(at) {
        at -= 1;
    }
    at
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
