//! The command corpus (`tests/fixtures/commands`, contract §25) through the
//! gate: every case is sent to `approval::gate` as a `shell::exec` call
//! under the rules its outcomes name, on each engine, and must get exactly
//! the outcome it states. One worker per rule kind, reconfigured per target
//! (deny, ask) or per set of allow prefixes (allow), so the suite stays
//! fast; each prints a table of its counts by class.
//!
//! - deny: `full` mode, `rule_precedence: deny_ask_allow`, `{function:
//!   "shell::exec", action: "deny", args: {command: {prefix: <target>}}}`;
//! - ask: the same rule as an ask rule;
//! - allow: `manual` mode, one allow rule per prefix and nothing else that
//!   allows.
//!
//! Before the policy of §25.6 judges commands, `rule_25_6_corpus_outcomes_
//! follow_from_the_model` checks the same outcomes against the command
//! model's facts read by §25.6's text (no engine): the corpus, the model and
//! the contract agree before the gate is asked.

use std::collections::BTreeMap;
use std::path::Path;

use approval_gate::{base_name, Command, Model, WordKind};
use approval_gate_testkit::commands::{self, Case, Outcome};
use serde_json::{json, Value};

use crate::common::*;
use crate::oracle::{model_of, CORPUS};

/// Which rule a run of the corpus is under.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Deny,
    Ask,
    Allow,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Deny => "deny",
            Kind::Ask => "ask",
            Kind::Allow => "allow",
        }
    }

    fn expected(self, case: &Case) -> Outcome {
        match self {
            Kind::Deny => case.expect.deny,
            Kind::Ask => case.expect.ask,
            Kind::Allow => case.expect.allow,
        }
    }

    /// What the rules of one group are keyed by.
    fn group_key(self, case: &Case) -> Vec<String> {
        match self {
            Kind::Deny | Kind::Ask => vec![case.target.clone()],
            Kind::Allow => case
                .allow_prefixes()
                .iter()
                .map(|p| p.to_string())
                .collect(),
        }
    }

    /// The configuration a group runs under.
    fn configuration(self, key: &[String]) -> Value {
        let rule = |action: &str, prefix: &str| {
            json!({"function": "shell::exec", "action": action,
                   "args": {"command": {"prefix": prefix}}})
        };
        let (mode, rules): (&str, Vec<Value>) = match self {
            Kind::Deny => ("full", vec![rule("deny", &key[0])]),
            Kind::Ask => ("full", vec![rule("ask", &key[0])]),
            Kind::Allow => ("manual", key.iter().map(|p| rule("allow", p)).collect()),
        };
        let mut all = vec![json!("!approval::*")];
        all.extend(rules);
        json!({"default_mode": mode, "rule_precedence": "deny_ask_allow", "rules": all})
    }
}

fn corpus() -> Vec<Case> {
    commands::load(Path::new(CORPUS)).unwrap_or_else(|e| panic!("the corpus: {e}"))
}

/// Stores `value` as the configuration and waits until the worker runs it.
async fn configure(scene: &Scene, value: Value) {
    scene
        .ok(
            "configuration::set",
            json!({"id": "approval-gate", "value": value}),
        )
        .await;
    let w = scene.worker.as_ref().expect("the worker runs");
    let want = approval_gate::ApprovalConfig::from_value(&value).expect("a valid configuration");
    assert!(
        eventually(WAIT, || w.config() == want).await,
        "the worker never loaded {value}"
    );
}

/// Counts by class: cases, and those that got their outcome.
#[derive(Default)]
struct Tally(BTreeMap<String, (usize, usize)>);

impl Tally {
    fn add(&mut self, class: &str, ok: bool) {
        let entry = self.0.entry(class.to_owned()).or_default();
        entry.0 += 1;
        entry.1 += usize::from(ok);
    }

    fn print(&self, title: &str) {
        println!("{title}\n  {:<14} {:>5} {:>5}", "class", "cases", "ok");
        for (class, (cases, ok)) in &self.0 {
            println!("  {class:<14} {cases:>5} {ok:>5}");
        }
        let (cases, ok) = self
            .0
            .values()
            .fold((0, 0), |(c, o), (cases, ok)| (c + cases, o + ok));
        println!("  {:<14} {cases:>5} {ok:>5}", "all");
    }
}

