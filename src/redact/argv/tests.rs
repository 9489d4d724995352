use super::*;

/// What each element of `argv` keeps before its secret (`None`: no secret).
fn secrets(argv: &[&str]) -> Vec<Option<usize>> {
    let mut state = Argv::default();
    argv.iter()
        .map(|s| state.next(Some(s)).and_then(|secret| secret.start(s)))
        .collect()
}

#[test]
fn rule_21_7_a_long_secret_flag_takes_the_next_element_for_any_command() {
    assert_eq!(
        secrets(&["mysql", "--password", "pw"]),
        [None, None, Some(0)]
    );
    for flag in [
        "--token",
        "--api-key",
        "--secret",
        "--client-secret",
        "--db-pass",
        "--passwd",
    ] {
        assert_eq!(
            secrets(&["tool", flag, "v"]),
            [None, None, Some(0)],
            "{flag}"
        );
    }
    // A following flag is no value; `--name=value` is the text detectors'.
    assert_eq!(
        secrets(&["x", "--password", "--verbose"]),
        [None, None, None]
    );
    assert_eq!(secrets(&["x", "--token=abc"]), [None, None]);
    // Names that are not secret.
    for flag in [
        "--token-file",
        "--max-tokens",
        "--auth-mode",
        "--pass",
        "--bypass",
    ] {
        assert_eq!(secrets(&["x", flag, "v"]), [None, None, None], "{flag}");
    }
}

#[test]
fn rule_21_7_user_flags_take_the_password_of_user_password() {
    assert_eq!(secrets(&["curl", "-u", "admin:pw"]), [None, None, Some(6)]);
    assert_eq!(secrets(&["curl", "--user", "a:b:c"]), [None, None, Some(2)]);
    assert_eq!(secrets(&["curl", "-uadmin:pw"]), [None, Some(8)]);
    // A user name, a uid:gid, a URL, an empty password.
    assert_eq!(secrets(&["mysql", "-u", "root"]), [None, None, None]);
    assert_eq!(secrets(&["git", "push", "-u", "origin", "main"]), [None; 5]);
    assert_eq!(
        secrets(&["docker", "run", "-u", "1000:1000", "i"]),
        [None; 5]
    );
    assert_eq!(secrets(&["redis-cli", "-u", "redis://:pw@h"]), [None; 3]);
    assert_eq!(secrets(&["curl", "-u", "admin:"]), [None; 3]);
}

#[test]
fn rule_21_7_short_flags_take_a_secret_only_after_their_commands() {
    assert_eq!(secrets(&["mysql", "-p", "pw"]), [None, None, Some(0)]);
    assert_eq!(
        secrets(&["mysql", "-uroot", "-pS3cret"]),
        [None, None, Some(2)]
    );
    assert_eq!(
        secrets(&["/usr/bin/mysqldump", "-ppw", "db"]),
        [None, Some(2), None]
    );
    assert_eq!(
        secrets(&["sshpass", "-p", "pw", "ssh", "h"]),
        [None, None, Some(0), None, None]
    );
    assert_eq!(
        secrets(&["redis-cli", "-p", "6379", "-a", "pw"]),
        [None, None, None, None, Some(0)]
    );
    assert_eq!(
        secrets(&["mongosh", "-u", "u", "-p", "pw"]),
        [None, None, None, None, Some(0)]
    );
    assert_eq!(secrets(&["sqlcmd", "-P", "pw"]), [None, None, Some(0)]);
    assert_eq!(secrets(&["MYSQL.EXE", "-ppw"]), [None, Some(2)]);
    assert_eq!(
        secrets(&[r"C:\mysql\bin\mysql.exe", "-ppw"]),
        [None, Some(2)]
    );
    // After a wrapper.
    assert_eq!(
        secrets(&["docker", "exec", "db", "mysql", "-p", "pw"]),
        [None, None, None, None, None, Some(0)]
    );
    // `-p` prompts when a flag follows.
    assert_eq!(secrets(&["mysql", "-p", "-h", "db"]), [None; 4]);
}

#[test]
fn rule_21_7_login_subcommands_give_dash_p_its_secret() {
    assert_eq!(
        secrets(&["docker", "login", "-u", "bob", "-p", "pw", "r.io"]),
        [None, None, None, None, None, Some(0), None]
    );
    assert_eq!(
        secrets(&["az", "login", "-p", "pw"]),
        [None, None, None, Some(0)]
    );
    // Without `login`, `-p` is a port mapping.
    assert_eq!(
        secrets(&["docker", "run", "-p", "8080:80", "nginx"]),
        [None; 5]
    );
}

