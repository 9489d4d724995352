//! Protected paths (`architecture/contract.md` § Protected paths): no call
//! may rewrite the gate's configuration — or the shell's, or the engine's
//! workers' — through the filesystem. The engine's configuration worker
//! keeps each entry in a file it watches; an agent whose shell can write
//! that file ungates itself without calling anything the gate guards.
//!
//! On the calls of `protected_path_functions` (`shell::*`, `coder::*`,
//! `fp::*` by default), every word of every simple command that can run
//! (the command model's, redirection targets included) and every string
//! argument is read as a path: resolved against the call's `cwd`, else the
//! turn's root, and normalised lexically (`.`, `..`, repeated `/`). A path
//! that a `protected_paths` glob matches holds the call for a human in
//! every mode. A word the shell still expands (a glob, `$X`, `$(…)`) is a
//! pattern: when some path it could become matches a protected glob, it
//! holds the same way; so does a command that cannot be known without
//! running it. Pure: no I/O; the filesystem is never consulted (a symlink
//! or a bind mount is invisible here — keeping the engine's directory out
//! of the shell's roots is the real defence).

use globset::{GlobBuilder, GlobMatcher};
use serde_json::{Map, Value};

use super::commands::Readings;
use super::glob::{Pattern, PatternTable};
use crate::shell::{Command, Model, WordKind};

/// The rule id reported for a call held because it names a protected path.
pub const PROTECTED_PATH_RULE: &str = "protected_path";

/// The most strings of one call's arguments read as paths (the rest of a
/// huge argument object is judged as if one of them named a protected
/// path: held).
const MAX_STRINGS: usize = 4096;

/// The protected paths of a configuration, compiled once per configuration
/// change.
#[derive(Debug, Clone, Default)]
pub struct ProtectedPaths {
    /// Each glob as written and its matcher (`*` stays within a path
    /// segment, `**` crosses them).
    globs: Vec<(Box<str>, GlobMatcher)>,
    /// The same globs as token lists, for "could a pattern word become a
    /// path they match".
    tokens: Vec<Vec<Token>>,
    /// The functions whose calls are judged.
    functions: PatternTable,
    /// A glob that did not compile (the configuration refuses such a
    /// value; should one reach here, every judged call holds).
    broken: bool,
}

/// Why a call names a protected path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProtectedHit {
    /// The protected glob it meets, as written.
    pub glob: String,
    /// The path as resolved (a pattern word keeps its wildcards as `*`).
    pub path: String,
    /// How the path was found.
    pub how: HitKind,
}

/// The protected path a held call names, as its record keeps it for the
/// approver (`protected_path` on records, `pending-created`, the pages).
#[derive(
    Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize, schemars::JsonSchema,
)]
pub struct ProtectedNote {
    /// The path as resolved (a pattern word keeps its wildcards; empty
    /// when part of the command cannot be known). A path that looks like
    /// it holds a secret is left out (only the glob is shown).
    pub path: String,
    /// The protected glob it meets, as configured.
    pub glob: String,
    /// How it was found: `literal`, `pattern` or `opaque`.
    pub how: HitKind,
}

impl From<ProtectedHit> for ProtectedNote {
    fn from(hit: ProtectedHit) -> ProtectedNote {
        let path = if crate::redact::holds_secret(&hit.path) {
            String::new()
        } else {
            hit.path
        };
        ProtectedNote {
            path,
            glob: hit.glob,
            how: hit.how,
        }
    }
}

/// How a protected path was found.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum HitKind {
    /// A literal word or string names it.
    Literal,
    /// A word the shell expands could become it.
    Pattern,
    /// Part of the command cannot be known without running it.
    Opaque,
}

impl ProtectedHit {
    /// One line for the approver and the model.
    pub fn describe(&self) -> String {
        match self.how {
            HitKind::Literal => format!(
                "it names {}, a protected path ({}): the gate's or an engine worker's configuration",
                self.path, self.glob
            ),
            HitKind::Pattern => format!(
                "{} could expand to a protected path ({})",
                self.path, self.glob
            ),
            HitKind::Opaque => format!(
                "part of the command cannot be known without running it, so it could write a protected path ({})",
                self.glob
            ),
        }
    }
}

