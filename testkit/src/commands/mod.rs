//! The proof of contract §25 ("commands are judged as they will run"): the
//! command corpus, a generator of bash strings that combines its classes,
//! and a real bash run under bubblewrap and strace to show what runs.
//!
//! - [`load`] reads the corpus (`tests/fixtures/commands/*.json`, one file
//!   per class; its README says what each holds): red-team and developer
//!   commands sent as `shell::exec` arguments, each with the outcome §25.6
//!   requires under a deny, an ask and an allow rule.
//! - [`generate`] makes thousands of bash strings that a real bash can run
//!   harmlessly, each a program wrapped in layers of the corpus's classes.
//! - [`Sandbox`] runs a [`Reading`] of a value — bash source, an argv, or
//!   text split with shell-words rules — and reports every program that
//!   really started, and which program started it.
//!
//! Nothing here knows the worker: the integration tests hold the model's
//! answers against these facts.

mod generate;
mod sandbox;
mod words;

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_json::{Map, Value};
use thiserror::Error;

pub use generate::{generate, Generated};
pub use sandbox::{parse_trace, Exec, Sandbox, Trace, Unavailable};
pub use words::{split as split_words, Unbalanced};

/// What the gate answers a call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Outcome {
    Continue,
    Deny,
    Hold,
}

impl Outcome {
    /// The gate's `decision` string.
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Continue => "continue",
            Outcome::Deny => "deny",
            Outcome::Hold => "hold",
        }
    }
}

/// The three outcomes a case states.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Expect {
    /// Under the deny rule on `target`, `full` mode, `deny_ask_allow`.
    pub deny: Outcome,
    /// Under the same rule as an ask rule.
    pub ask: Outcome,
    /// Under the allow rules of `allow_prefix`, `manual` mode.
    pub allow: Outcome,
}

/// One allow prefix or several (one allow rule each).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(untagged)]
enum Prefixes {
    One(String),
    Many(Vec<String>),
}

/// A case of the corpus.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Case {
    pub id: String,
    pub class: String,
    /// The denied word (`rm`, `curl`, `git push`).
    pub target: String,
    allow_prefix: Prefixes,
    /// The call's arguments, as sent to `shell::exec`.
    pub arguments: Value,
    pub expect: Expect,
    #[serde(default)]
    pub note: Option<String>,
    /// Why a real bash cannot show the target running although the case is
    /// denied (not installed, no network, a branch not taken, …).
    #[serde(default)]
    pub oracle_blind: Option<String>,
}

/// How a value can run: what the oracle runs and the model reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reading {
    /// Bash source, run as `bash -c`.
    Bash(String),
    /// An argv run with no shell (`{command, args}`).
    Argv(Vec<String>),
    /// Text today's shell splits with shell-words rules and runs with no
    /// shell (`{command}` without `args`).
    Words(String),
}

impl Reading {
    /// The argv the sandbox starts (`None`: nothing starts, the text does
    /// not split).
    pub fn argv(&self) -> Option<Vec<String>> {
        match self {
            Reading::Bash(text) => {
                Some(vec!["bash".into(), "-c".into(), "--".into(), text.clone()])
            }
            Reading::Argv(argv) => Some(argv.clone()),
            Reading::Words(text) => split_words(text).ok().filter(|w| !w.is_empty()),
        }
    }

    /// Whether the first program started is the reading's own bash (the
    /// sandbox's plumbing, not something the value runs).
    pub fn starts_with_own_shell(&self) -> bool {
        matches!(self, Reading::Bash(_))
    }

    /// Short text for reports.
    pub fn describe(&self) -> String {
        match self {
            Reading::Bash(text) => format!("bash {text:?}"),
            Reading::Argv(argv) => format!("argv {argv:?}"),
            Reading::Words(text) => format!("shell-words {text:?}"),
        }
    }
}

impl Case {
    /// The allow rules' prefixes.
    pub fn allow_prefixes(&self) -> Vec<&str> {
        match &self.allow_prefix {
            Prefixes::One(p) => vec![p.as_str()],
            Prefixes::Many(ps) => ps.iter().map(String::as_str).collect(),
        }
    }

    /// The readings of every command field a deny or ask rule reads (a key
    /// equal to `command` ignoring ASCII case, §25.7) whose value is a
    /// string: `{command, args}` is an argv; a `command` without an `args`
    /// array of strings is read both as shell-words and as bash (§25.2).
    /// Other types: none.
    pub fn readings(&self) -> Vec<Reading> {
        self.readings_of(|key| key.eq_ignore_ascii_case("command"))
    }

    /// The readings an allow rule makes: only the exact key `command`.
    pub fn readings_exact(&self) -> Vec<Reading> {
        self.readings_of(|key| key == "command")
    }

    fn readings_of(&self, is_command: impl Fn(&str) -> bool) -> Vec<Reading> {
        let Some(fields) = self.arguments.as_object() else {
            return Vec::new();
        };
        let mut out = Vec::new();
        for (key, value) in fields {
            let Some(text) = value.as_str() else { continue };
            if !is_command(key) {
                continue;
            }
            match argv_args(fields, key) {
                Some(args) => {
                    let mut argv = vec![text.to_owned()];
                    argv.extend(args);
                    out.push(Reading::Argv(argv));
                }
                None => {
                    out.push(Reading::Words(text.to_owned()));
                    out.push(Reading::Bash(text.to_owned()));
                }
            }
        }
        out
    }

