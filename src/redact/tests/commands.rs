//! Redaction inside the values a call can run (contract §25.8): a
//! `shell::*` call's `command` and `args` lose whole literal argument words,
//! never their program words or structure; the reviewer learns that
//! something was hidden.

use serde_json::json;

use super::super::*;

#[test]
fn rule_25_8_a_shell_command_keeps_its_program_words() {
    let out = redact_call("shell::exec", &json!({"command": "PASSWORD= rm -rf ~/x"}));
    assert!(
        out["command"]
            .as_str()
            .is_some_and(|c| c.contains("rm -rf")),
        "{out}"
    );
    let out = redact_call(
        "shell::exec",
        &json!({"command": "export TOKEN=abc123456 && gh pr list"}),
    );
    assert_eq!(out["command"], "export <redacted> && gh pr list");
    let out = redact_call(
        "shell::exec",
        &json!({"command": "bash -c 'mysql -pSECRETpass1 db'"}),
    );
    assert_eq!(out["command"], "bash -c 'mysql <redacted> db'");
}

#[test]
fn rule_25_8_other_functions_and_fields_are_redacted_as_before() {
    for value in [
        json!({"command": "PASSWORD= rm -rf ~/x"}),
        json!({"cmd": "mysql -pSECRETpass1 db", "password": "x"}),
    ] {
        assert_eq!(redact_call("demo::echo", &value), redact(&value), "{value}");
    }
    // Beside the command, a shell call's other fields are as before.
    let out = redact_call(
        "shell::exec",
        &json!({"command": "ls", "password": "hunter2", "note": "mysql -pSECRETpass1 db"}),
    );
    assert_eq!(out["password"], REDACTED);
    assert_eq!(out["note"], "mysql -p<redacted> db");
}

#[test]
fn rule_25_8_argv_elements_are_words_hidden_whole() {
    let out = redact_call(
        "shell::exec",
        &json!({"command": "mysql", "args": ["-pSECRETpass1", "--password", "hunter22", "db"]}),
    );
    assert_eq!(out["args"], json!([REDACTED, "--password", REDACTED, "db"]));
    let full = redact_call_full(
        "shell::exec",
        &json!({"command": "mysql", "args": ["-pSECRETpass1", "db"]}),
    );
    assert!(full.hidden_command);
    assert_eq!(full.value["args"], json!([REDACTED, "db"]));
}

#[test]
fn rule_25_8_a_dash_c_element_is_redacted_inside_and_its_positional_words_shown() {
    let out = redact_call(
        "shell::exec",
        &json!({"command": "sh", "args": ["-c", "mysql -pSECRETpass1 db \"$1\"", "_", "rm"]}),
    );
    assert_eq!(
        out["args"],
        json!(["-c", "mysql <redacted> db \"$1\"", "_", "rm"])
    );
}

#[test]
fn rule_25_8_an_env_value_run_as_the_program_is_shown() {
    let value = json!({
        "command": "$API_TOKEN --version && ${DB_PASSWORD} -x",
        "env": {"API_TOKEN": "/usr/local/bin/tool", "DB_PASSWORD": "/bin/rm", "GH_TOKEN": "abc123"}
    });
    let out = redact_call("shell::exec", &value);
    assert_eq!(out["env"]["API_TOKEN"], "/usr/local/bin/tool");
    assert_eq!(out["env"]["DB_PASSWORD"], "/bin/rm");
    assert_eq!(out["env"]["GH_TOKEN"], REDACTED);
    // The detectors still run on a shown value.
    let value = json!({
        "command": "$TOOL_TOKEN x",
        "env": {"TOOL_TOKEN": "ghp_FAKExJvv9Nl46wmyhw32J7bYzpzH2tvUuM4B"}
    });
    let out = redact_call("shell::exec", &value);
    assert_eq!(out["env"]["TOOL_TOKEN"], REDACTED);
    // Without the call's shape, a secret-named key hides its value.
    assert_eq!(redact(&value)["env"]["TOOL_TOKEN"], REDACTED);
}

#[test]
fn rule_25_8_a_long_command_is_clipped_outside_its_markers_and_settles() {
    let command = format!("mysql -pSECRETpass1 db {}", "x".repeat(400));
    let out = redact_call("shell::exec", &json!({ "command": command }));
    let text = out["command"].as_str().unwrap_or_default();
    assert!(text.starts_with("mysql <redacted> db x"), "{text}");
    assert!(text.contains(CLIP_MARK), "{text}");
    assert_eq!(redact_call("shell::exec", &out), out);
}
