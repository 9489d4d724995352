//! Differential tests: a naive, obviously-correct evaluator — a linear scan
//! over the rules with a tiny backtracking glob matcher — must agree with
//! [`decide`] on random rule sets, modes, settings and calls.

use proptest::prelude::*;
use serde_json::{json, Map, Value};

use super::*;
use crate::settings::{ApprovalSettings, Entry, GrantedBy, Mode};

/// A glob as the test generates it; rendered to text for the real
/// evaluator, matched token by token by the reference.
#[derive(Debug, Clone)]
enum Tok {
    Lit(String),
    Any,
    Star,
    Class(Vec<u8>, bool),
    Alt(Vec<String>),
}

fn render(toks: &[Tok]) -> String {
    let mut out = String::new();
    for t in toks {
        match t {
            Tok::Lit(s) => out.push_str(s),
            Tok::Any => out.push('?'),
            Tok::Star => out.push('*'),
            Tok::Class(set, negated) => {
                out.push('[');
                if *negated {
                    out.push('!');
                }
                out.extend(set.iter().map(|&b| char::from(b)));
                out.push(']');
            }
            Tok::Alt(alts) => {
                out.push('{');
                out.push_str(&alts.join(","));
                out.push('}');
            }
        }
    }
    out
}

/// Byte-wise backtracking match (`?` and classes take one byte, as in globset).
fn glob_match(toks: &[Tok], s: &[u8]) -> bool {
    let Some((first, rest)) = toks.split_first() else {
        return s.is_empty();
    };
    match first {
        Tok::Star => (0..=s.len()).any(|i| glob_match(rest, &s[i..])),
        Tok::Any => !s.is_empty() && glob_match(rest, &s[1..]),
        Tok::Lit(lit) => s.starts_with(lit.as_bytes()) && glob_match(rest, &s[lit.len()..]),
        Tok::Class(set, negated) => s
            .first()
            .is_some_and(|b| set.contains(b) != *negated && glob_match(rest, &s[1..])),
        Tok::Alt(alts) => alts
            .iter()
            .any(|a| s.starts_with(a.as_bytes()) && glob_match(rest, &s[a.len()..])),
    }
}

/// An allow-list entry as generated: a valid glob, or text that is not one.
#[derive(Debug, Clone)]
enum GenEntry {
    Glob(Vec<Tok>),
    Invalid(String),
}

impl GenEntry {
    fn text(&self) -> String {
        match self {
            GenEntry::Glob(t) => render(t),
            GenEntry::Invalid(s) => s.clone(),
        }
    }

    fn matches(&self, id: &str) -> bool {
        match self {
            GenEntry::Glob(t) => glob_match(t, id.as_bytes()),
            GenEntry::Invalid(s) => s == id,
        }
    }
}

#[derive(Debug, Clone)]
struct GenRule {
    function: Vec<Tok>,
    shorthand: bool,
    action: RuleAction,
    rule_id: Option<String>,
    modes: Option<Vec<Mode>>,
    args: Option<Vec<(String, ArgConstraint)>>,
}

impl GenRule {
    fn spec(&self) -> RuleSpec {
        let function = render(&self.function);
        if self.shorthand {
            return RuleSpec::Shorthand(match self.action {
                RuleAction::Allow => function,
                RuleAction::Deny => format!("!{function}"),
            });
        }
        RuleSpec::Object(RuleObject {
            function,
            action: self.action,
            rule_id: self.rule_id.clone(),
            modes: self.modes.clone(),
            args: self.args.as_ref().map(|a| a.iter().cloned().collect()),
        })
    }

    fn id(&self) -> String {
        let function = render(&self.function);
        match (&self.rule_id, self.action) {
            (Some(id), _) => id.clone(),
            (_, RuleAction::Allow) => function,
            (_, RuleAction::Deny) => format!("!{function}"),
        }
    }

    /// The constraints in key order, duplicates resolved as a map would.
    fn constraints(&self) -> Option<Vec<(String, ArgConstraint)>> {
        let map: std::collections::BTreeMap<_, _> = self.args.as_ref()?.iter().cloned().collect();
        Some(map.into_iter().collect())
    }
}

/// What the reference concludes; compared with a [`Decision`].
#[derive(Debug, Clone, PartialEq)]
enum Outcome {
    HumanOnly,
    Full,
    Approved(String),
    Always(String),
    Rule {
        index: usize,
        rule_id: String,
        action: RuleAction,
        constraint: Option<(String, ConstraintOp, Value)>,
    },
    NoMatch,
}

