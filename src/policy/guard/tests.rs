use serde_json::json;

use super::*;

fn family(fid: &str, args: Option<Value>) -> Option<Family> {
    builtin_guard(fid, args.as_ref()).map(|g| g.family)
}

#[test]
fn the_namespaces_resist_case_padding_and_qualifiers() {
    for fid in [
        "approval::resolve",
        "APPROVAL::resolve",
        "Approval::Resolve",
        "CONFIGURATION::set",
        " approval::resolve",
        "\tapproval::resolve",
        "\u{200b}approval::resolve",
        "\u{feff}configuration::get",
        "\u{3000}approval::x",
        "ns/approval::resolve",
        "ns::approval::resolve",
        "a::b::configuration::set",
        "x.approval::y",
        "[approval::y]",
        "é/approval::y",
        "approval::",
    ] {
        assert!(is_human_only(fid), "{fid:?} must be human-only");
        assert!(builtin_guard(fid, None).is_some(), "{fid:?}");
    }
    for fid in [
        "approvals::list",
        "myapproval::x",
        "pre-approval::x",
        "re_approval::x",
        "approval2::x",
        "éapproval::x",
        "approval:x",
        "approval",
        "configuration",
        "configurations::get",
        "state::get",
        "",
        "approva",
        "shell::approval",
    ] {
        assert!(!is_human_only(fid), "{fid:?} must not be human-only");
    }
}

#[test]
fn harness_releases_and_grants_are_guarded_exactly() {
    for fid in [
        "harness::function::resolve",
        "HARNESS::Function::Resolve",
        " harness::workspace::grant",
        "ns/harness::workspace::revoke",
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
    // Another namespace carrying a `scope` argument is not a state call.
    assert_eq!(
        family("kv::set", Some(json!({"scope": "approval_settings"}))),
        None
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
