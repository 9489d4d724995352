//! Which session spawned which (`architecture/contract.md` § Sub-agents,
//! §27.3), as the harness's turn events name it. A record of a child
//! session's held call carries `session_metadata.parent_session_id`, which
//! the console uses to place it under its parent.
//!
//! Two sources, both the harness's and never the model's: `session::get`'s
//! `meta.metadata.parent_session_id` (the linkage today's harness writes
//! when it makes the child's session; it wins), else the parent a turn
//! event named for the session (`parent.session_id`, or the display parent
//! `parent_session_id`), kept here. A reused session keeps the metadata it
//! was made with, so the event is then the only source. The turn's own
//! `metadata` is never read for it: the model can write that.
//!
//! PURE apart from its lock, which is never held across an `.await`.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;

use serde_json::{Map, Value};

use crate::error::is_valid_id;

/// The key the parent is carried under in a record's `session_metadata`.
pub(crate) const PARENT_KEY: &str = "parent_session_id";

/// How many sessions' parents are kept; the oldest learned is forgotten
/// first. A child's held calls come within its first turns, soon after the
/// event that named its parent.
const CAPACITY: usize = 10_000;

/// The parents the harness's turn events named, bounded.
#[derive(Debug, Default)]
pub(crate) struct Lineage {
    links: Mutex<Links>,
}

#[derive(Debug, Default)]
struct Links {
    parents: HashMap<Box<str>, Box<str>>,
    /// Sessions in the order they were learned (each once).
    order: VecDeque<Box<str>>,
}

impl Lineage {
    /// Remembers that `session_id`'s parent is `parent`. Invalid ids and a
    /// session named its own parent are ignored.
    pub(crate) fn learn(&self, session_id: &str, parent: &str) {
        if !is_valid_id(session_id) || !is_valid_id(parent) || session_id == parent {
            return;
        }
        let mut links = self.lock();
        if let Some(known) = links.parents.get_mut(session_id) {
            if **known != *parent {
                *known = parent.into();
            }
            return;
        }
        if links.order.len() >= CAPACITY {
            if let Some(oldest) = links.order.pop_front() {
                links.parents.remove(&oldest);
            }
        }
        links.order.push_back(session_id.into());
        links.parents.insert(session_id.into(), parent.into());
    }

    /// The parent a turn event named for `session_id`.
    pub(crate) fn parent_of(&self, session_id: &str) -> Option<String> {
        self.lock().parents.get(session_id).map(|p| p.to_string())
    }

    /// Forgets a deleted session.
    pub(crate) fn forget(&self, session_id: &str) {
        let mut links = self.lock();
        if links.parents.remove(session_id).is_some() {
            links.order.retain(|s| &**s != session_id);
        }
    }

    /// Adds the parent the events named to `metadata` (a session's, as
    /// `session::get` answered it), unless it names one already.
    pub(crate) fn complete(&self, session_id: &str, metadata: &mut Option<Map<String, Value>>) {
        let named = metadata
            .as_ref()
            .and_then(|m| m.get(PARENT_KEY))
            .and_then(Value::as_str)
            .is_some_and(|p| !p.is_empty());
        if named {
            return;
        }
        if let Some(parent) = self.parent_of(session_id) {
            metadata
                .get_or_insert_with(Map::new)
                .insert(PARENT_KEY.to_string(), Value::String(parent));
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Links> {
        self.links.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn rule_27_3_an_event_names_the_parent_and_session_get_wins() {
        let lineage = Lineage::default();
        lineage.learn("kid", "p0");
        lineage.learn("kid", "p1");
        assert_eq!(
            lineage.parent_of("kid").as_deref(),
            Some("p1"),
            "the latest event wins"
        );
        assert_eq!(lineage.parent_of("alone"), None);

        let mut none = None;
        lineage.complete("kid", &mut none);
        assert_eq!(none.unwrap()["parent_session_id"], "p1");
        let mut own = json!({"parent_session_id": "from_session_get", "owner": "u"})
            .as_object()
            .cloned();
        lineage.complete("kid", &mut own);
        assert_eq!(own.unwrap()["parent_session_id"], "from_session_get");
        let mut other = json!({"owner": "u"}).as_object().cloned();
        lineage.complete("alone", &mut other);
        assert!(other.unwrap().get("parent_session_id").is_none());

        lineage.forget("kid");
        assert_eq!(lineage.parent_of("kid"), None);
    }

    #[test]
    fn rule_27_3_the_memory_is_bounded_and_ignores_bad_links() {
        let lineage = Lineage::default();
        lineage.learn("s", "s");
        lineage.learn("", "p");
        assert_eq!(lineage.parent_of("s"), None);
        for i in 0..CAPACITY + 5 {
            lineage.learn(&format!("c{i}"), "p");
        }
        assert_eq!(lineage.parent_of("c0"), None, "the oldest is forgotten");
        assert_eq!(
            lineage.parent_of(&format!("c{}", CAPACITY + 4)).as_deref(),
            Some("p")
        );
        assert!(lineage.lock().parents.len() <= CAPACITY);
    }
}
