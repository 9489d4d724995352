//! The per-session settings RPCs of the decision plane
//! (`architecture/contract.md` § Settings):
//! `set-mode`, `add-always-allow`, `remove-always-allow`, `approve-always`,
//! `get-settings`, `clear-settings`. Human / console only.
//!
//! Reads never write; the first mutation of a session materialises its record
//! from the current defaults (lazy seeding); mutations read strictly and are
//! serialized per session. Every answer shows the settings as a console
//! sees them: the seeds of the rules in force first in `always_allow`
//! (never stored; `remove-always-allow` of one suppresses it for the
//! session), then the session's own entries.
//!
//! # Format
//!
//! `add-always-allow` and `approve-always` take optional bounds;
//! `approve-always` remembers exactly `function_id` unless `pattern` is true:
//!
//! ```json
//! { "session_id": "s_1", "function_id": "shell::exec", "pattern": false,
//!   "ttl_ms": 3600000, "uses": 3, "args": { "cmd": { "prefix": "git " } } }
//! ```

use std::collections::BTreeMap;
use std::sync::Arc;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::{validate_function_id, validate_id, ApprovalError};
use crate::functions::{register_shaped, register_typed, Ack};
use crate::settings::{event_key, ApprovalSettings, Bounds, GrantList, SettingsSource};
use crate::terms::ArgConstraint;
use crate::terms::Mode;
use crate::worker::Worker;

/// `approval::set-mode`.
pub(crate) const SET_MODE_ID: &str = "approval::set-mode";
/// `approval::add-always-allow`.
pub(crate) const ADD_ALWAYS_ALLOW_ID: &str = "approval::add-always-allow";
/// `approval::remove-always-allow`.
pub(crate) const REMOVE_ALWAYS_ALLOW_ID: &str = "approval::remove-always-allow";
/// `approval::approve-always`.
pub(crate) const APPROVE_ALWAYS_ID: &str = "approval::approve-always";
/// `approval::get-settings`.
pub(crate) const GET_SETTINGS_ID: &str = "approval::get-settings";
/// `approval::clear-settings`.
pub(crate) const CLEAR_SETTINGS_ID: &str = "approval::clear-settings";
/// `approval::on-settings-change`.
pub(crate) const ON_SETTINGS_CHANGE_ID: &str = "approval::on-settings-change";

/// `{session_id}`.
#[derive(Debug, Deserialize, JsonSchema)]
pub(crate) struct SessionRequest {
    /// The session (non-empty, no `/`).
    pub session_id: String,
}

/// `{session_id, mode}`.
#[derive(Debug, Deserialize, JsonSchema)]
pub(crate) struct SetModeRequest {
    /// The session (non-empty, no `/`).
    pub session_id: String,
    /// The new mode.
    pub mode: Mode,
}

/// `{session_id, function_id}`.
#[derive(Debug, Deserialize, JsonSchema)]
pub(crate) struct EntryRequest {
    /// The session (non-empty, no `/`).
    pub session_id: String,
    /// A function id or glob (non-empty).
    pub function_id: String,
}

/// `{session_id, function_id}`.
// The published title and description stay those of the version-1 request;
// the bounds are described field by field.
#[derive(Debug, Deserialize, JsonSchema)]
#[schemars(rename = "EntryRequest")]
pub(crate) struct GrantEntryRequest {
    /// The session (non-empty, no `/`).
    pub session_id: String,
    /// A function id or glob (non-empty).
    pub function_id: String,
    /// The grant stops applying this many ms after it is made (stored as
    /// `expires_at`); at least 1. Absent: it never expires.
    #[serde(default)]
    pub ttl_ms: Option<u64>,
    /// The grant allows this many calls, each written before the call runs;
    /// at least 1. Absent: unlimited.
    #[serde(default)]
    pub uses: Option<u64>,
    /// Argument constraints the call must meet, all of them: a top-level
    /// argument name or a JSON Pointer, each `{"equals": <json>}`,
    /// `{"matches": "<regex>"}` or `{"prefix": "<string>"}`. Absent: any
    /// arguments.
    #[serde(default)]
    pub args: Option<BTreeMap<String, ArgConstraint>>,
}

