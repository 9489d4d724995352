//! The command model's unit tests, named after the rules of contract §25
//! they check.

use super::*;

/// The default limits with a generous time budget: unoptimised test builds
/// on a shared machine measure the reading, not the clock. The budget has
/// its own test.
fn limits() -> Limits {
    Limits {
        budget: std::time::Duration::from_secs(2),
        ..Limits::default()
    }
}

fn bash(text: &str) -> Model {
    read(Source::Bash(text), &limits())
}

fn argv(words: &[&str]) -> Model {
    let words: Vec<String> = words.iter().map(|w| w.to_string()).collect();
    read(Source::Argv(&words), &limits())
}

fn words(text: &str) -> Model {
    read(Source::Words(text), &limits())
}

/// Every program base name the model can run, speculative starts included
/// (what a deny rule sees).
fn all_programs(model: &Model) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for command in &model.commands {
        if let Some(program) = command.words.first() {
            if program.kind == WordKind::Literal {
                let name = base_name(&program.text).to_string();
                if !out.contains(&name) {
                    out.push(name);
                }
            }
        }
    }
    out
}

/// A deny rule on `program` is consulted: it matches, or the value is
/// opaque.
fn caught(model: &Model, program: &str) -> bool {
    model.is_opaque() || all_programs(model).iter().any(|p| p == program)
}

/// The soundness check against a real bash, on a corpus recorded by
/// running each case under bubblewrap + strace (a JSON array of
/// `{case, ran}`): every program that really ran is in the model, or the
/// model is opaque. Needs `SHELL_ORACLE=<file>`.
#[test]
fn rule_25_3_oracle_corpus_when_given() {
    let Ok(path) = std::env::var("SHELL_ORACLE") else {
        println!("SKIP rule_25_3_oracle_corpus_when_given: SHELL_ORACLE not set");
        return;
    };
    let text = std::fs::read_to_string(path).expect("oracle file");
    let cases: Vec<serde_json::Value> = serde_json::from_str(&text).expect("oracle json");
    let (mut agree, mut opaque, mut missed) = (0, 0, 0);
    // Unoptimised test builds on a shared machine: a generous budget, so
    // that what is measured is the reading, not the clock.
    let limits = Limits {
        budget: std::time::Duration::from_secs(2),
        ..Limits::default()
    };
    for case in &cases {
        let source = case["case"].as_str().unwrap_or("");
        let model = read(Source::Bash(source), &limits);
        let ran: Vec<String> = case["ran"]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|v| v.as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default();
        let found = all_programs(&model);
        let missing: Vec<&String> = ran.iter().filter(|p| !found.contains(p)).collect();
        if model.is_opaque() {
            opaque += 1;
            if std::env::var("SHELL_ORACLE_VERBOSE").is_ok() {
                println!("OPAQUE {source:?}: {:?}", model.why());
            }
        } else if missing.is_empty() {
            agree += 1;
        } else {
            missed += 1;
            println!("MISSED {source:?}: ran {ran:?}, model {found:?}");
        }
    }
    println!(
        "oracle: {} cases, {agree} known, {opaque} opaque, {missed} missed",
        cases.len()
    );
    assert_eq!(missed, 0);
}

fn assert_caught(text: &str, program: &str) {
    let model = bash(text);
    assert!(
        caught(&model, program),
        "{text:?} hides {program}: {:?}",
        all_programs(&model)
    );
}

/// Found as a known command (not merely opaque).
fn assert_found(text: &str, program: &str) {
    let model = bash(text);
    assert!(
        all_programs(&model).iter().any(|p| p == program),
        "{text:?} does not show {program}: {:?}, opaque {:?}",
        all_programs(&model),
        model.why()
    );
}

fn assert_known(text: &str) -> Model {
    let model = bash(text);
    assert!(!model.is_opaque(), "{text:?} is opaque: {:?}", model.why());
    assert!(model.complete);
    model
}

fn assert_opaque(text: &str) -> Model {
    let model = bash(text);
    assert!(
        model.is_opaque(),
        "{text:?} is not opaque: {:?}",
        all_programs(&model)
    );
    model
}

#[test]
fn rule_25_3_quoting_and_paths_reduce_to_the_program() {
    for text in [
        "rm -rf x",
        "'rm' x",
        "\"rm\" x",
        "r''m x",
        "\\rm x",
        "r\"\"m x",
        "$'rm' x",
        "$'\\x72m' x",
        "$'\\162m' x",
        "$'\\u0072m' x",
        "'r'\"m\" x",
        "/bin/rm x",
        "/usr/bin/../bin/rm x",
        "//bin//rm x",
        "../../bin/rm x",
    ] {
        assert_found(text, "rm");
        assert_known(text);
    }
    let model = assert_known("$'\\x72m' -rf x");
    assert_eq!(model.commands[0].words[0].text, "rm");
    assert_eq!(model.programs(), vec!["rm"]);
}

#[test]
fn rule_25_3_every_statement_form_is_read() {
    for text in [
        "(rm x)",
        "{ rm x; }",
        "( (rm x) )",
        "true; rm x",
        "true && rm x",
        "false || rm x",
        "! rm x",
        "time rm x",
        "time -p rm x",
        "true & rm x",
        "echo a | rm x",
        "echo a |& rm x",
        "true\nrm x",
        "{ { rm x; }; }",
        "rm x &",
        "if rm x; then :; fi",
        "if true; then rm x; fi",
        "if false; then :; else rm x; fi",
        "if false; then :; elif rm x; then :; fi",
        "while rm x; do break; done",
        "until rm x; do :; done",
        "for f in a b; do rm $f; done",
        "case x in x) rm x;; esac",
        "case x in (x) rm x;; esac",
        "select s in a; do rm x; break; done",
        "f() { rm x; }; f",
        "function f { rm x; }",
        "function f() ( rm x )",
        "A=1 rm x",
        "A=1 B=2 rm x",
        "echo hi # c\nrm x",
        "cat <<EOF; rm y\nhello\nEOF",
    ] {
        assert_caught(text, "rm");
    }
    for text in [
        "(rm x)",
        "{ rm x; }",
        "true && rm x",
        "! rm x",
        "if true; then rm x; fi",
        "A=1 rm x",
        "f() { rm x; }",
    ] {
        assert_found(text, "rm");
    }
}

