//! Commands judged as they will run (`architecture/contract.md` § Commands):
//! which fields hold commands, how each is read — the `shell` room's model,
//! which yields facts — and what a command prefix means against those facts,
//! widely for deny and ask rules, strictly for allow rules and grants.
//!
//! * A **command field** is `command` (with its sibling `args`) of a
//!   `shell::*` function, and any field a constraint `runs` names.
//! * A `shell::*` `command` with an `args` array of strings is the argv
//!   `[command, ...args]`; without `args` it is read twice, split with
//!   shell-words rules (today's shell runs no shell) and as bash (another
//!   shell generation may): deny and ask match when either reading matches,
//!   allow needs both to pass. Any other field: a string is bash, an array of
//!   strings an argv. Any other type is unreadable: deny and ask match it,
//!   allow does not.
//! * Parsing is done before the ladder runs, off the hook's thread, once per
//!   value and reading ([`Needs`] → the containment pool → [`Readings`]); the
//!   ladder only looks the models up. A reading the ladder did not get is
//!   judged as opaque: fewer allows, never more.

use std::sync::{Arc, LazyLock};

use serde_json::{Map, Value};

use crate::shell::{self, Command, Limits, Model, Opaque, OpaqueWhy, OwnedSource, WordKind};

/// How one value is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ReadingKind {
    /// Bash source.
    Bash,
    /// Split with shell-words rules, run with no shell.
    Words,
    /// An argv, run with no shell.
    Argv,
}

/// One reading of one value of the call's arguments: where the value is
/// (its address, stable while the call's arguments are borrowed) and how it
/// is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct ReadingKey {
    at: usize,
    kind: ReadingKind,
}

/// What a command field's value is, as its target reads it.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Plan {
    /// One reading.
    One(ReadingKey),
    /// Two readings of one text (shell-words and bash).
    Two(ReadingKey, ReadingKey),
    /// Three: the text's two, and the argv with a sibling `args` spelled in
    /// another case (`Args`) — a runner that reads only the exact `args`
    /// runs the text, one that reads any case runs the argv: deny and ask
    /// match either, allow rules and grants must cover all three.
    Three(ReadingKey, ReadingKey, ReadingKey),
    /// Not text nor an argv (or `args` that are not strings): deny and ask
    /// match it, allow rules and grants do not.
    Unreadable,
    /// Absent or `null`.
    Missing,
}

/// Whether `field` of a call to `function_id` is a `shell::*` command field
/// (`command`, any ASCII case for deny and ask; the caller passes the key it
/// looked up).
pub(crate) fn is_shell_command(function_id: &str, field: &str) -> bool {
    function_id.starts_with("shell::") && field.eq_ignore_ascii_case("command")
}

/// The sibling `args` of a `shell::*` command: the exact key, else one that
/// differs only in ASCII case.
fn sibling_args(obj: &Map<String, Value>) -> Option<&Value> {
    obj.get("args").or_else(|| case_variant_args(obj))
}

/// A sibling `args` spelled in another ASCII case, when there is no exact
/// `args` (a runner may read it or not).
fn case_variant_args(obj: &Map<String, Value>) -> Option<&Value> {
    if obj.contains_key("args") {
        return None;
    }
    obj.iter()
        .find(|(k, _)| k.eq_ignore_ascii_case("args"))
        .map(|(_, v)| v)
}

fn key(value: &Value, kind: ReadingKind) -> ReadingKey {
    ReadingKey {
        at: std::ptr::from_ref(value) as usize,
        kind,
    }
}

