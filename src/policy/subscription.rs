//! An agent's subscriptions on today's harness (`architecture/contract.md`
//! § Today's harness, subscriptions): what an `engine::register_trigger` /
//! `engine::unregister_trigger` call of a turn asks for, read as data.
//!
//! Today's harness never hands these two calls to the engine's registrar:
//! after the pre-trigger chain lets one through, it makes (or removes) a
//! subscription owned by the calling session, and it removes only the
//! caller's own. So on that harness the `bindings` guard does not need to
//! refuse them outright; it judges them by what they would run:
//!
//! * a trigger type in a namespace that could reach the gate or a turn —
//!   `harness::` (turn events and every hook type, `harness::hook::post-turn`
//!   included), `approval::`, `approval-gate::`, `configuration::`,
//!   `engine::`, `console:` (ASCII case and padding ignored) — stays
//!   human-only, as does a request that is not an object with a string
//!   `trigger_type` (or, to unsubscribe, a string `id`);
//! * every function the subscription would call later, unattended — its
//!   target (`target.function_id` or `function_id`, with `target.payload` or
//!   `metadata.payload` or `{}`) and each condition's function (with the
//!   arguments the harness probes it with) — must be allowed for the session
//!   by the ladder; a target in the `harness::` namespace never is.
//!
//! On any other harness (generation 1, or none found) the two calls reach
//! the engine's registrar, so the guard refuses them as before: an agent
//! could otherwise bind a hook or unbind the gate.

use serde_json::{json, Value};

use super::guard::{names, Family, Guard};

/// The rule id of a subscription the ladder allows (its targets are all
/// allowed for the session).
pub(crate) const SUBSCRIPTION_RULE: &str = "subscription";

/// The rule id of a subscription refused because a function it would call
/// unattended is not allowed for the session.
pub(crate) const SUBSCRIPTION_TARGET_RULE: &str = "subscription_target";

/// The two controls today's harness mediates.
const CONTROLS: [&str; 2] = ["engine::register_trigger", "engine::unregister_trigger"];

/// Trigger types an agent's subscription may never name: they reach a turn,
/// a hook, the gate, the configuration, the engine or the console.
const GUARDED_TYPES: [&str; 6] = [
    "harness::",
    "approval::",
    "approval-gate::",
    "configuration::",
    "engine::",
    "console:",
];

/// The namespace no subscription target may be in (today's harness refuses
/// it too: turn events and hook points are not binding targets).
const HARNESS: &str = "harness::";

/// Whether `function_id` is one of the two subscription controls (as the
/// guard names them: ASCII case and padding ignored).
pub(crate) fn is_control(function_id: &str) -> bool {
    CONTROLS.iter().any(|c| names(function_id, c, false))
}

/// A function a subscription would call, with the arguments it is judged
/// with.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Target<'a> {
    /// The function id, as the request spells it.
    pub function_id: &'a str,
    /// What the harness would call it with (its probe's arguments).
    pub arguments: Value,
}

/// What a control asks for.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Control<'a> {
    /// A subscription: the functions it would call (none for a wake, which
    /// only notifies the session).
    Subscribe {
        /// The target first, then each condition's function.
        targets: Vec<Target<'a>>,
    },
    /// Removing one of the session's own subscriptions.
    Unsubscribe,
}

/// Reads a control call. `Err` carries the guard that keeps it human-only:
/// the trigger type's namespace, or the control itself when the request is
/// malformed.
pub(crate) fn read<'a>(
    function_id: &'a str,
    arguments: Option<&'a Value>,
) -> Result<Control<'a>, Guard<'a>> {
    let control = CONTROLS
        .iter()
        .copied()
        .find(|c| names(function_id, c, false))
        .unwrap_or(function_id);
    let refuse = |matched: &'a str| Guard {
        family: Family::Bindings,
        matched,
    };
    let Some(request @ Value::Object(obj)) = arguments else {
        return Err(refuse(control));
    };
    if control == CONTROLS[1] {
        return match obj.get("id") {
            Some(Value::String(_)) => Ok(Control::Unsubscribe),
            _ => Err(refuse(control)),
        };
    }
    let Some(trigger_type) = obj.get("trigger_type").and_then(Value::as_str) else {
        return Err(refuse(control));
    };
    if let Some(namespace) = GUARDED_TYPES
        .iter()
        .find(|ns| names(trigger_type, ns, true))
    {
        return Err(refuse(namespace));
    }
    let mut targets = Vec::new();
    let explicit = request
        .pointer("/target/function_id")
        .or_else(|| obj.get("function_id"));
    if let Some(target) = explicit {
        let Some(function_id) = target.as_str() else {
            return Err(refuse(control));
        };
        let payload = request
            .pointer("/target/payload")
            .or_else(|| request.pointer("/metadata/payload"))
            .cloned()
            .unwrap_or_else(|| json!({}));
        targets.push(Target {
            function_id,
            arguments: payload,
        });
        match obj.get("conditions") {
            None | Some(Value::Null) => {}
            Some(Value::Array(conditions)) => {
                for condition in conditions {
                    let Some(function_id) = condition.get("function_id").and_then(Value::as_str)
                    else {
                        return Err(refuse(control));
                    };
                    targets.push(Target {
                        function_id,
                        arguments: json!({
                            "event": null,
                            "condition_config": condition.get("config").cloned().unwrap_or(Value::Null),
                            "binding": {"id": null, "fires": 0},
                            "context": {"owner_session_id": null},
                        }),
                    });
                }
            }
            Some(_) => return Err(refuse(control)),
        }
    }
    Ok(Control::Subscribe { targets })
}

