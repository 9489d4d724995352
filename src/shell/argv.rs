//! One reading of a value: the work list of nested readings, and what each
//! simple command's words hand on — wrappers, shells with `-c`, `eval`,
//! command-bearing environment, builtins that run code later, interpreter
//! one-liners, `git -c` (§25.3–5). Words here are argv words: the same rules
//! apply whether they came from bash source, an argv or shell-words text.

use super::clock::Budget;
use std::collections::VecDeque;
use std::ops::Range;
use std::rc::Rc;

use super::tables::{self, Form, HandOnCheck, Wrapper};
use super::{
    base_name, bash, prescan, Assignment, Command, Limits, Model, Opaque, OpaqueWhy, Redirect,
    Source, Via, Word, WordKind,
};

/// Where a command is being read: how it was reached and where it lies.
#[derive(Debug, Clone)]
pub(super) struct Frame {
    pub(super) via: Vec<Via>,
    pub(super) depth: u32,
    /// The span of the construct in the top-level source (for nested
    /// readings, the outer construct's span).
    pub(super) span: Range<usize>,
    /// Whether the text being read is the top-level source (so its byte
    /// offsets are spans).
    pub(super) top: bool,
    pub(super) speculative: bool,
}

impl Frame {
    fn top(len: usize) -> Frame {
        Frame {
            via: Vec::new(),
            depth: 0,
            span: 0..len,
            top: true,
            speculative: false,
        }
    }

    /// A reading nested in this one (new text, or a wrapped argv).
    fn nested(&self, via: Via, span: &Range<usize>) -> Frame {
        let mut chain = self.via.clone();
        chain.push(via);
        Frame {
            via: chain,
            depth: self.depth + 1,
            span: span.clone(),
            top: false,
            speculative: self.speculative,
        }
    }
}

/// A reading still to do.
enum Job {
    Bash {
        text: String,
        frame: Frame,
    },
    Argv {
        argv: Rc<Vec<Word>>,
        start: usize,
        frame: Frame,
        /// Every later position of this argv was already tried as a
        /// speculative start (by a wrapper around this one).
        speculated: bool,
        span: Range<usize>,
    },
}

/// The shells whose `-c` string is bash source to this model.
const SHELLS: &[&str] = &[
    "sh", "bash", "dash", "ksh", "mksh", "ash", "rbash", "posh", "yash", "ksh93", "pdksh", "lksh",
    "oksh", "hush", "bash5",
];

/// Shells whose language this model does not read.
const FOREIGN_SHELLS: &[&str] = &[
    "zsh",
    "fish",
    "csh",
    "tcsh",
    "elvish",
    "nu",
    "xonsh",
    "pwsh",
    "powershell",
    "rc",
    "es",
    "ion",
    "osh",
    "ysh",
    "oil",
    "murex",
    "cmd",
    "cmd.exe",
    "nsh",
];

/// Builtins whose name arguments bash evaluates as `name[subscript]`.
const NAME_TAKERS: &[&str] = &[
    "read",
    "unset",
    "declare",
    "typeset",
    "local",
    "export",
    "readonly",
    "printf",
    "wait",
    "getopts",
    "test",
    "[",
    "mapfile",
    "readarray",
];

/// One reading in progress.
pub(super) struct Reading<'l> {
    limits: &'l Limits,
    budget: Budget,
    model: Model,
    jobs: VecDeque<Job>,
    stopped: bool,
    words: usize,
}

impl<'l> Reading<'l> {
    pub(super) fn new(limits: &'l Limits) -> Self {
        Reading {
            limits,
            budget: Budget::start(limits.budget),
            model: Model {
                commands: Vec::new(),
                opaque: Vec::new(),
                complete: true,
            },
            jobs: VecDeque::new(),
            stopped: false,
            words: 0,
        }
    }

    pub(super) fn budget(&self) -> Budget {
        self.budget
    }

    pub(super) fn max_nesting(&self) -> usize {
        self.limits.max_nesting
    }

    pub(super) fn over_budget(&self) -> bool {
        self.budget.spent()
    }

    pub(super) fn stopped(&self) -> bool {
        self.stopped
    }

    pub(super) fn incomplete(&mut self) {
        self.model.complete = false;
    }

    /// Stop the reading: a limit was reached.
    fn stop(&mut self, why: OpaqueWhy, frame: &Frame) {
        if !self.stopped {
            self.opaque(why, frame, frame.span.clone());
            self.model.complete = false;
            self.stopped = true;
        }
    }

    pub(super) fn opaque(&mut self, why: OpaqueWhy, frame: &Frame, span: Range<usize>) {
        let entry = Opaque {
            why,
            via: frame.via.clone(),
            span,
        };
        if !self.model.opaque.contains(&entry) && self.model.opaque.len() < 64 {
            self.model.opaque.push(entry);
        }
    }

    /// Queue a nested bash reading.
    pub(super) fn nested_bash(&mut self, text: String, frame: Frame) {
        self.jobs.push_back(Job::Bash { text, frame });
    }

    /// Run the reading to its end.
    pub(super) fn run(self, source: Source<'_>) -> Model {
        let closed = match source {
            Source::Bash(text) => Some(text.len()),
            Source::Argv(_) | Source::Words(_) => None,
        };
        let mut model = self.read_all(source);
        if let Some(len) = closed {
            bound_spans(&mut model, len);
        }
        model
    }

    fn read_all(mut self, source: Source<'_>) -> Model {
        match source {
            Source::Bash(text) => {
                let frame = Frame::top(text.len());
                if text.len() > self.limits.max_bytes {
                    self.stop(OpaqueWhy::TooLong, &frame);
                } else {
                    self.bash(text, &frame);
                }
            }
            Source::Argv(words) => {
                let frame = Frame::top(0);
                let size: usize = words.iter().map(|w| w.len() + 1).sum();
                if size > self.limits.max_bytes {
                    self.stop(OpaqueWhy::TooLong, &frame);
                } else {
                    let argv: Vec<Word> = words.iter().map(Word::literal).collect();
                    self.argv(
                        Rc::new(argv),
                        0,
                        &frame,
                        false,
                        Vec::new(),
                        Vec::new(),
                        0..0,
                    );
                }
            }
            Source::Words(text) => {
                let frame = Frame::top(text.len());
                if text.len() > self.limits.max_bytes {
                    self.stop(OpaqueWhy::TooLong, &frame);
                } else {
                    match shell_words::split(text) {
                        Ok(words) => {
                            let argv: Vec<Word> = words.into_iter().map(Word::literal).collect();
                            let span = 0..text.len();
                            self.argv(
                                Rc::new(argv),
                                0,
                                &frame,
                                false,
                                Vec::new(),
                                Vec::new(),
                                span,
                            );
                        }
                        Err(_) => self.stop(OpaqueWhy::Parse, &frame),
                    }
                }
            }
        }
        while let Some(job) = self.jobs.pop_front() {
            if self.stopped {
                break;
            }
            if self.over_budget() {
                let frame = Frame::top(0);
                self.stop(OpaqueWhy::Budget, &frame);
                break;
            }
            match job {
                Job::Bash { text, frame } => {
                    if frame.depth as usize > self.limits.max_nesting {
                        self.opaque(OpaqueWhy::TooDeep, &frame, frame.span.clone());
                        self.model.complete = false;
                        continue;
                    }
                    self.bash(&text, &frame);
                }
                Job::Argv {
                    argv,
                    start,
                    frame,
                    speculated,
                    span,
                } => {
                    if frame.depth as usize > self.limits.max_nesting {
                        self.opaque(OpaqueWhy::TooDeep, &frame, frame.span.clone());
                        self.model.complete = false;
                        continue;
                    }
                    self.argv(
                        argv,
                        start,
                        &frame,
                        speculated,
                        Vec::new(),
                        Vec::new(),
                        span,
                    );
                }
            }
        }
        self.model
    }

    fn bash(&mut self, text: &str, frame: &Frame) {
        if text.len() > self.limits.max_bytes {
            self.opaque(OpaqueWhy::TooLong, frame, frame.span.clone());
            self.model.complete = false;
            return;
        }
        if prescan::too_deep(text, self.limits.max_nesting) {
            self.opaque(OpaqueWhy::TooDeep, frame, frame.span.clone());
            self.model.complete = false;
            return;
        }
        bash::walk(self, text, frame);
    }

    /// A simple command the bash walk found.
    pub(super) fn simple(
        &mut self,
        words: Vec<Word>,
        assignments: Vec<Assignment>,
        redirects: Vec<Redirect>,
        frame: &Frame,
    ) {
        let span = frame.span.clone();
        self.argv(
            Rc::new(words),
            0,
            frame,
            false,
            assignments,
            redirects,
            span,
        );
    }

