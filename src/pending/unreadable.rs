//! PURE: stored values in the buckets of held calls that do not parse as a
//! record (contract §21.9). Boot keeps them instead of skipping them: each
//! is logged at ERROR with its key, counted in `health.unreadable`, listed by
//! `list-pending` as `kind: "unreadable"`, and leaves only on a human's deny.
//!
//! `state::list` answers values without their keys, so a value's key is
//! known only when the value itself names `session_id` and
//! `function_call_id` and those ids hash to the bucket it was found in (or it
//! was found in the first layout's single scope). A value whose key is not
//! known is still counted, logged with its scope and listed; it cannot be
//! resolved (nothing can name it), and an operator removes it from state.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::Serialize;
use serde_json::Value;

use super::record::RecordKey;

/// The `kind` of an unreadable entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub(crate) enum UnreadableKind {
    /// A stored value that does not parse as a record.
    Unreadable,
}

/// A stored value that does not parse as a record, as `list-pending` shows
/// it.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub(crate) struct UnreadableRecord {
    /// Always `unreadable`.
    pub kind: UnreadableKind,
    /// The session, when the value names it and its key is known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
    /// The call, when the value names it and its key is known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub function_call_id: Option<String>,
    /// The turn, when the value names one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub turn_id: Option<String>,
    /// The function, when the value names one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub function_id: Option<String>,
    /// The state scope the value was found in.
    pub scope: String,
    /// Why it does not parse.
    pub error: String,
}

impl UnreadableRecord {
    /// The entry for `value`, found in `scope`, that failed to parse with
    /// `error` (shown without the values it quotes, [`without_values`]); `key_scope` says which scope a record of the given ids is
    /// stored in, so the ids count as the key only when they lead back to
    /// `scope` (or `scope` is `legacy`).
    pub(crate) fn of(
        scope: &str,
        legacy: &str,
        value: &Value,
        error: String,
        key_scope: impl Fn(&str, &str) -> String,
    ) -> UnreadableRecord {
        let text = |field: &str| {
            value
                .get(field)
                .and_then(Value::as_str)
                .filter(|s| !s.is_empty() && !s.contains('/') && s.len() <= 256)
                .map(str::to_string)
        };
        let (session_id, function_call_id) = match (text("session_id"), text("function_call_id")) {
            (Some(sid), Some(cid)) if scope == legacy || key_scope(&sid, &cid) == scope => {
                (Some(sid), Some(cid))
            }
            _ => (None, None),
        };
        UnreadableRecord {
            kind: UnreadableKind::Unreadable,
            session_id,
            function_call_id,
            turn_id: text("turn_id"),
            function_id: text("function_id"),
            scope: scope.to_string(),
            error: without_values(&error),
        }
    }

    /// The state key, when known.
    pub(crate) fn key(&self) -> Option<RecordKey> {
        match (&self.session_id, &self.function_call_id) {
            (Some(sid), Some(cid)) => Some((sid.clone(), cid.clone())),
            _ => None,
        }
    }

    /// The state key as logs name it.
    pub(crate) fn key_text(&self) -> String {
        match self.key() {
            Some((sid, cid)) => format!("{sid}/{cid}"),
            None => "unknown (the value names no key of its bucket)".to_string(),
        }
    }
}

/// The unreadable values boot found, each once (boot may read a bucket
/// again after a failed attempt).
#[derive(Debug, Default)]
pub(crate) struct Unreadables {
    /// By `(scope, key)`, or `(scope, the value's text)` when the key is
    /// not known.
    entries: BTreeMap<(String, String), UnreadableRecord>,
}

impl Unreadables {
    /// Keeps an entry; false when it was known already.
    pub(crate) fn insert(&mut self, entry: UnreadableRecord, value: &Value) -> bool {
        let identity = match entry.key() {
            Some((sid, cid)) => format!("{sid}/{cid}"),
            None => value.to_string(),
        };
        self.entries
            .insert((entry.scope.clone(), identity), entry)
            .is_none()
    }

    /// How many are kept.
    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }

    /// The entry under a key, if one is kept.
    pub(crate) fn get(
        &self,
        session_id: &str,
        function_call_id: &str,
    ) -> Option<&UnreadableRecord> {
        self.entries.values().find(|e| {
            e.session_id.as_deref() == Some(session_id)
                && e.function_call_id.as_deref() == Some(function_call_id)
        })
    }

    /// Forgets the entry under a key (a deny removed it, or a new hold
    /// overwrote it); returns it.
    pub(crate) fn remove(
        &mut self,
        session_id: &str,
        function_call_id: &str,
    ) -> Option<UnreadableRecord> {
        let id = self
            .entries
            .iter()
            .find(|(_, e)| {
                e.session_id.as_deref() == Some(session_id)
                    && e.function_call_id.as_deref() == Some(function_call_id)
            })
            .map(|(id, _)| id.clone())?;
        self.entries.remove(&id)
    }

    /// At most `limit` entries, of `session_id` when given (an entry whose
    /// key is not known belongs to no session).
    pub(crate) fn list(&self, session_id: Option<&str>, limit: usize) -> Vec<UnreadableRecord> {
        self.entries
            .values()
            .filter(|e| session_id.is_none_or(|sid| e.session_id.as_deref() == Some(sid)))
            .take(limit)
            .cloned()
            .collect()
    }
}