fn outcome_of(d: &Decision<'_>) -> Outcome {
    match d.basis {
        Basis::HumanOnly { .. } => Outcome::HumanOnly,
        Basis::ModeFull => Outcome::Full,
        Basis::ApprovedAlways { entry } => Outcome::Approved(entry.to_owned()),
        Basis::AlwaysAllow { entry } => Outcome::Always(entry.to_owned()),
        Basis::Rule {
            index,
            rule_id,
            action,
            constraint,
        } => Outcome::Rule {
            index,
            rule_id: rule_id.to_owned(),
            action,
            constraint: constraint.map(|c| (c.field.to_owned(), c.operator, c.value.clone())),
        },
        Basis::NoMatch => Outcome::NoMatch,
    }
}

/// The id starts with a guarded namespace once leading blanks are dropped,
/// ignoring ASCII case (the engine routes nothing else to them).
fn reference_human_only(id: &str) -> bool {
    let blank = |c: char| {
        c.is_whitespace()
            || c.is_control()
            || matches!(c, '\u{200b}'..='\u{200f}' | '\u{2060}'..='\u{2064}' | '\u{feff}')
    };
    let lower = id.trim_start_matches(blank).to_ascii_lowercase();
    lower.starts_with("approval::") || lower.starts_with("configuration::")
}

fn reference_holds(field: &str, c: &ArgConstraint, args: &Map<String, Value>) -> bool {
    let whole = Value::Object(args.clone());
    let found = if field.starts_with('/') {
        whole.pointer(field)
    } else {
        args.get(field)
    };
    match c {
        ArgConstraint::Equals(expected) => found.unwrap_or(&Value::Null) == expected,
        ArgConstraint::Matches(re) => match found {
            Some(Value::String(s)) => regex::Regex::new(re)
                .expect("pool regexes are valid")
                .is_match(s),
            _ => false,
        },
    }
}

fn reference(
    mode: Mode,
    always: &[GenEntry],
    approved: &[GenEntry],
    rules: &[GenRule],
    id: &str,
    args: Option<&Value>,
) -> (Verdict, Outcome) {
    if reference_human_only(id) {
        return (Verdict::Deny, Outcome::HumanOnly);
    }
    if mode == Mode::Full {
        return (Verdict::Allow, Outcome::Full);
    }
    if let Some(e) = approved.iter().find(|e| e.matches(id)) {
        return (Verdict::Allow, Outcome::Approved(e.text()));
    }
    if mode == Mode::Auto {
        if let Some(e) = always.iter().find(|e| e.matches(id)) {
            return (Verdict::Allow, Outcome::Always(e.text()));
        }
    }
    for (index, rule) in rules.iter().enumerate() {
        if !glob_match(&rule.function, id.as_bytes()) {
            continue;
        }
        if rule.modes.as_ref().is_some_and(|m| !m.contains(&mode)) {
            continue;
        }
        let constraints = rule.constraints();
        if let Some(cs) = &constraints {
            let Some(Value::Object(obj)) = args else {
                continue;
            };
            if !cs.iter().all(|(f, c)| reference_holds(f, c, obj)) {
                continue;
            }
        }
        let verdict = match rule.action {
            RuleAction::Allow => Verdict::Allow,
            RuleAction::Deny => Verdict::Deny,
        };
        let constraint = constraints
            .and_then(|cs| cs.into_iter().next())
            .map(|(f, c)| match c {
                ArgConstraint::Equals(v) => (f, ConstraintOp::Equals, v),
                ArgConstraint::Matches(re) => (f, ConstraintOp::Matches, Value::String(re)),
            });
        return (
            verdict,
            Outcome::Rule {
                index,
                rule_id: rule.id(),
                action: rule.action,
                constraint,
            },
        );
    }
    (Verdict::Hold, Outcome::NoMatch)
}

// ---- generators ----

const SEGMENTS: &[&str] = &[
    "a",
    "b",
    "ab",
    "x.y",
    "shell",
    "approval",
    "configuration",
    "get",
    "é",
];

fn segment() -> impl Strategy<Value = String> {
    prop::sample::select(SEGMENTS).prop_map(str::to_owned)
}

fn id_strategy() -> impl Strategy<Value = String> {
    prop_oneof![
        1 => prop::sample::select(COMMON_IDS).prop_map(str::to_owned),
        2 => any_id_strategy(),
    ]
}