#[test]
fn rule_25_3_substitutions_in_every_word_context() {
    for text in [
        "echo $(rm x)",
        "echo `rm x`",
        "echo \"$(rm x)\"",
        "echo \"`rm x`\"",
        "echo ${x:-$(rm x)}",
        "echo ${x:=`rm x`}",
        "echo ${x/a/$(rm x)}",
        "echo $(echo $(rm x))",
        "echo $( (rm x) )",
        "echo \"a $(echo \"$(rm x)\") b\"",
        "cat <(rm x)",
        "tee >(rm x)",
        "echo > $(rm x)",
        "cat < `rm x`",
        "a[$(rm x)]=1",
        "echo ${a[$(rm x)]}",
        "cat <<< $(rm x)",
        "cat <<< \"$(rm x)\"",
        "A=$(rm x)",
        "A=`rm x` true",
        "export A=$(rm x)",
        "local a=$(rm x)",
        "declare a=$(rm x)",
        "A+=(x $(rm y))",
        "for f in $(rm x); do :; done",
        "case $(rm x) in *) :;; esac",
        "[[ $(rm x) ]]",
        "echo $(( $(rm x) + 1 ))",
        "echo `echo \\`rm x\\``",
        "x=$(cat <<EOF\n$(rm x)\nEOF\n)",
        "cat <<EOF\n$(rm x)\nEOF",
        "cat <<-EOF\n\t`rm x`\n\tEOF",
        "echo $(case x in x) rm x;; esac)",
    ] {
        assert_caught(text, "rm");
    }
    let model = assert_known("echo $(rm x)");
    let rm = model
        .commands
        .iter()
        .find(|c| c.words[0].text == "rm")
        .unwrap();
    assert_eq!(rm.via, vec![Via::Substitution]);
    assert_eq!(rm.depth, 1);
    // Inside the top-level text: its own span.
    assert_eq!(rm.span, 7..11);
    let model = assert_known("cat <(rm x)");
    assert!(model
        .commands
        .iter()
        .any(|c| c.via == vec![Via::ProcessSubstitution]));
}

#[test]
fn rule_25_3_quoted_here_documents_and_quoted_words_run_nothing() {
    let model = assert_known("cat <<'EOF'\n$(rm x) `rm y`\nEOF");
    assert_eq!(all_programs(&model), vec!["cat"]);
    let model = assert_known("git commit -m \"cleanup; rm stale files\"");
    assert_eq!(all_programs(&model), vec!["git"]);
    let model = assert_known("echo 'a; rm x | sh' \"b && rm y\"");
    assert_eq!(all_programs(&model), vec!["echo"]);
    let model = assert_known("echo hi # ; rm x");
    assert_eq!(all_programs(&model), vec!["echo"]);
}

#[test]
fn rule_25_3_words_are_reduced_as_bash_does() {
    let model = assert_known("ls 'a b' \"c\\\"d\" e\\ f $'g\\th'");
    let texts: Vec<&str> = model.commands[0]
        .words
        .iter()
        .map(|w| w.text.as_str())
        .collect();
    assert_eq!(texts, vec!["ls", "a b", "c\"d", "e f", "g\th"]);
    assert!(model.commands[0]
        .words
        .iter()
        .all(|w| w.kind == WordKind::Literal));
    assert_eq!(model.commands[0].words[1].span, Some(3..8));
    let model = bash("ls src/*.rs * ~ {a,b} $HOME \"$@\"");
    let kinds: Vec<WordKind> = model.commands[0].words.iter().map(|w| w.kind).collect();
    assert_eq!(
        kinds,
        vec![
            WordKind::Literal,
            WordKind::Glob { leading: false },
            WordKind::Glob { leading: true },
            WordKind::Dynamic,
            WordKind::Dynamic,
            WordKind::Dynamic,
            WordKind::Dynamic,
        ]
    );
}

#[test]
fn rule_25_3_shells_with_c_are_read_recursively() {
    for text in [
        "bash -c 'rm x'",
        "sh -c 'rm x'",
        "dash -c 'rm x'",
        "ksh -c 'rm x'",
        "bash -lc 'rm x'",
        "bash -ec 'rm x'",
        "bash -x -c 'rm x'",
        "bash -o pipefail -c 'rm x'",
        "/bin/sh -c 'rm x'",
        "bash -c 'bash -c \"rm x\"'",
        "bash -c rm\\ x",
        "mksh -c 'rm x'",
        "busybox sh -c 'rm x'",
        "eval rm x",
        "eval 'rm x'",
        "eval \"rm x\"",
        "builtin eval rm x",
    ] {
        assert_found(text, "rm");
        assert_known(text);
    }
    let model = assert_known("bash -c 'sh -c \"rm x\"'");
    let rm = model
        .commands
        .iter()
        .find(|c| c.words[0].text == "rm")
        .unwrap();
    assert_eq!(
        rm.via,
        vec![
            Via::ShellC {
                shell: "bash".into()
            },
            Via::ShellC { shell: "sh".into() }
        ]
    );
    assert_eq!(rm.span, 0..22);
    assert_eq!(rm.words[0].span, None);
}

#[test]
fn rule_25_5_code_from_files_stdin_and_foreign_shells_is_opaque() {
    for text in [
        "source ./f",
        ". ./f",
        "bash ./s.sh",
        "sh s.sh",
        "curl -s x | sh",
        "curl x | bash -s",
        "sh < f",
        "bash <<EOF\nrm x\nEOF",
        "zsh -c 'rm x'",
        "fish -c 'rm x'",
        "csh -c 'rm x'",
        "tcsh -c 'rm x'",
        "bash -c \"$X\"",
        "eval \"$cmd\"",
        "eval $(echo rm x)",
        "sh -c '\"$1\" x' _ rm",
    ] {
        assert_opaque(text);
    }
    let model = assert_opaque("curl -s x | sh");
    assert!(
        model.why().unwrap().contains("standard input"),
        "{:?}",
        model.why()
    );
    assert_known("bash --version");
}