    /// Count a command against the limits; false when the reading stops.
    fn admit(&mut self, words: usize, frame: &Frame) -> bool {
        if self.stopped {
            return false;
        }
        self.words = self.words.saturating_add(words);
        if self.model.commands.len() >= self.limits.max_commands
            || self.words > self.limits.max_bytes.saturating_mul(4)
        {
            self.stop(OpaqueWhy::TooMany, frame);
            return false;
        }
        true
    }

    /// Read the simple command `argv[start..]`.
    #[allow(clippy::too_many_arguments)]
    fn argv(
        &mut self,
        argv: Rc<Vec<Word>>,
        start: usize,
        frame: &Frame,
        speculated: bool,
        assignments: Vec<Assignment>,
        redirects: Vec<Redirect>,
        span: Range<usize>,
    ) {
        let words = argv.get(start..).unwrap_or(&[]);
        let here = Frame {
            span: span.clone(),
            ..frame.clone()
        };
        for a in &assignments {
            self.assignment(&a.name, &a.value, &here);
        }
        if words.is_empty() && assignments.is_empty() {
            return;
        }
        if !self.admit(words.len(), &here) {
            return;
        }
        let index = self.model.commands.len();
        self.model.commands.push(Command {
            words: words.to_vec(),
            assignments,
            redirects,
            via: frame.via.clone(),
            depth: frame.depth,
            span: span.clone(),
            speculative: frame.speculative,
            wrapper: None,
            hands_on: hands_on(words),
        });
        let Some(program) = words.first() else {
            return;
        };
        match program.kind {
            WordKind::Dynamic => {
                if !frame.speculative || start == 0 {
                    self.opaque(
                        OpaqueWhy::ProgramExpansion {
                            word: program.text.clone(),
                        },
                        &here,
                        span,
                    );
                }
                return;
            }
            WordKind::Glob { .. } => {
                if !frame.speculative || start == 0 {
                    self.opaque(
                        OpaqueWhy::ProgramGlob {
                            word: program.text.clone(),
                        },
                        &here,
                        span,
                    );
                }
                return;
            }
            WordKind::Literal => {}
        }
        let name = base_name(&program.text).to_string();
        let handed = self.program(&name, &argv, start, &here, speculated);
        if let Some(wrapper) = handed {
            if let Some(command) = self.model.commands.get_mut(index) {
                command.wrapper = Some(wrapper);
            }
        }
    }

