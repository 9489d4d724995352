//! Command fields, the naive way (`architecture/contract.md` § Commands are
//! judged as they will run). The command model's FACTS come from the crate
//! (`approval_gate::read`: the simple commands a value can run, their words,
//! how each was reached, what is opaque); everything here that turns facts
//! into "matches" is written again from the contract's text, with linear
//! scans and nothing cached beyond one decision's parses.
//!
//! * Which values are read, and how (§25.1, §25.2): a `shell::*` `command`
//!   is the argv `[command, ...args]` when `args` is an array of strings,
//!   else (no `args`) split with shell-words rules **and** read as bash; any
//!   other command field is bash (a string) or an argv (an array of
//!   strings). Anything else is unreadable.
//! * Deny and ask (§25.6, §25.7): any simple command that can run —
//!   speculative starts after a wrapper included — whose program's base
//!   name is the prefix's first word's base name and whose next words are
//!   the prefix's next words. A word built from an expansion where a word is
//!   compared may become any number of words, so from there on nothing is
//!   known: a doubt. No command seen but a doubt, or an opaque model: the
//!   rule is consulted as `opaque_command`.
//! * Allow rules and grants: every command of every reading plain (§25.6's
//!   list) and covered, `env` and `stdin` absent or empty. Who covers is
//!   the ladder's business (`crate::Policy`); this module answers for one
//!   command and one list of words.

use std::cell::RefCell;
use std::rc::Rc;

use approval_gate::{base_name, read, Command, Limits, Model, OwnedSource, Redirect, WordKind};
use serde_json::{Map, Value};

/// The values one reading of a command field asks the model about.
#[derive(Debug, Clone, PartialEq)]
pub enum Sources {
    /// Absent or `null`: a command constraint does not hold.
    Missing,
    /// Neither text nor an argv (or `args` that are not strings): deny and
    /// ask match, allow rules and grants do not.
    Unreadable,
    /// What to read; every one must pass for an allow, any one may match a
    /// deny.
    Read(Vec<OwnedSource>),
}

/// Whether a call to `fid` with the field named `key` is a `shell::*`
/// runner's `command` (`ignore_case`: deny and ask rules, §25.7).
pub fn is_shell_command(fid: &str, key: &str, ignore_case: bool) -> bool {
    fid.starts_with("shell::")
        && if ignore_case {
            key.eq_ignore_ascii_case("command")
        } else {
            key == "command"
        }
}

/// How a `shell::*` `command` reads for one value of its `args` (`None`:
/// no `args` key at all).
fn shell_sources(command: &str, args: Option<&Value>) -> Option<Vec<OwnedSource>> {
    match args {
        None | Some(Value::Null) => Some(vec![
            OwnedSource::Words(command.to_owned()),
            OwnedSource::Bash(command.to_owned()),
        ]),
        Some(Value::Array(items)) => {
            let mut argv = vec![command.to_owned()];
            for item in items {
                argv.push(item.as_str()?.to_owned());
            }
            Some(vec![OwnedSource::Argv(argv)])
        }
        Some(_) => None,
    }
}

/// Allow rules and grants: the exact names. `shell`: the value is a
/// `shell::*` `command` (its sibling is the key `args`).
pub fn strict_sources(value: Option<&Value>, obj: &Map<String, Value>, shell: bool) -> Sources {
    let value = match value {
        None | Some(Value::Null) => return Sources::Missing,
        Some(v) => v,
    };
    if shell {
        return match value {
            Value::String(command) => match shell_sources(command, obj.get("args")) {
                Some(read) => Sources::Read(read),
                None => Sources::Unreadable,
            },
            _ => Sources::Unreadable,
        };
    }
    plain_sources(value)
}

/// Deny and ask: every key that names `args` ignoring ASCII case is a
/// sibling a runner may read, and so is "no `args`" when the exact key is
/// not there (a runner that reads exact names sees none).
pub fn wide_sources(value: Option<&Value>, obj: &Map<String, Value>, shell: bool) -> Sources {
    let value = match value {
        None | Some(Value::Null) => return Sources::Missing,
        Some(v) => v,
    };
    if !shell {
        return plain_sources(value);
    }
    let Value::String(command) = value else {
        return Sources::Unreadable;
    };
    let mut siblings: Vec<Option<&Value>> = obj
        .iter()
        .filter(|(k, _)| k.eq_ignore_ascii_case("args"))
        .map(|(_, v)| Some(v))
        .collect();
    if !obj.contains_key("args") {
        siblings.push(None);
    }
    let mut out: Vec<OwnedSource> = Vec::new();
    for args in siblings {
        match shell_sources(command, args) {
            Some(read) => {
                for source in read {
                    if !out.contains(&source) {
                        out.push(source);
                    }
                }
            }
            None => return Sources::Unreadable,
        }
    }
    Sources::Read(out)
}