/// How `value` is read: `shell` when it is a `shell::*` command (its
/// sibling `args` taken from `obj`).
pub(crate) fn plan(value: Option<&Value>, obj: &Map<String, Value>, shell: bool) -> Plan {
    let value = match value {
        None | Some(Value::Null) => return Plan::Missing,
        Some(value) => value,
    };
    match value {
        Value::String(_) if shell => match sibling_args(obj) {
            None | Some(Value::Null) => Plan::Two(
                key(value, ReadingKind::Words),
                key(value, ReadingKind::Bash),
            ),
            Some(Value::Array(items)) if items.iter().all(Value::is_string) => {
                if case_variant_args(obj).is_some() {
                    Plan::Three(
                        key(value, ReadingKind::Words),
                        key(value, ReadingKind::Bash),
                        key(value, ReadingKind::Argv),
                    )
                } else {
                    Plan::One(key(value, ReadingKind::Argv))
                }
            }
            Some(_) => Plan::Unreadable,
        },
        Value::String(_) => Plan::One(key(value, ReadingKind::Bash)),
        Value::Array(items) if !shell && items.iter().all(Value::is_string) => {
            Plan::One(key(value, ReadingKind::Argv))
        }
        _ => Plan::Unreadable,
    }
}

/// The source a reading reads.
fn source_of(value: &Value, obj: &Map<String, Value>, kind: ReadingKind) -> Option<OwnedSource> {
    let strings = |items: &[Value]| -> Vec<String> {
        items
            .iter()
            .filter_map(|v| v.as_str().map(str::to_owned))
            .collect()
    };
    Some(match (kind, value) {
        (ReadingKind::Bash, Value::String(text)) => OwnedSource::Bash(text.clone()),
        (ReadingKind::Words, Value::String(text)) => OwnedSource::Words(text.clone()),
        (ReadingKind::Argv, Value::String(program)) => {
            let mut argv = vec![program.clone()];
            if let Some(Value::Array(items)) = sibling_args(obj) {
                argv.extend(strings(items));
            }
            OwnedSource::Argv(argv)
        }
        (ReadingKind::Argv, Value::Array(items)) => OwnedSource::Argv(strings(items)),
        _ => return None,
    })
}

/// The readings a call needs before its ladder runs: each value a command
/// constraint of a rule or grant that applies to the call's function may
/// look at, once per reading.
#[derive(Debug, Default)]
pub struct Needs {
    items: Vec<(ReadingKey, OwnedSource)>,
}

impl Needs {
    /// Adds the readings of `value` (a command field) to the needs.
    pub(crate) fn add(&mut self, value: Option<&Value>, obj: &Map<String, Value>, shell: bool) {
        let Some(value) = value else {
            return;
        };
        let keys = match plan(Some(value), obj, shell) {
            Plan::One(a) => [Some(a), None, None],
            Plan::Two(a, b) => [Some(a), Some(b), None],
            Plan::Three(a, b, c) => [Some(a), Some(b), Some(c)],
            Plan::Unreadable | Plan::Missing => return,
        };
        for key in keys.into_iter().flatten() {
            if self.items.iter().any(|(k, _)| *k == key) {
                continue;
            }
            if let Some(source) = source_of(value, obj, key.kind) {
                self.items.push((key, source));
            }
        }
    }

    /// What a held call's record shows when the ladder read nothing: the
    /// `command` (with its `args`) of a `shell::*` call.
    pub fn for_record(function_id: &str, arguments: Option<&Value>) -> Needs {
        let mut needs = Needs::default();
        if let Some(Value::Object(obj)) = arguments {
            if function_id.starts_with("shell::") {
                needs.add(obj.get("command"), obj, true);
            }
        }
        needs
    }

    /// Whether nothing needs reading (the common case: no command rule
    /// applies to the call's function).
    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    /// The sources to read, in order.
    pub fn sources(&self) -> Vec<OwnedSource> {
        self.items.iter().map(|(_, s)| s.clone()).collect()
    }

    /// The readings, given the models of [`Needs::sources`] in order (a
    /// missing model reads as opaque).
    pub fn with_models(self, models: Vec<Arc<Model>>) -> Readings {
        let mut models = models.into_iter();
        Readings {
            read: self
                .items
                .into_iter()
                .map(|(key, _)| (key, models.next().unwrap_or_else(|| UNREAD.clone())))
                .collect(),
        }
    }

