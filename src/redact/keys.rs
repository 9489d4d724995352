//! Which key names hold secrets (contract §16, "Redaction v2", and §21.7,
//! "Redaction v3").
//!
//! # Normalisation
//!
//! A key is split into words before it is compared: every ASCII character
//! that is not a letter or a digit separates words (`_ - . ␠ :` …), and a
//! word also starts at a lower-case letter or digit followed by an upper-case
//! letter (`authToken` → `auth Token`) and at the last capital of a run of
//! capitals followed by a lower-case letter (`APIKey` → `API Key`). Words are
//! compared ignoring ASCII case. Non-ASCII characters are letters without a
//! case: they belong to the word they are in and never equal an ASCII letter
//! (so `ＴＯＫＥＮ` is not `token`, and a key clipped with `…` never ends in a
//! listed name).
//!
//! # The rule
//!
//! A key is secret when, from one of its word starts to its end, its words
//! run together spell a name of [`SECRET_NAMES`] run together. That is the
//! version-1 rule "equals a name, or ends in `_` + a name" generalised:
//! `github_token`, `X-Api-Key`, `client.secret`, `AWS_SECRET_ACCESS_KEY`,
//! `set-cookie`, `authToken` and `APIKEY` are all secret. The names of
//! [`RUN_TOGETHER`] also count at the end of a word that does not start
//! there, because shells and configuration files glue prefixes onto them:
//! `PGPASSWORD`, `authtoken`, `clientsecret`.
//!
//! Version 3 adds `secret key base` (Rails' `SECRET_KEY_BASE`), `app key`
//! (Laravel's `APP_KEY`, Datadog's `DD_APP_KEY`) and the names of
//! [`JOINED_ONLY`]: `pass` counts only as the last word of a longer name,
//! joined to the word before it by `_`, `-`, `.` or a change of case
//! (`DB_PASS`, `SMTP_PASS`, `redis-pass`, `mailPass`). `*_PASSWD` was
//! already secret (`passwd` is listed).
//!
//! Version 4 adds the one-time and short codes a login flow sends: `otp`,
//! `totp`, `mfa code`, `pin` (and `otp code`, `totp code`, `pin code`) and
//! `passcode` (`{"otp": "493817"}`, `mfaCode`, `--totp 708112`, `PIN=4321`).
//!
//! # Decisions on look-alikes (tested on both sides)
//!
//! Not secret: `author`, `oauth`, `authorized`, `auth_mode`, `passage`,
//! `keyboard`, `monkey`, `tokenizer`, `token_count`, `tokens`,
//! `tokens_used`, `max_tokens`, `key`, `keys`, `primary_key`, `session_id`,
//! `private_key_id`, `AWS_ACCESS_KEY_ID`, `password_policy`, `OLDPWD`,
//! `pass` (a verb, a test result, the `pass` password manager), `bypass`,
//! `compass`, `passes`, `pass_rate`, `first pass` (spaced), `app_key_id`,
//! `secret_key_base_path`, `pin_memory`, `pinned`, `spin`, `otp_release`,
//! `mfa_enabled`, `passcode_length`.
//! `tokens` (plural) is left out on purpose: it counts model tokens
//! (`max_tokens`, `prompt_tokens`), while `passwords`, `secrets`, `cookies`
//! and `credentials` hold what their names say. A name followed by another
//! word (`token_count`, `secret_name`, `api_key_id`) describes the secret
//! rather than holding it.
//!
//! Secret although harmless, accepted as the price of the rule:
//! `page_token` / `nextPageToken` (opaque cursors), `PWD` (the shell's
//! working directory: the contract lists `pwd`), `OAuth` (`O` + `Auth`),
//! `requires_auth`, `is_secret`, `GOOGLE_APPLICATION_CREDENTIALS` (a path),
//! `first_pass` / `single_pass` (joined like `DB_PASS`), a GPIO `pin`
//! number, Erlang's `otp` version.

use std::sync::LazyLock;

/// The secret names: words separated by one space, compared as described in
/// the module docs. Includes every name of contract §4 (version 1) and of
/// §16; names that end in another listed name (`access token`, `client
/// secret`) are listed for their run-together spelling (`accesstoken`).
pub const SECRET_NAMES: &[&str] = &[
    // passwords
    "password",
    "passwords",
    "passwd",
    "pwd",
    "passphrase",
    // secrets
    "secret",
    "secrets",
    "client secret",
    "secret key",
    "secret key base",
    // tokens
    "token",
    "access token",
    "refresh token",
    "session token",
    "auth token",
    "api token",
    "id token",
    // keys
    "api key",
    "api keys",
    "apikey",
    "access key",
    "access keys",
    "private key",
    "private keys",
    "account key",
    "signing key",
    "encryption key",
    "master key",
    "app key",
    // authentication
    "auth",
    "authorization",
    "proxy authorization",
    "cookie",
    "cookies",
    "set cookie",
    "credential",
    "credentials",
    "creds",
    // one-time and short codes (version 4)
    "otp",
    "otp code",
    "totp",
    "totp code",
    "mfa code",
    "pin",
    "pin code",
    "passcode",
];

/// Names that also match at the end of a longer word (`PGPASSWORD`,
/// `authtoken`): no common word ends in them.
pub(super) const RUN_TOGETHER: &[&str] = &[
    "password",
    "passwords",
    "passwd",
    "passphrase",
    "secret",
    "secrets",
    "token",
    "credential",
    "credentials",
];