/// A command field that is not a `shell::*` `command`: text is bash, an
/// array of strings an argv.
fn plain_sources(value: &Value) -> Sources {
    match value {
        Value::String(text) => Sources::Read(vec![OwnedSource::Bash(text.clone())]),
        Value::Array(items) => {
            let argv: Option<Vec<String>> = items
                .iter()
                .map(|v| v.as_str().map(str::to_owned))
                .collect();
            match argv {
                Some(argv) => Sources::Read(vec![OwnedSource::Argv(argv)]),
                None => Sources::Unreadable,
            }
        }
        _ => Sources::Unreadable,
    }
}

/// The models of one decision: each source read once, at the reference's
/// limits.
#[derive(Debug)]
pub struct Models {
    limits: Limits,
    read: RefCell<Vec<(OwnedSource, Rc<Model>)>>,
}

impl Models {
    /// No model read yet.
    pub fn new(limits: Limits) -> Models {
        Models {
            limits,
            read: RefCell::new(Vec::new()),
        }
    }

    /// The model of `source`.
    pub fn of(&self, source: &OwnedSource) -> Rc<Model> {
        if let Some((_, model)) = self.read.borrow().iter().find(|(s, _)| s == source) {
            return Rc::clone(model);
        }
        let model = Rc::new(read(source.as_source(), &self.limits));
        self.read
            .borrow_mut()
            .push((source.clone(), Rc::clone(&model)));
        model
    }
}

/// What a command constraint of a deny or ask rule found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Found {
    /// Nothing it names can run.
    Nothing,
    /// A command it names runs, or the field is unreadable.
    Seen,
    /// It cannot be told: a word it compares is built from an expansion,
    /// or part of the value is opaque.
    Doubt,
}

/// The better of two findings for "does it match": seen beats doubt beats
/// nothing.
pub fn either(a: Found, b: Found) -> Found {
    match (a, b) {
        (Found::Seen, _) | (_, Found::Seen) => Found::Seen,
        (Found::Doubt, _) | (_, Found::Doubt) => Found::Doubt,
        _ => Found::Nothing,
    }
}

/// Deny and ask: what the sources run of `words`.
pub fn wide_find(sources: &Sources, words: &[String], models: &Models) -> Found {
    let read = match sources {
        Sources::Missing => return Found::Nothing,
        Sources::Unreadable => return Found::Seen,
        Sources::Read(read) => read,
    };
    let mut found = Found::Nothing;
    for source in read {
        let model = models.of(source);
        for command in &model.commands {
            found = either(found, starts_wide(command, words));
        }
        if model.is_opaque() {
            found = either(found, Found::Doubt);
        }
    }
    found
}

/// Deny and ask, one simple command: the program by base name, then each
/// word exactly; the first word built from an expansion (or a glob) where
/// a word is compared makes the rest unknown.
pub fn starts_wide(command: &Command, words: &[String]) -> Found {
    if command.words.is_empty() {
        return Found::Nothing;
    }
    if words.is_empty() {
        return Found::Seen;
    }
    let program = &command.words[0];
    if program.kind != WordKind::Literal || base_name(&program.text) != base_name(&words[0]) {
        return Found::Nothing;
    }
    for (i, want) in words.iter().enumerate().skip(1) {
        match command.words.get(i) {
            None => return Found::Nothing,
            Some(word) if word.kind != WordKind::Literal => return Found::Doubt,
            Some(word) if word.text != *want => return Found::Nothing,
            Some(_) => {}
        }
    }
    Found::Seen
}

/// Allow rules and grants, one simple command: its words start with
/// `words`, each compared word literal and equal (the program exactly:
/// `./git` is not `git`).
pub fn starts_exact(command: &Command, words: &[String]) -> bool {
    if command.words.len() < words.len() {
        return false;
    }
    command
        .words
        .iter()
        .zip(words)
        .all(|(word, want)| word.kind == WordKind::Literal && word.text == *want)
}

/// Allow rules and grants, one simple command: what §25.6 lets an allow
/// prefix cover at all — at the top level (not nested, not a speculative
/// start), nothing handed on, no leading assignment, a literal program, no
/// word built from an expansion or a glob that starts with a wildcard, and
/// only `2>&1`, `>&2` and `/dev/null` redirections.
pub fn plain(command: &Command) -> bool {
    if !command.via.is_empty() || command.speculative {
        return false;
    }
    if command.wrapper.is_some() || command.hands_on.is_some() {
        return false;
    }
    if !command.assignments.is_empty() {
        return false;
    }
    let Some(program) = command.words.first() else {
        return false;
    };
    if program.kind != WordKind::Literal {
        return false;
    }
    for word in &command.words {
        match word.kind {
            WordKind::Literal | WordKind::Glob { leading: false } => {}
            WordKind::Glob { leading: true } | WordKind::Dynamic => return false,
        }
    }
    command.redirects.iter().all(harmless)
}