/// `{session_id, function_id, pattern?}` and the bounds of
/// `add-always-allow`.
// The published title stays that of the version-1 request.
#[derive(Debug, Deserialize, JsonSchema)]
#[schemars(rename = "EntryRequest")]
pub(crate) struct ApproveAlwaysRequest {
    /// The request `add-always-allow` takes.
    #[serde(flatten)]
    pub grant: GrantEntryRequest,
    /// Whether `function_id` is a glob. Absent or false: the entry matches
    /// exactly that id (`*` included, literally) — what a human who
    /// approved a call saw.
    #[serde(default)]
    pub pattern: bool,
}

impl GrantEntryRequest {
    /// The bounds, validated: positive `ttl_ms` and `uses`, constraints that
    /// compile.
    fn bounds(&self) -> Result<Bounds, ApprovalError> {
        if self.ttl_ms == Some(0) {
            return Err(ApprovalError::InvalidPayload(
                "ttl_ms must be at least 1".into(),
            ));
        }
        if self.uses == Some(0) {
            return Err(ApprovalError::InvalidPayload(
                "uses must be at least 1".into(),
            ));
        }
        if let Some(args) = &self.args {
            crate::policy::check_args(args)
                .map_err(|e| ApprovalError::InvalidPayload(e.to_string()))?;
        }
        Ok(Bounds {
            ttl_ms: self.ttl_ms,
            uses: self.uses,
            args: self.args.clone(),
        })
    }
}

/// `{settings}`: the record after the change.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct SettingsResponse {
    /// The session's settings as stored, with the seeds of the rules in
    /// force shown first in `always_allow`.
    pub settings: ApprovalSettings,
}

/// `{settings, source}`.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct GetSettingsResponse {
    /// The stored settings, or the defaults a session with nothing stored
    /// gets, with the seeds of the rules in force shown first in
    /// `always_allow`.
    pub settings: ApprovalSettings,
    /// `stored` or `defaults`.
    pub source: SettingsSource,
}

/// `{cleared}`.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct ClearResponse {
    /// Whether a stored record existed.
    pub cleared: bool,
}

fn validated(session_id: &str, function_id: Option<&str>) -> Result<(), ApprovalError> {
    validate_id("session_id", session_id)?;
    if let Some(fid) = function_id {
        validate_function_id(fid)?;
    }
    Ok(())
}

/// A `state` change event on the settings scope; only `scope` and `key`
/// are read.
// Only a schema: the handler takes the payload as raw JSON.
#[derive(JsonSchema)]
#[allow(dead_code)]
pub(crate) struct StateEvent {
    /// Always `state`.
    #[serde(rename = "type")]
    pub kind: Option<String>,
    /// `state:created`, `state:updated` or `state:deleted`.
    pub event_type: Option<String>,
    /// The state scope (`approval_settings`).
    pub scope: Option<String>,
    /// The key: a session id.
    pub key: Option<String>,
    /// The stored settings before the write.
    pub old_value: Option<Value>,
    /// The stored settings after the write.
    pub new_value: Option<Value>,
}

/// Registers one of the `{session_id, function_id}` mutations: validate,
/// apply `change` through the store (strict read, lazy seeding, one write),
/// log, answer the record.
fn register_entry_change(
    worker: &Arc<Worker>,
    id: &'static str,
    description: &str,
    logged: &'static str,
    change: fn(&mut ApprovalSettings, &str, &[String], u64),
) {
    register_typed(
        worker,
        id,
        description,
        move |w, r: EntryRequest| async move {
            validated(&r.session_id, Some(&r.function_id))?;
            let seeds = w.settings.seeds();
            let settings = w
                .settings
                .mutate(&r.session_id, |s, now| {
                    change(s, &r.function_id, &seeds, now)
                })
                .await?;
            tracing::info!(session_id = %r.session_id, function_id = %r.function_id, "{logged}");
            Ok(SettingsResponse {
                settings: w.settings.shown(&settings),
            })
        },
    );
}

