use serde_json::json;

use super::*;

fn family(fid: &str, args: Option<Value>) -> Option<Family> {
    builtin_guard(fid, args.as_ref()).map(|g| g.family)
}

#[test]
fn the_namespaces_are_recognised_at_the_start_ignoring_case_and_padding() {
    for fid in [
        "approval::resolve",
        "APPROVAL::resolve",
        "Approval::Resolve",
        "CONFIGURATION::set",
        " approval::resolve",
        "\tapproval::resolve",
        "\n approval::resolve",
        "\u{200b}approval::resolve",
        "\u{feff}configuration::get",
        "\u{3000}approval::x",
        "approval::",
        "configuration::",
    ] {
        assert!(is_human_only(fid), "{fid:?} must be human-only");
        assert!(builtin_guard(fid, None).is_some(), "{fid:?}");
    }
}

/// The engine routes exact ids only: no qualifier reaches the gate or the
/// engine's built-ins, so a qualified name is some other worker's function.
#[test]
fn qualified_and_lookalike_names_are_not_the_gate() {
    for fid in [
        "github::configuration::get",
        "acme::approval::sync",
        "ns/approval::resolve",
        "ns::approval::resolve",
        "ns1:approval::resolve",
        "default::configuration::list",
        "default/configuration::list",
        "a::b::configuration::set",
        "x.approval::y",
        "[approval::y]",
        "/approval::resolve",
        "é/approval::y",
        "approvals::list",
        "myapproval::x",
        "pre-approval::x",
        "re_approval::x",
        "approval2::x",
        "approval:x",
        "approval",
        "configuration",
        "configurations::get",
        "state::get",
        "",
        "approva",
        "shell::approval",
        "shell::approval::resolve",
    ] {
        assert!(!is_human_only(fid), "{fid:?} must not be human-only");
        assert_eq!(builtin_guard(fid, None), None, "{fid:?}");
    }
}

#[test]
fn harness_releases_and_grants_are_guarded_exactly() {
    for fid in [
        "harness::function::resolve",
        "HARNESS::Function::Resolve",
        " harness::workspace::grant",
        "\u{200b}harness::workspace::revoke",
        "harness::function::resolve \u{200b}",
    ] {
        assert_eq!(family(fid, None), Some(Family::Release), "{fid:?}");
    }
    for fid in [
        "harness::function::resolver",
        "harness::workspace::grants",
        "harness::function::list",
        "myharness::function::resolve",
        "harness::function::resolve_all",
        "ns/harness::workspace::revoke",
        "acme::harness::function::resolve",
    ] {
        assert_eq!(family(fid, None), None, "{fid:?}");
    }
}

#[test]
fn binding_changes_are_guarded() {
    for fid in ["engine::register_trigger", "ENGINE::unregister_trigger"] {
        assert_eq!(family(fid, None), Some(Family::Bindings), "{fid:?}");
    }
    for fid in [
        "engine::registered-triggers::list",
        "engine::functions::list",
        "engine::register_trigger_type",
        "acme::engine::unregister_trigger",
        "ns/engine::register_trigger",
    ] {
        assert_eq!(family(fid, None), None, "{fid:?}");
    }
}

