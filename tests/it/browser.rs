//! The approval page in a real browser: headless Chromium driven over
//! WebDriver (the OS packages `chromium` and `chromium-driver`). A link from
//! a `pending-created` event is opened and decided by clicking, as a person
//! would: Allow (the harness double sees `execute`), Deny with a reason, and
//! a folder prompt answered with Session; the page is checked for one
//! column at 375 px.
//!
//! Prints one `SKIP` line when no browser is installed. With
//! `UPDATE_SCREENSHOT=1` it writes the README's screenshot,
//! `architecture/img/approval-page.png`.
//!
//! W3C WebDriver is JSON over HTTP: the few commands used here are sent with
//! the HTTP client the link tests use, rather than a WebDriver crate (which
//! would add some thirty crates to the build). chromedriver and every
//! Chromium process of a test are ended by their PIDs when it ends.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use approval_gate_testkit::harness::CallState;
use approval_gate_testkit::shell::{Dialect, JailShell};
use base64::Engine as _;
use serde_json::{json, Value};

use crate::common::*;
use crate::links::{link_of, spec, Links};

/// The W3C name of an element reference in WebDriver answers.
const ELEMENT: &str = "element-6066-11e4-a52e-4f735466cecf";

/// The README's screenshot.
const SCREENSHOT: &str = "architecture/img/approval-page.png";

/// `(chromium, chromedriver)`: `CHROMIUM_BIN` / `CHROMEDRIVER_BIN`, else
/// the Debian packages' paths; `None` when either is missing.
pub(crate) fn browser_binaries() -> Option<(PathBuf, PathBuf)> {
    let pick = |var: &str, default: &str| {
        std::env::var_os(var)
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from(default))
    };
    let chromium = pick("CHROMIUM_BIN", "/usr/bin/chromium");
    let driver = pick("CHROMEDRIVER_BIN", "/usr/bin/chromedriver");
    (chromium.is_file() && driver.is_file()).then_some((chromium, driver))
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free loopback port")
}

/// One chromedriver and one browser session.
pub(crate) struct Browser {
    driver: Child,
    base: String,
    session: String,
    http: reqwest::Client,
    /// The fresh profile; its path also finds this test's Chromium processes.
    pub(crate) profile: tempfile::TempDir,
}