    /// What the program `name` at `argv[start]` runs besides itself.
    /// Returns the wrapper entry's name when it hands a command on.
    fn program(
        &mut self,
        name: &str,
        argv: &Rc<Vec<Word>>,
        start: usize,
        here: &Frame,
        speculated: bool,
    ) -> Option<&'static str> {
        let words = &argv[start..];
        let span = here.span.clone();
        if SHELLS.contains(&name) {
            self.shell(name, words, here);
            return None;
        }
        if FOREIGN_SHELLS.contains(&name) {
            let informational = words[1..]
                .iter()
                .all(|w| matches!(w.text.as_str(), "--version" | "--help" | "-v" | "-h"));
            if !informational || words.len() == 1 {
                self.opaque(
                    OpaqueWhy::ForeignShell {
                        shell: name.to_string(),
                    },
                    here,
                    span,
                );
            }
            return None;
        }
        match name {
            "eval" => {
                self.source_words("eval", &words[1..], here, Via::Eval);
                return None;
            }
            "source" | "." => {
                if words.len() > 1 {
                    self.opaque(
                        OpaqueWhy::CodeFromFile {
                            what: format!("`{name}`"),
                        },
                        here,
                        span,
                    );
                }
                return None;
            }
            "trap" => {
                let sets = words[1..].iter().any(|w| !w.text.starts_with('-'))
                    && !(words.len() >= 2 && words[1].text == "-");
                if sets {
                    self.runs_later("trap", here);
                }
                return None;
            }
            "alias" => {
                if words[1..].iter().any(|w| w.text.contains('=')) {
                    self.runs_later("alias", here);
                }
                return None;
            }
            "enable" => {
                if has_short_flag(&words[1..], 'f') {
                    self.runs_later("enable -f", here);
                }
                return None;
            }
            "hash" => {
                if has_short_flag(&words[1..], 'p') {
                    self.runs_later("hash -p", here);
                }
                return None;
            }
            "mapfile" | "readarray" if has_short_flag(&words[1..], 'C') => {
                self.runs_later(&format!("{name} -C"), here);
            }
            "complete" | "compgen" => {
                if has_short_flag(&words[1..], 'C') || has_short_flag(&words[1..], 'F') {
                    self.runs_later(&format!("{name} -C/-F"), here);
                }
                return None;
            }
            "bind" => {
                if has_short_flag(&words[1..], 'x') {
                    self.runs_later("bind -x", here);
                }
                return None;
            }
            "fc" | "caller" if name == "fc" => {
                self.runs_later("fc", here);
                return None;
            }
            "let" => {
                self.opaque(OpaqueWhy::Arithmetic, here, span);
                return None;
            }
            "shopt" => {
                if words
                    .iter()
                    .any(|w| w.text == "expand_aliases" || w.text == "extdebug")
                {
                    self.runs_later(&format!("shopt {}", words[words.len() - 1].text), here);
                }
                return None;
            }
            "set"
                if words.iter().any(|w| {
                    w.text == "functrace"
                        || (w.text.starts_with('-')
                            && !w.text.starts_with("--")
                            && w.text.contains('T'))
                }) =>
            {
                self.runs_later("set -T", here);
            }
            _ => {}
        }
        if matches!(
            name,
            "declare" | "typeset" | "local" | "export" | "readonly"
        ) {
            self.declaration(name, words, here);
        }
        if NAME_TAKERS.contains(&name) {
            self.names_with_subscripts(name, words, here);
        }
        if let Some(options) = tables::interpreter_code_options(name) {
            self.interpreter(name, words, options, here);
            return None;
        }
        match name {
            "awk" | "gawk" | "mawk" | "nawk" => {
                self.awk(name, words, here);
                return None;
            }
            "sed" | "gsed" => {
                self.sed(words, here);
                return None;
            }
            "git" => {
                self.git(words, here);
                return None;
            }
            "scp" | "sftp" => {
                self.ssh_options(words, here);
                return None;
            }
            "zip" => {
                for value in option_values(words, &["-TT", "--unzip-command"]) {
                    self.hand_on_source("zip -TT", &value, here);
                }
                return None;
            }
            "man" => {
                for value in option_values(words, &["-P", "--pager", "-H", "--html"]) {
                    self.hand_on_source("man -P", &value, here);
                }
                return None;
            }
            "less" | "more" | "most" => {
                if words[1..]
                    .iter()
                    .any(|w| w.text.starts_with('+') && w.text.contains(['!', '|']))
                {
                    self.tool_commands(name, here);
                }
                return None;
            }
            "vim" | "vi" | "nvim" | "view" | "ex" | "gvim" | "vimdiff" | "nano" | "emacs" => {
                let commands = words[1..].iter().any(|w| {
                    let t = w.text.as_str();
                    (t.starts_with('+') && !t[1..].chars().all(|c| c.is_ascii_digit()))
                        || matches!(
                            t,
                            "-c" | "--cmd"
                                | "-S"
                                | "-s"
                                | "--eval"
                                | "-l"
                                | "--load"
                                | "-f"
                                | "--funcall"
                                | "-x"
                                | "--script"
                        )
                        || t.starts_with("--eval=")
                        || t.starts_with("--cmd=")
                });
                if commands {
                    self.tool_commands(name, here);
                }
                return None;
            }
            "psql" | "mysql" | "mariadb" | "sqlite3" | "duckdb" | "sqlplus" | "ftp" | "ed" => {
                let shells = words[1..].iter().any(|w| {
                    let t = w.text.to_ascii_lowercase();
                    t.contains("\\!")
                        || t.contains(".shell")
                        || t.contains(".system")
                        || t.contains("system ")
                        || t.starts_with('!')
                }) || matches!(name, "ed" | "ftp");
                let script = words[1..]
                    .iter()
                    .any(|w| w.text == "-f" || w.text.starts_with("--file"));
                if shells || script {
                    self.tool_commands(name, here);
                }
                return None;
            }
            "make" | "gmake" => {
                if words[1..].iter().any(|w| {
                    let t = w.text.as_str();
                    t.starts_with("SHELL=")
                        || t.starts_with(".SHELLFLAGS=")
                        || t.starts_with("--eval")
                        || t == "-E"
                }) {
                    self.tool_commands(name, here);
                }
                return None;
            }
            "rsync" => {
                for value in option_values(words, &["-e", "--rsh", "--rsync-path"]) {
                    self.hand_on_source("rsync -e", &value, here);
                }
                return None;
            }
            "tar" | "bsdtar" | "gtar" => {
                for value in option_values(
                    words,
                    &[
                        "--to-command",
                        "-I",
                        "--use-compress-program",
                        "--info-script",
                        "--new-volume-script",
                        "--rsh-command",
                        "-F",
                    ],
                ) {
                    self.hand_on_source("tar --to-command", &value, here);
                }
                for value in option_values(words, &["--checkpoint-action"]) {
                    if let Some(command) = value.text.strip_prefix("exec=") {
                        let word = Word {
                            text: command.to_string(),
                            kind: value.kind,
                            span: None,
                        };
                        self.hand_on_source("tar --checkpoint-action", &word, here);
                    }
                }
                return None;
            }
            _ => {}
        }
        let wrapper = tables::wrapper(name)?;
        self.wrapper(wrapper, argv, start, here, speculated)
    }

    /// A program that runs its own command language, which can start a
    /// shell (`vim -c '!…'`, `less +!…`, `psql -c '\\! …'`).
    fn tool_commands(&mut self, tool: &str, here: &Frame) {
        self.opaque(
            OpaqueWhy::ToolCommands {
                tool: tool.to_string(),
            },
            here,
            here.span.clone(),
        );
    }

    fn runs_later(&mut self, builtin: &str, here: &Frame) {
        self.opaque(
            OpaqueWhy::RunsLater {
                builtin: builtin.to_string(),
            },
            here,
            here.span.clone(),
        );
    }

    /// Read literal words joined with spaces as bash (`eval`, a wrapper's
    /// shell source); anything dynamic is opaque.
    fn source_words(&mut self, what: &str, words: &[Word], here: &Frame, via: Via) {
        if words.is_empty() {
            return;
        }
        if words.iter().any(|w| w.kind != WordKind::Literal) {
            self.opaque(
                OpaqueWhy::DynamicSource {
                    what: format!("`{what}`"),
                },
                here,
                here.span.clone(),
            );
            return;
        }
        let text = words
            .iter()
            .map(|w| w.text.as_str())
            .collect::<Vec<_>>()
            .join(" ");
        let frame = here.nested(via, &here.span);
        self.nested_bash(text, frame);
    }

    /// A shell: its `-c` string is bash; a script file or standard input is
    /// opaque.
    fn shell(&mut self, name: &str, words: &[Word], here: &Frame) {
        let mut has_c = false;
        let mut reads_stdin = false;
        let mut only_info = true;
        let mut i = 1;
        let mut operand: Option<&Word> = None;
        while i < words.len() {
            let w = &words[i];
            let t = w.text.as_str();
            if w.kind != WordKind::Literal {
                operand = Some(w);
                break;
            }
            if t == "--" || t == "-" {
                if t == "-" {
                    reads_stdin = true;
                }
                i += 1;
                operand = words.get(i);
                break;
            }
            if let Some(long) = t.strip_prefix("--") {
                match long {
                    "rcfile" | "init-file" => {
                        i += 2;
                        only_info = false;
                        continue;
                    }
                    "version" | "help" => {}
                    _ => only_info = false,
                }
                i += 1;
                continue;
            }
            if (t.starts_with('-') || t.starts_with('+')) && t.len() > 1 {
                only_info = false;
                let mut takes_value = false;
                for c in t[1..].chars() {
                    match c {
                        'c' => has_c = true,
                        's' => reads_stdin = true,
                        'o' | 'O' => takes_value = true,
                        _ => {}
                    }
                }
                i += if takes_value { 2 } else { 1 };
                continue;
            }
            operand = Some(w);
            break;
        }
        if has_c {
            match operand {
                Some(source) if source.kind == WordKind::Literal => {
                    let frame = here.nested(
                        Via::ShellC {
                            shell: name.to_string(),
                        },
                        &here.span,
                    );
                    self.nested_bash(source.text.clone(), frame);
                }
                Some(_) => self.opaque(
                    OpaqueWhy::DynamicSource {
                        what: format!("`{name} -c`"),
                    },
                    here,
                    here.span.clone(),
                ),
                None => {}
            }
            return;
        }
        match operand {
            Some(script) if !reads_stdin => self.opaque(
                OpaqueWhy::CodeFromFile {
                    what: format!("`{name} {}`", script.text),
                },
                here,
                here.span.clone(),
            ),
            _ => {
                if !(only_info && words.len() > 1) {
                    self.opaque(
                        OpaqueWhy::CodeFromStdin {
                            what: format!("`{name}`"),
                        },
                        here,
                        here.span.clone(),
                    );
                }
            }
        }
    }

    /// An assignment: a command-bearing variable's literal value is read as
    /// bash; a code-loading one is opaque.
    fn assignment(&mut self, name: &str, value: &Word, here: &Frame) {
        let bare = name.split('[').next().unwrap_or(name);
        if tables::env_listed(tables::LOADER_ENV, bare) {
            self.opaque(
                OpaqueWhy::CodeVariable {
                    name: bare.to_string(),
                },
                here,
                here.span.clone(),
            );
            return;
        }
        if tables::COMMAND_ENV.contains(&bare) {
            if value.kind != WordKind::Literal {
                self.opaque(
                    OpaqueWhy::CodeVariable {
                        name: bare.to_string(),
                    },
                    here,
                    here.span.clone(),
                );
                return;
            }
            let text = value.text.trim_start_matches(['|', ' ']).to_string();
            if text.trim().is_empty() {
                return;
            }
            let frame = here.nested(
                Via::EnvValue {
                    name: bare.to_string(),
                },
                &here.span,
            );
            self.nested_bash(text, frame);
        }
    }

    /// `export`/`declare`/…: assignments in its words, and the flags that
    /// make later assignments evaluate (`-i`) or name other variables (`-n`).
    fn declaration(&mut self, name: &str, words: &[Word], here: &Frame) {
        for w in &words[1..] {
            let t = w.text.as_str();
            if t.starts_with('-') || t.starts_with('+') {
                if t[1..].contains(['i', 'n']) && t.len() > 1 {
                    self.opaque(OpaqueWhy::Arithmetic, here, here.span.clone());
                }
                continue;
            }
            if let Some((var, value)) = t.split_once('=') {
                if value.starts_with('(') && value.contains(['$', '`']) {
                    // `declare 'a=($(cmd))'`: bash reads a quoted compound
                    // assignment again, and runs what it finds.
                    self.opaque(
                        OpaqueWhy::Unread {
                            what: format!("`{name}` of a compound assignment"),
                        },
                        here,
                        here.span.clone(),
                    );
                }
                let var = var.trim_end_matches('+');
                let value = Word {
                    text: value.to_string(),
                    kind: w.kind,
                    span: None,
                };
                self.assignment(var, &value, here);
            }
        }
    }

    /// `read 'a[$(cmd)]'` and friends evaluate the subscript of a name.
    fn names_with_subscripts(&mut self, name: &str, words: &[Word], here: &Frame) {
        let check: Vec<Word> = match name {
            "printf" | "test" | "[" => option_values(words, &["-v"]),
            _ => words[1..].to_vec(),
        };
        for w in &check {
            let t = w.text.split('=').next().unwrap_or("");
            if let Some(open) = t.find('[') {
                let index = t[open + 1..].trim_end_matches(']');
                let plain = index == "@"
                    || index == "*"
                    || (!index.is_empty() && index.chars().all(|c| c.is_ascii_digit()));
                if !plain {
                    self.opaque(OpaqueWhy::Arithmetic, here, here.span.clone());
                    return;
                }
            }
        }
    }

    /// An interpreter's code argument: opaque when it can start a process.
    fn interpreter(&mut self, name: &str, words: &[Word], options: &[&str], here: &Frame) {
        let mut i = 1;
        let mut code_found = false;
        let mut informational = false;
        while i < words.len() {
            let w = &words[i];
            let t = w.text.as_str();
            if options.contains(&t) && !t.starts_with('-') {
                // `deno eval CODE`.
                if let Some(code) = words.get(i + 1) {
                    self.scan_code(name, code, here);
                }
                return;
            }
            if !t.starts_with('-') || t == "-" || t == "--" {
                if t == "-" {
                    self.opaque(
                        OpaqueWhy::CodeFromStdin {
                            what: format!("`{name} -`"),
                        },
                        here,
                        here.span.clone(),
                    );
                }
                // A script file or module: code from a file the command
                // names, read like any program's input.
                return;
            }
            if matches!(t, "--version" | "-V" | "-v" | "--help" | "-h") {
                informational = true;
            }
            if t == "-m" && name.starts_with("py") {
                return;
            }
            // `--eval=CODE`.
            if let Some((opt, value)) = t.split_once('=') {
                if options.contains(&opt) {
                    let code = Word {
                        text: value.to_string(),
                        kind: w.kind,
                        span: None,
                    };
                    self.scan_code(name, &code, here);
                    code_found = true;
                    i += 1;
                    continue;
                }
            }
            if options.contains(&t) {
                if let Some(code) = words.get(i + 1) {
                    self.scan_code(name, code, here);
                }
                code_found = true;
                i += 2;
                if !name.starts_with("perl") && !name.starts_with("ruby") {
                    return;
                }
                continue;
            }
            // A cluster ending in a code option (`perl -ne CODE`,
            // `python -cCODE`).
            if !t.starts_with("--") {
                let letters: Vec<char> = t[1..].chars().collect();
                let mut consumed = false;
                for (k, c) in letters.iter().enumerate() {
                    let opt = format!("-{c}");
                    if options.contains(&opt.as_str()) {
                        let attached: String = letters[k + 1..].iter().collect();
                        if attached.is_empty() {
                            if let Some(code) = words.get(i + 1) {
                                self.scan_code(name, code, here);
                            }
                            i += 1;
                        } else {
                            let code = Word {
                                text: attached,
                                kind: w.kind,
                                span: None,
                            };
                            self.scan_code(name, &code, here);
                        }
                        code_found = true;
                        consumed = true;
                        break;
                    }
                }
                if consumed {
                    i += 1;
                    continue;
                }
            }
            i += 1;
        }
        if !code_found && !informational {
            // No script, no code: it reads code from its standard input.
            self.opaque(
                OpaqueWhy::CodeFromStdin {
                    what: format!("`{name}`"),
                },
                here,
                here.span.clone(),
            );
        }
    }

    fn scan_code(&mut self, interpreter: &str, code: &Word, here: &Frame) {
        if code.kind != WordKind::Literal {
            self.opaque(
                OpaqueWhy::DynamicSource {
                    what: format!("`{interpreter}` code"),
                },
                here,
                here.span.clone(),
            );
            return;
        }
        let lower = code.text.to_lowercase();
        if let Some(primitive) = tables::SPAWN_PRIMITIVES
            .iter()
            .find(|p| lower.contains(&p.to_lowercase()))
        {
            self.opaque(
                OpaqueWhy::InterpreterCode {
                    interpreter: interpreter.to_string(),
                    primitive: (*primitive).to_string(),
                },
                here,
                here.span.clone(),
            );
        }
    }

    fn awk(&mut self, name: &str, words: &[Word], here: &Frame) {
        match awk_programs(words) {
            AwkPrograms::Given(programs) => {
                for code in &programs {
                    self.awk_program(name, code, here);
                }
            }
            AwkPrograms::FromFile(option) => self.opaque(
                OpaqueWhy::CodeFromFile {
                    what: format!("`{name} {option}`"),
                },
                here,
                here.span.clone(),
            ),
        }
    }

    fn awk_program(&mut self, name: &str, code: &Word, here: &Frame) {
        if code.kind != WordKind::Literal {
            self.opaque(
                OpaqueWhy::DynamicSource {
                    what: format!("`{name}` program"),
                },
                here,
                here.span.clone(),
            );
            return;
        }
        if let Some(primitive) = awk_primitive(&code.text) {
            self.opaque(
                OpaqueWhy::InterpreterCode {
                    interpreter: name.to_string(),
                    primitive: (*primitive).to_string(),
                },
                here,
                here.span.clone(),
            );
        }
    }

    fn sed(&mut self, words: &[Word], here: &Frame) {
        let scripts = match sed_scripts(words) {
            SedScripts::Given(scripts) => scripts,
            SedScripts::FromFile => {
                self.opaque(
                    OpaqueWhy::CodeFromFile {
                        what: "`sed -f`".into(),
                    },
                    here,
                    here.span.clone(),
                );
                return;
            }
        };
        for script in scripts {
            if script.kind != WordKind::Literal || sed_reads(&script.text).executes {
                self.opaque(OpaqueWhy::SedExecutes, here, here.span.clone());
                return;
            }
        }
    }

    fn git(&mut self, words: &[Word], here: &Frame) {
        let mut i = 1;
        while i < words.len() {
            let w = &words[i];
            let t = w.text.as_str();
            if !t.starts_with('-') {
                break;
            }
            let (opt, attached) = match t.split_once('=') {
                Some((o, v)) if t.starts_with("--") => (o, Some(v)),
                _ => (t, None),
            };
            match opt {
                "-c" | "--config-env" => {
                    let value = attached.map(str::to_string).or_else(|| {
                        i += 1;
                        words.get(i).map(|w| w.text.clone())
                    });
                    if let Some(value) = value {
                        let key = value.split('=').next().unwrap_or("");
                        if git_key_runs(key) || w.kind != WordKind::Literal {
                            self.opaque(
                                OpaqueWhy::GitConfig {
                                    key: key.to_string(),
                                },
                                here,
                                here.span.clone(),
                            );
                        }
                    }
                }
                "-C" | "--git-dir" | "--work-tree" | "--namespace" | "--super-prefix"
                | "--list-cmds" | "--attr-source"
                    if attached.is_none() =>
                {
                    i += 1;
                }
                "--exec-path" if attached.is_some() => {
                    self.opaque(
                        OpaqueWhy::GitConfig {
                            key: "--exec-path".into(),
                        },
                        here,
                        here.span.clone(),
                    );
                }
                _ if t.starts_with("-c") && t.len() > 2 && !t.starts_with("--") => {
                    let key = t[2..].split('=').next().unwrap_or("");
                    if git_key_runs(key) {
                        self.opaque(
                            OpaqueWhy::GitConfig {
                                key: key.to_string(),
                            },
                            here,
                            here.span.clone(),
                        );
                    }
                }
                _ => {}
            }
            i += 1;
        }
        let Some(sub) = words.get(i) else {
            return;
        };
        let rest = &words[i..];
        match sub.text.as_str() {
            "rebase" => {
                for value in option_values(rest, &["-x", "--exec"]) {
                    self.hand_on_source("git rebase --exec", &value, here);
                }
            }
            "bisect" if rest.get(1).is_some_and(|w| w.text == "run") && rest.len() > 2 => {
                let argv: Vec<Word> = rest[2..].to_vec();
                let frame = here.nested(
                    Via::HandOn {
                        what: "git bisect run".into(),
                    },
                    &here.span,
                );
                self.jobs.push_back(Job::Argv {
                    argv: Rc::new(argv),
                    start: 0,
                    span: here.span.clone(),
                    frame,
                    speculated: false,
                });
            }
            "submodule" => {
                if let Some(at) = rest.iter().position(|w| w.text == "foreach") {
                    let command: Vec<Word> = rest[at + 1..]
                        .iter()
                        .filter(|w| {
                            w.text != "--recursive" && w.text != "--quiet" && w.text != "-q"
                        })
                        .cloned()
                        .collect();
                    self.source_words(
                        "git submodule foreach",
                        &command,
                        here,
                        Via::HandOn {
                            what: "git submodule foreach".into(),
                        },
                    );
                }
            }
            "filter-branch" => {
                let filters = [
                    "--env-filter",
                    "--tree-filter",
                    "--index-filter",
                    "--parent-filter",
                    "--msg-filter",
                    "--commit-filter",
                    "--tag-name-filter",
                ];
                for value in option_values(rest, &filters) {
                    self.hand_on_source("git filter-branch", &value, here);
                }
            }
            "difftool" => {
                for value in option_values(rest, &["-x", "--extcmd"]) {
                    self.hand_on_source("git difftool --extcmd", &value, here);
                }
            }
            "grep" => {
                for w in rest {
                    if let Some(pager) = w
                        .text
                        .strip_prefix("--open-files-in-pager=")
                        .or_else(|| w.text.strip_prefix("-O").filter(|p| !p.is_empty()))
                    {
                        let word = Word {
                            text: pager.to_string(),
                            kind: w.kind,
                            span: None,
                        };
                        self.hand_on_source("git grep -O", &word, here);
                    }
                }
            }
            "fetch" | "clone" | "pull" | "ls-remote" | "archive" | "push" | "remote" => {
                for value in
                    option_values(rest, &["--upload-pack", "-u", "--receive-pack", "--exec"])
                {
                    self.hand_on_source("git --upload-pack", &value, here);
                }
                if sub.text == "clone" {
                    for value in option_values(rest, &["-c", "--config"]) {
                        let key = value.text.split('=').next().unwrap_or("");
                        if git_key_runs(key) {
                            self.opaque(
                                OpaqueWhy::GitConfig {
                                    key: key.to_string(),
                                },
                                here,
                                here.span.clone(),
                            );
                        }
                    }
                    if !option_values(rest, &["--template"]).is_empty() {
                        self.opaque(
                            OpaqueWhy::GitConfig {
                                key: "--template".into(),
                            },
                            here,
                            here.span.clone(),
                        );
                    }
                }
            }
            _ => {}
        }
        self.ssh_options(words, here);
    }

    /// `-o ProxyCommand=…` and friends of ssh, scp and sftp run locally.
    fn ssh_options(&mut self, words: &[Word], here: &Frame) {
        let name = base_name(&words[0].text);
        if !matches!(name, "ssh" | "scp" | "sftp") {
            return;
        }
        for value in option_values(words, &["-o"]) {
            let (key, command) = match value.text.split_once(['=', ' ']) {
                Some((k, v)) => (k.trim().to_ascii_lowercase(), v.trim().to_string()),
                None => (value.text.to_ascii_lowercase(), String::new()),
            };
            if matches!(
                key.as_str(),
                "proxycommand" | "localcommand" | "knownhostscommand" | "remotecommand"
            ) {
                let word = Word {
                    text: command,
                    kind: value.kind,
                    span: None,
                };
                self.hand_on_source("ssh -o ProxyCommand", &word, here);
            }
        }
        if name != "ssh" {
            for value in option_values(words, &["-S"]) {
                self.hand_on_source("scp -S", &value, here);
            }
        }
    }

    /// A value an argument hands on as a command: read as bash.
    fn hand_on_source(&mut self, what: &str, value: &Word, here: &Frame) {
        self.source_words(
            what,
            std::slice::from_ref(value),
            here,
            Via::HandOn {
                what: what.to_string(),
            },
        );
    }

    /// Unwrap a wrapper at `argv[start]`.
    fn wrapper(
        &mut self,
        entry: &'static Wrapper,
        argv: &Rc<Vec<Word>>,
        start: usize,
        here: &Frame,
        speculated: bool,
    ) -> Option<&'static str> {
        let words = &argv[start..];
        let via = Via::Wrapper {
            name: entry.name.to_string(),
        };
        let parsed = parse_options(entry, words);
        let mut handed = false;
        let mut inner: Option<usize> = None;
        for source in &parsed.sources {
            self.source_words(entry.name, std::slice::from_ref(source), here, via.clone());
            handed = true;
        }
        let mut at = parsed.next;
        match entry.form {
            Form::Find => {
                handed |= self.find(words, here);
            }
            Form::Env => {
                while let Some(w) = words.get(at) {
                    let Some((name, value)) = w.text.split_once('=') else {
                        break;
                    };
                    if name.is_empty()
                        || w.kind != WordKind::Literal
                            && !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
                    {
                        break;
                    }
                    let value = Word {
                        text: value.to_string(),
                        kind: w.kind,
                        span: None,
                    };
                    self.assignment(name, &value, here);
                    at += 1;
                }
                if !parsed.sources.is_empty() && at < words.len() {
                    // `env -S 'a b' c`: the split string and the rest run as one
                    // command; already read as bash with the string alone,
                    // read the rest as well.
                    inner = Some(at);
                } else if parsed.sources.is_empty() && at < words.len() {
                    inner = Some(at);
                }
            }
            Form::Xargs => {
                if at < words.len() {
                    inner = Some(at);
                    if let Some(replace) = parsed.value_of(&["-I", "--replace", "-i"]) {
                        if words[at].text.contains(replace.as_str()) {
                            self.opaque(
                                OpaqueWhy::ReplacedProgram {
                                    wrapper: "xargs -I".into(),
                                },
                                here,
                                here.span.clone(),
                            );
                        }
                    }
                } else {
                    let frame = here.nested(via.clone(), &here.span);
                    self.jobs.push_back(Job::Argv {
                        argv: Rc::new(vec![Word::literal("echo")]),
                        start: 0,
                        frame,
                        speculated: true,
                        span: here.span.clone(),
                    });
                    handed = true;
                }
            }
            Form::Sudo => {
                let shell = parsed
                    .flags
                    .iter()
                    .any(|f| matches!(f.as_str(), "-s" | "-i" | "--shell" | "--login"));
                let lookup = parsed.flags.iter().any(|f| {
                    matches!(
                        f.as_str(),
                        "-l" | "--list"
                            | "-v"
                            | "-k"
                            | "-K"
                            | "-e"
                            | "--edit"
                            | "-V"
                            | "--version"
                            | "-h"
                            | "--help"
                    )
                });
                if shell {
                    if at < words.len() {
                        self.source_words(entry.name, &words[at..], here, via.clone());
                        handed = true;
                    } else {
                        self.opaque(
                            OpaqueWhy::CodeFromStdin {
                                what: format!("`{} -s`", entry.name),
                            },
                            here,
                            here.span.clone(),
                        );
                    }
                } else if at < words.len() && !lookup {
                    inner = Some(at);
                }
            }
            Form::Su => {
                let by_user = parsed.value_of(&["-u", "--user"]).is_some();
                if parsed.sources.is_empty() {
                    if by_user && at < words.len() {
                        inner = Some(at);
                    } else if !parsed
                        .flags
                        .iter()
                        .any(|f| matches!(f.as_str(), "-h" | "--help" | "-V" | "--version"))
                    {
                        self.opaque(
                            OpaqueWhy::CodeFromStdin {
                                what: format!("`{}` (a login shell)", entry.name),
                            },
                            here,
                            here.span.clone(),
                        );
                    }
                }
            }
            Form::Flock => {
                if parsed.sources.is_empty() && at < words.len() {
                    inner = Some(at);
                }
            }
            Form::Ssh => {
                self.ssh_options(words, here);
                if at + 1 < words.len() {
                    self.source_words("ssh", &words[at + 1..], here, via.clone());
                    handed = true;
                }
            }
            Form::Busybox => {
                if at < words.len() && !words[at].text.starts_with('-') {
                    inner = Some(at);
                }
            }
            Form::Command => {
                let lookup = parsed
                    .flags
                    .iter()
                    .any(|f| f.contains('v') || f.contains('V'));
                if !lookup && at < words.len() {
                    inner = Some(at);
                }
            }
            Form::Gdb => {
                self.opaque(
                    OpaqueWhy::ToolCommands {
                        tool: entry.name.to_string(),
                    },
                    here,
                    here.span.clone(),
                );
                if let Some(args) = words.iter().position(|w| w.text == "--args") {
                    if args + 1 < words.len() {
                        inner = Some(args + 1);
                    }
                }
            }
            Form::Source => {
                if entry.name == "parallel" {
                    let end = words[at..]
                        .iter()
                        .position(|w| w.text.starts_with(":::") || w.text.starts_with("::::"))
                        .map_or(words.len(), |p| at + p);
                    if end == at {
                        self.opaque(
                            OpaqueWhy::CodeFromStdin {
                                what: "`parallel`".into(),
                            },
                            here,
                            here.span.clone(),
                        );
                    } else {
                        if words[at].text.contains('{') {
                            self.opaque(
                                OpaqueWhy::ReplacedProgram {
                                    wrapper: "parallel".into(),
                                },
                                here,
                                here.span.clone(),
                            );
                        }
                        self.source_words(entry.name, &words[at..end], here, via.clone());
                        handed = true;
                    }
                } else if entry.name == "tmux" || entry.name == "hyperfine" {
                    // Each argument may be a shell command of its own.
                    for w in &words[at..] {
                        if w.text.contains(' ') || w.kind != WordKind::Literal {
                            self.source_words(
                                entry.name,
                                std::slice::from_ref(w),
                                here,
                                via.clone(),
                            );
                            handed = true;
                        }
                    }
                    if at < words.len() {
                        inner = Some(at);
                    }
                } else if at < words.len() {
                    self.source_words(entry.name, &words[at..], here, via.clone());
                    handed = true;
                }
            }
            Form::Argv | Form::ArgvOrShell => {
                if parsed.sources.is_empty() {
                    if at < words.len() {
                        inner = Some(at);
                    } else if entry.form == Form::ArgvOrShell
                        && !parsed
                            .flags
                            .iter()
                            .any(|f| matches!(f.as_str(), "-h" | "--help" | "-V" | "--version"))
                    {
                        self.opaque(
                            OpaqueWhy::CodeFromStdin {
                                what: format!("`{}` with no command (a shell)", entry.name),
                            },
                            here,
                            here.span.clone(),
                        );
                    }
                }
            }
        }
        if let Some(at) = inner {
            handed = true;
            let frame = here.nested(via.clone(), &here.span);
            self.jobs.push_back(Job::Argv {
                argv: Rc::clone(argv),
                start: start + at,
                frame,
                speculated: true,
                span: here.span.clone(),
            });
        }
        // §25.4 read literally: after a wrapper, every later word position
        // is also a program start, whether or not the table found a
        // command (`command -v rm`, `sudo -l rm`), so that an option the
        // table does not know cannot hide one; and the wrapper is marked.
        // `find` hands on only through its `-exec` clauses (`Reading::find`).
        if entry.form != Form::Find {
            handed = true;
        }
        if handed && !speculated && entry.form != Form::Find {
            let chosen = inner.map(|at| start + at);
            for position in start + 1..argv.len() {
                if Some(position) == chosen {
                    continue;
                }
                let w = &argv[position];
                if w.kind != WordKind::Literal || w.text.starts_with('-') || w.text.is_empty() {
                    continue;
                }
                let mut frame = here.nested(via.clone(), &here.span);
                frame.speculative = true;
                self.jobs.push_back(Job::Argv {
                    argv: Rc::clone(argv),
                    start: position,
                    frame,
                    speculated: true,
                    span: here.span.clone(),
                });
            }
        }
        handed.then_some(entry.name)
    }

    /// `find … -exec CMD … ;`: each clause's command.
    fn find(&mut self, words: &[Word], here: &Frame) -> bool {
        let mut handed = false;
        let mut i = 1;
        while i < words.len() {
            let t = words[i].text.as_str();
            if matches!(t, "-exec" | "-execdir" | "-ok" | "-okdir") {
                let begin = i + 1;
                let mut end = begin;
                while end < words.len() {
                    let e = words[end].text.as_str();
                    if e == ";" || (e == "+" && end > begin && words[end - 1].text == "{}") {
                        break;
                    }
                    end += 1;
                }
                if end > begin {
                    handed = true;
                    if words[begin].text.contains("{}") {
                        self.opaque(
                            OpaqueWhy::ReplacedProgram {
                                wrapper: format!("find {t}"),
                            },
                            here,
                            here.span.clone(),
                        );
                    } else {
                        let clause: Rc<Vec<Word>> = Rc::new(words[begin..end].to_vec());
                        let frame = here.nested(Via::FindExec, &here.span);
                        self.jobs.push_back(Job::Argv {
                            argv: Rc::clone(&clause),
                            start: 0,
                            frame: frame.clone(),
                            // Its later positions are queued here.
                            speculated: true,
                            span: here.span.clone(),
                        });
                        // §25.4: the words after the clause's program are
                        // program starts too (`-exec grep -l rm {} +`).
                        for position in 1..clause.len() {
                            let w = &clause[position];
                            if w.kind != WordKind::Literal
                                || w.text.starts_with('-')
                                || w.text.is_empty()
                                || w.text.contains("{}")
                            {
                                continue;
                            }
                            let mut speculative = frame.clone();
                            speculative.speculative = true;
                            self.jobs.push_back(Job::Argv {
                                argv: Rc::clone(&clause),
                                start: position,
                                frame: speculative,
                                speculated: true,
                                span: here.span.clone(),
                            });
                        }
                    }
                }
                i = end + 1;
                continue;
            }
            i += 1;
        }
        handed
    }
}

