//! `PendingIndex`: the in-memory index of held records that serves
//! `list-pending`, `get-pending` and the purges without scanning state.
//!
//! Four views of one set of `Arc<PendingRecord>`s: by key (session, call),
//! by session (in list order), by turn, and in list order
//! `(pending_at, session_id, function_call_id)`; plus, for tenancy filters,
//! one list-ordered posting per scalar `session_metadata` entry, so a
//! selective `metadata` filter does not scan the whole inbox; plus, for the
//! deadline timer, the records that have a deadline ahead, ordered by it
//! (a record without one has no entry there).
//!
//! Every view holds only the record's `Arc` (8 bytes): the ordered views
//! are sets of [`ByOrder`], ordered by the record's own sort key and
//! searched by a borrowed key ([`Keyed`]), and the by-call view is a set of
//! [`ByCall`], hashed by the record's own call id. No view copies an id;
//! at 100k held calls a copied sort key per view cost ~1 KB per record.
//!
//! A plain data structure: no locking inside. The caller keeps it behind one
//! mutex and never holds that across an `.await`.

use std::borrow::Borrow;
use std::cmp::Ordering;
use std::collections::{BTreeSet, HashMap, HashSet};
use std::hash::{Hash, Hasher};
use std::ops::Bound;
use std::sync::Arc;

use serde_json::{Map, Value};

use super::record::{PendingRecord, RecordKey, SortKey};

/// Anything with a place in the inbox order: a record, or a sort key
/// (a decoded cursor) to search with.
pub(crate) trait Keyed {
    /// `(pending_at, session_id, function_call_id)`.
    fn order(&self) -> (u64, &str, &str);
}

impl Keyed for PendingRecord {
    fn order(&self) -> (u64, &str, &str) {
        (self.pending_at, &self.session_id, &self.function_call_id)
    }
}

impl Keyed for SortKey {
    fn order(&self) -> (u64, &str, &str) {
        (self.pending_at, &self.session_id, &self.function_call_id)
    }
}

impl PartialEq for dyn Keyed + '_ {
    fn eq(&self, other: &Self) -> bool {
        self.order() == other.order()
    }
}

impl Eq for dyn Keyed + '_ {}

impl PartialOrd for dyn Keyed + '_ {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for dyn Keyed + '_ {
    fn cmp(&self, other: &Self) -> Ordering {
        self.order().cmp(&other.order())
    }
}

/// A record in an ordered view: ordered by its sort key (the same order as
/// `dyn Keyed`, so a view can be searched with any key).
#[derive(Debug, Clone)]
struct ByOrder(Arc<PendingRecord>);

impl PartialEq for ByOrder {
    fn eq(&self, other: &Self) -> bool {
        self.0.order() == other.0.order()
    }
}

impl Eq for ByOrder {}

impl PartialOrd for ByOrder {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for ByOrder {
    fn cmp(&self, other: &Self) -> Ordering {
        self.0.order().cmp(&other.0.order())
    }
}

impl<'a> Borrow<dyn Keyed + 'a> for ByOrder {
    fn borrow(&self) -> &(dyn Keyed + 'a) {
        &*self.0
    }
}

/// A session's record, hashed and compared by its call id (and so found by
/// a `&str`).
#[derive(Debug, Clone)]
struct ByCall(Arc<PendingRecord>);

impl PartialEq for ByCall {
    fn eq(&self, other: &Self) -> bool {
        self.0.function_call_id == other.0.function_call_id
    }
}

impl Eq for ByCall {}

impl Hash for ByCall {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.0.function_call_id.as_str().hash(state)
    }
}

impl Borrow<str> for ByCall {
    fn borrow(&self) -> &str {
        &self.0.function_call_id
    }
}

/// Records in list order.
type Ordered = BTreeSet<ByOrder>;

/// A record in the deadline view: ordered by its next deadline
/// ([`PendingRecord::next_due`]), then by key. Only records that have one
/// are in that view, so the order never sees `None`.
#[derive(Debug, Clone)]
struct ByDue(Arc<PendingRecord>);

impl ByDue {
    fn order(&self) -> (u64, &str, &str) {
        let r = &self.0;
        (
            r.next_due().unwrap_or(u64::MAX),
            &r.session_id,
            &r.function_call_id,
        )
    }
}

impl PartialEq for ByDue {
    fn eq(&self, other: &Self) -> bool {
        self.order() == other.order()
    }
}

impl Eq for ByDue {}

impl PartialOrd for ByDue {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for ByDue {
    fn cmp(&self, other: &Self) -> Ordering {
        self.order().cmp(&other.order())
    }
}

/// A metadata value the index can key on: exactly the values whose JSON
/// equality is equality of this type. Floats (where `0.0 == -0.0`), arrays
/// and objects are not indexed; filters on them are checked by scanning.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum MetaValue {
    Null,
    Bool(bool),
    Int(i128),
    Str(String),
}

