//! Boot's read of the held calls: the index is rebuilt from `state::list`
//! of every bucket, and the first layout's single scope is emptied into
//! the buckets (`architecture/contract.md` § Storage).

use serde::Deserialize;
use serde_json::Value;

use super::bucket::{bucket, bucket_scope, state_key};
use super::record::PendingRecord;
use super::store::PendingStore;
use super::unreadable::UnreadableRecord;
use crate::engine::{CallError, Scope, PENDING_BUCKETS};

/// Buckets listed at once at boot: each reply exists as parsed JSON (~4.7 KB
/// per record) until it is indexed, so more in flight is a faster boot and
/// a higher resident set (architecture/internals.md).
pub const LOAD_CONCURRENCY: usize = 4;

impl PendingStore {
    /// Rebuilds the index from `state::list` of every bucket (a few at a
    /// time), then moves records of the legacy single scope into their
    /// bucket ([`read_buckets`](Self::read_buckets) then
    /// [`migrate_legacy`](Self::migrate_legacy)). Returns the number of
    /// records held.
    pub(crate) async fn load(&self) -> Result<usize, CallError> {
        self.read_buckets().await?;
        self.migrate_legacy().await?;
        Ok(self.len())
    }

    /// Fills the index from `state::list` of every bucket (a few at a time),
    /// reading only: boot runs it while the engine may still refuse the
    /// worker name. Tombstones and unreadable values are skipped. Returns the
    /// number of records held.
    ///
    /// Each bucket is indexed as soon as its reply arrives, so only the
    /// replies in flight exist as JSON values at once. A parsed value costs
    /// about 4.7 KB per ~1 KB record (`cargo bench --bench e2e`); holding all
    /// 64 replies until the last arrived kept every record twice and set the
    /// worker's resident peak at 100k held calls.
    pub(crate) async fn read_buckets(&self) -> Result<usize, CallError> {
        use futures_util::stream::{self, StreamExt};
        let mut replies = stream::iter((0..PENDING_BUCKETS).map(Scope::pending_bucket))
            .map(|scope| async move {
                let values = self.engine.state_list(&scope).await;
                (scope, values)
            })
            .buffer_unordered(LOAD_CONCURRENCY);
        while let Some((scope, values)) = replies.next().await {
            let mut records = Vec::new();
            for value in values? {
                if let Some(record) = self.parse_stored(&scope, value) {
                    records.push(record);
                }
            }
            self.with_memory(|memory| {
                for record in records {
                    memory.index.insert(record);
                }
            });
        }
        Ok(self.len())
    }

    /// A stored value of `scope` as a record; a tombstone is skipped, and a
    /// value that does not parse is kept as unreadable (§21.9): logged at
    /// ERROR with its key, counted, listed, removed only by a human's deny.
    fn parse_stored(&self, scope: &Scope, value: Value) -> Option<PendingRecord> {
        if value.is_null() {
            return None;
        }
        match PendingRecord::deserialize(&value) {
            Ok(record) => Some(record),
            Err(err) => {
                let entry = UnreadableRecord::of(
                    scope.as_str(),
                    Scope::PENDING_LEGACY.as_str(),
                    &value,
                    err.to_string(),
                    bucket_scope,
                );
                let new =
                    self.with_memory(|memory| memory.unreadable.insert(entry.clone(), &value));
                if new {
                    tracing::error!(scope = %scope, key = entry.key_text(), error = %entry.error, "a stored held call does not parse; it is kept, listed as unreadable, and leaves only when a human denies it");
                }
                None
            }
        }
    }

    /// Moves records of the legacy scope into their buckets; returns how
    /// many moved.
    pub(crate) async fn migrate_legacy(&self) -> Result<usize, CallError> {
        let mut moved = 0;
        for value in self.engine.state_list(&Scope::PENDING_LEGACY).await? {
            let Some(record) = self.parse_stored(&Scope::PENDING_LEGACY, value) else {
                continue;
            };
            let key = state_key(&record.session_id, &record.function_call_id);
            if self
                .get(&record.session_id, &record.function_call_id)
                .is_none()
            {
                let scope = bucket(&record.session_id, &record.function_call_id);
                let value = record.stored().unwrap_or(Value::Null);
                self.engine.state_set(&scope, &key, value).await?;
                self.with_memory(|memory| memory.index.insert(record));
                moved += 1;
            }
            self.engine
                .state_delete(&Scope::PENDING_LEGACY, &key)
                .await?;
        }
        Ok(moved)
    }
}
