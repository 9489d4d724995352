//! The tables of §25.4 and §25.6, as data in one place: the programs that
//! hand a command to another program (wrappers), the arguments that hand a
//! command on, and the environment variables whose value runs or loads
//! code. The README prints the first two (`wrappers_markdown`,
//! `hands_on_markdown`); a test checks that it does.

/// How a wrapper hands its command on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Form {
    /// The words after its options (and operands) are the command; with
    /// none, nothing more runs.
    Argv,
    /// Like `Argv`; with no command it starts an interactive shell, which
    /// reads code from its standard input (opaque).
    ArgvOrShell,
    /// The words after its options are joined with spaces and read as bash
    /// (`watch`, `ssh host …`, `parallel`).
    Source,
    /// `env`: `NAME=value` words before the command; `-S` splits a string.
    Env,
    /// `xargs`: the command after the options, `echo` when there is none;
    /// `-I R` puts input where `R` is.
    Xargs,
    /// `find … -exec/-execdir/-ok/-okdir CMD … ;|+`.
    Find,
    /// `sudo`: `-s`/`-i` run the joined command through a shell.
    Sudo,
    /// `su`/`runuser`: `-c` is shell source; without it a login shell.
    Su,
    /// `flock LOCK cmd…` or `flock LOCK -c source`.
    Flock,
    /// `ssh [options] host [command…]`: the command words joined, read as
    /// bash.
    Ssh,
    /// `busybox APPLET …`.
    Busybox,
    /// `command [-p] cmd…`; `-v`/`-V` only look a name up.
    Command,
    /// `gdb`: `--args prog …` runs `prog`; `-ex`/`-x` run gdb commands,
    /// which can run anything (opaque).
    Gdb,
}

/// One wrapper: a program that runs another command (§25.4).
#[derive(Debug, Clone, Copy)]
pub struct Wrapper {
    /// The program's base name.
    pub name: &'static str,
    /// Options that take values, with how many words of value each takes
    /// (`--bind SRC DEST` takes 2). A long option also takes its value
    /// joined with `=`, a short one joined to it (`-n5`). Options not listed
    /// are taken as flags; the speculative starts cover a value the table
    /// does not know.
    pub options: &'static [(&'static str, u8)],
    /// Options whose value is bash source (`flock -c`, `su -c`, `env -S`).
    pub source_options: &'static [&'static str],
    /// Operands between the options and the command (`timeout DURATION`).
    pub operands: u8,
    /// How the command is handed on.
    pub form: Form,
}

