//! Secret-taking flags whose value is a separate word (contract §21.7):
//! in an argv array (`["curl", "-u", "admin:pw"]`, `["mysql",
//! "--password", "pw"]`) and, for the short flags, in a command line
//! (`mysql -pS3cret`, `sshpass -p pw ssh host`).
//!
//! # Which flags
//!
//! * **Long flags, for every command**: `--NAME` followed by a value, where
//!   `NAME` is secret-named by `keys.rs` (`--password`, `--passwd`,
//!   `--token`, `--api-key`, `--secret`, `--client-secret`, `--db-pass` …).
//!   In a command line the value detectors already do this (`--token abc`);
//!   here it is done for array elements.
//! * **`-u` / `--user`, for every command**: the value is `user:password`
//!   and only the password goes (`["curl", "-u", "admin:<redacted>"]`); a
//!   value without a colon is a user name (`["mysql", "-u", "root"]`,
//!   `["git", "push", "-u", "origin", "main"]`), and an all-digit user is a
//!   uid (`["docker", "run", "-u", "1000:1000"]`). `-uadmin:pw` in one
//!   element too.
//! * **Short flags, only after the commands that give them a secret**
//!   ([`COMMANDS`]). `-p` and `-a` mean a port, a parent directory, a
//!   package or "all" for most programs (`ssh -p 2222`, `mkdir -p`,
//!   `cargo test -p crate`, `docker run -p 8080:80`, `ls -a`, `cp -a`,
//!   `redis-cli -p 6379`); redacting them everywhere would hide what runs.
//!   So `-p` is a password only after `mysql` and its siblings, `sshpass`,
//!   the MongoDB tools and `rabbitmqadmin`, and after `login` for the
//!   registry and cloud clients (`docker login -p`, `az login -p`, `oc
//!   login -p`); `-a` only after `redis-cli` and its forks; `-P` only after
//!   `sqlcmd`, `bcp`, `zip` and `unzip`. The value may be the next word or
//!   attached (`-pS3cret`, getopt's form). The command may be a path
//!   (`/usr/bin/mysql`, `mysql.exe`, in any ASCII case) and may come after
//!   a wrapper (`sudo`, `docker exec db mysql …`): a command word anywhere
//!   before the flag counts.
//!
//! * **Long flags of one command** (version 4): `--pass` after `redis-cli`
//!   and its forks (`--pass pw`, `--pass=pw`); `--pass` elsewhere is a
//!   count or a mode (`x264 --pass 1`).
//! * **`htpasswd` in batch mode** (version 4): with a flag cluster holding
//!   `b` (`-b`, `-bc`, `-nbB`), the password is the third word after the
//!   flags (`htpasswd -b FILE USER PASSWORD`), the second with `n` (no
//!   file: `htpasswd -nb USER PASSWORD`); `-C` and `-r` take a number.
//!   Without `b` htpasswd prompts, and nothing is a secret.
//! * **`config set NAME VALUE`** (version 4, argv arrays; the text
//!   detectors read the same in a command line): after `config`,
//!   `configure` or `user-secrets` and `set`, a secret-named `NAME` makes
//!   the next word a secret (`aws configure set aws_secret_access_key …`,
//!   `npm config set _authToken …`, `dotnet user-secrets set Api:Key …`).
//!
//! A value that starts with `-` is the next flag, not a value (`mysql -p -h
//! db` prompts for the password). For `mysql`, a separate word after `-p`
//! is the database to the program (`mysql -p shop` prompts), but it is
//! redacted all the same: the same words are, as often, a password written
//! the wrong way, and hiding a database name costs the approver less than
//! showing a password costs its owner.
//!
//! In an argv array the words are the elements and nothing is expanded, so
//! a value is redacted whole whatever it holds (`"$(cat pw)"` is the
//! password itself there). An object's `command` (or `cmd`, `program`,
//! `executable`, `entrypoint`) names the command for its sibling arrays:
//! `{"command": "redis-cli", "args": ["-a", "pw"]}`.

use super::keys::secret_name;

/// A command whose short flags take a secret.
pub(super) struct Command {
    /// Its names (the last path component, without `.exe`).
    pub names: &'static [&'static str],
    /// A subcommand that must come first (`docker login`).
    pub after: Option<&'static str>,
    /// The short flags that take the secret.
    pub flags: &'static [&'static str],
    /// The long flags that take the secret, as the next word or after `=`.
    pub long: &'static [&'static str],
    /// Whether it is `htpasswd`, whose batch mode takes the password as a
    /// plain word (see the module docs).
    pub batch: bool,
}

const fn c(
    names: &'static [&'static str],
    after: Option<&'static str>,
    flags: &'static [&'static str],
) -> Command {
    Command {
        names,
        after,
        flags,
        long: &[],
        batch: false,
    }
}

/// The words before `set` that make `set NAME VALUE` a configuration write.
const CONFIG_WORDS: [&str; 3] = ["config", "configure", "user-secrets"];