impl ProtectedPaths {
    /// Compiles `globs` (paths) and `functions` (function-id globs).
    pub fn compile(globs: &[String], functions: &[String]) -> ProtectedPaths {
        let mut broken = false;
        let mut compiled = Vec::new();
        let mut tokens = Vec::new();
        for glob in globs {
            match GlobBuilder::new(glob)
                .literal_separator(true)
                .backslash_escape(true)
                .build()
            {
                Ok(g) => {
                    compiled.push((glob.as_str().into(), g.compile_matcher()));
                    tokens.push(tokenize_glob(glob));
                }
                Err(_) => broken = true,
            }
        }
        let patterns = functions
            .iter()
            .zip(0u32..)
            .map(|(f, slot)| (Pattern::parse_or_exact(f), slot))
            .collect();
        let functions = PatternTable::build(patterns).unwrap_or_else(|_| {
            broken = true;
            PatternTable::default()
        });
        ProtectedPaths {
            globs: compiled,
            tokens,
            functions,
            broken,
        }
    }

    /// Whether calls to `function_id` are judged.
    pub fn judges(&self, function_id: &str) -> bool {
        self.functions.first_match(function_id, |_| true).is_some()
    }

    /// Whether anything is protected at all.
    pub fn is_empty(&self) -> bool {
        self.globs.is_empty() && !self.broken
    }

    /// The protected path a call to `function_id` names, if any: its
    /// commands' words (from `readings`, the call's command fields read
    /// before the ladder) and its string arguments, resolved against
    /// `cwd`, else the turn's root (`turn`).
    pub fn judge(
        &self,
        function_id: &str,
        arguments: Option<&Value>,
        turn: Option<&Map<String, Value>>,
        readings: &Readings,
    ) -> Option<ProtectedHit> {
        if !self.judges(function_id) {
            return None;
        }
        if self.broken {
            return Some(ProtectedHit {
                glob: "**".into(),
                path: String::new(),
                how: HitKind::Opaque,
            });
        }
        if self.globs.is_empty() {
            return None;
        }
        let base = base_dir(arguments, turn);
        for model in readings.models() {
            if let Some(hit) = self.judge_model(model, base.as_deref()) {
                return Some(hit);
            }
        }
        let mut strings = Vec::new();
        if let Some(arguments) = arguments {
            collect_strings(arguments, function_id, true, &mut strings);
        }
        if strings.len() > MAX_STRINGS {
            return Some(ProtectedHit {
                glob: self
                    .globs
                    .first()
                    .map_or_else(String::new, |(g, _)| g.to_string()),
                path: format!("{} strings", strings.len()),
                how: HitKind::Opaque,
            });
        }
        strings
            .iter()
            .find_map(|s| self.judge_literal(s, base.as_deref()))
    }

    fn judge_model(&self, model: &Model, base: Option<&str>) -> Option<ProtectedHit> {
        if model.is_opaque() {
            return Some(ProtectedHit {
                glob: self.first_glob(),
                path: model.why().unwrap_or_default(),
                how: HitKind::Opaque,
            });
        }
        // A command that changes directory (`cd config && sed -i … x.yaml`,
        // `git -C dir …`) makes every relative word relative to somewhere
        // the gate cannot know: such words are read as if from anywhere.
        let base = if model.commands.iter().any(changes_directory) {
            Base::Anywhere
        } else {
            Base::Known(base)
        };
        model
            .commands
            .iter()
            .find_map(|command| self.judge_command(command, base))
    }

    fn judge_command(&self, command: &Command, base: Base<'_>) -> Option<ProtectedHit> {
        let words = command
            .words
            .iter()
            .chain(command.assignments.iter().map(|a| &a.value))
            .chain(command.redirects.iter().filter_map(|r| r.target.as_ref()));
        for word in words {
            let literal = word.kind == WordKind::Literal;
            // A word may hold a path after `=` or `:` (`--file=x`,
            // `if=x`, `PATH=a:b`): each part is judged too.
            let parts =
                std::iter::once(word.text.as_str()).chain(word.text.split(['=', ':']).skip(1));
            for part in parts {
                let hit = self.judge_word(part, literal, base);
                if hit.is_some() {
                    return hit;
                }
            }
        }
        None
    }