/// Every wrapper the model unwraps. One place: the code reads it, the
/// README prints it.
#[rustfmt::skip]
pub static WRAPPERS: &[Wrapper] = &[
    w("env", &[("-u", 1), ("--unset", 1), ("-C", 1), ("--chdir", 1), ("-P", 1)], &["-S", "--split-string"], 0, Form::Env),
    w("command", &[], &[], 0, Form::Command),
    w("builtin", &[], &[], 0, Form::Argv),
    w("exec", &[("-a", 1)], &[], 0, Form::Argv),
    w("nice", &[("-n", 1), ("--adjustment", 1)], &[], 0, Form::Argv),
    w("nohup", &[], &[], 0, Form::Argv),
    w("time", &[("-f", 1), ("--format", 1), ("-o", 1), ("--output", 1)], &[], 0, Form::Argv),
    w("timeout", &[("-s", 1), ("--signal", 1), ("-k", 1), ("--kill-after", 1)], &[], 1, Form::Argv),
    w("stdbuf", &[("-i", 1), ("--input", 1), ("-o", 1), ("--output", 1), ("-e", 1), ("--error", 1)], &[], 0, Form::Argv),
    w("ionice", &[("-c", 1), ("--class", 1), ("-n", 1), ("--classdata", 1), ("-p", 1), ("--pid", 1), ("-P", 1), ("--pgid", 1), ("-u", 1), ("--uid", 1)], &[], 0, Form::Argv),
    w("setsid", &[], &[], 0, Form::Argv),
    w("chrt", &[("-T", 1), ("--sched-runtime", 1), ("-P", 1), ("--sched-period", 1), ("-D", 1), ("--sched-deadline", 1)], &[], 1, Form::Argv),
    w("taskset", &[], &[], 1, Form::Argv),
    w("flock", &[("-w", 1), ("--timeout", 1), ("-E", 1), ("--conflict-exit-code", 1)], &["-c", "--command"], 1, Form::Flock),
    w("watch", &[("-n", 1), ("--interval", 1), ("-q", 1), ("--equexit", 1)], &[], 0, Form::Source),
    w("sudo", &[("-u", 1), ("--user", 1), ("-g", 1), ("--group", 1), ("-C", 1), ("--close-from", 1), ("-D", 1), ("--chdir", 1), ("-h", 1), ("--host", 1), ("-p", 1), ("--prompt", 1), ("-r", 1), ("--role", 1), ("-t", 1), ("--type", 1), ("-U", 1), ("--other-user", 1), ("-T", 1), ("--command-timeout", 1), ("-R", 1), ("--chroot", 1)], &[], 0, Form::Sudo),
    w("doas", &[("-u", 1), ("-C", 1)], &[], 0, Form::Sudo),
    w("su", &[("-s", 1), ("--shell", 1), ("-g", 1), ("--group", 1), ("-G", 1), ("--supp-group", 1), ("-w", 1), ("--whitelist-environment", 1)], &["-c", "--command", "--session-command"], 0, Form::Su),
    w("runuser", &[("-s", 1), ("--shell", 1), ("-g", 1), ("--group", 1), ("-G", 1), ("--supp-group", 1), ("-u", 1), ("--user", 1), ("-w", 1), ("--whitelist-environment", 1)], &["-c", "--command", "--session-command"], 0, Form::Su),
    w("xargs", &[("-I", 1), ("--replace", 1), ("-n", 1), ("--max-args", 1), ("-P", 1), ("--max-procs", 1), ("-d", 1), ("--delimiter", 1), ("-a", 1), ("--arg-file", 1), ("-L", 1), ("--max-lines", 1), ("-s", 1), ("--max-chars", 1), ("-E", 1), ("--eof", 1), ("--process-slot-var", 1)], &[], 0, Form::Xargs),
    w("parallel", &[("-j", 1), ("--jobs", 1), ("-S", 1), ("--sshlogin", 1), ("-N", 1), ("-n", 1), ("--max-args", 1), ("-a", 1), ("--arg-file", 1), ("-d", 1), ("--delimiter", 1), ("-I", 1), ("--joblog", 1), ("--results", 1), ("--tmpdir", 1), ("--workdir", 1), ("--env", 1), ("--colsep", 1), ("--timeout", 1), ("--retries", 1), ("--delay", 1), ("--memfree", 1), ("--load", 1), ("--tag-string", 1), ("--basefile", 1), ("--return", 1), ("--transferfile", 1)], &[], 0, Form::Source),
    w("strace", &[("-o", 1), ("--output", 1), ("-e", 1), ("-p", 1), ("--attach", 1), ("-s", 1), ("--string-limit", 1), ("-u", 1), ("--user", 1), ("-E", 1), ("--env", 1), ("-a", 1), ("-b", 1), ("-I", 1), ("-O", 1), ("-S", 1), ("-P", 1), ("-X", 1), ("--trace", 1), ("--signal", 1), ("--status", 1)], &[], 0, Form::Argv),
    w("ltrace", &[("-o", 1), ("--output", 1), ("-e", 1), ("-p", 1), ("-s", 1), ("-u", 1), ("-a", 1), ("-n", 1), ("-l", 1), ("-F", 1), ("-x", 1), ("-A", 1), ("-D", 1)], &[], 0, Form::Argv),
    w("chroot", &[("--userspec", 1), ("--groups", 1)], &[], 1, Form::ArgvOrShell),
    w("unshare", &[("-S", 1), ("--setuid", 1), ("-G", 1), ("--setgid", 1), ("-R", 1), ("--root", 1), ("-w", 1), ("--wd", 1), ("--propagation", 1), ("--setgroups", 1), ("--map-user", 1), ("--map-group", 1), ("--map-users", 1), ("--map-groups", 1), ("--load-interp", 1), ("--monotonic", 1), ("--boottime", 1)], &[], 0, Form::ArgvOrShell),
    w("nsenter", &[("-t", 1), ("--target", 1), ("-S", 1), ("--setuid", 1), ("-G", 1), ("--setgid", 1), ("-N", 1), ("--net-socket", 1), ("--user-parent", 0)], &[], 0, Form::ArgvOrShell),
    w("bwrap", &[("--bind", 2), ("--ro-bind", 2), ("--dev-bind", 2), ("--bind-try", 2), ("--ro-bind-try", 2), ("--dev-bind-try", 2), ("--symlink", 2), ("--chmod", 2), ("--file", 2), ("--bind-data", 2), ("--ro-bind-data", 2), ("--setenv", 2), ("--overlay", 2), ("--tmp-overlay", 1), ("--ro-overlay", 1), ("--overlay-src", 1), ("--unsetenv", 1), ("--tmpfs", 1), ("--proc", 1), ("--dev", 1), ("--mqueue", 1), ("--dir", 1), ("--remount-ro", 1), ("--chdir", 1), ("--hostname", 1), ("--uid", 1), ("--gid", 1), ("--lock-file", 1), ("--sync-fd", 1), ("--info-fd", 1), ("--json-status-fd", 1), ("--block-fd", 1), ("--userns-block-fd", 1), ("--seccomp", 1), ("--add-seccomp-fd", 1), ("--exec-label", 1), ("--file-label", 1), ("--cap-add", 1), ("--cap-drop", 1), ("--args", 1), ("--perms", 1), ("--size", 1), ("--argv0", 1), ("--userns", 1), ("--userns2", 1), ("--pidns", 1)], &[], 0, Form::Argv),
    w("systemd-run", &[("-u", 1), ("--unit", 1), ("-p", 1), ("--property", 1), ("--description", 1), ("--slice", 1), ("-E", 1), ("--setenv", 1), ("-M", 1), ("--machine", 1), ("-H", 1), ("--host", 1), ("--uid", 1), ("--gid", 1), ("--nice", 1), ("--working-directory", 1), ("--service-type", 1), ("--on-active", 1), ("--on-boot", 1), ("--on-startup", 1), ("--on-unit-active", 1), ("--on-unit-inactive", 1), ("--on-calendar", 1), ("--timer-property", 1), ("--path-property", 1), ("--socket-property", 1)], &[], 0, Form::Argv),
    w("busybox", &[], &[], 0, Form::Busybox),
    w("find", &[], &[], 0, Form::Find),
    w("ssh", &[("-B", 1), ("-b", 1), ("-c", 1), ("-D", 1), ("-E", 1), ("-e", 1), ("-F", 1), ("-I", 1), ("-i", 1), ("-J", 1), ("-L", 1), ("-l", 1), ("-m", 1), ("-O", 1), ("-o", 1), ("-p", 1), ("-Q", 1), ("-R", 1), ("-S", 1), ("-W", 1), ("-w", 1)], &[], 0, Form::Ssh),
    w("setpriv", &[("--reuid", 1), ("--regid", 1), ("--ruid", 1), ("--euid", 1), ("--rgid", 1), ("--egid", 1), ("--groups", 1), ("--inh-caps", 1), ("--ambient-caps", 1), ("--bounding-set", 1), ("--securebits", 1), ("--pdeathsig", 1), ("--selinux-label", 1), ("--apparmor-profile", 1), ("--landlock-access", 1), ("--landlock-rule", 1), ("--seccomp-filter", 1), ("--ptracer", 1)], &[], 0, Form::Argv),
    w("script", &[("-E", 1), ("--echo", 1), ("-I", 1), ("--log-in", 1), ("-O", 1), ("--log-out", 1), ("-B", 1), ("--log-io", 1), ("-T", 1), ("--log-timing", 1), ("-m", 1), ("--logging-format", 1), ("-o", 1), ("--output-limit", 1), ("-t", 0)], &["-c", "--command"], 0, Form::Su),
    w("dbus-launch", &[("--config-file", 1), ("--autolaunch", 1)], &[], 0, Form::Argv),
    w("dbus-run-session", &[("--config-file", 1), ("--dbus-daemon", 1)], &[], 0, Form::Argv),
    w("caffeinate", &[("-t", 1), ("-w", 1)], &[], 0, Form::Argv),
    w("proxychains", &[("-f", 1)], &[], 0, Form::Argv),
    w("proxychains4", &[("-f", 1)], &[], 0, Form::Argv),
    w("torsocks", &[("-u", 1), ("--user", 1), ("-p", 1), ("--pass", 1), ("-a", 1), ("--address", 1), ("-P", 1), ("--port", 1)], &[], 0, Form::Argv),
    w("firejail", &[], &[], 0, Form::ArgvOrShell),
    w("unbuffer", &[], &[], 0, Form::Argv),
    w("faketime", &[], &[], 1, Form::Argv),
    w("catchsegv", &[], &[], 0, Form::Argv),
    w("valgrind", &[], &[], 0, Form::Argv),
    w("gdb", &[("-ex", 1), ("-iex", 1), ("-x", 1), ("-ix", 1), ("-p", 1), ("-d", 1), ("-cd", 1), ("-s", 1), ("-e", 1), ("-se", 1), ("-c", 1), ("-tty", 1)], &[], 0, Form::Gdb),
    w("coproc", &[], &[], 0, Form::Argv),
    w("sg", &[], &["-c"], 1, Form::Argv),
    w("pkexec", &[("--user", 1)], &[], 0, Form::Argv),
    w("setarch", &[], &[], 1, Form::ArgvOrShell),
    w("linux32", &[], &[], 0, Form::ArgvOrShell),
    w("linux64", &[], &[], 0, Form::ArgvOrShell),
    w("numactl", &[("-N", 1), ("--cpunodebind", 1), ("-m", 1), ("--membind", 1), ("-C", 1), ("--physcpubind", 1), ("-p", 1), ("--preferred", 1), ("-i", 1), ("--interleave", 1)], &[], 0, Form::Argv),
    w("prlimit", &[("-p", 1), ("--pid", 1), ("-o", 1), ("--output", 1)], &[], 0, Form::Argv),
    w("cgexec", &[("-g", 1)], &[], 0, Form::Argv),
    w("cpulimit", &[("-l", 1), ("--limit", 1), ("-p", 1), ("--pid", 1), ("-e", 1), ("--exe", 1)], &[], 0, Form::Argv),
    w("trickle", &[("-d", 1), ("-u", 1), ("-w", 1), ("-t", 1), ("-l", 1), ("-n", 1)], &[], 0, Form::Argv),
    w("eatmydata", &[], &[], 0, Form::Argv),
    w("fakeroot", &[("-l", 1), ("--lib", 1), ("--faked", 1), ("-s", 1), ("-i", 1), ("-b", 1)], &[], 0, Form::ArgvOrShell),
    w("nocache", &[], &[], 0, Form::Argv),
    w("chronic", &[], &[], 0, Form::Argv),
    w("rlwrap", &[("-f", 1), ("-H", 1), ("-l", 1), ("-P", 1), ("-S", 1), ("-z", 1)], &[], 0, Form::Argv),
    w("xvfb-run", &[("-n", 1), ("--server-num", 1), ("-s", 1), ("--server-args", 1), ("-f", 1), ("--auth-file", 1), ("-e", 1), ("--error-file", 1), ("-p", 1), ("--xauth-protocol", 1)], &[], 0, Form::Argv),
    w("systemd-inhibit", &[("--what", 1), ("--who", 1), ("--why", 1), ("--mode", 1)], &[], 0, Form::Argv),
    w("ssh-agent", &[("-a", 1), ("-E", 1), ("-t", 1), ("-P", 1)], &[], 0, Form::Argv),
    w("sshpass", &[("-p", 1), ("-f", 1), ("-d", 1), ("-e", 0), ("-P", 1)], &[], 0, Form::Argv),
    w("gosu", &[], &[], 1, Form::Argv),
    w("su-exec", &[], &[], 1, Form::Argv),
    w("chpst", &[("-u", 1), ("-U", 1), ("-b", 1), ("-e", 1), ("-/", 1), ("-C", 1), ("-n", 1), ("-l", 1), ("-L", 1), ("-m", 1), ("-d", 1), ("-o", 1), ("-p", 1), ("-f", 1), ("-c", 1)], &[], 0, Form::Argv),
    w("tini", &[("-s", 0), ("-p", 1), ("-e", 1)], &[], 0, Form::Argv),
    w("dumb-init", &[("-r", 1), ("--rewrite", 1)], &[], 0, Form::Argv),
    w("entr", &[], &[], 0, Form::Argv),
    w("perf", &[("-e", 1), ("--event", 1), ("-o", 1), ("--output", 1), ("-p", 1), ("--pid", 1), ("-t", 1), ("--tid", 1), ("-r", 1), ("--repeat", 1), ("-C", 1), ("--cpu", 1), ("-F", 1), ("--freq", 1), ("-c", 1), ("--count", 1), ("-G", 1), ("--cgroup", 1), ("-x", 1), ("--field-separator", 1)], &[], 0, Form::Argv),
    w("ip", &[], &[], 0, Form::Argv),
    w("nix-shell", &[], &["--run", "--command"], 0, Form::Argv),
    w("direnv", &[], &[], 0, Form::Argv),
    w("aws-vault", &[], &[], 0, Form::Argv),
    w("op", &[], &[], 0, Form::Argv),
    w("doppler", &[], &[], 0, Form::Argv),
    w("dotenv", &[("-e", 1), ("-v", 1), ("-c", 1)], &[], 0, Form::Argv),
    w("uv", &[], &[], 0, Form::Argv),
    w("poetry", &[], &[], 0, Form::Argv),
    w("pipenv", &[], &[], 0, Form::Argv),
    w("bundle", &[], &[], 0, Form::Argv),
    w("npx", &[("-p", 1), ("--package", 1)], &["-c", "--call"], 0, Form::Argv),
    w("tmux", &[], &[], 0, Form::Source),
    w("screen", &[("-S", 1), ("-c", 1), ("-e", 1), ("-h", 1), ("-p", 1), ("-t", 1), ("-T", 1), ("-X", 1)], &[], 0, Form::Argv),
    w("at", &[], &[], 0, Form::ArgvOrShell),
    w("batch", &[], &[], 0, Form::ArgvOrShell),
    w("hyperfine", &[], &[], 0, Form::Source),
];

