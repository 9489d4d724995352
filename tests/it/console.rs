//! The console extension (contract §27.1, `architecture/contract.md` § The
//! console extension): a console double that owns `console:script` and
//! `console:style` receives both assets and fetches them through the
//! content function, again after the worker and the engine restart; and, in
//! headless Chromium, a console host double loads `page.js`, calls
//! `setup(host)`, and the form, the approvals page and the session chip
//! drive the worker for real.
//!
//! The browser test prints one `SKIP` line without Chromium or without the
//! npm packages `.ci/run` installs (React and esbuild, in
//! `target/console-deps`). With `UPDATE_SCREENSHOT=1` it writes
//! `architecture/img/console-form.png` and `console-approvals.png`.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use approval_gate_testkit::console::host::{react_modules, ConsoleHost};
use approval_gate_testkit::console::{ConsoleDouble, Registration};
use approval_gate_testkit::fixture::{EngineFixture, EngineKind};
use approval_gate_testkit::harness::{CallSpec, CallState};
use approval_gate_testkit::shell::{Dialect, JailShell};
use approval_gate_testkit::worker::WorkerProcess;
use base64::Engine as _;
use serde_json::{json, Value};

use crate::browser::{browser_binaries, processes_using, Browser};
use crate::common::*;

const CONTENT: &str = "approval-gate::ui-content";
const PAGE: &str = "approval-gate/page.js";
const STYLES: &str = "approval-gate/styles.css";
/// The assets as the binary embeds them.
const PAGE_JS: &str = include_str!("../../src/console/assets/page.js");
const STYLES_CSS: &str = include_str!("../../src/console/assets/styles.css");

const FORM_SHOT: &str = "architecture/img/console-form.png";
const PAGE_SHOT: &str = "architecture/img/console-approvals.png";

/// How long a re-registration may take after a restart (the SDK retries
/// every 2 s).
const BACK: Duration = Duration::from_secs(30);

/// Both registrations after `seq`, each checked: the content function, the
/// config exactly `{path}`, the embedded text, the content type, one fetch,
/// no finding.
async fn both_assets(console: &ConsoleDouble, seq: u64, when: &str) -> Vec<Registration> {
    let found = console
        .wait_for(&[PAGE, STYLES], seq, BACK)
        .await
        .unwrap_or_else(|| {
            panic!(
                "{when}: the console double did not receive both assets: {:?}",
                console.registrations()
            )
        });
    for (r, (path, text, content_type)) in found.iter().zip([
        (PAGE, PAGE_JS, "text/javascript; charset=utf-8"),
        (STYLES, STYLES_CSS, "text/css; charset=utf-8"),
    ]) {
        assert!(r.accepted(), "{when}: {path} refused: {:?}", r.refused);
        assert_eq!(r.function_id, CONTENT, "{when}");
        assert_eq!(r.config, json!({ "path": path }), "{when}");
        assert_eq!(
            r.content.as_deref(),
            Some(text),
            "{when}: {path} is not the embedded asset"
        );
        assert_eq!(r.content_type.as_deref(), Some(content_type), "{when}");
        assert_eq!(r.tries, 1, "{when}: {path} needed a second fetch");
        assert_eq!(r.warnings, Vec::<String>::new(), "{when}: {path}");
    }
    found
}

