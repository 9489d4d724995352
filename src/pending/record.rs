//! `PendingApprovalRecord`: one held call, as stored in the `approval_pending.NN`
//! state scopes and as shown by the inbox (`architecture/contract.md` § The
//! pending inbox). Self-describing: every id is inside the value.

use std::sync::Arc;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

pub(crate) use super::compact::{JsonText, Metadata};
use crate::engine::{Release, ReleaseAction};
use crate::link_token::token::Kind;
use crate::link_token::Links;
use crate::policy::DenialEnvelope;
use crate::policy::Runs;
use crate::provenance::{Caller, DecidedBy, DecidedVia};
use crate::terms::review::Review;

/// `held_by_rule` of a hold no rule decided: a batch may carry it.
pub(crate) const NO_MATCH_HOLD: &str = "no_match";
/// `held_by_rule` of a hold the reviewer sent to a human: a batch may
/// carry it.
pub(crate) const REVIEWER_HOLD: &str = "reviewer";

/// Which prompt a console renders for a record.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum RecordKind {
    /// "May this call run?"
    #[default]
    Function,
    /// "Allow access to this folder?" (from the grant watch), as the
    /// brief's console renders it.
    FolderAccess,
    /// The same prompt, as today's console renders it (a console that does
    /// not know `folder_access` would show a plain function call and offer
    /// to always-allow `shell::exec`).
    FilesystemAccess,
}

impl RecordKind {
    /// The wire spelling (also what the logs say).
    pub fn as_str(self) -> &'static str {
        crate::wire::spelling(&self)
    }

    /// Whether the record is a folder prompt (either spelling).
    pub fn is_folder(self) -> bool {
        matches!(
            self,
            RecordKind::FolderAccess | RecordKind::FilesystemAccess
        )
    }

    /// Whether two kinds are the same prompt (the spellings of a folder
    /// prompt are one prompt).
    pub fn same_prompt(self, other: RecordKind) -> bool {
        self == other || (self.is_folder() && other.is_folder())
    }
}

impl From<RecordKind> for Kind {
    /// A link names a function hold or a folder prompt (either spelling).
    fn from(kind: RecordKind) -> Kind {
        match kind {
            RecordKind::Function => Kind::Function,
            RecordKind::FolderAccess | RecordKind::FilesystemAccess => Kind::FolderAccess,
        }
    }
}

/// What a folder-access prompt asks for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct GrantRequest {
    /// The directory to grant (absolute).
    pub dir: String,
    /// The path the call tried to reach, as given.
    pub offending_path: String,
    /// The jail error code (`S215`, `S220`, `C215`, `C218`).
    pub error_code: String,
}

/// What a folder prompt asks for, as today's console reads it (the same
/// facts as [`GrantRequest`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct AccessRequest {
    /// The directory to grant (absolute).
    pub requested_root: String,
    /// The path the call tried to reach, as given.
    pub attempted_path: String,
    /// The jail error code (`S215`, `S220`, `C215`, `C218`).
    pub error_code: String,
}

impl From<&GrantRequest> for AccessRequest {
    fn from(grant: &GrantRequest) -> AccessRequest {
        AccessRequest {
            requested_root: grant.dir.clone(),
            attempted_path: grant.offending_path.clone(),
            error_code: grant.error_code.clone(),
        }
    }
}

