//! The linear pre-scan of §25.5: how deeply a text nests brackets, quotes
//! and substitutions, counted in one pass with an explicit stack (no
//! recursion) BEFORE any parse, so that no parser ever sees an input deeper
//! than the limit.

/// What a nesting level is.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Level {
    /// Code: the top level, `$(…)`, `(…)`, `{…}`, `${…}`, `[…]`.
    Code,
    /// Inside `"…"`.
    Double,
    /// Inside `` `…` ``.
    Backtick,
}

/// Whether `text` nests deeper than `max` levels. Over-counting is safe (a
/// deep but benign text is only opaque); under-counting is not, so every
/// opening bracket counts, quoted or not, except inside single quotes.
pub(super) fn too_deep(text: &str, max: usize) -> bool {
    let bytes = text.as_bytes();
    let mut stack: Vec<Level> = Vec::with_capacity(16);
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        let level = stack.last().copied().unwrap_or(Level::Code);
        match b {
            b'\\' => {
                i += 2;
                continue;
            }
            b'\'' if level == Level::Code => {
                // Single quotes nest nothing: skip to the closing quote.
                match bytes[i + 1..].iter().position(|c| *c == b'\'') {
                    Some(at) => i += at + 2,
                    None => i = bytes.len(),
                }
                continue;
            }
            b'"' => {
                if level == Level::Double {
                    stack.pop();
                } else {
                    stack.push(Level::Double);
                }
            }
            b'`' => {
                if level == Level::Backtick {
                    stack.pop();
                } else {
                    stack.push(Level::Backtick);
                }
            }
            b'(' | b'{' | b'[' => {
                if level == Level::Double && i > 0 && bytes[i - 1] != b'$' {
                    // A plain bracket inside double quotes is text.
                } else {
                    stack.push(Level::Code);
                }
            }
            b')' | b'}' | b']' if level == Level::Code => {
                stack.pop();
            }
            _ => {}
        }
        if stack.len() > max {
            return true;
        }
        i += 1;
    }
    false
}
