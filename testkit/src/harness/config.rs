//! Binding configs of the harness's trigger types, parsed the way the harness
//! parses them. Pure: no SDK types.
//!
//! # Format
//!
//! Hook points (`harness::hook::*`):
//!
//! ```json
//! { "functions": ["shell::*"], "priority": 0, "timeout_ms": 5000, "on_error": "fail_closed" }
//! ```
//!
//! Every key is optional; `null` is `{}`. An unknown key rejects the binding.
//!
//! Turn lifecycle (`harness::turn-completed`, `harness::turn-started`):
//!
//! ```json
//! { "session_id": "s1", "parent_session_id": "p1" }
//! ```
//!
//! Generation 1 ignores unknown keys here; generation 2 rejects them.
//!
//! Readiness (`harness::ready`, generation 2 only): `{}` or `null`; any key
//! rejects the binding.

use globset::{Glob, GlobSet, GlobSetBuilder};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// A binding config the harness refuses; the text goes back to the binder.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid binding config: {0}")]
pub struct ConfigError(pub String);

/// The five hook points the harness offers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HookPoint {
    PreTrigger,
    PostTrigger,
    PreTurn,
    PreGenerate,
    PostGenerate,
}

impl HookPoint {
    pub const ALL: [HookPoint; 5] = [
        HookPoint::PreTrigger,
        HookPoint::PostTrigger,
        HookPoint::PreTurn,
        HookPoint::PreGenerate,
        HookPoint::PostGenerate,
    ];

    /// The trigger type id a hook binds to (kebab-case after `::`).
    pub fn trigger_type(self) -> &'static str {
        match self {
            HookPoint::PreTrigger => "harness::hook::pre-trigger",
            HookPoint::PostTrigger => "harness::hook::post-trigger",
            HookPoint::PreTurn => "harness::hook::pre-turn",
            HookPoint::PreGenerate => "harness::hook::pre-generate",
            HookPoint::PostGenerate => "harness::hook::post-generate",
        }
    }

    /// The `point` value inside a HookInput (snake_case).
    pub fn wire_name(self) -> &'static str {
        match self {
            HookPoint::PreTrigger => "pre_trigger",
            HookPoint::PostTrigger => "post_trigger",
            HookPoint::PreTurn => "pre_turn",
            HookPoint::PreGenerate => "pre_generate",
            HookPoint::PostGenerate => "post_generate",
        }
    }

    /// `pre-*` hooks guard something that has not happened yet, so a broken
    /// one blocks; `post-*` hooks only observe, so a broken one is skipped.
    pub fn default_on_error(self) -> OnError {
        match self {
            HookPoint::PreTrigger | HookPoint::PreTurn | HookPoint::PreGenerate => {
                OnError::FailClosed
            }
            HookPoint::PostTrigger | HookPoint::PostGenerate => OnError::FailOpen,
        }
    }

    pub fn from_trigger_type(trigger_type: &str) -> Option<HookPoint> {
        HookPoint::ALL
            .into_iter()
            .find(|p| p.trigger_type() == trigger_type)
    }
}

/// What the harness does when a hook errors or runs past its timeout.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OnError {
    /// The call is denied with `hook <fn> failed: <err>` / `hook <fn> timed out`.
    FailClosed,
    /// The hook is skipped; the chain goes on.
    FailOpen,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawHookConfig {
    functions: Option<Vec<String>>,
    priority: Option<i64>,
    timeout_ms: Option<u64>,
    on_error: Option<OnError>,
}

/// A parsed hook binding config, with its globs compiled once.
#[derive(Debug, Clone)]
pub struct HookConfig {
    /// The globs as given; empty = every call.
    pub functions: Vec<String>,
    pub priority: i64,
    pub timeout_ms: u64,
    pub on_error: OnError,
    matcher: Option<GlobSet>,
}

impl HookConfig {
    /// Default hook timeout, milliseconds.
    pub const DEFAULT_TIMEOUT_MS: u64 = 5000;

    pub fn parse(point: HookPoint, config: &Value) -> Result<HookConfig, ConfigError> {
        let raw: RawHookConfig = match config {
            Value::Null => RawHookConfig {
                functions: None,
                priority: None,
                timeout_ms: None,
                on_error: None,
            },
            Value::Object(_) => {
                serde_json::from_value(config.clone()).map_err(|e| ConfigError(e.to_string()))?
            }
            other => return Err(ConfigError(format!("expected an object, got {other}"))),
        };
        let functions = raw.functions.unwrap_or_default();
        let matcher = if functions.is_empty() {
            None
        } else {
            let mut builder = GlobSetBuilder::new();
            for pattern in &functions {
                let glob = Glob::new(pattern)
                    .map_err(|e| ConfigError(format!("functions: bad glob {pattern:?}: {e}")))?;
                builder.add(glob);
            }
            Some(
                builder
                    .build()
                    .map_err(|e| ConfigError(format!("functions: {e}")))?,
            )
        };
        Ok(HookConfig {
            functions,
            priority: raw.priority.unwrap_or(0),
            timeout_ms: raw.timeout_ms.unwrap_or(Self::DEFAULT_TIMEOUT_MS),
            on_error: raw.on_error.unwrap_or(point.default_on_error()),
            matcher,
        })
    }

    /// Whether this hook runs for a call of `function_id`. `*` matches any run
    /// of characters, `::` included (globset's default, no separator rule).
    pub fn matches(&self, function_id: &str) -> bool {
        match &self.matcher {
            None => true,
            Some(set) => set.is_match(function_id),
        }
    }
}

