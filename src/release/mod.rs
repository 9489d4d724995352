//! Releasing a held call (`architecture/contract.md` § Releasing a held
//! call): the one path every decision takes — `approval::resolve`, a link's
//! POST, an expiry and a batch alike — from the claim to the record's end.
//!
//! 1. **Claim.** The record is marked `releasing` durably before the harness
//!    is called ([`PendingStore::claim`]); any other decision on it now
//!    answers `releasing` and changes nothing. The [`Claim`] is the one
//!    owner: dropped before the harness is asked, the record is pending
//!    again; after, it stays `releasing` until the harness's answer — or the
//!    recovery below — settles it.
//! 2. **Before the harness.** A folder `session` / `always` grant is made
//!    for a dir no grant covers yet (both harness generations stamp durable
//!    grants on the re-run), and noted on the record so it can be taken back.
//!    A folder denial remembers the dir.
//! 3. **The harness** (`harness::function::resolve`), waited for up to
//!    `release_timeout_ms`: today's harness answers an allowed call only when
//!    it has run. The decider waits `resolve_wait_ms` at most and then hears
//!    `releasing`; the outcome event follows.
//! 4. **After the harness confirmed** (`resolved: true`), and only then: the
//!    remembered function (`approve-always`, exact) and the `always` folder
//!    persist into the shell's roots. The record leaves through the emit
//!    gate with the decision's outcome.
//! 5. **Otherwise**: `resolved: false` → the grant is taken back, outcome
//!    `aborted` / `not_held`. A failure that surely did not reach the harness
//!    (or that it answered with an error) → the grant is taken back and the
//!    record is pending again (`approval/harness_unavailable`). A lost answer
//!    (a timeout, a harness gone mid-call) → `harness::status` says whether
//!    the call is still pending (then pending again); otherwise, and where
//!    no status exists, the outcome is `unknown`: the call may have run, and
//!    is never announced as `aborted`.
//!
//! A release whose owner went away after the harness was asked (an aborted
//! task, a restart) is recovered the same way ([`recover`]).

pub(crate) mod recover;
pub(crate) mod timer;

use std::sync::Arc;
use std::time::Duration;

use crate::backoff::Backoff;
use crate::config::ConfigCell;
use crate::edits::store::EditStore;
use crate::engine::{CallError, Engine, HarnessStatus, ReleaseAction};
use crate::error::StateError;
use crate::folders::{contains, Folders, GrantScope};
use crate::pending::{
    timeout_denial, Claim, PendingRecord, PendingStore, RecordKind, ReleaseNote, ReleaseVia,
    Resolution, RulingKind, Take,
};
use crate::provenance::Caller;
use crate::review::Reviews;
use crate::settings::store::SettingsStore;
use crate::terms::leads::{self, led};
use crate::terms::{Bounds, GrantList};
use crate::time::now_ms;

/// The `pending-resolved` reason of a call the harness no longer held.
pub(crate) const NOT_HELD: &str = "not_held";
/// The `pending-resolved` reason of an expired hold.
pub(crate) const TIMEOUT: &str = "timeout";
/// The `pending-resolved` reason when what became of the call is unknown.
pub(crate) const UNKNOWN: &str = "unknown";
/// What the logs name as the rule behind a human's decision, as the denial
/// envelope names the decider (`denied_by: "user"`).
const USER_RULE: &str = "user";
/// The denial text when a human denies without a reason.
pub(crate) const OPERATOR_REJECTED: &str = "Rejected by operator.";

/// How long the durable grants of a session are looked up for.
const ROOTS_BUDGET: Duration = Duration::from_secs(3);
/// How many times a settled release tries its emit-gated removal (or its
/// give-back), and the waits after each failed try (250 ms doubling).
const FINISH_ATTEMPTS: usize = 5;
const FINISH_RETRY: Backoff = Backoff::new(Duration::from_millis(250), Duration::from_secs(4));

