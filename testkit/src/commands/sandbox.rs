//! A real bash as the oracle: run a [`Reading`] inside bubblewrap under
//! strace and report every program that really started.
//!
//! The sandbox: a read-only root, empty tmpfs `/tmp`, `/root` (the home
//! and the working directory) and `/run`, an empty `/etc/profile` (so a
//! login shell starts nothing of its own), every namespace unshared (no
//! network), `--die-with-parent`, a fixed `PATH`, stdin `/dev/null`, and
//! `timeout` around it all, at a low CPU priority (`nice -n 10`) so that
//! the suites running beside it in the same test binary keep their pace. strace follows every process (`-f`) and logs
//! `execve` and the forks, so each started program is known together with
//! the program whose process started it. The trace file lives in a host
//! folder bound at `/run/oracle`, where no command of the corpus writes.
//!
//! # Format
//!
//! strace's lines, one per call (`-qq`, no signals):
//!
//! ```text
//! 5     execve("/usr/bin/bash", ["bash", "-c", "--", "env rm x"], 0x7ffe /* 3 vars */) = 0
//! 5     clone(child_stack=NULL, flags=CLONE_CHILD_CLEARTID|SIGCHLD, …) = 6
//! 6     execve("/usr/bin/env", ["env", "rm", "x"], 0x55ec /* 5 vars */ <unfinished ...>
//! 6     <... execve resumed>)             = 0
//! ```

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use thiserror::Error;

use super::Reading;

/// The `PATH` inside the sandbox.
const PATH: &str = "/usr/bin:/bin:/usr/sbin:/sbin";

/// Why the oracle cannot run here (the tests print one `SKIP` line).
#[derive(Debug, Clone, Error)]
#[error("{0}")]
pub struct Unavailable(pub String);

/// One program that really started (`execve` returned 0).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Exec {
    pub pid: u32,
    /// The path given to `execve`.
    pub path: String,
    pub argv: Vec<String>,
    /// The path of the program whose process started this one (by a fork,
    /// or by `execve` in place); `None` for the first program, which the
    /// sandbox itself starts.
    pub spawner: Option<String>,
}

impl Exec {
    /// The base name of the program that started.
    pub fn program(&self) -> &str {
        base_name(&self.path)
    }

    /// The base name of the program that started it.
    pub fn spawner_program(&self) -> Option<&str> {
        self.spawner.as_deref().map(base_name)
    }
}

fn base_name(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

/// What one run showed.
#[derive(Debug, Clone, Default)]
pub struct Trace {
    /// Every program that started, in the order strace saw them.
    pub execs: Vec<Exec>,
    /// The run hit its time limit (it was killed; what started until then
    /// is still listed).
    pub timed_out: bool,
    /// The run could not be made or read (never a verdict: a test counts it).
    pub error: Option<String>,
}

impl Trace {
    /// The programs the value ran: every start but the reading's own bash.
    pub fn ran<'a>(&'a self, reading: &Reading) -> impl Iterator<Item = &'a Exec> {
        let own = reading.starts_with_own_shell();
        self.execs
            .iter()
            .filter(move |e| !(own && e.spawner.is_none()))
    }
}

/// bubblewrap, strace, timeout and nice, found and checked.
#[derive(Debug, Clone)]
pub struct Sandbox {
    bwrap: PathBuf,
    strace: PathBuf,
    timeout: PathBuf,
    nice: PathBuf,
    limit: Duration,
    /// strace stops a process only at the calls it traces (`--seccomp-bpf`,
    /// strace ≥ 5.3): what it records is the same, at about half the cost
    /// of a run. Off when this strace cannot.
    seccomp: bool,
}

