//! A bounded map of what the worker knows about sessions' stored settings.
//! Pure: no I/O, no async.
//!
//! Why a cache rather than the whole scope in memory: a deployment can have
//! millions of sessions with stored settings, most of them idle. Loading them
//! all made boot time and resident memory grow with the number of sessions,
//! and a scope too large for one engine message could not be loaded at all —
//! after which every stored session was decided with the defaults. A bounded
//! cache, filled with one `state::get` on a session's first call after boot,
//! keeps boot constant and memory bounded, and a session the worker cannot
//! read is refused, never defaulted.
//!
//! # Staleness
//!
//! Writes made elsewhere invalidate entries (the `state` binding on the
//! scope). A read that was in flight while an invalidation happened must not
//! fill the cache with what it read before the write: every invalidation bumps
//! an epoch, and a fill carries the epoch it started at; a fill that started
//! before the latest invalidation answers its caller but is not kept.
//!
//! # Bound
//!
//! Entries are spread over shards by key hash; a full shard evicts the least
//! recently used of a handful of its entries (sampled LRU).

use std::collections::hash_map::DefaultHasher;
use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

/// Shards of the map: enough that handlers on two runtimes rarely contend.
const SHARDS: usize = 64;
/// Entries looked at to choose one to evict.
const EVICTION_SAMPLE: usize = 8;

struct Slot<V> {
    value: V,
    used: u64,
}

/// A bounded, sharded map from session id to `V`.
pub(crate) struct Cache<V> {
    shards: Vec<Mutex<HashMap<String, Slot<V>>>>,
    per_shard: usize,
    clock: AtomicU64,
    epoch: AtomicU64,
}

/// When a fill started, relative to invalidations.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Epoch(u64);

impl<V: Clone> Cache<V> {
    /// A cache of at most about `capacity` entries.
    pub(crate) fn new(capacity: usize) -> Cache<V> {
        Cache {
            shards: (0..SHARDS).map(|_| Mutex::new(HashMap::new())).collect(),
            per_shard: capacity.div_ceil(SHARDS).max(1),
            clock: AtomicU64::new(0),
            epoch: AtomicU64::new(0),
        }
    }

    fn shard(&self, key: &str) -> std::sync::MutexGuard<'_, HashMap<String, Slot<V>>> {
        let mut h = DefaultHasher::new();
        key.hash(&mut h);
        let shard = &self.shards[(h.finish() as usize) % SHARDS];
        // Held only for in-memory work, never across an await.
        crate::sync::lock(shard)
    }

    /// The value for `key`, marking it used.
    pub(crate) fn get(&self, key: &str) -> Option<V> {
        let tick = self.clock.fetch_add(1, Ordering::Relaxed);
        let mut shard = self.shard(key);
        let slot = shard.get_mut(key)?;
        slot.used = tick;
        Some(slot.value.clone())
    }

    /// The epoch a fill starts at: take it before reading the source.
    pub(crate) fn epoch(&self) -> Epoch {
        Epoch(self.epoch.load(Ordering::SeqCst))
    }

    /// Keeps what a fill read, unless an invalidation happened since `since`.
    /// Returns whether it was kept.
    pub(crate) fn fill(&self, key: &str, value: V, since: Epoch) -> bool {
        let mut shard = self.shard(key);
        // Checked under the shard lock: an invalidation of this key takes the
        // same lock after bumping the epoch, so it cannot slip in between.
        if self.epoch.load(Ordering::SeqCst) != since.0 {
            return false;
        }
        self.insert_locked(&mut shard, key, value);
        true
    }

    /// Sets `key` to a value known to be current (a write the worker made);
    /// fills that started before it are not kept.
    pub(crate) fn put(&self, key: &str, value: V) {
        self.epoch.fetch_add(1, Ordering::SeqCst);
        let mut shard = self.shard(key);
        self.insert_locked(&mut shard, key, value);
    }

    /// Forgets `key` and defeats fills in flight.
    pub(crate) fn invalidate(&self, key: &str) {
        self.epoch.fetch_add(1, Ordering::SeqCst);
        self.shard(key).remove(key);
    }

    /// Whether `key` has an entry.
    pub(crate) fn contains(&self, key: &str) -> bool {
        self.shard(key).contains_key(key)
    }

    /// Number of entries.
    pub(crate) fn len(&self) -> usize {
        self.shards
            .iter()
            .map(|s| match s.lock() {
                Ok(g) => g.len(),
                Err(p) => p.into_inner().len(),
            })
            .sum()
    }

    fn insert_locked(&self, shard: &mut HashMap<String, Slot<V>>, key: &str, value: V) {
        let used = self.clock.fetch_add(1, Ordering::Relaxed);
        if let Some(slot) = shard.get_mut(key) {
            *slot = Slot { value, used };
            return;
        }
        if shard.len() >= self.per_shard {
            let victim = shard
                .iter()
                .take(EVICTION_SAMPLE)
                .min_by_key(|(_, slot)| slot.used)
                .map(|(k, _)| k.clone());
            if let Some(victim) = victim {
                shard.remove(&victim);
            }
        }
        shard.insert(key.to_string(), Slot { value, used });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fill_is_kept_unless_an_invalidation_happened_since_it_started() {
        let cache: Cache<u32> = Cache::new(100);
        let start = cache.epoch();
        assert!(cache.fill("s", 1, start));
        assert_eq!(cache.get("s"), Some(1));

        let stale = cache.epoch();
        cache.invalidate("other");
        assert!(!cache.fill("t", 2, stale), "a write happened meanwhile");
        assert_eq!(cache.get("t"), None);

        cache.invalidate("s");
        assert_eq!(cache.get("s"), None);
        let before_write = cache.epoch();
        cache.put("s", 3);
        assert_eq!(cache.get("s"), Some(3));
        assert!(cache.contains("s"));
        assert!(
            !cache.fill("s", 1, before_write),
            "a read that started before a write the worker made is not kept"
        );
        assert_eq!(cache.get("s"), Some(3));
    }

    #[test]
    fn the_cache_stays_within_its_bound_and_keeps_what_is_used() {
        let cache: Cache<usize> = Cache::new(640);
        for i in 0..100_000 {
            let key = format!("s{i}");
            cache.put(&key, i);
            // A hot key read after every insert must survive eviction.
            assert_eq!(cache.get("s0"), Some(0), "after {i} inserts");
        }
        let len = cache.len();
        assert!(len <= 640, "{len} entries for a bound of 640");
        assert!(
            len >= 600,
            "{len}: eviction took more than one entry at a time"
        );
    }
}