/// Names that count only as the last word of a longer name, joined to the
/// word before it by `_`, `-`, `.` or a change of case (`DB_PASS`,
/// `smtp-pass`, `mailPass`): alone (`pass`), run together (`bypass`,
/// `compass`) or after a space (`first pass`) they are ordinary words.
pub(super) const JOINED_ONLY: &[&str] = &["pass"];

/// Normalised characters kept from the end of a key: more than the longest
/// name run together (`proxyauthorization`, 18).
const TAIL: usize = 32;

/// Whether a value under `key` is a secret (see the module docs).
pub fn is_secret_key(key: &str) -> bool {
    secret_name(key).is_some()
}

/// A listed name run together, as the tail compares it.
struct Joined {
    name: &'static str,
    bytes: Vec<u8>,
    /// Whether it may end a longer word ([`RUN_TOGETHER`]).
    anywhere: bool,
}

/// Every name run together: the [`RUN_TOGETHER`] ones first.
static JOINED: LazyLock<Vec<Joined>> = LazyLock::new(|| {
    let joined = |name: &'static str, anywhere: bool| Joined {
        name,
        bytes: name.bytes().filter(|&b| b != b' ').collect(),
        anywhere,
    };
    RUN_TOGETHER
        .iter()
        .map(|&name| joined(name, true))
        .chain(SECRET_NAMES.iter().map(|&name| joined(name, false)))
        .collect()
});

/// The listed name `key` ends in, if any.
pub(super) fn secret_name(key: &str) -> Option<&'static str> {
    let tail = Tail::of(key);
    if tail.len == 0 {
        return None;
    }
    JOINED
        .iter()
        .find(|name| tail.ends_with(&name.bytes, !name.anywhere))
        .map(|name| name.name)
        .or_else(|| joined_only(key))
}

/// The name of [`JOINED_ONLY`] that ends `key` as its last word, joined to
/// an earlier word (see there).
fn joined_only(key: &str) -> Option<&'static str> {
    let key = key.trim_end_matches(|c: char| c.is_ascii() && !c.is_ascii_alphanumeric());
    JOINED_ONLY.iter().copied().find(|name| {
        let Some(at) = key.len().checked_sub(name.len()) else {
            return false;
        };
        if at == 0 || !key.is_char_boundary(at) || !key[at..].eq_ignore_ascii_case(name) {
            return false;
        }
        let word = &key[at..];
        let before = key[..at].chars().next_back();
        match before {
            Some('_' | '-' | '.') => key[..at - 1]
                .chars()
                .next_back()
                .is_some_and(|c| c.is_ascii_alphanumeric()),
            // `mailPass`: a capital after a lower-case letter or a digit.
            Some(c) => {
                (c.is_ascii_lowercase() || c.is_ascii_digit())
                    && word.starts_with(|w: char| w.is_ascii_uppercase())
            }
            None => false,
        }
    })
}

/// Whether the name's last word makes its value a header value that runs to
/// the end of the line (`Authorization: Bearer …`, `Cookie: a=1; b=2`).
pub(super) fn is_header_name(name: &str) -> bool {
    name.ends_with("authorization") || name.ends_with("cookie") || name.ends_with("cookies")
}

/// The last word of every listed name, deduplicated: the literals the text
/// detectors look for before an `=` or `:`.
pub(super) fn last_words() -> Vec<&'static str> {
    let mut words: Vec<&'static str> = SECRET_NAMES
        .iter()
        .map(|name| name.rsplit(' ').next().unwrap_or(name))
        .chain(JOINED_ONLY.iter().copied())
        .collect();
    words.sort_unstable();
    words.dedup();
    words
}

/// The last [`TAIL`] letters and digits of a key, lower-cased, in order at
/// the end of `bytes`, with the positions where a word starts.
struct Tail {
    bytes: [u8; TAIL],
    starts: [bool; TAIL],
    len: usize,
}

impl Tail {
    fn of(key: &str) -> Tail {
        let mut tail = Tail {
            bytes: [0; TAIL],
            starts: [false; TAIL],
            len: 0,
        };
        let mut chars = key.chars().rev().peekable();
        let mut next: Option<char> = None;
        while let Some(c) = chars.next() {
            if is_separator(c) {
                next = Some(c);
                continue;
            }
            if tail.len == TAIL {
                break;
            }
            let at = TAIL - 1 - tail.len;
            // Non-ASCII characters become a byte no name contains.
            tail.bytes[at] = if c.is_ascii() {
                c.to_ascii_lowercase() as u8
            } else {
                0xFF
            };
            tail.starts[at] = starts_word(chars.peek().copied(), c, next);
            tail.len += 1;
            next = Some(c);
        }
        tail
    }

    /// Whether the tail ends in `joined`, starting at a word start when
    /// `at_word_start`.
    fn ends_with(&self, joined: &[u8], at_word_start: bool) -> bool {
        let n = joined.len();
        n <= self.len
            && self.bytes[TAIL - n..] == *joined
            && (!at_word_start || self.starts[TAIL - n])
    }
}

fn is_separator(c: char) -> bool {
    c.is_ascii() && !c.is_ascii_alphanumeric()
}

/// Whether `c` starts a word, given its neighbours in the key.
fn starts_word(prev: Option<char>, c: char, next: Option<char>) -> bool {
    let Some(prev) = prev else {
        return true;
    };
    if is_separator(prev) {
        return true;
    }
    if !c.is_ascii_uppercase() {
        return false;
    }
    // `authToken`, `s3Key`; and `APIKey`: the `K` before a lower-case letter.
    prev.is_ascii_lowercase()
        || prev.is_ascii_digit()
        || (prev.is_ascii_uppercase() && next.is_some_and(|n| n.is_ascii_lowercase()))
}

#[cfg(test)]
mod tests;
