//! Differential tests: a naive, obviously-correct evaluator — linear scans
//! over the rules and the allow-lists with a tiny backtracking glob matcher —
//! must agree with [`decide`] on random rule sets (allow, deny and ask rules,
//! both precedences), modes, bounded and seeded grants, and calls; rule
//! examples must agree with it too; and a seeded entry never allows a call
//! the rules alone deny.

use proptest::prelude::*;
use serde_json::{json, Map, Value};

use super::*;
use crate::settings::{ApprovalSettings, Entry, GrantList, GrantedBy, Mode};

/// The time every generated decision is made at.
const NOW: u64 = 1_000_000;

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

/// An allow-list entry as generated: its pattern (a valid glob, or text
/// that is not one) and its bounds.
#[derive(Debug, Clone)]
struct GenEntry {
    pattern: GenPattern,
    seed: bool,
    expires_at: Option<u64>,
    uses_left: Option<u64>,
    args: Option<Vec<(String, ArgConstraint)>>,
}

#[derive(Debug, Clone)]
enum GenPattern {
    Glob(Vec<Tok>),
    Invalid(String),
}

impl GenEntry {
    fn text(&self) -> String {
        match &self.pattern {
            GenPattern::Glob(t) => render(t),
            GenPattern::Invalid(s) => s.clone(),
        }
    }

    fn matches(&self, id: &str) -> bool {
        match &self.pattern {
            GenPattern::Glob(t) => glob_match(t, id.as_bytes()),
            GenPattern::Invalid(s) => s == id,
        }
    }

    fn entry(&self) -> Entry {
        Entry {
            expires_at: self.expires_at,
            uses_left: self.uses_left,
            args: self.args.as_ref().map(|a| a.iter().cloned().collect()),
            ..Entry::new(
                self.text(),
                0,
                if self.seed {
                    GrantedBy::Seed
                } else {
                    GrantedBy::UserClick
                },
            )
        }
    }

    /// Whether the entry's own bounds let it apply to the call at [`NOW`].
    fn bounds_hold(&self, args: Option<&Value>) -> bool {
        self.uses_left != Some(0)
            && self.expires_at.is_none_or(|at| NOW < at)
            && constraints_hold(sorted(self.args.as_ref()).as_deref(), args)
    }
}

/// Constraints in key order, duplicates resolved as a map would.
fn sorted(args: Option<&Vec<(String, ArgConstraint)>>) -> Option<Vec<(String, ArgConstraint)>> {
    let map: std::collections::BTreeMap<_, _> = args?.iter().cloned().collect();
    Some(map.into_iter().collect())
}

fn constraints_hold(constraints: Option<&[(String, ArgConstraint)]>, args: Option<&Value>) -> bool {
    match constraints {
        None => true,
        Some(cs) => match args {
            Some(Value::Object(obj)) => cs.iter().all(|(f, c)| reference_holds(f, c, obj)),
            _ => false,
        },
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
    timeout_ms: Option<u64>,
    escalate_after_ms: Option<u64>,
}

impl GenRule {
    fn marker(&self) -> &'static str {
        match self.action {
            RuleAction::Allow => "",
            RuleAction::Deny => "!",
            RuleAction::Ask => "?",
        }
    }

    fn spec(&self) -> RuleSpec {
        self.spec_with(None)
    }

    fn spec_with(&self, examples: Option<RuleExamples>) -> RuleSpec {
        let function = render(&self.function);
        if self.shorthand && examples.is_none() {
            return RuleSpec::Shorthand(format!("{}{function}", self.marker()));
        }
        RuleSpec::Object(RuleObject {
            function,
            action: self.action,
            rule_id: self.rule_id.clone(),
            modes: self.modes.clone(),
            args: self.args.as_ref().map(|a| a.iter().cloned().collect()),
            timeout_ms: self.timeout_ms,
            escalate_after_ms: self.escalate_after_ms,
            examples,
        })
    }

    fn id(&self) -> String {
        match &self.rule_id {
            Some(id) => id.clone(),
            None => format!("{}{}", self.marker(), render(&self.function)),
        }
    }

    fn constraints(&self) -> Option<Vec<(String, ArgConstraint)>> {
        sorted(self.args.as_ref())
    }

    /// The rule alone matches the call (glob and args; what examples test).
    fn matches(&self, id: &str, args: Option<&Value>) -> bool {
        glob_match(&self.function, id.as_bytes())
            && constraints_hold(self.constraints().as_deref(), args)
    }

    /// The rule applies to the call in `mode`.
    fn applies(&self, mode: Mode, id: &str, args: Option<&Value>) -> bool {
        self.matches(id, args) && self.modes.as_ref().is_none_or(|m| m.contains(&mode))
    }

    fn first_constraint(&self) -> Option<(String, ConstraintOp, Value)> {
        self.constraints()
            .and_then(|cs| cs.into_iter().next())
            .map(|(f, c)| match c {
                ArgConstraint::Equals(v) => (f, ConstraintOp::Equals, v),
                ArgConstraint::Matches(re) => (f, ConstraintOp::Matches, Value::String(re)),
                ArgConstraint::Prefix(p) => (f, ConstraintOp::Prefix, Value::String(p)),
            })
    }
}

