//! Approval links and the inbox page (contract §13), over real HTTP through
//! the engine's HTTP worker: every status code and header the endpoints
//! answer with, the decisions they carry, and what they must refuse.
//! `browser` drives the same pages in a real browser.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use approval_gate_testkit::engine::TestEngine;
use approval_gate_testkit::fixture::{call, plain_client, wait_for_functions, EngineFixture};
use approval_gate_testkit::harness::{
    CallSpec, CallState, Generation, HarnessDouble, HarnessOptions,
};
use approval_gate_testkit::shell::{Dialect, JailShell};
use approval_gate_testkit::targets::TargetWorker;
use approval_gate_testkit::worker::WorkerProcess;
use serde_json::{json, Value};

use crate::common::*;

/// The link secret every scene signs with (≥ 32 characters).
pub const SECRET: &str = "link-secret-for-tests-0123456789abcdef";
/// The inbox's bearer token (≥ 32 characters, like the secret).
pub const INBOX_TOKEN: &str = "inbox-token-for-tests-4f2a-0123456789";

/// A scene whose worker has links on, pointing at the engine's HTTP port.
pub struct Links {
    pub scene: Scene,
    pub http: reqwest::Client,
    /// `public_base_url`: the engine's HTTP worker.
    pub base: String,
}

/// The configuration a links scene boots with.
pub fn config(base: &str, rules: Value, inbox_token: Option<&str>) -> Value {
    let mut links = json!({"secret": SECRET, "public_base_url": base});
    if let Some(token) = inbox_token {
        links["inbox_token"] = json!(token);
    }
    json!({"default_mode": "manual", "rules": rules, "grant_reask_limit": 3, "links": links})
}

/// An HTTP client that follows no redirect and keeps no idle connection.
pub fn http_client() -> reqwest::Client {
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .pool_max_idle_per_host(0)
        .build()
        .expect("http client")
}

impl Links {
    /// Peers, then the worker with links on; waits until the routes answer.
    pub async fn start(engine: EngineFixture, rules: Value, inbox_token: Option<&str>) -> Links {
        Self::start_on(engine, Generation::DEFAULT, rules, inbox_token).await
    }

    /// As [`Links::start`], on the harness of `generation`.
    pub async fn start_on(
        engine: EngineFixture,
        generation: Generation,
        rules: Value,
        inbox_token: Option<&str>,
    ) -> Links {
        let base = engine.http_url();
        let seed = config(&base, rules, inbox_token);
        let options = HarnessOptions::generation(generation);
        let scene = Scene::start_seeded(engine, options, Some(seed)).await;
        let http = http_client();
        let links = Links { scene, http, base };
        links.wait_for_status("/approvals/x", 403).await;
        links
    }

    /// Polls `GET <base><path>` until it answers `status`.
    pub async fn wait_for_status(&self, path: &str, status: u16) {
        let url = format!("{}{path}", self.base);
        let mut last = 0;
        let reached = eventually_async(
            WAIT * 2,
            || {
                let request = self.http.get(&url).send();
                async move { request.await.map(|r| r.status().as_u16()).unwrap_or(0) }
            },
            |got| {
                last = got;
                got == status
            },
        )
        .await;
        assert!(reached, "GET {url} never answered {status} (last {last})");
    }

    /// A POST the approval page itself would send.
    pub async fn decide(&self, url: &str, body: Value) -> reqwest::Response {
        self.http
            .post(url)
            .header("Origin", &self.base)
            .header("Sec-Fetch-Site", "same-origin")
            .json(&body)
            .send()
            .await
            .expect("POST")
    }

    /// The record of a held call, as `get-pending` shows it.
    pub async fn pending(&self, sid: &str, cid: &str) -> Value {
        self.scene.get_pending(sid, cid).await
    }

    /// The `approval_url` of a held call's record.
    pub async fn approval_url(&self, sid: &str, cid: &str) -> String {
        self.pending(sid, cid).await["pending"]["approval_url"]
            .as_str()
            .expect("a link")
            .to_string()
    }

    /// The HTML page `url` answers.
    pub async fn page(&self, url: &str) -> String {
        self.http
            .get(url)
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap()
    }
}

