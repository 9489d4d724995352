//! Arbitrary `rules` JSON (built from the input: shorthands, rule objects
//! with modes and argument constraints, junk) → `Vec<RuleSpec>` →
//! `CompiledRules::compile`, and the whole configuration entry →
//! `ApprovalConfig::from_value` → `Snapshot::compile`. Never panics; when the
//! rules compile, `decide` on arbitrary calls agrees with a naive linear
//! reference, for arbitrary settings and for the configuration's defaults.

#![no_main]

use approval_gate::config::{default_settings, ApprovalConfig, Snapshot};
use approval_gate::policy::{
    decide, Basis, Call, CompiledRules, CompiledSettings, RuleAction, RuleSpec, Verdict,
};
use approval_gate::settings::model::{ApprovalSettings, Entry, GrantedBy, Mode};
use approval_gate_fuzz::gen::Gen;
use approval_gate_fuzz::reference::{self, outcome_of, RefRule};
use arbitrary::{Result, Unstructured};
use libfuzzer_sys::fuzz_target;
use serde_json::{json, Map, Value};

const MODES: [&str; 3] = ["manual", "auto", "full"];

fn mode_text(g: &mut Gen) -> Result<Value> {
    Ok(if g.u.ratio(1, 16)? {
        Value::String(g.u.arbitrary()?)
    } else {
        json!(*g.u.choose(&MODES)?)
    })
}

fn constraint(g: &mut Gen) -> Result<Value> {
    Ok(match g.u.int_in_range(0..=5)? {
        0 | 1 => json!({"equals": g.value(3)?}),
        2..=4 => json!({"matches": g.regex()?}),
        _ => g.value(2)?,
    })
}

fn rule(g: &mut Gen) -> Result<Value> {
    Ok(match g.u.int_in_range(0..=7)? {
        0 | 1 => Value::String(g.glob()?),
        2 => Value::String(format!("!{}", g.glob()?)),
        3..=6 => {
            let mut obj = Map::new();
            obj.insert("function".into(), Value::String(g.glob()?));
            let action = match g.u.int_in_range(0..=12)? {
                0 => json!("hold"),
                1..=6 => json!("allow"),
                _ => json!("deny"),
            };
            obj.insert("action".into(), action);
            if g.u.ratio(1, 3)? {
                obj.insert("rule_id".into(), Value::String(g.u.arbitrary()?));
            }
            if g.u.ratio(1, 2)? {
                let n = g.u.int_in_range(0..=3)?;
                let mut modes = Vec::new();
                for _ in 0..n {
                    modes.push(mode_text(g)?);
                }
                obj.insert("modes".into(), Value::Array(modes));
            }
            if g.u.ratio(1, 2)? {
                let n = g.u.int_in_range(0..=3)?;
                let mut args = Map::new();
                for _ in 0..n {
                    args.insert(g.field()?, constraint(g)?);
                }
                obj.insert("args".into(), Value::Object(args));
            }
            if g.u.ratio(1, 32)? {
                obj.insert("mode".into(), json!([]));
            }
            Value::Object(obj)
        }
        _ => g.value(2)?,
    })
}

fn entries(g: &mut Gen) -> Result<Vec<Entry>> {
    let n = g.u.int_in_range(0..=3)?;
    let mut out = Vec::new();
    for _ in 0..n {
        out.push(Entry::new(g.glob()?, 0, GrantedBy::UserClick));
    }
    Ok(out)
}

fn arguments(g: &mut Gen) -> Result<Option<Value>> {
    Ok(match g.u.int_in_range(0..=5)? {
        0 => None,
        1 => Some(g.value(2)?),
        _ => {
            let n = g.u.int_in_range(0..=4)?;
            let mut map = Map::new();
            for _ in 0..n {
                let key = g.field()?.trim_start_matches('/').to_owned();
                let value = match g.u.int_in_range(0..=3)? {
                    0 => Value::String(g.regex()?),
                    1 => json!({"b": g.value(2)?, "dry_run": true}),
                    2 => json!([g.value(1)?, {"k": g.value(1)?}]),
                    _ => g.value(2)?,
                };
                map.insert(key, value);
            }
            Some(Value::Object(map))
        }
    })
}