fn any_id_strategy() -> impl Strategy<Value = String> {
    let sep = prop::sample::select(vec!["::", "::", "/", ".", "-", ":"]);
    let prefix = prop::sample::select(vec![
        "",
        "",
        "",
        " ",
        "ns/",
        "ns::",
        "my",
        "\u{200b}",
        "APPROVAL::",
        "Configuration::",
    ]);
    (
        prefix,
        segment(),
        prop::collection::vec((sep, segment()), 0..3),
    )
        .prop_map(|(p, first, rest)| {
            let mut id = format!("{p}{first}");
            for (s, seg) in rest {
                id.push_str(s);
                id.push_str(&seg);
            }
            id
        })
}

fn tok_strategy() -> impl Strategy<Value = Tok> {
    prop_oneof![
        4 => segment().prop_map(Tok::Lit),
        3 => Just(Tok::Lit("::".to_owned())),
        1 => prop::sample::select(vec![".", "-", ":"]).prop_map(|s| Tok::Lit(s.to_owned())),
        3 => Just(Tok::Star),
        1 => Just(Tok::Any),
        1 => (prop::sample::subsequence(b"abgx.:".to_vec(), 1..3), any::<bool>())
            .prop_map(|(set, neg)| Tok::Class(set, neg)),
        1 => prop::collection::vec(segment(), 2..4).prop_map(Tok::Alt),
    ]
}

/// Ids that calls and exact rules both draw from often, so that exact ids
/// and globs compete for the same call.
const COMMON_IDS: &[&str] = &["a::b", "shell::get", "a", "x.y::ab", "a/b", "ab::b::get"];

fn glob_strategy() -> impl Strategy<Value = Vec<Tok>> {
    prop_oneof![
        3 => prop::collection::vec(tok_strategy(), 1..5),
        1 => prop::sample::select(COMMON_IDS).prop_map(|id| vec![Tok::Lit(id.to_owned())]),
        1 => Just(vec![Tok::Star]),
    ]
}

fn entry_strategy() -> impl Strategy<Value = GenEntry> {
    prop_oneof![
        6 => glob_strategy().prop_map(GenEntry::Glob),
        1 => prop::sample::select(vec!["a[", "{a,b", "shell::[", "a\\"])
            .prop_map(|s| GenEntry::Invalid(s.to_owned())),
    ]
}

fn mode_strategy() -> impl Strategy<Value = Mode> {
    prop::sample::select(vec![Mode::Manual, Mode::Auto, Mode::Full])
}

fn pool_value() -> impl Strategy<Value = Value> {
    prop::sample::select(vec![
        Value::Null,
        json!(1),
        json!(1.0),
        json!("v"),
        json!("vv"),
        json!("x9"),
        json!(true),
        json!({"p": 1}),
        json!([1]),
    ])
}

fn constraint_strategy() -> impl Strategy<Value = (String, ArgConstraint)> {
    let field = prop::sample::select(vec!["k", "n", "/o/p", "/arr/0", "/o", "/o~1p"])
        .prop_map(str::to_owned);
    let c = prop_oneof![
        1 => Just(ArgConstraint::Equals(Value::Null)),
        3 => pool_value().prop_map(ArgConstraint::Equals),
        2 => prop::sample::select(vec!["^v", "v$", "[0-9]", "x|v", ""])
            .prop_map(|r| ArgConstraint::Matches(r.to_owned())),
    ];
    (field, c)
}

fn rule_strategy() -> impl Strategy<Value = GenRule> {
    let action = prop::sample::select(vec![RuleAction::Allow, RuleAction::Deny]);
    let modes = prop::option::of(prop::collection::vec(mode_strategy(), 0..3));
    let rule_id = prop::option::of(prop::sample::select(vec!["r1", "r2"]).prop_map(str::to_owned));
    let args = prop::option::of(prop::collection::vec(constraint_strategy(), 0..3));
    (glob_strategy(), any::<bool>(), action, rule_id, modes, args).prop_map(
        // A shorthand has no id, modes or args of its own.
        |(function, shorthand, action, rule_id, modes, args)| GenRule {
            function,
            shorthand,
            action,
            rule_id: rule_id.filter(|_| !shorthand),
            modes: modes.filter(|_| !shorthand),
            args: args.filter(|_| !shorthand),
        },
    )
}