/// The `approval_url` of the `n`th `pending-created` event.
pub async fn link_of(created: &Sink, n: usize) -> String {
    let events = created.wait_for(n + 1, WAIT).await;
    events
        .get(n)
        .and_then(|e| e["approval_url"].as_str())
        .unwrap_or_else(|| panic!("event {n} has no approval_url: {events:#?}"))
        .to_string()
}

pub fn spec(sid: &str, cid: &str, fid: &str, args: Value) -> CallSpec {
    // The session workspace in both generations' spellings.
    CallSpec::new(sid, format!("t_{sid}"), cid, fid, args)
        .with_working_dir(&format!("/w/{sid}"))
        .with_fs_root(&format!("/w/{sid}"))
}

/// The headers every link answer carries.
#[track_caller]
fn assert_security_headers(response: &reqwest::Response, content_type: &str) {
    let h = response.headers();
    let get = |name: &str| {
        h.get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_string()
    };
    assert_eq!(get("content-type"), content_type);
    let csp = get("content-security-policy");
    for part in [
        "default-src 'none'",
        "script-src 'sha256-",
        "style-src 'sha256-",
        "connect-src 'self'",
        "base-uri 'none'",
        "form-action 'none'",
        "frame-ancestors 'none'",
    ] {
        assert!(csp.contains(part), "CSP lacks {part}: {csp}");
    }
    assert!(!csp.contains("unsafe-inline"), "{csp}");
    assert_eq!(get("cache-control"), "no-store");
    assert_eq!(get("referrer-policy"), "no-referrer");
    assert_eq!(get("x-content-type-options"), "nosniff");
    assert_eq!(get("x-frame-options"), "DENY");
}

const HTML: &str = "text/html; charset=utf-8";
const JSON: &str = "application/json";

/// The token part of a link, and the same link with one character of the
/// token changed.
fn tampered(url: &str) -> String {
    let (head, token) = url.rsplit_once('/').unwrap();
    let mut chars: Vec<char> = token.chars().collect();
    let at = chars.len() / 2;
    chars[at] = if chars[at] == 'A' { 'B' } else { 'A' };
    format!("{head}/{}", chars.into_iter().collect::<String>())
}

each_generation! {
    async fn links_a_held_call_gets_a_link_whose_page_decides_it(generation) {
        on_each_engine(&label("links_page_decides", generation), |engine| async move {
            let l = Links::start_on(engine, generation, json!(["!approval::*"]), None).await;
            let created = l
                .scene
                .sink("lk-created", "approval::pending-created", json!({}))
                .await;
            let args = json!({
                "cmd": "<script>alert(1)</script>",
                "note": "\"onload=alert(1) </textarea>",
                "api_key": "sk-live-should-never-show-0000"
            });
            l.scene.hold(spec("s_l", "c1", "demo::echo", args)).await;

            // One link, the same in the event, the list and get-pending.
            let url = link_of(&created, 0).await;
            assert!(url.starts_with(&format!("{}/approvals/", l.base)), "{url}");
            let listed = l.scene.inbox().await;
            assert_eq!(listed.len(), 1);
            assert_eq!(listed[0]["approval_url"], url);
            assert_eq!(l.pending("s_l", "c1").await["pending"]["approval_url"], url);
            // State holds no link: it is made when the record is shown.
            let stored = l.scene.pending_in_state().await;
            assert_eq!(stored.len(), 1);
            assert!(stored[0].get("approval_url").is_none(), "{}", stored[0]);

            // GET: the page, with every security header.
            let r = l.http.get(&url).send().await.unwrap();
            assert_eq!(r.status(), 200);
            assert_security_headers(&r, HTML);
            let page = r.text().await.unwrap();
            assert!(page.contains("<meta name=\"viewport\""));
            assert!(page.contains("demo::echo"));
            assert!(
                page.contains("&lt;script&gt;alert(1)&lt;/script&gt;"),
                "escaped"
            );
            assert!(
                !page.contains("<script>alert(1)"),
                "agent text never becomes markup"
            );
            assert!(!page.contains("</textarea>\""));
            assert!(
                !page.contains("sk-live-should-never-show"),
                "arguments are redacted"
            );
            assert!(page.contains("&lt;redacted&gt;"));
            assert!(
                !page.contains(&url),
                "the token is not repeated in the page"
            );
            assert_eq!(page.matches("<script>").count(), 1, "one inline script");

            // POST allow: the same path as approval::resolve; the harness runs it.
            let r = l.decide(&url, json!({"decision": "allow"})).await;
            assert_eq!(r.status(), 200);
            assert_security_headers(&r, JSON);
            assert_eq!(r.json::<Value>().await.unwrap(), json!({"resolved": true}));
            let releases = l.scene.harness.resolve_requests();
            assert_eq!(releases.last().unwrap()["action"], "execute");
            assert!(matches!(
                l.scene.harness.state("s_l", "c1"),
                Some(CallState::Completed { .. })
            ));
            assert_eq!(l.scene.harness.target_runs("demo::echo"), 1);

            // The link died with its record: a second POST and a GET are 410.
            let r = l.decide(&url, json!({"decision": "allow"})).await;
            assert_eq!(r.status(), 410);
            assert_security_headers(&r, JSON);
            let body: Value = r.json().await.unwrap();
            assert_eq!(body["error"]["code"], "gone");
            assert_eq!(body["error"]["reason"], "resolved");
            let r = l.http.get(&url).send().await.unwrap();
            assert_eq!(r.status(), 410);
            assert_security_headers(&r, HTML);
            assert!(r.text().await.unwrap().contains("already been decided"));
            assert_eq!(
                l.scene.harness.target_runs("demo::echo"),
                1,
                "nothing ran twice"
            );
        })
        .await;
    }
}

