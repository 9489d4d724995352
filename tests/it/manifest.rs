//! `iii worker add ./approval-gate` reads `iii.worker.yaml` at the repo
//! root, and the engine rejects a manifest with an unknown key: this checks
//! the file against the keys the engine documents, and pins what
//! `approval-gate --manifest` prints for the registry.

use std::collections::BTreeMap;
use std::process::Command;

use approval_gate::ApprovalConfig;
use approval_gate::{DESCRIPTION, WORKER_NAME};
use serde_json::{json, Value};

fn manifest_yaml() -> BTreeMap<String, Value> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/iii.worker.yaml");
    let text = std::fs::read_to_string(path).expect("iii.worker.yaml at the repo root");
    serde_saphyr::from_str(&text).expect("iii.worker.yaml is a YAML mapping")
}

fn string(value: &Value, what: &str) -> String {
    value
        .as_str()
        .unwrap_or_else(|| panic!("{what} must be a string, got {value:?}"))
        .to_string()
}

/// Keys `iii worker add` accepts at the top level, and under the nested maps.
const TOP_LEVEL: &[&str] = &[
    "name",
    "description",
    "scripts",
    "env",
    "dependencies",
    "resources",
    "iii",
    "deploy",
    "manifest",
    "tags",
];
const SCRIPTS: &[&str] = &["start", "install", "setup"];
const RESOURCES: &[&str] = &["cpus", "memory"];
/// Accepted with a warning by the engine; a manifest of ours has none.
const DEPRECATED: &[&str] = &["config", "language", "entry"];

/// A semver range as `iii worker add` takes it: comparators such as `^0.23`,
/// `~0.23.1`, `>=0.23, <0.24`, `=0.23.0`, `0.23`, or `*`.
fn is_semver_range(range: &str) -> bool {
    let part = |p: &str| p.parse::<u64>().is_ok() || matches!(p, "x" | "X" | "*");
    let comparator = |c: &str| {
        let c = c.trim();
        if c == "*" {
            return true;
        }
        let version = [">=", "<=", "^", "~", ">", "<", "="]
            .iter()
            .find_map(|op| c.strip_prefix(op))
            .unwrap_or(c)
            .trim();
        let core = version.split(['-', '+']).next().unwrap_or("");
        let parts: Vec<&str> = core.split('.').collect();
        (1..=3).contains(&parts.len()) && parts.iter().all(|p| part(p))
    };
    !range.trim().is_empty() && range.split(',').all(comparator)
}

#[test]
fn semver_ranges_are_recognised() {
    for ok in [
        "^0.23",
        "~0.23.1",
        ">=0.23, <0.24",
        "=0.23.0",
        "0.23",
        "*",
        "^1.2.3-rc.4",
    ] {
        assert!(is_semver_range(ok), "{ok}");
    }
    for bad in [
        "",
        "latest",
        "^",
        "0.23.x.1",
        "^^0.23",
        "v0.23",
        ">=0.23 <0.24",
    ] {
        assert!(!is_semver_range(bad), "{bad}");
    }
}

#[test]
fn iii_worker_yaml_uses_only_documented_keys() {
    let manifest = manifest_yaml();
    for key in manifest.keys() {
        assert!(
            !DEPRECATED.contains(&key.as_str()),
            "iii.worker.yaml: {key} is deprecated (the engine warns); drop it"
        );
        assert!(
            TOP_LEVEL.contains(&key.as_str()),
            "iii.worker.yaml: unknown key {key} (the engine rejects it); documented: {TOP_LEVEL:?}"
        );
    }

    let name = string(&manifest["name"], "name");
    assert!(
        !name.is_empty() && !name.contains(['/', '\\']) && name != "." && name != "..",
        "name must be one path segment, got {name:?}"
    );
    assert_eq!(
        name, WORKER_NAME,
        "the manifest name is the worker name notification workers look for"
    );
    assert_eq!(
        string(&manifest["description"], "description"),
        DESCRIPTION,
        "one description for the manifest, --manifest and engine::workers::list"
    );

    let scripts = manifest["scripts"]
        .as_object()
        .expect("scripts is a mapping");
    for key in scripts.keys() {
        let key = key.as_str();
        assert!(
            SCRIPTS.contains(&key),
            "scripts.{key} is not a documented script"
        );
    }
    let start = string(&scripts["start"], "scripts.start");
    assert!(
        start
            .split_whitespace()
            .next()
            .is_some_and(|cmd| cmd.ends_with("approval-gate")),
        "scripts.start must run the approval-gate binary, got {start:?}"
    );
    assert!(
        !start.contains("--url"),
        "scripts.start must not pin --url: the engine passes III_URL, which the binary reads"
    );
    if let Some(install) = scripts.get("install") {
        let install = string(install, "scripts.install");
        assert!(
            install.contains("cargo build --release"),
            "scripts.install must build what scripts.start runs, got {install:?}"
        );
    }

    if let Some(resources) = manifest.get("resources") {
        for key in resources
            .as_object()
            .expect("resources is a mapping")
            .keys()
        {
            assert!(
                RESOURCES.contains(&key.as_str()),
                "resources.{key} is not documented"
            );
        }
    }
    if let Some(env) = manifest.get("env") {
        for (name, v) in env.as_object().expect("env is a mapping") {
            string(v, &format!("env.{name}"));
        }
    }

    let dependencies = manifest["dependencies"]
        .as_object()
        .expect("dependencies is a mapping of worker name to semver range");
    let mut names = Vec::new();
    for (dep, range) in dependencies {
        let range = string(range, &format!("dependencies.{dep}"));
        assert!(
            is_semver_range(&range),
            "dependencies.{dep}: {range:?} is not a semver range"
        );
        names.push(dep);
    }
    names.sort();
    assert_eq!(
        names,
        ["configuration", "iii-state"],
        "the worker needs the state worker (the inbox, settings) and the configuration worker (its policy)"
    );
}

