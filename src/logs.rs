//! Where the worker's log lines go (`architecture/contract.md` § Redaction).
//!
//! The worker never logs arguments, but a log line can still carry a secret
//! it did not write itself — an engine error quoting a stored value, a
//! library's trace of a payload. Two measures:
//!
//! * the WebSocket library's frame dumps (`tungstenite`, `tokio_tungstenite`
//!   at DEBUG and TRACE) are never enabled, whatever `RUST_LOG` asks: they
//!   are every agent's arguments, verbatim and escaped twice over, which no
//!   detector can reliably take apart ([`filter`]);
//! * every line passes through the value detectors of [`crate::redact`] on
//!   its way to stderr: a JSON line string by string (so its escaping stays
//!   valid), any other line whole.
//!
//! This costs nothing on the gate's continue and deny paths, which log at
//! DEBUG only.

use std::io::Write;

use serde_json::Value;
use tracing_subscriber::fmt::MakeWriter;
use tracing_subscriber::EnvFilter;

use crate::redact::redact_text;

/// Libraries whose verbose levels dump raw payloads; capped at INFO.
const PAYLOAD_DUMPERS: [&str; 2] = ["tungstenite", "tokio_tungstenite"];

/// The log filter: `RUST_LOG` (default `info`).
pub fn filter() -> EnvFilter {
    EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"))
}

/// Whether an event may be logged at all: the payload-dumping libraries
/// only at INFO and above, whatever the filter enables (a more specific
/// `RUST_LOG` directive such as `tungstenite::protocol=trace` included).
pub fn allowed(metadata: &tracing::Metadata<'_>) -> bool {
    let dumper = PAYLOAD_DUMPERS.iter().any(|lib| {
        metadata
            .target()
            .strip_prefix(lib)
            .is_some_and(|rest| rest.is_empty() || rest.starts_with("::"))
    });
    !dumper || *metadata.level() <= tracing::Level::INFO
}

/// One log line with its secrets replaced: a JSON object line string by
/// string (keys and values), anything else as text.
pub(crate) fn redact_line(line: &str) -> String {
    let trimmed = line.trim_end_matches('\n');
    match serde_json::from_str::<Value>(trimmed) {
        Ok(Value::Object(map)) => {
            let redacted = redact_strings(Value::Object(map), 0);
            let mut out = serde_json::to_string(&redacted).unwrap_or_default();
            out.push_str(&line[trimmed.len()..]);
            out
        }
        _ => redact_text(line).into_owned(),
    }
}

/// Log lines are shallow; past this depth a value is redacted as text.
const MAX_LOG_DEPTH: usize = 16;

fn redact_strings(value: Value, depth: usize) -> Value {
    match value {
        Value::String(s) => Value::String(redact_text(&s).into_owned()),
        Value::Array(items) if depth < MAX_LOG_DEPTH => Value::Array(
            items
                .into_iter()
                .map(|v| redact_strings(v, depth + 1))
                .collect(),
        ),
        Value::Object(map) if depth < MAX_LOG_DEPTH => Value::Object(
            map.into_iter()
                .map(|(k, v)| (redact_text(&k).into_owned(), redact_strings(v, depth + 1)))
                .collect(),
        ),
        other @ (Value::Array(_) | Value::Object(_)) => {
            Value::String(redact_text(&other.to_string()).into_owned())
        }
        other => other,
    }
}

/// Makes one [`RedactingLine`] per log event.
#[derive(Debug, Clone, Copy, Default)]
pub struct RedactingStderr;

/// One log event, buffered, written to stderr redacted when dropped.
#[derive(Debug, Default)]
pub struct RedactingLine {
    buf: Vec<u8>,
}

impl Write for RedactingLine {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.buf.extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Drop for RedactingLine {
    fn drop(&mut self) {
        if self.buf.is_empty() {
            return;
        }
        let text = String::from_utf8_lossy(&self.buf);
        let line = redact_line(&text);
        // A log line that cannot be written has nowhere else to go.
        let _ = std::io::stderr().lock().write_all(line.as_bytes());
    }
}

impl<'a> MakeWriter<'a> for RedactingStderr {
    type Writer = RedactingLine;

    fn make_writer(&'a self) -> Self::Writer {
        RedactingLine::default()
    }
}

#[cfg(test)]
mod tests {
    use serde_json::Value;

    use super::*;

    #[test]
    fn a_json_log_line_stays_json_with_its_secrets_gone() {
        let line = r#"{"timestamp":"t","level":"TRACE","fields":{"message":"payload {\"api_key\":\"sk-live-abcdef0123456789\",\"cmd\":\"curl -H 'Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.abcdefghijklmnop'\"}","token":"ghp_abcdefghijklmnopqrstuvwxyz0123456789"},"target":"x"}"#;
        let out = redact_line(line);
        assert!(!out.contains("sk-live-abcdef0123456789"), "{out}");
        assert!(
            !out.contains("ghp_abcdefghijklmnopqrstuvwxyz0123456789"),
            "{out}"
        );
        assert!(!out.contains("eyJzdWIiOiIxIn0"), "{out}");
        let parsed: Value = serde_json::from_str(&out).expect("still one JSON object");
        assert_eq!(parsed["level"], "TRACE");
    }
}

#[cfg(test)]
mod filter_tests {
    use super::*;

    #[test]
    fn an_escaped_secret_in_a_json_line_is_redacted_and_the_line_stays_json() {
        let line = "{\"level\":\"INFO\",\"fields\":{\"message\":\"config api_key = \\\"FAKEtomlKey0123\\\"\\nendpoint = 1\"}}\n";
        let out = redact_line(line);
        assert!(!out.contains("FAKEtomlKey0123"), "{out}");
        assert!(out.ends_with('\n'));
        let parsed: Value = serde_json::from_str(out.trim_end()).expect("still JSON");
        assert_eq!(parsed["level"], "INFO");
    }

    #[test]
    fn frame_dumps_stay_off_whatever_rust_log_says() {
        use tracing::{Level, Metadata};
        macro_rules! meta {
            ($target:expr, $level:expr) => {{
                struct Cs;
                impl tracing::Callsite for Cs {
                    fn set_interest(&self, _: tracing::subscriber::Interest) {}
                    fn metadata(&self) -> &Metadata<'_> {
                        unreachable!()
                    }
                }
                static CS: Cs = Cs;
                Metadata::new(
                    "event",
                    $target,
                    $level,
                    None,
                    None,
                    None,
                    tracing::field::FieldSet::new(&[], tracing::callsite::Identifier(&CS)),
                    tracing::metadata::Kind::EVENT,
                )
            }};
        }
        assert!(!allowed(&meta!("tungstenite::protocol", Level::TRACE)));
        assert!(!allowed(&meta!("tokio_tungstenite", Level::DEBUG)));
        assert!(allowed(&meta!("tungstenite", Level::WARN)));
        assert!(allowed(&meta!("approval_gate::gate", Level::TRACE)));
        assert!(allowed(&meta!("tungstenite_like_crate", Level::TRACE)));
        assert!(allowed(&meta!("iii_sdk::iii", Level::DEBUG)));
    }
}