    /// The readings, read here and now (tests, benches, rule examples and
    /// the offline what-if; the gate reads off its thread).
    pub fn read_inline(self) -> Readings {
        let limits = Limits::default();
        let models = self
            .items
            .iter()
            .map(|(_, source)| Arc::new(shell::read(source.as_source(), &limits)))
            .collect();
        self.with_models(models)
    }
}

/// What a value the ladder was not given reads as.
static UNREAD: LazyLock<Arc<Model>> = LazyLock::new(|| {
    Arc::new(Model {
        commands: Vec::new(),
        opaque: vec![Opaque {
            why: OpaqueWhy::Unread {
                what: "a value that was not read before the decision".to_owned(),
            },
            via: Vec::new(),
            span: 0..0,
        }],
        complete: false,
    })
});

/// The models of one call's command fields, read before the ladder runs.
#[derive(Debug, Default)]
pub struct Readings {
    read: Vec<(ReadingKey, Arc<Model>)>,
}

impl Readings {
    /// No readings: every command field reads as opaque.
    pub fn none() -> Readings {
        Readings::default()
    }

    /// The model of one reading, with its index (`u32::MAX` for one that was
    /// not read, which reads as opaque).
    fn model(&self, key: ReadingKey) -> (u32, &Model) {
        self.read
            .iter()
            .zip(0u32..)
            .find(|((k, _), _)| *k == key)
            .map_or((u32::MAX, &**UNREAD), |((_, m), i)| (i, &**m))
    }

    /// Every model read, in the order they were asked for.
    pub fn models(&self) -> impl Iterator<Item = &Model> {
        self.read.iter().map(|(_, m)| &**m)
    }

    /// Whether nothing was read.
    pub fn is_empty(&self) -> bool {
        self.read.is_empty()
    }

    fn at(&self, reading: u32) -> &Model {
        self.read
            .get(reading as usize)
            .map_or(&**UNREAD, |(_, m)| &**m)
    }

    /// The command a hit names, when it names one.
    pub fn command(&self, hit: CommandHit) -> Option<&Command> {
        match hit {
            CommandHit::Runs { reading, command } | CommandHit::Maybe { reading, command } => {
                self.at(reading).commands.get(command as usize)
            }
            CommandHit::Opaque { .. } | CommandHit::Unreadable => None,
        }
    }

    /// The opaque part a hit names, when it names one.
    pub fn opaque(&self, hit: CommandHit) -> Option<&Opaque> {
        match hit {
            CommandHit::Opaque { reading, opaque } => self.at(reading).opaque.get(opaque as usize),
            _ => None,
        }
    }

    /// The models of a value read as `plan` (none for an unreadable or
    /// missing value).
    fn of(&self, plan: Plan) -> [Option<(u32, &Model)>; 3] {
        match plan {
            Plan::One(a) => [Some(self.model(a)), None, None],
            Plan::Two(a, b) => [Some(self.model(a)), Some(self.model(b)), None],
            Plan::Three(a, b, c) => [
                Some(self.model(a)),
                Some(self.model(b)),
                Some(self.model(c)),
            ],
            Plan::Unreadable | Plan::Missing => [None, None, None],
        }
    }
}

/// How a command constraint of a deny or ask rule matched: indexes into the
/// call's [`Readings`], so a decision stays a plain value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CommandHit {
    /// This simple command runs the prefix.
    Runs {
        /// Which reading.
        reading: u32,
        /// Which of its commands.
        command: u32,
    },
    /// This simple command may run the prefix: a word it compares is built
    /// from an expansion.
    Maybe {
        /// Which reading.
        reading: u32,
        /// Which of its commands.
        command: u32,
    },
    /// What runs cannot be known without running it.
    Opaque {
        /// Which reading.
        reading: u32,
        /// Which of its opaque parts.
        opaque: u32,
    },
    /// The field is neither text nor an argv.
    Unreadable,
}

