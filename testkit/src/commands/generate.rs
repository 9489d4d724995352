//! A deterministic generator of bash strings that combine the corpus's
//! classes: a program (`rm`, `curl`, `ls`, `git`, `cat`, …) with harmless
//! arguments, wrapped in 0–3 layers — quoting and path forms of the program
//! word, wrappers with options, `bash -c`/`sh -c` in three quotings,
//! `eval`, command and process substitution, backticks, compound
//! statements, pipelines and lists, assignments, here-strings and
//! here-documents, line continuations, comments. Each layer keeps the
//! string something a real bash runs (and the program starts inside the
//! oracle's sandbox), so the oracle's trace has something to show.

/// One generated string.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Generated {
    pub text: String,
    /// The base name of the innermost program.
    pub program: &'static str,
    /// The layers applied, innermost first.
    pub layers: Vec<&'static str>,
}

/// The innermost simple commands: each starts fast and does no harm in the
/// sandbox (writes go to its empty `/tmp` and home; there is no network).
/// All but `echo` are programs, so the oracle sees them start; `echo` is
/// there for the builtins, which it cannot see.
const PROGRAMS: &[(&str, &str)] = &[
    ("rm", "-f /tmp/x"),
    ("rm", "-rf ~/x"),
    ("curl", "-s http://example.com/x"),
    ("ls", "-la /tmp"),
    ("git", "status"),
    ("cat", "/dev/null"),
    ("echo", "hi"),
    ("id", "-u"),
    ("seq", "1"),
    ("basename", "/tmp/x"),
    ("mkdir", "-p /tmp/d"),
    ("sort", "/dev/null"),
    ("wc", "-l /dev/null"),
    ("touch", "/tmp/y"),
    ("date", "+%s"),
    ("uname", "-a"),
    ("sleep", "0"),
    ("head", "-c0 /dev/null"),
];

/// Wrappers of a simple command, with their options (`{}` is the command).
const WRAPPERS: &[&str] = &[
    "env {}",
    "env -i {}",
    "env X=1 {}",
    "env -u HOME {}",
    "env -- {}",
    "command {}",
    "nice {}",
    "nice -n 5 {}",
    "nohup {}",
    "timeout 5 {}",
    "timeout -s KILL 5 {}",
    "timeout -k 1 5s {}",
    "stdbuf -oL {}",
    "stdbuf -i 0 -e L {}",
    "setsid {}",
    "setsid -w {}",
    "ionice -c 3 {}",
    "chrt -o 0 {}",
    "taskset 0x1 {}",
    "flock /tmp/l {}",
    "flock -x /tmp/l {}",
    "unshare {}",
    "setpriv --no-new-privs {}",
    "(exec {})",
    "(exec -a x {})",
    "time {}",
    "time -p {}",
    "xargs {} < /dev/null",
    "xargs -r -n 1 {} <<< a",
    "find /tmp -maxdepth 0 -exec {} \\;",
    "find /tmp -maxdepth 0 -exec {} +",
    "/usr/bin/env {}",
    "nohup nice -n 1 {}",
];

/// Layers that take any bash text (`{}`), compound or not.
const ANY: &[(&str, &str)] = &[
    ("if", "if true; then {}; fi"),
    ("if_else", "if false; then :; else {}; fi"),
    ("for", "for i in 1; do {}; done"),
    ("while", "while true; do {}; break; done"),
    ("until", "until false; do {}; break; done"),
    ("case", "case x in x) {};; esac"),
    ("brace_group", "{ {}; }"),
    ("subshell", "({})"),
    ("and", "true && {}"),
    ("or", "false || {}"),
    ("not", "! {}"),
    ("function", "f() { {}; }; f"),
    ("pipe_in", "echo a | {}"),
    ("pipe_out", "{} | cat"),
    ("list_after", "true; {}"),
    ("list_before", "{}; true"),
    ("background", "{} & wait"),
    ("assignment_statement", "X=1; {}"),
    ("export", "export X=1; {}"),
    ("substitution", "echo $({})"),
    ("quoted_substitution", ": \"$({})\""),
    ("assignment_substitution", "x=$({}); :"),
    ("default_substitution", "echo ${x:-$({})}"),
    ("process_substitution", "cat <({})"),
    ("case_head", "case $({}) in *) ;; esac"),
    ("redirect_target", ": > \"$({}; echo /dev/null)\""),
    ("herestring_substitution", "cat <<< \"$({})\""),
    ("continuation_before", "true && \\\n{}"),
    ("continuation_after", "{} \\\n; true"),
    ("comment_before", "# note\n{}"),
    ("comment_after", "{ {} # note\n}"),
    ("newline_list", "true\n{}"),
];

