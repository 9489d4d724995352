//! What the console accepts of an asset, written from the console's
//! published rules (`harness.md` § Console): the path rules, the
//! size cap, and what a stylesheet may contain. Pure, so the worker's own
//! unit tests can hold its embedded assets to the same rules the double
//! applies at registration.

/// The most the console takes of one asset.
pub const MAX_ASSET_BYTES: usize = 8 * 1024 * 1024;
/// The longest path the console takes.
pub const MAX_PATH_CHARS: usize = 512;

/// Which trigger type offered an asset.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AssetKind {
    /// `console:script`: an ES module.
    Script,
    /// `console:style`: CSS.
    Style,
}

impl AssetKind {
    /// The trigger type.
    pub fn trigger_type(self) -> &'static str {
        match self {
            AssetKind::Script => "console:script",
            AssetKind::Style => "console:style",
        }
    }

    /// The extension a path must end with.
    pub fn extension(self) -> &'static str {
        match self {
            AssetKind::Script => ".js",
            AssetKind::Style => ".css",
        }
    }

    /// The media type served when the content function names none.
    pub fn default_content_type(self) -> &'static str {
        match self {
            AssetKind::Script => "text/javascript; charset=utf-8",
            AssetKind::Style => "text/css; charset=utf-8",
        }
    }
}

/// Why a path is refused: lowercase `[a-z0-9._-]` segments that start with
/// a letter or digit, no leading slash, no empty, `.` or `..` segment, at
/// most [`MAX_PATH_CHARS`], the extension of its kind.
pub fn check_path(kind: AssetKind, path: &str) -> Result<(), String> {
    if path.is_empty() {
        return Err("empty path".into());
    }
    if path.chars().count() > MAX_PATH_CHARS {
        return Err(format!("path over {MAX_PATH_CHARS} characters"));
    }
    if path.starts_with('/') {
        return Err(format!("{path:?} starts with a slash"));
    }
    for segment in path.split('/') {
        if segment.is_empty() || segment == "." || segment == ".." {
            return Err(format!("{path:?} has an empty, . or .. segment"));
        }
        let first = segment.chars().next().unwrap_or('.');
        if !(first.is_ascii_lowercase() || first.is_ascii_digit()) {
            return Err(format!(
                "segment {segment:?} must start with a lowercase letter or digit"
            ));
        }
        if !segment
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '.' | '_' | '-'))
        {
            return Err(format!(
                "segment {segment:?} has characters outside [a-z0-9._-]"
            ));
        }
    }
    if !path.ends_with(kind.extension()) {
        return Err(format!(
            "{path:?} must end with {} for {}",
            kind.extension(),
            kind.trigger_type()
        ));
    }
    Ok(())
}

/// The scope a path's assets are wrapped in: its first segment.
pub fn scope_of(path: &str) -> &str {
    path.split('/').next().unwrap_or(path)
}

/// Everything in `css` that reaches outside `[data-iii-ui="<scope>"]`, one
/// finding each; empty when every rule is scoped.
///
/// Stricter than the console's own lint (which reads top-level selectors
/// only): every selector of every style rule, inside `@media`, `@supports`,
/// `@container` and `@layer` blocks too, must start with the scope's
/// attribute selector and go on inside it (a descendant, a child, or more
/// conditions on the scope element; `+` and `~` reach its siblings). An
/// `@scope ([data-iii-ui="<scope>"])` block scopes everything in it (the
/// engine's own extension is written so). `@font-face` and `@import` are
/// refused anywhere (neither can be scoped), and `@keyframes` names must
/// start with the scope (they are global).
pub fn check_style(css: &str, scope: &str) -> Vec<String> {
    let text = strip_comments(css);
    let mut findings = Vec::new();
    walk_block(&text, scope, &mut findings);
    findings
}

