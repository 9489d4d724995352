//! Releases that lost their owner (`architecture/contract.md` § Releasing a
//! held call, "Honest outcomes"): records still marked `releasing` when the
//! worker boots, and claims dropped after the harness was asked. Each is
//! adopted and settled as a lost answer: still pending at the harness →
//! pending again; otherwise, or where the harness cannot say, `unknown`.

use std::sync::Arc;

use futures_util::stream::{self, StreamExt};

use super::{Answer, Releaser};
use crate::engine::{CallError, ErrorCode};
use crate::pending::{RecordKey, RulingKind};

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
    let runs = note.is_none_or(|n| n.decision == RulingKind::Allow);
    let lost = CallError {
        function_id: "harness::function::resolve".into(),
        code: ErrorCode::Other("lost".into()),
        message: why.to_string(),
    };
    Some(releaser.settle_lost(claim, granted, runs, lost).await)
}