/// A decision to carry: a human's, or the timer's. Its kind is what the
/// record's note keeps ([`RulingKind`]); its data (the deny's reason, the
/// folder grant's scope, `remember`) lives only as long as the release.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Ruling {
    /// Run the call. Folder prompts: `grant_scope` (default once). Function
    /// holds: `remember` approves the function always for the session, once
    /// the harness confirmed.
    Allow {
        grant_scope: Option<GrantScope>,
        remember: Remember,
    },
    /// Answer it with a human's denial (`reason`, else the default text).
    Deny { reason: Option<String> },
    /// A human's edit (contract §28): answer it with a denial that gives
    /// the model the edited call (`to_model`, as written); what the events
    /// and logs carry is `shown` (the same text, the arguments redacted).
    Edit { to_model: String, shown: String },
    /// Answer it with the timeout's denial.
    Timeout,
}

/// What an allowed function hold leaves behind for the rest of its session,
/// once the harness confirmed it ran.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Remember {
    /// Nothing: this call only.
    Nothing,
    /// "Allow and don't ask again in this session": the exact function.
    Function,
    /// "Allow `<prefix> …` in this session": the exact function, for the
    /// commands the record's `suggested_prefix` covers.
    Prefix,
}

impl Remember {
    /// From a link's two choices (the prefix wins when both are set).
    pub(crate) fn of(function: bool, prefix: bool) -> Remember {
        match (function, prefix) {
            (_, true) => Remember::Prefix,
            (true, false) => Remember::Function,
            (false, false) => Remember::Nothing,
        }
    }
}

impl Ruling {
    /// What the record's note says was decided (`release.decision`).
    pub(crate) fn kind(&self) -> RulingKind {
        match self {
            Ruling::Allow { .. } => RulingKind::Allow,
            Ruling::Deny { .. } | Ruling::Edit { .. } => RulingKind::Deny,
            Ruling::Timeout => RulingKind::Timeout,
        }
    }

    /// The outcome a taken decision is announced with, and its reason.
    fn outcome(&self) -> (Resolution, Option<String>) {
        match self {
            Ruling::Allow { .. } => (Resolution::Allow, None),
            Ruling::Deny { reason } => (Resolution::Deny, reason.clone()),
            Ruling::Edit { shown, .. } => (Resolution::Deny, Some(shown.clone())),
            Ruling::Timeout => (Resolution::Timeout, Some(TIMEOUT.to_string())),
        }
    }

    /// The name logs give it: its kind's wire spelling.
    pub(crate) fn as_str(&self) -> &'static str {
        self.kind().as_str()
    }
}

/// One decision on one held call.
#[derive(Debug, Clone)]
pub(crate) struct Request {
    /// The session (validated by the caller).
    pub session_id: String,
    /// The held call (validated by the caller).
    pub function_call_id: String,
    /// The revision `(pending_at, kind)` the decider saw, when it names one
    /// (a link, a batch item, the timer): any other record is left alone.
    pub expected: Option<(u64, RecordKind)>,
    /// What was decided.
    pub decision: Ruling,
    /// How the decision came.
    pub via: ReleaseVia,
    /// Who carried it (`pending-resolved`'s `decided_by.caller`).
    pub caller: Option<Caller>,
}

/// What a decider hears.
#[derive(Debug)]
pub(crate) enum Answer {
    /// The harness took the decision (`resolved: true`). `announced`: this
    /// release emitted the record's `pending-resolved`.
    Taken {
        turn_resumed: Option<bool>,
        announced: bool,
    },
    /// The harness no longer held the call: nothing ran on this decision
    /// (`aborted` / `not_held`).
    NotHeld,
    /// What became of the call cannot be told (`unknown`); it may have run.
    Unknown,
    /// The decision is under way (or another one is): the outcome event
    /// follows.
    Releasing,
    /// No record under the ids.
    Absent,
    /// A record under the ids, but not the expected revision.
    Stale,
    /// The harness did not take the decision; the record is pending again.
    Unavailable(CallError),
    /// The record could not be marked; nothing was asked.
    State(StateError),
}