impl Sandbox {
    /// Finds the four programs on `PATH` and checks that bubblewrap can
    /// make its namespaces here (it cannot in many containers).
    pub fn detect() -> Result<Sandbox, Unavailable> {
        let find =
            |name: &str| which(name).ok_or_else(|| Unavailable(format!("{name} is not installed")));
        let sandbox = Sandbox {
            bwrap: find("bwrap")?,
            strace: find("strace")?,
            timeout: find("timeout")?,
            nice: find("nice")?,
            limit: Duration::from_secs(5),
            seccomp: true,
        };
        let probe = Reading::Argv(vec!["true".into()]);
        let shows = |trace: &Trace| trace.execs.iter().any(|e| e.program() == "true");
        let trace = sandbox.run(&probe);
        if trace.error.is_none() && shows(&trace) {
            return Ok(sandbox);
        }
        let sandbox = Sandbox {
            seccomp: false,
            ..sandbox
        };
        let trace = sandbox.run(&probe);
        match trace.error {
            Some(error) => Err(Unavailable(error)),
            None if shows(&trace) => Ok(sandbox),
            None => Err(Unavailable(
                "bubblewrap or strace ran but showed no program starting".into(),
            )),
        }
    }

    /// Runs one reading and reads its trace.
    pub fn run(&self, reading: &Reading) -> Trace {
        let Some(argv) = reading.argv() else {
            return Trace::default();
        };
        if argv.iter().any(|a| a.contains('\0')) {
            return Trace::default();
        }
        let dir = match tempfile::tempdir() {
            Ok(dir) => dir,
            Err(e) => return failed(format!("no folder for the trace: {e}")),
        };
        let output = Command::new(&self.nice)
            .args(["-n", "10"])
            .arg(&self.timeout)
            .args(["-k", "1", &format!("{}", self.limit.as_secs())])
            .arg(&self.bwrap)
            .args(["--ro-bind", "/", "/"])
            .args(["--tmpfs", "/tmp", "--tmpfs", "/root", "--tmpfs", "/run"])
            .arg("--bind")
            .arg(dir.path())
            .arg("/run/oracle")
            .args(["--ro-bind", "/dev/null", "/etc/profile"])
            .args(["--proc", "/proc", "--dev", "/dev"])
            .args(["--unshare-all", "--die-with-parent", "--new-session"])
            .args(["--chdir", "/root"])
            .arg(&self.strace)
            .args(self.seccomp.then_some("--seccomp-bpf"))
            .args(["-f", "-qq", "-e", "signal=none"])
            .args(["-e", "trace=execve,clone,clone3,fork,vfork"])
            .args(["-s", "4096", "-o", "/run/oracle/trace", "--"])
            .args(&argv)
            .env_clear()
            .env("PATH", PATH)
            .env("HOME", "/root")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .output();
        let output = match output {
            Ok(output) => output,
            Err(e) => return failed(format!("could not start nice/timeout/bwrap: {e}")),
        };
        let text = match std::fs::read(dir.path().join("trace")) {
            Ok(bytes) => String::from_utf8_lossy(&bytes).into_owned(),
            Err(_) => {
                let stderr = String::from_utf8_lossy(&output.stderr);
                return failed(format!(
                    "no trace ({}): {}",
                    output.status,
                    stderr.lines().next().unwrap_or_default()
                ));
            }
        };
        Trace {
            execs: parse_trace(&text),
            // timeout's own codes: 124 after TERM, 137 after KILL.
            timed_out: matches!(output.status.code(), Some(124 | 137)),
            error: None,
        }
    }

    /// Runs every reading, `parallel` at a time, each within its limit.
    pub fn run_all(&self, readings: &[Reading], parallel: usize) -> Vec<Trace> {
        let next = AtomicUsize::new(0);
        let out: Mutex<Vec<Option<Trace>>> = Mutex::new(vec![None; readings.len()]);
        std::thread::scope(|scope| {
            for _ in 0..parallel.max(1) {
                scope.spawn(|| loop {
                    let i = next.fetch_add(1, Ordering::SeqCst);
                    let Some(reading) = readings.get(i) else {
                        break;
                    };
                    let trace = self.run(reading);
                    out.lock().unwrap_or_else(|p| p.into_inner())[i] = Some(trace);
                });
            }
        });
        out.into_inner()
            .unwrap_or_else(|p| p.into_inner())
            .into_iter()
            .map(Option::unwrap_or_default)
            .collect()
    }
}

