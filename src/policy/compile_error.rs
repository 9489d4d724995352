//! Why a rule (or a grant's `args`) does not compile: one variant per cause,
//! so tests and callers branch on the cause, never on text. The text an
//! operator reads (`RuleError.message`, `approval/invalid_payload`) is the
//! variant's `Display`.

/// Why a rule or an `args` object does not compile.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CompileError {
    /// The function glob is empty or only whitespace.
    #[error("the function glob must not be empty")]
    EmptyFunction,
    /// The function glob starts or ends with whitespace.
    #[error("the function glob {0:?} must not start or end with whitespace")]
    PaddedFunction(String),
    /// The function glob is not a glob.
    #[error("invalid glob: {0}")]
    Glob(String),
    /// A shorthand marker with nothing after it (`"!"`, `"?"`).
    #[error("`{0}` must be followed by a function glob")]
    MarkerAlone(&'static str),
    /// A shorthand with two markers (`"!!x"`, `"?!x"`).
    #[error("{0:?}: a shorthand has one marker (`!` denies, `?` asks)")]
    DoubleMarker(String),
    /// An object rule whose function glob starts with the shorthand's `!`.
    #[error("the function glob {0:?} must not start with `!`; use \"action\": \"deny\"")]
    MarkerInObject(String),
    /// `rule_id` is empty.
    #[error("`rule_id` must not be empty")]
    EmptyRuleId,
    /// A deadline on a rule that is not an ask rule.
    #[error("`{0}` applies to ask rules only (\"action\": \"ask\")")]
    DeadlineNotAsk(&'static str),
    /// A deadline shorter than a human could answer in.
    #[error("`{field}` must be at least {min} ms, got {ms}")]
    DeadlineTooShort {
        /// `timeout_ms` or `escalate_after_ms`.
        field: &'static str,
        /// The shortest allowed.
        min: u64,
        /// What was given.
        ms: u64,
    },
    /// A JSON Pointer key with a `~` not followed by `0` or `1`.
    #[error("args {field:?}: invalid JSON pointer: `~` must be followed by `0` or `1`")]
    Pointer {
        /// The key as written.
        field: String,
    },
    /// A `matches` regex that does not compile.
    #[error("args {field:?}: invalid regex {pattern:?}: {message}")]
    Regex {
        /// The key as written.
        field: String,
        /// The regex.
        pattern: String,
        /// The regex crate's message.
        message: String,
    },
    /// A `matches` regex whose compiled form is over the size limit.
    #[error(
        "args {field:?}: the regex {pattern:?} compiles to more than the 1 MiB limit that keeps \
         the gate fast; use an ASCII class such as (?-u:\\w) instead of \\w (Unicode classes are \
         large), or a shorter repetition"
    )]
    RegexTooBig {
        /// The key as written.
        field: String,
        /// The regex.
        pattern: String,
    },
    /// A `runs` constraint whose words do not split (an unclosed quote) or
    /// that names no program.
    #[error("args {field:?}: `runs` {words:?} must name a program and split into words (close every quote)")]
    RunsWords {
        /// The key as written.
        field: String,
        /// The words as written.
        words: String,
    },
    /// An example the rule does not match (or matches when it must not).
    #[error("example {which}[{index}] ({probe}) {}", if *.must_match { "does not match the rule" } else { "matches the rule" })]
    Example {
        /// `match` or `no_match`.
        which: &'static str,
        /// Its index in that list.
        index: usize,
        /// The call, as `function_id arguments`.
        probe: String,
        /// Whether it had to match.
        must_match: bool,
    },
    /// The globs of a rule set cannot be compiled together.
    #[error("the globs are too large to compile together: {0}")]
    TooLarge(String),
}