/// `2>&1`, `>&2` (`1>&2`), or to or from the file `/dev/null`.
fn harmless(redirect: &Redirect) -> bool {
    let target = match &redirect.target {
        Some(word) if word.kind == WordKind::Literal => Some(word.text.as_str()),
        Some(_) => return false,
        None => None,
    };
    let whole = format!("{}{}", redirect.op, target.unwrap_or(""));
    if whole == "2>&1" || whole == ">&2" || whole == "1>&2" {
        return true;
    }
    // A here-document or here-string feeds text, not the file.
    !redirect.op.contains("<<") && target == Some("/dev/null")
}

/// `env` or `stdin` absent, `null` or empty.
pub fn quiet(value: Option<&Value>) -> bool {
    match value {
        None | Some(Value::Null) => true,
        Some(Value::String(s)) => s.is_empty(),
        Some(Value::Array(a)) => a.is_empty(),
        Some(Value::Object(o)) => o.is_empty(),
        Some(Value::Number(_) | Value::Bool(_)) => false,
    }
}

/// A prefix's words (`"rm -rf"` → `[rm, -rf]`), split like a command;
/// text with an unclosed quote is split on whitespace.
pub fn prefix_words(prefix: &str) -> Vec<String> {
    shell_words::split(prefix)
        .unwrap_or_else(|_| prefix.split_whitespace().map(str::to_owned).collect())
}

#[cfg(test)]
mod tests {
    use approval_gate::Source;

    use super::*;

    fn bash(text: &str) -> Model {
        read(Source::Bash(text), &Limits::default())
    }

    fn words(text: &str) -> Vec<String> {
        prefix_words(text)
    }

    #[test]
    fn rule_25_6_a_word_built_from_an_expansion_makes_the_rest_unknown() {
        let m = bash("git $A main");
        let c = &m.commands[0];
        assert_eq!(starts_wide(c, &words("git push --force")), Found::Doubt);
        assert_eq!(starts_wide(c, &words("git push")), Found::Doubt);
        assert_eq!(starts_wide(c, &words("git")), Found::Seen);
        assert_eq!(starts_wide(c, &words("gitx")), Found::Nothing);
        let m = bash("/usr/bin/git push -f");
        assert_eq!(starts_wide(&m.commands[0], &words("git push")), Found::Seen);
        assert!(!starts_exact(&m.commands[0], &words("git push")));
        assert_eq!(
            starts_wide(&m.commands[0], &words("git push --force")),
            Found::Nothing
        );
    }

    #[test]
    fn rule_25_6_plain_commands_and_harmless_redirections() {
        for text in [
            "ls 2>&1",
            "ls >&2",
            "ls >/dev/null",
            "ls 2>/dev/null",
            "ls </dev/null",
            "ls &>/dev/null",
            "ls src/*.rs",
        ] {
            let m = bash(text);
            assert!(m.commands.iter().all(plain), "{text}: {m:?}");
        }
        for text in [
            "ls > out",
            "ls 2>err",
            "X=1 ls",
            "ls *",
            "ls $HOME",
            "sudo ls",
            "ls <<< /dev/null",
        ] {
            let m = bash(text);
            assert!(!m.commands.iter().all(plain), "{text}: {m:?}");
        }
    }

    #[test]
    fn rule_25_2_shell_commands_read_as_their_runner_reads_them() {
        let obj = |v: Value| match v {
            Value::Object(m) => m,
            _ => Map::new(),
        };
        let o = obj(serde_json::json!({"command": "rm -rf /", "Args": []}));
        let wide = wide_sources(o.get("command"), &o, true);
        let Sources::Read(read) = wide else {
            panic!("{wide:?}")
        };
        assert!(read.contains(&OwnedSource::Argv(vec!["rm -rf /".into()])));
        assert!(read.contains(&OwnedSource::Words("rm -rf /".into())));
        assert_eq!(
            strict_sources(o.get("command"), &o, true),
            Sources::Read(vec![
                OwnedSource::Words("rm -rf /".into()),
                OwnedSource::Bash("rm -rf /".into())
            ])
        );
        let o = obj(serde_json::json!({"command": "rm", "args": ["-rf", 1]}));
        assert_eq!(
            wide_sources(o.get("command"), &o, true),
            Sources::Unreadable
        );
        assert_eq!(
            strict_sources(o.get("command"), &o, true),
            Sources::Unreadable
        );
        assert_eq!(
            plain_sources(&serde_json::json!(["a", 1])),
            Sources::Unreadable
        );
    }
}
