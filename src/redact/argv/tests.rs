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