#[test]
fn manifest_flag_prints_the_registry_manifest() {
    let output = Command::new(env!("CARGO_BIN_EXE_approval-gate"))
        .arg("--manifest")
        // Would be used if it connected; --manifest must not.
        .env("III_URL", "ws://127.0.0.1:1")
        .output()
        .expect("the binary runs");
    assert!(output.status.success(), "{output:?}");
    let printed: Value = serde_json::from_slice(&output.stdout).expect("--manifest prints JSON");
    assert_eq!(
        printed,
        json!({
            "name": "approval-gate",
            "version": env!("CARGO_PKG_VERSION"),
            "description": DESCRIPTION,
            "default_config": {
                "default_mode": "manual",
                "rules": ["!approval::*"],
                "grant_reask_limit": 3
            },
            "supported_targets": [
                "x86_64-unknown-linux-gnu",
                "aarch64-unknown-linux-gnu",
                "x86_64-apple-darwin",
                "aarch64-apple-darwin"
            ]
        })
    );
    assert_eq!(
        printed["default_config"],
        ApprovalConfig::defaults_json(),
        "default_config is the defaults the worker seeds its configuration entry with"
    );
    assert_eq!(
        printed["name"],
        string(&manifest_yaml()["name"], "name").as_str(),
        "--manifest and iii.worker.yaml name the same worker"
    );
    assert!(
        output.stderr.is_empty(),
        "--manifest logs nothing: {}",
        String::from_utf8_lossy(&output.stderr)
    );
}

#[test]
fn default_config_fits_the_configuration_schema() {
    let schema = approval_gate::config_schema();
    let validator = jsonschema::Validator::new(&schema).expect("the configuration schema compiles");
    let defaults = ApprovalConfig::defaults_json();
    let errors: Vec<String> = validator
        .iter_errors(&defaults)
        .map(|e| e.to_string())
        .collect();
    assert!(
        errors.is_empty(),
        "defaults rejected by the schema: {errors:?}"
    );
}

/// The README is what a newcomer reads first, and the security summary
/// (one row per failure the worker answers): it stays under 480 lines, and every test
/// its security table names exists (a renamed or deleted test fails here,
/// not silently in the table).
#[test]
fn the_readme_stays_short_and_its_security_table_names_real_tests() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let readme = std::fs::read_to_string(root.join("README.md")).expect("README.md");
    let lines = readme.lines().count();
    assert!(
        lines <= 480,
        "README.md has {lines} lines; the limit is 480"
    );
    let suites: String = std::fs::read_dir(root.join("tests/it"))
        .expect("tests/it")
        .filter_map(|e| e.ok())
        .filter(|e| e.path().extension().is_some_and(|x| x == "rs"))
        .map(|e| std::fs::read_to_string(e.path()).unwrap_or_default())
        .collect();
    let section = readme
        .split("\n## Security")
        .nth(1)
        .and_then(|s| s.split("\n## ").next())
        .expect("a Security section");
    let mut named = 0;
    for cell in section.split('`').skip(1).step_by(2) {
        let Some((module, test)) = cell.split_once("::") else {
            continue;
        };
        let file = root.join(format!("tests/it/{module}.rs"));
        let text = std::fs::read_to_string(&file).unwrap_or_default();
        if test == "*" {
            assert!(
                text.contains("#[test]") || text.contains("#[tokio::test]"),
                "README's security table names the suite {module}, which has no test"
            );
            continue;
        }
        named += 1;
        assert!(
            suites.contains(&format!("fn {test}(")),
            "README's security table names {module}::{test}, which does not exist"
        );
        assert!(
            text.contains(&format!("fn {test}(")),
            "{test} is not in {}",
            file.display()
        );
    }
    assert!(named >= 10, "the table names {named} tests");
}
