//! The command model (`architecture/contract.md` §25): what a command field
//! will run, read the way its target runs it.
//!
//! A pure room at floor 1: it imports nothing from the crate. It takes bash
//! source, an argv, or text split with shell-words rules and returns FACTS —
//! every simple command that can run, with its words reduced as bash reduces
//! them, where it was found (`inside bash -c`, `via sudo`, `in $(…)`), and
//! the reasons a value cannot be known without running it (opaque). It
//! returns no verdicts: `policy/` turns facts into deny, ask and allow.
//!
//! Bash source is parsed by tree-sitter's bash grammar (`tree-sitter-bash`,
//! maintained by the tree-sitter project; `architecture/internals.md`, "The
//! command model: why tree-sitter-bash", has the measurements behind the
//! choice). The grammar gives the structure; this room reads it as bash runs
//! it, and whatever it cannot prove it reads is opaque: a gate is judged by
//! the one input it lets through.
//!
//! Nothing here recurses on input: the tree walk and the nested readings
//! (`bash -c` strings, `eval`, wrapped argvs, command-bearing environment
//! values) run from explicit work lists, nesting is bounded by a linear
//! pre-scan before any parse, and every reading stops at its time budget.

mod argv;
mod bash;
mod clock;
mod contain;
mod kinds;
mod prescan;
mod tables;
mod word;

#[cfg(test)]
mod tests;

use std::fmt;
use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

pub use contain::Reader;
pub use tables::{
    hands_on_markdown, wrappers_markdown, Form, HandOn, HandOnCheck, Wrapper, COMMAND_ENV,
    HANDS_ON, LOADER_ENV, WRAPPERS,
};

/// A command field's value, as its target will run it (§25.2).
#[derive(Debug, Clone, Copy)]
pub enum Source<'a> {
    /// Bash source text: a `runs` field, or the bash reading of a
    /// `shell::*` `command` without `args`.
    Bash(&'a str),
    /// An argv run with no shell: `[program, args...]`.
    Argv(&'a [String]),
    /// Text split with shell-words rules and run with no shell (today's
    /// `shell::exec` without `args`): quotes group, `;`/`|`/`&` are ordinary
    /// characters.
    Words(&'a str),
}

/// An owned [`Source`], for handing a reading to the containment pool.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum OwnedSource {
    /// See [`Source::Bash`].
    Bash(String),
    /// See [`Source::Argv`].
    Argv(Vec<String>),
    /// See [`Source::Words`].
    Words(String),
}

impl OwnedSource {
    /// The borrowed form `read` takes.
    pub fn as_source(&self) -> Source<'_> {
        match self {
            OwnedSource::Bash(text) => Source::Bash(text),
            OwnedSource::Argv(words) => Source::Argv(words),
            OwnedSource::Words(text) => Source::Words(text),
        }
    }
}

/// How far one reading may go (§25.5, §25.10). Past any of them the model
/// is incomplete and opaque.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limits {
    /// The largest value read, in bytes (64 KiB).
    pub max_bytes: usize,
    /// The deepest nesting of brackets, quotes and substitutions the
    /// pre-scan lets through to the parser, and the deepest chain of nested
    /// readings (`bash -c` inside `eval` inside `$(…)` …) (64).
    pub max_nesting: usize,
    /// The most simple commands one value may yield, speculative ones
    /// included (1,000).
    pub max_commands: usize,
    /// Wall-clock time for one reading, parse included (10 ms).
    pub budget: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_bytes: 65_536,
            max_nesting: 64,
            max_commands: 1_000,
            budget: Duration::from_millis(10),
        }
    }
}

/// What a value can run: the facts `policy/` judges.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Model {
    /// Every simple command that can run: outer before nested, each reading
    /// in source order.
    pub commands: Vec<Command>,
    /// Why parts of the value cannot be known without running it. Empty
    /// means everything that runs is in `commands`.
    pub opaque: Vec<Opaque>,
    /// False when the reading stopped early (a parse error, the budget, too
    /// deep, too long, too many commands); the reason is also in `opaque`.
    pub complete: bool,
}

impl Model {
    /// Whether anything that runs is unknown.
    pub fn is_opaque(&self) -> bool {
        !self.opaque.is_empty()
    }