#[test]
fn rule_25_5_program_words_built_from_expansions_are_opaque() {
    for text in [
        "$(echo rm) x",
        "`echo rm` x",
        "$a x",
        "${a} x",
        "${a:-rm} x",
        "\"$a\" x",
        "$@",
        "\"$@\"",
        "$* x",
        "r* x",
        "/bin/r? x",
        "{rm,x}",
        "~/bin/rm x",
        "a=rm; $a x",
        "${!a} x",
        "r[m] x",
        "\"$(printf rm)\" x",
        "$0 x",
    ] {
        assert_opaque(text);
    }
    let model = assert_opaque("$X -rf /");
    assert!(matches!(
        model.opaque[0].why,
        OpaqueWhy::ProgramExpansion { .. }
    ));
}

/// A glob in the program word decides by the files present what runs: it
/// is opaque in every form the grammar splits or quotes, and a word whose
/// glob characters are all quoted or escaped stays plain text.
#[test]
fn rule_25_5_a_glob_program_word_is_opaque_whatever_its_form() {
    for text in [
        "/usr/bin/r[m] -rf x",
        "/bin/rm* x",
        "r? x",
        "\"r\"[m] x",
        "'r'[m] x",
        "r[m]'' x",
        "/usr/bin/[r]m x",
        "r[[:alpha:]] x",
        "r[!x] x",
        "r{m,} x",
        "r{m,x} x",
        "sudo /usr/bin/r[m] -f x",
        "env A=1 /usr/bin/r[m] x",
        "x=1 /usr/bin/r[m] x",
        "echo a; /usr/bin/r[m] x",
        "$(/usr/bin/r[m] x)",
        "bash -c '/usr/bin/r[m] x'",
    ] {
        let model = assert_opaque(text);
        assert!(
            model.opaque.iter().any(|o| matches!(
                o.why,
                OpaqueWhy::ProgramGlob { .. }
                    | OpaqueWhy::ProgramExpansion { .. }
                    | OpaqueWhy::Parse
            )),
            "{text:?}: {:?}",
            model.why()
        );
    }
    let model = assert_opaque("/usr/bin/r[m] -rf x");
    assert!(matches!(model.opaque[0].why, OpaqueWhy::ProgramGlob { .. }));
    for text in ["r\\[m] x", "'r[m]' x", "\"r*\" x", "r]m x", "echo {} x"] {
        let model = assert_known(text);
        assert_eq!(
            model.commands[0].words[0].kind,
            WordKind::Literal,
            "{text:?}"
        );
    }
    let model = bash("ls \"a\"[b] 'c'*");
    let kinds: Vec<WordKind> = model.commands[0].words.iter().map(|w| w.kind).collect();
    assert_eq!(
        kinds,
        vec![
            WordKind::Literal,
            WordKind::Glob { leading: false },
            WordKind::Glob { leading: false },
        ]
    );
}

/// Bash removes a backslash-newline before it splits words and an escaped
/// blank belongs to its word: the grammar splits words there, the model
/// joins them back.
#[test]
fn rule_25_3_escapes_and_continuations_between_words_join_as_bash() {
    let texts = |text: &str| -> Vec<String> {
        let model = assert_known(text);
        model.commands[0]
            .words
            .iter()
            .map(|w| w.text.clone())
            .collect()
    };
    assert_eq!(texts("r\\\nm -f x"), ["rm", "-f", "x"]);
    assert_eq!(texts("'r'\\\nm -f x"), ["rm", "-f", "x"]);
    assert_eq!(texts("\"r\"\\\nm x"), ["rm", "x"]);
    assert_eq!(texts("r\\\n\\\nm x"), ["rm", "x"]);
    assert_eq!(texts("rm \\\n-f x"), ["rm", "-f", "x"]);
    assert_eq!(texts("'rm'\\ -f x"), ["rm -f", "x"]);
    assert_eq!(texts("'rm'\\  -f x"), ["rm ", "-f", "x"]);
    assert_eq!(texts("'r'\\m x"), ["rm", "x"]);
    assert_eq!(texts("\"r\"\\m x"), ["rm", "x"]);
    assert_eq!(texts("echo a\\ \\ b"), ["echo", "a  b"]);
    assert_found("echo a; r\\\nm x", "rm");
    assert_found("bash -c 'r\\\nm x'", "rm");
    // Joined across an assignment: not read, so opaque.
    assert_opaque("x=a\\\nb");
    let model = assert_known("'r'\\\nm -f x");
    assert_eq!(model.commands[0].words[0].span, Some(0..6));
}

#[test]
fn rule_25_5_builtins_that_run_code_later_are_opaque() {
    for text in [
        "trap 'rm x' EXIT",
        "alias ls='rm x'",
        "shopt -s expand_aliases",
        "enable -f x.so foo",
        "hash -p /bin/rm ls",
        "mapfile -C 'rm x' -c 1 a < f",
        "complete -C 'rm x' foo",
        "bind -x '\"\\C-a\": rm x'",
        "echo ${x@P}",
        "let x=1",
        "((i++))",
        "echo $((x+1))",
        "echo ${x:$o}",
        "[[ $a -eq 1 ]]",
        "x='a[$(rm y)]'; echo $((x))",
        "declare -i n=x",
        "read 'a[$(rm x)]'",
        "printf -v 'a[$(rm x)]' y",
        "unset 'a[$(rm x)]'",
        "for ((i=0;i<2;i++)); do :; done",
        "echo ${a[i]}",
        "fc -s",
    ] {
        assert_opaque(text);
    }
    for text in [
        "echo $((1+2))",
        "(( 3 > 2 ))",
        "echo ${a[0]} ${a[@]} ${#a[@]}",
        "[[ 3 -eq 3 ]]",
        "[ -f x ] && cat x",
        "trap - EXIT",
        "alias",
        "read -r line",
    ] {
        assert_known(text);
    }
}