const fn w(
    name: &'static str,
    options: &'static [(&'static str, u8)],
    source_options: &'static [&'static str],
    operands: u8,
    form: Form,
) -> Wrapper {
    Wrapper {
        name,
        options,
        source_options,
        operands,
        form,
    }
}

/// The wrapper entry of a program's base name.
pub(super) fn wrapper(name: &str) -> Option<&'static Wrapper> {
    WRAPPERS.iter().find(|entry| entry.name == name)
}

/// What in a command hands a command on.
#[derive(Debug, Clone, Copy)]
pub enum HandOnCheck {
    /// Any of these option words, in their joined forms too (`--exec=x`,
    /// `-xcmd`, `-oProxyCommand=x`).
    Options(&'static [&'static str]),
    /// Always (the program itself hands on whatever follows).
    Always,
    /// An `awk` program containing `system(`, `|` or `getline`, or one read
    /// from a file.
    AwkProgram,
    /// A `sed` script with an `e` or `w`/`W` command or flag, or one read
    /// from a file.
    SedScript,
    /// `ssh`/`scp`/`sftp` `-o` setting one of these keys.
    SshOption(&'static [&'static str]),
}

/// One entry of the hand-on table (§25.6): an argument that hands a command
/// on. An allow rule or grant never covers such a command.
#[derive(Debug, Clone, Copy)]
pub struct HandOn {
    /// The program base names it applies to.
    pub programs: &'static [&'static str],
    /// The subcommand it applies to (the first word after the program's
    /// global options), if any.
    pub subcommand: Option<&'static str>,
    /// What hands on.
    pub check: HandOnCheck,
    /// The description: what the README and a command's `hands_on` say.
    pub what: &'static str,
}