/// One held call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct PendingRecord {
    /// The session the call belongs to.
    pub session_id: String,
    /// The turn that waits for the call.
    pub turn_id: String,
    /// The call's id.
    pub function_call_id: String,
    /// The function the call targets.
    pub function_id: String,
    /// `function` or `folder_access`; a stored record without it reads as `function`.
    #[serde(default)]
    pub kind: RecordKind,
    /// The call's arguments as the agent wrote them, redacted (without the
    /// harness's `fs_scope` stamp, shown apart as `fs_scope`).
    // Kept as compact JSON text in memory (see `compact`).
    pub arguments_excerpt: JsonText,
    /// The harness's trusted filesystem stamp of the call
    /// (`call.arguments.fs_scope`: root, grants, boundary), redacted — not
    /// the agent's arguments.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fs_scope: Option<Metadata>,
    /// When the call was held (ms since the epoch).
    pub pending_at: u64,
    /// Nesting depth of the calling session (0 = top level).
    #[serde(default)]
    pub depth: u64,
    /// The session's title, from the session manager.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_title: Option<String>,
    /// The session's description, from the session manager.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_description: Option<String>,
    /// The session's metadata (tenancy filters match against it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_metadata: Option<Metadata>,
    /// What a folder-access prompt asks for (folder prompts only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grant_request: Option<Box<GrantRequest>>,
    /// The same, as today's console reads it (folder prompts only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub access_request: Option<Box<AccessRequest>>,
    /// The assistant's text before the call, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub assistant_excerpt: Option<String>,
    /// When the call is denied for want of an answer (ms since the epoch);
    /// absent: it waits until a human or a purge ends it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<u64>,
    /// When `approval::pending-escalated` fires if no one answered (ms
    /// since the epoch).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub escalate_at: Option<u64>,
    /// When `approval::pending-escalated` fired (ms since the epoch); set
    /// once, so a restarted worker does not escalate again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub escalated_at: Option<u64>,
    /// A decision on this call is on its way to the harness: every other
    /// decision answers `{resolved: false, releasing: true}` until the
    /// harness's answer settles it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub releasing: bool,
    /// The decision under way, while `releasing` (kept so a restarted worker
    /// can settle it honestly).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub release: Option<Box<ReleaseNote>>,
    /// An earlier allow of this call lost its answer and the call was made
    /// pending again: it may have run, so a later `resolved: false` is an
    /// `unknown` outcome, never `not_held`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub uncertain: bool,
    /// What the automated reviewer said before the call came to a human
    /// (`architecture/contract.md` § The reviewer); absent when no reviewer
    /// was asked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub review: Option<Box<Review>>,
    /// What the call's command field runs (`architecture/contract.md`
    /// § Commands): the programs, and whether part of it is opaque.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runs: Option<Box<Runs>>,
    /// The prefix a human may allow for the rest of the session instead of
    /// this one call (one plain command of a configured read-only form).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub suggested_prefix: Option<String>,
    /// The protected path the call names (`architecture/contract.md`
    /// § Protected paths), when that is why it is held.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub protected_path: Option<Box<crate::policy::ProtectedNote>>,
    /// The digest of the call's arguments (`pending::identity`): what tells
    /// this call from another one under the same id. Kept in state only
    /// ([`PendingRecord::stored`]), never shown: a digest of unredacted
    /// arguments would let a reader test guesses of a short secret. Absent
    /// on records written before identities were kept.
    #[serde(rename = "arguments_digest", default, skip_serializing)]
    #[schemars(skip)]
    pub digest: Option<String>,
    /// What held the call: the deciding rule's id, or `no_match`,
    /// `lockdown`, `opaque_command`, `widening_root`, `reviewer`
    /// (`architecture/contract.md` § Batch decisions show what they
    /// release). Absent on folder prompts and on records written before it
    /// was kept; such a function record is decided on its own page.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub held_by_rule: Option<String>,
}

/// Who carried a decision to the harness.
// The release paths of `DecidedVia` (its first four), as a type of their
// own: a record's `release.via` can only be one of these, and the record's
// published schema says so (tests/golden). `From` below is the one mapping.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ReleaseVia {
    /// `approval::resolve`.
    Resolve,
    /// An approval link's POST.
    Link,
    /// `approval::resolve-batch`.
    Batch,
    /// The deadline timer (an expiry).
    Timer,
}

impl ReleaseVia {
    /// The wire spelling.
    pub fn as_str(self) -> &'static str {
        crate::wire::spelling(&self)
    }

    /// Whether a human decided (a resolve, a link, a batch), not a timer.
    pub fn is_human(self) -> bool {
        !matches!(self, ReleaseVia::Timer)
    }
}

impl From<ReleaseVia> for DecidedVia {
    /// A release's path in the contract's provenance table.
    fn from(via: ReleaseVia) -> DecidedVia {
        match via {
            ReleaseVia::Resolve => DecidedVia::Resolve,
            ReleaseVia::Link => DecidedVia::Link,
            ReleaseVia::Batch => DecidedVia::Batch,
            ReleaseVia::Timer => DecidedVia::Timer,
        }
    }
}

/// What a release under way carries.
// The kind of `release::Ruling`, which carries the data (a deny's reason, a
// folder grant's scope) the note does not keep; `Ruling::kind` maps it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum RulingKind {
    /// Run the call.
    Allow,
    /// Answer it with a human's denial.
    Deny,
    /// Answer it with the timeout's denial.
    Timeout,
}

impl RulingKind {
    /// The wire spelling.
    pub fn as_str(self) -> &'static str {
        crate::wire::spelling(&self)
    }
}

/// The decision a `releasing` record carries.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ReleaseNote {
    /// What was decided.
    pub decision: RulingKind,
    /// How the decision came.
    pub via: ReleaseVia,
    /// When the release started (ms since the epoch).
    pub at: u64,
    /// A folder granted to the session for this release, to take back if
    /// the call does not run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub granted: Option<String>,
    /// Who carried the decision (a worker the engine named, or a link),
    /// kept so a release settled after a restart still says who decided.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub caller: Option<Caller>,
    /// The denial is a human's edit (contract §28): its `pending-resolved`
    /// says `edited: true`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub edited: bool,
}

