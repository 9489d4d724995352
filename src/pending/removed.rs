//! PURE: a short memory of the records that recently left the inbox, so a
//! link to one of them can say what happened (decided, expired, purged,
//! replaced) instead of only "gone" (`architecture/contract.md` § Approval
//! links and the inbox page). Bounded: the oldest entry is forgotten first; a link to a record
//! forgotten here still answers 410, with "no longer waiting".

use std::collections::{HashMap, VecDeque};

use super::events::Resolution;

/// How many removals are remembered (about 100 bytes each).
pub(super) const REMEMBERED: usize = 4096;

/// One revision of a record: `(session_id, function_call_id, pending_at)`.
pub(super) type RevisionKey = (String, String, u64);

/// How a record left: its `pending-resolved` outcome and reason.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Removal {
    /// allow, deny, aborted, ...
    pub outcome: Resolution,
    /// `not_held`, `turn_completed`, `replaced`, the operator's text, ...
    pub reason: Option<String>,
}

/// The last [`REMEMBERED`] removals, by revision.
#[derive(Debug, Default)]
pub(super) struct Removed {
    by_revision: HashMap<RevisionKey, Removal>,
    order: VecDeque<RevisionKey>,
}

impl Removed {
    /// Remembers a removal, forgetting the oldest past the bound. A second
    /// removal of the same revision (which the emit gate never makes) keeps
    /// the first.
    pub(super) fn remember(&mut self, key: RevisionKey, removal: Removal) {
        if self.by_revision.contains_key(&key) {
            return;
        }
        while self.order.len() >= REMEMBERED {
            if let Some(oldest) = self.order.pop_front() {
                self.by_revision.remove(&oldest);
            }
        }
        self.order.push_back(key.clone());
        self.by_revision.insert(key, removal);
    }

    /// How the revision left, if it is still remembered.
    pub(super) fn get(
        &self,
        session_id: &str,
        function_call_id: &str,
        pending_at: u64,
    ) -> Option<&Removal> {
        self.by_revision.get(&(
            session_id.to_string(),
            function_call_id.to_string(),
            pending_at,
        ))
    }

    /// How many removals are remembered.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.order.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(i: u64) -> RevisionKey {
        ("s".into(), format!("c{i}"), i)
    }

    fn allow() -> Removal {
        Removal {
            outcome: Resolution::Allow,
            reason: None,
        }
    }

    #[test]
    fn a_removal_is_found_by_its_exact_revision() {
        let mut removed = Removed::default();
        removed.remember(key(1), allow());
        assert_eq!(removed.get("s", "c1", 1), Some(&allow()));
        assert_eq!(removed.get("s", "c1", 2), None, "another revision");
        assert_eq!(removed.get("s", "c2", 1), None);
    }

    #[test]
    fn the_memory_is_bounded_and_forgets_the_oldest_first() {
        let mut removed = Removed::default();
        for i in 0..(REMEMBERED as u64 + 10) {
            removed.remember(key(i), allow());
        }
        assert_eq!(removed.len(), REMEMBERED);
        assert_eq!(removed.get("s", "c9", 9), None);
        assert!(removed.get("s", "c10", 10).is_some());
        let last = REMEMBERED as u64 + 9;
        assert!(removed.get("s", &format!("c{last}"), last).is_some());
    }

    #[test]
    fn the_first_removal_of_a_revision_wins() {
        let mut removed = Removed::default();
        removed.remember(key(1), allow());
        removed.remember(
            key(1),
            Removal {
                outcome: Resolution::Aborted,
                reason: Some("turn_completed".into()),
            },
        );
        assert_eq!(removed.get("s", "c1", 1), Some(&allow()));
        assert_eq!(removed.len(), 1);
    }
}