#[test]
fn rule_25_5_code_loading_environment_is_opaque_and_command_env_is_read() {
    for text in [
        "LD_PRELOAD=/tmp/x.so ls",
        "BASH_ENV=/tmp/x bash -c true",
        "export PROMPT_COMMAND='rm x'",
        "PS4='$(rm x)' bash -x -c true",
        "LD_LIBRARY_PATH=/tmp ls",
        "NODE_OPTIONS='-r x' node a.js",
        "env LD_PRELOAD=/x.so ls",
        "GIT_SSH_COMMAND=$X git fetch",
    ] {
        assert_opaque(text);
    }
    for text in [
        "GIT_SSH_COMMAND='rm x' git fetch",
        "GIT_EDITOR='rm x' git commit",
        "PAGER='rm x' man ls",
        "env GIT_SSH_COMMAND='rm x' git fetch",
        "export GIT_SSH_COMMAND='rm x'; git fetch",
        "LESSOPEN='|rm x %s' less f",
    ] {
        assert_found(text, "rm");
        assert_known(text);
    }
    let model = assert_known("GIT_SSH_COMMAND='ssh -i k' git fetch");
    let ssh = model
        .commands
        .iter()
        .find(|c| c.words[0].text == "ssh")
        .unwrap();
    assert_eq!(
        ssh.via,
        vec![Via::EnvValue {
            name: "GIT_SSH_COMMAND".into()
        }]
    );
    assert_eq!(model.commands[0].assignments[0].name, "GIT_SSH_COMMAND");
}

#[test]
fn rule_25_4_wrappers_hand_their_command_on() {
    for text in [
        "env rm x",
        "env -i rm x",
        "env -u HOME rm x",
        "env A=1 rm x",
        "env -S 'rm x'",
        "env --split-string='rm x'",
        "env -C /tmp rm x",
        "command rm x",
        "command -p rm x",
        "exec rm x",
        "exec -a foo rm x",
        "nice rm x",
        "nice -n 5 rm x",
        "nice -5 rm x",
        "nohup rm x",
        "timeout 5 rm x",
        "timeout -s KILL 5 rm x",
        "timeout -k 1 5 rm x",
        "stdbuf -o0 rm x",
        "stdbuf -o L rm x",
        "ionice -c 3 rm x",
        "setsid rm x",
        "chrt 10 rm x",
        "chrt -f 10 rm x",
        "taskset 0x1 rm x",
        "taskset -c 0 rm x",
        "flock /tmp/l rm x",
        "flock /tmp/l -c 'rm x'",
        "watch rm x",
        "watch -n 1 rm x",
        "sudo rm x",
        "sudo -u root rm x",
        "sudo -E rm x",
        "sudo -s rm x",
        "sudo -- rm x",
        "doas rm x",
        "doas -u root rm x",
        "su -c 'rm x'",
        "su - root -c 'rm x'",
        "echo x | xargs rm",
        "xargs -I{} rm {}",
        "xargs -n1 rm",
        "xargs -0 -P4 rm",
        "parallel rm ::: a b",
        "strace rm x",
        "strace -f -o /dev/null rm x",
        "ltrace rm x",
        "chroot / rm x",
        "unshare -r rm x",
        "nsenter -t 1 -m rm x",
        "bwrap --ro-bind / / rm x",
        "systemd-run --user rm x",
        "busybox rm x",
        "find . -exec rm {} \\;",
        "find . -execdir rm {} +",
        "find . -ok rm {} \\;",
        "ssh host rm x",
        "ssh -p 22 host 'rm x'",
        "ssh -o ProxyCommand='rm x' host",
        "setpriv rm x",
        "runuser -u u -- rm x",
        "script -c 'rm x' /dev/null",
        "nohup nice env rm x",
        "env env env rm x",
        "time nice rm x",
        "command command rm x",
        "sudo env A=1 nice -n 1 rm x",
        "xargs -a f rm",
        "env -- rm x",
        "timeout --signal=KILL 5s rm x",
        "nice --adjustment=5 rm x",
        "stdbuf --output=0 rm x",
        "unbuffer rm x",
        "faketime '2020-01-01' rm x",
        "firejail rm x",
        "torsocks rm x",
        "proxychains rm x",
        "caffeinate rm x",
        "valgrind rm x",
        "catchsegv rm x",
        "dbus-launch rm x",
        "coproc rm x",
        "sudo -u rm x",
    ] {
        assert_found(text, "rm");
    }
    let model = assert_known("sudo -u root nice -n 5 rm -rf x");
    let rm = model
        .commands
        .iter()
        .find(|c| c.words[0].text == "rm" && !c.speculative)
        .unwrap();
    assert_eq!(
        rm.via,
        vec![
            Via::Wrapper {
                name: "sudo".into()
            },
            Via::Wrapper {
                name: "nice".into()
            }
        ]
    );
    assert_eq!(model.commands[0].wrapper, Some("sudo"));
    assert_eq!(model.programs(), vec!["sudo", "nice", "rm"]);
    // An option the table does not know cannot hide the command.
    let model = bash("sudo --frobnicate value rm x");
    assert!(model
        .commands
        .iter()
        .any(|c| c.words[0].text == "rm" && c.speculative));
    // find's placeholder as the program is the found file.
    assert_opaque("find . -exec {} \\;");
    assert_opaque("xargs -I % % x");
    // Looking a name up runs nothing; the later word is still a
    // speculative start (§25.4), for deny and ask only.
    let model = assert_known("command -v rm");
    assert_eq!(model.programs(), vec!["command"]);
    assert!(model.commands.iter().any(|c| c.speculative));
}

#[test]
fn rule_25_4_argv_and_words_sources_unwrap_alike() {
    for words_ in [
        vec!["/bin/rm", "-rf", "x"],
        vec!["env", "rm", "x"],
        vec!["sh", "-c", "rm x"],
        vec!["bash", "-lc", "cd /tmp && rm x"],
        vec!["find", ".", "-exec", "sh", "-c", "rm x", ";"],
        vec!["sudo", "-u", "root", "rm", "x"],
    ] {
        let model = argv(&words_);
        assert!(
            all_programs(&model).contains(&"rm".to_string()),
            "{words_:?}"
        );
    }
    // No expansion happens in an argv: `$(…)` is a literal argument.
    let model = argv(&["echo", "$(rm x)"]);
    assert_eq!(all_programs(&model), vec!["echo"]);
    assert!(!model.is_opaque());
    // shell-words: `;` and `|` are ordinary characters.
    let model = words("git commit -m 'a; rm x' ; rm y");
    assert_eq!(all_programs(&model), vec!["git"]);
    assert_eq!(model.commands[0].words.len(), 7);
    let model = words("sh -c 'rm x'");
    assert!(all_programs(&model).contains(&"rm".to_string()));
    let model = words("echo 'unbalanced");
    assert!(model.is_opaque() && !model.complete);
}

