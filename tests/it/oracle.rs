//! The real-bash oracle of contract §25: every string of the command corpus
//! (`tests/fixtures/commands`) and 2,000 generated ones run under a real
//! bash in a sandbox (bubblewrap and strace,
//! `approval_gate_testkit::commands`), and the command model
//! (`approval_gate::read`) must have known every program that started.
//!
//! - `rule_25_3_every_program_bash_starts_is_one_the_model_can_run`
//!   (soundness): each program that really started is in the model's "can
//!   run" set — the base names of its commands' program words, speculative
//!   ones included — or the model called the value opaque. Two kinds of
//!   start are not the value's and are not counted: a program's own helpers
//!   ([`HELPERS`]: man's groff, git's `git-*`) and the `/bin/sh` through
//!   which a program runs a string it was given ([`SHELL_RUNNERS`]: `flock
//!   -c`, git's aliases and ssh command, `ssh -o ProxyCommand`); what those
//!   start is counted like anything else.
//! - `rule_25_6_corpus_deny_outcomes_agree_with_bash`: a case expected to
//!   continue under its deny rule never starts its target in any reading; a
//!   case expected to be denied that the model does not call opaque starts
//!   it, unless the case says why bash cannot show it (`oracle_blind`) or
//!   names a program this machine lacks.
//!
//! Both tests share one set of runs (about 3,700 sandboxes, four at a time:
//! a run mostly waits on the kernel making and tearing down its
//! namespaces, so more at a time than cores still shortens the whole; each
//! within 5 s). They live in the integration binary rather than a test
//! file of their own because another test target would link the worker once
//! more for nothing: the oracle needs no process of its own (the counted
//! test of `shell::parses`, which does, is `tests/parses.rs`). Where
//! bubblewrap cannot make its namespaces, or bwrap or strace is missing,
//! each test prints one `SKIP` line.

use std::collections::{BTreeMap, HashSet};
use std::path::Path;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use approval_gate::{base_name, read, Limits, Model, Source};
use approval_gate_testkit::commands::{
    self, generate, Case, Exec, Generated, Outcome, Reading, Sandbox, Trace,
};

/// The corpus folder.
pub const CORPUS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/commands");
/// The generator's seed and how many strings it makes.
const SEED: u64 = 25;
const GENERATED: usize = 2_000;
/// Sandboxes at a time.
const PARALLEL: usize = 4;
/// Disagreements printed in full.
const SHOWN: usize = 20;

/// Programs that start helpers of their own that no command names:
/// `(program, helpers, why)`; a helper ending in `*` is a prefix.
const HELPERS: &[(&str, &[&str], &str)] = &[
    (
        "man",
        &[
            "col", "nroff", "preconv", "tbl", "groff", "troff", "grotty", "eqn", "pic", "zsoelim",
            "manconv", "iconv", "locale", "less", "pager",
        ],
        "man formats a page with groff's programs",
    ),
    ("nroff", &["groff", "locale"], "nroff is groff's front end"),
    (
        "groff",
        &["grotty", "troff", "tbl", "eqn", "pic", "preconv", "soelim"],
        "groff runs its pipeline",
    ),
    ("git", &["git", "git-*"], "git runs its own commands"),
    (
        "git-bisect",
        &[
            "basename", "envsubst", "gettext", "git", "sed", "uname", "cat", "tr",
        ],
        "git bisect is one of git's shell scripts",
    ),
    (
        "apt-cache",
        &["dpkg"],
        "apt-cache asks dpkg for the architecture",
    ),
    (
        "xdg-open",
        &[
            "egrep",
            "grep",
            "uname",
            "xprop",
            "dbus-send",
            "sed",
            "which",
            "xdg-mime",
            "cut",
            "tr",
            "head",
        ],
        "xdg-open is a shell script that looks for a desktop",
    ),
    ("egrep", &["grep"], "egrep runs grep -E"),
    ("npm", &["node"], "npm is a node script"),
];

/// Programs that run a string they were given (an option's value, a
/// configuration key, an interpreter's code) through `/bin/sh -c`.
const SHELL_RUNNERS: &[&str] = &[
    "flock", "watch", "script", "su", "runuser", "sudo", "parallel", "ssh", "git", "sed", "awk",
    "mawk", "gawk", "python3", "perl", "node", "less", "xdg-open", "tar", "man", "rsync",
];
const SHELLS: &[&str] = &["sh", "bash", "dash"];

/// Where a reading came from.
#[derive(Debug, Clone, Copy)]
enum Origin {
    Case(usize),
    Generated(usize),
}

/// One reading, run and read.
struct Run {
    origin: Origin,
    reading: Reading,
    trace: Trace,
    model: Model,
}

struct Runs {
    cases: Vec<Case>,
    generated: Vec<Generated>,
    runs: Vec<Run>,
    took: Duration,
}