impl MetaValue {
    fn of(v: &Value) -> Option<MetaValue> {
        match v {
            Value::Null => Some(MetaValue::Null),
            Value::Bool(b) => Some(MetaValue::Bool(*b)),
            Value::Number(n) => n
                .as_u64()
                .map(i128::from)
                .or_else(|| n.as_i64().map(i128::from))
                .map(MetaValue::Int),
            Value::String(s) => Some(MetaValue::Str(s.clone())),
            Value::Array(_) | Value::Object(_) => None,
        }
    }
}

/// One session's records.
#[derive(Debug, Default)]
struct SessionSlot {
    by_call: HashSet<ByCall>,
    ordered: Ordered,
}

/// A `list` request.
#[derive(Debug, Clone, Copy)]
pub struct ListQuery<'a> {
    /// Only this session's records.
    pub session_id: Option<&'a str>,
    /// Subset equality against `session_metadata` (`{}` matches all).
    pub metadata: Option<&'a Map<String, Value>>,
    /// Start after this sort key (the decoded cursor).
    pub after: Option<&'a SortKey>,
    /// Page size; 0 is read as 1 (the handler clamps to 1..=500).
    pub limit: usize,
}

/// One page of a `list`.
#[derive(Debug, Clone, PartialEq)]
pub struct ListPage {
    /// The records, in list order.
    pub items: Vec<Arc<PendingRecord>>,
    /// The last item's sort key, present only when more matching records
    /// follow it.
    pub next: Option<SortKey>,
}

/// The index of held records.
#[derive(Debug, Default)]
pub struct PendingIndex {
    sessions: HashMap<String, SessionSlot>,
    ordered: Ordered,
    by_turn: HashMap<String, Ordered>,
    by_meta: HashMap<(String, MetaValue), Ordered>,
    by_due: BTreeSet<ByDue>,
}

impl PendingIndex {
    /// An empty index.
    pub fn new() -> PendingIndex {
        PendingIndex::default()
    }

    /// Number of records.
    pub fn len(&self) -> usize {
        self.ordered.len()
    }

    /// Whether there are no records.
    pub fn is_empty(&self) -> bool {
        self.ordered.is_empty()
    }

    /// Every record, in list order.
    pub fn iter(&self) -> impl Iterator<Item = &Arc<PendingRecord>> {
        self.ordered.iter().map(|r| &r.0)
    }

    /// Stores `record`, replacing (and returning) the one under its key.
    pub fn insert(&mut self, record: PendingRecord) -> Option<Arc<PendingRecord>> {
        let previous = self.remove(&record.session_id, &record.function_call_id);
        let record = Arc::new(record);
        let slot = self.sessions.entry(record.session_id.clone()).or_default();
        slot.by_call.insert(ByCall(Arc::clone(&record)));
        slot.ordered.insert(ByOrder(Arc::clone(&record)));
        self.by_turn
            .entry(record.turn_id.clone())
            .or_default()
            .insert(ByOrder(Arc::clone(&record)));
        for meta_key in meta_keys(&record) {
            self.by_meta
                .entry(meta_key)
                .or_default()
                .insert(ByOrder(Arc::clone(&record)));
        }
        if record.next_due().is_some() {
            self.by_due.insert(ByDue(Arc::clone(&record)));
        }
        self.ordered.insert(ByOrder(record));
        previous
    }

    /// As [`insert`](Self::insert) for a new revision of the same hold (a
    /// release's marks): the deadline view keeps the record only if it held
    /// the previous one, so a record the timer took stays the timer's.
    pub fn insert_keeping_due(&mut self, record: PendingRecord) -> Option<Arc<PendingRecord>> {
        let was_due = self
            .get(&record.session_id, &record.function_call_id)
            .is_some_and(|previous| self.by_due.contains(&ByDue(previous)));
        let (session_id, function_call_id) =
            (record.session_id.clone(), record.function_call_id.clone());
        let previous = self.insert(record);
        if !was_due {
            if let Some(current) = self.get(&session_id, &function_call_id) {
                self.by_due.remove(&ByDue(current));
            }
        }
        previous
    }

    /// The record under `(session_id, function_call_id)`.
    pub fn get(&self, session_id: &str, function_call_id: &str) -> Option<Arc<PendingRecord>> {
        self.sessions
            .get(session_id)?
            .by_call
            .get(function_call_id)
            .map(|r| Arc::clone(&r.0))
    }

    /// Removes and returns the record under `(session_id, function_call_id)`,
    /// from every view.
    pub fn remove(
        &mut self,
        session_id: &str,
        function_call_id: &str,
    ) -> Option<Arc<PendingRecord>> {
        let slot = self.sessions.get_mut(session_id)?;
        let ByCall(record) = slot.by_call.take(function_call_id)?;
        let key: &dyn Keyed = &*record;
        slot.ordered.remove(key);
        if slot.by_call.is_empty() {
            self.sessions.remove(session_id);
        }
        self.ordered.remove(key);
        if let Some(turn) = self.by_turn.get_mut(&record.turn_id) {
            turn.remove(key);
            if turn.is_empty() {
                self.by_turn.remove(&record.turn_id);
            }
        }
        for meta_key in meta_keys(&record) {
            if let Some(posting) = self.by_meta.get_mut(&meta_key) {
                posting.remove(key);
                if posting.is_empty() {
                    self.by_meta.remove(&meta_key);
                }
            }
        }
        if record.next_due().is_some() {
            self.by_due.remove(&ByDue(Arc::clone(&record)));
        }
        Some(record)
    }