fn failed(error: String) -> Trace {
    Trace {
        error: Some(error),
        ..Trace::default()
    }
}

fn which(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(name))
        .find(|p| is_executable(p))
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    path.metadata()
        .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        .unwrap_or(false)
}

/// A call as strace logged it, its two halves joined when another process
/// interleaved (`<unfinished ...>` / `<... name resumed>`).
struct Call {
    pid: u32,
    /// The line where the call started: the order of events.
    start: usize,
    text: String,
}

/// Every program that started, with the program that started it, from
/// strace's output (see the module's format).
pub fn parse_trace(text: &str) -> Vec<Exec> {
    let mut open: HashMap<u32, (usize, String)> = HashMap::new();
    let mut calls = Vec::new();
    for (line_no, line) in text.lines().enumerate() {
        let line = line.trim_end();
        let Some((pid, rest)) = line.split_once(char::is_whitespace) else {
            continue;
        };
        let Ok(pid) = pid.parse::<u32>() else {
            continue;
        };
        let rest = rest.trim_start();
        if let Some(head) = rest.strip_suffix("<unfinished ...>") {
            open.insert(pid, (line_no, head.to_owned()));
        } else if let Some(tail) = rest.strip_prefix("<... ") {
            let tail = tail.split_once('>').map(|(_, t)| t).unwrap_or_default();
            if let Some((start, head)) = open.remove(&pid) {
                calls.push(Call {
                    pid,
                    start,
                    text: format!("{head}{tail}"),
                });
            }
        } else {
            calls.push(Call {
                pid,
                start: line_no,
                text: rest.to_owned(),
            });
        }
    }
    calls.sort_by_key(|c| c.start);
    // The program each process runs now (a fork inherits its parent's).
    let mut image: HashMap<u32, String> = HashMap::new();
    let mut execs = Vec::new();
    for call in calls {
        let result = call
            .text
            .rsplit_once('=')
            .map(|(_, r)| r.trim())
            .unwrap_or_default();
        if let Some(args) = call.text.strip_prefix("execve(") {
            if result != "0" {
                continue;
            }
            let Some((path, argv)) = execve_args(args) else {
                continue;
            };
            let spawner = image.get(&call.pid).cloned();
            image.insert(call.pid, path.clone());
            execs.push(Exec {
                pid: call.pid,
                path,
                argv,
                spawner,
            });
        } else if ["clone(", "clone3(", "fork(", "vfork("]
            .iter()
            .any(|p| call.text.starts_with(p))
        {
            let child = result
                .split_whitespace()
                .next()
                .and_then(|r| r.parse::<u32>().ok());
            if let (Some(child), Some(parent)) = (child, image.get(&call.pid).cloned()) {
                image.insert(child, parent);
            }
        }
    }
    execs
}

/// `"path", ["arg", …], …` → the path and the argv.
fn execve_args(text: &str) -> Option<(String, Vec<String>)> {
    let (path, rest) = c_string(text)?;
    let mut rest = rest.strip_prefix(", [")?;
    let mut argv = Vec::new();
    loop {
        rest = rest.trim_start_matches([',', ' ']);
        if rest.starts_with(']') || rest.starts_with("...") {
            break;
        }
        let (arg, after) = c_string(rest)?;
        argv.push(arg);
        // A string strace cut short ends in `"...`.
        rest = after.strip_prefix("...").unwrap_or(after);
    }
    Some((path, argv))
}

/// One C string as strace prints it (`"…"` with `\n`, `\"`, `\\`, `\x41`,
/// `\101` escapes) and what follows it.
fn c_string(text: &str) -> Option<(String, &str)> {
    let body = text.strip_prefix('"')?;
    let bytes = body.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'"' => return Some((String::from_utf8_lossy(&out).into_owned(), &body[i + 1..])),
            b'\\' if i + 1 < bytes.len() => {
                let (byte, used) = escape(&bytes[i + 1..]);
                out.push(byte);
                i += 1 + used;
            }
            b => {
                out.push(b);
                i += 1;
            }
        }
    }
    None
}