impl Answer {
    /// Whether the harness confirmed the decision (`resolved: true`): the
    /// one answer after which an edit's grant stays (contract §28.1).
    pub(crate) fn confirmed(&self) -> bool {
        matches!(self, Answer::Taken { .. })
    }
}

/// What the release path needs, each part from a lower module.
pub(crate) struct Releaser {
    engine: Engine,
    pending: Arc<PendingStore>,
    settings: Arc<SettingsStore>,
    folders: Arc<Folders>,
    config: Arc<ConfigCell>,
    /// The reviewer's memory: a human's decision closes the session's
    /// breaker (`architecture/contract.md` § The reviewer).
    reviews: Arc<Reviews>,
    /// The edits' one-shot grants: a recovered edit's release takes its
    /// grant back ([`recover`]).
    edits: Arc<EditStore>,
}

impl Releaser {
    pub(crate) fn new(
        engine: Engine,
        pending: Arc<PendingStore>,
        settings: Arc<SettingsStore>,
        folders: Arc<Folders>,
        config: Arc<ConfigCell>,
        edits: Arc<EditStore>,
    ) -> Arc<Releaser> {
        Arc::new(Releaser {
            engine,
            pending,
            settings,
            folders,
            config,
            reviews: Arc::default(),
            edits,
        })
    }

    /// The reviewer's memory, which every human decision reaches.
    pub(crate) fn reviews(&self) -> &Arc<Reviews> {
        &self.reviews
    }

    /// The decider's wait (`resolve_wait_ms`).
    pub(crate) fn resolve_wait(&self) -> Duration {
        Duration::from_millis(self.config.load().config.resolve_wait_ms)
    }

    /// Claims the record and carries the decision; the decider waits at
    /// most `wait` (`None`: until the release ends) and then hears
    /// [`Answer::Releasing`] while the release goes on.
    pub(crate) async fn release(
        self: &Arc<Self>,
        request: Request,
        wait: Option<Duration>,
    ) -> Answer {
        let claim = match self.claim(&request).await {
            Ok(claim) => claim,
            Err(answer) => return answer,
        };
        let this = self.clone();
        let mut task = tokio::spawn(async move { this.carry(claim, request).await });
        let done = match wait {
            None => (&mut task).await,
            Some(wait) => match tokio::time::timeout(wait, &mut task).await {
                Ok(done) => done,
                Err(_) => return Answer::Releasing,
            },
        };
        // A release task that did not return (a panic; the runtime going
        // down) left its claim to the recovery.
        done.unwrap_or(Answer::Releasing)
    }

    /// Step 1 alone: claims the record for `request` (marked `releasing`
    /// durably); a record that cannot be claimed answers why. A batch claims
    /// every record first, then carries them ([`Releaser::carry`]).
    pub(crate) async fn claim(&self, request: &Request) -> Result<Claim, Answer> {
        let note = ReleaseNote {
            decision: request.decision.kind(),
            via: request.via,
            at: now_ms(),
            granted: None,
            caller: request.caller.clone(),
            edited: matches!(request.decision, Ruling::Edit { .. }),
        };
        match self
            .pending
            .claim(
                &request.session_id,
                &request.function_call_id,
                request.expected,
                note,
            )
            .await
        {
            Ok(Take::Claimed(claim)) => {
                // A human decided a call of the session (a resolve, a link,
                // a batch): the reviewer's breaker for it closes.
                if request.via.is_human() {
                    self.reviews.human_decided(&request.session_id);
                }
                Ok(claim)
            }
            Ok(Take::Absent) => Err(Answer::Absent),
            Ok(Take::Stale) => Err(Answer::Stale),
            Ok(Take::Releasing) => Err(Answer::Releasing),
            Err(err) => Err(Answer::State(err)),
        }
    }