const INTERPRETERS: &[&str] = &[
    "python",
    "python2",
    "python3",
    "pypy",
    "pypy3",
    "perl",
    "ruby",
    "node",
    "nodejs",
    "php",
    "lua",
    "luajit",
    "Rscript",
    "osascript",
    "bun",
    "deno",
];

/// Every argument that hands a command on. One place: the code reads it,
/// the README prints it.
#[rustfmt::skip]
pub static HANDS_ON: &[HandOn] = &[
    h(&["find"], None, HandOnCheck::Options(&["-exec", "-execdir", "-ok", "-okdir", "-delete", "-fprint", "-fprintf", "-fls"]), "find -exec/-execdir/-ok/-okdir/-delete"),
    h(&["xargs", "parallel"], None, HandOnCheck::Always, "xargs / parallel"),
    h(&["git"], None, HandOnCheck::Options(&["-c", "--config-env", "--exec-path", "--upload-pack", "--receive-pack", "-u"]), "git -c/--config-env/--exec-path/--upload-pack/--receive-pack"),
    h(&["git"], Some("grep"), HandOnCheck::Options(&["-O", "--open-files-in-pager"]), "git grep -O/--open-files-in-pager"),
    h(&["git"], Some("rebase"), HandOnCheck::Options(&["-x", "--exec", "-i", "--interactive"]), "git rebase -x/--exec"),
    h(&["git"], Some("bisect"), HandOnCheck::Options(&["run"]), "git bisect run"),
    h(&["git"], Some("submodule"), HandOnCheck::Options(&["foreach"]), "git submodule foreach"),
    h(&["git"], Some("filter-branch"), HandOnCheck::Always, "git filter-branch"),
    h(&["git"], Some("difftool"), HandOnCheck::Options(&["-x", "--extcmd", "-t", "--tool"]), "git difftool -x/--extcmd/--tool"),
    h(&["git"], Some("mergetool"), HandOnCheck::Options(&["-t", "--tool"]), "git mergetool --tool"),
    h(&["git"], Some("config"), HandOnCheck::Always, "git config (can set a command-valued key)"),
    h(&["git"], Some("send-email"), HandOnCheck::Options(&["--to-cmd", "--cc-cmd", "--sendmail-cmd", "--smtp-server"]), "git send-email --to-cmd/--cc-cmd/--sendmail-cmd"),
    h(&["git", "git-upload-pack"], Some("fetch"), HandOnCheck::Options(&["--upload-pack"]), "git fetch --upload-pack"),
    h(&["git"], Some("clone"), HandOnCheck::Options(&["-u", "--upload-pack", "--template", "-c", "--config"]), "git clone -u/--upload-pack/--template/--config"),
    h(&["git"], Some("push"), HandOnCheck::Options(&["--receive-pack", "--exec"]), "git push --receive-pack/--exec"),
    h(&["tar", "bsdtar", "gtar"], None, HandOnCheck::Options(&["--to-command", "-I", "--use-compress-program", "--checkpoint-action", "--info-script", "--new-volume-script", "-F", "--rsh-command"]), "tar --to-command/-I/--use-compress-program/--checkpoint-action/--info-script/--rsh-command"),
    h(&["rsync"], None, HandOnCheck::Options(&["-e", "--rsh", "--rsync-path"]), "rsync -e/--rsh/--rsync-path"),
    h(&["ssh", "scp", "sftp"], None, HandOnCheck::SshOption(&["proxycommand", "localcommand", "permitlocalcommand", "knownhostscommand", "remotecommand", "match"]), "ssh/scp/sftp -o ProxyCommand|LocalCommand|KnownHostsCommand|RemoteCommand"),
    h(&["ssh", "scp", "sftp"], None, HandOnCheck::Options(&["-F", "-S", "-D"]), "ssh/scp/sftp -F config / -S program"),
    h(&["cargo"], None, HandOnCheck::Options(&["--config", "-Z"]), "cargo --config/-Z"),
    h(&["npm", "pnpm", "yarn"], None, HandOnCheck::Options(&["--script-shell", "--shell", "-c", "--call", "exec", "x", "dlx"]), "npm --script-shell / exec / -c"),
    h(&["kubectl"], None, HandOnCheck::Options(&["--kubeconfig", "exec"]), "kubectl --kubeconfig / exec"),
    h(&["awk", "gawk", "mawk", "nawk"], None, HandOnCheck::AwkProgram, "awk programs with system(, | or getline, or -f"),
    h(&["sed", "gsed"], None, HandOnCheck::SedScript, "sed e/w commands, or -f"),
    h(INTERPRETERS, None, HandOnCheck::Options(&["-e", "-c", "-E", "-r", "--eval", "-p", "--print", "-R", "-B", "-m", "eval"]), "perl/python/python3/node/ruby/php/lua… -e/-c/-E/-r/--eval/-p"),
    h(&["exec"], None, HandOnCheck::Options(&["-a"]), "exec -a"),
    h(&["less", "more"], None, HandOnCheck::Options(&["+!", "+|", "--lesskey-file", "-k"]), "less +!command / --lesskey-file"),
    h(&["vim", "vi", "nvim", "view", "ex"], None, HandOnCheck::Options(&["-c", "--cmd", "+", "-S"]), "vim -c/--cmd/+cmd/-S"),
    h(&["emacs"], None, HandOnCheck::Options(&["--eval", "-l", "--load", "-f", "--funcall", "--batch"]), "emacs --eval/-l/-f"),
    h(&["man"], None, HandOnCheck::Options(&["-P", "--pager", "-H", "--html"]), "man -P/--pager/-H"),
    h(&["make", "gmake"], None, HandOnCheck::Options(&["SHELL", "--eval", "-E"]), "make SHELL=/--eval"),
    h(&["docker", "podman"], None, HandOnCheck::Options(&["exec", "run", "--entrypoint"]), "docker/podman exec/run/--entrypoint"),
    h(&["zip"], None, HandOnCheck::Options(&["-TT", "--unzip-command"]), "zip -TT/--unzip-command"),
    h(&["jq"], None, HandOnCheck::Options(&["-L"]), "jq -L (modules from elsewhere)"),
    h(&["mysql", "psql", "sqlite3"], None, HandOnCheck::Options(&["-e", "-c", "--command", "-f", "--file", "-cmd", "-init"]), "mysql/psql/sqlite3 -e/-c/-f (client commands can run shell)"),
];