#[tokio::test]
async fn rule_27_1_the_console_receives_both_assets_and_again_after_restarts() {
    on_each_engine("console_assets", |engine| async move {
        // The worker first: its registrations wait, parked, for a console.
        let mut scene = Scene::start(engine).await;
        let console = ConsoleDouble::start(&scene.engine.url()).await;
        both_assets(&console, 0, "a console that connects after the worker").await;

        // The content function is console plumbing: internal, and any other
        // path is an invalid payload.
        let listed = scene.ok("engine::functions::list", json!({})).await;
        assert!(
            !listed.to_string().contains(CONTENT),
            "an internal function is listed"
        );
        let internal = scene
            .ok("engine::functions::list", json!({"include_internal": true}))
            .await;
        assert!(internal.to_string().contains(CONTENT));
        let err = scene
            .call(CONTENT, json!({"path": "approval-gate/other.js"}))
            .await
            .unwrap_err();
        assert_eq!(code_of(&err), "approval/invalid_payload");
        let served = scene.ok(CONTENT, json!({"path": STYLES})).await;
        assert_eq!(
            served,
            json!({"content": STYLES_CSS, "content_type": "text/css; charset=utf-8"})
        );

        // The engine's own extension passes the same checks (the oracle: a
        // console extension no one here wrote).
        if scene.engine.kind() == EngineKind::Real {
            for r in console.live().iter().filter(|r| r.function_id != CONTENT) {
                assert!(r.accepted(), "{:?} refused: {:?}", r.path, r.refused);
                assert_eq!(r.warnings, Vec::<String>::new(), "{:?}", r.path);
            }
        }

        // The worker stops: its registrations end with its connection.
        scene.stop_worker().await;
        assert!(
            console.wait_gone("approval-gate", BACK).await,
            "the assets outlived the worker"
        );
        let seq = console.last_seq();
        scene.worker = Some(start_in_process(&scene.engine).await);
        both_assets(&console, seq, "after the worker restarted").await;

        // The engine restarts: the SDK makes them again.
        let seq = console.last_seq();
        scene.engine.restart().await;
        both_assets(&console, seq, "after the engine restarted").await;

        // A console that comes back gets them again.
        console.shutdown().await;
        let console = ConsoleDouble::start(&scene.engine.url()).await;
        both_assets(&console, 0, "a console that restarted").await;

        // An instance under another name offers the same family paths.
        scene.stop_worker().await;
        assert!(console.wait_gone("approval-gate", BACK).await);
        let seq = console.last_seq();
        let renamed = WorkerProcess::spawn_with(
            Path::new(BIN),
            &scene.engine.url(),
            &[],
            &[("III_WORKER_NAME", "approval-gate-b")],
            Duration::from_secs(30),
        )
        .await;
        both_assets(&console, seq, "an instance named approval-gate-b").await;
        drop(renamed);
    })
    .await;
}

/// The value the form is shown over: templates in a secret and in a number
/// field (their defaults make the entry valid with no variable set).
fn stored_value() -> Value {
    json!({
        "default_mode": "manual",
        "rules": ["!approval::*", "?demo::other"],
        "pending_timeout_ms": "${AG_IT_PENDING_MS:600000}",
        "links": {
            "secret": "${AG_IT_LINK_SECRET:0123456789abcdef0123456789abcdef-it}",
            "public_base_url": "http://127.0.0.1:9"
        }
    })
}

fn held(session: &str, turn: &str, call: &str, function_id: &str, arguments: Value) -> CallSpec {
    CallSpec::new(session, turn, call, function_id, arguments)
}

/// `document.querySelector(css)` is there.
fn present(css: &str) -> String {
    format!("return document.querySelector({}) !== null;", json!(css))
}

async fn draft(browser: &Browser) -> Value {
    browser.script("return window.__host.draft;").await
}

/// With `UPDATE_SCREENSHOT=1`, on the test engine: the top of the page at
/// 1100 × 1300, written to `path`.
async fn write_shot(engine: &EngineFixture, browser: &Browser, path: &str) {
    if std::env::var_os("UPDATE_SCREENSHOT").is_some_and(|v| v == "1")
        && engine.kind() == EngineKind::Test
    {
        browser.resize(1100, 1300).await;
        browser.script("document.activeElement && document.activeElement.blur(); window.scrollTo(0, 0); return true;").await;
        let shot = browser
            .session(reqwest::Method::GET, "/screenshot", json!({}))
            .await;
        let png = base64::engine::general_purpose::STANDARD
            .decode(shot.as_str().expect("screenshot data"))
            .expect("base64 png");
        assert!(png.starts_with(b"\x89PNG"), "a PNG");
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, png).unwrap();
        eprintln!("wrote {}", path.display());
        browser.resize(1100, 1400).await;
    }
}