/// What the reference concludes; compared with a [`Decision`].
#[derive(Debug, Clone, PartialEq)]
enum Outcome {
    HumanOnly,
    Ask {
        index: usize,
        rule_id: String,
        timeout_ms: Option<u64>,
        escalate_after_ms: Option<u64>,
        constraint: Option<(String, ConstraintOp, Value)>,
    },
    Full,
    Approved(String, u32),
    Always(String, u32),
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
        Basis::Ask {
            index,
            rule_id,
            timeout_ms,
            escalate_after_ms,
            constraint,
        } => Outcome::Ask {
            index,
            rule_id: rule_id.to_owned(),
            timeout_ms,
            escalate_after_ms,
            constraint: constraint.map(|c| (c.field.to_owned(), c.operator, c.value.clone())),
        },
        Basis::ModeFull => Outcome::Full,
        Basis::ApprovedAlways { entry, slot } => Outcome::Approved(entry.function_id.clone(), slot),
        Basis::AlwaysAllow { entry, slot } => Outcome::Always(entry.function_id.clone(), slot),
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
        ArgConstraint::Prefix(p) => {
            matches!(found, Some(Value::String(s)) if s.starts_with(p.as_str()))
        }
    }
}

/// One world the reference decides in.
struct World<'a> {
    precedence: RulePrecedence,
    mode: Mode,
    always: &'a [GenEntry],
    approved: &'a [GenEntry],
    rules: &'a [GenRule],
    passed_over: &'a [GrantRef],
}