    /// One word of a command: a literal one is a path, any other a pattern;
    /// a relative word after a change of directory is read from anywhere.
    fn judge_word(&self, text: &str, literal: bool, base: Base<'_>) -> Option<ProtectedHit> {
        match base {
            Base::Known(base) if literal => self.judge_literal(text, base),
            Base::Known(base) => self.judge_pattern(text, base),
            Base::Anywhere if text.starts_with('/') && literal => self.judge_literal(text, None),
            Base::Anywhere if text.starts_with('/') => self.judge_pattern(text, None),
            Base::Anywhere if text.is_empty() => None,
            Base::Anywhere => self.judge_pattern(&format!("$D/{text}"), None),
        }
    }

    /// A literal path: resolved, normalised, matched.
    fn judge_literal(&self, text: &str, base: Option<&str>) -> Option<ProtectedHit> {
        if text.is_empty() || text.len() > 4096 {
            return None;
        }
        let path = resolve(text, base);
        self.globs.iter().find_map(|(glob, matcher)| {
            matcher.is_match(&path).then(|| ProtectedHit {
                glob: glob.to_string(),
                path: path.clone(),
                how: HitKind::Literal,
            })
        })
    }

    /// A word the shell still expands: when some path it could become is
    /// protected. Its expansions and glob characters are wildcards that
    /// may cross `/` (an expansion can hold one); a glob's `*` and `?` stay
    /// within a segment.
    fn judge_pattern(&self, text: &str, base: Option<&str>) -> Option<ProtectedHit> {
        let word = tokenize_word(text);
        let resolved = resolve_tokens(word, base);
        self.tokens
            .iter()
            .zip(&self.globs)
            .find_map(|(glob, (name, _))| {
                (tails_agree(&resolved, glob) && intersects(&resolved, glob)).then(|| {
                    ProtectedHit {
                        glob: name.to_string(),
                        path: render(&resolved),
                        how: HitKind::Pattern,
                    }
                })
            })
    }

    fn first_glob(&self) -> String {
        self.globs
            .first()
            .map_or_else(String::new, |(g, _)| g.to_string())
    }
}

/// Where the relative words of a command are read from.
#[derive(Debug, Clone, Copy)]
enum Base<'a> {
    /// This directory (or, without one, as written).
    Known(Option<&'a str>),
    /// A directory the gate cannot know (the command changed directory).
    Anywhere,
}

/// Whether a command changes the directory later words are read from:
/// `cd`, `pushd`, `popd`, or a `-C` / `--chdir` / `--directory` option.
fn changes_directory(command: &Command) -> bool {
    let program = command
        .program()
        .map(|w| w.text.rsplit('/').next().unwrap_or(&w.text));
    matches!(program, Some("cd" | "pushd" | "popd"))
        || command.words.iter().skip(1).any(|w| {
            w.text == "-C"
                || w.text.starts_with("--chdir")
                || w.text.starts_with("--directory")
                || w.text.starts_with("--cwd")
        })
}

/// The directory a relative path is read from: the call's `cwd` (when
/// absolute), else the harness's stamp of the call (`fs_scope.root`), else
/// the turn's root (`fs_scope.root`, then generation 1's `working_dir`).
fn base_dir(arguments: Option<&Value>, turn: Option<&Map<String, Value>>) -> Option<String> {
    let absolute = |v: Option<&Value>| {
        v.and_then(Value::as_str)
            .filter(|s| s.starts_with('/'))
            .map(str::to_owned)
    };
    let args = arguments.and_then(Value::as_object);
    let cwd = args.and_then(|a| a.get("cwd"));
    let stamp = args
        .and_then(|a| a.get("fs_scope"))
        .and_then(|s| s.get("root"));
    let turn_root = turn
        .and_then(|t| t.get("fs_scope"))
        .and_then(|s| s.get("root"));
    let working_dir = turn.and_then(|t| t.get("working_dir"));
    let root = absolute(stamp)
        .or_else(|| absolute(turn_root))
        .or_else(|| absolute(working_dir));
    match (cwd.and_then(Value::as_str), root) {
        (Some(c), _) if c.starts_with('/') => Some(c.to_owned()),
        (Some(c), Some(root)) => Some(format!("{root}/{c}")),
        (_, root) => root,
    }
}