impl ReleaseNote {
    /// Who decided: the decider's kind and path, its caller, when.
    pub(crate) fn decided_by(&self) -> DecidedBy {
        DecidedBy::by(self.via.into(), self.caller.clone(), self.at)
    }
}

/// A record as `list-pending` and `get-pending` show it: the record plus
/// its `approval_url` when links are on (`architecture/contract.md`
/// § Approval links and the inbox page). The URL is made when the record is
/// shown, never stored: state holds no credential, and a new secret or base
/// URL changes every link at once.
#[derive(Debug, Clone, Serialize, JsonSchema)]
// The published schema keeps the record's name and description: it is the
// record's, plus one optional field.
#[schemars(rename = "PendingRecord", description = "One held call.")]
pub(crate) struct ShownRecord {
    /// The record.
    #[serde(flatten)]
    pub record: Arc<PendingRecord>,
    /// The page where a human decides this call (links on only); a bearer
    /// capability for this one record.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub approval_url: Option<String>,
}

/// `(session_id, function_call_id)`: the identity of a record.
pub(crate) type RecordKey = (String, String);

/// `(pending_at, session_id, function_call_id)`: the inbox order.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct SortKey {
    /// When the call was held.
    pub pending_at: u64,
    /// The session id.
    pub session_id: String,
    /// The call id.
    pub function_call_id: String,
}

impl SortKey {
    /// A key from its parts.
    pub fn new(pending_at: u64, session_id: &str, function_call_id: &str) -> SortKey {
        SortKey {
            pending_at,
            session_id: session_id.into(),
            function_call_id: function_call_id.into(),
        }
    }
}

impl PendingRecord {
    /// The page where a human decides this revision, while links are on
    /// (none for an id too long to sign).
    pub(crate) fn approval_url(&self, links: &Links) -> Option<String> {
        links.approval_url(
            &self.session_id,
            &self.function_call_id,
            self.pending_at,
            self.kind.into(),
        )
    }

    /// The record as state keeps it: what it shows plus its
    /// `arguments_digest`.
    pub(crate) fn stored(&self) -> Result<Value, serde_json::Error> {
        let mut value = serde_json::to_value(self)?;
        if let (Value::Object(map), Some(digest)) = (&mut value, &self.digest) {
            map.insert("arguments_digest".into(), Value::String(digest.clone()));
        }
        Ok(value)
    }

    /// The record's key.
    pub fn key(&self) -> RecordKey {
        (self.session_id.clone(), self.function_call_id.clone())
    }

    /// The harness release that carries `action` to this record's call.
    pub(crate) fn release(&self, action: ReleaseAction) -> Release {
        Release {
            session_id: self.session_id.clone(),
            turn_id: self.turn_id.clone(),
            function_call_id: self.function_call_id.clone(),
            action,
        }
    }

    /// A human's refusal of this call: `text` for the model, with a
    /// `denied_by: "user"` envelope carrying the (already redacted) arguments.
    pub(crate) fn user_denial(&self, text: &str) -> ReleaseAction {
        let envelope = DenialEnvelope::by_user(
            &self.function_id,
            text,
            Some(self.arguments_excerpt.to_value()),
        );
        ReleaseAction::deny(text, serde_json::to_value(envelope).unwrap_or(Value::Null))
    }

    /// Whether `other` is the same hold: equal in everything but
    /// `escalated_at`, which the timer sets on a held record without making it
    /// another one (a resolve or a purge that started before the escalation
    /// still removes it), and the release marks (`releasing`, `release`),
    /// which a decision sets on the hold it carries.
    pub fn is_same_hold(&self, other: &PendingRecord) -> bool {
        // Destructured so that a new field must be placed on one side.
        let PendingRecord {
            session_id,
            turn_id,
            function_call_id,
            function_id,
            kind,
            arguments_excerpt,
            fs_scope,
            pending_at,
            depth,
            session_title,
            session_description,
            session_metadata,
            grant_request,
            access_request,
            assistant_excerpt,
            expires_at,
            escalate_at,
            escalated_at: _,
            releasing: _,
            release: _,
            uncertain: _,
            review,
            runs,
            suggested_prefix,
            protected_path,
            digest,
            held_by_rule,
        } = self;
        *session_id == other.session_id
            && *turn_id == other.turn_id
            && *function_call_id == other.function_call_id
            && *function_id == other.function_id
            && *kind == other.kind
            && *arguments_excerpt == other.arguments_excerpt
            && *fs_scope == other.fs_scope
            && *pending_at == other.pending_at
            && *depth == other.depth
            && *session_title == other.session_title
            && *session_description == other.session_description
            && *session_metadata == other.session_metadata
            && *grant_request == other.grant_request
            && *access_request == other.access_request
            && *assistant_excerpt == other.assistant_excerpt
            && *expires_at == other.expires_at
            && *escalate_at == other.escalate_at
            && *review == other.review
            && *runs == other.runs
            && *suggested_prefix == other.suggested_prefix
            && *protected_path == other.protected_path
            && *digest == other.digest
            && *held_by_rule == other.held_by_rule
    }