/// The model's reading: the limits of §25.5, with time enough that a
/// loaded test machine never turns a reading opaque (the speed is the
/// benches' to prove; a reading past the 10 ms budget under the parallel
/// suites would otherwise be denied as opaque).
pub fn model_of(reading: &Reading) -> Model {
    let limits = Limits {
        budget: Duration::from_secs(2),
        ..Limits::default()
    };
    match reading {
        Reading::Bash(text) => read(Source::Bash(text), &limits),
        Reading::Argv(argv) => read(Source::Argv(argv), &limits),
        Reading::Words(text) => read(Source::Words(text), &limits),
    }
}

/// Every run, made once for both tests; the reason when the sandbox
/// cannot run here.
fn runs() -> Result<&'static Runs, &'static str> {
    static RUNS: OnceLock<Result<Runs, String>> = OnceLock::new();
    RUNS.get_or_init(|| {
        let sandbox = Sandbox::detect().map_err(|e| e.0)?;
        let cases = commands::load(Path::new(CORPUS)).map_err(|e| e.to_string())?;
        let generated = generate(SEED, GENERATED);
        let mut origins = Vec::new();
        let mut readings = Vec::new();
        for (i, case) in cases.iter().enumerate() {
            for reading in case.readings() {
                origins.push(Origin::Case(i));
                readings.push(reading);
            }
        }
        for (i, g) in generated.iter().enumerate() {
            origins.push(Origin::Generated(i));
            readings.push(Reading::Bash(g.text.clone()));
        }
        let started = Instant::now();
        let traces = sandbox.run_all(&readings, PARALLEL);
        let took = started.elapsed();
        let runs = origins
            .into_iter()
            .zip(readings)
            .zip(traces)
            .map(|((origin, reading), trace)| Run {
                origin,
                model: model_of(&reading),
                reading,
                trace,
            })
            .collect();
        Ok(Runs {
            cases,
            generated,
            runs,
            took,
        })
    })
    .as_ref()
    .map_err(String::as_str)
}

/// The base names of every program word the model says can run.
fn can_run(model: &Model) -> HashSet<&str> {
    model
        .commands
        .iter()
        .filter_map(|c| c.words.first())
        .map(|w| base_name(&w.text))
        .collect()
}

/// Why a start is not the value's own, if it is not.
fn not_counted(exec: &Exec) -> Option<&'static str> {
    let spawner = exec.spawner_program()?;
    let program = exec.program();
    if SHELLS.contains(&program) && SHELL_RUNNERS.contains(&spawner) {
        return Some("a program ran its string through /bin/sh");
    }
    HELPERS
        .iter()
        .find(|(who, helpers, _)| {
            *who == spawner
                && helpers.iter().any(|h| match h.strip_suffix('*') {
                    Some(prefix) => program.starts_with(prefix),
                    None => *h == program,
                })
        })
        .map(|(_, _, why)| *why)
}

fn origin_text(runs: &Runs, origin: Origin) -> String {
    match origin {
        Origin::Case(i) => format!("case {}", runs.cases[i].id),
        Origin::Generated(i) => {
            let g = &runs.generated[i];
            format!("generated #{i} ({} in {:?})", g.program, g.layers)
        }
    }
}

fn describe_model(model: &Model) -> String {
    let commands: Vec<String> = model
        .commands
        .iter()
        .map(|c| {
            let words: Vec<&str> = c.words.iter().map(|w| w.text.as_str()).collect();
            let via: Vec<String> = c.via.iter().map(ToString::to_string).collect();
            format!(
                "{:?}{}{}",
                words,
                if c.speculative { " (speculative)" } else { "" },
                if via.is_empty() {
                    String::new()
                } else {
                    format!(" {}", via.join(", "))
                }
            )
        })
        .collect();
    format!(
        "commands [{}], opaque: {:?}",
        commands.join("; "),
        model.why()
    )
}

