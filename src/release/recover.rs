//! Releases that lost their owner (`architecture/contract.md` § Releasing a
//! held call, "Honest outcomes"): records still marked `releasing` when the
//! worker boots, and claims dropped after the harness was asked. Each is
//! adopted and settled as a lost answer: still pending at the harness →
//! pending again; otherwise, or where the harness cannot say, `unknown`.
//!
//! A recovered release never hears `resolved: true` (a release the harness
//! confirmed left no record to recover), so when it carried a human's edit
//! (its note says `edited`), the edit's unused grant is taken back (contract
//! § Edit, then approve: "if the harness does not answer `resolved: true`,
//! the grant is removed"). A grant the model already used stays. A worker
//! stopped after the harness confirmed but before the record left is the
//! one case where a confirmed edit loses its grant: the recovery cannot tell
//! it from a lost denial, and the model's call is then held for a human.

use std::sync::Arc;

use futures_util::stream::{self, StreamExt};

use super::{Answer, Releaser};
use crate::engine::{CallError, ErrorCode};
use crate::pending::{RecordKey, ReleaseNote, RulingKind};

/// Releases recovered at once.
const CONCURRENCY: usize = 8;

/// Recovers every record marked `releasing` (boot, after the ready line).
pub(crate) async fn at_boot(releaser: Arc<Releaser>) {
    let keys = releaser.pending.releasing_keys();
    if keys.is_empty() {
        return;
    }
    tracing::info!(
        records = keys.len(),
        "held calls whose release was under way when the worker stopped; asking the harness what became of them"
    );
    stream::iter(keys)
        .for_each_concurrent(CONCURRENCY, |key| {
            let releaser = releaser.clone();
            async move {
                recover(
                    &releaser,
                    key,
                    "the worker restarted while the release was under way",
                )
                .await;
            }
        })
        .await;
}

/// Recovers the claims dropped after the harness was asked, for the
/// worker's life.
pub(crate) async fn orphans(releaser: Arc<Releaser>) {
    let Some(mut orphaned) = releaser.pending.take_orphans() else {
        return;
    };
    while let Some(key) = orphaned.recv().await {
        let releaser = releaser.clone();
        tokio::spawn(async move {
            recover(
                &releaser,
                key,
                "the release ended without the harness's answer",
            )
            .await;
        });
    }
}

/// Adopts one ownerless release and settles it as a lost answer.
pub(crate) async fn recover(
    releaser: &Releaser,
    (session_id, function_call_id): RecordKey,
    why: &str,
) -> Option<Answer> {
    let claim = releaser
        .pending
        .adopt(&session_id, &function_call_id)
        .await?;
    let note = claim.record().release.clone();
    let granted = note.as_ref().and_then(|n| n.granted.clone());
    let runs = note
        .as_ref()
        .is_none_or(|n| n.decision == RulingKind::Allow);
    let lost = CallError {
        function_id: "harness::function::resolve".into(),
        code: ErrorCode::Other("lost".into()),
        message: why.to_string(),
    };
    let answer = releaser.settle_lost(claim, granted, runs, lost).await;
    if takes_back_edit(note.as_deref(), &answer) {
        match releaser
            .edits
            .remove_unused(&session_id, &function_call_id, None)
            .await
        {
            Ok(removed) => {
                tracing::info!(session_id = %session_id, function_call_id = %function_call_id, removed, "a recovered edit's denial was not confirmed; its unused grant is taken back")
            }
            Err(err) => {
                tracing::warn!(session_id = %session_id, function_call_id = %function_call_id, error = %err, "a recovered edit's denial was not confirmed, and its grant could not be removed; it ends with its TTL")
            }
        }
    }
    Some(answer)
}

/// Whether a recovered release takes an edit's grant back: it carried a
/// human's edit, and the harness did not confirm the denial.
pub(crate) fn takes_back_edit(note: Option<&ReleaseNote>, answer: &Answer) -> bool {
    note.is_some_and(|n| n.edited) && !answer.confirmed()
}