/// A parse error as logs and listings may show it: serde quotes the value
/// it could not take (`invalid type: string "…", expected u64`, ``unknown
/// variant `…` ``), and a value that does not parse was never redacted by
/// this worker, so every quoted text is replaced by `…` — except a field's
/// name (``missing field `kind` ``), which is the record's own key. Pure.
pub(crate) fn without_values(error: &str) -> String {
    let mut out = String::with_capacity(error.len());
    let mut rest = error;
    while let Some(at) = rest.find(['"', '`']) {
        let quote = rest[at..].chars().next().unwrap_or('"');
        let (before, after) = rest.split_at(at);
        out.push_str(before);
        let after = &after[1..];
        let Some(end) = after.find(quote) else {
            out.push(quote);
            out.push('…');
            return out;
        };
        let keep = quote == '`' && out.trim_end().ends_with("field");
        out.push(quote);
        out.push_str(if keep { &after[..end] } else { "…" });
        out.push(quote);
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn scope_of(sid: &str, cid: &str) -> String {
        format!("b.{}", (sid.len() + cid.len()) % 2)
    }

    #[test]
    fn ids_count_as_the_key_only_when_they_lead_back_to_the_bucket() {
        let value = json!({"session_id": "s", "function_call_id": "c", "kind": 42});
        let here = UnreadableRecord::of("b.0", "legacy", &value, "bad".into(), scope_of);
        assert_eq!(here.key(), Some(("s".into(), "c".into())));
        let elsewhere = UnreadableRecord::of("b.1", "legacy", &value, "bad".into(), scope_of);
        assert_eq!(elsewhere.key(), None);
        let legacy = UnreadableRecord::of("legacy", "legacy", &value, "bad".into(), scope_of);
        assert_eq!(legacy.key(), Some(("s".into(), "c".into())));
        let garbage = UnreadableRecord::of("b.0", "legacy", &json!("x"), "bad".into(), scope_of);
        assert_eq!(garbage.key(), None);
        assert!(garbage.key_text().starts_with("unknown"));
        let slash = json!({"session_id": "s/x", "function_call_id": "c"});
        assert_eq!(
            UnreadableRecord::of("legacy", "legacy", &slash, "bad".into(), scope_of).key(),
            None
        );
    }

    #[test]
    fn kept_once_listed_by_session_and_removed_by_key() {
        let mut kept = Unreadables::default();
        let value = json!({"session_id": "s", "function_call_id": "c"});
        let entry = UnreadableRecord::of("b.0", "legacy", &value, "bad".into(), scope_of);
        assert!(kept.insert(entry.clone(), &value));
        assert!(!kept.insert(entry, &value));
        let garbage = json!([1, 2]);
        let unknown = UnreadableRecord::of("b.0", "legacy", &garbage, "bad".into(), scope_of);
        assert!(kept.insert(unknown, &garbage));
        assert_eq!(kept.len(), 2);
        assert_eq!(kept.list(None, 10).len(), 2);
        assert_eq!(kept.list(Some("s"), 10).len(), 1);
        assert_eq!(kept.list(None, 1).len(), 1);
        assert!(kept.get("s", "c").is_some());
        assert!(kept.remove("s", "c").is_some());
        assert!(kept.get("s", "c").is_none());
        assert_eq!(kept.len(), 1);
        let json = serde_json::to_value(kept.list(None, 1)).unwrap();
        assert_eq!(json[0]["kind"], "unreadable");
        assert!(json[0].get("session_id").is_none());
    }

    #[test]
    fn rule_21_9_an_unreadable_value_never_reaches_the_error_text() {
        #[derive(Debug, serde::Deserialize)]
        #[allow(dead_code)]
        struct Shape {
            kind: Kind,
            n: u64,
        }
        #[derive(Debug, serde::Deserialize)]
        enum Kind {
            A,
        }
        let secret = "ghp_0123456789abcdefghijklmnopqrstuvwxyzAB";
        for value in [
            json!({"kind": "A", "n": secret}),
            json!({"kind": secret, "n": 1}),
            json!({"kind": "A", "n": -7}),
        ] {
            let err = serde_json::from_value::<Shape>(value.clone())
                .unwrap_err()
                .to_string();
            let shown = without_values(&err);
            assert!(!shown.contains(secret) && !shown.contains("-7"), "{shown}");
            assert!(shown.contains('…'), "{err} → {shown}");
        }
        let missing = serde_json::from_value::<Shape>(json!({"n": 1}))
            .unwrap_err()
            .to_string();
        assert_eq!(without_values(&missing), missing, "a field's name stays");
        assert_eq!(without_values("no quotes"), "no quotes");
        assert_eq!(without_values("cut \"abc"), "cut \"…");
        let entry = UnreadableRecord::of(
            "b.0",
            "legacy",
            &json!(1),
            format!("bad \"{secret}\""),
            |_, _| String::new(),
        );
        assert_eq!(entry.error, "bad \"…\"");
    }
}