/// Flags after which a command reads a secret from its standard input
/// (`docker login --password-stdin`, `redis-cli --askpass`, `gh auth login
/// --with-token`): what a here-string or a `stdin` field feeds it is one.
pub(super) const STDIN_SECRET_FLAGS: [&str; 3] = ["--password-stdin", "--askpass", "--with-token"];

/// Whether `command` (a command line, or one word of an argv) has one of
/// [`STDIN_SECRET_FLAGS`] as a whole word.
pub(super) fn reads_secret_stdin(command: &str) -> bool {
    command
        .split(|c: char| c.is_ascii_whitespace() || matches!(c, '"' | '\'' | ';' | '&' | '|'))
        .any(|word| STDIN_SECRET_FLAGS.contains(&word))
}

/// The commands whose short flags take a secret (see the module docs).
pub(super) const COMMANDS: &[Command] = &[
    c(
        &[
            "mysql",
            "mysqldump",
            "mysqladmin",
            "mysqlimport",
            "mysqlcheck",
            "mysqlshow",
            "mysqlpump",
            "mysqlslap",
            "mysqlsh",
            "mariadb",
            "mariadb-dump",
            "mariadb-admin",
            "mariadb-import",
            "mariadb-check",
        ],
        None,
        &["-p"],
    ),
    c(&["sshpass"], None, &["-p"]),
    c(
        &[
            "mongo",
            "mongosh",
            "mongodump",
            "mongorestore",
            "mongoimport",
            "mongoexport",
            "mongostat",
            "mongotop",
            "mongofiles",
        ],
        None,
        &["-p"],
    ),
    c(&["rabbitmqadmin"], None, &["-p"]),
    Command {
        long: &["--pass"],
        ..c(&["redis-cli", "keydb-cli", "valkey-cli"], None, &["-a"])
    },
    Command {
        batch: true,
        ..c(&["htpasswd"], None, &[])
    },
    c(&["sqlcmd", "bcp"], None, &["-P"]),
    c(&["zip", "unzip"], None, &["-P"]),
    c(
        &[
            "docker", "podman", "buildah", "skopeo", "nerdctl", "helm", "oras", "crane", "oc", "az",
        ],
        Some("login"),
        &["-p"],
    ),
];

/// Every command name, for the text detector's automaton.
pub(super) fn command_names() -> impl Iterator<Item = &'static str> {
    COMMANDS.iter().flat_map(|c| c.names.iter().copied())
}

/// The entry of [`COMMANDS`] that `word` names (as a path, or with `.exe`).
fn command_of(word: &str) -> Option<usize> {
    let base = word.rsplit(['/', '\\']).next().unwrap_or(word);
    let base = match base.len().checked_sub(4) {
        Some(at) if base.is_char_boundary(at) && base[at..].eq_ignore_ascii_case(".exe") => {
            &base[..at]
        }
        _ => base,
    };
    COMMANDS
        .iter()
        .position(|c| c.names.iter().any(|name| name.eq_ignore_ascii_case(base)))
}

/// Which commands' short flags are in force, as the words go by.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct Active {
    /// Bit `i`: `COMMANDS[i]` was named (and its subcommand seen).
    on: u32,
    /// Bit `i`: `COMMANDS[i]` was named; its subcommand has not come yet.
    waiting: u32,
    /// `htpasswd`'s words since it was named.
    batch: Batch,
}

/// `htpasswd`'s flags and plain words, counted from its name on.
#[derive(Clone, Copy, Debug, Default)]
struct Batch {
    /// `htpasswd` was named.
    named: bool,
    /// A flag cluster held `b`: the password is on the command line.
    b: bool,
    /// A flag cluster held `n`: no file word before the user.
    n: bool,
    /// The next word is a flag's number (`-C 12`, `-r 5000`).
    skip: bool,
    /// Plain words so far.
    words: u8,
}

impl Batch {
    /// Whether the next plain word is the password.
    fn password_next(&self) -> bool {
        self.named && self.b && !self.skip && self.words + 1 == if self.n { 2 } else { 3 }
    }
}

impl Active {
    /// Whether the next plain word (one that is not a flag) is a password
    /// given as a word of its own (`htpasswd -b FILE USER PASSWORD`).
    pub(super) fn password_next(&self) -> bool {
        self.batch.password_next()
    }

    /// Takes a flag that takes no secret: `htpasswd`'s clusters (`-nbB`,
    /// `-C`) change which word is its password.
    pub(super) fn cluster(&mut self, flag: &str) {
        if !self.batch.named || flag.starts_with("--") {
            return;
        }
        let letters = &flag[1..];
        self.batch.b |= letters.contains('b');
        self.batch.n |= letters.contains('n');
        self.batch.skip = letters.ends_with(['C', 'r']);
    }

    /// Takes a word that is not a flag: a command, or a subcommand.
    pub(super) fn word(&mut self, word: &str) {
        if self.batch.named {
            if self.batch.skip {
                self.batch.skip = false;
            } else {
                self.batch.words = self.batch.words.saturating_add(1);
            }
        }
        let mut waiting = self.waiting;
        while waiting != 0 {
            let i = waiting.trailing_zeros() as usize;
            waiting &= waiting - 1;
            if COMMANDS[i].after == Some(word) {
                self.on |= 1 << i;
                self.waiting &= !(1 << i);
            }
        }
        if let Some(i) = command_of(word) {
            match COMMANDS[i].after {
                None => self.on |= 1 << i,
                Some(_) => self.waiting |= 1 << i,
            }
            if COMMANDS[i].batch {
                self.batch = Batch {
                    named: true,
                    ..Batch::default()
                };
            }
        }
    }