#[test]
fn state_calls_are_guarded_by_their_scope_argument() {
    for scope in [
        "approval",
        "approval_settings",
        "approval_pending.07",
        "APPROVAL_SETTINGS",
        "Approval.anything",
        "approval_",
        " approval_settings",
    ] {
        for fid in [
            "state::set",
            "state::get",
            "state::list",
            "STATE::delete",
            "state::update",
        ] {
            let args = json!({"scope": scope, "key": "k"});
            let guard = builtin_guard(fid, Some(&args)).map(|g| (g.family, g.matched.to_string()));
            assert_eq!(
                guard,
                Some((Family::State, scope.to_string())),
                "{fid} {scope:?}"
            );
        }
    }
    for args in [
        json!({"scope": "approvals"}),
        json!({"scope": "approvalX"}),
        json!({"scope": "my_approval_settings"}),
        json!({"scope": "appro"}),
        json!({"scope": ""}),
        json!({"scope": ["approval_settings"]}),
        json!({"scope": {"name": "approval_settings"}}),
        json!({"key": "approval_settings"}),
        json!("approval_settings"),
        json!(null),
    ] {
        assert_eq!(family("state::set", Some(args.clone())), None, "{args}");
    }
    assert_eq!(family("state::set", None), None);
    // Another namespace carrying a `scope` argument is not a state call,
    // nor is a qualified name ending in `state::set`.
    for fid in [
        "kv::set",
        "acme::state::set",
        "ns/state::set",
        "mystate::set",
    ] {
        assert_eq!(
            family(fid, Some(json!({"scope": "approval_settings"}))),
            None,
            "{fid}"
        );
    }
    // Padding and case are tolerated on the state namespace too.
    assert_eq!(
        family(" STATE::set", Some(json!({"scope": "approval_settings"}))),
        Some(Family::State)
    );
}

#[test]
fn the_scope_predicate_matches_the_contract() {
    for scope in [
        "approval",
        "approval_x",
        "approval.x",
        "APPROVAL",
        "aPpRoVaL_",
    ] {
        assert!(is_guarded_scope(scope), "{scope}");
    }
    for scope in [
        "approvals",
        "approva",
        "",
        "xapproval",
        "approval-x",
        "approval x",
    ] {
        assert!(!is_guarded_scope(scope), "{scope}");
    }
    const _: () = assert!(is_guarded_scope("approval_settings"));
}

#[test]
fn a_guard_describes_what_matched() {
    let args = json!({"scope": "approval_settings"});
    let g = builtin_guard("state::set", Some(&args)).expect("guarded");
    assert_eq!(g.describe(), "state scope approval_settings");
    let g = builtin_guard("harness::function::resolve", None).expect("guarded");
    assert_eq!(g.describe(), "release harness::function::resolve");
}

#[test]
fn rule_19_todays_filesystem_grants_are_human_only_and_status_is_not() {
    let args = json!({"session_id": "s", "root": "/"});
    for function in [
        "harness::filesystem::grant",
        "harness::filesystem::revoke",
        "HARNESS::filesystem::grant",
    ] {
        let guard = builtin_guard(function, Some(&args));
        assert_eq!(guard.map(|g| g.family), Some(Family::Release), "{function}");
    }
    for function in [
        "harness::filesystem::grants",
        "harness::filesystem::info",
        "harness::status",
    ] {
        assert!(
            builtin_guard(function, None).is_none(),
            "{function} only reads"
        );
    }
}

/// Contract §26.3: stopping any session's running call and running a call
/// in any session join the release family; the console family
/// `approval-gate::` is the worker's own, like `approval::`.
#[test]
fn rule_26_3_cancel_trigger_and_the_console_family_are_human_only() {
    for fid in [
        "harness::function::cancel",
        "harness::function::trigger",
        "HARNESS::Function::Trigger",
        " harness::function::cancel\u{200b}",
    ] {
        assert_eq!(family(fid, None), Some(Family::Release), "{fid:?}");
    }
    for fid in [
        "approval-gate::ui-content",
        "approval-gate::configuration-id",
        "Approval-Gate::anything",
        "\u{feff}approval-gate::",
    ] {
        assert_eq!(family(fid, None), Some(Family::ApprovalGate), "{fid:?}");
        assert!(is_human_only(fid), "{fid:?}");
    }
    assert_eq!(
        builtin_guard("approval-gate::ui-content", None).map(|g| g.describe()),
        Some("approval-gate approval-gate::".to_string())
    );
    for fid in [
        "harness::function::cancelled",
        "harness::function::triggers",
        "acme::harness::function::trigger",
        "approval-gates::x",
        "approval-gate:x",
        "my-approval-gate::x",
    ] {
        assert_eq!(family(fid, None), None, "{fid:?}");
    }
}