#[tokio::test]
async fn rule_27_1_browser_form_approvals_page_and_chip_drive_the_worker() {
    let Some((chromium, driver)) = browser_binaries() else {
        eprintln!("SKIP console browser test: no /usr/bin/chromium or /usr/bin/chromedriver (apt-get install chromium chromium-driver)");
        return;
    };
    let react = match react_modules() {
        Ok(react) => react,
        Err(why) => {
            eprintln!("SKIP console browser test: {why}");
            return;
        }
    };
    on_each_engine("console_browser", |engine| {
        let (chromium, driver, react) = (chromium.clone(), driver.clone(), react.clone());
        async move {
            let scene = Scene::start(engine).await;
            scene.ok("configuration::set", json!({"id": "approval-gate", "value": stored_value()})).await;
            let w = scene.worker.as_ref().unwrap();
            assert!(eventually(WAIT, || w.config().rules.len() == 2).await, "the stored value was not taken");
            let console = ConsoleDouble::start(&scene.engine.url()).await;
            both_assets(&console, 0, "before the browser").await;
            let host = ConsoleHost::start(&scene.engine.url(), console.clone(), react).await;

            // Held calls: one turn of two calls, one of three, one more.
            scene.hold(held("s_c", "t1", "c_echo", "demo::echo", json!({"n": 1, "api_key": "sk-not-shown-0123456789"}))).await;
            scene.hold(held("s_c", "t1", "c_rm", "shell::run", json!({"command": "rm -rf /tmp/x"}))).await;
            scene.hold(held("s_c", "t3", "c_other", "demo::other", json!({"n": 3}))).await;
            for cid in ["b1", "b2", "b3"] {
                scene.hold(held("s_d", "t2", cid, "demo::echo", json!({"n": cid}))).await;
            }
            // A folder prompt: the function is approved for the session, the
            // shell's jail refuses the folder.
            scene.targets.add("shell::read", Arc::new(JailShell::new(Dialect::Shell, &["/srv"]))).await;
            scene.ok("approval::approve-always", json!({"session_id": "s_f", "function_id": "shell::read"})).await;
            scene.hold(held("s_f", "t5", "c_dir", "shell::read", json!({"path": "/data/reports/q1.csv"}))).await;
            scene.hold(held("s_g", "t6", "c_git", "shell::run", json!({"command": "git status --short"}))).await;

            let browser = Browser::start(&chromium, &driver).await;
            browser.resize(1100, 1400).await;
            browser.goto(&format!("{}/#/config/approval-gate", host.url())).await;
            let ready = browser.wait_until("return window.__host && window.__host.ready && document.querySelector('.ag-form') !== null;", WAIT * 2).await;
            assert_eq!(ready, true, "the form did not render: {}", browser.script("return window.__host;").await);
            let registered = browser.script("return [window.__host.forms, window.__host.pages, window.__host.chips, window.__host.errors, window.__host.crashes];").await;
            assert!(registered[0].as_array().unwrap().contains(&json!("approval-gate")), "{registered}");
            assert!(registered[1].as_array().unwrap().contains(&json!("approvals")), "{registered}");
            assert!(registered[2].as_array().unwrap().contains(&json!("approval-gate-mode")), "{registered}");
            assert_eq!(registered[3], json!([]), "{registered}");
            assert_eq!(registered[4], json!([]), "{registered}");
            if scene.engine.kind() == EngineKind::Real {
                // The engine's own form loads in the same host: the double
                // hosts what the console hosts.
                assert!(registered[0].as_array().unwrap().contains(&json!("iii-observability")), "{registered}");
            }

            // The stored value, as the form shows it: secrets masked, the
            // templates as they are, never a raw JSON textarea.
            let shown = browser.script(
                "const t = document.querySelector('.ag-form').textContent; \
                 return {secret: document.querySelector('[data-field=\"/links/secret\"] [data-secret-state]').textContent, \
                         leaked: t.includes('0123456789abcdef'), \
                         pending: document.querySelector('[data-field=\"/pending_timeout_ms\"] input').value, \
                         textareas: document.querySelectorAll('.ag-form textarea').length};",
            ).await;
            assert_eq!(shown, json!({"secret": "set via ${AG_IT_LINK_SECRET}", "leaked": false, "pending": "${AG_IT_PENDING_MS:600000}", "textareas": 0}));

            // The mode, by a click.
            browser.click("[data-field=\"/default_mode\"] button[data-value=\"auto\"]").await;
            // A rule with an argument constraint, by clicks and typing.
            browser.click("button[data-action=\"add-rule\"]").await;
            let rule = "li[data-rule=\"2\"]";
            browser.click(&format!("{rule} .ag-choice button[data-value=\"deny\"]")).await;
            browser.type_into(&format!("{rule} input[aria-label=\"Rule 3 function\"]"), "shell::run").await;
            browser.click(&format!("{rule} button[data-action=\"add-constraint\"]")).await;
            browser.type_into(&format!("{rule} input[aria-label=\"Argument\"]"), "command").await;
            browser.type_into(&format!("{rule} input[aria-label=\"Value\"]"), "rm -rf").await;
            // Up to the top (allow and deny rules: the first match wins).
            browser.click("button[aria-label=\"Move rule 3 up\"]").await;
            browser.click("button[aria-label=\"Move rule 2 up\"]").await;
            // The reviewer.
            browser.click("#ag-reviewer-on").await;
            browser.type_into("input[aria-label=\"Reviewer function\"]", "review::call").await;
            browser.type_into("input[aria-label=\"Reviewer wait\"]", "2500").await;

            let proposed = draft(&browser).await;
            let mut expected = stored_value();
            expected["default_mode"] = json!("auto");
            expected["rules"] = json!([{"function": "shell::run", "action": "deny", "args": {"command": {"prefix": "rm -rf"}}}, "!approval::*", "?demo::other"]);
            expected["reviewer"] = json!({"function_id": "review::call", "modes": ["auto"], "timeout_ms": 2500});
            assert_eq!(proposed, expected, "the value the form proposes");

            // The draft is checked with approval::simulate before saving:
            // the held rm is denied under it.
            let checked = browser.wait_until(&present("[data-changed=\"s_c/c_rm\"]"), WAIT * 2).await;
            assert_eq!(
                checked,
                true,
                "simulate did not show the change: {}\n{:?}",
                browser.script("return document.querySelector('.ag-check').textContent;").await,
                host.calls_to("approval::simulate").last()
            );
            let simulated = host.calls_to("approval::simulate");
            let last = simulated.last().expect("a simulate call");
            assert_eq!(last.payload["from_pending"], true);
            assert_eq!(last.payload["config"]["pending_timeout_ms"], 600000, "a template is judged at its default");
            assert!(last.payload["config"].get("links").is_none(), "the secret travelled to simulate");
            write_shot(&scene.engine, &browser, FORM_SHOT).await;

            // Usable at 320 px: nothing wider than the window.
            browser.resize(320, 900).await;
            let narrow = browser.script("return {over: document.documentElement.scrollWidth > window.innerWidth, width: window.innerWidth};").await;
            assert_eq!(narrow["over"], false, "the form overflows at {}", narrow["width"]);
            browser.resize(1100, 1400).await;

            // The host saves what the form proposed; the worker takes it.
            browser.click("#host-save").await;
            let saved = browser.wait_until("return document.getElementById('host-save-status').textContent === 'saved';", WAIT).await;
            assert_eq!(saved, true, "{}", browser.script("return document.getElementById('host-save-status').textContent;").await);
            assert!(eventually(WAIT, || w.config().rules.len() == 3 && w.config().reviewer.is_some()).await, "the worker did not take the saved value");
            let raw = scene.ok("configuration::get", json!({"id": "approval-gate", "raw": true})).await;
            assert_eq!(raw["value"], expected, "the stored template");

            // A value with a field this form does not know: kept verbatim,
            // and the worker's refusal is shown before saving.
            let mut unknown = expected.clone();
            unknown["x_future"] = json!({"keep": [1, "${AG_IT_X}"]});
            browser.script(&format!("window.__host.setValue({unknown}); return true;")).await;
            let listed = browser.wait_until(&present("[data-field=\"/x_future\"]"), WAIT).await;
            assert_eq!(listed, true);
            browser.click("[data-field=\"/default_mode\"] button[data-value=\"full\"]").await;
            let mut full = unknown.clone();
            full["default_mode"] = json!("full");
            assert_eq!(draft(&browser).await, full);
            let refused = browser.wait_until("const e = document.querySelector('[data-check=\"refused\"]'); return e ? e.textContent : null;", WAIT * 2).await;
            assert!(refused.as_str().is_some_and(|t| t.contains("x_future")), "{refused}");

            // Replacing the secret: typed, never shown; Cancel puts the old one back.
            let secret = "[data-field=\"/links/secret\"]";
            browser.click(&format!("{secret} button")).await;
            browser.type_into(&format!("{secret} input[type=\"password\"]"), "a-new-secret-of-thirty-two-chars!").await;
            let replaced = browser.script(&format!("return [window.__host.draft.links.secret, document.querySelector({}).textContent.includes('thirty-two')];", json!(secret))).await;
            assert_eq!(replaced, json!(["a-new-secret-of-thirty-two-chars!", false]));
            browser.click(&format!("{secret} button")).await;
            assert_eq!(draft(&browser).await, full, "Cancel restores the secret");

            // The approvals page while the harness double holds the calls.
            browser.goto(&format!("{}/#/ext/approvals", host.url())).await;
            let listed = browser.wait_until("return document.querySelectorAll('article[data-call]').length === 8;", WAIT * 2).await;
            assert_eq!(listed, true, "{}", browser.script("return document.querySelector('.ag-page') && document.querySelector('.ag-page').textContent;").await);
            let echo = "article[data-call=\"s_c/c_echo\"]";
            let view = browser.wait_until(&format!("const a = document.querySelector({}); const t = a && a.querySelector('pre').textContent; return t && t.includes('\"n\": 1') ? t : null;", json!(echo)), WAIT).await;
            assert!(view.as_str().is_some_and(|t| !t.contains("sk-not-shown")), "the whole redacted arguments: {view}");
            let batch = browser.script("const b = document.querySelector('[data-batch=\"s_d/t2\"] button'); return b && b.textContent;").await;
            assert_eq!(batch, "Allow all 3 held calls of this turn");
            write_shot(&scene.engine, &browser, PAGE_SHOT).await;

            // Allow one.
            browser.click(&format!("{echo} button[data-decision=\"allow\"]")).await;
            assert!(eventually(WAIT, || matches!(scene.harness.state("s_c", "c_echo"), Some(CallState::Completed { .. }))).await, "the allow did not reach the harness");
            let gone = browser.wait_until(&format!("return document.querySelector({}) === null;", json!(echo)), WAIT).await;
            assert_eq!(gone, true, "a decided call stays on the page");

            // Deny one with a reason.
            let rm = "article[data-call=\"s_c/c_rm\"]";
            browser.type_into(&format!("{rm} textarea[name=\"reason\"]"), "Not on this machine.").await;
            browser.click(&format!("{rm} button[data-decision=\"deny\"]")).await;
            assert!(eventually(WAIT, || scene.harness.resolve_requests().iter().any(|r| r["function_call_id"] == "c_rm")).await);
            let release = scene.harness.resolve_requests().into_iter().find(|r| r["function_call_id"] == "c_rm").unwrap();
            assert_eq!(release["action"], "deliver");
            assert_eq!(release["content"][0]["text"], "Denied by a human: Not on this machine.");
            assert_eq!(scene.harness.target_runs("shell::run"), 0);

            // Allow and don't ask again in this session.
            browser.click("article[data-call=\"s_c/c_other\"] button[data-decision=\"allow-remember\"]").await;
            assert!(eventually(WAIT, || matches!(scene.harness.state("s_c", "c_other"), Some(CallState::Completed { .. }))).await);
            // Remembered once the harness confirmed the allow.
            let remembered = async |sid: &str, needle: &str| {
                for _ in 0..50 {
                    let settings = scene.ok("approval::get-settings", json!({"session_id": sid})).await;
                    if settings["settings"]["approved_always"].to_string().contains(needle) {
                        return true;
                    }
                    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                }
                false
            };
            assert!(remembered("s_c", "demo::other").await, "the approve-always did not follow the allow");

            // The suggested prefix: the call runs, and later plain `git status` calls in the session do not ask.
            let git = "article[data-call=\"s_g/c_git\"]";
            let offered = browser.script(&format!("const b = document.querySelector({} + ' button[data-decision=\"allow-prefix\"]'); return b && b.textContent;", json!(git))).await;
            assert_eq!(offered, json!("Allow git status … in this session"));
            browser.click(&format!("{git} button[data-decision=\"allow-prefix\"]")).await;
            assert!(eventually(WAIT, || matches!(scene.harness.state("s_g", "c_git"), Some(CallState::Completed { .. }))).await, "the allow did not reach the harness");
            assert!(remembered("s_g", "\"prefix\":\"git status\"").await, "the prefix grant did not follow the allow");
            let out = scene.harness.call(held("s_g", "t7", "c_git2", "shell::run", json!({"command": "git status -sb"}))).await;
            assert!(matches!(out, CallState::Completed { .. }), "{out:?}");
            let out = scene.harness.call(held("s_g", "t7", "c_git3", "shell::run", json!({"command": "git push"}))).await;
            assert!(out.is_held(), "{out:?}");
            scene.ok("approval::resolve", json!({"session_id": "s_g", "function_call_id": "c_git3", "decision": "deny"})).await;

            // A folder prompt, for the session.
            let dir = "article[data-call=\"s_f/c_dir\"]";
            let offered = browser.script(&format!("return Array.from(document.querySelectorAll({} + ' button[data-scope]')).map(b => b.getAttribute('data-scope'));", json!(dir))).await;
            assert_eq!(offered, json!(["once", "session", "always"]));
            browser.click(&format!("{dir} button[data-scope=\"session\"]")).await;
            assert!(eventually(WAIT, || scene.harness.grants("s_f") == vec!["/data/reports".to_string()]).await, "the session grant did not reach the harness");
            assert!(eventually(WAIT, || matches!(scene.harness.state("s_f", "c_dir"), Some(CallState::Completed { .. }))).await);

            // The turn's batch.
            browser.click("[data-batch=\"s_d/t2\"] button[data-decision=\"allow-all\"]").await;
            for cid in ["b1", "b2", "b3"] {
                assert!(eventually(WAIT, || matches!(scene.harness.state("s_d", cid), Some(CallState::Completed { .. }))).await, "{cid} did not run");
            }
            let empty = browser.wait_until("return document.querySelectorAll('article[data-call]').length === 0;", WAIT).await;
            assert_eq!(empty, true, "the page did not follow pending-resolved");
            assert!(scene.inbox().await.is_empty());

            // The session chip: its held count and a mode change.
            scene.hold(held("s_c", "t4", "c_late", "demo::echo", json!({"n": 4}))).await;
            browser.goto(&format!("{}/#/chat/s_c", host.url())).await;
            let chip = browser.wait_until("const s = document.querySelector('.ag-chip select'); const n = document.querySelector('.ag-chip__held'); return s && s.value && n ? [s.value, n.textContent] : null;", WAIT * 2).await;
            assert_eq!(chip, json!(["auto", "1 held"]), "the chip shows the default mode and the held count");
            browser.click(".ag-chip select option[value=\"manual\"]").await;
            let mode = async {
                for _ in 0..100 {
                    let s = scene.ok("approval::get-settings", json!({"session_id": "s_c"})).await;
                    if s["settings"]["mode"] == "manual" && s["source"] == "stored" {
                        return true;
                    }
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
                false
            };
            assert!(mode.await, "the chip's mode did not reach the worker");
            let set = host.calls_to("approval::set-mode");
            assert_eq!(set.last().map(|c| c.payload.clone()), Some(json!({"session_id": "s_c", "mode": "manual"})));

            // Edit and allow (contract §28): the held call's arguments fixed
            // on the page, a minute's grant; the model double follows the
            // denial and the edited call runs once.
            browser.goto(&format!("{}/#/ext/approvals", host.url())).await;
            let late = "article[data-call=\"s_c/c_late\"]";
            let offered = browser.wait_until(&present(&format!("{late} details.ag-edit")), WAIT * 2).await;
            assert_eq!(offered, true, "the page does not offer the edit: {}", browser.script("return document.querySelector('.ag-page') && document.querySelector('.ag-page').textContent;").await);
            browser.click(&format!("{late} details.ag-edit summary")).await;
            // Ctrl+A, then the edited arguments over the selection.
            browser.type_into(&format!("{late} textarea[name=\"arguments\"]"), "\u{E009}a\u{E000}{\"n\": 5}").await;
            browser.click(&format!("{late} select[name=\"ttl_ms\"] option[value=\"60000\"]")).await;
            browser.click(&format!("{late} button[data-decision=\"edit\"]")).await;
            assert!(
                eventually(WAIT, || scene.harness.resolve_requests().iter().any(|r| r["function_call_id"] == "c_late")).await,
                "the edit's denial did not reach the harness: {:?}",
                host.calls_to("approval::resolve").last()
            );
            // The host notes a call when its answer is back, which can come
            // after the release reached the harness.
            assert!(
                eventually(WAIT, || host.calls_to("approval::resolve").iter().any(|c| c.payload["function_call_id"] == "c_late")).await,
                "the page's resolve was not noted"
            );
            let sent = host.calls_to("approval::resolve").into_iter().find(|c| c.payload["function_call_id"] == "c_late").expect("the page's resolve");
            assert_eq!(sent.payload["decision"], "edit");
            assert_eq!(sent.payload["arguments"], json!({"n": 5}));
            assert_eq!(sent.payload["ttl_ms"], 60000);
            let release = scene.harness.resolve_requests().into_iter().find(|r| r["function_call_id"] == "c_late").unwrap();
            let text = release["content"][0]["text"].as_str().unwrap_or_default().to_string();
            assert!(text.starts_with("Denied by a human:") && text.ends_with(r#"call demo::echo with these arguments instead: {"n":5}"#), "{text}");
            let late_call = held("s_c", "t4", "c_late", "demo::echo", json!({"n": 4}));
            let out = scene.harness.follow_denial(&late_call, "c_late2").await.expect("the model makes the edited call");
            assert!(matches!(out, CallState::Completed { .. }), "{out:?}");
            let edited_runs = scene.harness.runs_of("demo::echo").into_iter().filter(|r| r.arguments == json!({"n": 5})).count();
            assert_eq!(edited_runs, 1, "the edited call ran once");
            let again = scene.harness.call(held("s_c", "t4", "c_late3", "demo::echo", json!({"n": 5}))).await;
            assert!(again.is_held(), "a second identical call is judged as usual: {again:?}");
            scene.ok("approval::resolve", json!({"session_id": "s_c", "function_call_id": "c_late3", "decision": "deny"})).await;

            let profile = browser.profile.path().to_path_buf();
            browser.quit().await;
            assert!(processes_using(&profile).is_empty(), "a Chromium process outlived its test");
            drop(host);
        }
    })
    .await;
}