impl World<'_> {
    fn rule_outcome(&self, index: usize) -> (Verdict, Outcome) {
        let rule = &self.rules[index];
        let verdict = match rule.action {
            RuleAction::Allow => Verdict::Allow,
            RuleAction::Deny => Verdict::Deny,
            RuleAction::Ask => Verdict::Hold,
        };
        (
            verdict,
            Outcome::Rule {
                index,
                rule_id: rule.id(),
                action: rule.action,
                constraint: rule.first_constraint(),
            },
        )
    }

    /// The first rule of `action` (any allow or deny when `None`) that applies.
    fn first(&self, action: Option<RuleAction>, id: &str, args: Option<&Value>) -> Option<usize> {
        self.rules.iter().position(|r| {
            let lane = match action {
                Some(a) => r.action == a,
                None => r.action != RuleAction::Ask,
            };
            lane && r.applies(self.mode, id, args)
        })
    }

    /// The rules alone deny the call: the first allow or deny rule that
    /// applies is a deny.
    fn rules_alone_deny(&self, id: &str, args: Option<&Value>) -> bool {
        self.first(None, id, args)
            .is_some_and(|i| self.rules[i].action == RuleAction::Deny)
    }

    fn first_entry(
        &self,
        list: GrantList,
        id: &str,
        args: Option<&Value>,
    ) -> Option<(String, u32)> {
        let entries = match list {
            GrantList::ApprovedAlways => self.approved,
            GrantList::AlwaysAllow => self.always,
        };
        entries
            .iter()
            .zip(0u32..)
            .find(|(e, slot)| {
                e.matches(id)
                    && e.bounds_hold(args)
                    && !self.passed_over.contains(&GrantRef { list, slot: *slot })
                    && !(e.seed && self.rules_alone_deny(id, args))
            })
            .map(|(e, slot)| (e.text(), slot))
    }

    fn decide(&self, id: &str, args: Option<&Value>) -> (Verdict, Outcome) {
        if reference_human_only(id) {
            return (Verdict::Deny, Outcome::HumanOnly);
        }
        let deny_first = self.precedence == RulePrecedence::DenyAskAllow;
        if deny_first {
            if let Some(i) = self.first(Some(RuleAction::Deny), id, args) {
                return self.rule_outcome(i);
            }
        }
        if let Some(index) = self.first(Some(RuleAction::Ask), id, args) {
            let rule = &self.rules[index];
            return (
                Verdict::Hold,
                Outcome::Ask {
                    index,
                    rule_id: rule.id(),
                    timeout_ms: rule.timeout_ms,
                    escalate_after_ms: rule.escalate_after_ms,
                    constraint: rule.first_constraint(),
                },
            );
        }
        if self.mode == Mode::Full {
            return (Verdict::Allow, Outcome::Full);
        }
        if let Some((text, slot)) = self.first_entry(GrantList::ApprovedAlways, id, args) {
            return (Verdict::Allow, Outcome::Approved(text, slot));
        }
        if self.mode == Mode::Auto {
            if let Some((text, slot)) = self.first_entry(GrantList::AlwaysAllow, id, args) {
                return (Verdict::Allow, Outcome::Always(text, slot));
            }
        }
        let last = if deny_first {
            self.first(Some(RuleAction::Allow), id, args)
        } else {
            self.first(None, id, args)
        };
        match last {
            Some(i) => self.rule_outcome(i),
            None => (Verdict::Hold, Outcome::NoMatch),
        }
    }
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

fn pattern_strategy() -> impl Strategy<Value = GenPattern> {
    prop_oneof![
        6 => glob_strategy().prop_map(GenPattern::Glob),
        1 => prop::sample::select(vec!["a[", "{a,b", "shell::[", "a\\"])
            .prop_map(|s| GenPattern::Invalid(s.to_owned())),
    ]
}

/// Entries as a human grants them (unbounded most of the time), or as seeds.
fn entry_strategy() -> impl Strategy<Value = GenEntry> {
    let expires_at = prop::sample::select(vec![
        None,
        None,
        None,
        Some(NOW - 1),
        Some(NOW),
        Some(NOW + 1),
    ]);
    let uses_left = prop::sample::select(vec![None, None, None, Some(0), Some(1), Some(5)]);
    let args = prop::option::weighted(0.3, prop::collection::vec(constraint_strategy(), 0..3));
    (
        pattern_strategy(),
        prop::bool::weighted(0.3),
        expires_at,
        uses_left,
        args,
    )
        .prop_map(|(pattern, seed, expires_at, uses_left, args)| GenEntry {
            pattern,
            seed,
            expires_at,
            uses_left,
            args,
        })
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
        1 => prop::sample::select(vec!["v", "vv", "x", ""])
            .prop_map(|p| ArgConstraint::Prefix(p.to_owned())),
    ];
    (field, c)
}

