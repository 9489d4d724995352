//! Words as bash reduces them: quotes removed, `$'…'` decoded, backslashes
//! removed, and what bash still expands marked (§25.3).

use super::kinds::{self, Kind};
use super::{Word, WordKind};
use tree_sitter::Node;

/// The stronger of two kinds: anything dynamic wins, then a glob.
pub(super) fn combine(a: WordKind, b: WordKind) -> WordKind {
    match (a, b) {
        (WordKind::Dynamic, _) | (_, WordKind::Dynamic) => WordKind::Dynamic,
        (WordKind::Glob { leading }, WordKind::Glob { .. }) => WordKind::Glob { leading },
        (WordKind::Glob { leading }, WordKind::Literal) => WordKind::Glob { leading },
        (WordKind::Literal, WordKind::Glob { leading }) => WordKind::Glob { leading },
        (WordKind::Literal, WordKind::Literal) => WordKind::Literal,
    }
}

/// A word built piece by piece.
struct Builder {
    text: String,
    kind: WordKind,
    leading: bool,
}

impl Builder {
    fn new() -> Self {
        Builder {
            text: String::new(),
            kind: WordKind::Literal,
            leading: false,
        }
    }

    fn push(&mut self, text: &str, kind: WordKind) {
        if self.text.is_empty() {
            if let WordKind::Glob { leading: true } = kind {
                self.leading = true;
            }
        }
        self.kind = combine(self.kind, kind);
        self.text.push_str(text);
    }

    fn kind(&self) -> WordKind {
        match self.kind {
            WordKind::Glob { .. } => WordKind::Glob {
                leading: self.leading,
            },
            other => other,
        }
    }
}

/// Reduce a word-like node of `src`.
pub(super) fn reduce(node: Node<'_>, src: &str, top: bool) -> Word {
    let mut builder = Builder::new();
    piece(node, src, &mut builder, true);
    let range = node.byte_range();
    let mut kind = builder.kind();
    // Glob brackets and brace expansion span pieces: the grammar splits
    // `r[m]` and `a{b,c}` into several words, and `"r"[m]` quotes only its
    // first part. The whole word's source decides, read with its quotes.
    if kind != WordKind::Dynamic {
        if let Some(raw) = src.get(range.clone()) {
            kind = combine(kind, expands(raw));
        }
    }
    Word {
        text: builder.text,
        kind,
        span: top.then_some(range),
    }
}

fn source<'s>(node: Node<'_>, src: &'s str) -> &'s str {
    src.get(node.byte_range()).unwrap_or("")
}

fn piece(node: Node<'_>, src: &str, out: &mut Builder, first: bool) {
    let raw = source(node, src);
    match kinds::kind(node) {
        Kind::Word | Kind::CommandName if node.named_child_count() == 0 => {
            let (text, kind) = unquoted(raw, first);
            out.push(&text, kind);
        }
        Kind::RawString => {
            let inner = raw
                .strip_prefix('\'')
                .and_then(|r| r.strip_suffix('\''))
                .unwrap_or(raw);
            out.push(inner, WordKind::Literal);
        }
        Kind::AnsiCString => {
            let inner = raw
                .strip_prefix("$'")
                .and_then(|r| r.strip_suffix('\''))
                .unwrap_or(raw);
            out.push(&ansi_c(inner), WordKind::Literal);
        }
        Kind::String | Kind::TranslatedString => double_quoted(node, src, out),
        Kind::Number
        | Kind::VariableName
        | Kind::SpecialVariableName
        | Kind::TestOperator
        | Kind::FileDescriptor
        | Kind::HeredocStart
            if node.named_child_count() == 0 =>
        {
            out.push(raw, WordKind::Literal);
        }
        Kind::Regex => {
            let (text, kind) = unquoted(raw, first);
            out.push(&text, kind);
        }
        Kind::Concatenation | Kind::CommandName => {
            let mut cursor = node.walk();
            let mut at = node.start_byte();
            let mut first_piece = first;
            for child in node.children(&mut cursor) {
                if child.start_byte() > at {
                    let gap = src.get(at..child.start_byte()).unwrap_or("");
                    let (text, kind) = unquoted(gap, first_piece);
                    out.push(&text, kind);
                    first_piece = false;
                }
                piece(child, src, out, first_piece);
                first_piece = false;
                at = child.end_byte();
            }
            if node.end_byte() > at {
                let gap = src.get(at..node.end_byte()).unwrap_or("");
                let (text, kind) = unquoted(gap, first_piece);
                out.push(&text, kind);
            }
        }
        _ => out.push(raw, WordKind::Dynamic),
    }
}