/// A small deterministic generator (SplitMix64).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }
}

/// The text being built and what may still be done to it.
struct Build {
    text: String,
    /// One simple command with its program word first, plain: the program
    /// word may still be spelled another way, a wrapper or an assignment
    /// may still go in front.
    simple: bool,
    /// The program word at the start is exactly the program's name.
    plain_program: bool,
}

/// `count` strings from `seed`: the same seed gives the same strings.
pub fn generate(seed: u64, count: usize) -> Vec<Generated> {
    let mut rng = Rng(seed);
    (0..count).map(|_| one(&mut rng)).collect()
}

fn one(rng: &mut Rng) -> Generated {
    let (program, args) = *rng.pick(PROGRAMS);
    let mut build = Build {
        text: if args.is_empty() {
            program.to_owned()
        } else {
            format!("{program} {args}")
        },
        simple: true,
        plain_program: true,
    };
    let mut layers = Vec::new();
    for _ in 0..rng.below(4) {
        layers.push(layer(rng, &mut build, program));
    }
    Generated {
        text: build.text,
        program,
        layers,
    }
}

/// Applies one layer that fits the text, and names it.
fn layer(rng: &mut Rng, build: &mut Build, program: &str) -> &'static str {
    loop {
        match rng.below(10) {
            0 | 1 if build.simple && build.plain_program => {
                let rest = build.text[program.len()..].to_owned();
                let (name, word) = spell(rng, program);
                build.text = format!("{word}{rest}");
                build.plain_program = false;
                return name;
            }
            2 | 3 if build.simple => {
                let wrapper = *rng.pick(WRAPPERS);
                build.text = wrapper.replace("{}", &build.text);
                build.plain_program = false;
                // A wrapped command is still one simple command another
                // wrapper can take, unless the form added syntax around it
                // or is bash's `time`, a keyword only at a command's start.
                build.simple = !wrapper.contains(['(', '<', ';']) && !wrapper.starts_with("time");
                return "wrapper";
            }
            4 if build.simple => {
                let prefix = *rng.pick(&["X=1 ", "A=1 B='a b' ", "LC_ALL=C ", "IFS= "]);
                build.text = format!("{prefix}{}", build.text);
                // A wrapper in front would take the assignment for its
                // program.
                build.simple = false;
                build.plain_program = false;
                return "assignment";
            }
            5 => {
                let (name, text) = shell_string(rng, &build.text);
                build.text = text;
                build.simple = true;
                build.plain_program = false;
                return name;
            }
            6 if !build.text.contains('\\') && !build.text.contains('`') => {
                let form = *rng.pick(&["echo `{}`", ": \"`{}`\""]);
                build.text = form.replace("{}", &build.text);
                build.simple = true;
                build.plain_program = false;
                return "backticks";
            }
            // Each here-document sits in a brace group, so the line after its
            // delimiter can take whatever a later layer appends.
            7 if !build.text.contains('\\') && !build.text.lines().any(|l| l == "EOF") => {
                let (name, form) = *rng.pick(&[
                    ("heredoc_to_shell", "{ bash <<'EOF'\n{}\nEOF\n}"),
                    ("heredoc_substitution", "{ cat <<EOF\n$({})\nEOF\n}"),
                    ("herestring_to_shell", "sh <<< '{}'"),
                ]);
                if name == "herestring_to_shell" && build.text.contains('\'') {
                    continue;
                }
                build.text = form.replace("{}", &build.text);
                build.simple = false;
                build.plain_program = false;
                return name;
            }
            8 | 9 => {
                let (name, form) = *rng.pick(ANY);
                build.text = form.replace("{}", &build.text);
                build.simple = false;
                build.plain_program = false;
                return name;
            }
            _ => {}
        }
    }
}