fn rule_strategy() -> impl Strategy<Value = GenRule> {
    let action = prop::sample::select(vec![
        RuleAction::Allow,
        RuleAction::Allow,
        RuleAction::Deny,
        RuleAction::Deny,
        RuleAction::Ask,
    ]);
    let modes = prop::option::of(prop::collection::vec(mode_strategy(), 0..3));
    let rule_id = prop::option::of(prop::sample::select(vec!["r1", "r2"]).prop_map(str::to_owned));
    let args = prop::option::of(prop::collection::vec(constraint_strategy(), 0..3));
    let deadline = prop::sample::select(vec![None, None, Some(1000), Some(60_000)]);
    (
        glob_strategy(),
        any::<bool>(),
        action,
        rule_id,
        modes,
        args,
        (deadline.clone(), deadline),
    )
        .prop_map(
            |(
                function,
                shorthand,
                action,
                rule_id,
                modes,
                args,
                (timeout_ms, escalate_after_ms),
            )| {
                // A shorthand has no id, modes, args or deadlines of its own;
                // an allow shorthand cannot start with `?` (that marks ask).
                let shorthand = shorthand
                    && !(action == RuleAction::Allow && matches!(function.first(), Some(Tok::Any)));
                let asks = action == RuleAction::Ask && !shorthand;
                GenRule {
                    function,
                    shorthand,
                    action,
                    rule_id: rule_id.filter(|_| !shorthand),
                    modes: modes.filter(|_| !shorthand),
                    args: args.filter(|_| !shorthand),
                    timeout_ms: timeout_ms.filter(|_| asks),
                    escalate_after_ms: escalate_after_ms.filter(|_| asks),
                }
            },
        )
}

fn precedence_strategy() -> impl Strategy<Value = RulePrecedence> {
    prop::sample::select(vec![
        RulePrecedence::FirstMatch,
        RulePrecedence::DenyAskAllow,
    ])
}