    /// The base names of the programs that run, in order, each once; the
    /// speculative command starts of §25.4 and programs built from an
    /// expansion are left out (what an approver reads as "Runs: …").
    pub fn programs(&self) -> Vec<&str> {
        let mut seen: Vec<&str> = Vec::new();
        for command in &self.commands {
            if command.speculative {
                continue;
            }
            let Some(program) = command.words.first() else {
                continue;
            };
            if program.kind != WordKind::Literal {
                continue;
            }
            let name = base_name(&program.text);
            if !seen.contains(&name) {
                seen.push(name);
            }
        }
        seen
    }

    /// One line for approvers and for the model: the first opaque reason,
    /// with where it was found, and how many more there are.
    pub fn why(&self) -> Option<String> {
        let first = self.opaque.first()?;
        let mut line = first.to_string();
        let more = self.opaque.len() - 1;
        if more > 0 {
            line.push_str(&format!(" (and {more} more)"));
        }
        Some(line)
    }

    /// The model of a value whose reading did not finish in time: nothing
    /// known, opaque, incomplete.
    pub fn opaque_budget() -> Model {
        Model {
            commands: Vec::new(),
            opaque: vec![Opaque {
                why: OpaqueWhy::Budget,
                via: Vec::new(),
                span: 0..0,
            }],
            complete: false,
        }
    }
}

/// One simple command that can run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Command {
    /// Program first, then its arguments; leading assignments are not here.
    pub words: Vec<Word>,
    /// Leading `NAME=value` words, and the words of a bare assignment
    /// statement (then `words` is empty).
    pub assignments: Vec<Assignment>,
    /// Its redirections, those of enclosing groups and loops included.
    pub redirects: Vec<Redirect>,
    /// How it was reached, outermost first; empty at the top level.
    pub via: Vec<Via>,
    /// How many readings or substitutions it is nested in.
    pub depth: u32,
    /// Its byte span in the top-level source; for a command found in a
    /// nested reading, the span of the outer construct that holds it.
    pub span: Range<usize>,
    /// A later word position after a wrapper, tried as a program start so
    /// that an option the wrapper table does not know cannot hide a command
    /// (§25.4). For deny and ask only.
    pub speculative: bool,
    /// This command hands a command on, by the wrapper table (the entry's
    /// name).
    pub wrapper: Option<&'static str>,
    /// An argument hands a command on, by the hand-on table (the entry's
    /// description, e.g. `git -c`).
    pub hands_on: Option<&'static str>,
}

impl Command {
    /// The program word, if the command has one.
    pub fn program(&self) -> Option<&Word> {
        self.words.first()
    }
}

/// One word as bash reduces it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Word {
    /// Quotes removed, `$'…'` decoded, backslashes removed; for a word with
    /// an expansion, the literal parts reduced and each expansion as written.
    pub text: String,
    /// What bash still does to it before it runs.
    pub kind: WordKind,
    /// Its byte span in the top-level source, when it lies directly in it
    /// (None for nested readings and argvs).
    pub span: Option<Range<usize>>,
}

impl Word {
    /// A fully known word with no place in a source (an argv's words).
    pub fn literal(text: impl Into<String>) -> Word {
        Word {
            text: text.into(),
            kind: WordKind::Literal,
            span: None,
        }
    }
}

/// What bash still does to a word before it runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum WordKind {
    /// Fully known.
    Literal,
    /// Unquoted glob characters (`*`, `?`, `[…]`) and nothing else dynamic;
    /// `leading` when it starts with a wildcard.
    Glob { leading: bool },
    /// Any expansion: `$x`, `${…}`, `$(…)`, `` `…` ``, `<(…)`, arithmetic, a
    /// tilde, brace expansion `{a,b}`, `"$@"`.
    Dynamic,
}

/// A `NAME=value` word.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Assignment {
    /// The name (with its subscript, if any, as written).
    pub name: String,
    /// The value, reduced like any word.
    pub value: Word,
}

/// A redirection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Redirect {
    /// The operator with its file descriptor, as written: `>`, `>>`, `2>`,
    /// `2>&1`, `>&2`, `<`, `<<`, `<<<`, `&>`, ….
    pub op: String,
    /// The target, when it is a word (`None` for a here-document body).
    pub target: Option<Word>,
}