    /// Whether `exec` is the target running: its program's base name is the
    /// target's first word and its arguments start with the rest.
    pub fn target_ran(&self, exec: &Exec) -> bool {
        let mut want = self.target.split_whitespace();
        if want.next() != Some(exec.program()) {
            return false;
        }
        let rest: Vec<&str> = want.collect();
        exec.argv.len() > rest.len()
            && exec.argv[1..=rest.len()]
                .iter()
                .zip(&rest)
                .all(|(a, b)| a == b)
    }
}

/// `args` beside the exact key `command`, when it is an array of strings.
fn argv_args(fields: &Map<String, Value>, key: &str) -> Option<Vec<String>> {
    if key != "command" {
        return None;
    }
    let args = fields.get("args")?.as_array()?;
    args.iter().map(|a| a.as_str().map(str::to_owned)).collect()
}

/// Why the corpus cannot be used.
#[derive(Debug, Error)]
pub enum CorpusError {
    #[error("reading {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path}: {source}")]
    Parse {
        path: PathBuf,
        source: serde_json::Error,
    },
    #[error("case {id}: {problem}")]
    Case { id: String, problem: String },
}

/// Every case of the corpus in `dir` (its `*.json` files, by name), checked:
/// ids unique and `<class>-NNN`, the class its file's name, each outcome
/// one its rule can give, and the ask outcome the deny outcome's twin
/// (§25.6 reads deny and ask rules alike).
pub fn load(dir: &Path) -> Result<Vec<Case>, CorpusError> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(|source| CorpusError::Read {
            path: dir.to_owned(),
            source,
        })?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    files.sort();
    let mut cases = Vec::new();
    let mut ids = HashSet::new();
    for path in files {
        let text = std::fs::read_to_string(&path).map_err(|source| CorpusError::Read {
            path: path.clone(),
            source,
        })?;
        let file_cases: Vec<Case> =
            serde_json::from_str(&text).map_err(|source| CorpusError::Parse {
                path: path.clone(),
                source,
            })?;
        let class = path
            .file_stem()
            .and_then(|s| s.to_str())
            .unwrap_or_default();
        for case in file_cases {
            let problem = check(&case, class);
            if !ids.insert(case.id.clone()) {
                return Err(bad(&case, "the id is not unique"));
            }
            if let Some(problem) = problem {
                return Err(bad(&case, problem));
            }
            cases.push(case);
        }
    }
    Ok(cases)
}

fn bad(case: &Case, problem: &str) -> CorpusError {
    CorpusError::Case {
        id: case.id.clone(),
        problem: problem.to_owned(),
    }
}

fn check(case: &Case, class: &str) -> Option<&'static str> {
    let e = case.expect;
    if case.class != class {
        return Some("its class is not its file's name");
    }
    if !case.id.starts_with(&format!("{class}-")) {
        return Some("its id does not start with its class");
    }
    if case.target.split_whitespace().next().is_none() {
        return Some("the target is empty");
    }
    if case.allow_prefixes().iter().any(|p| p.trim().is_empty()) {
        return Some("an allow prefix is empty");
    }
    if e.deny == Outcome::Hold || e.ask == Outcome::Deny || e.allow == Outcome::Deny {
        return Some("an outcome its rule cannot give");
    }
    if (e.deny == Outcome::Deny) != (e.ask == Outcome::Hold) {
        return Some("the ask outcome is not the deny outcome's twin");
    }
    if case.oracle_blind.is_some() && e.deny != Outcome::Deny {
        return Some("oracle_blind on a case that is not denied");
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn case(arguments: Value) -> Case {
        Case {
            id: "t-001".into(),
            class: "t".into(),
            target: "git push".into(),
            allow_prefix: Prefixes::One("ls".into()),
            arguments,
            expect: Expect {
                deny: Outcome::Continue,
                ask: Outcome::Continue,
                allow: Outcome::Hold,
            },
            note: None,
            oracle_blind: None,
        }
    }

    #[test]
    fn readings_follow_the_shape_of_the_arguments() {
        let c = case(json!({"command": "rm x", "args": ["-f"]}));
        assert_eq!(
            c.readings(),
            vec![Reading::Argv(vec!["rm x".into(), "-f".into()])]
        );
        let c = case(json!({"command": "rm x"}));
        assert_eq!(
            c.readings(),
            vec![Reading::Words("rm x".into()), Reading::Bash("rm x".into())]
        );
        let c = case(json!({"COMMAND": "rm x", "args": ["-f"]}));
        assert_eq!(c.readings().len(), 2, "args is the sibling of command only");
        assert!(case(json!({"command": 42})).readings().is_empty());
        assert!(case(json!({"cmd": "rm"})).readings().is_empty());
    }

    #[test]
    fn a_target_of_two_words_needs_the_subcommand() {
        let c = case(json!({}));
        let exec = |argv: &[&str]| Exec {
            pid: 1,
            path: "/usr/bin/git".into(),
            argv: argv.iter().map(|s| s.to_string()).collect(),
            spawner: None,
        };
        assert!(c.target_ran(&exec(&["git", "push", "origin"])));
        assert!(!c.target_ran(&exec(&["git", "pull"])));
        assert!(!c.target_ran(&exec(&["git"])));
    }
}