/// The options of a wrapper, read.
/// Every span within a top-level bash value: it is read with a newline
/// after it (`bash::closed`), and a construct the grammar ends at that
/// newline must not point past the value. (Only a top-level bash value has
/// spans of its own text; nested readings carry their outer span.)
fn bound_spans(model: &mut Model, len: usize) {
    let bound = |span: &mut Range<usize>| {
        span.end = span.end.min(len);
        span.start = span.start.min(span.end);
    };
    let bound_word = |word: &mut Word| word.span.as_mut().into_iter().for_each(bound);
    for command in &mut model.commands {
        bound(&mut command.span);
        command.words.iter_mut().for_each(bound_word);
        for assignment in &mut command.assignments {
            bound_word(&mut assignment.value);
        }
        for redirect in &mut command.redirects {
            if let Some(target) = redirect.target.as_mut() {
                bound_word(target);
            }
        }
    }
    for opaque in &mut model.opaque {
        bound(&mut opaque.span);
    }
}

struct Parsed {
    /// The index of the first word after the options and operands.
    next: usize,
    /// Flags seen (and options, without their values).
    flags: Vec<String>,
    /// Values of options that take one, by option.
    values: Vec<(String, String)>,
    /// Values of options whose value is bash source.
    sources: Vec<Word>,
}

