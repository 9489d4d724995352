//! One call, one identity (`architecture/contract.md` § One held call, one
//! identity). PURE.
//!
//! A call's identity is `(session_id, function_call_id, turn_id,
//! function_id, digest)`. The first two are a record's key; the digest is
//! SHA-256 over the canonical JSON of the call's arguments without the
//! harness's stamp: keys sorted by their bytes, numbers written by value
//! (`1`, `1.0` and `1e0` are one number), no whitespace. The top-level
//! `fs_scope` of a call the harness stamps (`shell::*` except
//! `shell::filesystem::*`, `coder::*`, `fp::pipe`) is left out: the harness
//! overwrites it on every delivery, and stamps it again with new grants when
//! a released call runs on, so it is the harness's, not the call's.
//!
//! Why it matters: the harness keys a parked call by its id, and models and
//! gateways do reuse ids. A call that meets a live record of another call
//! under its key and answered `hold` would ride on that record: a human who
//! allows what the inbox shows would release what the harness parked last.
//!
//! The walk is iterative, so no depth of input can exhaust the stack.
//!
//! # Where the digest lives
//!
//! A record keeps it under `arguments_digest` (lowercase hex) in state
//! only: it is left out of what the inbox, the events and the pages show,
//! because a digest of unredacted arguments would let anyone who sees the
//! record test guesses of a short redacted secret (a PIN, a one-time code)
//! offline. A record written before identities were kept has none; see
//! [`Meeting`].

use std::io::Write;

use serde_json::{Map, Number, Value};
use sha2::{Digest, Sha256};

use super::record::PendingRecord;
use crate::policy::{harness_stamps, STAMP};

/// The identity of one delivered call (made only when it matters: a live
/// record under the call's key, a review, a hold).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct Identity {
    /// The session.
    pub(crate) session_id: String,
    /// The call's id.
    pub(crate) function_call_id: String,
    /// The turn the call belongs to.
    pub(crate) turn_id: String,
    /// The function it targets.
    pub(crate) function_id: String,
    /// [`digest`] of its arguments, lowercase hex.
    pub(crate) digest: String,
}

impl Identity {
    /// The identity of a call with these ids and `arguments` (absent
    /// arguments are `{}`, as a record shows them).
    pub(crate) fn of(
        session_id: &str,
        function_call_id: &str,
        turn_id: &str,
        function_id: &str,
        arguments: Option<&Value>,
    ) -> Identity {
        Identity {
            session_id: session_id.to_owned(),
            function_call_id: function_call_id.to_owned(),
            turn_id: turn_id.to_owned(),
            function_id: function_id.to_owned(),
            digest: digest(function_id, arguments),
        }
    }

    /// How this call meets the live record under its key.
    pub(crate) fn meets(&self, record: &PendingRecord) -> Meeting {
        if record.session_id != self.session_id || record.function_call_id != self.function_call_id
        {
            return Meeting::Other;
        }
        match record.digest.as_deref() {
            None => Meeting::Unknown,
            Some(digest)
                if digest == self.digest
                    && record.turn_id == self.turn_id
                    && record.function_id == self.function_id =>
            {
                Meeting::Same
            }
            Some(_) => Meeting::Other,
        }
    }
}

/// How a delivered call meets the live record under its key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Meeting {
    /// The record is this call's: a redelivery, or the call released and
    /// run on.
    Same,
    /// The record is another call's that happens to carry the same id.
    Other,
    /// The record was written before identities were kept. The gate treats
    /// it as another call's (deny, record untouched): a redelivery comes
    /// within seconds of its first delivery, so one that spans the upgrade
    /// is unlikely, and denying it costs a retry while holding it could
    /// release the wrong call.
    Unknown,
}