impl CommandHit {
    /// Whether the hit is a doubt, not a command seen: the rule is
    /// consulted as `opaque_command`.
    pub fn is_opaque(&self) -> bool {
        matches!(self, CommandHit::Maybe { .. } | CommandHit::Opaque { .. })
    }
}

/// Deny and ask rules: whether a value read as `plan` runs a command
/// starting with `words`, may run one, or is opaque.
pub(crate) fn wide_match(
    readings: &Readings,
    plan: Plan,
    words: &[Box<str>],
) -> Option<CommandHit> {
    match plan {
        Plan::Unreadable => return Some(CommandHit::Unreadable),
        Plan::Missing => return None,
        Plan::One(_) | Plan::Two(_, _) | Plan::Three(_, _, _) => {}
    }
    let models = readings.of(plan);
    let mut maybe = None;
    for (reading, model) in models.into_iter().flatten() {
        for (c, command) in model.commands.iter().zip(0u32..) {
            match starts_wide(c, words) {
                Start::Yes => return Some(CommandHit::Runs { reading, command }),
                Start::Maybe if maybe.is_none() => {
                    maybe = Some(CommandHit::Maybe { reading, command });
                }
                _ => {}
            }
        }
    }
    maybe.or_else(|| {
        models
            .into_iter()
            .flatten()
            .find(|(_, m)| !m.opaque.is_empty())
            .map(|(reading, _)| CommandHit::Opaque { reading, opaque: 0 })
    })
}

enum Start {
    Yes,
    Maybe,
    No,
}

/// Deny and ask: the program compared by base name, then each prefix word
/// exactly; a word built from an expansion (or a glob) where one is compared
/// may become any number of words, so nothing after it is known (`git $A`
/// runs `git push --force` when `A='push --force'`).
fn starts_wide(command: &Command, words: &[Box<str>]) -> Start {
    let Some(program) = command.words.first() else {
        return Start::No;
    };
    let Some((first, rest)) = words.split_first() else {
        return Start::Yes;
    };
    if program.kind != WordKind::Literal
        || shell::base_name(&program.text) != shell::base_name(first)
    {
        return Start::No;
    }
    for (i, want) in rest.iter().enumerate() {
        match command.words.get(i + 1) {
            None => return Start::No,
            Some(word) if word.kind == WordKind::Literal => {
                if *word.text != **want {
                    return Start::No;
                }
            }
            Some(_) => return Start::Maybe,
        }
    }
    Start::Yes
}

/// Allow rules and grants: whether `command` starts with `words`, its
/// program word exactly (`./git` is not `git`).
pub(crate) fn starts_exact(command: &Command, words: &[Box<str>]) -> bool {
    words.len() <= command.words.len()
        && words
            .iter()
            .zip(&command.words)
            .all(|(want, word)| word.kind == WordKind::Literal && *word.text == **want)
}