const fn h(
    programs: &'static [&'static str],
    subcommand: Option<&'static str>,
    check: HandOnCheck,
    what: &'static str,
) -> HandOn {
    HandOn {
        programs,
        subcommand,
        check,
        what,
    }
}

/// The interpreters whose code arguments are scanned for process-spawning
/// primitives (§25.5), with their code-taking options.
pub(super) fn interpreter_code_options(name: &str) -> Option<&'static [&'static str]> {
    let name = name.strip_suffix(".exe").unwrap_or(name);
    let family = name.trim_end_matches(|c: char| c.is_ascii_digit() || c == '.');
    Some(match family {
        "python" | "pypy" => &["-c"],
        "perl" => &["-e", "-E"],
        "ruby" => &["-e"],
        "node" | "nodejs" | "bun" => &["-e", "--eval", "-p", "--print"],
        "deno" => &["eval"],
        "php" => &["-r", "-R", "-B", "-E", "-F"],
        "lua" | "luajit" => &["-e"],
        "Rscript" => &["-e"],
        "osascript" => &["-e"],
        "expect" | "tclsh" | "wish" => &["-c"],
        _ => return None,
    })
}

/// The primitives that can start a process or load code, scanned for
/// (case-insensitively) in interpreter code arguments. Generous on
/// purpose: a benign one-liner that uses one of them is held, not lost.
pub(super) const SPAWN_PRIMITIVES: &[&str] = &[
    "system",
    "exec",
    "popen",
    "spawn",
    "fork",
    "subprocess",
    "child_process",
    "import",
    "require",
    "eval",
    "compile",
    "getattr",
    "__",
    "`",
    "qx",
    "%x",
    "open",
    "io.",
    "open3",
    "kernel",
    "send",
    "function(",
    "process.",
    "pty",
    "ctypes",
    "ffi",
    "syscall",
    "passthru",
    "proc_",
    "shell",
    "pcntl",
    "os.",
    "load",
    "dlopen",
    "deno.",
    "bun.",
    "globalthis",
    "constructor",
    "pipe",
    "include",
    "dofile",
    "assert",
    "call_user_func",
    "create_function",
    "preg_replace",
    "do ",
    "do(",
    "-e",
    "unlink",
    "rmtree",
    "remove",
    "command",
];