each_generation! {
    async fn links_refuse_forged_cross_site_form_and_malformed_decisions(generation) {
        on_each_engine(&label("links_refusals", generation), |engine| async move {
            let l = Links::start_on(engine, generation, json!(["!approval::*"]), None).await;
            let created = l.scene.sink("rf-created", "approval::pending-created", json!({})).await;
            assert!(l.scene.harness.call(spec("s_r", "c1", "demo::echo", json!({"x": 1}))).await.is_held());
            let url = link_of(&created, 0).await;

            // A token this worker did not sign: 403, page and JSON alike.
            let forged = tampered(&url);
            let r = l.http.get(&forged).send().await.unwrap();
            assert_eq!(r.status(), 403);
            assert_security_headers(&r, HTML);
            assert!(r.text().await.unwrap().contains("This approval link is not valid"));
            for bad in [forged.clone(), format!("{}/approvals/short", l.base), format!("{}/approvals/{}", l.base, "A".repeat(2000))] {
                let r = l.decide(&bad, json!({"decision": "allow"})).await;
                assert_eq!(r.status(), 403, "{}", &bad[..bad.len().min(60)]);
                assert_security_headers(&r, JSON);
                let body: Value = r.json().await.unwrap();
                assert_eq!(body["error"]["code"], "forbidden");
            }

            // Cross-site and non-JSON posts change nothing, whatever the token.
            let posts: Vec<(&str, reqwest::RequestBuilder)> = vec![
                ("cross_site", l.http.post(&url).header("Origin", "https://evil.example").json(&json!({"decision": "allow"}))),
                ("cross_site", l.http.post(&url).header("Origin", "null").json(&json!({"decision": "allow"}))),
                ("cross_site", l.http.post(&url).header("Sec-Fetch-Site", "cross-site").json(&json!({"decision": "allow"}))),
                ("not_json", l.http.post(&url).header("Origin", &l.base).header("Content-Type", "application/x-www-form-urlencoded").body("decision=allow")),
                ("not_json", l.http.post(&url).header("Origin", &l.base).header("Content-Type", "text/plain").body(r#"{"decision":"allow"}"#)),
                ("not_json", l.http.post(&url).header("Content-Type", "multipart/form-data; boundary=x").body("--x\r\nContent-Disposition: form-data; name=\"decision\"\r\n\r\nallow\r\n--x--\r\n")),
                ("not_json", l.http.post(&url).header("Content-Type", "application/json").body("[\"allow\"]")),
            ];
            for (code, request) in posts {
                let r = request.send().await.unwrap();
                assert_eq!(r.status(), 403, "{code}");
                assert_security_headers(&r, JSON);
                let body: Value = r.json().await.unwrap();
                assert_eq!(body["error"]["code"], code);
                assert!(body["error"]["message"].as_str().unwrap().contains("Nothing changed"));
            }

            // Bodies that do not say a decision: 400, with nothing decided.
            for body in [
                json!({"decision": "maybe"}),
                json!({}),
                json!({"decision": "allow", "extra": 1}),
                json!({"decision": "deny", "reason": "x".repeat(2001)}),
            ] {
                let r = l.decide(&url, body.clone()).await;
                assert_eq!(r.status(), 400, "{body}");
                assert_security_headers(&r, JSON);
                assert_eq!(r.json::<Value>().await.unwrap()["error"]["code"], "invalid_payload");
            }
            assert_eq!(l.scene.harness.resolve_requests().len(), 0, "no refused post reached the harness");
            assert_eq!(l.scene.inbox().await.len(), 1, "the call is still held");

            // Deny with a reason: the agent is told.
            let r = l.decide(&url, json!({"decision": "deny", "reason": "not on Fridays"})).await;
            assert_eq!(r.status(), 200);
            assert_eq!(r.json::<Value>().await.unwrap(), json!({"resolved": true}));
            let release = l.scene.harness.resolve_requests().last().cloned().unwrap();
            assert_eq!(release["action"], "deliver");
            assert_eq!(release["is_error"], true);
            assert_eq!(release["content"][0]["text"], "Denied by a human: not on Fridays");
            assert_eq!(release["details"]["denied_by"], "user");
            assert_eq!(l.scene.harness.target_runs("demo::echo"), 0);
            let r = l.http.get(&url).send().await.unwrap();
            assert_eq!(r.status(), 410);
        })
        .await;
    }
}

each_generation! {
    async fn links_a_folder_prompt_that_replaces_a_hold_gets_a_new_link(generation) {
        on_each_engine(&label("links_folder_prompt", generation), |engine| async move {
            let l = Links::start_on(engine, generation, json!(["!approval::*"]), None).await;
            l.scene
                .targets
                .add(
                    "shell::read",
                    Arc::new(JailShell::new(Dialect::Shell, &["/srv"])),
                )
                .await;
            let created = l
                .scene
                .sink("fp-created", "approval::pending-created", json!({}))
                .await;
            l.scene.hold(spec(
                    "s_f",
                    "c1",
                    "shell::read",
                    json!({"path": "/data/a/f"})
                )).await;
            let first = link_of(&created, 0).await;
            let r = l.decide(&first, json!({"decision": "allow"})).await;
            assert_eq!(r.json::<Value>().await.unwrap(), json!({"resolved": true}));

            // The call ran, the jail refused the folder, the grant watch held it
            // again under the same id: a new revision, a new link.
            let second = link_of(&created, 1).await;
            assert_ne!(first, second);
            let kind = match generation {
                Generation::G1 => "folder_access",
                Generation::G2 => "filesystem_access",
            };
            assert_eq!(created.events()[1]["kind"], kind);
            let r = l.http.get(&first).send().await.unwrap();
            assert_eq!(
                r.status(),
                410,
                "the old link names a revision that is gone"
            );
            let r = l
                .decide(
                    &first,
                    json!({"decision": "allow", "grant_scope": "always"}),
                )
                .await;
            assert_eq!(r.status(), 410);
            assert_eq!(
                r.json::<Value>().await.unwrap()["error"]["reason"],
                "resolved"
            );

            let r = l.http.get(&second).send().await.unwrap();
            assert_eq!(r.status(), 200);
            let page = r.text().await.unwrap();
            assert!(page.contains("/data/a"), "the folder is shown");
            for choice in [
                "data-scope=\"once\"",
                "data-scope=\"session\"",
                "data-scope=\"always\"",
                "data-decision=\"deny\"",
            ] {
                assert!(page.contains(choice), "{choice}");
            }
            let r = l
                .decide(
                    &second,
                    json!({"decision": "allow", "grant_scope": "session"}),
                )
                .await;
            assert_eq!(r.json::<Value>().await.unwrap(), json!({"resolved": true}));
            assert_eq!(l.scene.harness.grants("s_f"), vec!["/data/a".to_string()]);
            let state = l.scene.harness.state("s_f", "c1").unwrap();
            assert!(
                matches!(&state, CallState::Completed { result } if result["is_error"] != true),
                "{state:?}"
            );
            assert!(l.scene.inbox().await.is_empty());
        })
        .await;
    }
}

each_generation! {
    async fn links_allow_and_remember_approves_the_function_for_the_session(generation) {
        on_each_engine(&label("links_remember", generation), |engine| async move {
            let l = Links::start_on(engine, generation, json!(["!approval::*"]), None).await;
            let created = l
                .scene
                .sink("rm-created", "approval::pending-created", json!({}))
                .await;
            l.scene.hold(spec("s_m", "c1", "demo::echo", json!({}))).await;
            let url = link_of(&created, 0).await;
            let r = l
                .decide(&url, json!({"decision": "allow", "remember": true}))
                .await;
            assert_eq!(r.json::<Value>().await.unwrap(), json!({"resolved": true}));
            let settings = l
                .scene
                .ok("approval::get-settings", json!({"session_id": "s_m"}))
                .await;
            let approved: Vec<&str> = settings["settings"]["approved_always"]
                .as_array()
                .unwrap()
                .iter()
                .filter_map(|e| e["function_id"].as_str())
                .collect();
            assert_eq!(approved, vec!["demo::echo"]);
            // The next call of the function in the session runs without asking;
            // another session still asks.
            assert!(matches!(
                l.scene
                    .harness
                    .call(spec("s_m", "c2", "demo::echo", json!({})))
                    .await,
                CallState::Completed { .. }
            ));
            l.scene.hold(spec("s_o", "c3", "demo::echo", json!({}))).await;
            assert_eq!(l.scene.harness.target_runs("demo::echo"), 2);
        })
        .await;
    }
}

each_generation! {
    async fn links_the_inbox_needs_its_bearer_and_links_follow_the_configuration(generation) {
        on_each_engine(&label("links_inbox", generation), |engine| async move {
            let l = Links::start_on(engine, generation, json!(["!approval::*"]), Some(INBOX_TOKEN)).await;
            for (sid, cid) in [("s_i", "c1"), ("s_i", "c2")] {
                assert!(l.scene.harness.call(spec(sid, cid, "demo::echo", json!({}))).await.is_held());
            }
            let inbox = format!("{}/approvals", l.base);
            for authorization in [None, Some("Bearer wrong"), Some("Basic aW5ib3g6dG9rZW4="), Some("Bearer ")] {
                let mut request = l.http.get(&inbox);
                if let Some(value) = authorization {
                    request = request.header("Authorization", value);
                }
                let r = request.send().await.unwrap();
                assert_eq!(r.status(), 401, "{authorization:?}");
                assert_security_headers(&r, HTML);
                assert_eq!(r.headers()["www-authenticate"], "Bearer realm=\"approvals\"");
            }
            let r = l.http.get(&inbox).bearer_auth(INBOX_TOKEN).send().await.unwrap();
            assert_eq!(r.status(), 200);
            assert_security_headers(&r, HTML);
            let page = r.text().await.unwrap();
            let listed = l.scene.inbox().await;
            let positions: Vec<usize> = listed
                .iter()
                .map(|row| {
                    let href = format!("<a href=\"{}\">", row["approval_url"].as_str().unwrap());
                    page.find(&href).unwrap_or_else(|| panic!("no row for {href}"))
                })
                .collect();
            assert!(positions.windows(2).all(|w| w[0] < w[1]), "oldest first");
            assert!(page.contains("2 calls, oldest first."));

            // Without an inbox token the inbox is 404; the links still work.
            let base = l.base.clone();
            l.scene
                .ok("configuration::set", json!({"id": "approval-gate", "value": config(&base, json!(["!approval::*"]), None)}))
                .await;
            l.wait_for_status("/approvals", 404).await;
            let r = l.http.get(&inbox).bearer_auth(INBOX_TOKEN).send().await.unwrap();
            assert_eq!(r.status(), 404);
            assert_security_headers(&r, HTML);
            let url = listed[0]["approval_url"].as_str().unwrap();
            assert_eq!(l.http.get(url).send().await.unwrap().status(), 200);

            // Links off: the routes go (the engine's own 404), records lose
            // their link, decisions through approval::resolve are unchanged.
            l.scene
                .ok("configuration::set", json!({"id": "approval-gate", "value": {"rules": ["!approval::*"], "links": null}}))
                .await;
            l.wait_for_status("/approvals/x", 404).await;
            // The worker answers 404 itself as soon as links are off; the
            // routes go a moment later (the task that follows the configuration
            // removes them), and then the engine answers its own 404.
            let engine_404 = json!({"error": {"code": "NOT_FOUND", "message": "Not Found"}});
            // While the three routes go one by one, a real engine may answer 405
            // for a path whose other method is still bound.
            let mut last = (0, Value::Null);
            for _ in 0..50 {
                let r = l.http.get(url).send().await.unwrap();
                let status = r.status().as_u16();
                last = (status, r.json::<Value>().await.unwrap_or(Value::Null));
                if last == (404, engine_404.clone()) {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            assert_eq!(last, (404, engine_404), "the routes were never removed");
            assert!(l.pending("s_i", "c1").await["pending"].get("approval_url").is_none());
            let out = l.scene.ok("approval::resolve", json!({"session_id": "s_i", "function_call_id": "c1", "decision": "allow"})).await;
            assert_eq!(out["resolved"], true);

            // On again with another secret: the old links are forged now.
            let mut again = config(&base, json!(["!approval::*"]), None);
            again["links"]["secret"] = json!("another-secret-0123456789abcdef-0123456789");
            l.scene.ok("configuration::set", json!({"id": "approval-gate", "value": again})).await;
            l.wait_for_status("/approvals/x", 403).await;
            let old = listed[1]["approval_url"].as_str().unwrap();
            assert_eq!(l.http.get(old).send().await.unwrap().status(), 403);
            let new = l.approval_url("s_i", "c2").await;
            assert_ne!(new, old);
            assert_eq!(l.http.get(&new).send().await.unwrap().status(), 200);
        })
        .await;
    }
}

each_generation! {
    async fn links_a_harness_failure_is_a_503_and_a_long_release_shows_running(generation) {
        on_test_engine(&label("links_harness_failures", generation), |engine| async move {
            let l = Links::start_on(engine, generation, json!(["!approval::*"]), None).await;
            // A decider waits half a second for the release's outcome, so a
            // harness answering 3 s late is a long release (the default wait
            // is 8 s).
            let mut value = config(&l.base, json!(["!approval::*"]), None);
            value["resolve_wait_ms"] = json!(500);
            l.scene
                .ok("configuration::set", json!({"id": "approval-gate", "value": value}))
                .await;
            let w = l.scene.worker.as_ref().unwrap();
            assert!(eventually(WAIT, || w.config().resolve_wait_ms == 500).await);
            let created = l
                .scene
                .sink("hf-created", "approval::pending-created", json!({}))
                .await;
            l.scene.hold(spec("s_h", "c1", "demo::echo", json!({}))).await;
            let url = link_of(&created, 0).await;
            let faults = l.scene.engine.test_engine().unwrap().faults();
            faults.fail(
                "harness::function::resolve",
                "internal",
                "panicked at src/harness/resolve.rs:42: secret stack",
                Some(1),
            );
            let r = l.decide(&url, json!({"decision": "allow"})).await;
            assert_eq!(r.status(), 503);
            assert_security_headers(&r, JSON);
            let text = r.text().await.unwrap();
            assert!(
                !text.contains("panicked") && !text.contains("resolve.rs"),
                "no internals: {text}"
            );
            let body: Value = serde_json::from_str(&text).unwrap();
            assert_eq!(body["error"]["code"], "harness_unavailable");
            assert_eq!(l.scene.inbox().await.len(), 1, "the call is still held");

            // The harness takes the next release but answers late (a long
            // execute): the page hears "running"; another POST changes nothing;
            // the page shows the call running until the outcome arrives.
            let resolved = l
                .scene
                .sink("hf-resolved", "approval::pending-resolved", json!({}))
                .await;
            faults.stall(
                "harness::function::resolve",
                Duration::from_secs(3),
                Some(1),
            );
            let r = l.decide(&url, json!({"decision": "allow"})).await;
            assert_eq!(r.status(), 200);
            assert_eq!(
                r.json::<Value>().await.unwrap(),
                json!({"resolved": false, "releasing": true})
            );
            let r = l.decide(&url, json!({"decision": "deny"})).await;
            assert_eq!(r.status(), 200);
            assert_eq!(
                r.json::<Value>().await.unwrap(),
                json!({"resolved": false, "releasing": true})
            );
            let page = l.http.get(&url).send().await.unwrap();
            assert_eq!(page.status(), 200);
            let page = page.text().await.unwrap();
            assert!(
                page.contains("Running") && !page.contains("data-decision"),
                "{page}"
            );
            assert!(
                resolved.events().is_empty(),
                "no outcome before the harness answered: {:?}",
                resolved.events()
            );
            assert!(eventually(Duration::from_secs(20), || resolved.events().len() == 1).await);
            assert_eq!(resolved.events()[0]["outcome"], "allow");
            let r = l.http.get(&url).send().await.unwrap();
            assert_eq!(r.status(), 410);
        })
        .await;
    }
}

#[tokio::test]
async fn links_without_iii_http_park_and_change_nothing_else() {
    let engine = TestEngine::start().await.expect("test engine");
    let harness = HarnessDouble::start(&engine.url(), HarnessOptions::default()).await;
    let targets = TargetWorker::start(&engine.url(), TARGETS).await;
    let probe = plain_client(&engine.url(), "probe", None);
    probe
        .wait_until_registered(Duration::from_secs(15))
        .await
        .expect("probe");
    let worker = start_in_process_at(
        &engine.url(),
        TestEngine::name_confirm_window(),
        Some(config(
            "https://gate.example",
            json!(["!approval::*"]),
            None,
        )),
    )
    .await;
    assert!(harness
        .wait_for_binding("harness::hook::pre-trigger", "approval::gate", WAIT)
        .await
        .is_some());
    wait_for_functions(
        &probe,
        &[
            "approval::link-page",
            "approval::link-decide",
            "approval::inbox-page",
        ],
    )
    .await;
    let health = call(&probe, "approval::health", json!({})).await.unwrap();
    assert!(
        health["parked"]
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t == "http"),
        "{health}"
    );
    assert!(health["gated"] == true, "{health}");
    assert!(harness
        .call(spec("s_p", "c1", "demo::echo", json!({})))
        .await
        .is_held());
    let got = call(
        &probe,
        "approval::get-pending",
        json!({"session_id": "s_p", "function_call_id": "c1"}),
    )
    .await
    .unwrap();
    assert!(got["pending"]["approval_url"]
        .as_str()
        .unwrap()
        .starts_with("https://gate.example/approvals/"));
    let out = call(
        &probe,
        "approval::resolve",
        json!({"session_id": "s_p", "function_call_id": "c1", "decision": "allow"}),
    )
    .await
    .unwrap();
    assert_eq!(out["resolved"], true);
    let _ = probe.shutdown_async().await;
    drop(worker);
    targets.shutdown().await;
    harness.shutdown().await;
    engine.shutdown().await;
}

each_generation! {
    async fn links_never_log_the_secret_tokens_or_urls(generation) {
        on_test_engine(&label("links_logs", generation), |engine| async move {
            let base = engine.http_url();
            let harness = HarnessDouble::start(&engine.url(), HarnessOptions::generation(generation)).await;
            let targets = TargetWorker::start(&engine.url(), TARGETS).await;
            let dir = tempfile::tempdir().unwrap();
            let seed = dir.path().join("seed.yaml");
            std::fs::write(
                &seed,
                format!("rules: [\"!approval::*\"]\nlinks:\n  secret: ${{APPROVAL_LINK_SECRET}}\n  public_base_url: {base}\n  inbox_token: {INBOX_TOKEN}\n"),
            )
            .unwrap();
            let mut worker = WorkerProcess::spawn_with(
                Path::new(BIN),
                &engine.url(),
                &["--log-format", "json", "--config", seed.to_str().unwrap()],
                &[("APPROVAL_LINK_SECRET", SECRET), ("RUST_LOG", "info,approval_gate=debug")],
                Duration::from_secs(30),
            )
            .await;
            assert!(harness.wait_for_binding("harness::hook::pre-trigger", "approval::gate", WAIT).await.is_some());
            let http = http_client();
            let l_base = base.clone();
            let status = |url: String| {
                let http = http.clone();
                async move { http.get(url).send().await.map(|r| r.status().as_u16()).unwrap_or(0) }
            };
            assert!(eventually_async(WAIT * 2, || status(format!("{l_base}/approvals/x")), |s| s == 403).await);
            let created = Sink::bind(&engine, "lg-created", "approval::pending-created", json!({})).await;
            tokio::time::sleep(Duration::from_millis(300)).await;
            assert!(harness.call(spec("s_g", "c1", "demo::echo", json!({}))).await.is_held());
            let url = link_of(&created, 0).await;
            let token = url.rsplit('/').next().unwrap().to_string();
            // Every path through the endpoints: page, forged, cross-site, bad
            // body, the inbox with and without its token, the decision, a 410.
            assert_eq!(status(url.clone()).await, 200);
            assert_eq!(status(tampered(&url)).await, 403);
            let post = |url: String, origin: &str, body: Value| {
                http.post(url).header("Origin", origin).json(&body).send()
            };
            assert_eq!(post(url.clone(), "https://evil.example", json!({"decision": "allow"})).await.unwrap().status(), 403);
            assert_eq!(post(tampered(&url), &base, json!({"decision": "allow"})).await.unwrap().status(), 403);
            assert_eq!(post(url.clone(), &base, json!({"decision": "nope"})).await.unwrap().status(), 400);
            assert_eq!(http.get(format!("{base}/approvals")).send().await.unwrap().status(), 401);
            assert_eq!(http.get(format!("{base}/approvals")).bearer_auth(INBOX_TOKEN).send().await.unwrap().status(), 200);
            assert_eq!(post(url.clone(), &base, json!({"decision": "allow"})).await.unwrap().status(), 200);
            assert_eq!(post(url.clone(), &base, json!({"decision": "allow"})).await.unwrap().status(), 410);
            assert!(worker.wait_for_line("call resolved", WAIT).await);
            tokio::time::sleep(Duration::from_millis(200)).await;
            let output = worker.output();
            worker.terminate(Duration::from_secs(10)).await;
            targets.shutdown().await;
            harness.shutdown().await;
            assert!(output.contains("approval link refused"), "the refusals are logged:\n{output}");
            for (what, needle) in [
                ("the link secret", SECRET),
                ("the inbox token", INBOX_TOKEN),
                ("a token", token.as_str()),
                ("a token's first half", &token[..token.len() / 2]),
                ("a link", &format!("{base}/approvals/")),
            ] {
                assert!(!output.contains(needle), "{what} reached the logs:\n{output}");
            }
        })
        .await;
    }
}

each_generation! {
    async fn links_show_the_deadline_follow_an_escalation_and_answer_410_expired(generation) {
        on_each_engine(&label("links_expired", generation), |engine| async move {
            let base = engine.http_url();
            let mut seed = config(&base, json!(["!approval::*"]), None);
            seed["pending_timeout_ms"] = json!(3_000);
            seed["escalate_after_ms"] = json!(1_000);
            let scene = Scene::start_seeded(engine, HarnessOptions::generation(generation), Some(seed)).await;
            let l = Links {
                scene,
                http: http_client(),
                base,
            };
            l.wait_for_status("/approvals/x", 403).await;
            let created = l
                .scene
                .sink("lx-created", "approval::pending-created", json!({}))
                .await;
            let escalated = l
                .scene
                .sink("lx-escalated", "approval::pending-escalated", json!({}))
                .await;
            let resolved = l
                .scene
                .sink("lx-resolved", "approval::pending-resolved", json!({}))
                .await;
            l.scene.hold(spec("s_x", "c1", "demo::echo", json!({}))).await;
            let url = link_of(&created, 0).await;

            // The page says when the call will be denied.
            let r = l.http.get(&url).send().await.unwrap();
            assert_eq!(r.status(), 200);
            let page = r.text().await.unwrap();
            assert!(page.contains("if no one decides by then"), "{page}");

            // The escalation carries the same link, for the second approver.
            let events = escalated.wait_for(1, WAIT).await;
            assert_eq!(events[0]["approval_url"], url);

            // At the deadline the record leaves as a timeout, and the link says so.
            let events = resolved.wait_for(1, WAIT).await;
            assert_eq!(events[0]["outcome"], "timeout");
            let r = l.decide(&url, json!({"decision": "allow"})).await;
            assert_eq!(r.status(), 410);
            let body: Value = r.json().await.unwrap();
            assert_eq!(body["error"]["reason"], "expired");
            let r = l.http.get(&url).send().await.unwrap();
            assert_eq!(r.status(), 410);
            assert!(r.text().await.unwrap().contains("No one decided in time"));
            assert_eq!(l.scene.harness.target_runs("demo::echo"), 0, "nothing ran");
        })
        .await;
    }
}