#[test]
fn rule_21_7_look_alike_short_flags_stay() {
    for argv in [
        &["ls", "-a"][..],
        &["ls", "-a", "src"],
        &["cp", "-a", "src", "dst"],
        &["ssh", "-p", "2222", "host"],
        &["cargo", "test", "-p", "approval-gate"],
        &["mkdir", "-p", "a/b"],
        &["psql", "-p", "5432", "-U", "app"],
        &["redis-cli", "-p", "6379"],
        &["git", "add", "-p"],
        &["unzip", "-p", "a.zip"],
    ] {
        assert!(secrets(argv).iter().all(Option::is_none), "{argv:?}");
    }
}

#[test]
fn a_non_string_element_ends_the_expectation() {
    let mut state = Argv::default();
    assert_eq!(state.next(Some("--password")), None);
    assert_eq!(state.next(None), None);
    assert_eq!(state.next(Some("pw")), None);
}

#[test]
fn a_sibling_command_names_the_command() {
    let mut state = Argv::after_command("redis-cli --tls");
    assert_eq!(state.next(Some("-a")), None);
    assert_eq!(state.next(Some("pw")), Some(Secret::Whole));
}

#[test]
fn every_command_of_the_table_is_known_and_flags_are_short() {
    for name in command_names() {
        assert!(Active::is_command(name), "{name}");
        assert!(!name.is_empty() && !name.contains(' '));
    }
    for command in COMMANDS {
        for flag in command.flags {
            assert!(flag.len() == 2 && flag.starts_with('-'), "{flag}");
        }
    }
    assert!(COMMANDS.len() <= 32, "Active holds a bit per command");
}

#[test]
fn rule_26_7_redis_pass_takes_the_next_element_or_its_equals_value() {
    assert_eq!(
        secrets(&["redis-cli", "-h", "h", "--pass", "pw", "ping"]),
        [None, None, None, None, Some(0), None]
    );
    assert_eq!(
        secrets(&["valkey-cli", "--pass=pw", "ping"]),
        [None, Some(7), None]
    );
    // Another command's `--pass` is a count or a mode.
    assert_eq!(secrets(&["x264", "--pass", "1"]), [None; 3]);
    // A following flag is no value.
    assert_eq!(
        secrets(&["redis-cli", "--pass", "--no-auth-warning"]),
        [None; 3]
    );
}

#[test]
fn rule_26_7_htpasswd_batch_mode_takes_the_password_word() {
    assert_eq!(
        secrets(&["htpasswd", "-b", "f", "admin", "pw"]),
        [None, None, None, None, Some(0)]
    );
    assert_eq!(
        secrets(&["htpasswd", "-nbB", "admin", "pw"]),
        [None, None, None, Some(0)]
    );
    assert_eq!(
        secrets(&["htpasswd", "-B", "-C", "12", "-b", "f", "u", "pw"]),
        [None, None, None, None, None, None, None, Some(0)]
    );
    // Without `b` htpasswd prompts: nothing is a secret.
    assert_eq!(secrets(&["htpasswd", "-c", "f", "admin", "x"]), [None; 5]);
    assert_eq!(secrets(&["htpasswd", "-D", "f", "admin"]), [None; 4]);
    // Only htpasswd's words count.
    assert_eq!(secrets(&["tar", "-b", "20", "f", "x"]), [None; 5]);
}

#[test]
fn rule_26_7_config_set_of_a_secret_name_takes_the_value() {
    assert_eq!(
        secrets(&["aws", "configure", "set", "aws_secret_access_key", "s"]),
        [None, None, None, None, Some(0)]
    );
    assert_eq!(
        secrets(&["npm", "config", "set", "_authToken", "t"]),
        [None, None, None, None, Some(0)]
    );
    assert_eq!(
        secrets(&["aws", "configure", "set", "region", "eu-west-1"]),
        [None; 5]
    );
    assert_eq!(
        secrets(&["aws", "configure", "get", "aws_secret_access_key"]),
        [None; 4]
    );
    // `set` must follow the configuration word at once.
    assert_eq!(secrets(&["config", "x", "set", "token", "t"]), [None; 5]);
}

#[test]
fn rule_26_7_stdin_secret_flags_are_whole_words() {
    assert!(reads_secret_stdin(
        "docker login -u ci --password-stdin r.example"
    ));
    assert!(reads_secret_stdin("--askpass"));
    assert!(reads_secret_stdin("gh auth login --with-token"));
    assert!(!reads_secret_stdin("docker login --password-stdin-file x"));
    assert!(!reads_secret_stdin("echo askpass"));
}