/// Environment variables whose value a program runs as a command: an
/// assignment to one has its literal value read as bash (§25.5).
pub static COMMAND_ENV: &[&str] = &[
    "GIT_SSH_COMMAND",
    "GIT_SSH",
    "GIT_EDITOR",
    "GIT_SEQUENCE_EDITOR",
    "GIT_PAGER",
    "GIT_EXTERNAL_DIFF",
    "GIT_PROXY_COMMAND",
    "GIT_ASKPASS",
    "SSH_ASKPASS",
    "SUDO_ASKPASS",
    "EDITOR",
    "VISUAL",
    "PAGER",
    "MANPAGER",
    "SYSTEMD_PAGER",
    "LESSOPEN",
    "LESSCLOSE",
    "BROWSER",
    "RSYNC_RSH",
    "CVS_RSH",
    "FCEDIT",
    "SUDO_EDITOR",
    "KUBE_EDITOR",
    "PSQL_PAGER",
    "MYSQL_PS1",
    "DIFFTOOL",
    "TERMINAL",
    "SHELL",
    "CARGO_TARGET_RUNNER",
    "RUSTC_WRAPPER",
    "RUSTC",
    "CC",
    "CXX",
    "LD",
    "AR",
    "MAKE",
    "GIT_EXEC_PATH",
    "EMACS",
];

