//! The per-session settings RPCs of the decision plane
//! (`architecture/contract.md` § Settings):
//! `set-mode`, `add-always-allow`, `remove-always-allow`, `approve-always`,
//! `get-settings`, `clear-settings`. Human / console only.
//!
//! Reads never write; the first mutation of a session materialises its record
//! from the current defaults (lazy seeding); mutations read strictly and are
//! serialized per session.

use std::sync::Arc;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::{validate_function_id, validate_id, ApprovalError};
use crate::functions::{register_shaped, register_typed, Ack};
use crate::settings::{event_key, ApprovalSettings, Mode, SettingsSource};
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
pub struct SessionRequest {
    /// The session (non-empty, no `/`).
    pub session_id: String,
}

/// `{session_id, mode}`.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct SetModeRequest {
    /// The session (non-empty, no `/`).
    pub session_id: String,
    /// The new mode.
    pub mode: Mode,
}

/// `{session_id, function_id}`.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct EntryRequest {
    /// The session (non-empty, no `/`).
    pub session_id: String,
    /// A function id or glob (non-empty).
    pub function_id: String,
}

/// `{settings}`: the record after the change.
#[derive(Debug, Serialize, JsonSchema)]
pub struct SettingsResponse {
    /// The session's settings as stored.
    pub settings: ApprovalSettings,
}

/// `{settings, source}`.
#[derive(Debug, Serialize, JsonSchema)]
pub struct GetSettingsResponse {
    /// The stored settings, or the defaults a session with nothing stored gets.
    pub settings: ApprovalSettings,
    /// `stored` or `defaults`.
    pub source: SettingsSource,
}

/// `{cleared}`.
#[derive(Debug, Serialize, JsonSchema)]
pub struct ClearResponse {
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
pub struct StateEvent {
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
    change: fn(&mut ApprovalSettings, &str, u64),
) {
    register_typed(
        worker,
        id,
        description,
        move |w, r: EntryRequest| async move {
            validated(&r.session_id, Some(&r.function_id))?;
            let settings = w
                .settings
                .mutate(&r.session_id, |s, now| change(s, &r.function_id, now))
                .await?;
            tracing::info!(session_id = %r.session_id, function_id = %r.function_id, "{logged}");
            Ok(SettingsResponse { settings })
        },
    );
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
            Ok(SettingsResponse { settings })
        },
    );

    register_entry_change(
        worker,
        ADD_ALWAYS_ALLOW_ID,
        "Add a function id or glob to a session's always-allow list (honoured in auto mode). Human/console only.",
        "always-allow added",
        |s, fid, now| s.add_always_allow(fid, now),
    );
    register_entry_change(
        worker,
        REMOVE_ALWAYS_ALLOW_ID,
        "Remove a function id or glob from a session's always-allow list. Human/console only.",
        "always-allow removed",
        |s, fid, _| s.remove_always_allow(fid),
    );
    register_entry_change(
        worker,
        APPROVE_ALWAYS_ID,
        "Remember a human decision: the function id or glob is allowed in every mode for the session. Human/console only.",
        "approved always",
        |s, fid, now| s.approve_always(fid, now),
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
                    w.settings.refresh(session_id).await;
                }
            }
            Ok(Ack { ok: true })
        },
    );
}