/// The inside of `"…"` (or `$"…"`): escapes of `$`, `` ` ``, `"`, `\` and
/// newline are removed; expansions make the word dynamic.
fn double_quoted(node: Node<'_>, src: &str, out: &mut Builder) {
    let raw = source(node, src);
    let open = if raw.starts_with("$\"") { 2 } else { 1 };
    let start = node.start_byte() + open.min(raw.len());
    let end = if raw.len() > open && raw.ends_with('"') {
        node.end_byte() - 1
    } else {
        node.end_byte()
    };
    let mut at = start;
    let mut cursor = node.walk();
    let mut any = false;
    for child in node.children(&mut cursor) {
        if !child.is_named() {
            continue;
        }
        if child.start_byte() > at {
            let gap = src.get(at..child.start_byte().min(end)).unwrap_or("");
            out.push(&dq_unescape(gap), WordKind::Literal);
        }
        if kinds::kind(child) == Kind::StringContent {
            out.push(&dq_unescape(source(child, src)), WordKind::Literal);
        } else {
            out.push(source(child, src), WordKind::Dynamic);
        }
        any = true;
        at = child.end_byte();
    }
    if end > at {
        out.push(
            &dq_unescape(src.get(at..end).unwrap_or("")),
            WordKind::Literal,
        );
    } else if !any {
        out.push("", WordKind::Literal);
    }
}