/// Environment variables that make a program load or run code from
/// elsewhere: an assignment to one is opaque (§25.5). A trailing `*` is a
/// prefix.
pub static LOADER_ENV: &[&str] = &[
    "LD_PRELOAD",
    "LD_LIBRARY_PATH",
    "LD_AUDIT",
    "DYLD_INSERT_LIBRARIES",
    "DYLD_LIBRARY_PATH",
    "BASH_ENV",
    "ENV",
    "PROMPT_COMMAND",
    "PS0",
    "PS4",
    "BASH_FUNC_*",
    "SHELLOPTS",
    "BASHOPTS",
    "PYTHONSTARTUP",
    "PYTHONHOME",
    "PERL5OPT",
    "PERL5DB",
    "NODE_OPTIONS",
    "RUBYOPT",
    "GIT_CONFIG_PARAMETERS",
    "GIT_CONFIG_COUNT",
    "GIT_CONFIG_KEY_*",
    "GIT_CONFIG_VALUE_*",
    "GIT_CONFIG",
    "GIT_CONFIG_GLOBAL",
    "GIT_CONFIG_SYSTEM",
    "GIT_TEMPLATE_DIR",
    "LESSKEY",
    "LESSKEYIN",
    "INPUTRC",
    "ZDOTDIR",
    "JAVA_TOOL_OPTIONS",
    "_JAVA_OPTIONS",
    "JDK_JAVA_OPTIONS",
    "GCONV_PATH",
    "HOSTALIASES",
    "VIMINIT",
    "EXINIT",
    "MYVIMRC",
    "GDBINIT",
    "OPENSSL_CONF",
    "OPENSSL_ENGINES",
    "PERL_MB_OPT",
    "PERL_MM_OPT",
];

/// Whether `name` is in a table with `*`-suffixed prefixes.
pub(super) fn env_listed(table: &[&str], name: &str) -> bool {
    table.iter().any(|entry| match entry.strip_suffix('*') {
        Some(prefix) => name.starts_with(prefix),
        None => *entry == name,
    })
}