/// Why a value does not pass an allow rule or grant.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum StrictMiss<'m> {
    /// Part of it cannot be known without running it.
    Opaque(&'m Opaque),
    /// This command is nested in another (a substitution, a `-c` string…).
    Nested(&'m Command),
    /// This command hands a command on (a wrapper, or an argument that runs
    /// a command).
    HandsOn(&'m Command),
    /// This command has a leading assignment (or is one).
    Assignment(&'m Command),
    /// A word of this command is built from an expansion.
    Expansion(&'m Command),
    /// This command redirects somewhere other than `2>&1`, `>&2`, `/dev/null`.
    Redirect(&'m Command),
    /// No allow rule or grant that applies covers this command.
    Uncovered(&'m Command),
    /// The value runs nothing.
    Nothing,
    /// The field is neither text nor an argv.
    Unreadable,
    /// The call carries `env` or `stdin`.
    EnvOrStdin,
}

/// Allow rules and grants: whether every reading of a value read as `plan`
/// has only plain, known commands, each covered by `covered`.
pub(crate) fn strict_check<'m>(
    readings: &'m Readings,
    plan: Plan,
    obj: &Map<String, Value>,
    mut covered: impl FnMut(&Command) -> bool,
) -> Result<(), StrictMiss<'m>> {
    if matches!(plan, Plan::Unreadable | Plan::Missing) {
        return Err(StrictMiss::Unreadable);
    }
    if !quiet(obj.get("env")) || !quiet(obj.get("stdin")) {
        return Err(StrictMiss::EnvOrStdin);
    }
    for (_, model) in readings.of(plan).into_iter().flatten() {
        if let Some(opaque) = model.opaque.first() {
            return Err(StrictMiss::Opaque(opaque));
        }
        if model.commands.is_empty() {
            return Err(StrictMiss::Nothing);
        }
        for command in &model.commands {
            plain(command)?;
            if !covered(command) {
                return Err(StrictMiss::Uncovered(command));
            }
        }
    }
    Ok(())
}

/// An absent, `null` or empty `env` / `stdin`.
fn quiet(value: Option<&Value>) -> bool {
    match value {
        None | Some(Value::Null) => true,
        Some(Value::String(s)) => s.is_empty(),
        Some(Value::Array(a)) => a.is_empty(),
        Some(Value::Object(o)) => o.is_empty(),
        Some(_) => false,
    }
}

/// A command an allow prefix may cover: at the top level, no wrapper or
/// argument that hands a command on, no assignment, literal words (a glob
/// word that does not start with a wildcard is fine), and only harmless
/// redirections.
fn plain(command: &Command) -> Result<(), StrictMiss<'_>> {
    if !command.via.is_empty() || command.speculative {
        return Err(StrictMiss::Nested(command));
    }
    if command.wrapper.is_some() || command.hands_on.is_some() {
        return Err(StrictMiss::HandsOn(command));
    }
    if !command.assignments.is_empty() {
        return Err(StrictMiss::Assignment(command));
    }
    let Some(program) = command.words.first() else {
        return Err(StrictMiss::Redirect(command));
    };
    if program.kind != WordKind::Literal
        || command
            .words
            .iter()
            .any(|w| matches!(w.kind, WordKind::Dynamic | WordKind::Glob { leading: true }))
    {
        return Err(StrictMiss::Expansion(command));
    }
    if !command.redirects.iter().all(harmless) {
        return Err(StrictMiss::Redirect(command));
    }
    Ok(())
}

/// `2>&1`, `>&2`, and any redirection to or from `/dev/null`.
fn harmless(redirect: &shell::Redirect) -> bool {
    let target = redirect.target.as_ref();
    let literal = target
        .filter(|w| w.kind == WordKind::Literal)
        .map(|w| w.text.as_str());
    let joined = match literal {
        Some(t) => format!("{}{t}", redirect.op),
        None => redirect.op.clone(),
    };
    if matches!(joined.as_str(), "2>&1" | ">&2" | "1>&2") {
        return true;
    }
    literal == Some("/dev/null") && !redirect.op.contains("<<")
}

/// A command as traces and reasons show it: its words (each passed
/// through the secret detectors), then how it was reached, innermost
/// first: `rm -rf ~/x, inside bash -c, via sudo`.
pub(crate) fn describe(command: &Command) -> String {
    let words: Vec<&str> = command.words.iter().map(|w| w.text.as_str()).collect();
    let mut out = crate::redact::redact_text(&words.join(" ")).into_owned();
    for via in command.via.iter().rev() {
        out.push_str(&format!(", {via}"));
    }
    out
}

/// The program and how it was reached, without its arguments (what a deny
/// reason shows the model): `rm, inside bash -c, via sudo`.
pub(crate) fn describe_program(command: &Command) -> String {
    let mut out = command
        .words
        .first()
        .map(|w| shell::base_name(&w.text).to_owned())
        .unwrap_or_default();
    for via in command.via.iter().rev() {
        out.push_str(&format!(", {via}"));
    }
    out
}

/// Splits a prefix into the words it names (`"rm -rf"` → `[rm, -rf]`), with
/// shell-words rules; text that does not split is split on whitespace.
pub(crate) fn prefix_words(prefix: &str) -> Box<[Box<str>]> {
    let words = shell_words::split(prefix)
        .unwrap_or_else(|_| prefix.split_whitespace().map(str::to_owned).collect());
    words.into_iter().map(String::into_boxed_str).collect()
}

/// Why a value does not pass an allow rule or grant, for an operator.
pub(crate) fn describe_miss(miss: &StrictMiss<'_>) -> String {
    match miss {
        StrictMiss::Opaque(opaque) => format!("opaque: {opaque}"),
        StrictMiss::Nested(c) => format!("{} is nested in another command", describe(c)),
        StrictMiss::HandsOn(c) => format!("{} hands a command on", describe(c)),
        StrictMiss::Assignment(c) => format!("{} sets a variable", describe(c)),
        StrictMiss::Expansion(c) => format!("{} has a word built from an expansion", describe(c)),
        StrictMiss::Redirect(c) => format!("{} redirects to a file", describe(c)),
        StrictMiss::Uncovered(c) => {
            format!("{} is covered by no allow rule or grant", describe(c))
        }
        StrictMiss::Nothing => "it runs nothing".to_owned(),
        StrictMiss::Unreadable => "the field is neither text nor an argv".to_owned(),
        StrictMiss::EnvOrStdin => "the call sets env or stdin".to_owned(),
    }
}

/// How a command constraint of a deny or ask rule matched, for an operator
/// (`approval::evaluate`, `approval::simulate`).
pub(crate) fn describe_hit(readings: &Readings, hit: CommandHit) -> String {
    match hit {
        CommandHit::Runs { .. } => readings.command(hit).map_or_else(String::new, describe),
        CommandHit::Maybe { .. } => readings.command(hit).map_or_else(String::new, |c| {
            format!(
                "may run {} (a word it compares is built from an expansion)",
                describe(c)
            )
        }),
        CommandHit::Opaque { .. } => match readings.opaque(hit) {
            Some(opaque) => format!("opaque: {opaque}"),
            None => "opaque".to_owned(),
        },
        CommandHit::Unreadable => "the field is neither text nor an argv".to_owned(),
    }
}

/// What a held call's command field runs, as an approver reads it
/// (`runs` on records, `pending-created`, the pages: "Runs: curl, sh").
#[derive(
    Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize, schemars::JsonSchema,
)]
pub struct Runs {
    /// The base names of the programs that run, in order, each once.
    pub programs: Vec<String>,
    /// Whether part of what runs cannot be known without running it.
    pub opaque: bool,
    /// Why, when opaque (the first reason, secrets hidden).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub why: Option<String>,
}

impl Runs {
    /// What the models of a call's command fields run; `None` when there
    /// are none.
    pub fn of<'m>(models: impl IntoIterator<Item = &'m Model>) -> Option<Runs> {
        let mut runs: Option<Runs> = None;
        for model in models {
            let runs = runs.get_or_insert_with(|| Runs {
                programs: Vec::new(),
                opaque: false,
                why: None,
            });
            // A program word is the agent's text: it passes the detectors
            // like every other shown text (a URL with a `sig=` is a word).
            for program in model.programs() {
                let program = crate::redact::redact_text(program);
                if !runs.programs.iter().any(|p| *p == program) {
                    runs.programs.push(program.into_owned());
                }
            }
            if let Some(why) = model.why() {
                runs.opaque = true;
                runs.why
                    .get_or_insert_with(|| crate::redact::redact_text(&why).into_owned());
            }
        }
        runs
    }
}