/// Checks a `harness::ready` binding config: `{}` or `null`.
pub fn parse_ready(config: &Value) -> Result<(), ConfigError> {
    match config {
        Value::Null => Ok(()),
        Value::Object(map) => match map.keys().next() {
            None => Ok(()),
            Some(key) => Err(ConfigError(format!("unknown field `{key}`"))),
        },
        other => Err(ConfigError(format!("expected an object, got {other}"))),
    }
}

/// Filter of a turn lifecycle binding. The harness documents no rejection for
/// these configs, so unknown keys are ignored (only hook configs are strict).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
pub struct TurnFilter {
    pub session_id: Option<String>,
    pub parent_session_id: Option<String>,
}

impl TurnFilter {
    pub fn parse(config: &Value) -> Result<TurnFilter, ConfigError> {
        match config {
            Value::Null => Ok(TurnFilter::default()),
            Value::Object(_) => {
                serde_json::from_value(config.clone()).map_err(|e| ConfigError(e.to_string()))
            }
            other => Err(ConfigError(format!("expected an object, got {other}"))),
        }
    }

    /// Today's harness: the same keys, and an unknown key rejects.
    pub fn parse_strict(config: &Value) -> Result<TurnFilter, ConfigError> {
        #[derive(Deserialize)]
        #[serde(deny_unknown_fields)]
        struct Strict {
            session_id: Option<String>,
            parent_session_id: Option<String>,
        }
        match config {
            Value::Null => Ok(TurnFilter::default()),
            Value::Object(_) => serde_json::from_value::<Strict>(config.clone())
                .map(|s| TurnFilter {
                    session_id: s.session_id,
                    parent_session_id: s.parent_session_id,
                })
                .map_err(|e| ConfigError(e.to_string())),
            other => Err(ConfigError(format!("expected an object, got {other}"))),
        }
    }

    /// Equality on each given field; a `parent_session_id` filter fails a
    /// turn without a parent.
    pub fn matches(&self, session_id: &str, parent_session_id: Option<&str>) -> bool {
        self.session_id.as_deref().is_none_or(|s| s == session_id)
            && self
                .parent_session_id
                .as_deref()
                .is_none_or(|p| Some(p) == parent_session_id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn defaults_depend_on_the_point() {
        let pre = HookConfig::parse(HookPoint::PreTrigger, &json!({})).unwrap();
        assert_eq!(pre.on_error, OnError::FailClosed);
        assert_eq!(pre.priority, 0);
        assert_eq!(pre.timeout_ms, 5000);
        let post = HookConfig::parse(HookPoint::PostTrigger, &Value::Null).unwrap();
        assert_eq!(post.on_error, OnError::FailOpen);
    }

    #[test]
    fn unknown_keys_and_bad_types_reject() {
        let err = HookConfig::parse(HookPoint::PreTrigger, &json!({"timeout": 5})).unwrap_err();
        assert!(err.to_string().contains("unknown field"), "{err}");
        assert!(HookConfig::parse(HookPoint::PreTrigger, &json!({"priority": "high"})).is_err());
        assert!(HookConfig::parse(HookPoint::PreTrigger, &json!({"on_error": "ignore"})).is_err());
        assert!(HookConfig::parse(HookPoint::PreTrigger, &json!(["shell::*"])).is_err());
        assert!(HookConfig::parse(HookPoint::PreTrigger, &json!({"functions": ["["]})).is_err());
    }

    #[test]
    fn globs_match_across_separators_and_empty_matches_all() {
        let c =
            HookConfig::parse(HookPoint::PostTrigger, &json!({"functions": ["shell::*"]})).unwrap();
        assert!(c.matches("shell::run"));
        assert!(c.matches("shell::fs::write"));
        assert!(!c.matches("coder::write"));
        let star = HookConfig::parse(HookPoint::PreTrigger, &json!({"functions": ["*"]})).unwrap();
        assert!(star.matches("a::b::c"));
        let exact = HookConfig::parse(HookPoint::PreTrigger, &json!({"functions": ["demo::echo"]}))
            .unwrap();
        assert!(exact.matches("demo::echo") && !exact.matches("demo::echo2"));
        let empty = HookConfig::parse(HookPoint::PreTrigger, &json!({"functions": []})).unwrap();
        assert!(empty.matches("anything::at_all"));
    }

    #[test]
    fn turn_filter_is_equality_and_lenient() {
        let f = TurnFilter::parse(&json!({"session_id": "s1", "extra": 1})).unwrap();
        assert!(f.matches("s1", None));
        assert!(!f.matches("s2", None));
        let p = TurnFilter::parse(&json!({"parent_session_id": "p"})).unwrap();
        assert!(p.matches("child", Some("p")));
        assert!(!p.matches("child", None));
        assert!(TurnFilter::parse(&json!("s1")).is_err());
    }

    #[test]
    fn generation_2_filters_and_ready_configs_are_strict() {
        assert!(TurnFilter::parse_strict(&json!({"sesion_id": "s1"})).is_err());
        let f = TurnFilter::parse_strict(&json!({"session_id": "s1"})).unwrap();
        assert!(f.matches("s1", None) && !f.matches("s2", None));
        assert_eq!(
            TurnFilter::parse_strict(&Value::Null).unwrap(),
            TurnFilter::default()
        );
        assert!(parse_ready(&json!({})).is_ok() && parse_ready(&Value::Null).is_ok());
        assert!(parse_ready(&json!({"session_id": "s1"})).is_err());
        assert!(parse_ready(&json!([])).is_err());
    }
}