/// Whether a subscription may call `function_id` at all (before the
/// ladder judges it): never a `harness::` function, never empty.
pub(crate) fn bindable(function_id: &str) -> bool {
    !function_id.trim().is_empty() && !names(function_id, HARNESS, true)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read_of(function_id: &str, arguments: Value) -> Result<Control<'static>, String> {
        let function_id: &'static str = Box::leak(function_id.to_owned().into_boxed_str());
        let arguments: &'static Value = Box::leak(Box::new(arguments));
        read(function_id, Some(arguments)).map_err(|g| g.matched.to_owned())
    }

    #[test]
    fn rule_27_4_hook_and_gate_trigger_types_stay_human_only() {
        for trigger_type in [
            "harness::hook::pre-trigger",
            "harness::hook::post-trigger",
            "harness::hook::post-turn",
            "harness::turn-started",
            "HARNESS::hook::pre-trigger",
            " \u{200b}harness::hook::pre-trigger",
            "approval::pending-created",
            "Approval::pending-resolved",
            "approval-gate::anything",
            "configuration::changed",
            "engine::functions-available",
            "console:script",
            "CONSOLE:style",
        ] {
            let out = read_of(
                "engine::register_trigger",
                json!({"trigger_type": trigger_type, "function_id": "demo::tick"}),
            );
            assert!(out.is_err(), "{trigger_type:?}: {out:?}");
        }
    }

    #[test]
    fn rule_27_4_malformed_requests_stay_human_only() {
        for (fid, arguments) in [
            ("engine::register_trigger", json!(null)),
            ("engine::register_trigger", json!([])),
            ("engine::register_trigger", json!({})),
            ("engine::register_trigger", json!({"trigger_type": 7})),
            (
                "engine::register_trigger",
                json!({"trigger_type": "cron", "function_id": 7}),
            ),
            (
                "engine::register_trigger",
                json!({"trigger_type": "cron", "function_id": "a::b", "conditions": {}}),
            ),
            (
                "engine::register_trigger",
                json!({"trigger_type": "cron", "function_id": "a::b", "conditions": [{"config": {}}]}),
            ),
            ("engine::unregister_trigger", json!({})),
            ("engine::unregister_trigger", json!({"id": 3})),
        ] {
            assert_eq!(
                read_of(fid, arguments.clone())
                    .as_ref()
                    .map_err(String::as_str),
                Err(fid),
                "{fid} {arguments}"
            );
        }
    }

    #[test]
    fn rule_27_4_targets_are_the_target_then_each_condition() {
        let out = read_of(
            "engine::register_trigger",
            json!({"trigger_type": "cron", "config": {"expression": "* * * * *"},
                   "target": {"function_id": "demo::tick", "payload": {"n": 1}},
                   "function_id": "demo::ignored",
                   "conditions": [{"function_id": "demo::check", "config": {"k": 2}}]}),
        )
        .expect("a subscription");
        let Control::Subscribe { targets } = out else {
            panic!("{out:?}")
        };
        let ids: Vec<_> = targets.iter().map(|t| t.function_id).collect();
        assert_eq!(ids, ["demo::tick", "demo::check"]);
        assert_eq!(targets[0].arguments, json!({"n": 1}));
        assert_eq!(targets[1].arguments["condition_config"], json!({"k": 2}));
        // The payload may come from metadata, else it is `{}`.
        let out = read_of(
            "engine::register_trigger",
            json!({"trigger_type": "queue", "function_id": "demo::tick", "metadata": {"payload": [1]}}),
        )
        .expect("a subscription");
        assert_eq!(
            out,
            Control::Subscribe {
                targets: vec![Target {
                    function_id: "demo::tick",
                    arguments: json!([1])
                }]
            }
        );
        // A wake calls nothing.
        let out =
            read_of("engine::register_trigger", json!({"trigger_type": "cron"})).expect("a wake");
        assert_eq!(out, Control::Subscribe { targets: vec![] });
        let out = read_of("ENGINE::unregister_trigger ", json!({"id": "sub_1"})).expect("an id");
        assert_eq!(out, Control::Unsubscribe);
    }

    #[test]
    fn rule_27_4_harness_functions_are_never_bindable() {
        for target in [
            "harness::ask",
            "Harness::function::trigger",
            " harness::x",
            "",
            "  ",
        ] {
            assert!(!bindable(target), "{target:?}");
        }
        for target in ["demo::tick", "shell::exec", "harnessx::y"] {
            assert!(bindable(target), "{target:?}");
        }
        assert!(is_control("engine::register_trigger"));
        assert!(is_control(" Engine::Unregister_Trigger"));
        assert!(!is_control("engine::register_trigger_type"));
    }
}