    /// Carries a claimed decision to the harness and settles the record.
    pub(crate) async fn carry(&self, mut claim: Claim, request: Request) -> Answer {
        let record = claim.record().clone();
        let (sid, cid) = (&record.session_id, &record.function_call_id);
        let (action, granted) = self.prepare(&mut claim, &request.decision).await;
        let runs = action.is_execute();
        claim.sent();
        let timeout = Duration::from_millis(self.config.load().config.release_timeout_ms);
        let answered = self
            .engine
            .harness_resolve(&record.release(action), timeout)
            .await;
        match answered {
            Ok(released) if released.resolved == Some(true) => {
                self.after_confirmed(&record, &request.decision).await;
                let (outcome, reason) = request.decision.outcome();
                let announced = finish(claim, outcome, reason).await;
                if request.via != ReleaseVia::Timer {
                    let (grant_scope, remembered) = match &request.decision {
                        Ruling::Allow {
                            grant_scope,
                            remember,
                        } => (
                            record
                                .kind
                                .is_folder()
                                .then(|| grant_scope.unwrap_or(GrantScope::Once).as_str()),
                            *remember != Remember::Nothing && record.kind == RecordKind::Function,
                        ),
                        _ => (None, false),
                    };
                    tracing::info!(session_id = %sid, function_call_id = %cid, function_id = %record.function_id, decision = request.decision.as_str(), rule = USER_RULE, via = request.via.as_str(), kind = record.kind.as_str(), grant_scope, remembered, settled = announced, "call resolved");
                }
                Answer::Taken {
                    turn_resumed: released.turn_resumed,
                    announced,
                }
            }
            Ok(_) if record.uncertain && runs => {
                // An earlier allow of this call may have run it: the harness
                // not holding it now says nothing about that.
                self.take_back(sid, granted.as_deref()).await;
                tracing::warn!(session_id = %sid, function_call_id = %cid, function_id = %record.function_id, "the harness no longer holds a call an earlier decision may have run; its outcome is unknown");
                finish(claim, Resolution::Unknown, Some(UNKNOWN.to_string())).await;
                Answer::Unknown
            }
            Ok(_) => {
                self.take_back(sid, granted.as_deref()).await;
                tracing::warn!(session_id = %sid, function_call_id = %cid, function_id = %record.function_id, decision = request.decision.as_str(), "the harness no longer held the call; its record is removed and nothing ran on this decision");
                finish(claim, Resolution::Aborted, Some(NOT_HELD.to_string())).await;
                Answer::NotHeld
            }
            Err(err) if !err.answer_lost() => {
                // Never reached the harness, or the harness said it failed:
                // the call is still held.
                self.take_back(sid, granted.as_deref()).await;
                tracing::warn!(session_id = %sid, function_call_id = %cid, function_id = %record.function_id, decision = request.decision.as_str(), error = %err, "the harness did not take the decision; the call stays held");
                crate::metrics::release_failure("unavailable");
                give_back(claim, false).await;
                Answer::Unavailable(err)
            }
            Err(err) => {
                crate::metrics::release_failure("answer_lost");
                self.settle_lost(claim, granted, runs, err).await
            }
        }
    }

    /// What the harness is asked to do, after the effects that must come
    /// first; returns the folder granted for this release, if any.
    async fn prepare(
        &self,
        claim: &mut Claim,
        decision: &Ruling,
    ) -> (ReleaseAction, Option<String>) {
        let record = claim.record().clone();
        let dir = record.grant_request.as_ref().map(|g| g.dir.clone());
        match (record.kind, decision, dir) {
            (_, Ruling::Timeout, _) => (timeout_denial(&record), None),
            // The resolve refuses an edit of a folder prompt; were one to
            // come here, it is the same denial.
            (_, Ruling::Edit { to_model, .. }, _) => (record.user_denial(to_model), None),
            (RecordKind::Function, Ruling::Allow { grant_scope, .. }, _) => {
                if grant_scope.is_some() {
                    tracing::info!(session_id = %record.session_id, function_call_id = %record.function_call_id, "grant_scope ignored: the record is not a folder-access prompt");
                }
                (ReleaseAction::execute(None), None)
            }
            (RecordKind::Function, Ruling::Deny { reason }, _)
            | (_, Ruling::Deny { reason }, None) => (
                record.user_denial(&led(
                    leads::HUMAN,
                    reason.as_deref().unwrap_or(OPERATOR_REJECTED),
                )),
                None,
            ),
            (_, Ruling::Allow { .. }, None) => (ReleaseAction::execute(None), None),
            (_, Ruling::Deny { reason }, Some(dir)) => {
                if let Err(err) = self
                    .folders
                    .memory
                    .remember_denied(&record.session_id, &dir)
                    .await
                {
                    tracing::warn!(session_id = %record.session_id, error = %err, "denied dir not remembered");
                }
                let text = reason
                    .clone()
                    .unwrap_or_else(|| format!("user denied folder access to {dir}"));
                (record.user_denial(&led(leads::HUMAN, &text)), None)
            }
            (_, Ruling::Allow { grant_scope, .. }, Some(dir)) => {
                match grant_scope.unwrap_or(GrantScope::Once) {
                    GrantScope::Once => (ReleaseAction::execute(Some(&dir)), None),
                    GrantScope::Session | GrantScope::Always => self.grant_first(claim, &dir).await,
                }
            }
        }
    }

