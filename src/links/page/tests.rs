use std::collections::BTreeMap;
use std::io::Write;
use std::process::{Command, Stdio};

use regex::Regex;
use serde_json::json;

use super::*;
use crate::link_token::token::{sign, LinkSecret, Revision};

/// What agents have been seen to put where a page shows text.
const HOSTILE: &[&str] = &[
    "<script>alert(1)</script>",
    "\"onload=alert(1)",
    "</textarea><script>alert(1)</script>",
    "'><img src=x onerror=alert(1)>",
    "</script>",
    "</style><script>alert(1)</script>",
    "--><!--<script>",
    "&lt;script&gt;",
    "]]><svg onload=alert(1)>",
];

/// Right-to-left override, isolates, zero-width and tag characters.
const HIDDEN: &[char] = &[
    '\u{202E}',
    '\u{202D}',
    '\u{2066}',
    '\u{2067}',
    '\u{2068}',
    '\u{2069}',
    '\u{200F}',
    '\u{200B}',
    '\u{FEFF}',
    '\u{E0041}',
    '\u{0007}',
    '\u{009B}',
];

fn args() -> Value {
    json!({"command": "rm -rf build", "cwd": "/work", "env": {"TOKEN": "<redacted>"}})
}

fn view<'a>(args: &'a Value, kind: Kind) -> CallView<'a> {
    CallView {
        session_id: "s_1",
        function_call_id: "c_1",
        function_id: "shell::run",
        kind,
        arguments: args,
        arguments_clipped: false,
        session_title: Some("Fix the build"),
        pending_at: 1_700_000_000_000,
        expires_at: None,
        dir: match kind {
            Kind::Function => None,
            Kind::FolderAccess => Some("/srv/data"),
        },
        releasing: false,
        review: None,
        runs: None,
        protected: None,
        suggested_prefix: None,
    }
}