/// The program word spelled another way that bash reduces to the same file.
fn spell(rng: &mut Rng, program: &str) -> (&'static str, String) {
    let (first, rest) = program.split_at(1);
    match rng.below(10) {
        0 => ("single_quotes", format!("'{program}'")),
        1 => ("double_quotes", format!("\"{program}\"")),
        2 => ("empty_quotes", format!("{first}''{rest}")),
        3 => ("backslash", format!("\\{program}")),
        4 => ("ansi_c", format!("$'\\x{:02x}{rest}'", first.as_bytes()[0])),
        5 => (
            "ansi_c_octal",
            format!("$'\\{:03o}'{rest}", first.as_bytes()[0]),
        ),
        6 => ("absolute_path", format!("/usr/bin/{program}")),
        7 => ("relative_path", format!("../../usr/bin/{program}")),
        8 => ("dotted_path", format!("/usr/bin/../bin/./{program}")),
        _ => ("continuation", format!("{first}\\\n{rest}")),
    }
}

/// `text` as the string of a shell's `-c`, of `eval`, or of `env -S`,
/// quoted so that bash hands over exactly `text`.
fn shell_string(rng: &mut Rng, text: &str) -> (&'static str, String) {
    let single = format!("'{}'", text.replace('\'', r"'\''"));
    let double = format!(
        "\"{}\"",
        text.replace('\\', r"\\")
            .replace('"', "\\\"")
            .replace('$', "\\$")
            .replace('`', "\\`")
    );
    let ansi = format!(
        "$'{}'",
        text.replace('\\', r"\\")
            .replace('\'', r"\'")
            .replace('\n', r"\n")
    );
    match rng.below(9) {
        0 => ("bash_c", format!("bash -c {single}")),
        1 => ("sh_c", format!("sh -c {double}")),
        2 => ("bash_lc", format!("bash -lc {ansi}")),
        3 => ("dash_ec", format!("dash -ec {single}")),
        4 => ("bash_o_c", format!("bash -o pipefail -c {double}")),
        5 => ("eval", format!("eval {single}")),
        6 => ("eval_double", format!("eval {double}")),
        7 => ("nested_sh_c", format!("sh -c {single} sh")),
        _ => ("timeout_bash_c", format!("timeout 5 bash -c {single}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_seed_gives_the_same_strings() {
        assert_eq!(generate(7, 200), generate(7, 200));
        assert_ne!(generate(7, 200), generate(8, 200));
    }

    #[test]
    fn strings_combine_layers_of_every_kind() {
        let all = generate(25, 3000);
        let mut kinds = std::collections::BTreeSet::new();
        for g in &all {
            assert!(g.layers.len() <= 3, "{g:?}");
            kinds.extend(g.layers.iter().copied());
        }
        for kind in [
            "wrapper",
            "assignment",
            "bash_c",
            "sh_c",
            "eval",
            "backticks",
            "substitution",
            "process_substitution",
            "heredoc_to_shell",
            "herestring_to_shell",
            "continuation_before",
            "comment_after",
            "single_quotes",
            "ansi_c",
            "absolute_path",
        ] {
            assert!(kinds.contains(kind), "no {kind} in {kinds:?}");
        }
        assert!(all.iter().filter(|g| g.layers.len() == 3).count() > 500);
    }
}
