use super::*;

#[test]
fn codes_round_trip_and_unknown_codes_are_kept() {
    for code in [
        "function_not_found",
        "invocation_stopped",
        "NOT_FOUND",
        "NOT_REGISTERED",
        "SCHEMA_INVALID",
        "timeout",
        "not_connected",
        "malformed_reply",
        "ADAPTER_ERROR",
    ] {
        assert_eq!(ErrorCode::parse(code).as_str(), code);
    }
    assert_eq!(
        ErrorCode::parse("ADAPTER_ERROR"),
        ErrorCode::Other("ADAPTER_ERROR".into())
    );
    assert_eq!(
        ErrorCode::parse("not_found"),
        ErrorCode::Other("not_found".into())
    );
}

#[test]
fn sdk_errors_become_typed_codes() {
    let remote = CallError::from_sdk(
        "configuration::get",
        iii_sdk::Error::Remote {
            code: "NOT_FOUND".into(),
            message: "no entry".into(),
            stacktrace: None,
        },
    );
    assert!(remote.is_not_found() && remote.is_definite());
    assert_eq!(
        remote.to_string(),
        "configuration::get failed (NOT_FOUND): no entry"
    );
    let timeout = CallError::from_sdk("harness::function::resolve", iii_sdk::Error::Timeout);
    assert_eq!(timeout.code, ErrorCode::Timeout);
    assert!(!timeout.is_definite() && timeout.answer_lost() && !timeout.surely_not_delivered());
    let absent = CallError::from_sdk(
        "harness::workspace::grants",
        iii_sdk::Error::Remote {
            code: "function_not_found".into(),
            message: String::new(),
            stacktrace: None,
        },
    );
    assert!(
        absent.is_function_not_found() && absent.surely_not_delivered() && !absent.answer_lost()
    );
}