/// Backslash escapes inside double quotes.
pub(super) fn dq_unescape(raw: &str) -> String {
    let mut out = String::with_capacity(raw.len());
    let mut chars = raw.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\\' {
            match chars.peek() {
                Some('\n') => {
                    chars.next();
                }
                Some(&n @ ('$' | '`' | '"' | '\\')) => {
                    out.push(n);
                    chars.next();
                }
                _ => out.push('\\'),
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// Unquoted text: backslashes removed (a backslash-newline joins lines);
/// unescaped glob characters, a leading tilde, brace expansion and any
/// stray expansion character are marked.
pub(super) fn unquoted(raw: &str, word_start: bool) -> (String, WordKind) {
    let mut out = String::with_capacity(raw.len());
    let mut kind = WordKind::Literal;
    let mut chars = raw.chars().peekable();
    let mut position = 0usize;
    while let Some(c) = chars.next() {
        match c {
            '\\' => match chars.next() {
                Some('\n') | None => {}
                Some(n) => {
                    out.push(n);
                    position += 1;
                }
            },
            '[' if !raw[raw.len() - chars.clone().map(char::len_utf8).sum::<usize>()..]
                .contains(']') =>
            {
                // An unmatched `[` is an ordinary character to bash.
                out.push(c);
                position += 1;
            }
            '*' | '?' | '[' => {
                kind = combine(
                    kind,
                    WordKind::Glob {
                        leading: position == 0,
                    },
                );
                out.push(c);
                position += 1;
            }
            '~' if word_start && position == 0 => {
                kind = WordKind::Dynamic;
                out.push(c);
                position += 1;
            }
            '$' | '`' | '(' | ')' => {
                kind = WordKind::Dynamic;
                out.push(c);
                position += 1;
            }
            _ => {
                out.push(c);
                position += 1;
            }
        }
    }
    if has_brace_expansion(raw) {
        kind = WordKind::Dynamic;
    }
    (out, kind)
}

/// What bash still does to a word's whole source, its quotes read: an
/// unquoted `*` or `?`, an unquoted `[` with a `]` after it (a bracket
/// expression, whatever is inside), or an unquoted `{` with a `,` or `..`
/// and a `}` after it. Generous where bash is subtle (a quoted `]` or `,`
/// still counts): a word read here as a glob is never one bash runs as
/// plain text.
pub(super) fn expands(raw: &str) -> WordKind {
    let bytes = raw.as_bytes();
    let mut i = 0;
    let mut quote: Option<u8> = None;
    let mut produced = false;
    let mut glob: Option<bool> = None;
    let mut open_bracket = false;
    let mut open_brace = false;
    let mut brace_list = false;
    let mut brace = false;
    while i < bytes.len() {
        let b = bytes[i];
        match quote {
            Some(b'\'') => {
                if b == b'\'' {
                    quote = None;
                } else {
                    produced = true;
                }
                i += 1;
                continue;
            }
            Some(b'$') => {
                // `$'…'`: backslash escapes, ends at an unescaped quote.
                if b == b'\\' {
                    i += 2;
                    produced = true;
                    continue;
                }
                if b == b'\'' {
                    quote = None;
                } else {
                    produced = true;
                }
                i += 1;
                continue;
            }
            Some(_) => {
                if b == b'\\' {
                    i += 2;
                    produced = true;
                    continue;
                }
                if b == b'"' {
                    quote = None;
                } else {
                    produced = true;
                }
                i += 1;
                continue;
            }
            None => {}
        }
        match b {
            b'\\' => {
                if bytes.get(i + 1) != Some(&b'\n') {
                    produced = true;
                }
                i += 2;
                continue;
            }
            b'\'' => quote = Some(b'\''),
            b'"' => quote = Some(b'"'),
            b'$' if bytes.get(i + 1) == Some(&b'\'') => {
                quote = Some(b'$');
                i += 2;
                continue;
            }
            b'$' if bytes.get(i + 1) == Some(&b'"') => {
                quote = Some(b'"');
                i += 2;
                continue;
            }
            b'*' | b'?' => {
                glob.get_or_insert(!produced);
                produced = true;
            }
            b'[' => {
                if open_bracket {
                    // `[[` : the first one is still the one that opens.
                } else {
                    open_bracket = true;
                    if raw[i + 1..].contains(']') {
                        glob.get_or_insert(!produced);
                    }
                }
                produced = true;
            }
            b'{' => {
                open_brace = true;
                produced = true;
            }
            b',' if open_brace => {
                brace_list = true;
                produced = true;
            }
            b'.' if open_brace && bytes.get(i + 1) == Some(&b'.') => {
                brace_list = true;
                produced = true;
            }
            b'}' if open_brace && brace_list => {
                brace = true;
                produced = true;
            }
            _ => produced = true,
        }
        i += 1;
    }
    if brace {
        WordKind::Dynamic
    } else if let Some(leading) = glob {
        WordKind::Glob { leading }
    } else {
        WordKind::Literal
    }
}

/// Whether unquoted text may hold a brace expansion: a `{` followed later
/// by a `,` or `..` and a `}` (generous: quoting is not tracked here).
pub(super) fn has_brace_expansion(raw: &str) -> bool {
    let Some(open) = raw.find('{') else {
        return false;
    };
    let rest = &raw[open + 1..];
    let Some(close) = rest.rfind('}') else {
        return false;
    };
    let inner = &rest[..close];
    inner.contains(',') || inner.contains("..")
}

/// Decode the inside of `$'…'` as bash does.
pub(super) fn ansi_c(raw: &str) -> String {
    let bytes = raw.as_bytes();
    let mut out: Vec<u8> = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        if b != b'\\' || i + 1 >= bytes.len() {
            out.push(b);
            i += 1;
            continue;
        }
        let e = bytes[i + 1];
        i += 2;
        match e {
            b'a' => out.push(0x07),
            b'b' => out.push(0x08),
            b'e' | b'E' => out.push(0x1b),
            b'f' => out.push(0x0c),
            b'n' => out.push(b'\n'),
            b'r' => out.push(b'\r'),
            b't' => out.push(b'\t'),
            b'v' => out.push(0x0b),
            b'\\' | b'\'' | b'"' | b'?' => out.push(e),
            b'0'..=b'7' => {
                let mut value = u32::from(e - b'0');
                let mut n = 1;
                while n < 3 && i < bytes.len() && (b'0'..=b'7').contains(&bytes[i]) {
                    value = value * 8 + u32::from(bytes[i] - b'0');
                    i += 1;
                    n += 1;
                }
                out.push((value & 0xff) as u8);
            }
            b'x' => {
                let (value, used) = hex(&bytes[i..], 2);
                if used == 0 {
                    out.extend_from_slice(b"\\x");
                } else {
                    out.push((value & 0xff) as u8);
                    i += used;
                }
            }
            b'u' | b'U' => {
                let max = if e == b'u' { 4 } else { 8 };
                let (value, used) = hex(&bytes[i..], max);
                if used == 0 {
                    out.push(b'\\');
                    out.push(e);
                } else {
                    i += used;
                    let c = char::from_u32(value).unwrap_or('\u{fffd}');
                    let mut buf = [0u8; 4];
                    out.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
                }
            }
            b'c' if i < bytes.len() => {
                let c = bytes[i];
                i += 1;
                out.push(c.to_ascii_uppercase() ^ 0x40);
            }
            _ => {
                out.push(b'\\');
                out.push(e);
            }
        }
    }
    // Bash stops a `$'…'` string at a NUL byte.
    if let Some(nul) = out.iter().position(|b| *b == 0) {
        out.truncate(nul);
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn hex(bytes: &[u8], max: usize) -> (u32, usize) {
    let mut value = 0u32;
    let mut used = 0;
    while used < max && used < bytes.len() {
        let Some(digit) = (bytes[used] as char).to_digit(16) else {
            break;
        };
        value = value * 16 + digit;
        used += 1;
    }
    (value, used)
}

/// The bodies of unescaped backtick substitutions in unquoted or
/// double-quoted text the grammar left as a plain word (`${x:=`cmd`}`),
/// each decoded as bash decodes a backtick body; `Err` when one is not
/// closed.
pub(super) fn backtick_bodies(raw: &str) -> Result<Vec<String>, ()> {
    let mut bodies = Vec::new();
    let mut chars = raw.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => {
                chars.next();
            }
            '`' => {
                let mut body = String::new();
                let mut closed = false;
                while let Some(c) = chars.next() {
                    match c {
                        '\\' => match chars.next() {
                            Some(n @ ('\\' | '`' | '$')) => body.push(n),
                            Some(n) => {
                                body.push('\\');
                                body.push(n);
                            }
                            None => body.push('\\'),
                        },
                        '`' => {
                            closed = true;
                            break;
                        }
                        other => body.push(other),
                    }
                }
                if !closed {
                    return Err(());
                }
                bodies.push(body);
            }
            _ => {}
        }
    }
    Ok(bodies)
}

/// The body of a backtick substitution node's source (with its backticks),
/// decoded as bash decodes it.
pub(super) fn backtick_body(raw: &str) -> String {
    let inner = raw
        .strip_prefix('`')
        .map(|r| r.strip_suffix('`').unwrap_or(r))
        .unwrap_or(raw);
    let mut body = String::with_capacity(inner.len());
    let mut chars = inner.chars();
    while let Some(c) = chars.next() {
        if c == '\\' {
            match chars.next() {
                Some(n @ ('\\' | '`' | '$')) => body.push(n),
                Some(n) => {
                    body.push('\\');
                    body.push(n);
                }
                None => body.push('\\'),
            }
        } else {
            body.push(c);
        }
    }
    body
}