impl Browser {
    pub(crate) async fn start(chromium: &Path, driver: &Path) -> Browser {
        let port = free_port();
        let profile = tempfile::Builder::new()
            .prefix("approval-gate-chromium-")
            .tempdir()
            .expect("profile dir");
        let child = Command::new(driver)
            .arg(format!("--port={port}"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("chromedriver starts");
        let http = crate::links::http_client();
        let base = format!("http://127.0.0.1:{port}");
        let mut browser = Browser {
            driver: child,
            base,
            session: String::new(),
            http,
            profile,
        };
        let ready = eventually_ready(&browser).await;
        assert!(ready, "chromedriver did not become ready");
        let args = [
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--disable-dev-shm-usage",
            "--window-size=390,900",
        ]
        .iter()
        .map(|a| a.to_string())
        .chain(std::iter::once(format!(
            "--user-data-dir={}",
            browser.profile.path().display()
        )))
        .collect::<Vec<_>>();
        let created = browser
            .command(
                reqwest::Method::POST,
                "/session",
                json!({"capabilities": {"alwaysMatch": {
                    "browserName": "chrome",
                    "goog:chromeOptions": {"binary": chromium, "args": args}
                }}}),
            )
            .await;
        browser.session = created["sessionId"]
            .as_str()
            .unwrap_or_else(|| panic!("no session: {created}"))
            .to_string();
        browser
    }

    /// One WebDriver command; its `value`.
    pub(crate) async fn command(&self, method: reqwest::Method, path: &str, body: Value) -> Value {
        let url = format!("{}{path}", self.base);
        let mut request = self.http.request(method.clone(), &url);
        if method != reqwest::Method::GET && method != reqwest::Method::DELETE {
            request = request.json(&body);
        }
        let answer: Value = request
            .timeout(Duration::from_secs(60))
            .send()
            .await
            .unwrap_or_else(|e| panic!("{method} {path}: {e}"))
            .json()
            .await
            .unwrap_or_else(|e| panic!("{method} {path}: {e}"));
        let value = answer["value"].clone();
        if value.get("error").is_some() {
            panic!("{method} {path}: {value}");
        }
        value
    }

    pub(crate) async fn session(&self, method: reqwest::Method, path: &str, body: Value) -> Value {
        let path = format!("/session/{}{path}", self.session);
        self.command(method, &path, body).await
    }

    pub(crate) async fn goto(&self, url: &str) {
        self.session(reqwest::Method::POST, "/url", json!({ "url": url }))
            .await;
    }

    pub(crate) async fn resize(&self, width: u32, height: u32) {
        self.session(
            reqwest::Method::POST,
            "/window/rect",
            json!({"width": width, "height": height}),
        )
        .await;
    }

    pub(crate) async fn find(&self, css: &str) -> String {
        let found = self
            .session(
                reqwest::Method::POST,
                "/element",
                json!({"using": "css selector", "value": css}),
            )
            .await;
        found[ELEMENT]
            .as_str()
            .unwrap_or_else(|| panic!("no element {css}: {found}"))
            .to_string()
    }

    pub(crate) async fn click(&self, css: &str) {
        let element = self.find(css).await;
        self.session(
            reqwest::Method::POST,
            &format!("/element/{element}/click"),
            json!({}),
        )
        .await;
    }

    pub(crate) async fn type_into(&self, css: &str, text: &str) {
        let element = self.find(css).await;
        self.session(
            reqwest::Method::POST,
            &format!("/element/{element}/value"),
            json!({ "text": text }),
        )
        .await;
    }

    pub(crate) async fn script(&self, script: &str) -> Value {
        self.session(
            reqwest::Method::POST,
            "/execute/sync",
            json!({"script": script, "args": []}),
        )
        .await
    }

    /// Evaluates `script` (a function body that returns a value) every
    /// 50 ms until it returns something truthy or `timeout` passes; the
    /// last value.
    pub(crate) async fn wait_until(&self, script: &str, timeout: Duration) -> Value {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let value = self.script(script).await;
            let truthy = !matches!(&value, Value::Null | Value::Bool(false))
                && value != json!(0)
                && value != json!("");
            if truthy || tokio::time::Instant::now() >= deadline {
                return value;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Waits until the result panel `outcome` is shown; the panels shown.
    async fn wait_for_outcome(&self, outcome: &str) -> Vec<String> {
        let script = "return Array.from(document.querySelectorAll('[data-outcome]')).filter(p => !p.hidden).map(p => p.getAttribute('data-outcome'));";
        let deadline = tokio::time::Instant::now() + WAIT * 2;
        loop {
            let shown: Vec<String> =
                serde_json::from_value(self.script(script).await).unwrap_or_default();
            if shown.iter().any(|s| s == outcome) || tokio::time::Instant::now() >= deadline {
                return shown;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// A PNG of the whole page (not only the viewport).
    pub(crate) async fn screenshot(&self) -> Vec<u8> {
        let metrics = self
            .session(
                reqwest::Method::POST,
                "/goog/cdp/execute",
                json!({"cmd": "Page.getLayoutMetrics", "params": {}}),
            )
            .await;
        let size = &metrics["cssContentSize"];
        let shot = self
            .session(
                reqwest::Method::POST,
                "/goog/cdp/execute",
                json!({"cmd": "Page.captureScreenshot", "params": {
                    "format": "png",
                    "captureBeyondViewport": true,
                    "clip": {"x": 0, "y": 0, "width": size["width"], "height": size["height"], "scale": 1}
                }}),
            )
            .await;
        base64::engine::general_purpose::STANDARD
            .decode(shot["data"].as_str().expect("screenshot data"))
            .expect("base64 png")
    }

    /// Ends the session, then chromedriver and any Chromium process of this
    /// test's profile, each by its PID.
    pub(crate) async fn quit(mut self) {
        if !self.session.is_empty() {
            let path = format!("/session/{}", self.session);
            let _ = self
                .http
                .delete(format!("{}{path}", self.base))
                .timeout(Duration::from_secs(20))
                .send()
                .await;
            self.session.clear();
        }
        self.end_processes();
    }

    fn end_processes(&mut self) {
        let _ = Command::new("kill")
            .arg("-TERM")
            .arg(self.driver.id().to_string())
            .stderr(Stdio::null())
            .status();
        for _ in 0..50 {
            if matches!(self.driver.try_wait(), Ok(Some(_))) {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.driver.kill();
        let _ = self.driver.wait();
        // What is left is killed, and waited for (a killed process
        // lingers until the kernel has torn it down, and a helper started
        // meanwhile is killed on the next pass); bounded, so a process that
        // will not end still fails the test's check.
        for _ in 0..100 {
            let left = processes_using(self.profile.path());
            if left.is_empty() {
                break;
            }
            for pid in left {
                let _ = Command::new("kill")
                    .arg("-KILL")
                    .arg(pid.to_string())
                    .stderr(Stdio::null())
                    .status();
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        self.end_processes();
    }
}

async fn eventually_ready(browser: &Browser) -> bool {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        let ready = browser
            .http
            .get(format!("{}/status", browser.base))
            .send()
            .await
            .ok()
            .map(|r| r.json::<Value>());
        if let Some(answer) = ready {
            if answer.await.is_ok_and(|v| v["value"]["ready"] == true) {
                return true;
            }
        }
        if tokio::time::Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// PIDs of the processes whose command line names `profile` (this test's
/// Chromium and its helpers), read from /proc.
pub(crate) fn processes_using(profile: &Path) -> Vec<u32> {
    let needle = profile.to_string_lossy().to_string();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(|e| e.ok())
        .filter_map(|e| e.file_name().to_str().and_then(|n| n.parse::<u32>().ok()))
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline"))
                .map(|raw| String::from_utf8_lossy(&raw).contains(&needle))
                .unwrap_or(false)
        })
        .collect()
}

#[tokio::test]
async fn browser_allow_deny_and_a_folder_session_grant_by_clicking() {
    let Some((chromium, driver)) = browser_binaries() else {
        eprintln!(
            "SKIP browser tests: no /usr/bin/chromium or /usr/bin/chromedriver (apt-get install chromium chromium-driver)"
        );
        return;
    };
    on_each_engine("browser_decides", |engine| {
        let (chromium, driver) = (chromium.clone(), driver.clone());
        async move {
            let l = Links::start(engine, json!(["!approval::*"]), None).await;
            l.scene
                .targets
                .add("shell::read", Arc::new(JailShell::new(Dialect::Shell, &["/srv"])))
                .await;
            l.scene.sessions.put(
                "s_b",
                json!({"title": "Fix the flaky deploy", "metadata": {"owner": "ana"}}),
            );
            let created = l.scene.sink("br-created", "approval::pending-created", json!({})).await;
            let browser = Browser::start(&chromium, &driver).await;

            // Allow.
            let args = json!({"command": "git push --force origin main", "cwd": "/work/app", "env": {"GITHUB_TOKEN": "ghp_not_shown"}});
            assert!(l.scene.harness.call(spec("s_b", "c1", "shell::run", args)).await.is_held());
            let allow = link_of(&created, 0).await;
            browser.resize(375, 900).await;
            browser.goto(&allow).await;
            let title = browser.script("return document.title;").await;
            assert_eq!(title, "Approval needed");
            let one_column = browser
                .script(
                    "const b = Array.from(document.querySelectorAll('#choices button')).map(e => e.getBoundingClientRect()); \
                     return {overflow: document.documentElement.scrollWidth > window.innerWidth, \
                             buttons: b.length, column: b.every(r => Math.abs(r.left - b[0].left) < 1 && r.width > 300)};",
                )
                .await;
            assert_eq!(one_column, json!({"overflow": false, "buttons": 3, "column": true}), "one column at 375 px");
            if std::env::var_os("UPDATE_SCREENSHOT").is_some_and(|v| v == "1") && l.scene.engine.test_engine().is_some() {
                browser.resize(420, 900).await;
                let png = browser.screenshot().await;
                assert!(png.starts_with(b"\x89PNG"), "a PNG");
                let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(SCREENSHOT);
                std::fs::create_dir_all(path.parent().unwrap()).unwrap();
                std::fs::write(&path, png).unwrap();
                eprintln!("wrote {}", path.display());
            }
            browser.click("button.allow").await;
            let shown = browser.wait_for_outcome("allowed").await;
            assert_eq!(shown, vec!["allowed".to_string()]);
            let release = l.scene.harness.resolve_requests().last().cloned().unwrap();
            assert_eq!(release["function_call_id"], "c1");
            assert_eq!(release["action"], "execute");
            assert!(matches!(l.scene.harness.state("s_b", "c1"), Some(CallState::Completed { .. })));
            let hidden = browser.script("return document.getElementById('choices').hidden;").await;
            assert_eq!(hidden, true, "the choices go once decided");

            // Deny with a reason.
            assert!(l.scene.harness.call(spec("s_b", "c2", "shell::run", json!({"command": "rm -rf /"}))).await.is_held());
            let deny = link_of(&created, 1).await;
            browser.goto(&deny).await;
            browser.type_into("#reason", "Too dangerous; list the files first.").await;
            browser.click("button.deny").await;
            assert_eq!(browser.wait_for_outcome("denied").await, vec!["denied".to_string()]);
            let release = l.scene.harness.resolve_requests().last().cloned().unwrap();
            assert_eq!(release["function_call_id"], "c2");
            assert_eq!(release["action"], "deliver");
            assert_eq!(release["content"][0]["text"], "Denied by a human: Too dangerous; list the files first.");
            assert_eq!(l.scene.harness.target_runs("shell::run"), 1);

            // Reloading a decided link shows that it is gone.
            browser.goto(&deny).await;
            let heading = browser.script("return document.querySelector('h1').textContent;").await;
            assert_eq!(heading, "This approval link is no longer valid");

            // A folder prompt answered with Session (the function itself is
            // approved for the session, so the gate lets the call through and
            // the jail's refusal is what asks).
            l.scene.ok("approval::approve-always", json!({"session_id": "s_b", "function_id": "shell::read"})).await;
            assert!(l.scene.harness.call(spec("s_b", "c3", "shell::read", json!({"path": "/data/reports/q1.csv"}))).await.is_held());
            let folder = link_of(&created, 2).await;
            assert_eq!(created.events()[2]["kind"], "filesystem_access");
            browser.goto(&folder).await;
            let shown_dir = browser.script("return document.body.textContent.includes('/data/reports');").await;
            assert_eq!(shown_dir, true);
            browser.click("button[data-scope=\"session\"]").await;
            assert_eq!(browser.wait_for_outcome("allowed").await, vec!["allowed".to_string()]);
            assert_eq!(l.scene.harness.grants("s_b"), vec!["/data/reports".to_string()]);
            let state = l.scene.harness.state("s_b", "c3").unwrap();
            assert!(matches!(&state, CallState::Completed { result } if result["is_error"] != true), "{state:?}");
            assert!(l.scene.inbox().await.is_empty());

            let profile = browser.profile.path().to_path_buf();
            browser.quit().await;
            assert!(processes_using(&profile).is_empty(), "a Chromium process outlived its test");
        }
    })
    .await;
}

#[tokio::test]
async fn rule_24_browser_allow_all_held_calls_of_a_turn_by_clicking() {
    let Some((chromium, driver)) = browser_binaries() else {
        eprintln!("SKIP browser tests: no /usr/bin/chromium or /usr/bin/chromedriver");
        return;
    };
    on_each_engine("browser_allow_all", |engine| {
        let (chromium, driver) = (chromium.clone(), driver.clone());
        async move {
            let l = Links::start(engine, json!(["!approval::*"]), None).await;
            let created = l.scene.sink("ba-created", "approval::pending-created", json!({})).await;
            for cid in ["m1", "m2", "m3"] {
                let out = l.scene.harness.call(spec("s_m", cid, "demo::echo", json!({"n": cid}))).await;
                assert!(out.is_held(), "{cid}: {out:?}");
            }
            let link = link_of(&created, 1).await;
            let browser = Browser::start(&chromium, &driver).await;
            browser.resize(375, 900).await;
            browser.goto(&link).await;
            let offer = browser
                .script("const b = document.querySelector('button.allow-all'); return b ? b.firstChild.textContent : null;")
                .await;
            assert_eq!(offer, "Allow all 3 held calls of this turn");
            let listed = browser.script("return document.querySelectorAll('ul.batch li').length;").await;
            assert_eq!(listed, 3);
            browser.click("button.allow-all").await;
            assert_eq!(browser.wait_for_outcome("allowed-all").await, vec!["allowed-all".to_string()]);
            for cid in ["m1", "m2", "m3"] {
                assert!(
                    matches!(l.scene.harness.state("s_m", cid), Some(CallState::Completed { .. })),
                    "{cid} ran"
                );
            }
            assert!(l.scene.inbox().await.is_empty());
            let profile = browser.profile.path().to_path_buf();
            browser.quit().await;
            assert!(processes_using(&profile).is_empty(), "a Chromium process outlived its test");
        }
    })
    .await;
}
