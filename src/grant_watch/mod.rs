//! The grant watch: `approval::grant-watch`, the post-trigger hook on
//! `shell::*` / `coder::*` that turns a jail rejection carrying a
//! `grant_hint=` into a folder-access hold (`architecture/contract.md` § The
//! grant watch). It only ever answers continue (the original result reaches
//! the model) or hold; every failure stands down.
//!
//! * [`hint`] — recognising the rejection and its hint (pure);
//! * [`memory`] — re-ask counters and denied dirs;
//! * [`release`] — carrying out a decision on a folder prompt.
//!
//! The stand-down ladder, in order: no call or bad ids; an id that holds a
//! secret (§26.5: nothing recorded); no jail hint; the dir
//! is the session's workspace or under it; the harness already granted a
//! root containing it (or has no workspace-grant plane); the user denied it
//! or a parent; the re-ask limit is reached.

pub(crate) mod hint;

use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;

use crate::engine::Generation;
use crate::error::is_valid_id;
use crate::functions::register_hook;
use crate::hook::budget::Deadline;
use crate::hook::record::FS_SCOPE;
use crate::hook::record::{
    build_record, session_context, set_deadlines, whole_arguments, SESSION_BUDGET,
};
use crate::hook::{parse_hook_input, HookCall, HookInput, HookOutput};
use crate::pending::{AccessRequest, GrantRequest, HoldLimits, RecordKind};
use crate::worker::Worker;
use hint::{contains, recognise};

/// `approval::filesystem-access-watch`: the id today's harness recognises
/// (it enforces a session's folder boundary only while a post-trigger
/// binding of exactly this id matches the call).
pub(crate) const ID: &str = crate::bindings::durable::WATCH_ID;
/// `approval::grant-watch`: the brief's name, registered as an alias of the
/// same handler and never bound.
pub(crate) const ALIAS_ID: &str = "approval::grant-watch";

/// Budget of `harness::workspace::grants` inside the hook's 5 s.
const GRANTS_BUDGET: Duration = Duration::from_millis(1500);
/// Time kept for the durable write of a folder prompt.
const WRITE_RESERVE: Duration = Duration::from_millis(1000);

/// Why the watch let the original result through.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum StandDown {
    /// No call, or ids that fail validation.
    NoCall,
    /// An id of the call holds what looks like a secret (contract §26.5):
    /// nothing about the call is recorded.
    SecretInId,
    /// Not a jail rejection with a usable hint.
    NoHint,
    /// The dir is the session's own workspace or under it.
    Workspace,
    /// A durable grant already covers the dir.
    AlreadyGranted,
    /// The harness has no workspace-grant plane.
    NoGrantPlane,
    /// The user denied this dir (or a parent) earlier in the session.
    Denied,
    /// The call was re-asked `grant_reask_limit` times.
    ReaskLimit,
    /// A state call failed.
    StateFailed,
    /// The work did not finish within the hook's budget.
    OutOfTime,
}

impl StandDown {
    /// The name the logs give it.
    pub fn as_str(self) -> &'static str {
        crate::wire::spelling(&self)
    }
}

/// The folder a post-trigger input asks for, decided before any engine call:
/// usable ids, a jail rejection with a usable hint, a dir outside the
/// session's workspace. Pure.
pub fn folder_request(input: &HookInput) -> Result<GrantRequest, StandDown> {
    let call = input.call.as_ref().ok_or(StandDown::NoCall)?;
    let (sid, cid) = (input.session_id.as_str(), call.id.as_str());
    if !is_valid_id(sid) || !is_valid_id(cid) {
        return Err(StandDown::NoCall);
    }
    if crate::gate::secret_in_ids(input, call).is_some() {
        return Err(StandDown::SecretInId);
    }
    let grant = input
        .result
        .as_ref()
        .and_then(recognise)
        .ok_or(StandDown::NoHint)?;
    let workspace = workspace(input, call);
    if let Some(ws) = workspace {
        if contains(ws, &grant.dir) {
            tracing::error!(session_id = sid, function_call_id = cid, dir = %grant.dir, "jail rejected a path inside the session workspace: a harness stamp hole, not something a grant fixes");
            return Err(StandDown::Workspace);
        }
    }
    Ok(grant)
}

/// The session's workspace: today's harness says `metadata.fs_scope.root`
/// and stamps `call.arguments.fs_scope.root`; the brief's says
/// `metadata.working_dir`.
fn workspace<'i>(input: &'i HookInput, call: &'i HookCall) -> Option<&'i str> {
    let root_of = |scope: Option<&'i Value>| {
        scope
            .and_then(|s| s.get("root"))
            .and_then(Value::as_str)
            .filter(|r| !r.is_empty())
    };
    let metadata = input.metadata.as_ref();
    root_of(metadata.and_then(|m| m.get(FS_SCOPE)))
        .or_else(|| root_of(call.arguments.as_ref().and_then(|a| a.get(FS_SCOPE))))
        .or_else(|| {
            metadata
                .and_then(|m| m.get("working_dir"))
                .and_then(Value::as_str)
        })
}