/// The default of the configuration's `suggest_prefixes`: read-only forms
/// an approver may allow for the rest of a session in one click.
pub const DEFAULT_SUGGEST_PREFIXES: &[&str] = &[
    "git status",
    "git log",
    "git diff",
    "git show",
    "git branch",
    "ls",
    "cat",
    "head",
    "tail",
    "wc",
    "grep",
    "rg",
    "pwd",
    "echo",
];

/// Programs never offered as a suggested grant, whatever the configuration
/// says: shells, interpreters, build and test runners, package managers,
/// and programs that run others.
const NEVER_SUGGESTED: &[&str] = &[
    "sh", "bash", "dash", "ksh", "zsh", "fish", "csh", "tcsh", "busybox", "python", "python3",
    "perl", "ruby", "node", "deno", "bun", "php", "lua", "java", "make", "cargo", "npm", "npx",
    "pnpm", "yarn", "pip", "pip3", "go", "gradle", "mvn", "pytest", "tox", "apt", "apt-get",
    "brew", "docker", "kubectl", "find", "xargs", "env", "sudo", "ssh", "awk", "sed",
];

/// The prefix an approver may allow for the rest of the session instead of
/// this one call (`suggested_prefix` on records, "Allow `<prefix> …` in this
/// session"): only when the value runs one plain command, identical in every
/// reading, that an allow prefix could cover, and its program (plus
/// subcommand) is one of `configured` — the longest that fits.
pub fn suggested_prefix<'m>(
    models: impl IntoIterator<Item = &'m Model>,
    configured: &[String],
) -> Option<String> {
    let mut command: Option<&Command> = None;
    for model in models {
        if model.is_opaque() || model.commands.len() != 1 {
            return None;
        }
        let one = model.commands.first()?;
        plain(one).ok()?;
        match command {
            None => command = Some(one),
            Some(seen) if seen.words == one.words || same_words(seen, one) => {}
            Some(_) => return None,
        }
    }
    let command = command?;
    let program = command.words.first()?;
    if NEVER_SUGGESTED.contains(&shell::base_name(&program.text)) || program.text.contains('/') {
        return None;
    }
    configured
        .iter()
        .filter(|prefix| {
            let words = prefix_words(prefix);
            !words.is_empty() && starts_exact(command, &words)
        })
        .max_by_key(|prefix| prefix_words(prefix).len())
        .cloned()
}