/// The digest of a call's arguments (lowercase hex SHA-256 of their
/// canonical JSON, the harness's stamp left out; see the module doc).
pub fn digest(function_id: &str, arguments: Option<&Value>) -> String {
    let empty = Value::Object(Map::new());
    let arguments = arguments.unwrap_or(&empty);
    let mut sink = Sink(Sha256::new());
    let skip_stamp = harness_stamps(function_id);
    write_canonical(&mut sink, arguments, skip_stamp);
    let bytes = sink.0.finalize();
    let mut hex = String::with_capacity(bytes.len() * 2);
    for byte in bytes {
        hex.push(char::from(HEX[usize::from(byte >> 4)]));
        hex.push(char::from(HEX[usize::from(byte & 0x0f)]));
    }
    hex
}

const HEX: &[u8; 16] = b"0123456789abcdef";

/// Feeds written bytes into the hash.
struct Sink(Sha256);

impl Write for Sink {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.update(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// One step of the walk.
enum Step<'v> {
    Value(&'v Value),
    Key(&'v str),
    Text(&'static [u8]),
}

/// Writes the canonical JSON of `value` into `out`, without recursion.
/// `skip_stamp`: leave out the top-level `fs_scope` key.
fn write_canonical(out: &mut Sink, value: &Value, skip_stamp: bool) {
    let mut stack = vec![Step::Value(value)];
    let mut top = true;
    while let Some(step) = stack.pop() {
        match step {
            Step::Text(text) => out.0.update(text),
            Step::Key(key) => {
                string(out, key);
                out.0.update(b":");
            }
            Step::Value(value) => {
                let at_top = std::mem::replace(&mut top, false);
                match value {
                    Value::Null => out.0.update(b"null"),
                    Value::Bool(true) => out.0.update(b"true"),
                    Value::Bool(false) => out.0.update(b"false"),
                    Value::Number(n) => out.0.update(number(n).as_bytes()),
                    Value::String(s) => string(out, s),
                    Value::Array(items) => {
                        out.0.update(b"[");
                        stack.push(Step::Text(b"]"));
                        for (i, item) in items.iter().enumerate().rev() {
                            stack.push(Step::Value(item));
                            if i > 0 {
                                stack.push(Step::Text(b","));
                            }
                        }
                    }
                    Value::Object(map) => {
                        let mut entries: Vec<(&String, &Value)> = map
                            .iter()
                            .filter(|(k, _)| !(at_top && skip_stamp && k.as_str() == STAMP))
                            .collect();
                        entries.sort_unstable_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
                        out.0.update(b"{");
                        stack.push(Step::Text(b"}"));
                        for (i, (key, item)) in entries.into_iter().enumerate().rev() {
                            stack.push(Step::Value(item));
                            stack.push(Step::Key(key));
                            if i > 0 {
                                stack.push(Step::Text(b","));
                            }
                        }
                    }
                }
            }
        }
    }
}

/// A JSON string, escaped as `serde_json` writes it.
fn string(out: &mut Sink, s: &str) {
    // Writing to the hash cannot fail.
    let _ = serde_json::to_writer(&mut *out, s);
}

/// A number by its value: an integral value as a plain integer (`1.0` is
/// `1`, `-0.0` is `0`), any other as the shortest text that reads back as
/// it. Two numbers get one text exactly when their values are equal.
fn number(n: &Number) -> String {
    if let Some(i) = n.as_i64() {
        return i.to_string();
    }
    if let Some(u) = n.as_u64() {
        return u.to_string();
    }
    let f = n.as_f64().unwrap_or(0.0);
    // Every integral f64 below 2^127 converts to i128 exactly.
    const LIMIT: f64 = 170_141_183_460_469_231_731_687_303_715_884_105_728.0;
    if f.fract() == 0.0 && f.abs() < LIMIT {
        return (f as i128).to_string();
    }
    if f.fract() == 0.0 {
        // Integral and beyond every integer type: the exponent form, which
        // no integer above writes.
        return format!("{f:e}");
    }
    // Not integral: the shortest round-trip decimal (always with a `.`).
    format!("{f}")
}

#[cfg(test)]
mod tests;