/// The byte an escape stands for and how many bytes after the backslash it
/// used.
fn escape(after: &[u8]) -> (u8, usize) {
    let digits = |radix: u32, max: usize, from: usize| {
        let mut value: u32 = 0;
        let mut used = 0;
        while used < max {
            match after
                .get(from + used)
                .and_then(|b| (*b as char).to_digit(radix))
            {
                Some(d) => value = value * radix + d,
                None => break,
            }
            used += 1;
        }
        (value as u8, used)
    };
    match after[0] {
        b'n' => (b'\n', 1),
        b't' => (b'\t', 1),
        b'r' => (b'\r', 1),
        b'v' => (0x0b, 1),
        b'f' => (0x0c, 1),
        b'a' => (0x07, 1),
        b'b' => (0x08, 1),
        b'e' => (0x1b, 1),
        b'x' => {
            let (value, used) = digits(16, 2, 1);
            (value, 1 + used)
        }
        b'0'..=b'7' => digits(8, 3, 0),
        other => (other, 1),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TRACE: &str = r#"5     execve("/usr/bin/bash", ["bash", "-c", "--", "env rm -rf ~/x; echo $(ls) | cat"], 0x7ffe107cd2d0 /* 3 vars */) = 0
5     clone(child_stack=NULL, flags=CLONE_CHILD_CLEARTID|CLONE_CHILD_SETTID|SIGCHLD, child_tidptr=0x7fd832bc9a10) = 6
6     execve("/usr/bin/env", ["env", "rm", "-rf", "/root/x"], 0x55ecc8b5b670 /* 5 vars */) = 0
6     execve("/usr/bin/rm", ["rm", "-rf", "/root/x"], 0x7ffe78d61400 /* 5 vars */) = 0
5     clone(child_stack=NULL, flags=CLONE_CHILD_CLEARTID|CLONE_CHILD_SETTID|SIGCHLD <unfinished ...>
7     execve("/usr/bin/cat", ["cat"], 0x55ecc8b5b670 /* 5 vars */ <unfinished ...>
5     <... clone resumed>, child_tidptr=0x7fd832bc9a10) = 7
7     <... execve resumed>)             = 0
7     execve("/usr/bin/nope", ["nope"], 0x55 /* 5 vars */) = -1 ENOENT (No such file or directory)
7     clone3({flags=CLONE_VM|CLONE_THREAD, child_tid=0x7f5, stack_size=0x7ffd80} => {parent_tid=[8]}, 88) = 8
8     execve("/usr/bin/x\"y", ["a\\b", "\342\200\213", "\x41", "long"...], 0x1 /* 1 var */) = 0
"#;

    #[test]
    fn each_start_names_the_program_that_started_it() {
        let execs = parse_trace(TRACE);
        let seen: Vec<(&str, Option<&str>)> = execs
            .iter()
            .map(|e| (e.program(), e.spawner_program()))
            .collect();
        assert_eq!(
            seen,
            [
                ("bash", None),
                ("env", Some("bash")),
                ("rm", Some("env")),
                ("cat", Some("bash")),
                ("x\"y", Some("cat")),
            ]
        );
        assert_eq!(execs[2].argv, ["rm", "-rf", "/root/x"]);
        assert_eq!(execs[4].argv, ["a\\b", "\u{200b}", "A", "long"]);
    }

    #[test]
    fn a_failed_start_and_a_broken_line_are_not_starts() {
        assert!(
            parse_trace("9 execve(\"/x\", [\"x\"], 0x1) = -1 ENOENT (No such file)\n").is_empty()
        );
        assert!(parse_trace("garbage\n9 execve(\"/x\n9 <... execve resumed>) = 0\n").is_empty());
    }
}