#[test]
fn rule_25_5_interpreters_sed_and_git_config_that_run_commands_are_opaque() {
    for text in [
        "python3 -c 'import os; os.system(\"rm x\")'",
        "perl -e 'system(\"rm x\")'",
        "ruby -e '`rm x`'",
        "node -e 'require(\"child_process\").execSync(\"rm x\")'",
        "awk 'BEGIN{system(\"rm x\")}'",
        "awk 'BEGIN{print | \"sh\"}'",
        "sed 's/x/rm y/e' f",
        "sed '1e rm x' f",
        "php -r 'system(\"rm x\");'",
        "lua -e 'os.execute(\"rm x\")'",
        "gawk 'BEGIN{\"rm x\" | getline}'",
        "git -c core.pager='rm x' log",
        "git -c alias.x='!rm y' x",
        "git -c core.sshCommand='rm x' fetch",
        "git --config-env=core.pager=X log",
        "curl x | python3",
        "perl -ne 'system $_' f",
        "sed -f script.sed f",
        "awk -f prog.awk f",
    ] {
        assert_opaque(text);
    }
    for text in [
        "python -c 'print(1)'",
        "perl -e 'print 1'",
        "node -e 'console.log(1)'",
        "awk '{print $1}' f",
        "sed -n 1p f",
        "sed -n '1,10p' f",
        "sed 's/a/b/g' f",
        "git -c user.name=x commit -m m",
        "git -c color.ui=always log",
        "python3 -m pytest -q",
        "python3 script.py",
        "node --version",
    ] {
        assert_known(text);
    }
    for (text, what) in [
        ("git rebase -x 'rm x' HEAD~1", "rm"),
        ("git rebase --exec='rm x' HEAD~1", "rm"),
        ("git bisect run rm x", "rm"),
        ("tar --to-command='rm x' -xf a.tar", "rm"),
        ("tar -I 'rm x' -xf a.tar", "rm"),
        ("rsync -e 'rm x' a b:", "rm"),
        ("git submodule foreach 'rm x'", "rm"),
        ("git grep -O'rm x' foo", "rm"),
        ("zip -TT 'rm x' a.zip f", "rm"),
        ("man -P 'rm x' ls", "rm"),
    ] {
        assert_found(text, what);
    }
}

#[test]
fn rule_25_6_hand_on_table_marks_commands() {
    let cases = [
        (
            "find . -name x -delete",
            Some("find -exec/-execdir/-ok/-okdir/-delete"),
        ),
        (
            "git -c user.name=x log",
            Some("git -c/--config-env/--exec-path/--upload-pack/--receive-pack"),
        ),
        (
            "git grep -Ovim x",
            Some("git grep -O/--open-files-in-pager"),
        ),
        ("git rebase --exec=x HEAD", Some("git rebase -x/--exec")),
        (
            "ssh -oProxyCommand=x host",
            Some("ssh/scp/sftp -o ProxyCommand|LocalCommand|KnownHostsCommand|RemoteCommand"),
        ),
        ("cargo --config x=1 build", Some("cargo --config/-Z")),
        (
            "npm --script-shell=/x run t",
            Some("npm --script-shell / exec / -c"),
        ),
        (
            "kubectl --kubeconfig k get pods",
            Some("kubectl --kubeconfig / exec"),
        ),
        (
            "perl -e 1",
            Some("perl/python/python3/node/ruby/php/lua… -e/-c/-E/-r/--eval/-p"),
        ),
        (
            "python3 -c 1",
            Some("perl/python/python3/node/ruby/php/lua… -e/-c/-E/-r/--eval/-p"),
        ),
        ("exec -a x ls", Some("exec -a")),
        ("sed -n 'w out' f", Some("sed e/w commands, or -f")),
        (
            "awk '{print | \"cat\"}' f",
            Some("awk programs with system(, | or getline, or -f"),
        ),
        ("git status", None),
        ("cargo test", None),
        ("find . -name '*.rs'", None),
        ("python3 -m pytest", None),
        ("ssh host", None),
    ];
    for (text, want) in cases {
        let model = bash(text);
        assert_eq!(model.commands[0].hands_on, want, "{text}");
    }
}

/// The hand-on mark of one reading's first command.
fn first_hands_on(model: &Model) -> Option<&'static str> {
    model.commands.first().and_then(|c| c.hands_on)
}

/// An interpreter's code option inside a cluster of short options is a
/// code argument: marked for allow, its code scanned for deny.
#[test]
fn rule_25_6_interpreter_code_options_in_a_cluster_hand_code_on() {
    for text in [
        "perl -ne 'print if /rm/' f",
        "perl -lne 'print' f",
        "perl -pe 's/a/b/' f",
        "perl -nE 'say' f",
        "perl -E 'say 1'",
        "ruby -ne 'puts' f",
        "python3 -ic 'print(1)'",
        "python3 -Ic 'print(1)'",
        "php -nr 'echo 1;'",
        "node -pe 1",
    ] {
        assert!(first_hands_on(&bash(text)).is_some(), "{text}");
        assert!(first_hands_on(&words(text)).is_some(), "{text}");
    }
    for text in [
        "perl -ne 'system(\"rm x\")' f",
        "perl -lne 'exec q(rm)'",
        "python3 -Ic 'import os; os.system(\"rm x\")'",
        "ruby -ne '`rm x`'",
    ] {
        assert_opaque(text);
    }
    for text in [
        "perl -v",
        "python3 -V",
        "python3 -m json.tool f",
        "ruby -w x.rb",
    ] {
        assert_eq!(first_hands_on(&bash(text)), None, "{text}");
    }
}