/// Every string of the arguments (keys are not paths), but the harness's
/// own stamp of a call it stamps (`fs_scope` at the top level).
fn collect_strings<'v>(value: &'v Value, function_id: &str, top: bool, out: &mut Vec<&'v str>) {
    let mut stack: Vec<(&Value, bool)> = vec![(value, top)];
    while let Some((value, top)) = stack.pop() {
        if out.len() > MAX_STRINGS {
            return;
        }
        match value {
            Value::String(s) => out.push(s),
            Value::Array(items) => stack.extend(items.iter().map(|v| (v, false))),
            Value::Object(map) => {
                for (key, v) in map {
                    if top && key == "fs_scope" && stamped(function_id) {
                        continue;
                    }
                    stack.push((v, false));
                }
            }
            _ => {}
        }
    }
}

/// Whether the harness stamps its `fs_scope` onto calls of `function_id`
/// (`shell::*` but `shell::filesystem::*`, `coder::*`, `fp::pipe`): that
/// top-level key is the harness's, not the agent's.
fn stamped(function_id: &str) -> bool {
    (function_id.starts_with("shell::") && !function_id.starts_with("shell::filesystem::"))
        || function_id.starts_with("coder::")
        || function_id == "fp::pipe"
}

/// `text` read from `base` and normalised lexically.
fn resolve(text: &str, base: Option<&str>) -> String {
    let joined = match base {
        Some(base) if !text.starts_with('/') => format!("{base}/{text}"),
        _ => text.to_owned(),
    };
    let absolute = joined.starts_with('/');
    let mut parts: Vec<&str> = Vec::new();
    for segment in joined.split('/') {
        match segment {
            "" | "." => {}
            ".." => {
                if parts.last().is_some_and(|p| *p != "..") {
                    parts.pop();
                } else if !absolute {
                    parts.push("..");
                }
            }
            s => parts.push(s),
        }
    }
    let body = parts.join("/");
    if absolute {
        format!("/{body}")
    } else {
        body
    }
}

/// One element of a path pattern.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Token {
    /// This character.
    Char(char),
    /// Any one character but `/`.
    One,
    /// Any run of characters without `/`.
    Segment,
    /// Any run of characters, `/` included.
    Any,
}

/// A protected glob as tokens: `**` crosses segments, `*` and `?` do not,
/// a bracket expression is any one character, `{a,b}` any run within a
/// segment (an over-approximation: more holds, never fewer).
fn tokenize_glob(glob: &str) -> Vec<Token> {
    let mut out = Vec::new();
    let mut chars = glob.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '*' if chars.peek() == Some(&'*') => {
                chars.next();
                // `**/` also matches nothing at all.
                if chars.peek() == Some(&'/') {
                    chars.next();
                    out.push(Token::Any);
                    out.push(Token::Char('/'));
                    // Allow the empty directory run: `**/x` matches `x`.
                    out.pop();
                    out.push(Token::Any);
                    continue;
                }
                out.push(Token::Any);
            }
            '*' => out.push(Token::Segment),
            '?' => out.push(Token::One),
            '[' => {
                for d in chars.by_ref() {
                    if d == ']' {
                        break;
                    }
                }
                out.push(Token::One);
            }
            '{' => {
                for d in chars.by_ref() {
                    if d == '}' {
                        break;
                    }
                }
                out.push(Token::Segment);
            }
            '\\' => {
                if let Some(d) = chars.next() {
                    out.push(Token::Char(d));
                }
            }
            c => out.push(Token::Char(c)),
        }
    }
    out
}