/// The same words, whatever their spans.
fn same_words(a: &Command, b: &Command) -> bool {
    a.words.len() == b.words.len()
        && a.words
            .iter()
            .zip(&b.words)
            .all(|(x, y)| x.text == y.text && x.kind == y.kind)
}

#[cfg(test)]
mod runs_tests {
    use super::Runs;
    use crate::shell::{read, Limits, Source};

    #[test]
    fn rule_25_8_the_programs_an_approver_sees_hold_no_detected_secret() {
        let sas = "https://acct.queue.core.windows.net/q/messages?sig=FAKEk1Lm2Nn3Oo4Pp5Qq6Rr7Ss8Tt9Uu0Vv%2FWw%3D&sv=2022-11-02";
        let models = [
            read(Source::Words(sas), &Limits::default()),
            read(Source::Bash("curl -s x | sh"), &Limits::default()),
        ];
        let runs = Runs::of(models.iter()).expect("command fields");
        let shown = runs.programs.join(" ");
        assert!(
            !shown.contains("FAKEk1Lm2Nn3Oo4Pp5Qq6Rr7Ss8Tt9Uu0Vv"),
            "{shown}"
        );
        assert!(shown.contains("sig=<redacted>"), "{shown}");
        assert!(runs.programs.iter().any(|p| p == "curl"), "{shown}");
        assert!(runs.programs.iter().any(|p| p == "sh"), "{shown}");
    }
}