    /// Whether `word` is a command name of the table.
    pub(super) fn is_command(word: &str) -> bool {
        command_of(word).is_some()
    }

    /// The length of the secret-taking flag `word` is or starts with: a
    /// short flag (`-p`, `-pS3cret`), or a long one whole or with `=`
    /// (`--pass`, `--pass=pw`, counted with its `=`).
    pub(super) fn flag(&self, word: &str) -> Option<usize> {
        let mut on = self.on;
        while on != 0 {
            let i = on.trailing_zeros() as usize;
            on &= on - 1;
            let command = &COMMANDS[i];
            if word.starts_with("--") {
                for long in command.long {
                    if word == *long {
                        return Some(long.len());
                    }
                    if word.strip_prefix(long).is_some_and(|r| r.starts_with('=')) {
                        return Some(long.len() + 1);
                    }
                }
                continue;
            }
            if let Some(flag) = command.flags.iter().find(|f| word.starts_with(**f)) {
                return Some(flag.len());
            }
        }
        None
    }
}

/// What the next element of an argv array is.
#[derive(Clone, Copy, Debug)]
enum Expect {
    /// A secret, whole.
    Whole,
    /// `user:password`.
    UserPassword,
}

/// Which part of an argv array's element is a secret.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Secret {
    /// All of it.
    Whole,
    /// The password of `user:password`.
    Password,
    /// What follows its first `n` bytes (an attached value: `-pS3cret`,
    /// `-uadmin:pw` as `-u` + a password).
    After(usize),
}

impl Secret {
    /// Where the secret of `element` starts, if it has one.
    pub(super) fn start(self, element: &str) -> Option<usize> {
        match self {
            Secret::Whole => (!element.is_empty()).then_some(0),
            Secret::Password => password_of(element),
            Secret::After(n) => (n < element.len() && element.is_char_boundary(n)).then_some(n),
        }
    }
}

/// The secret-taking flags of one argv array, element by element.
#[derive(Clone, Debug, Default)]
pub(super) struct Argv {
    active: Active,
    expect: Option<Expect>,
    /// How far into `config set NAME`: 1 after a [`CONFIG_WORDS`] word, 2
    /// after its `set`.
    config_set: u8,
}

impl Argv {
    /// An array whose command is named elsewhere (`command`, beside it).
    pub(super) fn after_command(command: &str) -> Argv {
        let mut argv = Argv::default();
        if let Some(word) = command.split_ascii_whitespace().next() {
            argv.active.word(word);
        }
        argv
    }

    /// The next element (`None` when it is not a string): which part of it
    /// is a secret, if one is (it runs to the element's end).
    pub(super) fn next(&mut self, item: Option<&str>) -> Option<Secret> {
        let expect = self.expect.take();
        let s = item?;
        let is_flag = s.len() > 1 && s.starts_with('-');
        if let Some(expect) = expect.filter(|_| !is_flag) {
            let secret = match expect {
                Expect::Whole => Secret::Whole,
                Expect::UserPassword => Secret::Password,
            };
            return secret.start(s).map(|_| secret);
        }
        if !is_flag {
            let password = self.active.password_next();
            self.active.word(s);
            self.config_set = match self.config_set {
                2 if secret_name(s).is_some() => {
                    self.expect = Some(Expect::Whole);
                    0
                }
                1 if s == "set" => 2,
                _ => u8::from(CONFIG_WORDS.contains(&s)),
            };
            return password.then_some(Secret::Whole);
        }
        self.config_set = 0;
        if s == "-u" || s == "--user" {
            self.expect = Some(Expect::UserPassword);
            return None;
        }
        if let Some(name) = s.strip_prefix("--") {
            // `--name=value` is the value detectors' (an assignment).
            if !name.contains('=') && secret_name(name).is_some() {
                self.expect = Some(Expect::Whole);
                return None;
            }
        }
        if let Some(len) = self.active.flag(s) {
            if s.len() == len {
                self.expect = Some(Expect::Whole);
                return None;
            }
            return Some(Secret::After(len));
        }
        if let Some(attached) = s.strip_prefix("-u") {
            return password_of(attached).map(|at| Secret::After(at + 2));
        }
        self.active.cluster(s);
        None
    }
}

/// Where the password of `user:password` starts: not in a URL (the userinfo
/// detector's), not after an all-digit user (`1000:1000`), not when empty.
pub(super) fn password_of(word: &str) -> Option<usize> {
    if word.contains("://") {
        return None;
    }
    let colon = word.find(':')?;
    let user = &word[..colon];
    if !user.is_empty() && user.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    (colon + 1 < word.len()).then_some(colon + 1)
}

#[cfg(test)]
mod tests;
