//! The console double refuses what the console refuses (`harness.md`
//! § Console): a config other than `{path}`, a path against the rules or
//! of the wrong kind, a content function that answers no string content or
//! fails both tries; it accepts the rest, records a stylesheet's scope
//! findings, and forgets an asset when its registering worker goes.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use approval_gate_testkit::console::rules::AssetKind;
use approval_gate_testkit::console::ConsoleDouble;
use approval_gate_testkit::fixture::{wait_for_functions, EngineFixture};
use iii_sdk::protocol::RegisterTriggerInput;
use iii_sdk::{Error, RegisterFunction};
use serde_json::{json, Value};

const WAIT: Duration = Duration::from_secs(20);

#[tokio::test]
async fn the_console_double_refuses_what_the_console_refuses() {
    let engine = EngineFixture::start_test().await;
    let console = ConsoleDouble::start(&engine.url()).await;
    let ext = engine.client("ext").await;
    let fetches = Arc::new(AtomicUsize::new(0));
    let counted = fetches.clone();
    ext.register_function(
        "ext::ui-content",
        RegisterFunction::new_async(move |input: Value| {
            let counted = counted.clone();
            async move {
                counted.fetch_add(1, Ordering::SeqCst);
                match input["path"].as_str().unwrap_or_default() {
                    "ext/page.js" => Ok(json!({"content": "export default function setup() {}"})),
                    "ext/bad.css" => {
                        Ok(json!({"content": "body { color: red; }", "content_type": "text/css"}))
                    }
                    "ext/nocontent.js" => Ok(json!({"nope": 1})),
                    _ => Err(Error::Remote {
                        code: "unknown".into(),
                        message: "unknown asset".into(),
                        stacktrace: None,
                    }),
                }
            }
        }),
    );
    wait_for_functions(&ext, &["ext::ui-content"]).await;
    let offers = [
        ("console:script", json!({"path": "ext/page.js"})),
        ("console:style", json!({"path": "ext/bad.css"})),
        ("console:script", json!({"path": "Ext/Page.js"})),
        ("console:script", json!({"path": "ext/page.js", "extra": 1})),
        ("console:script", json!({"path": "ext/nocontent.js"})),
        ("console:script", json!({"path": "ext/fails.js"})),
        ("console:style", json!({"path": "ext/page.js"})),
    ];
    for (trigger_type, config) in &offers {
        // The 0.25 binding API (deprecated, gone in 0.26); the engine still
        // speaks it and workers offer their assets this way.
        #[allow(deprecated)]
        ext.register_trigger(RegisterTriggerInput::new(
            *trigger_type,
            "ext::ui-content",
            config.clone(),
        ))
        .expect("offer sent");
    }
    let deadline = tokio::time::Instant::now() + WAIT;
    while console.registrations().len() < offers.len() && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let seen = console.registrations();
    assert_eq!(seen.len(), offers.len(), "{seen:?}");
    let by = |kind: AssetKind, config: &Value| {
        seen.iter()
            .find(|r| r.kind == kind && &r.config == config)
            .unwrap_or_else(|| panic!("no registration of {config}"))
            .clone()
    };

    let page = by(AssetKind::Script, &offers[0].1);
    assert!(page.accepted(), "{:?}", page.refused);
    assert_eq!(
        page.content.as_deref(),
        Some("export default function setup() {}")
    );
    assert_eq!(
        page.content_type.as_deref(),
        Some("text/javascript; charset=utf-8"),
        "the kind's default"
    );
    let style = by(AssetKind::Style, &offers[1].1);
    assert!(style.accepted(), "the console only warns about scope");
    assert_eq!(style.warnings.len(), 1, "{:?}", style.warnings);
    assert_eq!(style.content_type.as_deref(), Some("text/css"));

    let refused = |config: &Value, kind: AssetKind, why: &str| {
        let r = by(kind, config);
        let reason = r
            .refused
            .clone()
            .unwrap_or_else(|| panic!("{config} was accepted"));
        assert!(reason.contains(why), "{config}: {reason}");
        r
    };
    refused(&offers[2].1, AssetKind::Script, "lowercase");
    refused(&offers[3].1, AssetKind::Script, "nothing else");
    refused(&offers[4].1, AssetKind::Script, "no string content");
    let failed = refused(&offers[5].1, AssetKind::Script, "failed 2 times");
    assert_eq!(failed.tries, 2);
    refused(&offers[6].1, AssetKind::Style, "must end with .css");
    // Fetched: the page, the style, no-content once, fails twice; the
    // refused paths and config were never fetched.
    assert_eq!(fetches.load(Ordering::SeqCst), 5);
    assert_eq!(console.live().len(), 2);

    // The registering worker goes: its assets go with it.
    ext.shutdown_async().await;
    assert!(console.wait_gone("ext", WAIT).await, "{:?}", console.live());
}