    /// The earliest deadline of a record the timer has not taken yet.
    pub fn next_due(&self) -> Option<u64> {
        self.by_due.first().and_then(|r| r.0.next_due())
    }

    /// Takes the record with the earliest deadline out of the deadline view
    /// if that deadline is at or before `now`: the timer owns it from then
    /// on. The record stays in every other view (it is still held); a
    /// record written again under its key enters the deadline view afresh.
    pub fn take_due(&mut self, now: u64) -> Option<Arc<PendingRecord>> {
        if self.next_due()? > now {
            return None;
        }
        self.by_due.pop_first().map(|r| r.0)
    }

    /// How many records have a deadline the timer has not taken yet.
    pub fn due_len(&self) -> usize {
        self.by_due.len()
    }

    /// Removes the record under `record`'s key only if it is the same hold
    /// ([`PendingRecord::is_same_hold`]): a decision removes the record it
    /// decided, not a newer one written under the same key meanwhile.
    /// Returns whether it removed one.
    pub fn remove_if_same(&mut self, record: &PendingRecord) -> bool {
        let same = self
            .get(&record.session_id, &record.function_call_id)
            .is_some_and(|stored| stored.is_same_hold(record));
        same && self
            .remove(&record.session_id, &record.function_call_id)
            .is_some()
    }

    /// The keys of a session's records, in list order.
    pub fn keys_of_session(&self, session_id: &str) -> Vec<RecordKey> {
        self.sessions
            .get(session_id)
            .map(|slot| slot.ordered.iter().map(|r| r.0.key()).collect())
            .unwrap_or_default()
    }

    /// The sessions that have records.
    pub fn session_ids(&self) -> Vec<String> {
        self.sessions.keys().cloned().collect()
    }

    /// The keys of the records marked `releasing` (a scan of the index:
    /// boot's recovery only).
    pub fn releasing_keys(&self) -> Vec<RecordKey> {
        self.sessions
            .values()
            .flat_map(|slot| slot.by_call.iter())
            .filter(|r| r.0.releasing)
            .map(|r| r.0.key())
            .collect()
    }

    /// The keys of a turn's records, in list order.
    pub fn keys_of_turn(&self, turn_id: &str) -> Vec<RecordKey> {
        self.by_turn
            .get(turn_id)
            .map(|turn| turn.iter().map(|r| r.0.key()).collect())
            .unwrap_or_default()
    }

    /// One page of the inbox, in list order, after `query.after`.
    ///
    /// Walks the smallest candidate view — the session's records, the
    /// posting of one scalar metadata entry of the filter, or everything —
    /// and checks the full filter on each record (by membership in the
    /// other entries' postings when every entry is a scalar, else by
    /// parsing the record's metadata), so a page costs `O(log n + limit)`
    /// unless the filter matches only rarely within the walked view.
    pub fn list(&self, query: &ListQuery<'_>) -> ListPage {
        let limit = query.limit.max(1);
        let empty = ListPage {
            items: Vec::new(),
            next: None,
        };
        let mut source = &self.ordered;
        if let Some(session_id) = query.session_id {
            match self.sessions.get(session_id) {
                Some(slot) => source = &slot.ordered,
                None => return empty,
            }
        }
        // The posting of every filter entry the index keys on; whether that
        // is every entry (then membership decides, and no record's metadata
        // is parsed).
        let mut postings: Vec<&Ordered> = Vec::new();
        let mut all_indexed = true;
        for (k, v) in query.metadata.into_iter().flatten() {
            let Some(value) = MetaValue::of(v) else {
                all_indexed = false;
                continue;
            };
            match self.by_meta.get(&(k.clone(), value)) {
                Some(posting) => postings.push(posting),
                None => return empty,
            }
        }
        for posting in &postings {
            if posting.len() < source.len() {
                source = posting;
            }
        }
        let range = match query.after {
            Some(after) => {
                let after: &dyn Keyed = after;
                source.range::<dyn Keyed, _>((Bound::Excluded(after), Bound::Unbounded))
            }
            None => source.range::<dyn Keyed, _>(..),
        };
        // Probing a posting with the walked view's own entry compares with
        // `ByOrder`'s static order (half the cost of a `dyn Keyed` probe).
        let metadata_matches = |r: &ByOrder| match query.metadata {
            None => true,
            Some(_) if all_indexed => postings
                .iter()
                .all(|posting| std::ptr::eq(*posting, source) || posting.contains(r)),
            Some(filter) => r.0.metadata_matches(filter),
        };
        let mut matching = range
            .filter(|r| query.session_id.is_none_or(|s| r.0.session_id == s) && metadata_matches(r))
            .map(|r| &r.0);
        let items: Vec<Arc<PendingRecord>> = matching.by_ref().take(limit).cloned().collect();
        let next = match (items.last(), matching.next()) {
            (Some(last), Some(_)) => Some(last.sort_key()),
            _ => None,
        };
        ListPage { items, next }
    }
}