/// git configuration keys whose value git runs or that point git at code
/// elsewhere (lowercased; a `*` segment matches any subsection).
pub(super) const GIT_COMMAND_KEYS: &[&str] = &[
    "alias.*",
    "core.pager",
    "core.editor",
    "core.sshcommand",
    "core.fsmonitor",
    "core.hookspath",
    "core.askpass",
    "core.gitproxy",
    "core.alternaterefscommand",
    "core.worktree",
    "diff.external",
    "diff.*.command",
    "diff.*.textconv",
    "difftool.*.cmd",
    "difftool.*.path",
    "mergetool.*.cmd",
    "mergetool.*.path",
    "merge.*.driver",
    "filter.*.clean",
    "filter.*.smudge",
    "filter.*.process",
    "credential.helper",
    "credential.*.helper",
    "gpg.program",
    "gpg.*.program",
    "sequence.editor",
    "pager.*",
    "interactive.difffilter",
    "uploadpack.packobjectshook",
    "url.*.insteadof",
    "url.*.pushinsteadof",
    "protocol.allow",
    "protocol.*.allow",
    "remote.*.uploadpack",
    "remote.*.receivepack",
    "remote.*.vcs",
    "include.path",
    "includeif.*.path",
    "init.templatedir",
    "sendemail.tocmd",
    "sendemail.cccmd",
    "sendemail.sendmailcmd",
    "sendemail.smtpserver",
    "web.browser",
    "browser.*.cmd",
    "browser.*.path",
    "man.viewer",
    "man.*.cmd",
    "man.*.path",
    "instaweb.httpd",
    "ssh.variant",
    "receive.procreceiverefs",
    "core.sshcommand",
    "http.proxy",
    "http.*.proxy",
    "submodule.*.update",
    "imap.tunnel",
    "gc.auto*",
    "maintenance.*",
    "safe.*",
    "trace2.*",
    "notes.*",
    "ssh.*",
];

/// Whether a git configuration key (any case) is command-valued.
pub(super) fn git_command_key(key: &str) -> bool {
    let key = key.to_ascii_lowercase();
    let parts: Vec<&str> = key.split('.').collect();
    GIT_COMMAND_KEYS.iter().any(|pattern| {
        let want: Vec<&str> = pattern.split('.').collect();
        if let [section, rest @ ..] = want.as_slice() {
            if rest.len() == 1 && rest[0] == "*" {
                // `alias.*`: the section and anything under it.
                return parts.first() == Some(section) && parts.len() >= 2;
            }
            if rest.len() == 1 && rest[0].ends_with('*') {
                let prefix = rest[0].trim_end_matches('*');
                return parts.first() == Some(section)
                    && parts.last().is_some_and(|last| last.starts_with(prefix));
            }
            if rest.len() == 2 && rest[0] == "*" {
                return parts.len() >= 3
                    && parts.first() == Some(section)
                    && parts.last() == Some(&rest[1]);
            }
        }
        key == *pattern
    })
}

/// The wrapper table for the README, as one markdown paragraph (the
/// README has a line budget; every entry is named, with how it hands on
/// when that is not simply "the command after its options").
pub fn wrappers_markdown() -> String {
    let names: Vec<String> = WRAPPERS
        .iter()
        .map(|entry| {
            let how = match entry.form {
                Form::Source => " (joined, read as bash)",
                Form::Env => " (`NAME=value`, `-S` read as bash)",
                Form::Xargs => " (`echo` when none)",
                Form::Find => " (`-exec/-execdir/-ok/-okdir … ;|+`)",
                Form::Sudo => " (`-s`/`-i`: read as bash)",
                Form::Su => " (`-c` read as bash; none: opaque)",
                Form::Flock => " (`-c` read as bash)",
                Form::Ssh => " (`host` then the command, read as bash)",
                Form::Busybox => " (the applet)",
                Form::Command => " (`-v`/`-V` run nothing)",
                Form::Gdb => " (always opaque; `--args`)",
                Form::ArgvOrShell => " (none: a shell, opaque)",
                Form::Argv => "",
            };
            let operands = match entry.operands {
                0 => String::new(),
                n => format!(" ({n} operand first)"),
            };
            format!("`{}`{operands}{how}", entry.name)
        })
        .collect();
    format!(
        "**Wrappers** (the wrapper and the command it runs are both judged; options that take a value are skipped with it; for deny and ask every later word is also tried as a program): {}.\n",
        names.join(", ")
    )
}

/// The hand-on table for the README, as one markdown paragraph.
pub fn hands_on_markdown() -> String {
    let entries: Vec<&str> = HANDS_ON.iter().map(|entry| entry.what).collect();
    format!(
        "**Arguments that hand a command on** (no allow rule or grant covers a command with one): {}.\n",
        entries.join("; ")
    )
}