/// Walks the rules of one block (the sheet, or an at-rule's body).
fn walk_block(text: &str, scope: &str, findings: &mut Vec<String>) {
    let mut rest = text;
    loop {
        rest = rest.trim_start();
        if rest.is_empty() {
            return;
        }
        let Some(open) = find_top(rest, &['{', ';']) else {
            findings.push(format!("unterminated rule: {:?}", clip(rest)));
            return;
        };
        let head = rest[..open].trim();
        if rest.as_bytes()[open] == b';' {
            // A statement at-rule (`@import`, `@charset`, `@layer a, b;`).
            if head.starts_with("@import") {
                findings.push("@import pulls in a stylesheet nothing scopes".into());
            } else if !head.starts_with('@') {
                findings.push(format!(
                    "stray declaration outside any rule: {:?}",
                    clip(head)
                ));
            }
            rest = &rest[open + 1..];
            continue;
        }
        let Some(close) = matching_brace(rest, open) else {
            findings.push(format!("unbalanced braces after {:?}", clip(head)));
            return;
        };
        let body = &rest[open + 1..close];
        if let Some(at) = head.strip_prefix('@') {
            let name = at
                .split(|c: char| c.is_whitespace() || c == '(')
                .next()
                .unwrap_or("")
                .to_ascii_lowercase();
            let prelude = at[name.len()..].trim();
            match name.as_str() {
                "font-face" => findings.push("@font-face applies to the whole document".into()),
                "media" | "supports" | "container" | "layer" => walk_block(body, scope, findings),
                "scope" => {
                    if !scope_prelude_is(prelude, scope) {
                        findings.push(format!(
                            "@scope {prelude:?} is not the extension's own scope"
                        ));
                    }
                }
                "keyframes" | "-webkit-keyframes" => {
                    if !prelude.starts_with(scope) {
                        findings.push(format!(
                            "@keyframes {prelude:?} is global: its name must start with {scope:?}"
                        ));
                    }
                }
                other => findings.push(format!("@{other} is not allowed here")),
            }
        } else {
            for selector in split_top(head, ',') {
                if let Some(finding) = check_selector(selector.trim(), scope) {
                    findings.push(finding);
                }
            }
        }
        rest = &rest[close + 1..];
    }
}

/// Whether one selector stays inside the scope.
fn check_selector(selector: &str, scope: &str) -> Option<String> {
    let Some(after) = strip_scope(selector, scope) else {
        return Some(format!(
            "selector {selector:?} is not under [data-iii-ui=\"{scope}\"]"
        ));
    };
    let next = after.trim_start();
    if next.starts_with('+') || next.starts_with('~') {
        return Some(format!(
            "selector {selector:?} reaches the scope's siblings"
        ));
    }
    None
}

/// The rest of `selector` after a leading `[data-iii-ui="<scope>"]`
/// (quoted either way or unquoted), if it starts so.
fn strip_scope<'a>(selector: &'a str, scope: &str) -> Option<&'a str> {
    [
        format!("[data-iii-ui=\"{scope}\"]"),
        format!("[data-iii-ui='{scope}']"),
        format!("[data-iii-ui={scope}]"),
    ]
    .iter()
    .find_map(|prefix| selector.strip_prefix(prefix.as_str()))
}

/// Whether an `@scope` prelude is `([data-iii-ui="<scope>"])` (with an
/// optional `to (…)` limit).
fn scope_prelude_is(prelude: &str, scope: &str) -> bool {
    prelude
        .strip_prefix('(')
        .and_then(|inner| strip_scope(inner.trim_start(), scope))
        .is_some_and(|rest| rest.trim_start().starts_with(')'))
}

fn clip(text: &str) -> String {
    text.chars().take(60).collect()
}

/// The first of `stops` outside strings, brackets and parentheses.
fn find_top(text: &str, stops: &[char]) -> Option<usize> {
    let mut depth = 0i32;
    let mut quote: Option<char> = None;
    for (i, c) in text.char_indices() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), _) => {}
            (None, '"' | '\'') => quote = Some(c),
            (None, '(' | '[') => depth += 1,
            (None, ')' | ']') => depth -= 1,
            (None, c) if depth == 0 && stops.contains(&c) => return Some(i),
            _ => {}
        }
    }
    None
}