/// The metadata postings a record belongs to.
fn meta_keys(record: &PendingRecord) -> Vec<(String, MetaValue)> {
    record
        .session_metadata
        .iter()
        .flat_map(|m| m.to_map())
        .filter_map(|(k, v)| Some((k, MetaValue::of(&v)?)))
        .collect()
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use serde_json::json;

    use super::*;
    use crate::pending::RecordKind;

    fn rec(
        pending_at: u64,
        session: &str,
        call: &str,
        turn: &str,
        meta: Option<Value>,
    ) -> PendingRecord {
        PendingRecord {
            session_id: session.into(),
            turn_id: turn.into(),
            function_call_id: call.into(),
            function_id: "shell::exec".into(),
            kind: RecordKind::Function,
            arguments_excerpt: json!({}).into(),
            fs_scope: None,
            pending_at,
            depth: 0,
            session_title: None,
            session_description: None,
            session_metadata: meta.map(|m| match m {
                Value::Object(map) => map.into(),
                _ => panic!("metadata must be an object"),
            }),
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
        }
    }

    fn ids(page: &ListPage) -> Vec<(u64, &str, &str)> {
        page.items
            .iter()
            .map(|r| {
                (
                    r.pending_at,
                    r.session_id.as_str(),
                    r.function_call_id.as_str(),
                )
            })
            .collect()
    }

    fn query(limit: usize) -> ListQuery<'static> {
        ListQuery {
            session_id: None,
            metadata: None,
            after: None,
            limit,
        }
    }

    fn obj(v: Value) -> Map<String, Value> {
        match v {
            Value::Object(m) => m,
            _ => panic!("not an object"),
        }
    }

    fn sample() -> PendingIndex {
        let mut ix = PendingIndex::new();
        ix.insert(rec(30, "s2", "c1", "t2", Some(json!({"tenant": "b"}))));
        ix.insert(rec(
            10,
            "s1",
            "c2",
            "t1",
            Some(json!({"tenant": "a", "n": 1})),
        ));
        ix.insert(rec(
            10,
            "s1",
            "c1",
            "t1",
            Some(json!({"tenant": "a", "tags": ["x"]})),
        ));
        ix.insert(rec(20, "s3", "c1", "t3", None));
        ix.insert(rec(
            10,
            "s0",
            "c9",
            "t0",
            Some(json!({"tenant": "a", "f": 1.5})),
        ));
        ix
    }

    #[test]
    fn lists_in_pending_at_session_call_order() {
        let ix = sample();
        assert_eq!(ix.len(), 5);
        assert!(!ix.is_empty());
        let page = ix.list(&query(50));
        assert_eq!(
            ids(&page),
            vec![
                (10, "s0", "c9"),
                (10, "s1", "c1"),
                (10, "s1", "c2"),
                (20, "s3", "c1"),
                (30, "s2", "c1")
            ]
        );
        assert_eq!(page.next, None);
        let order: Vec<_> = ix.iter().map(|r| r.sort_key()).collect();
        let mut sorted = order.clone();
        sorted.sort();
        assert_eq!(order, sorted);
    }

    #[test]
    fn every_view_shares_the_one_record() {
        let mut ix = PendingIndex::new();
        ix.insert(rec(
            5,
            "s1",
            "c1",
            "t1",
            Some(json!({"tenant": "a", "n": 1, "tags": ["x"], "f": 1.5})),
        ));
        let r = ix.get("s1", "c1").expect("present");
        // by call, the session's order, the turn, the list order and the
        // postings of the two scalar entries: six `Arc`s in the index (plus
        // ours), no copy of the record or its ids.
        assert_eq!(Arc::strong_count(&r), 7);
        ix.remove("s1", "c1").expect("removed");
        assert_eq!(Arc::strong_count(&r), 1);
    }

    #[test]
    fn get_returns_the_stored_record() {
        let ix = sample();
        let r = ix.get("s1", "c2").expect("present");
        assert_eq!((r.pending_at, r.turn_id.as_str()), (10, "t1"));
        assert!(ix.get("s1", "c3").is_none());
        assert!(ix.get("s9", "c1").is_none());
        assert!(PendingIndex::new().is_empty());
    }

    #[test]
    fn pages_chain_through_next() {
        let ix = sample();
        let first = ix.list(&query(2));
        assert_eq!(ids(&first), vec![(10, "s0", "c9"), (10, "s1", "c1")]);
        let next = first.next.clone().expect("more remain");
        assert_eq!(next, ix.get("s1", "c1").expect("present").sort_key());
        let second = ix.list(&ListQuery {
            after: Some(&next),
            ..query(2)
        });
        assert_eq!(ids(&second), vec![(10, "s1", "c2"), (20, "s3", "c1")]);
        let next = second.next.clone().expect("one more");
        let third = ix.list(&ListQuery {
            after: Some(&next),
            ..query(2)
        });
        assert_eq!(ids(&third), vec![(30, "s2", "c1")]);
        assert_eq!(third.next, None);
        // An exact multiple: the last full page has no `next`.
        let page = ix.list(&ListQuery {
            after: Some(&next),
            ..query(1)
        });
        assert_eq!(page.items.len(), 1);
        assert_eq!(page.next, None);
        let page = ix.list(&query(5));
        assert_eq!((page.items.len(), page.next.is_none()), (5, true));
        let page = ix.list(&query(4));
        assert_eq!((page.items.len(), page.next.is_some()), (4, true));
    }

    #[test]
    fn limit_zero_reads_as_one() {
        let page = sample().list(&query(0));
        assert_eq!(page.items.len(), 1);
        assert!(page.next.is_some());
    }

    #[test]
    fn cursors_are_positions_not_records() {
        let mut ix = sample();
        let key = ix.get("s1", "c2").expect("present").sort_key();
        ix.remove("s1", "c2");
        let page = ix.list(&ListQuery {
            after: Some(&key),
            ..query(50)
        });
        assert_eq!(ids(&page), vec![(20, "s3", "c1"), (30, "s2", "c1")]);
        let beyond = SortKey::new(u64::MAX, "", "");
        let page = ix.list(&ListQuery {
            after: Some(&beyond),
            ..query(50)
        });
        assert!(page.items.is_empty());
        assert_eq!(page.next, None);
        let before = SortKey::new(0, "", "");
        assert_eq!(
            ix.list(&ListQuery {
                after: Some(&before),
                ..query(50)
            })
            .items
            .len(),
            4
        );
    }

    #[test]
    fn session_filter() {
        let ix = sample();
        let page = ix.list(&ListQuery {
            session_id: Some("s1"),
            ..query(1)
        });
        assert_eq!(ids(&page), vec![(10, "s1", "c1")]);
        let next = page.next.expect("more in s1");
        let page = ix.list(&ListQuery {
            session_id: Some("s1"),
            after: Some(&next),
            ..query(1)
        });
        assert_eq!(ids(&page), vec![(10, "s1", "c2")]);
        assert_eq!(page.next, None);
        let page = ix.list(&ListQuery {
            session_id: Some("nope"),
            ..query(10)
        });
        assert!(page.items.is_empty());
    }

    #[test]
    fn metadata_filter_is_subset_equality() {
        let ix = sample();
        let list = |filter: Value| {
            let m = obj(filter);
            ix.list(&ListQuery {
                metadata: Some(&m),
                ..query(50)
            })
            .items
            .iter()
            .map(|r| (r.session_id.clone(), r.function_call_id.clone()))
            .collect::<Vec<_>>()
        };
        let key = |s: &str, c: &str| (s.to_owned(), c.to_owned());
        assert_eq!(list(json!({})).len(), 5);
        assert_eq!(
            list(json!({"tenant": "a"})),
            vec![key("s0", "c9"), key("s1", "c1"), key("s1", "c2")]
        );
        assert_eq!(list(json!({"tenant": "a", "n": 1})), vec![key("s1", "c2")]);
        assert_eq!(list(json!({"tenant": "b"})), vec![key("s2", "c1")]);
        assert!(list(json!({"tenant": "c"})).is_empty());
        // Type-strict: 1 is not "1" and not 1.0.
        assert!(list(json!({"n": "1"})).is_empty());
        assert!(list(json!({"n": 1.0})).is_empty());
        // Values the index does not key on are still matched exactly.
        assert_eq!(list(json!({"tags": ["x"]})), vec![key("s1", "c1")]);
        assert!(list(json!({"tags": ["y"]})).is_empty());
        assert_eq!(list(json!({"f": 1.5})), vec![key("s0", "c9")]);
        assert_eq!(
            list(json!({"f": 1.5, "tenant": "a"})),
            vec![key("s0", "c9")]
        );
        // A key the record lacks fails, even against null.
        assert!(list(json!({"missing": null})).is_empty());
    }

    #[test]
    fn session_and_metadata_filters_combine() {
        let ix = sample();
        let m = obj(json!({"tenant": "a"}));
        let page = ix.list(&ListQuery {
            session_id: Some("s1"),
            metadata: Some(&m),
            ..query(50)
        });
        assert_eq!(ids(&page), vec![(10, "s1", "c1"), (10, "s1", "c2")]);
        let page = ix.list(&ListQuery {
            session_id: Some("s2"),
            metadata: Some(&m),
            ..query(50)
        });
        assert!(page.items.is_empty());
    }

    #[test]
    fn metadata_paging_reports_next_only_for_further_matches() {
        let mut ix = PendingIndex::new();
        for i in 0..10u64 {
            let tenant = if i == 2 || i == 9 { "a" } else { "b" };
            ix.insert(rec(
                i,
                "s",
                &format!("c{i}"),
                "t",
                Some(json!({ "tenant": tenant })),
            ));
        }
        let m = obj(json!({"tenant": "a"}));
        let first = ix.list(&ListQuery {
            metadata: Some(&m),
            ..query(1)
        });
        assert_eq!(ids(&first), vec![(2, "s", "c2")]);
        let next = first.next.expect("c9 follows");
        let second = ix.list(&ListQuery {
            metadata: Some(&m),
            after: Some(&next),
            ..query(1)
        });
        assert_eq!(ids(&second), vec![(9, "s", "c9")]);
        assert_eq!(second.next, None);
    }

    #[test]
    fn keys_of_session_and_turn() {
        let mut ix = sample();
        ix.insert(rec(5, "s2", "c0", "t1", None));
        let key = |s: &str, c: &str| (s.to_owned(), c.to_owned());
        assert_eq!(
            ix.keys_of_session("s1"),
            vec![key("s1", "c1"), key("s1", "c2")]
        );
        assert_eq!(
            ix.keys_of_session("s2"),
            vec![key("s2", "c0"), key("s2", "c1")]
        );
        assert!(ix.keys_of_session("s9").is_empty());
        assert_eq!(
            ix.keys_of_turn("t1"),
            vec![key("s2", "c0"), key("s1", "c1"), key("s1", "c2")]
        );
        assert_eq!(ix.keys_of_turn("t3"), vec![key("s3", "c1")]);
        assert!(ix.keys_of_turn("t9").is_empty());
    }

    #[test]
    fn removal_clears_every_view() {
        let mut ix = sample();
        let removed = ix.remove("s1", "c1").expect("present");
        assert_eq!(removed.function_call_id, "c1");
        assert!(ix.get("s1", "c1").is_none());
        assert!(ix.remove("s1", "c1").is_none());
        assert_eq!(ix.len(), 4);
        assert_eq!(
            ix.keys_of_session("s1"),
            vec![("s1".to_owned(), "c2".to_owned())]
        );
        assert_eq!(
            ix.keys_of_turn("t1"),
            vec![("s1".to_owned(), "c2".to_owned())]
        );
        let tags = obj(json!({"tags": ["x"]}));
        assert!(ix
            .list(&ListQuery {
                metadata: Some(&tags),
                ..query(50)
            })
            .items
            .is_empty());
        for (s, c) in [("s1", "c2"), ("s2", "c1"), ("s3", "c1"), ("s0", "c9")] {
            assert!(ix.remove(s, c).is_some(), "{s}/{c}");
        }
        assert!(ix.is_empty());
        assert!(ix.sessions.is_empty());
        assert!(ix.ordered.is_empty());
        assert!(ix.by_turn.is_empty());
        assert!(ix.by_meta.is_empty());
        assert!(ix.by_due.is_empty());
    }

    fn due(
        pending_at: u64,
        call: &str,
        expires_at: Option<u64>,
        escalate_at: Option<u64>,
    ) -> PendingRecord {
        let mut r = rec(pending_at, "s", call, "t", None);
        r.expires_at = expires_at;
        r.escalate_at = escalate_at;
        r
    }

    #[test]
    fn the_deadline_view_holds_only_records_with_a_deadline_in_deadline_order() {
        let mut ix = PendingIndex::new();
        ix.insert(due(1, "none", None, None));
        ix.insert(due(2, "late", Some(500), None));
        ix.insert(due(3, "escalates", Some(900), Some(100)));
        ix.insert(due(4, "early", Some(200), None));
        assert_eq!(ix.len(), 4);
        assert_eq!(ix.due_len(), 3);
        assert_eq!(ix.next_due(), Some(100));
        assert!(ix.take_due(99).is_none());
        let order: Vec<String> = std::iter::from_fn(|| ix.take_due(1_000))
            .map(|r| r.function_call_id.clone())
            .collect();
        assert_eq!(order, ["escalates", "early", "late"]);
        // Taken, not removed: still held and listed.
        assert_eq!(ix.len(), 4);
        assert_eq!(ix.due_len(), 0);
        assert_eq!(ix.next_due(), None);
        // Escalated: written again, it is due again at its expiry.
        let mut escalated = due(3, "escalates", Some(900), Some(100));
        escalated.escalated_at = Some(100);
        ix.insert(escalated);
        assert_eq!(ix.next_due(), Some(900));
        // Removing a taken record or a record without deadlines leaves the
        // view as it is; removing a waiting one takes it out.
        assert!(ix.remove("s", "early").is_some());
        assert!(ix.remove("s", "none").is_some());
        assert_eq!(ix.due_len(), 1);
        assert!(ix.remove("s", "escalates").is_some());
        assert_eq!(ix.due_len(), 0);
        assert_eq!(ix.next_due(), None);
    }

    #[test]
    fn a_replaced_record_leaves_the_deadline_view_with_its_deadline() {
        let mut ix = PendingIndex::new();
        ix.insert(due(1, "c", Some(100), None));
        ix.insert(due(2, "c", Some(700), None));
        assert_eq!(ix.due_len(), 1);
        assert_eq!(ix.next_due(), Some(700));
        ix.insert(due(3, "c", None, None));
        assert_eq!(ix.due_len(), 0);
        assert_eq!(ix.next_due(), None);
    }

    #[test]
    fn replacement_moves_the_record_in_every_view() {
        let mut ix = sample();
        let previous = ix
            .insert(rec(40, "s1", "c1", "t9", Some(json!({"tenant": "z"}))))
            .expect("replaced");
        assert_eq!((previous.pending_at, previous.turn_id.as_str()), (10, "t1"));
        assert_eq!(ix.len(), 5);
        let page = ix.list(&query(50));
        assert_eq!(
            ids(&page),
            vec![
                (10, "s0", "c9"),
                (10, "s1", "c2"),
                (20, "s3", "c1"),
                (30, "s2", "c1"),
                (40, "s1", "c1")
            ]
        );
        assert_eq!(
            ix.keys_of_turn("t1"),
            vec![("s1".to_owned(), "c2".to_owned())]
        );
        assert_eq!(
            ix.keys_of_turn("t9"),
            vec![("s1".to_owned(), "c1".to_owned())]
        );
        assert_eq!(
            ix.keys_of_session("s1"),
            vec![
                ("s1".to_owned(), "c2".to_owned()),
                ("s1".to_owned(), "c1".to_owned())
            ]
        );
        let a = obj(json!({"tenant": "a"}));
        let z = obj(json!({"tenant": "z"}));
        let tenant = |m: &Map<String, Value>| {
            ix.list(&ListQuery {
                metadata: Some(m),
                ..query(50)
            })
            .items
            .len()
        };
        assert_eq!(tenant(&a), 2);
        assert_eq!(tenant(&z), 1);
        assert!(ix.insert(rec(1, "new", "c", "t", None)).is_none());
    }

    #[test]
    fn remove_if_same_spares_a_newer_record() {
        let mut ix = PendingIndex::new();
        let decided = rec(10, "s", "c", "t", None);
        ix.insert(decided.clone());
        let mut newer = decided.clone();
        newer.pending_at = 11;
        newer.kind = RecordKind::FolderAccess;
        ix.insert(newer.clone());
        assert!(!ix.remove_if_same(&decided));
        assert_eq!(ix.get("s", "c").map(|r| r.pending_at), Some(11));
        assert!(ix.remove_if_same(&newer));
        assert!(ix.get("s", "c").is_none());
        assert!(!ix.remove_if_same(&newer));
        assert!(ix.is_empty());
    }

    #[test]
    #[ignore = "timing: run with --release -- --ignored --nocapture"]
    fn list_50_at_100k_records() {
        let mut ix = PendingIndex::new();
        for i in 0..100_000u64 {
            let meta = json!({"tenant": format!("t{}", i % 20), "team": format!("x{}", i % 7), "n": i % 3});
            ix.insert(rec(
                i * 7 % 100_003,
                &format!("s{}", i % 1000),
                &format!("c{i}"),
                &format!("turn{}", i / 10),
                Some(meta),
            ));
        }
        assert_eq!(ix.len(), 100_000);
        let middle = ix.iter().nth(50_000).map(|r| r.sort_key()).expect("middle");
        let tenant = obj(json!({"tenant": "t7"}));
        let narrow = obj(json!({"tenant": "t7", "team": "x3"}));
        let float = obj(json!({"n": 1}));
        let cases: Vec<(&str, ListQuery<'_>)> = vec![
            ("first page", query(50)),
            (
                "deep cursor",
                ListQuery {
                    after: Some(&middle),
                    ..query(50)
                },
            ),
            (
                "session",
                ListQuery {
                    session_id: Some("s42"),
                    ..query(50)
                },
            ),
            (
                "session + cursor",
                ListQuery {
                    session_id: Some("s42"),
                    after: Some(&middle),
                    ..query(50)
                },
            ),
            (
                "metadata",
                ListQuery {
                    metadata: Some(&tenant),
                    ..query(50)
                },
            ),
            (
                "metadata + cursor",
                ListQuery {
                    metadata: Some(&tenant),
                    after: Some(&middle),
                    ..query(50)
                },
            ),
            (
                "two metadata keys",
                ListQuery {
                    metadata: Some(&narrow),
                    ..query(50)
                },
            ),
            (
                "int metadata",
                ListQuery {
                    metadata: Some(&float),
                    ..query(50)
                },
            ),
        ];
        let mut worst: f64 = 0.0;
        for (name, q) in &cases {
            let mut runs: Vec<f64> = (0..200)
                .map(|_| {
                    let start = std::time::Instant::now();
                    let page = std::hint::black_box(ix.list(std::hint::black_box(q)));
                    assert_eq!(page.items.len(), 50, "{name}");
                    start.elapsed().as_nanos() as f64 / 1000.0
                })
                .collect();
            runs.sort_by(f64::total_cmp);
            let median = runs[runs.len() / 2];
            println!("{name:>20}: {median:>7.1} µs");
            worst = worst.max(median);
        }
        assert!(worst < 100.0, "slowest median {worst:.1} µs ≥ 100 µs");
    }

    // ---- property: paging equals sorting and filtering a plain Vec ----

    #[derive(Debug, Clone)]
    enum Op {
        Insert(Box<PendingRecord>),
        Remove(String, String),
    }

    fn meta_strategy() -> impl Strategy<Value = Option<Value>> {
        let value = prop::sample::select(vec![
            json!("a"),
            json!("b"),
            json!(1),
            json!(1.0),
            json!([1]),
            json!(null),
        ]);
        prop::option::of(prop::collection::btree_map(
            prop::sample::select(vec!["tenant", "team"]).prop_map(str::to_owned),
            value,
            0..3,
        ))
        .prop_map(|m| m.map(|m| Value::Object(m.into_iter().collect())))
    }

    fn op_strategy() -> impl Strategy<Value = Op> {
        let session = prop::sample::select(vec!["s1", "s2", "s3"]);
        let call = prop::sample::select(vec!["c1", "c2", "c3", "c4"]);
        let turn = prop::sample::select(vec!["t1", "t2"]);
        prop_oneof![
            4 => (0u64..6, session.clone(), call.clone(), turn, meta_strategy(), prop::option::of(0u64..6))
                .prop_map(|(at, s, c, t, m, expires)| {
                    let mut r = rec(at, s, c, t, m);
                    r.expires_at = expires;
                    Op::Insert(Box::new(r))
                }),
            1 => (session, call).prop_map(|(s, c)| Op::Remove(s.to_owned(), c.to_owned())),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 256, failure_persistence: None, ..ProptestConfig::default() })]

        #[test]
        fn paging_equals_sorting_and_filtering_a_vec(
            ops in prop::collection::vec(op_strategy(), 0..40),
            session in prop::option::of(prop::sample::select(vec!["s1", "s2", "s3", "s9"])),
            filter in meta_strategy(),
            limit in 1usize..5,
        ) {
            let mut ix = PendingIndex::new();
            let mut model: Vec<PendingRecord> = Vec::new();
            for op in ops {
                match op {
                    Op::Insert(r) => {
                        let before = model.iter().position(|m| m.key() == r.key()).map(|i| model.remove(i));
                        let got = ix.insert((*r).clone());
                        prop_assert_eq!(got.as_deref(), before.as_ref());
                        model.push(*r);
                    }
                    Op::Remove(s, c) => {
                        let before = model
                            .iter()
                            .position(|m| m.session_id == s && m.function_call_id == c)
                            .map(|i| model.remove(i));
                        let got = ix.remove(&s, &c);
                        prop_assert_eq!(got.as_deref(), before.as_ref());
                    }
                }
            }
            prop_assert_eq!(ix.len(), model.len());
            let filter = filter.map(|f| match f { Value::Object(m) => m, _ => Map::new() });
            model.sort_by_key(PendingRecord::sort_key);
            let expected: Vec<&PendingRecord> = model
                .iter()
                .filter(|r| session.is_none_or(|s| r.session_id == s))
                .filter(|r| filter.as_ref().is_none_or(|f| r.metadata_matches(f)))
                .collect();
            let mut got: Vec<PendingRecord> = Vec::new();
            let mut after: Option<SortKey> = None;
            let mut pages = 0;
            loop {
                let page = ix.list(&ListQuery {
                    session_id: session,
                    metadata: filter.as_ref(),
                    after: after.as_ref(),
                    limit,
                });
                pages += 1;
                prop_assert!(page.items.len() <= limit);
                got.extend(page.items.iter().map(|r| (**r).clone()));
                match page.next {
                    Some(next) => {
                        prop_assert_eq!(page.items.len(), limit);
                        let last = page.items.last().map(|r| r.sort_key());
                        prop_assert_eq!(Some(&next), last.as_ref());
                        after = Some(next);
                    }
                    None => break,
                }
                prop_assert!(pages <= model.len() + 1);
            }
            let got_refs: Vec<&PendingRecord> = got.iter().collect();
            prop_assert_eq!(got_refs, expected.clone());
            // No empty trailing page: `next` promised at least one more item.
            prop_assert_eq!(pages, expected.len().div_ceil(limit).max(1));
            for (s, c) in model.iter().map(PendingRecord::key) {
                prop_assert!(ix.keys_of_session(&s).contains(&(s.clone(), c.clone())));
            }
            for turn in ["t1", "t2"] {
                let keys: Vec<RecordKey> = model.iter().filter(|r| r.turn_id == turn).map(PendingRecord::key).collect();
                prop_assert_eq!(ix.keys_of_turn(turn), keys);
            }
            // The deadline view: exactly the records with a deadline, in
            // deadline order.
            let mut due: Vec<(u64, RecordKey)> = model
                .iter()
                .filter_map(|r| Some((r.next_due()?, r.key())))
                .collect();
            due.sort();
            let taken: Vec<(u64, RecordKey)> = std::iter::from_fn(|| ix.take_due(u64::MAX))
                .map(|r| (r.next_due().unwrap_or(u64::MAX), r.key()))
                .collect();
            prop_assert_eq!(taken, due);
        }
    }
}