/// Only a sed script's `e` command, the `s///e` flag, `w`/`W` (and `-f`
/// script files) hand anything on; its script is the `-e` value or the
/// first operand, never a file operand.
#[test]
fn rule_25_6_sed_hands_on_only_for_e_w_and_script_files() {
    for text in [
        "sed -n '10,20p' src/main.rs",
        "sed -n '/rm/p' Makefile",
        "sed 's/a/b/g' src/main.rs",
        "sed -i.bak 's/a/b/' f",
        "sed -n -- '1p' f",
        "sed -l 5 p f",
        "sed -E -e 's/a/b/' -e '/x/d' src/main.rs",
    ] {
        assert_eq!(first_hands_on(&assert_known(text)), None, "{text}");
        assert_eq!(first_hands_on(&words(text)), None, "{text}");
    }
    for text in [
        "sed 's/a/b/w out' f",
        "sed '/x/ w out' f",
        "sed -n 'W out' f",
        "sed -f script.sed f",
        "sed --file=script.sed f",
        "sed --fi script.sed f",
    ] {
        assert!(first_hands_on(&bash(text)).is_some(), "{text}");
    }
    for text in [
        "sed '1e rm x' f",
        "sed -e 's/x/rm y/e' f",
        "sed '-es/x/rm y/e' f",
        "sed -ne p -e 's/a/b/e' f",
        "sed --expression=1e f",
        "sed --expr 1e f",
    ] {
        let model = assert_opaque(text);
        assert!(first_hands_on(&model).is_some(), "{text}");
    }
}

/// An awk program is its program argument (or `-e`/`--source`/`-W source=`
/// values): later arguments are files and assignments, never judged as
/// code; options that take a value are skipped.
#[test]
fn rule_25_6_awk_is_judged_by_its_program_argument_only() {
    let text = "awk '{print $1}' access.log | sort | uniq -c | sort -rn | head";
    assert!(words(text).commands.iter().all(|c| c.hands_on.is_none()));
    assert!(assert_known(text)
        .commands
        .iter()
        .all(|c| c.hands_on.is_none()));
    assert_eq!(first_hands_on(&words("awk 'BEGIN{print}' '|'")), None);
    for text in [
        "awk --assign x=1 'BEGIN{system(\"rm x\")}'",
        "awk -v x=1 'BEGIN{system(\"rm x\")}'",
        "awk -F : '{print | \"sh\"}' f",
        "awk -e 'BEGIN{print}' -e '{print | \"sh\"}'",
        "awk -W source='BEGIN{system(\"rm x\")}'",
        "awk -W exec prog.awk",
        "awk -f prog.awk f",
    ] {
        let model = assert_opaque(text);
        assert!(first_hands_on(&model).is_some(), "{text}");
    }
}

/// §25.4 read literally: after a wrapper every later word position is a
/// speculative program start, also when the wrapper only looks a name up,
/// and after the program of a `find -exec` clause.
#[test]
fn rule_25_4_every_later_word_after_a_wrapper_is_a_program_start() {
    for text in [
        "command -v rm",
        "command -V rm",
        "sudo -l rm",
        "find . -name x -exec grep -l rm {} +",
        "find . -exec sh -c 'true' rm \\;",
    ] {
        let model = bash(text);
        assert!(
            model
                .commands
                .iter()
                .any(|c| c.speculative && c.program().is_some_and(|p| p.text == "rm")),
            "{text}: {:?}",
            all_programs(&model)
        );
        assert!(
            !model.programs().contains(&"rm"),
            "{text}: not a real start"
        );
    }
    let model = bash("command -v rm");
    assert_eq!(model.commands[0].wrapper, Some("command"));
    for text in ["find . -name rm", "find . -name '*.rs' -type f"] {
        let model = assert_known(text);
        assert_eq!(all_programs(&model), ["find"], "{text}");
        assert_eq!(model.commands[0].wrapper, None, "{text}");
    }
}

#[test]
fn rule_25_5_limits_make_the_value_opaque_and_incomplete() {
    let deep = format!("echo {}x{}", "$(".repeat(2000), ")".repeat(2000));
    let model = bash(&deep);
    assert!(!model.complete);
    assert_eq!(model.opaque[0].why, OpaqueWhy::TooDeep);
    let long = "a".repeat(70_000);
    let model = bash(&long);
    assert_eq!(model.opaque[0].why, OpaqueWhy::TooLong);
    let many = "true;".repeat(2000);
    let model = bash(&many);
    assert!(!model.complete);
    assert!(model.commands.len() <= Limits::default().max_commands);
    let broken = bash("echo 'unclosed");
    assert!(!broken.complete);
    assert!(broken.opaque.iter().any(|o| o.why == OpaqueWhy::Parse));
    let tight = Limits {
        budget: std::time::Duration::ZERO,
        ..Limits::default()
    };
    let model = read(Source::Bash(&"ls -la; ".repeat(500)), &tight);
    assert!(!model.complete);
}

#[test]
fn rule_25_8_programs_and_why_for_the_approver() {
    let model = assert_known("curl -s x | tee f; ls && curl y");
    assert_eq!(model.programs(), vec!["curl", "tee", "ls"]);
    let model = assert_opaque("$X -rf /");
    let why = model.why().unwrap();
    assert!(why.contains("$X"), "{why}");
    let model = assert_opaque("bash -c 'eval \"$Y\"'");
    let why = model.why().unwrap();
    assert!(why.contains("inside bash -c"), "{why}");
}

#[test]
fn rule_25_3_redirects_are_kept_per_command() {
    let model = assert_known("cargo test 2>&1 >/dev/null | tail -20");
    let ops: Vec<&str> = model.commands[0]
        .redirects
        .iter()
        .map(|r| r.op.as_str())
        .collect();
    assert_eq!(ops, vec!["2>&1", ">"]);
    assert_eq!(
        model.commands[0].redirects[1].target.as_ref().unwrap().text,
        "/dev/null"
    );
    assert!(model.commands[1].redirects.is_empty());
    let model = assert_known("{ echo a; echo b; } > out");
    assert!(model.commands.iter().all(|c| c.redirects.len() == 1));
}

#[test]
fn rule_25_3_benign_commands_that_mention_a_word_stay_known() {
    for text in [
        "git status",
        "git  status   -sb",
        "ls -la",
        "cd src && cargo test 2>&1 | tail -20",
        "grep -rn 'rm -rf' src",
        "echo rm",
        "echo \"rm -rf /\"",
        "curlie https://example.com",
        "rmdir x",
        "npm test -- --grep rm",
        "git commit -m 'rm x && curl y'",
        "man rm",
        "which rm",
        "type rm",
        "find . -name '*.rs' -type f",
        "for f in *.rs; do wc -l \"$f\"; done",
        "if [ -d target ]; then du -sh target; fi",
        "echo \"$(date)\"",
        "X=$(git rev-parse HEAD)",
        "export PATH=$PATH:/x",
        "set -euo pipefail",
        "cat <<'EOF' > /tmp/f\nrm x\nEOF",
    ] {
        let model = assert_known(text);
        if !text.contains("<<") {
            assert!(
                !all_programs(&model).iter().any(|p| p == "rm"),
                "{text}: {:?}",
                all_programs(&model)
            );
        }
    }
}