/// The `}` that closes the `{` at `open`.
fn matching_brace(text: &str, open: usize) -> Option<usize> {
    let mut depth = 0i32;
    let mut quote: Option<char> = None;
    for (i, c) in text[open..].char_indices() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), _) => {}
            (None, '"' | '\'') => quote = Some(c),
            (None, '{') => depth += 1,
            (None, '}') => {
                depth -= 1;
                if depth == 0 {
                    return Some(open + i);
                }
            }
            _ => {}
        }
    }
    None
}

/// `text` split on `sep` outside strings, brackets and parentheses.
fn split_top(text: &str, sep: char) -> Vec<&str> {
    let mut parts = Vec::new();
    let mut rest = text;
    while let Some(at) = find_top(rest, &[sep]) {
        parts.push(&rest[..at]);
        rest = &rest[at + sep.len_utf8()..];
    }
    parts.push(rest);
    parts
}

fn strip_comments(css: &str) -> String {
    let mut out = String::with_capacity(css.len());
    let mut rest = css;
    while let Some(start) = rest.find("/*") {
        out.push_str(&rest[..start]);
        match rest[start + 2..].find("*/") {
            Some(end) => rest = &rest[start + 2 + end + 2..],
            None => return out,
        }
        out.push(' ');
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_follow_the_console_rules() {
        assert_eq!(
            check_path(AssetKind::Script, "approval-gate/page.js"),
            Ok(())
        );
        assert_eq!(
            check_path(AssetKind::Style, "approval-gate/styles.css"),
            Ok(())
        );
        assert_eq!(check_path(AssetKind::Script, "a/b/c-d_e.f.js"), Ok(()));
        for bad in [
            "",
            "/approval-gate/page.js",
            "approval-gate//page.js",
            "approval-gate/../page.js",
            "approval-gate/./page.js",
            "Approval-Gate/page.js",
            "approval-gate/page.JS",
            "approval gate/page.js",
            "approval-gate\\page.js",
            "approval-gate/.page.js",
            "approval-gate/page.css",
        ] {
            assert!(check_path(AssetKind::Script, bad).is_err(), "{bad:?}");
        }
        assert!(check_path(AssetKind::Style, "approval-gate/page.js").is_err());
        assert!(check_path(AssetKind::Script, &format!("a/{}.js", "x".repeat(600))).is_err());
        assert_eq!(scope_of("approval-gate/page.js"), "approval-gate");
    }

    #[test]
    fn a_scoped_sheet_has_no_findings() {
        let css = r#"
            /* a comment { with braces } */
            [data-iii-ui="approval-gate"] .ag-form, [data-iii-ui="approval-gate"] > .ag-x:hover { color: red; }
            [data-iii-ui=approval-gate] .a[title="x,y{"] { content: "}"; }
            @media (max-width: 400px) { [data-iii-ui="approval-gate"] .ag-form { display: block; } }
            @keyframes approval-gate-pulse { from { opacity: 0; } to { opacity: 1; } }
            @scope ([data-iii-ui="approval-gate"]) { .anything, * { margin: 0; } }
            [data-iii-ui="approval-gate"]:is(.a, .b) .c { margin: 0; }
        "#;
        assert_eq!(check_style(css, "approval-gate"), Vec::<String>::new());
    }

    #[test]
    fn every_escape_is_a_finding() {
        let cases = [
            ":root { --x: 1; }",
            "html { color: red; }",
            "body .x { color: red; }",
            "* { margin: 0; }",
            "button { color: red; }",
            ".ag-form { color: red; }",
            "[data-iii-ui=\"approval-gate\"] .a, .b { color: red; }",
            "[data-iii-ui=\"other\"] .a { color: red; }",
            "[data-iii-ui=\"approval-gate\"] ~ div { color: red; }",
            "[data-iii-ui=\"approval-gate\"] + div { color: red; }",
            "@media print { body { color: red; } }",
            "@font-face { font-family: x; src: url(x.woff); }",
            "@import url(other.css);",
            "@keyframes pulse { from { opacity: 0; } }",
            "@scope (.x) { .a { color: red; } }",
            "@page { margin: 0; }",
            "[data-iii-ui=\"approval-gate\"] .a { color: red; ",
        ];
        for css in cases {
            assert!(
                !check_style(css, "approval-gate").is_empty(),
                "no finding for {css:?}"
            );
        }
    }
}