/// Applies one grant through the store and logs it: `pattern` says
/// whether `function_id` is a glob.
async fn grant(
    w: &Worker,
    r: &GrantEntryRequest,
    list: GrantList,
    pattern: bool,
    logged: &'static str,
) -> Result<SettingsResponse, ApprovalError> {
    validated(&r.session_id, Some(&r.function_id))?;
    let bounds = r.bounds()?;
    let settings = w
        .settings
        .mutate(&r.session_id, |s, now| {
            s.grant(list, &r.function_id, pattern, &bounds, now)
        })
        .await?;
    tracing::info!(session_id = %r.session_id, function_id = %r.function_id, pattern, ttl_ms = r.ttl_ms, uses = r.uses, args = r.args.is_some(), "{logged}");
    Ok(SettingsResponse {
        settings: w.settings.shown(&settings),
    })
}

/// Registers the settings RPCs and the view's change hook.
pub(crate) fn register(worker: &Arc<Worker>) {
    register_typed(
        worker,
        SET_MODE_ID,
        "Set a session's approval mode (manual, auto, full). Human/console only.",
        |w, r: SetModeRequest| async move {
            validated(&r.session_id, None)?;
            let settings = w
                .settings
                .mutate(&r.session_id, |s, now| s.set_mode(r.mode, now))
                .await?;
            tracing::info!(session_id = %r.session_id, mode = r.mode.as_str(), "mode set");
            Ok(SettingsResponse {
                settings: w.settings.shown(&settings),
            })
        },
    );

    register_typed(
        worker,
        ADD_ALWAYS_ALLOW_ID,
        "Add a function id or glob to a session's always-allow list (honoured in auto mode). Human/console only.",
        |w, r: GrantEntryRequest| async move {
            grant(&w, &r, GrantList::AlwaysAllow, true, "always-allow added").await
        },
    );
    register_entry_change(
        worker,
        REMOVE_ALWAYS_ALLOW_ID,
        "Remove a function id or glob from a session's always-allow list; removing a seed of the rules keeps it out of the session. Human/console only.",
        "always-allow removed",
        |s, fid, seeds, _| s.remove_always_allow(fid, seeds),
    );
    register_typed(
        worker,
        APPROVE_ALWAYS_ID,
        "Remember a human decision: the function id is allowed in every mode for the session (exactly that id, or a glob with pattern: true). Human/console only.",
        |w, r: ApproveAlwaysRequest| async move {
            grant(
                &w,
                &r.grant,
                GrantList::ApprovedAlways,
                r.pattern,
                "approved always",
            )
            .await
        },
    );

    register_typed(
        worker,
        GET_SETTINGS_ID,
        "A session's settings: the stored record, or the defaults it would get. Never writes.",
        |w, r: SessionRequest| async move {
            validated(&r.session_id, None)?;
            let (settings, source) = w.settings.get(&r.session_id).await?;
            Ok(GetSettingsResponse { settings, source })
        },
    );

    register_typed(
        worker,
        CLEAR_SETTINGS_ID,
        "Delete a session's stored settings; it falls back to the defaults.",
        |w, r: SessionRequest| async move {
            validated(&r.session_id, None)?;
            let cleared = w.settings.clear(&r.session_id).await?;
            tracing::info!(session_id = %r.session_id, cleared, "settings cleared");
            Ok(ClearResponse { cleared })
        },
    );

    register_shaped::<StateEvent, _, _, _>(
        worker,
        ON_SETTINGS_CHANGE_ID,
        "Internal (state trigger on approval_settings): keeps the in-memory settings view in step with writes made elsewhere.",
        |w, event: Value| async move {
            if let Some(session_id) = event_key(&event) {
                if validate_id("session_id", session_id).is_ok() {
                    w.settings
                        .refresh(session_id, event.get("new_value"))
                        .await;
                }
            }
            Ok(Ack { ok: true })
        },
    );
}
