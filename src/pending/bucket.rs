//! PURE: where a held call is stored (`architecture/contract.md` § Storage):
//! its state key and the bucket scope that key hashes to.
//!
//! Held calls are spread over `approval_pending.00` … `approval_pending.63`:
//! `state::list` returns a whole scope in one message and the engine caps a
//! message at 64 MiB, so one scope would stop boot from rebuilding the index
//! long before 100k held calls. The first layout's single scope
//! (`approval_pending`) is still read at boot, and emptied.

use crate::engine::{Scope, PENDING_BUCKETS};

/// The state key of a record: `<session_id>/<function_call_id>`.
pub fn state_key(session_id: &str, function_call_id: &str) -> String {
    format!("{session_id}/{function_call_id}")
}

/// FNV-1a: a hash that is the same in every process and Rust version (the
/// bucket of a record must not change across restarts).
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// The bucket scope holding a record.
pub(super) fn bucket(session_id: &str, function_call_id: &str) -> Scope {
    let hash = fnv1a(state_key(session_id, function_call_id).as_bytes());
    Scope::pending_bucket((hash % u64::from(PENDING_BUCKETS)) as u32)
}

/// The name of the bucket scope holding a record.
pub fn bucket_scope(session_id: &str, function_call_id: &str) -> String {
    bucket(session_id, function_call_id).to_string()
}

/// Every scope that may hold records (the buckets, then the first layout's
/// single scope).
pub fn all_scopes() -> Vec<String> {
    (0..PENDING_BUCKETS)
        .map(Scope::pending_bucket)
        .chain(std::iter::once(Scope::PENDING_LEGACY))
        .map(|scope| scope.to_string())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_stable_and_spread() {
        assert_eq!(bucket_scope("s_1", "c_1"), bucket_scope("s_1", "c_1"));
        // Pinned: a record's bucket must never move between versions.
        assert_eq!(fnv1a(b"s_1/c_1"), 15326720578296868152);
        assert_eq!(bucket_scope("s_1", "c_1"), "approval_pending.56");
        let mut seen = std::collections::HashSet::new();
        for i in 0..1000 {
            seen.insert(bucket_scope("s", &format!("c{i}")));
        }
        assert_eq!(seen.len(), PENDING_BUCKETS as usize);
        assert_eq!(all_scopes().len(), PENDING_BUCKETS as usize + 1);
        assert!(all_scopes()
            .iter()
            .all(|s| s.starts_with("approval_pending")));
    }
}