fn args_strategy() -> impl Strategy<Value = Option<Value>> {
    let object = (
        prop::option::of(pool_value()),
        prop::option::of(pool_value()),
        prop::option::of(pool_value()),
        prop::option::of(pool_value()),
        prop::option::of(pool_value()),
    )
        .prop_map(|(k, n, p, a0, slash)| {
            let mut m = Map::new();
            if let Some(k) = k {
                m.insert("k".into(), k);
            }
            if let Some(n) = n {
                m.insert("n".into(), n);
            }
            if let Some(p) = p {
                m.insert("o".into(), json!({ "p": p }));
            }
            if let Some(a0) = a0 {
                m.insert("arr".into(), json!([a0]));
            }
            if let Some(s) = slash {
                m.insert("o/p".into(), s);
            }
            Value::Object(m)
        });
    prop_oneof![
        1 => Just(None),
        1 => prop::sample::select(vec![json!([1]), json!("k"), Value::Null]).prop_map(Some),
        4 => object.prop_map(Some),
    ]
}

fn to_entries(gen: &[GenEntry]) -> Vec<Entry> {
    gen.iter()
        .map(|e| Entry::new(e.text(), 0, GrantedBy::UserClick))
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn decide_agrees_with_the_reference(
        rules in prop::collection::vec(rule_strategy(), 0..12),
        mode in mode_strategy(),
        always in prop::collection::vec(entry_strategy(), 0..4),
        approved in prop::collection::vec(entry_strategy(), 0..3),
        calls in prop::collection::vec((id_strategy(), args_strategy()), 1..8),
    ) {
        let specs: Vec<RuleSpec> = rules.iter().map(GenRule::spec).collect();
        let compiled = CompiledRules::compile(&specs).expect("generated rules are valid");
        prop_assert_eq!(compiled.len(), rules.len());
        let settings = CompiledSettings::new(&ApprovalSettings {
            mode,
            always_allow: to_entries(&always),
            approved_always: to_entries(&approved),
            mode_set_at: 0,
        });
        for (id, args) in &calls {
            let d = decide(&settings, &compiled, &Call { function_id: id, arguments: args.as_ref() });
            let expected = reference(mode, &always, &approved, &rules, id, args.as_ref());
            prop_assert_eq!((d.verdict, outcome_of(&d)), expected, "id {:?} args {:?} specs {:?}", id, args, specs);
        }
    }

    #[test]
    fn generated_globs_match_their_reference(glob in glob_strategy(), id in id_strategy()) {
        let text = render(&glob);
        let specs = [RuleSpec::Shorthand(text.clone())];
        let compiled = CompiledRules::compile(&specs).expect("valid glob");
        let settings = CompiledSettings::new(&ApprovalSettings {
            mode: Mode::Manual, always_allow: Vec::new(), approved_always: Vec::new(), mode_set_at: 0,
        });
        let d = decide(&settings, &compiled, &Call { function_id: &id, arguments: None });
        let expected = if reference_human_only(&id) {
            Verdict::Deny
        } else if glob_match(&glob, id.as_bytes()) {
            Verdict::Allow
        } else {
            Verdict::Hold
        };
        prop_assert_eq!(d.verdict, expected, "glob {:?} id {:?}", text, id);
    }
}

#[test]
fn the_reference_glob_matcher_is_itself_right() {
    let g = |toks: Vec<Tok>, s: &str| glob_match(&toks, s.as_bytes());
    assert!(g(vec![Tok::Lit("a".into()), Tok::Star], "a::b"));
    assert!(!g(vec![Tok::Lit("a".into()), Tok::Star], "b"));
    assert!(g(vec![Tok::Star, Tok::Lit("b".into())], "a/b"));
    assert!(g(vec![Tok::Any], "x"));
    assert!(!g(vec![Tok::Any], "é"));
    assert!(g(vec![Tok::Class(b"ab".to_vec(), false)], "b"));
    assert!(!g(vec![Tok::Class(b"ab".to_vec(), true)], "b"));
    assert!(g(
        vec![
            Tok::Alt(vec!["x".into(), "yz".into()]),
            Tok::Lit("!".into())
        ],
        "yz!"
    ));
    assert_eq!(
        render(&[
            Tok::Class(b"ab".to_vec(), true),
            Tok::Alt(vec!["p".into(), "q".into()])
        ]),
        "[!ab]{p,q}"
    );
    assert!(reference_human_only("\u{200b} APPROVAL::y"));
    assert!(!reference_human_only("x/APPROVAL::y"));
    assert!(!reference_human_only("xapproval::y"));
}
