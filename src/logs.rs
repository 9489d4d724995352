//! Where the worker's log lines go: stderr, each line passed through the
//! value detectors of [`crate::redact`] first (`architecture/contract.md`
//! § Redaction). The worker never logs arguments, but a log line can still
//! carry a secret it did not write itself — an engine error quoting a
//! stored value, a library's trace of a payload — so every line is redacted
//! on its way out, whatever the level and format. This costs nothing on the
//! gate's continue and deny paths, which log at DEBUG only.

use std::io::Write;

use tracing_subscriber::fmt::MakeWriter;

use crate::redact::redact_text;

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
        let line = redact_text(&text);
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
        let out = redact_text(line);
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