/// A word the shell expands, as tokens: `$…`, `` `…` ``, `~`, `{…}` become
/// [`Token::Any`]; an unquoted glob's `*` and `?` stay within a segment, a
/// bracket expression is one character.
fn tokenize_word(text: &str) -> Vec<Token> {
    let mut out = Vec::new();
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '$' | '`' | '~' | '{' | '}' => {
                if out.last() != Some(&Token::Any) {
                    out.push(Token::Any);
                }
                // Skip a simple name or a bracketed part: it is all Any.
                while let Some(&d) = chars.peek() {
                    if d.is_ascii_alphanumeric()
                        || matches!(
                            d,
                            '_' | '('
                                | ')'
                                | '{'
                                | '}'
                                | '@'
                                | '*'
                                | '#'
                                | '?'
                                | '!'
                                | '-'
                                | ':'
                                | '='
                                | ' '
                                | '"'
                                | '\''
                        )
                    {
                        chars.next();
                    } else {
                        break;
                    }
                }
            }
            '*' => out.push(Token::Segment),
            '?' => out.push(Token::One),
            '[' => {
                for d in chars.by_ref() {
                    if d == ']' {
                        break;
                    }
                }
                out.push(Token::One);
            }
            c => out.push(Token::Char(c)),
        }
    }
    out
}

/// A pattern word read from `base`: a relative one is joined to it; `.`
/// and `..` segments of the literal part are folded.
fn resolve_tokens(word: Vec<Token>, base: Option<&str>) -> Vec<Token> {
    let absolute = word.first() == Some(&Token::Char('/'));
    let mut joined: Vec<Token> = match (base, absolute, word.first()) {
        // An expansion at the start may be absolute or not: keep it as is,
        // it already matches any prefix.
        (_, _, Some(Token::Any)) => Vec::new(),
        (Some(base), false, _) => base
            .chars()
            .map(Token::Char)
            .chain([Token::Char('/')])
            .collect(),
        _ => Vec::new(),
    };
    joined.extend(word);
    // Fold `.` and `..` segments that are wholly literal.
    let mut segments: Vec<Vec<Token>> = vec![Vec::new()];
    for t in joined {
        if t == Token::Char('/') {
            segments.push(Vec::new());
        } else if let Some(last) = segments.last_mut() {
            last.push(t);
        }
    }
    let leading = segments.first().is_some_and(Vec::is_empty) && segments.len() > 1;
    let mut kept: Vec<Vec<Token>> = Vec::new();
    for segment in segments.into_iter().skip(usize::from(leading)) {
        if segment.is_empty() || segment == [Token::Char('.')] {
            continue;
        }
        if segment == [Token::Char('.'), Token::Char('.')] {
            if kept.last().is_some_and(|s| !s.contains(&Token::Any)) {
                kept.pop();
            } else if kept.last().is_some() {
                // `..` after a segment that may hold `/`: anything above.
                kept.push(vec![Token::Any]);
            }
            continue;
        }
        kept.push(segment);
    }
    let mut out = Vec::new();
    if leading {
        out.push(Token::Char('/'));
    }
    for (i, segment) in kept.into_iter().enumerate() {
        if i > 0 {
            out.push(Token::Char('/'));
        }
        out.extend(segment);
    }
    out
}

fn render(tokens: &[Token]) -> String {
    tokens
        .iter()
        .map(|t| match t {
            Token::Char(c) => c.to_string(),
            Token::One => "?".into(),
            Token::Segment => "*".into(),
            Token::Any => "**".into(),
        })
        .collect()
}

/// The literal characters a pattern ends with, after its last wildcard.
fn literal_tail(tokens: &[Token]) -> &[Token] {
    let start = tokens
        .iter()
        .rposition(|t| !matches!(t, Token::Char(_)))
        .map_or(0, |at| at + 1);
    tokens.get(start..).unwrap_or(&[])
}

/// A necessary condition of [`intersects`], checked in one pass: a string
/// both patterns match ends with both literal tails, so the shorter tail
/// ends the longer. Most words of a command fail it against a glob such as
/// `**/config/shell*.yaml` (a word that ends in anything but `.yaml`), and
/// the product automaton, which costs `|a| × |b|` per word and glob, is
/// then not built.
fn tails_agree(a: &[Token], b: &[Token]) -> bool {
    let (x, y) = (literal_tail(a), literal_tail(b));
    let n = x.len().min(y.len());
    x.get(x.len() - n..) == y.get(y.len() - n..)
}