#[test]
fn rule_25_4_tables_are_data_and_print_as_markdown() {
    let wrappers = wrappers_markdown();
    for name in ["env", "sudo", "xargs", "find", "ssh", "bwrap", "timeout"] {
        assert!(wrappers.contains(&format!("`{name}`")), "{name}");
    }
    let hands = hands_on_markdown();
    for entry in HANDS_ON {
        assert!(hands.contains(entry.what));
    }
    if let Ok(path) = std::env::var("SHELL_TABLES_OUT") {
        std::fs::write(path, format!("{wrappers}\n{hands}")).ok();
    }
    // One paragraph each: the README has a line budget.
    assert_eq!(wrappers.lines().count(), 1);
    assert_eq!(hands.lines().count(), 1);
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md"))
        .expect("README.md");
    assert!(
        readme.contains(wrappers.trim_end()),
        "the README's wrapper table is stale"
    );
    assert!(
        readme.contains(hands.trim_end()),
        "the README's hand-on table is stale"
    );
    let mut names: Vec<&str> = WRAPPERS.iter().map(|w| w.name).collect();
    names.sort_unstable();
    let before = names.len();
    names.dedup();
    assert_eq!(before, names.len(), "a wrapper is listed twice");
}

#[test]
fn base_name_takes_the_last_path_component() {
    assert_eq!(base_name("/usr/bin/rm"), "rm");
    assert_eq!(base_name("rm"), "rm");
    assert_eq!(base_name("./rm"), "rm");
    assert_eq!(base_name("/"), "");
}

mod properties {
    use super::*;
    use proptest::prelude::*;

    const PROGRAMS: &[&str] = &["rm", "curl", "git", "ls", "cat", "grep", "touch", "chmod"];
    const WRAPPED_BY: &[&str] = &[
        "env",
        "env -i",
        "command",
        "nice -n 5",
        "nohup",
        "timeout 5",
        "stdbuf -oL",
        "setsid",
        "time",
        "sudo -u root",
        "xargs -0",
        "strace -f",
        "unshare -r",
        "chroot /",
        "busybox",
        "doas",
        "taskset 0x1",
        "ionice -c 3",
        "flock /tmp/l",
        "setpriv",
        "exec",
    ];