impl Parsed {
    fn value_of(&self, options: &[&str]) -> Option<String> {
        self.values
            .iter()
            .find(|(o, _)| options.contains(&o.as_str()))
            .map(|(_, v)| v.clone())
    }
}

fn parse_options(entry: &Wrapper, words: &[Word]) -> Parsed {
    let mut parsed = Parsed {
        next: words.len(),
        flags: Vec::new(),
        values: Vec::new(),
        sources: Vec::new(),
    };
    let takes = |opt: &str| -> Option<u8> {
        entry
            .options
            .iter()
            .find(|(o, _)| *o == opt)
            .map(|(_, n)| *n)
    };
    let source = |opt: &str| entry.source_options.contains(&opt);
    // `su`, `runuser`, `script`, `flock`, `sg` take their source option
    // anywhere (GNU getopt permutes, flock looks after the lock file).
    let anywhere = matches!(entry.form, Form::Su | Form::Flock) || entry.name == "sg";
    if anywhere {
        let mut i = 1;
        while i < words.len() {
            let w = &words[i];
            let t = w.text.as_str();
            if t == "--" && entry.form != Form::Flock {
                break;
            }
            if let Some((opt, value)) = t.split_once('=').filter(|_| t.starts_with("--")) {
                if source(opt) {
                    parsed.sources.push(Word {
                        text: value.to_string(),
                        kind: w.kind,
                        span: None,
                    });
                }
            } else if source(t) {
                if let Some(value) = words.get(i + 1) {
                    parsed.sources.push(value.clone());
                }
                i += 1;
            } else if t.starts_with('-') && !t.starts_with("--") && t.len() > 2 {
                // `-qc SOURCE`, `-cSOURCE`: a cluster with a source option.
                let letters: Vec<char> = t[1..].chars().collect();
                for (k, c) in letters.iter().enumerate() {
                    if source(&format!("-{c}")) {
                        let rest: String = letters[k + 1..].iter().collect();
                        if rest.is_empty() {
                            if let Some(value) = words.get(i + 1) {
                                parsed.sources.push(value.clone());
                            }
                            i += 1;
                        } else {
                            parsed.sources.push(Word {
                                text: rest,
                                kind: w.kind,
                                span: None,
                            });
                        }
                        break;
                    }
                }
            }
            i += 1;
        }
    }
    let mut i = 1;
    let mut operands_left = entry.operands;
    while let Some(w) = words.get(i) {
        let t = w.text.as_str();
        if w.kind != WordKind::Literal {
            break;
        }
        if t == "--" {
            i += 1;
            break;
        }
        if entry.form == Form::Su && t == "-" {
            parsed.flags.push(t.to_string());
            i += 1;
            continue;
        }
        let is_option =
            t.starts_with('-') && t.len() > 1 || (entry.name == "nice" && t.starts_with('-'));
        if !is_option {
            if operands_left > 0 && entry.form != Form::Su {
                operands_left -= 1;
                i += 1;
                if entry.form == Form::Flock {
                    // `flock LOCK -c SOURCE`: the source was taken above.
                    if words.get(i).is_some_and(|w| source(&w.text)) {
                        return Parsed {
                            next: words.len(),
                            ..parsed
                        };
                    }
                }
                continue;
            }
            if entry.form == Form::Su && !parsed.sources.is_empty() {
                // `su [-] user -c …`: the user and the rest are not a command.
                return Parsed {
                    next: words.len(),
                    ..parsed
                };
            }
            break;
        }
        // Whole-word options first (`-ex`, `--bind`, `-n`).
        let (head, attached) = match t.split_once('=') {
            Some((h, v)) if t.starts_with("--") => (h, Some(v)),
            _ => (t, None),
        };
        if source(head) {
            if anywhere {
                i += if attached.is_some() { 1 } else { 2 };
                continue;
            }
            match attached {
                Some(v) => parsed.sources.push(Word {
                    text: v.to_string(),
                    kind: w.kind,
                    span: None,
                }),
                None => {
                    if let Some(v) = words.get(i + 1) {
                        parsed.sources.push(v.clone());
                    }
                }
            }
            i += if attached.is_some() { 1 } else { 2 };
            continue;
        }
        if let Some(n) = takes(head) {
            parsed.flags.push(head.to_string());
            match attached {
                Some(v) => {
                    parsed.values.push((head.to_string(), v.to_string()));
                    i += 1;
                }
                None => {
                    if let Some(v) = words.get(i + 1) {
                        parsed.values.push((head.to_string(), v.text.clone()));
                    }
                    i += 1 + usize::from(n);
                }
            }
            continue;
        }
        if t.starts_with("--") {
            parsed.flags.push(head.to_string());
            i += 1;
            continue;
        }
        // A cluster of short options: the first that takes a value takes
        // the rest of the word, or the next word.
        let letters: Vec<char> = t[1..].chars().collect();
        let mut advance = 1;
        for (k, c) in letters.iter().enumerate() {
            let opt = format!("-{c}");
            let rest: String = letters[k + 1..].iter().collect();
            if source(&opt) {
                if rest.is_empty() {
                    if let Some(v) = words.get(i + 1) {
                        if !anywhere {
                            parsed.sources.push(v.clone());
                        }
                    }
                    advance = 2;
                } else if !anywhere {
                    parsed.sources.push(Word {
                        text: rest,
                        kind: w.kind,
                        span: None,
                    });
                }
                break;
            }
            if let Some(n) = takes(&opt) {
                parsed.flags.push(opt.clone());
                if rest.is_empty() {
                    if let Some(v) = words.get(i + 1) {
                        parsed.values.push((opt, v.text.clone()));
                    }
                    advance = 1 + usize::from(n);
                } else {
                    parsed.values.push((opt, rest));
                    advance = usize::from(n);
                }
                break;
            }
            parsed.flags.push(opt);
        }
        i += advance.max(1);
    }
    parsed.next = i.min(words.len());
    parsed
}