    /// A `session` / `always` folder grant before the release: only for a
    /// dir no grant covers; a grant that fails falls back to a one-shot
    /// root, so the click still works.
    async fn grant_first(&self, claim: &mut Claim, dir: &str) -> (ReleaseAction, Option<String>) {
        let sid = claim.record().session_id.clone();
        if let Ok(Some(roots)) = self.folders.granted_roots(&sid, ROOTS_BUDGET).await {
            if roots.iter().any(|root| contains(root, dir)) {
                return (ReleaseAction::execute(None), None);
            }
        }
        match self.folders.grant(&sid, dir).await {
            Ok(()) => {
                if let Err(err) = claim.note_grant(dir).await {
                    tracing::warn!(session_id = %sid, dir, error = %err, "the folder grant is not noted on the record; a restart could not take it back");
                }
                (ReleaseAction::execute(None), Some(dir.to_string()))
            }
            Err(err) => {
                tracing::warn!(session_id = %sid, dir, error = %err, "durable grant failed; releasing with a one-shot root");
                (ReleaseAction::execute(Some(dir)), None)
            }
        }
    }

    /// The effects that wait for the harness's confirmation.
    async fn after_confirmed(&self, record: &PendingRecord, decision: &Ruling) {
        let Ruling::Allow {
            grant_scope,
            remember,
        } = decision
        else {
            return;
        };
        let sid = record.session_id.as_str();
        match record.kind {
            RecordKind::Function if *remember != Remember::Nothing => {
                let function_id = record.function_id.clone();
                let prefix = match remember {
                    Remember::Prefix => match &record.suggested_prefix {
                        Some(prefix) => Some(prefix.clone()),
                        None => {
                            tracing::info!(session_id = sid, function_call_id = %record.function_call_id, "remember_prefix ignored: the record suggests no prefix");
                            return;
                        }
                    },
                    _ => None,
                };
                let stored = self
                    .settings
                    .mutate(sid, |s, now| match &prefix {
                        None => s.approve_always(&function_id, now),
                        Some(prefix) => {
                            let args = [(
                                "command".to_owned(),
                                crate::terms::ArgConstraint::Prefix(prefix.clone()),
                            )];
                            s.grant(
                                GrantList::ApprovedAlways,
                                &function_id,
                                false,
                                &Bounds {
                                    args: Some(args.into_iter().collect()),
                                    ..Bounds::default()
                                },
                                now,
                            )
                        }
                    })
                    .await;
                match stored {
                    Ok(_) => {
                        tracing::info!(session_id = sid, function_id = %record.function_id, prefix = prefix.as_deref(), "approved always")
                    }
                    Err(err) => {
                        tracing::warn!(session_id = sid, function_id = %record.function_id, error = %err, "the call ran, but approve-always was not stored")
                    }
                }
            }
            kind if kind.is_folder() && *grant_scope == Some(GrantScope::Always) => {
                let Some(dir) = record.grant_request.as_ref().map(|g| g.dir.as_str()) else {
                    return;
                };
                match self.folders.persist_host_root(dir).await {
                    Ok(_) => {
                        tracing::info!(session_id = sid, dir, "folder added to the shell's roots")
                    }
                    Err(err) => {
                        tracing::warn!(session_id = sid, dir, error = %err, "shell fs.host_roots not updated")
                    }
                }
            }
            RecordKind::Function if grant_scope.is_some() => {}
            _ if *remember != Remember::Nothing => {
                tracing::info!(session_id = sid, function_call_id = %record.function_call_id, "remember ignored: only an allowed function hold is remembered")
            }
            _ => {}
        }
    }