/// Whether some string matches both patterns (a product of the two
/// automata, explored breadth-first: at most `|a| × |b|` states).
fn intersects(a: &[Token], b: &[Token]) -> bool {
    let (n, m) = (a.len(), b.len());
    let mut seen = vec![false; (n + 1) * (m + 1)];
    let mut stack = vec![(0usize, 0usize)];
    while let Some((i, j)) = stack.pop() {
        let at = i * (m + 1) + j;
        if seen[at] {
            continue;
        }
        seen[at] = true;
        if i == n && j == m {
            return true;
        }
        // A wildcard may match nothing.
        if i < n && matches!(a[i], Token::Segment | Token::Any) {
            stack.push((i + 1, j));
        }
        if j < m && matches!(b[j], Token::Segment | Token::Any) {
            stack.push((i, j + 1));
        }
        // Both consume one character they can agree on.
        if i < n && j < m {
            let (x, y) = (a[i], b[j]);
            if let Some(slash) = agree(x, y) {
                let stay_i =
                    matches!(x, Token::Segment | Token::Any) && (!slash || x == Token::Any);
                let stay_j =
                    matches!(y, Token::Segment | Token::Any) && (!slash || y == Token::Any);
                let ni = if stay_i { i } else { i + 1 };
                let nj = if stay_j { j } else { j + 1 };
                if (ni, nj) != (i, j) {
                    stack.push((ni, nj));
                }
                if stay_i && stay_j {
                    // Both loop on one character: advance one of them.
                    stack.push((i + 1, j));
                    stack.push((i, j + 1));
                }
                if stay_i && !stay_j {
                    stack.push((i + 1, nj));
                }
                if stay_j && !stay_i {
                    stack.push((ni, j + 1));
                }
            }
        }
    }
    false
}