/// Sends every case to the gate under `kind`'s rules and asserts each
/// outcome.
async fn run_kind(kind: Kind) {
    let test = format!("commands_{}", kind.name());
    on_each_engine_counting_drops(&test.clone(), |engine| {
        let test = test.clone();
        async move {
            let lost = LostReplies::new(&engine);
            let scene = Scene::start(engine).await;
            let cases = corpus();
            let mut groups: BTreeMap<Vec<String>, Vec<&Case>> = BTreeMap::new();
            for case in &cases {
                groups.entry(kind.group_key(case)).or_default().push(case);
            }
            let session = format!("s_cmd_{}", kind.name());
            let mut tally = Tally::default();
            let mut wrong = Vec::new();
            for (key, group) in &groups {
                configure(&scene, kind.configuration(key)).await;
                for case in group {
                    let got = decide(&scene, &lost, &session, case).await;
                    let want = kind.expected(case);
                    let ok = got.as_deref() == Some(want.as_str());
                    tally.add(&case.class, ok);
                    if !ok {
                        wrong.push(format!(
                            "{} {}: want {}, got {}\n    rules: {}",
                            case.id,
                            case.arguments,
                            want.as_str(),
                            got.as_deref().unwrap_or("no answer"),
                            kind.configuration(key)["rules"]
                        ));
                    }
                }
            }
            tally.print(&format!(
                "{test}: outcomes by class under the {} rule",
                kind.name()
            ));
            for w in wrong.iter().take(40) {
                println!("WRONG {w}");
            }
            lost.check(&scene.engine, &test).await;
            assert!(
                wrong.is_empty(),
                "{test}: {} of {} cases got another outcome (first 40 above)",
                wrong.len(),
                cases.len()
            );
        }
    })
    .await;
}

/// The gate's decision on one case (`None`: no answer, after a retry of a
/// reply the real engine dropped).
async fn decide(scene: &Scene, lost: &LostReplies, session: &str, case: &Case) -> Option<String> {
    for attempt in 0..2 {
        let input = json!({
            "point": "pre_trigger",
            "session_id": session,
            "turn_id": "t_cmd",
            "call": {"id": format!("{}-{attempt}", case.id), "function_id": "shell::exec",
                     "arguments": case.arguments},
        });
        match scene.call("approval::gate", input).await {
            Ok(out) => return out["decision"].as_str().map(str::to_owned),
            Err(e) if lost.unanswered(&e) => continue,
            Err(e) => panic!("{}: approval::gate failed: {e}", case.id),
        }
    }
    None
}

#[tokio::test]
async fn rule_25_6_every_corpus_case_gets_its_outcome_under_a_deny_rule() {
    run_kind(Kind::Deny).await;
}

#[tokio::test]
async fn rule_25_6_every_corpus_case_gets_its_outcome_under_an_ask_rule() {
    run_kind(Kind::Ask).await;
}

#[tokio::test]
async fn rule_25_6_every_corpus_case_gets_its_outcome_under_allow_rules() {
    run_kind(Kind::Allow).await;
}

// ------------------------------------------------------------------------
// §25.6 read from the contract over the model's facts.

/// A prefix split into words like a command (§25.6).
fn prefix_words(prefix: &str) -> Vec<&str> {
    prefix.split_whitespace().collect()
}

/// Deny and ask: the program by its base name, then the prefix's words.
fn deny_match(command: &Command, prefix: &[&str]) -> bool {
    let words = &command.words;
    words.len() >= prefix.len()
        && base_name(&words[0].text) == prefix[0]
        && words[1..prefix.len()]
            .iter()
            .zip(&prefix[1..])
            .all(|(w, p)| w.text == *p)
}

/// Whether a deny or ask rule on `target` applies to the case's arguments
/// (§25.2, §25.6, §25.7, §21.4).
fn deny_applies(case: &Case) -> bool {
    let Some(fields) = case.arguments.as_object() else {
        // Arguments that are not an object match a rule with `args`.
        return true;
    };
    let target = prefix_words(&case.target);
    let mut applies = false;
    for (key, value) in fields {
        if !key.eq_ignore_ascii_case("command") {
            continue;
        }
        applies |= match value {
            Value::Null => false,
            Value::String(_) => false,
            // Any other type: deny and ask rules match.
            _ => true,
        };
    }
    applies
        || case.readings().iter().any(|reading| {
            let model = model_of(reading);
            model.is_opaque() || model.commands.iter().any(|c| deny_match(c, &target))
        })
}