/// How a command was reached.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Via {
    /// A command substitution, `$(…)` or `` `…` ``.
    Substitution,
    /// A process substitution, `<(…)` or `>(…)`.
    ProcessSubstitution,
    /// The `-c` string of a shell (or a wrapper's shell source, `su -c`).
    ShellC { shell: String },
    /// The words of `eval`.
    Eval,
    /// Code a `source`/`.` would read (only ever opaque).
    Source,
    /// The command a wrapper runs.
    Wrapper { name: String },
    /// The command of `find -exec/-execdir/-ok/-okdir`.
    FindExec,
    /// The value of a command-bearing environment variable.
    EnvValue { name: String },
    /// The body of an unquoted here-document.
    HereDoc,
    /// The body of a function definition.
    Function { name: String },
    /// A `coproc`.
    Coproc,
    /// The command an argument hands on (`git rebase --exec`, `rsync -e`,
    /// `ssh -o ProxyCommand=`): the hand-on table's entry.
    HandOn { what: String },
}

impl fmt::Display for Via {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Via::Substitution => write!(f, "in $(…)"),
            Via::ProcessSubstitution => write!(f, "in <(…)"),
            Via::ShellC { shell } => write!(f, "inside {shell} -c"),
            Via::Eval => write!(f, "inside eval"),
            Via::Source => write!(f, "in a sourced file"),
            Via::Wrapper { name } => write!(f, "via {name}"),
            Via::FindExec => write!(f, "in find -exec"),
            Via::EnvValue { name } => write!(f, "in ${name}"),
            Via::HereDoc => write!(f, "in a here-document"),
            Via::Function { name } => write!(f, "in function {name}"),
            Via::Coproc => write!(f, "in coproc"),
            Via::HandOn { what } => write!(f, "in {what}"),
        }
    }
}

/// A part of a value that cannot be known without running it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Opaque {
    /// Why.
    pub why: OpaqueWhy,
    /// How the opaque part was reached, outermost first.
    pub via: Vec<Via>,
    /// Its byte span in the top-level source (the outer construct's span for
    /// nested readings; `0..0` when the whole value is meant).
    pub span: Range<usize>,
}

impl fmt::Display for Opaque {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.why)?;
        for via in self.via.iter().rev() {
            write!(f, ", {via}")?;
        }
        Ok(())
    }
}

/// Why a part of a value is opaque (§25.5). Each line is written for an
/// operator reading a held call and for the model reading a denial.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum OpaqueWhy {
    /// The program word is built from an expansion (`$X`, `${…}`, `$(…)`, a
    /// tilde, brace expansion, `"$@"`).
    ProgramExpansion { word: String },
    /// The program word is a glob: the files present decide what runs.
    ProgramGlob { word: String },
    /// `eval`, `sh -c` or a wrapper's shell source built from an expansion.
    DynamicSource { what: String },
    /// A shell or `source` reads code from a file.
    CodeFromFile { what: String },
    /// A shell reads code from its standard input or a terminal.
    CodeFromStdin { what: String },
    /// A shell whose language this model does not read (`zsh`, `fish`,
    /// `csh`, `tcsh`, …).
    ForeignShell { shell: String },
    /// A builtin that runs code later or rebinds a name (`trap`, `alias`,
    /// `enable -f`, `hash -p`, `mapfile -C`, `complete -C`, `bind -x`, `fc`).
    RunsLater { builtin: String },
    /// `${…@P}`: prompt expansion runs command substitutions.
    PromptExpansion,
    /// `${!x}`: indirect expansion names a variable by a value.
    Indirection,
    /// An environment variable that loads code from elsewhere
    /// (`LD_PRELOAD`, `BASH_ENV`, `PROMPT_COMMAND`, …), or a command-bearing
    /// one whose value is not literal.
    CodeVariable { name: String },
    /// Arithmetic over a variable or an expansion: bash evaluates a
    /// variable's value as an expression, and `a[$(cmd)]` in it runs `cmd`.
    Arithmetic,
    /// An interpreter's code argument uses a primitive that can start a
    /// process (or load code).
    InterpreterCode {
        interpreter: String,
        primitive: String,
    },
    /// A `sed` script with the `e` command or the `s///e` flag.
    SedExecutes,
    /// A `git -c`/`--config-env` setting of a key whose value git runs (or
    /// that points git at code elsewhere).
    GitConfig { key: String },
    /// The program of `find -exec`, `xargs -I` or `parallel` is the found or
    /// read value.
    ReplacedProgram { wrapper: String },
    /// A debugger's or similar tool's own command language.
    ToolCommands { tool: String },
    /// A construct the grammar does not read the way bash runs it (a
    /// backtick in an expansion operand, `coproc`, a reserved word in
    /// command position).
    Unread { what: String },
    /// A parse error.
    Parse,
    /// Nesting past the limit (a linear pre-scan, before any parse).
    TooDeep,
    /// A value over the size limit.
    TooLong,
    /// More simple commands than the limit.
    TooMany,
    /// The reading ran past its time budget.
    Budget,
}

