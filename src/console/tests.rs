//! The embedded assets held to the console's rules, read by the console
//! double's own checks (in the test kit, not written here again).

use approval_gate_testkit::console::rules::{check_path, check_style, scope_of, AssetKind};

use super::*;

fn kind(a: &Asset) -> AssetKind {
    match a.trigger_type {
        SCRIPT => AssetKind::Script,
        STYLE => AssetKind::Style,
        other => panic!("no console trigger type {other}"),
    }
}

#[test]
fn rule_27_1_paths_follow_the_console_rules_under_the_family_name() {
    assert_eq!(ASSETS.len(), 2);
    for a in &ASSETS {
        assert_eq!(check_path(kind(a), a.path), Ok(()), "{}", a.path);
        assert_eq!(scope_of(a.path), "approval-gate", "{}", a.path);
        assert!(
            a.content.len() <= MAX_ASSET_BYTES,
            "{} is over 8 MiB",
            a.path
        );
        assert!(!a.content.trim().is_empty(), "{} is empty", a.path);
    }
    assert_eq!(asset(PAGE_PATH).map(|a| a.trigger_type), Some(SCRIPT));
    assert_eq!(asset(STYLES_PATH).map(|a| a.trigger_type), Some(STYLE));
}

#[test]
fn rule_27_1_every_style_rule_is_scoped_and_no_font_face() {
    let css = asset(STYLES_PATH).expect("the stylesheet").content;
    assert_eq!(check_style(css, "approval-gate"), Vec::<String>::new());
    assert!(!css.contains("@font-face"));
    // The check can fail: the same sheet with one unscoped rule added.
    let spoiled = format!("{css}\nbody {{ margin: 0; }}\n");
    assert_eq!(check_style(&spoiled, "approval-gate").len(), 1);
}

/// Every bare specifier the module imports; relative and absolute URLs are
/// left out (the module has none).
fn specifiers(js: &str) -> Vec<String> {
    let mut found = Vec::new();
    for marker in ["from \"", "import(\"", "import \""] {
        let mut rest = js;
        while let Some(at) = rest.find(marker) {
            let tail = &rest[at + marker.len()..];
            if let Some(end) = tail.find('"') {
                found.push(tail[..end].to_string());
            }
            rest = tail;
        }
    }
    found
}

#[test]
fn rule_27_1_the_module_imports_react_from_the_import_map_and_bundles_none() {
    let js = asset(PAGE_PATH).expect("the module").content;
    let imported = specifiers(js);
    assert!(!imported.is_empty(), "the module imports react");
    for specifier in &imported {
        assert!(
            [
                "react",
                "react-dom",
                "react-dom/client",
                "react/jsx-runtime"
            ]
            .contains(&specifier.as_str()),
            "{specifier} is not one of the console's import map"
        );
    }
    assert!(js.contains("export default function setup(host)"));
    // No bundled React (its production build carries this marker), and
    // nothing from the data is ever parsed as HTML.
    assert!(!js.contains("__SECRET_INTERNALS") && !js.contains("react.production"));
    for sink in [
        "dangerouslySetInnerHTML",
        "innerHTML",
        "outerHTML",
        "insertAdjacentHTML",
        "document.write",
        "eval(",
    ] {
        assert!(!js.contains(sink), "the module uses {sink}");
    }
}

#[test]
fn rule_27_1_content_answers_each_asset_and_refuses_any_other_path() {
    for a in &ASSETS {
        let answer = content(a.path).expect("served");
        assert_eq!(answer.content, a.content);
        assert_eq!(answer.content_type, a.content_type);
    }
    for other in [
        "approval-gate/other.js",
        "APPROVAL-GATE/page.js",
        "/approval-gate/page.js",
        "approval-gate/../page.js",
        "iii-observability/page.js",
        "",
    ] {
        let err = content(other).expect_err(other);
        assert!(
            err.to_string().starts_with("approval/invalid_payload: "),
            "{other}: {err}"
        );
    }
}