/// Allow: the redirections §25.6 lets through.
fn plain_redirect(op: &str, target: Option<&str>) -> bool {
    matches!(op, "2>&1" | ">&2") || target == Some("/dev/null")
}

/// Whether one allow prefix covers a command: the exact program word, then
/// the prefix's words.
fn allow_covers(command: &Command, prefix: &[&str]) -> bool {
    let words = &command.words;
    words.len() >= prefix.len()
        && words[..prefix.len()]
            .iter()
            .zip(prefix)
            .all(|(w, p)| w.kind == WordKind::Literal && w.text == *p)
}

/// Whether one reading passes the allow rules (§25.6).
fn reading_allowed(model: &Model, prefixes: &[Vec<&str>]) -> bool {
    !model.is_opaque()
        && model.commands.iter().filter(|c| !c.speculative).all(|c| {
            c.assignments.is_empty()
                && c.wrapper.is_none()
                && c.hands_on.is_none()
                && c.via.is_empty()
                && !c.words.is_empty()
                && c.words.iter().all(|w| {
                    matches!(
                        w.kind,
                        WordKind::Literal | WordKind::Glob { leading: false }
                    )
                })
                && c.redirects.iter().all(|r| {
                    plain_redirect(
                        &r.op,
                        r.target
                            .as_ref()
                            .filter(|t| t.kind == WordKind::Literal)
                            .map(|t| t.text.as_str()),
                    )
                })
                && prefixes.iter().any(|p| allow_covers(c, p))
        })
}

fn empty(value: Option<&Value>) -> bool {
    match value {
        None | Some(Value::Null) => true,
        Some(Value::String(s)) => s.is_empty(),
        Some(Value::Array(a)) => a.is_empty(),
        Some(Value::Object(o)) => o.is_empty(),
        Some(_) => false,
    }
}

/// Whether the allow rules let the case's arguments through (§25.2,
/// §25.6: exact field names, both readings, no `env` or `stdin`).
fn allow_applies(case: &Case) -> bool {
    let Some(fields) = case.arguments.as_object() else {
        return false;
    };
    if !matches!(fields.get("command"), Some(Value::String(_)))
        || !empty(fields.get("env"))
        || !empty(fields.get("stdin"))
    {
        return false;
    }
    let prefixes: Vec<Vec<&str>> = case
        .allow_prefixes()
        .iter()
        .map(|p| prefix_words(p))
        .collect();
    let readings = case.readings_exact();
    !readings.is_empty()
        && readings
            .iter()
            .all(|r| reading_allowed(&model_of(r), &prefixes))
}

#[test]
fn rule_25_6_corpus_outcomes_follow_from_the_model() {
    let cases = corpus();
    let mut tally = Tally::default();
    let mut wrong = Vec::new();
    for case in &cases {
        let deny = if deny_applies(case) {
            Outcome::Deny
        } else {
            Outcome::Continue
        };
        let allow = if allow_applies(case) {
            Outcome::Continue
        } else {
            Outcome::Hold
        };
        let mut ok = true;
        if deny != case.expect.deny {
            ok = false;
            wrong.push(format!(
                "{} {}: deny rule on {:?}: want {}, the model's facts give {}",
                case.id,
                case.arguments,
                case.target,
                case.expect.deny.as_str(),
                deny.as_str()
            ));
        }
        if allow != case.expect.allow {
            ok = false;
            wrong.push(format!(
                "{} {}: allow rules {:?}: want {}, the model's facts give {}",
                case.id,
                case.arguments,
                case.allow_prefixes(),
                case.expect.allow.as_str(),
                allow.as_str()
            ));
        }
        tally.add(&case.class, ok);
    }
    tally.print("the corpus against the model's facts (deny and ask alike, allow)");
    for w in wrong.iter().take(60) {
        println!("WRONG {w}");
    }
    assert!(
        wrong.is_empty(),
        "{} outcomes of the corpus do not follow from the model (first 60 above)",
        wrong.len()
    );
}