impl fmt::Display for OpaqueWhy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            OpaqueWhy::ProgramExpansion { word } => {
                write!(f, "the program `{word}` is built from an expansion")
            }
            OpaqueWhy::ProgramGlob { word } => {
                write!(
                    f,
                    "the program `{word}` is a glob: the files present decide what runs"
                )
            }
            OpaqueWhy::DynamicSource { what } => {
                write!(f, "{what} runs code built from an expansion")
            }
            OpaqueWhy::CodeFromFile { what } => write!(f, "{what} runs code from a file"),
            OpaqueWhy::CodeFromStdin { what } => {
                write!(f, "{what} runs code from its standard input")
            }
            OpaqueWhy::ForeignShell { shell } => {
                write!(f, "{shell} runs code in a language other than bash")
            }
            OpaqueWhy::RunsLater { builtin } => {
                write!(f, "`{builtin}` runs code later or rebinds a name")
            }
            OpaqueWhy::PromptExpansion => write!(f, "`${{…@P}}` runs command substitutions"),
            OpaqueWhy::Indirection => write!(f, "`${{!…}}` expands a variable named by a value"),
            OpaqueWhy::CodeVariable { name } => {
                write!(f, "${name} makes a program load or run code from elsewhere")
            }
            OpaqueWhy::Arithmetic => write!(
                f,
                "arithmetic over a variable: bash evaluates its value, which can run a command"
            ),
            OpaqueWhy::InterpreterCode {
                interpreter,
                primitive,
            } => write!(
                f,
                "{interpreter} code uses `{primitive}`, which can run a process"
            ),
            OpaqueWhy::SedExecutes => write!(f, "a sed script runs a command (`e`)"),
            OpaqueWhy::GitConfig { key } => write!(f, "git -c {key} makes git run a command"),
            OpaqueWhy::ReplacedProgram { wrapper } => {
                write!(f, "{wrapper} runs a program named by its input")
            }
            OpaqueWhy::ToolCommands { tool } => write!(f, "{tool} runs its own commands"),
            OpaqueWhy::Unread { what } => write!(f, "{what} is not read the way bash runs it"),
            OpaqueWhy::Parse => write!(f, "the command does not parse as bash"),
            OpaqueWhy::TooDeep => write!(f, "the command nests too deeply"),
            OpaqueWhy::TooLong => write!(f, "the command is too long"),
            OpaqueWhy::TooMany => write!(f, "the command runs too many commands"),
            OpaqueWhy::Budget => write!(f, "the command took too long to read"),
        }
    }
}

static PARSES: AtomicU64 = AtomicU64::new(0);

/// How many `read` calls this process has run: a test proves with it that
/// calls no command rule applies to never parse (§25.10).
pub fn parses() -> u64 {
    PARSES.load(Ordering::Relaxed)
}

/// The base name of a program word: `/usr/bin/rm` → `rm`.
pub fn base_name(program: &str) -> &str {
    match program.rfind('/') {
        Some(at) if at + 1 < program.len() => &program[at + 1..],
        Some(_) => program
            .trim_end_matches('/')
            .rsplit('/')
            .next()
            .unwrap_or(program),
        None => program,
    }
}

/// Read a value into its model. Pure, never panics, bounded in time by
/// `limits.budget` and in size by the other limits.
pub fn read(source: Source<'_>, limits: &Limits) -> Model {
    PARSES.fetch_add(1, Ordering::Relaxed);
    argv::Reading::new(limits).run(source)
}