#[test]
fn rule_25_3_every_program_bash_starts_is_one_the_model_can_run() {
    let runs = match runs() {
        Ok(runs) => runs,
        Err(why) => {
            println!("SKIP rule_25_3 oracle: {why}");
            return;
        }
    };
    let mut disagreements = Vec::new();
    let (mut ran, mut opaque, mut timed_out, mut not_counted_starts) = (0, 0, 0, 0);
    let mut errors = Vec::new();
    for run in &runs.runs {
        if let Some(error) = &run.trace.error {
            errors.push(format!("{}: {error}", run.reading.describe()));
            continue;
        }
        timed_out += usize::from(run.trace.timed_out);
        let started: Vec<&Exec> = run.trace.ran(&run.reading).collect();
        ran += usize::from(!started.is_empty());
        if run.model.is_opaque() {
            opaque += 1;
            continue;
        }
        let known = can_run(&run.model);
        for exec in started {
            if known.contains(exec.program()) {
                continue;
            }
            if not_counted(exec).is_some() {
                not_counted_starts += 1;
                continue;
            }
            disagreements.push(format!(
                "{}\n    reading: {}\n    bash started {} ({:?}), started by {}\n    model: {}",
                origin_text(runs, run.origin),
                run.reading.describe(),
                exec.program(),
                exec.argv,
                exec.spawner_program().unwrap_or("the sandbox"),
                describe_model(&run.model),
            ));
        }
    }
    let case_readings = runs
        .runs
        .iter()
        .filter(|r| matches!(r.origin, Origin::Case(_)))
        .count();
    println!(
        "oracle: {} cases ({case_readings} readings), {} generated strings; {} runs in {:.0?}: \
         {ran} started a program, {opaque} opaque, {timed_out} timed out, {} starts not the \
         value's own; disagreements: {}",
        runs.cases.len(),
        runs.generated.len(),
        runs.runs.len(),
        runs.took,
        not_counted_starts,
        disagreements.len()
    );
    for d in disagreements.iter().take(SHOWN) {
        println!("DISAGREEMENT {d}");
    }
    assert!(
        errors.is_empty(),
        "runs that could not be made: {errors:#?}"
    );
    assert!(
        disagreements.is_empty(),
        "{} programs bash started are not in the model (first {SHOWN} above)",
        disagreements.len()
    );
    assert!(
        ran > runs.runs.len() / 2,
        "too few runs started anything: the sandbox is broken"
    );
}

/// Whether every program the model names can start on this machine (a case
/// naming one it lacks cannot show its target here).
fn missing_program(model: &Model) -> Option<String> {
    let dirs = ["/usr/bin", "/bin", "/usr/sbin", "/sbin"];
    model.programs().into_iter().find_map(|p| {
        let found = if p.contains('/') {
            Path::new(p).exists()
        } else {
            dirs.iter().any(|d| Path::new(d).join(p).exists())
        };
        (!found).then(|| p.to_owned())
    })
}

#[test]
fn rule_25_6_corpus_deny_outcomes_agree_with_bash() {
    let runs = match runs() {
        Ok(runs) => runs,
        Err(why) => {
            println!("SKIP rule_25_6 oracle: {why}");
            return;
        }
    };
    let mut by_case: BTreeMap<usize, Vec<&Run>> = BTreeMap::new();
    for run in &runs.runs {
        if let Origin::Case(i) = run.origin {
            by_case.entry(i).or_default().push(run);
        }
    }
    let mut disagreements = Vec::new();
    let mut notes = Vec::new();
    let (mut shown_continue, mut shown_deny, mut opaque, mut blind) = (0, 0, 0, 0);
    for (&i, case_runs) in &by_case {
        let case = &runs.cases[i];
        let ran_target = case_runs
            .iter()
            .any(|r| r.trace.ran(&r.reading).any(|e| case.target_ran(e)));
        let any_opaque = case_runs.iter().any(|r| r.model.is_opaque());
        match case.expect.deny {
            Outcome::Continue if ran_target => disagreements.push(format!(
                "{}: expected to continue under a deny rule on {:?}, but bash started it: {}",
                case.id, case.target, case.arguments
            )),
            Outcome::Continue => shown_continue += 1,
            _ if ran_target => {
                shown_deny += 1;
                if let Some(why) = &case.oracle_blind {
                    notes.push(format!("{}: bash started {} although the case says: {why}", case.id, case.target));
                }
            }
            _ if any_opaque => opaque += 1,
            _ if case.oracle_blind.is_some() => blind += 1,
            _ => match case_runs.iter().find_map(|r| missing_program(&r.model)) {
                Some(program) => {
                    blind += 1;
                    notes.push(format!("{}: {program} is not installed here", case.id));
                }
                None => disagreements.push(format!(
                    "{}: expected to be denied and the model calls it known, but bash never started {:?}: {}\n    model: {}",
                    case.id,
                    case.target,
                    case.arguments,
                    case_runs
                        .iter()
                        .map(|r| describe_model(&r.model))
                        .collect::<Vec<_>>()
                        .join(" | ")
                )),
            },
        }
    }
    println!(
        "oracle vs corpus: {} cases with a string to run ({} without); continue shown: \
         {shown_continue}; deny shown: {shown_deny}; deny by opaque: {opaque}; deny bash cannot \
         show here: {blind}; disagreements: {}",
        by_case.len(),
        runs.cases.len() - by_case.len(),
        disagreements.len()
    );
    for note in &notes {
        println!("note: {note}");
    }
    for d in disagreements.iter().take(SHOWN) {
        println!("DISAGREEMENT {d}");
    }
    assert!(
        disagreements.is_empty(),
        "{} corpus outcomes disagree with what bash runs (first {SHOWN} above)",
        disagreements.len()
    );
    assert!(
        shown_continue > 300 && shown_deny > 250,
        "the oracle showed too little"
    );
}