    /// Why an "Allow all" must leave this held function call out, if it
    /// must (`architecture/contract.md` § Batch decisions show what they
    /// release): a human floor held it (an ask rule, `opaque_command`,
    /// `widening_root`, `lockdown`), or what held it is not known (a record
    /// written before it was kept). Only a hold no rule decided
    /// (`no_match`) or the reviewer's may ride in a batch. Whether its
    /// arguments are clipped is read apart, from the whole arguments.
    pub fn decide_separately(&self) -> bool {
        !matches!(
            self.held_by_rule.as_deref(),
            Some(NO_MATCH_HOLD | REVIEWER_HOLD)
        )
    }

    /// When the timer next has something to do for this record: the
    /// escalation while it has not fired, else the expiry. `None` for a
    /// record without deadlines (the index keeps no entry for it).
    pub fn next_due(&self) -> Option<u64> {
        let escalation = self.escalate_at.filter(|_| self.escalated_at.is_none());
        match (escalation, self.expires_at) {
            (Some(e), Some(x)) => Some(e.min(x)),
            (e, x) => e.or(x),
        }
    }

    /// The record's place in the inbox order.
    pub fn sort_key(&self) -> SortKey {
        SortKey::new(self.pending_at, &self.session_id, &self.function_call_id)
    }

    /// Subset equality of `filter` against `session_metadata`: every key of the
    /// filter is present and equal. `{}` matches every record; a non-empty filter
    /// fails a record without metadata.
    pub fn metadata_matches(&self, filter: &Map<String, Value>) -> bool {
        if filter.is_empty() {
            return true;
        }
        match &self.session_metadata {
            None => false,
            Some(meta) => meta.contains_all(filter),
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn record() -> PendingRecord {
        PendingRecord {
            session_id: "s".into(),
            turn_id: "t".into(),
            function_call_id: "c".into(),
            function_id: "shell::run".into(),
            kind: RecordKind::Function,
            arguments_excerpt: json!({"cmd": "ls"}).into(),
            fs_scope: None,
            pending_at: 100,
            depth: 0,
            session_title: None,
            session_description: None,
            session_metadata: None,
            grant_request: None,
            access_request: None,
            assistant_excerpt: None,
            expires_at: None,
            escalate_at: None,
            escalated_at: None,
            releasing: false,
            release: None,
            uncertain: false,
            review: None,
            runs: None,
            suggested_prefix: None,
            protected_path: None,
            digest: None,
            held_by_rule: None,
        }
    }

    #[test]
    fn an_escalated_record_is_the_same_hold_and_nothing_else_is() {
        let held = record();
        let mut escalated = held.clone();
        escalated.escalated_at = Some(500);
        assert!(held.is_same_hold(&escalated));
        assert!(escalated.is_same_hold(&held));
        assert_ne!(held, escalated);
        let mut later = held.clone();
        later.pending_at = 101;
        assert!(!held.is_same_hold(&later));
        let mut folder = held.clone();
        folder.kind = RecordKind::FolderAccess;
        assert!(!held.is_same_hold(&folder));
        let mut sooner = held.clone();
        sooner.expires_at = Some(1_000);
        assert!(!held.is_same_hold(&sooner));
    }

    #[test]
    fn the_next_deadline_is_the_escalation_until_it_fired_then_the_expiry() {
        let mut r = record();
        assert_eq!(r.next_due(), None);
        r.expires_at = Some(900);
        assert_eq!(r.next_due(), Some(900));
        r.escalate_at = Some(300);
        assert_eq!(r.next_due(), Some(300));
        r.escalated_at = Some(301);
        assert_eq!(r.next_due(), Some(900));
        r.expires_at = None;
        assert_eq!(r.next_due(), None);
    }

    #[test]
    fn deadlines_are_left_out_of_the_json_when_absent_and_read_back() {
        let bare = serde_json::to_value(record()).expect("serializes");
        for key in ["expires_at", "escalate_at", "escalated_at"] {
            assert!(bare.get(key).is_none(), "{key}");
        }
        let mut r = record();
        r.expires_at = Some(1_900);
        r.escalate_at = Some(700);
        r.escalated_at = Some(702);
        let value = serde_json::to_value(&r).expect("serializes");
        assert_eq!(value["expires_at"], 1_900);
        assert_eq!(value["escalate_at"], 700);
        assert_eq!(value["escalated_at"], 702);
        let back: PendingRecord = serde_json::from_value(value).expect("reads back");
        assert_eq!(back, r);
    }
}
