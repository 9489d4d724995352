//! The console extension (`architecture/contract.md` § The console
//! extension): what today's console loads to edit this worker's
//! configuration, decide held calls on an approvals page and switch a
//! session's mode from the chat header. The console builds no form from a
//! JSON schema any more; a worker that ships none cannot be edited there.
//!
//! Two assets, embedded in the binary (hand-written ES modules and CSS, so
//! no Node toolchain at build time), are served by one content function and
//! offered to the console by two triggers:
//!
//! | trigger type | config | content |
//! |---|---|---|
//! | `console:script` | `{"path": "approval-gate/page.js"}` | the ES module; its default export `setup(host)` |
//! | `console:style` | `{"path": "approval-gate/styles.css"}` | the stylesheet, every rule under `[data-iii-ui="approval-gate"]` |
//!
//! The triggers go through the SDK's message path, never
//! `engine::register_trigger`: they end with the worker's connection (a
//! console never fetches from a worker that is gone) and the SDK makes them
//! again on every reconnect; the engine parks them while no console is
//! connected. The paths name the worker's family, `approval-gate/`, whatever
//! `III_WORKER_NAME` calls this instance: the first segment is the scope the
//! console wraps the extension in, and the stylesheet is written for it.
//!
//! What the extension does in the browser is its own business (read
//! `assets/page.js`); every action it takes goes through this worker's
//! functions (`approval::*`), which answer redacted data only.
//!
//! # Format
//!
//! `approval-gate::ui-content {path}` → `{content, content_type}`; any other
//! path is `approval/invalid_payload`.

use std::sync::Arc;

use iii_sdk::protocol::RegisterTriggerInput;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::json;

use crate::error::ApprovalError;
use crate::functions::register_internal;
use crate::worker::Worker;

/// `approval-gate::ui-content`.
pub(crate) const ID: &str = "approval-gate::ui-content";

/// The console's trigger type for an ES module.
pub(crate) const SCRIPT: &str = "console:script";
/// The console's trigger type for a stylesheet.
pub(crate) const STYLE: &str = "console:style";

/// The module's path (the family name first, whatever the instance's name).
pub(crate) const PAGE_PATH: &str = "approval-gate/page.js";
/// The stylesheet's path.
pub(crate) const STYLES_PATH: &str = "approval-gate/styles.css";

/// The most a console takes of one asset.
pub(crate) const MAX_ASSET_BYTES: usize = 8 * 1024 * 1024;

/// One embedded asset and the trigger type that offers it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Asset {
    /// The console's path for it.
    pub path: &'static str,
    /// `console:script` or `console:style`.
    pub trigger_type: &'static str,
    /// The text served.
    pub content: &'static str,
    /// Its media type.
    pub content_type: &'static str,
}

/// Every asset the worker serves, in the order they are offered.
pub(crate) const ASSETS: [Asset; 2] = [
    Asset {
        path: PAGE_PATH,
        trigger_type: SCRIPT,
        content: include_str!("assets/page.js"),
        content_type: "text/javascript; charset=utf-8",
    },
    Asset {
        path: STYLES_PATH,
        trigger_type: STYLE,
        content: include_str!("assets/styles.css"),
        content_type: "text/css; charset=utf-8",
    },
];

// The console refuses an asset over 8 MiB: checked when the binary is built.
const _: () = {
    let mut i = 0;
    while i < ASSETS.len() {
        assert!(ASSETS[i].content.len() <= MAX_ASSET_BYTES);
        i += 1;
    }
};

/// PURE: the asset at `path`, if the worker serves one there.
pub(crate) fn asset(path: &str) -> Option<&'static Asset> {
    ASSETS.iter().find(|a| a.path == path)
}

/// `approval-gate::ui-content` request.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
pub(crate) struct UiContentRequest {
    /// The asset's path, as the trigger's config names it
    /// (`approval-gate/page.js` or `approval-gate/styles.css`).
    pub path: String,
}

/// `approval-gate::ui-content` response.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub(crate) struct UiContentResponse {
    /// The asset's text.
    pub content: &'static str,
    /// Its media type (`text/javascript; charset=utf-8` or
    /// `text/css; charset=utf-8`).
    pub content_type: &'static str,
}

/// PURE: the answer for `path`, or why there is none.
pub(crate) fn content(path: &str) -> Result<UiContentResponse, ApprovalError> {
    asset(path)
        .map(|a| UiContentResponse {
            content: a.content,
            content_type: a.content_type,
        })
        .ok_or_else(|| {
            ApprovalError::InvalidPayload(format!(
                "unknown console asset path; this worker serves {PAGE_PATH} and {STYLES_PATH}"
            ))
        })
}

/// Registers the content function (internal: console plumbing, not an API
/// anyone lists).
pub(crate) fn register(worker: &Arc<Worker>) {
    register_internal(
        worker,
        ID,
        "The console extension's assets (the configuration form, the approvals page, the session mode chip): {path} to {content, content_type}.",
        |_w, r: UiContentRequest| async move { content(&r.path) },
    );
}

/// Offers both assets to the console: one trigger each, through the SDK's
/// message path, so they leave with the connection and the SDK makes them
/// again after a reconnect. The engine parks them until a console serves
/// the trigger types; a console that cannot fetch or accept an asset
/// refuses the trigger, which the SDK only logs.
pub(crate) fn offer(worker: &Worker) {
    for a in ASSETS {
        #[allow(deprecated)] // 0.26 removed register_trigger; the engine still speaks it.
        let offered = worker
            .engine
            .iii()
            .register_trigger(RegisterTriggerInput::new(
                a.trigger_type,
                ID,
                json!({ "path": a.path }),
            ));
        match offered {
            Ok(_) => tracing::debug!(
                trigger_type = a.trigger_type,
                path = a.path,
                "console asset offered"
            ),
            Err(err) => {
                tracing::warn!(trigger_type = a.trigger_type, path = a.path, error = %err, "console asset not offered")
            }
        }
    }
}

#[cfg(test)]
mod tests;