    fn quoted(word: &str, how: u8) -> String {
        match how % 6 {
            0 => word.to_string(),
            1 => format!("'{word}'"),
            2 => format!("\"{word}\""),
            3 => word.chars().map(|c| format!("\\{c}")).collect(),
            4 => format!("$'{word}'"),
            _ => format!("{}''{}", &word[..1], &word[1..]),
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

        /// §25.3: quoting a literal word never changes what runs.
        #[test]
        fn rule_25_3_quoting_a_literal_word_never_changes_what_runs(
            program in 0..PROGRAMS.len(),
            args in proptest::collection::vec("[a-z0-9_./-]{1,8}", 0..4),
            hows in proptest::collection::vec(any::<u8>(), 5),
        ) {
            let plain = format!("{} {}", PROGRAMS[program], args.join(" "));
            let mut quoted_text = quoted(PROGRAMS[program], hows[0]);
            for (i, arg) in args.iter().enumerate() {
                quoted_text.push(' ');
                quoted_text.push_str(&quoted(arg, hows[(i + 1) % hows.len()]));
            }
            let a = bash(&plain);
            let b = bash(&quoted_text);
            prop_assert!(!b.is_opaque(), "{quoted_text}: {:?}", b.why());
            let words_a: Vec<&str> = a.commands[0].words.iter().map(|w| w.text.as_str()).collect();
            let words_b: Vec<&str> = b.commands[0].words.iter().map(|w| w.text.as_str()).collect();
            prop_assert_eq!(words_a, words_b);
            prop_assert_eq!(a.programs(), b.programs());
        }

        /// §25.4: wrapping a command in a known wrapper keeps its program in
        /// the set, however deep.
        #[test]
        fn rule_25_4_wrapping_keeps_the_inner_program(
            program in 0..PROGRAMS.len(),
            wrappers in proptest::collection::vec(0..WRAPPED_BY.len(), 1..4),
        ) {
            let mut text = format!("{} x", PROGRAMS[program]);
            for w in &wrappers {
                text = format!("{} {text}", WRAPPED_BY[*w]);
            }
            let model = bash(&text);
            prop_assert!(
                all_programs(&model).contains(&PROGRAMS[program].to_string()),
                "{text}: {:?}", all_programs(&model)
            );
            let argv_words: Vec<&str> = text.split(' ').collect();
            let model = argv(&argv_words);
            prop_assert!(all_programs(&model).contains(&PROGRAMS[program].to_string()), "{text}");
        }

        /// Any input, any source: no panic, bounded output.
        #[test]
        fn reading_never_panics_and_stays_bounded(text in ".{0,600}", bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
            let noisy = String::from_utf8_lossy(&bytes).into_owned();
            for input in [&text, &noisy] {
                for model in [bash(input), words(input)] {
                    prop_assert!(model.commands.len() <= Limits::default().max_commands);
                    prop_assert!(model.opaque.len() <= 64);
                    prop_assert_eq!(model.complete, model.complete && !model.opaque.iter().any(|o| matches!(o.why, OpaqueWhy::TooMany | OpaqueWhy::Budget | OpaqueWhy::TooDeep | OpaqueWhy::TooLong)));
                }
                let split: Vec<String> = input.split(' ').map(str::to_string).collect();
                let model = read(Source::Argv(&split), &limits());
                prop_assert!(model.commands.len() <= Limits::default().max_commands);
            }
        }
    }
}

#[test]
fn rule_25_10_the_pool_answers_and_counts_parses() {
    use std::sync::Arc;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .expect("runtime");
    let before = parses();
    let reader = Reader::new(limits());
    let models = runtime.block_on(reader.read_all(vec![
        OwnedSource::Bash("sudo rm -rf x".into()),
        OwnedSource::Argv(vec!["env".into(), "curl".into()]),
        OwnedSource::Words("sh -c 'ls | wc -l'".into()),
    ]));
    assert_eq!(models.len(), 3);
    let first = Arc::clone(&models[0]);
    assert_eq!(models[0].programs(), vec!["sudo", "rm"]);
    assert_eq!(models[1].programs(), vec!["env", "curl"]);
    assert_eq!(models[2].programs(), vec!["sh", "ls", "wc"]);
    assert!(parses() >= before + 3);
    // Past the batch budget, an unanswered value is opaque, never missing.
    let hurried = Reader::new(Limits {
        budget: std::time::Duration::ZERO,
        ..Limits::default()
    });
    let big = "echo $(ls) \"$(pwd)\"; ".repeat(3000);
    let models = runtime.block_on(hurried.read_all(vec![OwnedSource::Bash(big); 4]));
    assert_eq!(models.len(), 4);
    assert!(models.iter().all(|m| m.is_opaque() && !m.complete));
    // The pool keeps working afterwards.
    let models = runtime.block_on(reader.read_all(vec![OwnedSource::Bash("ls".into())]));
    assert_eq!(models[0].programs(), vec!["ls"]);
    // A value read before is answered from what was kept, without a parse.
    let again = runtime.block_on(reader.read_all(vec![OwnedSource::Bash("sudo rm -rf x".into())]));
    assert!(Arc::ptr_eq(&again[0], &first));
}

/// The grammar's scanner once read out of bounds (`isdigit` on a large code
/// point after `{`) and crashed the process; non-ASCII bytes reach it as a
/// stand-in now, and words keep their original text.
#[test]
fn rule_25_10_non_ascii_input_cannot_crash_the_reader() {
    for text in [
        "{\u{10ffff}",
        "echo {\u{f0000}..",
        "x{\u{1f574}}",
        "{\u{20ac}9..\u{20ac}}",
        "${\u{10ffff}",
        "$(({\u{10ffff}))",
        "cat <<\u{10ffff}\n{\u{10ffff}\n\u{10ffff}",
    ] {
        let _ = bash(text);
    }
    let model = assert_known("echo 'caf\u{e9}' r\u{e9}sum\u{e9} \u{1f600}");
    let texts: Vec<&str> = model.commands[0]
        .words
        .iter()
        .map(|w| w.text.as_str())
        .collect();
    assert_eq!(
        texts,
        vec!["echo", "caf\u{e9}", "r\u{e9}sum\u{e9}", "\u{1f600}"]
    );
    // A no-break space is not a separator to bash: one word, not `rm`.
    let model = bash("rm\u{a0}-rf x");
    assert_eq!(model.commands[0].words[0].text, "rm\u{a0}-rf");
    // Unicode look-alikes and zero-width characters are other programs.
    assert_eq!(bash("r\u{200b}m x").programs(), vec!["r\u{200b}m"]);
    assert_eq!(
        bash("\u{ff52}\u{ff4d} x").programs(),
        vec!["\u{ff52}\u{ff4d}"]
    );
    // A NUL byte ends a C string: opaque.
    assert!(bash("ls\0; rm x").is_opaque());
}

/// A bash value read with a newline after it (`bash::closed`, the grammar's
/// fast way to the end of a value) gives the model the value gives read as
/// it is: over every bash reading of the command corpus, its ASCII-case and
/// nested-shell forms, 2,000 generated values and each of those with the
/// statement forms the grammar ends slowly (pipelines, lists, a trailing
/// comment or here-document). Values ending in a newline or a backslash are
/// never closed, and stay in the set to show it. Past a parse error both
/// readings are opaque (`Parse`), whatever each recovered.
#[test]
fn rule_25_10_a_value_read_closed_by_a_newline_reads_as_the_value() {
    use approval_gate_testkit::commands::{generate, load, Reading as CorpusReading};
    let corpus = load(std::path::Path::new(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/commands"
    )))
    .expect("the command corpus loads");
    let mut values: Vec<String> = Vec::new();
    for case in &corpus {
        for reading in case.readings() {
            if let CorpusReading::Bash(text) = reading {
                values.push(text);
            }
        }
    }
    values.extend(generate(1025, 2_000).into_iter().map(|g| g.text));
    let ends = [
        " | sort | head -3",
        " | a | b | c | d",
        " && b || c",
        " & wait",
        " # a comment",
        "\ncat <<EOF\nbody $(id)\nEOF",
        " 2>&1 | tee log",
        "\\",
        "\n",
    ];
    let first = values.len().min(600);
    for i in 0..first {
        for end in ends {
            values.push(format!("{}{end}", values[i]));
        }
    }
    let (mut differ, mut closed_count, mut recovered) = (Vec::new(), 0usize, 0usize);
    for value in &values {
        let closed = bash(value);
        bash::UNCLOSED.with(|u| u.set(true));
        let open = bash(value);
        bash::UNCLOSED.with(|u| u.set(false));
        if !value.ends_with('\n') && !value.ends_with('\\') && !value.is_empty() {
            closed_count += 1;
        }
        let parse_error = |m: &Model| m.opaque.iter().any(|o| o.why == OpaqueWhy::Parse);
        if parse_error(&open) || parse_error(&closed) {
            // Past a parse error the grammar's recovery reads what it can,
            // and may recover differently; both readings are opaque for it.
            if !(parse_error(&open) && parse_error(&closed)) {
                differ.push(format!(
                    "{value:?}\n  closed: {closed:?}\n  as is: {open:?}"
                ));
            }
            recovered += usize::from(closed != open);
        } else if closed != open {
            differ.push(format!(
                "{value:?}\n  closed: {closed:?}\n  as is: {open:?}"
            ));
        }
        for command in &closed.commands {
            assert!(command.span.end <= value.len(), "{value:?}: {command:?}");
        }
    }
    println!(
        "{} values, {closed_count} read closed, {} read differently, \
         {recovered} parse errors recovered from differently",
        values.len(),
        differ.len()
    );
    assert!(
        closed_count > 5_000,
        "the set closes values: {closed_count}"
    );
    assert!(
        differ.is_empty(),
        "{}",
        differ[..differ.len().min(5)].join("\n")
    );
}