/// Whether a short flag letter appears in any option cluster.
fn has_short_flag(words: &[Word], flag: char) -> bool {
    words
        .iter()
        .any(|w| w.text.starts_with('-') && !w.text.starts_with("--") && w.text[1..].contains(flag))
}

/// The values of the named options, in their separate and joined forms
/// (`-x V`, `-xV`, `--exec V`, `--exec=V`).
fn option_values(words: &[Word], options: &[&str]) -> Vec<Word> {
    let mut out = Vec::new();
    let mut i = 1;
    while i < words.len() {
        let w = &words[i];
        let t = w.text.as_str();
        if options.contains(&t) {
            if let Some(v) = words.get(i + 1) {
                out.push(v.clone());
            }
            i += 2;
            continue;
        }
        for o in options {
            let joined = if o.starts_with("--") {
                t.strip_prefix(o).and_then(|r| r.strip_prefix('='))
            } else if o.starts_with('-') && o.len() == 2 && !t.starts_with("--") {
                t.strip_prefix(o).filter(|r| !r.is_empty())
            } else {
                None
            };
            if let Some(value) = joined {
                out.push(Word {
                    text: value.to_string(),
                    kind: w.kind,
                    span: None,
                });
                break;
            }
        }
        i += 1;
    }
    out
}