/// maud's escaping, written out independently.
fn escaped(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// The exact text between `<tag>` and `</tag>`, for every occurrence.
fn inline(html: &str, tag: &str) -> Vec<String> {
    let open = format!("<{tag}>");
    let close = format!("</{tag}>");
    html.match_indices(&open)
        .map(|(at, _)| {
            let start = at + open.len();
            let end = start + html[start..].find(&close).expect("closed");
            html[start..end].to_owned()
        })
        .collect()
}

/// `html` without the bodies of its `<script>` and `<style>` elements.
fn markup_only(html: &str) -> String {
    let mut out = html.to_owned();
    for tag in ["script", "style"] {
        for text in inline(html, tag) {
            out = out.replace(&text, "");
        }
    }
    out
}

/// Every tag name the pages are written with.
const TAGS: &[&str] = &[
    "!DOCTYPE", "html", "head", "meta", "title", "style", "body", "main", "p", "h1", "h2", "code",
    "dl", "dt", "dd", "time", "pre", "section", "button", "small", "label", "textarea", "noscript",
    "span", "script", "ul", "li", "a",
];

/// Fails unless every tag and attribute in `html` is one the page code
/// writes: agent text never becomes markup.
fn assert_only_our_markup(html: &str) {
    let markup = markup_only(html);
    let tag = Regex::new(r"<(/?)([^\s>/]*)").expect("regex");
    for m in tag.captures_iter(&markup) {
        assert!(
            TAGS.contains(&&m[2]),
            "unexpected tag <{}{}> in {html}",
            &m[1],
            &m[2]
        );
    }
    let handler =
        Regex::new(r#"<[^>]*\s(on[a-z]+|style|src|srcdoc|formaction)\s*="#).expect("regex");
    assert!(
        !handler.is_match(&markup),
        "an event/style/src attribute in {html}"
    );
    assert_eq!(
        html.matches("<script").count(),
        inline(html, "script").len()
    );
    assert_eq!(
        html.matches("</script").count(),
        inline(html, "script").len()
    );
    assert_eq!(html.matches("<style").count(), 1);
    assert_eq!(html.matches("</style").count(), 1);
    assert!(html.matches("<textarea").count() <= 1);
    assert_eq!(
        html.matches("<textarea").count(),
        html.matches("</textarea").count()
    );
}

fn all_pages(args: &Value) -> Vec<String> {
    let function = view(args, Kind::Function);
    let folder = view(args, Kind::FolderAccess);
    let mut pages = vec![
        call_page(&function),
        call_page(&folder),
        forbidden_page(),
        unauthorized_page(),
        not_found_page(),
        inbox_page(&[], 0),
        inbox_page(
            &[InboxRow {
                call: function,
                approval_url: "https://gate.example/approvals/abc",
            }],
            0,
        ),
    ];
    for reason in [
        GoneReason::Resolved,
        GoneReason::Expired,
        GoneReason::Purged,
        GoneReason::Replaced,
        GoneReason::NotHeld,
        GoneReason::Unknown,
    ] {
        pages.push(gone_page(reason));
    }
    pages
}

#[test]
fn every_response_carries_the_security_headers() {
    let headers: BTreeMap<_, _> = html_headers().into_iter().collect();
    assert_eq!(headers.len(), 6);
    assert_eq!(headers["Content-Type"], "text/html; charset=utf-8");
    assert_eq!(headers["Cache-Control"], "no-store");
    assert_eq!(headers["Referrer-Policy"], "no-referrer");
    assert_eq!(headers["X-Content-Type-Options"], "nosniff");
    assert_eq!(headers["X-Frame-Options"], "DENY");
    assert_eq!(
        headers["Content-Security-Policy"],
        content_security_policy()
    );

    let json: BTreeMap<_, _> = json_headers().into_iter().collect();
    assert_eq!(json["Content-Type"], "application/json");
    for name in [
        "Content-Security-Policy",
        "Cache-Control",
        "Referrer-Policy",
        "X-Content-Type-Options",
        "X-Frame-Options",
    ] {
        assert_eq!(json[name], headers[name], "{name}");
    }
}

#[test]
fn the_policy_allows_only_our_script_and_style() {
    let csp = content_security_policy();
    let directives: BTreeMap<&str, &str> = csp
        .split(';')
        .map(|d| d.trim().split_once(' ').expect("directive with a value"))
        .collect();
    let script_hash = format!(
        "'sha256-{}'",
        STANDARD.encode(Sha256::digest(SCRIPT.as_bytes()))
    );
    let style_hash = format!(
        "'sha256-{}'",
        STANDARD.encode(Sha256::digest(STYLE.as_bytes()))
    );
    assert_eq!(directives["default-src"], "'none'");
    assert_eq!(directives["script-src"], script_hash);
    assert_eq!(directives["style-src"], style_hash);
    assert_eq!(directives["connect-src"], "'self'");
    assert_eq!(directives["base-uri"], "'none'");
    assert_eq!(directives["form-action"], "'none'");
    assert_eq!(directives["frame-ancestors"], "'none'");
    assert_eq!(directives["require-trusted-types-for"], "'script'");
    assert_eq!(directives.len(), 8, "{csp}");
    assert!(!csp.contains("unsafe"));
    assert!(!csp.contains('*'));
    assert!(!csp.contains("http"));
}

#[test]
fn the_hashes_cover_the_exact_inline_text_of_every_page() {
    let args = args();
    let csp = content_security_policy();
    for page in all_pages(&args) {
        let styles = inline(&page, "style");
        assert_eq!(styles.len(), 1);
        assert!(csp.contains(&csp_hash(&styles[0])), "style hash");
        for script in inline(&page, "script") {
            assert!(csp.contains(&csp_hash(&script)), "script hash");
        }
    }
    let call = call_page(&view(&args, Kind::Function));
    assert_eq!(inline(&call, "script"), vec![SCRIPT.to_owned()]);
    assert!(inline(&forbidden_page(), "script").is_empty());
    assert!(inline(&inbox_page(&[], 0), "script").is_empty());
}

#[test]
fn the_inline_texts_cannot_close_their_element_early() {
    assert!(!SCRIPT.to_ascii_lowercase().contains("</"));
    assert!(!SCRIPT.contains("<!--"));
    assert!(!STYLE.to_ascii_lowercase().contains("</"));
    // The script only writes text and toggles attributes: nothing that
    // `require-trusted-types-for 'script'` would block.
    for sink in [
        "innerHTML",
        "outerHTML",
        "insertAdjacentHTML",
        "document.write",
        "eval(",
    ] {
        assert!(!SCRIPT.contains(sink), "{sink}");
    }
}

#[test]
fn every_page_is_readable_on_a_phone() {
    let args = args();
    for page in all_pages(&args) {
        assert!(page.starts_with("<!DOCTYPE html><html lang=\"en\">"));
        assert!(page
            .contains(r#"<meta name="viewport" content="width=device-width, initial-scale=1">"#));
        assert!(page.contains(r#"<meta charset="utf-8">"#));
        assert_only_our_markup(&page);
    }
    // No fixed width wider than a 375 px screen; buttons at least 48 px tall
    // (3rem at the 16 px base) and full width.
    let px = Regex::new(r"(\d+)px").expect("regex");
    for m in px.captures_iter(STYLE) {
        let n: u32 = m[1].parse().expect("number");
        assert!(n <= 375, "{n}px");
    }
    assert!(STYLE.contains("body{margin:0;"));
    assert!(STYLE.contains("font:16px/1.5"));
    let button = Regex::new(r"(?m)^button\{([^}]*)\}").expect("regex");
    let rule = &button.captures(STYLE).expect("a button rule")[1];
    assert!(rule.contains("width:100%"), "{rule}");
    assert!(rule.contains("min-height:3rem"), "{rule}");
}

#[test]
fn the_function_page_shows_the_call_and_its_three_choices() {
    let args = args();
    let mut v = view(&args, Kind::Function);
    v.expires_at = Some(1_700_000_600_000);
    let page = call_page(&v);
    assert!(page.contains("<h1><code>shell::run</code></h1>"));
    assert!(page.contains("<dd>Function call</dd>"));
    assert!(page.contains("<dd>Fix the build</dd>"));
    assert!(page.contains("<code>s_1</code>"));
    assert!(page.contains("<code>c_1</code>"));
    assert!(page.contains(r#"<time datetime="2023-11-14T22:13:20Z">2023-11-14T22:13:20Z</time>"#));
    assert!(page.contains("<dt>Deadline</dt>"));
    assert!(page.contains("2023-11-14T22:23:20Z"));
    assert!(!page.contains("<dt>Folder</dt>"));
    // The redacted arguments, pretty-printed, as text.
    let pretty = serde_json::to_string_pretty(&args).expect("json");
    assert!(pretty.contains('\n'));
    assert!(page.contains(&format!("<pre><code>{}</code></pre>", escaped(&pretty))));

    let buttons = buttons(&page);
    assert_eq!(
        buttons,
        vec![
            attrs(&[("decision", "allow")]),
            attrs(&[("decision", "allow"), ("remember", "true")]),
            attrs(&[("decision", "deny")]),
        ]
    );
    assert!(page.contains("Allow and don't ask again in this session"));
    assert!(page.contains(r#"<textarea id="reason""#));
}

#[test]
fn the_folder_page_shows_the_folder_and_its_four_choices() {
    let args = args();
    let page = call_page(&view(&args, Kind::FolderAccess));
    assert!(page.contains("<dd>Folder access</dd>"));
    assert!(page.contains("<dt>Folder</dt><dd><code>/srv/data</code></dd>"));
    assert!(!page.contains("<dt>Deadline</dt>"));
    assert_eq!(
        buttons(&page),
        vec![
            attrs(&[("decision", "allow"), ("scope", "once")]),
            attrs(&[("decision", "allow"), ("scope", "session")]),
            attrs(&[("decision", "allow"), ("scope", "always")]),
            attrs(&[("decision", "deny")]),
        ]
    );
    assert!(!markup_only(&page).contains("data-remember"));
}

#[test]
fn an_untitled_session_shows_its_id_only() {
    let args = args();
    for title in [None, Some("")] {
        let mut v = view(&args, Kind::Function);
        v.session_title = title;
        let page = call_page(&v);
        assert!(!page.contains("<dt>Session</dt>"));
        assert!(page.contains("<dt>Session id</dt><dd><code>s_1</code></dd>"));
    }
}

/// The `data-*` attributes of each choice button, in page order.
fn buttons(page: &str) -> Vec<BTreeMap<String, String>> {
    let button = Regex::new(r"<button([^>]*)>").expect("regex");
    let attr = Regex::new(r#"data-([a-z-]+)="([^"]*)""#).expect("regex");
    button
        .captures_iter(page)
        .map(|b| {
            attr.captures_iter(&b[1])
                .map(|a| (a[1].to_owned(), a[2].to_owned()))
                .collect()
        })
        .collect()
}

fn attrs(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

#[test]
fn hostile_text_renders_as_inert_text_everywhere() {
    for payload in HOSTILE {
        let args = json!({ "command": payload, *payload: [payload] });
        let review = Review {
            verdict: ReviewVerdict::Escalate,
            rationale: (*payload).to_owned(),
            risk: Some(Risk::High),
            held_because: None,
        };
        let v = CallView {
            session_id: payload,
            function_call_id: payload,
            function_id: payload,
            kind: Kind::FolderAccess,
            arguments: &args,
            arguments_clipped: true,
            session_title: Some(payload),
            pending_at: 0,
            expires_at: Some(u64::MAX),
            dir: Some(payload),
            releasing: false,
            review: Some(&review),
            runs: None,
            protected: None,
            suggested_prefix: None,
        };
        let inbox_row = InboxRow {
            call: v,
            approval_url: "https://gate.example/approvals/t",
        };
        let in_json = escaped(&serde_json::to_string(payload).expect("json"));
        for (page, shows_arguments) in [
            (call_page(&v), true),
            (
                call_page(&CallView {
                    kind: Kind::Function,
                    ..v
                }),
                true,
            ),
            (inbox_page(&[inbox_row], 0), false),
        ] {
            assert_only_our_markup(&page);
            let ours = format!("<script>{SCRIPT}</script>");
            assert!(
                !page.replace(&ours, "").contains(payload),
                "{payload:?} raw in the page"
            );
            // Shown, escaped: as one-line fields and inside the JSON text.
            assert!(page.contains(&escaped(payload)), "{payload:?} not shown");
            assert_eq!(
                page.contains(&in_json),
                shows_arguments,
                "{payload:?} in the arguments"
            );
        }
    }
}

#[test]
fn hidden_characters_are_shown_not_obeyed() {
    for &c in HIDDEN {
        let text = format!("safe{c}txt.exe");
        let args = json!({ "path": text });
        let mut v = view(&args, Kind::FolderAccess);
        v.function_id = &text;
        v.session_title = Some(&text);
        v.dir = Some(&text);
        let marker = format!("<span class=\"ctl\">⟨U+{:04X}⟩</span>", u32::from(c));
        // Function id, session title and folder on both pages; the call
        // page's JSON text too, unless JSON escapes the character itself
        // (C0 controls become `\u0007`).
        let in_json = usize::from(u32::from(c) >= 0x20);
        let call = call_page(&v);
        let row = InboxRow {
            call: v,
            approval_url: "/approvals/t",
        };
        let inbox = inbox_page(&[row], 0);
        for (page, expected) in [(&call, 3 + in_json), (&inbox, 3)] {
            assert!(!page.contains(c), "U+{:04X} reached the page", u32::from(c));
            assert_eq!(
                page.matches(&marker).count(),
                expected,
                "U+{:04X}",
                u32::from(c)
            );
        }
    }
}

#[test]
fn newlines_stay_in_the_arguments_and_are_marked_elsewhere() {
    let args = json!({"a": 1, "b": [true, null]});
    let mut v = view(&args, Kind::Function);
    v.session_title = Some("two\nlines");
    let page = call_page(&v);
    assert!(page.contains("<dd>two<span class=\"ctl\">⟨U+000A⟩</span>lines</dd>"));
    assert!(page.contains("{\n  \"a\": 1,".replace('"', "&quot;").as_str()));
    assert!(!page.contains("⟨U+0020⟩"));
}

#[test]
fn no_page_carries_the_token_or_the_secret() {
    let secret_text = "0123456789abcdef0123456789abcdef";
    let secret = LinkSecret::new(secret_text).expect("valid");
    let args = args();
    for kind in [Kind::Function, Kind::FolderAccess] {
        let v = view(&args, kind);
        let revision =
            Revision::new(v.session_id, v.function_call_id, v.pending_at, kind).expect("valid");
        let token = sign(&secret, &revision);
        let page = call_page(&v);
        assert!(!page.contains(&token));
        assert!(!page.contains(secret_text));
        // The script posts to the page's own path; the document names no URL.
        assert!(!page.contains("/approvals"));
        assert!(SCRIPT.contains("fetch(path, {"));
        assert!(SCRIPT.contains(
            "var path = batch ? location.pathname.replace(/[^\\/]*$/, batch) : location.pathname;"
        ));
        assert!(!page.contains("data-batch=\""), "no offer unless asked for");
    }
    for page in [
        forbidden_page(),
        gone_page(GoneReason::Replaced),
        not_found_page(),
    ] {
        assert!(!page.contains("/approvals"));
    }
}

#[test]
fn the_inbox_links_each_row_to_its_page_in_order() {
    let args = args();
    let first = view(&args, Kind::Function);
    let second = CallView {
        session_id: "s_2",
        function_call_id: "c_9",
        function_id: "coder::write",
        ..view(&args, Kind::FolderAccess)
    };
    let page = inbox_page(
        &[
            InboxRow {
                call: first,
                approval_url: "https://gate.example/approvals/AAA",
            },
            InboxRow {
                call: second,
                approval_url: "https://gate.example/approvals/BBB",
            },
        ],
        0,
    );
    let a = page
        .find(r#"<a href="https://gate.example/approvals/AAA"><code>shell::run</code></a>"#)
        .expect("first row");
    let b = page
        .find(r#"<a href="https://gate.example/approvals/BBB"><code>coder::write</code></a>"#)
        .expect("second row");
    assert!(a < b);
    assert_eq!(page.matches("<li>").count(), 2);
    assert!(page.contains("2 calls, oldest first."));
    assert!(page.contains("<dd>Folder access</dd>"));
    // The inbox shows no arguments (each call's page does) and has no script.
    assert!(!page.contains("rm -rf build"));
    assert!(!page.contains("<script"));
}

#[test]
fn an_inbox_longer_than_a_page_counts_the_rest() {
    let args = args();
    let row = InboxRow {
        call: view(&args, Kind::Function),
        approval_url: "https://gate.example/approvals/AAA",
    };
    assert!(inbox_page(&[row], 7).contains("And 7 more, not shown"));
    assert!(!inbox_page(&[row], 0).contains("more, not shown"));
}

#[test]
fn an_empty_inbox_says_so() {
    let page = inbox_page(&[], 0);
    assert!(page.contains("Nothing is waiting for a decision."));
    assert!(!page.contains("<ul"));
}

#[test]
fn only_web_urls_and_paths_become_links() {
    let args = args();
    for (url, linked) in [
        ("https://gate.example/approvals/t", true),
        ("HTTP://gate.example/approvals/t", true),
        ("/approvals/t", true),
        ("javascript:alert(1)", false),
        ("JaVaScRiPt:alert(1)", false),
        ("data:text/html,<script>alert(1)</script>", false),
        ("//evil.example/approvals/t", false),
        ("/\\evil.example", false),
        ("https://gate.example/a b", false),
        ("", false),
    ] {
        let page = inbox_page(
            &[InboxRow {
                call: view(&args, Kind::Function),
                approval_url: url,
            }],
            0,
        );
        assert_eq!(page.contains("<a href="), linked, "{url:?}");
        assert_only_our_markup(&page);
    }
    // A quote cannot end the attribute.
    let page = inbox_page(
        &[InboxRow {
            call: view(&args, Kind::Function),
            approval_url: r#"https://gate.example/t"onmouseover="alert(1)"#,
        }],
        0,
    );
    assert!(page.contains(r#"href="https://gate.example/t&quot;onmouseover=&quot;alert(1)""#));
    assert_only_our_markup(&page);
}

#[test]
fn the_gone_page_says_what_happened() {
    for (reason, text) in [
        (GoneReason::Resolved, "already been decided"),
        (GoneReason::Expired, "No one decided in time"),
        (GoneReason::Purged, "turn ended or its session was deleted"),
        (
            GoneReason::Replaced,
            "newer prompt for this call replaced this one",
        ),
        (GoneReason::NotHeld, "stopped waiting for this call"),
        (GoneReason::Unknown, "no longer waiting for a decision"),
    ] {
        let page = gone_page(reason);
        assert!(page.contains(text), "{reason:?}");
        assert!(page.contains("<h1>This approval link is no longer valid</h1>"));
        assert!(!page.contains("<button"));
        assert!(!page.contains("<script"));
    }
    let page = forbidden_page();
    assert!(page.contains("<h1>This approval link is not valid</h1>"));
    assert!(!page.contains("<button"));
}

/// The outcomes the script can reveal, read from its source.
fn script_outcomes() -> Vec<String> {
    let named = Regex::new(r#"(?:return|show\(|settle\() ?"([a-z-]+)""#).expect("regex");
    let mut outcomes: Vec<String> = named
        .captures_iter(SCRIPT)
        .map(|m| m[1].to_owned())
        .collect();
    outcomes.sort();
    outcomes.dedup();
    outcomes
}

/// The `data-outcome` panels of a page.
fn panels(page: &str) -> Vec<String> {
    let panel =
        Regex::new(r#"<p class="panel [a-z]*" hidden data-outcome="([a-z-]+)">"#).expect("regex");
    let mut found: Vec<String> = panel.captures_iter(page).map(|m| m[1].to_owned()).collect();
    found.sort();
    found
}

#[test]
fn every_outcome_the_script_names_has_a_hidden_panel() {
    let args = args();
    let page = call_page(&view(&args, Kind::Function));
    let outcomes = script_outcomes();
    assert!(outcomes.contains(&"not-held".to_owned()), "{outcomes:?}");
    assert!(outcomes.len() >= 9, "{outcomes:?}");
    assert_eq!(panels(&page), outcomes);
    assert!(page.contains("Not held any more"));
    assert!(page.contains(r#"<section id="result" role="status" aria-live="polite">"#));
}

#[test]
fn timestamps_are_iso_8601_utc() {
    assert_eq!(iso_utc(0), "1970-01-01T00:00:00Z");
    assert_eq!(iso_utc(999), "1970-01-01T00:00:00Z");
    assert_eq!(iso_utc(1_700_000_000_000), "2023-11-14T22:13:20Z");
    assert_eq!(iso_utc(951_782_400_000), "2000-02-29T00:00:00Z");
    assert_eq!(iso_utc(951_868_799_999), "2000-02-29T23:59:59Z");
    assert_eq!(iso_utc(4_107_542_400_000), "2100-03-01T00:00:00Z");
    assert_eq!(iso_utc(253_402_300_799_000), "9999-12-31T23:59:59Z");
    // Total: the largest timestamp formats (year 584554049).
    assert!(iso_utc(u64::MAX).ends_with('Z'));
}

/// Drives `decide.js` in Node against a minimal DOM built from the rendered
/// page's buttons and panels, and checks the request it sends and the panel
/// it reveals for each answer.
#[test]
fn the_script_posts_the_choice_and_reveals_the_answer() {
    if Command::new("node").arg("--version").output().is_err() {
        println!("SKIP the_script_posts_the_choice_and_reveals_the_answer: node not found");
        return;
    }
    let args = args();
    let function = call_page(&view(&args, Kind::Function));
    let folder = call_page(&view(&args, Kind::FolderAccess));
    for page in [&function, &folder] {
        assert!(page.contains(r#"<section class="choices" id="choices""#));
        assert!(page.contains(r#"<textarea id="reason""#));
    }
    let ok = |v: Value| json!({"status": 200, "body": v.to_string()});
    // (page, button index, reason typed, server answer, expected body, expected panel, choices hidden)
    let cases = vec![
        (
            &function,
            0,
            "",
            ok(json!({"resolved": true})),
            json!({"decision": "allow"}),
            "allowed",
            true,
        ),
        (
            &function,
            1,
            "",
            ok(json!({"resolved": true})),
            json!({"decision": "allow", "remember": true}),
            "allowed-remember",
            true,
        ),
        (
            &function,
            2,
            "  too risky  ",
            ok(json!({"resolved": true})),
            json!({"decision": "deny", "reason": "too risky"}),
            "denied",
            true,
        ),
        (
            &function,
            2,
            "   ",
            ok(json!({"resolved": true})),
            json!({"decision": "deny"}),
            "denied",
            true,
        ),
        (
            &function,
            0,
            "ignored",
            ok(json!({"resolved": false, "not_held": true})),
            json!({"decision": "allow"}),
            "not-held",
            true,
        ),
        (
            &function,
            0,
            "",
            ok(json!({"resolved": false})),
            json!({"decision": "allow"}),
            "unchanged",
            true,
        ),
        (
            &function,
            0,
            "",
            json!({"status": 410, "body": "{\"error\":\"gone\"}"}),
            json!({"decision": "allow"}),
            "gone",
            true,
        ),
        (
            &function,
            0,
            "",
            json!({"status": 403, "body": "<html>"}),
            json!({"decision": "allow"}),
            "forbidden",
            true,
        ),
        (
            &function,
            0,
            "",
            json!({"status": 500, "body": "{\"resolved\":true}"}),
            json!({"decision": "allow"}),
            "error",
            false,
        ),
        (
            &function,
            0,
            "",
            json!({"status": 200, "body": "not json"}),
            json!({"decision": "allow"}),
            "error",
            false,
        ),
        (
            &function,
            0,
            "",
            json!("network"),
            json!({"decision": "allow"}),
            "error",
            false,
        ),
        (
            &folder,
            0,
            "",
            ok(json!({"resolved": true})),
            json!({"decision": "allow", "grant_scope": "once"}),
            "allowed",
            true,
        ),
        (
            &folder,
            1,
            "",
            ok(json!({"resolved": true})),
            json!({"decision": "allow", "grant_scope": "session"}),
            "allowed",
            true,
        ),
        (
            &folder,
            2,
            "",
            ok(json!({"resolved": true})),
            json!({"decision": "allow", "grant_scope": "always"}),
            "allowed",
            true,
        ),
        (
            &folder,
            3,
            "not that one",
            ok(json!({"resolved": true})),
            json!({"decision": "deny", "reason": "not that one"}),
            "denied",
            true,
        ),
    ];
    let input: Vec<Value> = cases
        .iter()
        .map(|(page, click, reason, answer, _, _, _)| {
            json!({
                "buttons": buttons(page),
                "panels": panels(page),
                "click": click,
                "reason": reason,
                "answer": answer,
            })
        })
        .collect();
    let output = run_node(&json!({"script": SCRIPT, "cases": input}));
    let results: Vec<Value> = serde_json::from_str(&output).expect("harness output");
    assert_eq!(results.len(), cases.len());
    for (i, (result, (_, _, _, _, body, panel, hidden))) in results.iter().zip(&cases).enumerate() {
        assert_eq!(
            result["requests"].as_array().map(Vec::len),
            Some(1),
            "case {i}"
        );
        let request = &result["requests"][0];
        assert_eq!(request["url"], "/approvals/TOKEN", "case {i}");
        assert_eq!(request["method"], "POST", "case {i}");
        assert_eq!(request["contentType"], "application/json", "case {i}");
        assert_eq!(request["credentials"], "omit", "case {i}");
        let sent: Value = serde_json::from_str(request["body"].as_str().expect("string body"))
            .expect("JSON body");
        assert_eq!(&sent, body, "case {i}");
        assert_eq!(result["shown"], json!([panel]), "case {i}");
        assert_eq!(result["choicesHidden"], json!(hidden), "case {i}");
        // Buttons are disabled while a decision is in flight and come back
        // only when it may not have arrived.
        assert_eq!(result["disabledWhileSending"], json!(true), "case {i}");
        assert_eq!(result["enabledAfter"], json!(!hidden), "case {i}");
    }
}

const NODE_HARNESS: &str = r#"
"use strict";
const input = JSON.parse(require("fs").readFileSync(0, "utf8"));
const tick = () => new Promise((resolve) => setTimeout(resolve, 0));

function element(attrs, hidden) {
  return {
    attrs, hidden, disabled: false, listeners: {}, value: "",
    getAttribute(name) { return Object.prototype.hasOwnProperty.call(this.attrs, name) ? this.attrs[name] : null; },
    addEventListener(type, f) { this.listeners[type] = f; },
  };
}

async function run(c) {
  const buttons = c.buttons.map((b) => {
    const attrs = {};
    for (const [k, v] of Object.entries(b)) attrs["data-" + k] = v;
    return element(attrs, false);
  });
  const panels = c.panels.map((p) => element({ "data-outcome": p }, true));
  const choices = element({}, false);
  const reason = element({}, false);
  reason.value = c.reason;
  const document = {
    getElementById(id) { return { choices, reason }[id] || null; },
    querySelectorAll(selector) {
      if (selector === "button[data-decision]") return buttons;
      if (selector === "[data-outcome]") return panels;
      throw new Error("unexpected selector " + selector);
    },
  };
  const location = { pathname: "/approvals/TOKEN" };
  const requests = [];
  let disabledWhileSending = null;
  const fetch = (url, options) => {
    requests.push({
      url, method: options.method, body: options.body, credentials: options.credentials,
      contentType: options.headers["Content-Type"],
    });
    disabledWhileSending = buttons.every((b) => b.disabled);
    if (c.answer === "network") return Promise.reject(new TypeError("offline"));
    return Promise.resolve({
      status: c.answer.status,
      json: () => new Promise((resolve, reject) => {
        try { resolve(JSON.parse(c.answer.body)); } catch (e) { reject(e); }
      }),
    });
  };
  new Function("document", "location", "fetch", input.script)(document, location, fetch);
  buttons[c.click].listeners.click();
  for (let i = 0; i < 10; i++) await tick();
  return {
    requests,
    shown: panels.filter((p) => !p.hidden).map((p) => p.attrs["data-outcome"]),
    choicesHidden: choices.hidden,
    disabledWhileSending,
    enabledAfter: buttons.every((b) => !b.disabled),
  };
}

(async () => {
  const results = [];
  for (const c of input.cases) results.push(await run(c));
  process.stdout.write(JSON.stringify(results));
})().catch((e) => { console.error(e); process.exit(1); });
"#;

fn run_node(input: &Value) -> String {
    let mut child = Command::new("node")
        .arg("-e")
        .arg(NODE_HARNESS)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("node starts");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(input.to_string().as_bytes())
        .expect("write input");
    let out = child.wait_with_output().expect("node runs");
    assert!(
        out.status.success(),
        "node failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("utf-8")
}

#[test]
fn a_record_whose_decision_is_under_way_shows_running_and_no_choices() {
    let a = args();
    let mut v = view(&a, Kind::Function);
    v.releasing = true;
    let page = call_page(&v);
    assert!(page.contains("Running"), "{page}");
    assert!(
        !page.contains("data-decision"),
        "no choice is offered: {page}"
    );
    v.releasing = false;
    assert!(call_page(&v).contains("data-decision"));
}

#[test]
fn rule_24_the_allow_all_offer_counts_and_lists_the_calls_as_text() {
    let args = args();
    let v = view(&args, Kind::Function);
    let offered = |fid: &str, cid: &str, arguments: Value, rule: Option<&str>| OfferedCall {
        function_id: fid.into(),
        function_call_id: cid.into(),
        arguments,
        arguments_clipped: false,
        runs: None,
        held_by_rule: rule.map(str::to_string),
    };
    let mut curl = offered(
        "shell::run",
        "c3",
        json!({"command": "curl x | sh"}),
        Some("no_match"),
    );
    curl.runs = Some(Runs {
        programs: vec!["curl".into(), "sh".into()],
        opaque: false,
        why: None,
    });
    let offer = BatchOffer {
        token: "b.AAAA".into(),
        calls: vec![
            offered("demo::echo", "c1", json!({"n": 1}), Some("no_match")),
            offered(
                "<script>x</script>",
                "c2",
                json!({"n": "<b>2</b>"}),
                Some("reviewer"),
            ),
            curl,
        ],
        separately: vec![
            offered("deploy::prod", "c4", json!({}), Some("ask-<deploys>")),
            offered("shell::run", "c5", json!({}), Some("opaque_command")),
            offered("demo::old", "c6", json!({}), None),
        ],
    };
    let page = call_page_offering(&v, Some(&offer));
    assert!(
        page.contains("Allow all 3 held calls of this turn"),
        "{page}"
    );
    assert!(page.contains("data-batch=\"b.AAAA\""));
    assert!(!page.contains("<script>x"), "agent text is escaped");
    assert!(page.contains("&lt;script&gt;x"));
    assert!(
        page.contains("&lt;b&gt;2&lt;/b&gt;"),
        "arguments shown, escaped"
    );
    assert!(page.contains("curl x | sh"), "{page}");
    assert!(page.contains("<code>curl, sh</code>"), "runs shown: {page}");
    assert!(page.contains("data-outcome=\"allowed-all\""));
    // §26.4: the calls left out are listed apart, with why.
    let (covered, apart) = page.split_once("Decide separately").expect("listed apart");
    for cid in ["c1", "c2", "c3"] {
        assert!(covered.contains(&format!("<small>{cid}</small>")), "{cid}");
    }
    for cid in ["c4", "c5", "c6"] {
        assert!(!covered.contains(&format!("<small>{cid}</small>")), "{cid}");
        assert!(apart.contains(&format!("<small>{cid}</small>")), "{cid}");
    }
    assert!(
        apart.contains("held by rule <code>ask-&lt;deploys&gt;</code>"),
        "{apart}"
    );
    assert!(apart.contains("cannot be known"), "{apart}");
    // A folder prompt never offers it.
    let folder = call_page_offering(&view(&args, Kind::FolderAccess), Some(&offer));
    assert!(!folder.contains("data-batch=\""));
}

#[test]
fn the_page_shows_what_the_reviewer_said_and_why_a_human_decides() {
    let args = args();
    let without = call_page(&view(&args, Kind::Function));
    assert!(!without.contains("Reviewer"), "no review, no row");
    let cases = [
        (
            ReviewVerdict::Escalate,
            None,
            Some(Risk::High),
            "asked for a human — risk high",
        ),
        (
            ReviewVerdict::Allow,
            Some(HeldBecause::Clipped),
            None,
            "allowed, but saw the arguments clipped: a human decides",
        ),
        (
            ReviewVerdict::Deny,
            Some(HeldBecause::Breaker),
            Some(Risk::Low),
            "denied, but it has denied too often in a row: a human decides — risk low",
        ),
        (
            ReviewVerdict::Error,
            None,
            None,
            "could not be asked (error): a human decides",
        ),
        (
            ReviewVerdict::Timeout,
            None,
            None,
            "did not answer in time: a human decides",
        ),
        (
            ReviewVerdict::Malformed,
            None,
            Some(Risk::Medium),
            "gave an answer it could not read: a human decides — risk medium",
        ),
    ];
    for (verdict, held_because, risk, line) in cases {
        let review = Review {
            verdict,
            rationale: format!("because {}", verdict.as_str()),
            risk,
            held_because,
        };
        let v = CallView {
            review: Some(&review),
            runs: None,
            protected: None,
            suggested_prefix: None,
            ..view(&args, Kind::Function)
        };
        for page in [
            call_page(&v),
            inbox_page(
                &[InboxRow {
                    call: v,
                    approval_url: "https://gate.example/approvals/AAA",
                }],
                0,
            ),
        ] {
            assert_only_our_markup(&page);
            assert!(page.contains(&format!("<dd>{line}</dd>")), "{line}: {page}");
            assert!(
                page.contains(&format!("<dd>because {}</dd>", verdict.as_str())),
                "{page}"
            );
        }
    }
}

#[test]
fn rule_25_8_the_page_shows_what_runs_and_offers_the_suggested_grant() {
    let args = args();
    let runs = Runs {
        programs: vec!["git".into()],
        opaque: false,
        why: None,
    };
    let mut v = view(&args, Kind::Function);
    v.runs = Some(&runs);
    v.suggested_prefix = Some("git status");
    let page = call_page(&v);
    assert!(
        page.contains("<dt>Runs</dt><dd><code>git</code></dd>"),
        "{page}"
    );
    assert!(page.contains("<dt>Suggested grant</dt>"));
    assert_eq!(
        buttons(&page),
        vec![
            attrs(&[("decision", "allow")]),
            attrs(&[("decision", "allow"), ("remember", "true")]),
            attrs(&[("decision", "allow"), ("remember-prefix", "true")]),
            attrs(&[("decision", "deny")]),
        ]
    );
    assert!(page.contains("Allow <code>git status …</code> in this session"));
    // Opaque: said, with why; hostile text inert.
    let runs = Runs {
        programs: vec!["curl".into(), "<b>sh</b>".into()],
        opaque: true,
        why: Some("sh runs code from its standard input <script>".into()),
    };
    let mut v = view(&args, Kind::Function);
    v.runs = Some(&runs);
    let page = call_page(&v);
    assert!(page.contains("curl, &lt;b&gt;sh&lt;/b&gt;"), "{page}");
    assert!(page.contains(
        "cannot be known without running it: sh runs code from its standard input &lt;script&gt;"
    ));
    assert!(!markup_only(&page).contains("data-remember-prefix"));
    // Folder prompts never offer a prefix.
    let mut v = view(&args, Kind::FolderAccess);
    v.suggested_prefix = Some("git status");
    assert!(!markup_only(&call_page(&v)).contains("data-remember-prefix"));
}

#[test]
fn rule_29_4_the_page_names_the_protected_path() {
    let args = args();
    let note = crate::policy::ProtectedNote {
        path: "/opt/iii/config/<b>approval-gate</b>.yaml".into(),
        glob: "**/config/approval-gate*.yaml".into(),
        how: crate::policy::HitKind::Literal,
    };
    let mut v = view(&args, Kind::Function);
    let page = call_page(&v);
    assert!(!page.contains("Protected path"), "{page}");
    v.protected = Some(&note);
    let page = call_page(&v);
    assert!(page.contains("<dt>Protected path</dt>"), "{page}");
    assert!(
        page.contains("/opt/iii/config/&lt;b&gt;approval-gate&lt;/b&gt;.yaml"),
        "{page}"
    );
    assert!(page.contains("**/config/approval-gate*.yaml"), "{page}");
}

#[test]
fn rule_26_5_ids_pass_the_detectors_on_every_page() {
    const TOKEN: &str = "ghp_FAKExJvv9Nl46wmyhw32J7bYzpzH2tvUuM4B";
    let args = args();
    let function_id = format!("notes::{TOKEN}");
    let session_id = format!("s-{TOKEN}");
    let call_id = format!("c-{TOKEN}");
    let secret = CallView {
        session_id: &session_id,
        function_call_id: &call_id,
        function_id: &function_id,
        ..view(&args, Kind::Function)
    };
    let pages = [
        call_page(&secret),
        inbox_page(
            &[InboxRow {
                call: secret,
                approval_url: "https://gate.example/approvals/abc",
            }],
            0,
        ),
    ];
    for page in pages {
        assert!(!page.contains("ghp_"), "{page}");
        assert!(page.contains("notes::&lt;redacted&gt;"), "{page}");
    }
}

#[test]
fn rule_28_edit_and_allow_is_offered_only_for_a_function_hold_shown_whole_without_marks() {
    let plain = json!({"command": "make", "cwd": "/work"});
    let page = call_page(&view(&plain, Kind::Function));
    assert!(page.contains(r#"data-decision="edit""#), "{page}");
    assert!(page.contains(r#"id="edited""#), "{page}");
    // A redacted value (args() holds one), clipped arguments, a folder prompt.
    let redacted = args();
    assert!(!call_page(&view(&redacted, Kind::Function)).contains(r#"data-decision="edit""#));
    let mut clipped = view(&plain, Kind::Function);
    clipped.arguments_clipped = true;
    assert!(!call_page(&clipped).contains(r#"data-decision="edit""#));
    assert!(!call_page(&view(&plain, Kind::FolderAccess)).contains(r#"data-decision="edit""#));
    // The inbox links an editable row to the page's edit panel.
    let rows = [InboxRow {
        call: view(&plain, Kind::Function),
        approval_url: "https://gate.example/approvals/tok",
    }];
    assert!(inbox_page(&rows, 0).contains("https://gate.example/approvals/tok#edit"));
    let rows = [InboxRow {
        call: view(&redacted, Kind::Function),
        approval_url: "https://gate.example/approvals/tok",
    }];
    assert!(!inbox_page(&rows, 0).contains("#edit"));
}