/// Whether `x` and `y` can each consume one same character; `Some(true)`
/// when that character must be `/`, `Some(false)` when it may be any but
/// `/`.
fn agree(x: Token, y: Token) -> Option<bool> {
    use Token::*;
    match (x, y) {
        (Char(a), Char(b)) => (a == b).then_some(a == '/'),
        (Char(c), Any) | (Any, Char(c)) => Some(c == '/'),
        (Char(c), One | Segment) | (One | Segment, Char(c)) => (c != '/').then_some(false),
        (Any, Any) => Some(false),
        (One | Segment, _) | (_, One | Segment) => Some(false),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::policy::Needs;

    fn paths() -> ProtectedPaths {
        ProtectedPaths::compile(
            &[
                "**/config/approval-gate*.yaml".into(),
                "**/config/shell*.yaml".into(),
                "**/config/iii-*.yaml".into(),
                "**/config/approval-gate.yaml".into(),
            ],
            &["shell::*".into(), "coder::*".into(), "fp::*".into()],
        )
    }

    fn judge(fid: &str, args: Value, turn: Option<Value>) -> Option<ProtectedHit> {
        let needs = Needs::for_record(fid, Some(&args));
        let readings = needs.read_inline();
        let turn = turn.and_then(|t| t.as_object().cloned());
        paths().judge(fid, Some(&args), turn.as_ref(), &readings)
    }

    #[test]
    fn rule_29_2_every_way_of_writing_the_entry_is_caught() {
        let cwd = json!({"fs_scope": {"root": "/srv/iii"}});
        for command in [
            "sed -i 's/manual/full/' /srv/iii/config/approval-gate.yaml",
            "sed -i 's/manual/full/' config/approval-gate.yaml",
            "echo 'default_mode: full' > config/approval-gate.yaml",
            "echo x | tee -a ./config/../config/approval-gate.yaml",
            "cp /tmp/x.yaml /srv/iii//config/approval-gate.yaml",
            "cat > config/shell.yaml <<EOF\nfs: {}\nEOF",
            "python3 -c 'open(\"x\")' config/iii-http.yaml",
            "dd of=config/approval-gate.yaml if=/tmp/x",
            "sed -i s/a/b/ config/*.yaml",
            "sed -i s/a/b/ config/approval-gate.y?ml",
            "cd config && sed -i s/a/b/ approval-gate.yaml",
            "pushd /srv/iii; sed -i s/a/b/ config/approval-gate.yaml",
            "git -C /srv/iii/config checkout approval-gate.yaml",
            "(cd /srv/iii/config; cp /tmp/x ./shell.yaml)",
            "sed -i s/a/b/ $DIR/approval-gate.yaml",
            "eval \"$X\"",
        ] {
            let hit = judge(
                "shell::exec",
                json!({"command": command}),
                Some(cwd.clone()),
            );
            assert!(hit.is_some(), "{command}");
        }
        // An argv and a coder write.
        assert!(judge(
            "shell::exec",
            json!({"command": "tee", "args": ["/srv/iii/config/approval-gate.yaml"]}),
            None
        )
        .is_some());
        assert!(judge(
            "coder::update-file",
            json!({"path": "config/approval-gate.yaml", "content": "x"}),
            Some(cwd.clone())
        )
        .is_some());
        // Relative to cwd.
        assert!(judge(
            "coder::write",
            json!({"path": "approval-gate.yaml", "cwd": "/srv/iii/config"}),
            None
        )
        .is_some());
    }

    #[test]
    fn rule_29_2_everyday_commands_in_the_workspace_continue() {
        let root = json!({"fs_scope": {"root": "/w/project"}});
        for command in [
            "cargo test",
            "git status",
            "ls src/*.rs",
            "cat config/app.yaml",
            "sed -i s/a/b/ src/config.rs",
            "cat README.md > /tmp/x",
            "grep -rn approval-gate src/",
            "echo approval-gate.yaml",
            "cd src && cargo test && sed -i s/a/b/ lib.rs",
            "find . -name '*.rs' -exec grep -n todo {} +",
        ] {
            let hit = judge(
                "shell::exec",
                json!({"command": command}),
                Some(root.clone()),
            );
            assert!(hit.is_none(), "{command}: {hit:?}");
        }
        // Functions outside the list are not judged.
        assert!(judge(
            "docs::write",
            json!({"path": "/srv/iii/config/approval-gate.yaml"}),
            None
        )
        .is_none());
    }

    #[test]
    fn lexical_normalisation() {
        assert_eq!(resolve("a/./b//c/../d", Some("/w")), "/w/a/b/d");
        assert_eq!(resolve("/../../x", None), "/x");
        assert_eq!(resolve("../x", Some("/w/p")), "/w/x");
        assert_eq!(resolve("x", None), "x");
    }

    #[test]
    fn pattern_intersection() {
        let glob = tokenize_glob("**/config/approval-gate*.yaml");
        let yes = |w: &str| intersects(&resolve_tokens(tokenize_word(w), Some("/w")), &glob);
        assert!(yes("config/*.yaml"));
        assert!(yes("$X"));
        assert!(yes("config/approval-gate.y?ml"));
        assert!(yes("/srv/*/config/approval-gate.yaml"));
        assert!(!yes("src/*.rs"));
        assert!(!yes("config/*.json"));
        assert!(!yes("$HOME/.bashrc"));
        assert!(!yes("*.yaml"), "a glob's * does not cross /");
    }

    fn token() -> impl proptest::strategy::Strategy<Value = Token> {
        use proptest::prelude::*;
        prop_oneof![
            4 => prop::sample::select(vec!['a', 'b', '/', '.']).prop_map(Token::Char),
            1 => Just(Token::One),
            1 => Just(Token::Segment),
            1 => Just(Token::Any),
        ]
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(4_000))]

        /// §29: the tails pre-check never turns away a word the product
        /// automaton finds protected (it only spares building it).
        #[test]
        fn rule_29_tails_check_never_rejects_an_intersection(
            a in proptest::collection::vec(token(), 0..8),
            b in proptest::collection::vec(token(), 0..8),
        ) {
            if intersects(&a, &b) {
                proptest::prop_assert!(tails_agree(&a, &b), "{a:?} ∩ {b:?}");
            }
        }
    }

    /// The pre-check can fail: a word that ends in another literal than
    /// the glob's is turned away before the automaton.
    #[test]
    fn rule_29_tails_check_turns_away_other_endings() {
        let glob = tokenize_glob("**/config/shell*.yaml");
        let word = resolve_tokens(tokenize_word("$D/policy.rs"), None);
        assert!(!tails_agree(&word, &glob));
        assert!(!intersects(&word, &glob));
        let word = resolve_tokens(tokenize_word("$D/shell-x.yaml"), None);
        assert!(tails_agree(&word, &glob));
        assert!(intersects(&word, &glob));
    }
}