/// Compares the crate's decision with the reference's.
fn agree(
    compiled: &CompiledSettings,
    settings: &ApprovalSettings,
    rules: &CompiledRules,
    reference_rules: &[RefRule],
    fid: &str,
    args: Option<&Value>,
) {
    let call = Call {
        function_id: fid,
        arguments: args,
    };
    let d = decide(compiled, rules, &call);
    let expected = reference::decide(settings, reference_rules, fid, args);
    assert_eq!(outcome_of(&d), expected, "{fid:?} {args:?}");
    let verdict = match &d.basis {
        Basis::HumanOnly => Verdict::Deny,
        Basis::Rule { index, action, .. } => {
            assert_eq!(*action, reference_rules[*index].action());
            match action {
                RuleAction::Allow => Verdict::Allow,
                RuleAction::Deny => Verdict::Deny,
            }
        }
        Basis::NoMatch => Verdict::Hold,
        _ => Verdict::Allow,
    };
    assert_eq!(d.verdict, verdict);
    let reason = d.reason(fid);
    if d.verdict == Verdict::Deny {
        let id = d.rule_id().expect("a deny names its rule");
        assert!(
            reason.starts_with(&format!("Permission denied: {fid} matched rule {id}")),
            "{reason}"
        );
    }
}

fn run(u: &mut Unstructured) -> Result<()> {
    let mut g = Gen::new(u);
    let n = g.u.int_in_range(0..=8)?;
    let mut rules_json = Vec::new();
    for _ in 0..n {
        rules_json.push(rule(&mut g)?);
    }
    let rules_json = Value::Array(rules_json);
    let default_mode = mode_text(&mut g)?;
    let mut config_json = json!({"default_mode": default_mode, "rules": rules_json.clone()});
    if g.u.ratio(1, 2)? {
        config_json["grant_reask_limit"] = json!(g.u.int_in_range(0..=5)?);
    }
    let mode = *g.u.choose(&[Mode::Manual, Mode::Auto, Mode::Full])?;
    let settings = ApprovalSettings {
        mode,
        always_allow: entries(&mut g)?,
        approved_always: entries(&mut g)?,
        mode_set_at: 0,
    };
    let ncalls = g.u.int_in_range(1..=6)?;
    let mut calls = Vec::new();
    for _ in 0..ncalls {
        calls.push((g.function_id()?, arguments(&mut g)?));
    }

    let Ok(specs) = serde_json::from_value::<Vec<RuleSpec>>(rules_json) else {
        // Rules that do not parse make the configuration invalid as well.
        assert!(ApprovalConfig::from_value(&config_json).is_err());
        return Ok(());
    };
    let compiled = match CompiledRules::compile(&specs) {
        Ok(compiled) => compiled,
        Err(errors) => {
            assert!(!errors.is_empty());
            for e in &errors {
                assert!(e.index < specs.len(), "{e} of {}", specs.len());
                assert!(!e.message.is_empty());
            }
            return Ok(());
        }
    };
    assert_eq!(compiled.len(), specs.len());
    let reference_rules: Vec<RefRule> = specs
        .iter()
        .map(|s| RefRule::of(s).expect("a compiled rule compiles alone"))
        .collect();
    let compiled_settings = CompiledSettings::new(&settings);
    for (fid, args) in &calls {
        agree(
            &compiled_settings,
            &settings,
            &compiled,
            &reference_rules,
            fid,
            args.as_ref(),
        );
    }

    // The configuration entry around the same rules, and its defaults.
    if let Ok(config) = ApprovalConfig::from_value(&config_json) {
        assert_eq!(config.rules, specs);
        let defaults = default_settings(&config, &compiled, 0);
        // Seeds come from allow rules that list `auto` and have no `args`.
        for seed in &defaults.always_allow {
            assert!(
                specs.iter().any(|s| matches!(s, RuleSpec::Object(o)
                    if o.function == seed.function_id
                        && o.action == RuleAction::Allow
                        && o.args.is_none()
                        && o.modes.as_ref().is_some_and(|m| m.contains(&Mode::Auto)))),
                "seed {:?}",
                seed.function_id
            );
        }
        let compiled_defaults = CompiledSettings::new(&defaults);
        for (fid, args) in &calls {
            agree(
                &compiled_defaults,
                &defaults,
                &compiled,
                &reference_rules,
                fid,
                args.as_ref(),
            );
        }
        let snapshot = Snapshot::compile(config);
        assert!(snapshot.rule_errors.is_empty());
        assert_eq!(snapshot.rules.len(), specs.len());
    }
    Ok(())
}

fuzz_target!(|data: &[u8]| {
    let mut u = Unstructured::new(data);
    let _ = run(&mut u);
});