fn passed_over_strategy() -> impl Strategy<Value = Vec<GrantRef>> {
    prop::collection::vec(
        (any::<bool>(), 0u32..4).prop_map(|(approved, slot)| GrantRef {
            list: if approved {
                GrantList::ApprovedAlways
            } else {
                GrantList::AlwaysAllow
            },
            slot,
        }),
        0..2,
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
    gen.iter().map(GenEntry::entry).collect()
}

fn compiled(specs: &[RuleSpec], precedence: RulePrecedence) -> CompiledRules {
    CompiledRules::compile(specs)
        .expect("generated rules are valid")
        .with_precedence(precedence)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn decide_agrees_with_the_reference(
        rules in prop::collection::vec(rule_strategy(), 0..12),
        precedence in precedence_strategy(),
        mode in mode_strategy(),
        always in prop::collection::vec(entry_strategy(), 0..4),
        approved in prop::collection::vec(entry_strategy(), 0..3),
        passed_over in passed_over_strategy(),
        calls in prop::collection::vec((id_strategy(), args_strategy()), 1..8),
    ) {
        let specs: Vec<RuleSpec> = rules.iter().map(GenRule::spec).collect();
        let compiled = compiled(&specs, precedence);
        prop_assert_eq!(compiled.len(), rules.len());
        let settings = CompiledSettings::new(&ApprovalSettings {
            mode,
            always_allow: to_entries(&always),
            approved_always: to_entries(&approved),
            mode_set_at: 0,
        });
        let world = World { precedence, mode, always: &always, approved: &approved, rules: &rules, passed_over: &passed_over };
        for (id, args) in &calls {
            let call = Call { function_id: id, arguments: args.as_ref() };
            let options = DecideOptions { now_ms: Some(NOW), passed_over: &passed_over, trace: None };
            let d = decide_with(&settings, &compiled, &call, options);
            let expected = world.decide(id, args.as_ref());
            prop_assert_eq!((d.verdict, outcome_of(&d)), expected, "id {:?} args {:?} specs {:?}", id, args, specs);
            // The same ladder with a trace decides the same, and its last
            // step is the decision.
            let mut trace = Vec::new();
            let options = DecideOptions { now_ms: Some(NOW), passed_over: &passed_over, trace: Some(&mut trace) };
            let traced = decide_with(&settings, &compiled, &call, options);
            prop_assert_eq!(traced, d);
            let last = trace.last().map(|t| t.outcome);
            prop_assert_eq!(last, Some(match d.verdict {
                Verdict::Allow => super::Outcome::Allow,
                Verdict::Deny => super::Outcome::Deny,
                Verdict::Hold => super::Outcome::Hold,
            }), "{:?}", trace);
            prop_assert!(trace[..trace.len() - 1].iter().all(|t| t.outcome == super::Outcome::Pass), "{:?}", trace);
        }
    }

    /// Seeding respects order: whatever the rules, a call the rules alone
    /// deny in auto mode is never allowed for a session with nothing stored
    /// (its always_allow is made of seeds only).
    #[test]
    fn a_seed_never_allows_what_the_rules_alone_deny(
        rules in prop::collection::vec(rule_strategy(), 0..12),
        precedence in precedence_strategy(),
        calls in prop::collection::vec((id_strategy(), args_strategy()), 1..8),
    ) {
        let specs: Vec<RuleSpec> = rules.iter().map(GenRule::spec).collect();
        let compiled = compiled(&specs, precedence);
        let config = crate::config::ApprovalConfig {
            default_mode: Mode::Auto,
            rules: specs.clone(),
            rule_precedence: precedence,
            ..crate::config::ApprovalConfig::default()
        };
        let defaults = crate::config::default_settings(&config, &compiled, 0);
        prop_assert!(defaults.always_allow.iter().all(|e| e.granted_by == GrantedBy::Seed));
        let settings = CompiledSettings::new(&defaults);
        let world = World { precedence, mode: Mode::Auto, always: &[], approved: &[], rules: &rules, passed_over: &[] };
        for (id, args) in &calls {
            let d = decide(&settings, &compiled, &Call { function_id: id, arguments: args.as_ref() });
            if world.rules_alone_deny(id, args.as_ref()) {
                prop_assert_ne!(d.verdict, Verdict::Allow, "id {:?} args {:?} specs {:?}", id, args, specs);
            }
            // Seeds change no verdict the rules reach on their own.
            let (verdict, _) = world.decide(id, args.as_ref());
            prop_assert_eq!(d.verdict, verdict, "id {:?} args {:?} specs {:?}", id, args, specs);
        }
    }

    /// Examples sorted by the reference compile; one put in the wrong list
    /// is a rule error at that rule's index.
    #[test]
    fn examples_agree_with_the_reference(
        rules in prop::collection::vec(rule_strategy(), 1..6),
        probes in prop::collection::vec((id_strategy(), args_strategy()), 1..6),
        victim in any::<prop::sample::Index>(),
    ) {
        let examples: Vec<RuleExamples> = rules.iter().map(|rule| {
            let mut ex = RuleExamples::default();
            for (id, args) in &probes {
                let probe = Probe { function_id: id.clone(), arguments: args.clone() };
                if rule.matches(id, args.as_ref()) {
                    ex.matching.push(probe);
                } else {
                    ex.no_match.push(probe);
                }
            }
            ex
        }).collect();
        let specs: Vec<RuleSpec> = rules.iter().zip(&examples).map(|(r, e)| r.spec_with(Some(e.clone()))).collect();
        prop_assert!(CompiledRules::compile(&specs).is_ok(), "{:?}", specs);
        let index = victim.index(rules.len());
        let mut wrong = examples[index].clone();
        std::mem::swap(&mut wrong.matching, &mut wrong.no_match);
        let mut specs = specs;
        specs[index] = rules[index].spec_with(Some(wrong));
        let errors = CompiledRules::compile(&specs).expect_err("a misplaced example fails");
        prop_assert!(errors.iter().all(|e| e.index == index), "{:?}", errors);
        prop_assert_eq!(errors.len(), probes.len());
    }

    #[test]
    fn generated_globs_match_their_reference(glob in glob_strategy(), id in id_strategy()) {
        let text = render(&glob);
        let specs = [RuleSpec::Object(RuleObject {
            function: text.clone(),
            action: RuleAction::Allow,
            rule_id: None,
            modes: None,
            args: None,
            timeout_ms: None,
            escalate_after_ms: None,
            examples: None,
        })];
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