/// Whether a `git -c` key makes git run something.
fn git_key_runs(key: &str) -> bool {
    tables::git_command_key(key)
}

/// The primitives that let an awk program start a process or load code.
const AWK_PRIMITIVES: &[&str] = &["system", "|", "@load", "getline"];

/// The first of [`AWK_PRIMITIVES`] an awk program uses (case-insensitively).
fn awk_primitive(program: &str) -> Option<&'static str> {
    let lower = program.to_lowercase();
    AWK_PRIMITIVES.iter().copied().find(|p| lower.contains(p))
}

/// The programs of an awk command line: each `-e`/`--source` value (gawk),
/// or else the first operand; later operands are files and assignments.
enum AwkPrograms {
    Given(Vec<Word>),
    /// The program comes from a file (`-f`, `-i`, `-l`, `-E`, …): the option.
    FromFile(String),
}

fn awk_programs(words: &[Word]) -> AwkPrograms {
    let mut programs: Vec<Word> = Vec::new();
    let mut explicit = false;
    let mut i = 1;
    while i < words.len() {
        let w = &words[i];
        let t = w.text.as_str();
        match t {
            "--" => {
                if !explicit {
                    if let Some(p) = words.get(i + 1) {
                        programs.push(p.clone());
                    }
                }
                break;
            }
            "-F" | "-v" | "--assign" | "--field-separator" => i += 2,
            // gawk's and mawk's `-W OPTION`: `-W source=PROGRAM`, or a file.
            _ if t.starts_with("-W") => {
                let (value, kind, used) = match (&t[2..], words.get(i + 1)) {
                    ("", Some(next)) => (next.text.as_str(), next.kind, 2),
                    ("", None) => ("", w.kind, 2),
                    (attached, _) => (attached, w.kind, 1),
                };
                if let Some(code) = value.strip_prefix("source=") {
                    programs.push(Word {
                        text: code.to_string(),
                        kind,
                        span: None,
                    });
                    explicit = true;
                } else if ["source", "exec", "file", "include", "load"]
                    .iter()
                    .any(|o| value.starts_with(o))
                {
                    return AwkPrograms::FromFile(format!("-W {value}"));
                }
                i += used;
            }
            "-f" | "--file" | "-i" | "--include" | "-l" | "--load" | "-E" | "--exec" => {
                return AwkPrograms::FromFile(t.to_string());
            }
            "-e" | "--source" => {
                if let Some(code) = words.get(i + 1) {
                    programs.push(code.clone());
                }
                explicit = true;
                i += 2;
            }
            _ if t.starts_with("--source=") => {
                programs.push(Word {
                    text: t["--source=".len()..].to_string(),
                    kind: w.kind,
                    span: None,
                });
                explicit = true;
                i += 1;
            }
            _ if t.starts_with('-') && t.len() > 1 => {
                if t.starts_with("--file=")
                    || t.starts_with("--include=")
                    || t.starts_with("--load=")
                    || t.starts_with("--exec=")
                    || (!t.starts_with("--") && t[1..].starts_with(['f', 'i', 'l', 'E']))
                {
                    return AwkPrograms::FromFile(t.to_string());
                }
                if !t.starts_with("--") && t[1..].starts_with('e') {
                    programs.push(Word {
                        text: t[2..].to_string(),
                        kind: w.kind,
                        span: None,
                    });
                    explicit = true;
                }
                i += 1;
            }
            _ => {
                if !explicit {
                    programs.push(w.clone());
                }
                break;
            }
        }
    }
    AwkPrograms::Given(programs)
}

/// What a sed script does besides editing its stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct SedEffects {
    /// The `e` command or the `s///e` flag: runs a command.
    executes: bool,
    /// The `w`/`W` commands or the `s///w` flag: writes a file.
    writes: bool,
}

/// The scripts of a sed command line, as GNU sed reads its options: each
/// `-e`/`--expression` value (joined or separate, also at the end of a
/// cluster: `-ne`), or else the first operand.
enum SedScripts {
    Given(Vec<Word>),
    /// `-f`/`--file`: the script is in a file.
    FromFile,
}

fn sed_scripts(words: &[Word]) -> SedScripts {
    let mut scripts: Vec<Word> = Vec::new();
    let mut explicit = false;
    let mut i = 1;
    let joined = |w: &Word, text: &str| Word {
        text: text.to_string(),
        kind: w.kind,
        span: None,
    };
    while i < words.len() {
        let w = &words[i];
        let t = w.text.as_str();
        if t == "--" {
            if !explicit {
                if let Some(s) = words.get(i + 1) {
                    scripts.push(s.clone());
                }
            }
            break;
        }
        if let Some(long) = t.strip_prefix("--") {
            let (name, value) = match long.split_once('=') {
                Some((n, v)) => (n, Some(v)),
                None => (long, None),
            };
            // getopt takes any unambiguous prefix of a long option.
            let is = |full: &str, shortest: usize| name.len() >= shortest && full.starts_with(name);
            match name {
                _ if is("expression", 1) => {
                    explicit = true;
                    match value {
                        Some(v) => scripts.push(joined(w, v)),
                        None => {
                            if let Some(s) = words.get(i + 1) {
                                scripts.push(s.clone());
                            }
                            i += 1;
                        }
                    }
                }
                _ if is("file", 2) => return SedScripts::FromFile,
                _ if is("line-length", 1) && value.is_none() => i += 1,
                _ => {}
            }
            i += 1;
            continue;
        }
        if t.starts_with('-') && t.len() > 1 {
            let letters = &t[1..];
            for (k, c) in letters.char_indices() {
                let rest = &letters[k + c.len_utf8()..];
                match c {
                    'e' => {
                        explicit = true;
                        if rest.is_empty() {
                            if let Some(s) = words.get(i + 1) {
                                scripts.push(s.clone());
                            }
                            i += 1;
                        } else {
                            scripts.push(joined(w, rest));
                        }
                        break;
                    }
                    'f' => return SedScripts::FromFile,
                    'l' => {
                        if rest.is_empty() {
                            i += 1;
                        }
                        break;
                    }
                    // `-i[SUFFIX]`: the rest of the word is the suffix.
                    'i' => break,
                    _ => {}
                }
            }
            i += 1;
            continue;
        }
        if !explicit {
            scripts.push(w.clone());
        }
        break;
    }
    SedScripts::Given(scripts)
}