    /// Takes back a folder this release granted (the call did not run on
    /// it); a revoke the harness does not take is kept and retried.
    async fn take_back(&self, session_id: &str, granted: Option<&str>) {
        if let Some(dir) = granted {
            self.folders.revoke_or_keep(session_id, dir).await;
        }
    }

    /// The harness's answer was lost: ask it whether the call is still
    /// pending (then pending again, any grant taken back); otherwise the
    /// outcome is unknown and any grant stays.
    pub(crate) async fn settle_lost(
        &self,
        claim: Claim,
        granted: Option<String>,
        runs: bool,
        err: CallError,
    ) -> Answer {
        let record = claim.record().clone();
        let (sid, cid) = (&record.session_id, &record.function_call_id);
        match self.engine.harness_status(sid).await {
            Ok(status) if status.may_hold(cid) => {
                self.take_back(sid, granted.as_deref()).await;
                tracing::warn!(session_id = %sid, function_call_id = %cid, function_id = %record.function_id, error = %err, "the harness's answer was lost and it still holds the call; the call is pending again");
                give_back(claim, runs).await;
                Answer::Unavailable(err)
            }
            status => {
                let why = match status {
                    Ok(status) if status.awaits_child(cid) => {
                        "the call waits on the sub-agent it spawned: it ran".to_string()
                    }
                    Ok(HarnessStatus::Unknown) => {
                        "the harness knows no turn of the session".to_string()
                    }
                    Ok(_) => "the harness no longer lists the call".to_string(),
                    Err(status_err) if status_err.is_function_not_found() => {
                        "the harness cannot say (no harness::status)".to_string()
                    }
                    Err(status_err) => format!("harness::status failed: {status_err}"),
                };
                tracing::warn!(session_id = %sid, function_call_id = %cid, function_id = %record.function_id, error = %err, why, granted = granted.as_deref(), "the harness's answer to a release was lost; the call may have run, its outcome is unknown (any folder grant stays)");
                finish(claim, Resolution::Unknown, Some(UNKNOWN.to_string())).await;
                Answer::Unknown
            }
        }
    }
}

/// Settles a claim, retrying the emit-gated removal a few times; a claim
/// that still cannot settle is dropped to the recovery.
async fn finish(mut claim: Claim, outcome: Resolution, reason: Option<String>) -> bool {
    for (attempt, wait) in FINISH_RETRY.take(FINISH_ATTEMPTS).enumerate() {
        match claim.finish(outcome, reason.clone()).await {
            Ok(announced) => return announced,
            Err((back, err)) => {
                tracing::warn!(session_id = %back.record().session_id, function_call_id = %back.record().function_call_id, attempt, error = %err, "the released call's record was not removed; retrying");
                claim = back;
                tokio::time::sleep(wait).await;
            }
        }
    }
    false
}

/// Gives a claim back (pending again), retrying a few times; `uncertain`
/// marks that the decision given back may have run the call.
async fn give_back(mut claim: Claim, uncertain: bool) {
    for (attempt, wait) in FINISH_RETRY.take(FINISH_ATTEMPTS).enumerate() {
        match claim.give_back(uncertain).await {
            Ok(()) => return,
            Err((back, err)) => {
                tracing::warn!(session_id = %back.record().session_id, function_call_id = %back.record().function_call_id, attempt, error = %err, "the record was not made pending again; retrying");
                claim = back;
                tokio::time::sleep(wait).await;
            }
        }
    }
}

#[cfg(test)]
mod tests;