/// The watch: decides hold or continue, within the hook's budget. Past the
/// budget it stands down (the harness delivers the original error) and
/// leaves no record behind.
pub(crate) async fn watch(worker: &Worker, input: Value) -> Result<HookOutput, StandDown> {
    let input = parse_hook_input(input).map_err(|_| StandDown::NoCall)?;
    let deadline = Deadline::hook();
    match tokio::time::timeout_at(deadline.instant(), ask(worker, &input, deadline)).await {
        Ok(answer) => answer,
        Err(_) => {
            if let Some(call) = input
                .call
                .as_ref()
                .filter(|_| is_valid_id(&input.session_id))
            {
                if is_valid_id(&call.id) {
                    let lock = worker.pending.lock(&input.session_id, &call.id).await;
                    lock.discard().await;
                }
            }
            Err(StandDown::OutOfTime)
        }
    }
}

/// The ladder and the hold, for [`watch`].
async fn ask(
    worker: &Worker,
    input: &HookInput,
    deadline: Deadline,
) -> Result<HookOutput, StandDown> {
    let grant = folder_request(input)?;
    // Borrowed, not cloned: cloning a `Value` recurses once per nesting level.
    let call = input.call.as_ref().ok_or(StandDown::NoCall)?;
    let (sid, cid) = (input.session_id.as_str(), call.id.as_str());
    let roots = worker
        .folders
        .granted_roots(sid, deadline.cap(GRANTS_BUDGET, Duration::ZERO))
        .await
        .map_err(|_| StandDown::NoGrantPlane)?
        .ok_or(StandDown::NoGrantPlane)?;
    if roots.iter().any(|r| contains(r, &grant.dir)) {
        return Err(StandDown::AlreadyGranted);
    }
    let memory = &worker.folders.memory;
    let denied = memory
        .denied_dirs(sid)
        .await
        .map_err(|_| StandDown::StateFailed)?;
    if denied.iter().any(|d| contains(d, &grant.dir)) {
        return Err(StandDown::Denied);
    }
    // Session context before the key's lock (it may take its whole budget);
    // the check, the count and the write then happen under one lock, so two
    // deliveries of one call cannot both count and write.
    let context = session_context(
        &worker.engine,
        sid,
        deadline.cap(SESSION_BUDGET, WRITE_RESERVE),
    )
    .await;
    let lock = worker.pending.lock(sid, cid).await;
    if let Some(existing) = lock.get() {
        // The same prompt again is a redelivery, unless that prompt is being
        // released right now: then the released call failed on the same dir
        // again, which is a new ask.
        if existing.grant_request.as_deref() == Some(&grant)
            && !worker.pending.is_releasing(&existing)
        {
            return Ok(HookOutput::Hold);
        }
    }
    let limit = worker.config.load().config.grant_reask_limit;
    let attempt = memory
        .count_ask(sid, &input.turn_id, cid, limit)
        .await
        .map_err(|_| StandDown::StateFailed)?
        .ok_or(StandDown::ReaskLimit)?;
    // Today's console knows the prompt as filesystem_access; the brief's
    // as folder_access.
    let kind = match worker.folders.generation().await {
        Ok(Some(Generation::G2)) => RecordKind::FilesystemAccess,
        _ => RecordKind::FolderAccess,
    };
    let mut record = build_record(input, call, kind, context);
    record.access_request = Some(Box::new(AccessRequest::from(&grant)));
    record.grant_request = Some(Box::new(grant));
    // A folder prompt has no rule behind it: the configuration's deadlines.
    set_deadlines(
        &mut record,
        HoldLimits::default(),
        &worker.config.load().config,
    );
    lock.write(record, whole_arguments(call))
        .await
        .map_err(|_| StandDown::StateFailed)?;
    tracing::info!(session_id = sid, function_call_id = cid, function_id = %call.function_id, decision = "hold", rule = "folder_access", attempt, "folder access asked");
    Ok(HookOutput::Hold)
}

/// The ids a stand-down log names, read before the input is parsed (the
/// parse consumes it). Strings only; the arguments are never looked at.
fn log_ids(input: &Value) -> (String, String, String) {
    let text = |v: Option<&Value>| v.and_then(Value::as_str).unwrap_or_default().to_string();
    let call = input.get("call");
    (
        text(input.get("session_id")),
        text(call.and_then(|c| c.get("id"))),
        text(call.and_then(|c| c.get("function_id"))),
    )
}

/// Registers `approval::filesystem-access-watch` and its alias
/// `approval::grant-watch` (raw input; it only holds or continues).
pub(crate) fn register(worker: &Arc<Worker>) {
    register_hook(
        worker,
        ID,
        "Post-trigger hook on shell::* / coder::*: turns a jail rejection (grant_hint= or filesystem_access_request= tail) into a folder-access hold. Harness only.",
        hook,
    );
    register_hook(
        worker,
        ALIAS_ID,
        "Alias of approval::filesystem-access-watch (the brief's name); not bound. Harness only.",
        hook,
    );
}

/// The watch's handler, under either id.
async fn hook(worker: Arc<Worker>, input: Value) -> HookOutput {
    let (session_id, function_call_id, function_id) = log_ids(&input);
    match watch(&worker, input).await {
        Ok(out) => out,
        Err(reason) => {
            // A result that is not a jail rejection is the common case, not a
            // stand-down: it is not logged.
            if reason != StandDown::NoHint {
                tracing::info!(
                    session_id,
                    function_call_id,
                    function_id,
                    decision = "continue",
                    rule = reason.as_str(),
                    "grant watch stood down"
                );
            }
            HookOutput::Continue
        }
    }
}