/// Whether a sed script runs a command (the `e` command or the `s///e`
/// flag) or writes a file (`w`, `W`, `s///w`). A script that cannot be
/// followed is taken to do both.
fn sed_reads(script: &str) -> SedEffects {
    const UNKNOWN: SedEffects = SedEffects {
        executes: true,
        writes: true,
    };
    let mut writes = false;
    let chars: Vec<char> = script.chars().collect();
    let mut i = 0;
    let n = chars.len();
    let skip_delimited = |i: &mut usize, delim: char| -> bool {
        while *i < n {
            let c = chars[*i];
            if c == '\\' {
                *i += 2;
                continue;
            }
            *i += 1;
            if c == delim {
                return true;
            }
        }
        false
    };
    while i < n {
        let c = chars[i];
        if c.is_whitespace() || c == ';' || c == '{' || c == '}' || c == '!' {
            i += 1;
            continue;
        }
        // Addresses.
        if c.is_ascii_digit() || c == '$' || c == ',' || c == '~' || c == '+' {
            i += 1;
            continue;
        }
        if c == '/' || c == '\\' {
            let delim = if c == '\\' {
                i += 1;
                match chars.get(i) {
                    Some(d) => *d,
                    None => return UNKNOWN,
                }
            } else {
                '/'
            };
            i += 1;
            if !skip_delimited(&mut i, delim) {
                return UNKNOWN;
            }
            while i < n && matches!(chars[i], 'I' | 'M') {
                i += 1;
            }
            continue;
        }
        match c {
            'e' => {
                return SedEffects {
                    executes: true,
                    writes,
                }
            }
            's' | 'y' => {
                i += 1;
                let Some(&delim) = chars.get(i) else {
                    return UNKNOWN;
                };
                if delim == '\n' || delim == '\\' {
                    return UNKNOWN;
                }
                i += 1;
                if !skip_delimited(&mut i, delim) || !skip_delimited(&mut i, delim) {
                    return UNKNOWN;
                }
                if c == 's' {
                    while i < n && !matches!(chars[i], ';' | '\n' | '}') {
                        if chars[i] == 'e' {
                            return SedEffects {
                                executes: true,
                                writes,
                            };
                        }
                        if chars[i] == 'w' {
                            writes = true;
                            // The rest of the line is a file name.
                            while i < n && chars[i] != '\n' {
                                i += 1;
                            }
                            break;
                        }
                        i += 1;
                    }
                }
            }
            'a' | 'i' | 'c' | 'r' | 'R' | 'w' | 'W' | 'b' | 't' | 'T' | ':' => {
                writes |= matches!(c, 'w' | 'W');
                while i < n
                    && chars[i] != '\n'
                    && !(matches!(c, 'b' | 't' | 'T') && chars[i] == ';')
                {
                    i += 1;
                }
            }
            'p' | 'P' | 'd' | 'D' | 'n' | 'N' | 'g' | 'G' | 'h' | 'H' | 'x' | '=' | 'l' | 'q'
            | 'Q' | 'z' | 'F' | 'L' | 'v' => i += 1,
            '#' => {
                while i < n && chars[i] != '\n' {
                    i += 1;
                }
            }
            _ => return UNKNOWN,
        }
    }
    SedEffects {
        executes: false,
        writes,
    }
}

/// Which entry of the hand-on table, if any, applies to a command.
fn hands_on(words: &[Word]) -> Option<&'static str> {
    let program = words.first()?;
    if program.kind != WordKind::Literal {
        return None;
    }
    let name = base_name(&program.text);
    let interpreter = tables::interpreter_code_options(name);
    for entry in tables::HANDS_ON {
        let applies = entry.programs.contains(&name)
            || (entry.programs.contains(&"python") && interpreter.is_some());
        if !applies {
            continue;
        }
        let args: &[Word] = match entry.subcommand {
            Some(sub) => {
                let Some(at) = subcommand_at(words) else {
                    continue;
                };
                if words[at].text != sub {
                    continue;
                }
                &words[at..]
            }
            None => words,
        };
        let hit = match entry.check {
            HandOnCheck::Always => true,
            HandOnCheck::Options(options) => {
                match (entry.programs.contains(&"python"), interpreter) {
                    (true, Some(code)) => args[1..]
                        .iter()
                        .any(|w| option_matches(&w.text, code) || code_in_cluster(&w.text, code)),
                    _ => args[1..].iter().any(|w| option_matches(&w.text, options)),
                }
            }
            HandOnCheck::AwkProgram => match awk_programs(args) {
                AwkPrograms::Given(programs) => programs
                    .iter()
                    .any(|w| w.kind != WordKind::Literal || awk_primitive(&w.text).is_some()),
                AwkPrograms::FromFile(_) => true,
            },
            HandOnCheck::SedScript => match sed_scripts(args) {
                SedScripts::Given(scripts) => scripts.iter().any(|w| {
                    let effects = sed_reads(&w.text);
                    w.kind != WordKind::Literal || effects.executes || effects.writes
                }),
                SedScripts::FromFile => true,
            },
            HandOnCheck::SshOption(keys) => {
                args[1..].windows(2).any(|pair| {
                    let value = if pair[0].text == "-o" {
                        pair[1].text.as_str()
                    } else if let Some(v) = pair[0].text.strip_prefix("-o") {
                        v
                    } else {
                        return false;
                    };
                    let key = value
                        .split(['=', ' '])
                        .next()
                        .unwrap_or("")
                        .to_ascii_lowercase();
                    keys.contains(&key.as_str())
                }) || args.last().is_some_and(|w| {
                    w.text.strip_prefix("-o").is_some_and(|v| {
                        let key = v
                            .split(['=', ' '])
                            .next()
                            .unwrap_or("")
                            .to_ascii_lowercase();
                        keys.contains(&key.as_str())
                    })
                })
            }
        };
        if hit {
            return Some(entry.what);
        }
    }
    None
}

/// The index of git's subcommand (the first word after its global
/// options); for other programs, the first word not an option.
fn subcommand_at(words: &[Word]) -> Option<usize> {
    let mut i = 1;
    let git = base_name(&words[0].text) == "git";
    while i < words.len() {
        let t = words[i].text.as_str();
        if !t.starts_with('-') {
            return Some(i);
        }
        if git
            && matches!(
                t,
                "-c" | "-C"
                    | "--git-dir"
                    | "--work-tree"
                    | "--namespace"
                    | "--config-env"
                    | "--super-prefix"
            )
        {
            i += 2;
            continue;
        }
        i += 1;
    }
    None
}

/// Whether a short-option cluster holds a code option of an interpreter
/// (`perl -ne`, `perl -lne`, `ruby -pe`, `python -ic`, `php -nr`): any
/// letter of it, since a letter before may be a flag and the code option
/// takes the rest of the word or the next one.
fn code_in_cluster(word: &str, code_options: &[&str]) -> bool {
    let Some(letters) = word.strip_prefix('-') else {
        return false;
    };
    if letters.starts_with('-') {
        return false;
    }
    letters.chars().any(|c| {
        code_options
            .iter()
            .any(|o| o.len() == 2 && o.starts_with('-') && o[1..].starts_with(c))
    })
}

/// Whether an argument is one of `options`, in its separate or joined form.
fn option_matches(word: &str, options: &[&str]) -> bool {
    options.iter().any(|o| {
        if word == *o {
            return true;
        }
        if o.starts_with("--") {
            return word.strip_prefix(o).is_some_and(|r| r.starts_with('='));
        }
        if o.starts_with('-') && o.len() == 2 {
            // `-xcmd`, `-oProxyCommand=…`: a short option with its value
            // joined (not a long option that starts the same).
            return word.starts_with(o) && !word.starts_with("--");
        }
        if o.starts_with('+') {
            return word.starts_with(o);
        }
        // A word option (`exec`, `SHELL`): the word itself, or NAME=….
        word.strip_prefix(o).is_some_and(|r| r.starts_with('='))
    })
}
