//! PURE: a bounded first-in first-out queue that makes room by dropping its
//! oldest item — what the decision log holds between the gate and its
//! sender. The gate never waits for room: a full queue costs the oldest
//! record, counted, never the gate's answer.

use std::collections::VecDeque;

/// A bounded FIFO that drops its oldest item when full.
#[derive(Debug)]
pub(crate) struct DropOldest<T> {
    items: VecDeque<T>,
    capacity: usize,
    dropped: u64,
}

impl<T> DropOldest<T> {
    /// An empty queue holding at most `capacity` items (at least one).
    pub(crate) fn new(capacity: usize) -> DropOldest<T> {
        DropOldest {
            items: VecDeque::new(),
            capacity: capacity.max(1),
            dropped: 0,
        }
    }

    /// Adds `item`; when full, the oldest items go first (counted). Returns
    /// how many were dropped for it.
    pub(crate) fn push(&mut self, item: T) -> u64 {
        let mut dropped = 0;
        while self.items.len() >= self.capacity {
            self.items.pop_front();
            dropped += 1;
        }
        self.items.push_back(item);
        self.dropped += dropped;
        dropped
    }

    /// A new bound; a smaller one drops the oldest items beyond it (counted).
    pub(crate) fn set_capacity(&mut self, capacity: usize) {
        self.capacity = capacity.max(1);
        while self.items.len() > self.capacity {
            self.items.pop_front();
            self.dropped += 1;
        }
    }

    /// The oldest item.
    pub(crate) fn pop(&mut self) -> Option<T> {
        self.items.pop_front()
    }

    /// Items waiting.
    pub(crate) fn len(&self) -> usize {
        self.items.len()
    }

    /// Items dropped since the queue was made.
    pub(crate) fn dropped(&self) -> u64 {
        self.dropped
    }

    /// The bound.
    pub(crate) fn capacity(&self) -> usize {
        self.capacity
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn rule_23_a_full_queue_drops_the_oldest_and_counts_it() {
        let mut q = DropOldest::new(3);
        for i in 0..5 {
            q.push(i);
        }
        assert_eq!(q.dropped(), 2);
        assert_eq!(q.len(), 3);
        assert_eq!(q.pop(), Some(2));
        q.set_capacity(1);
        assert_eq!(q.dropped(), 3);
        assert_eq!(q.pop(), Some(4));
        assert_eq!(q.len(), 0);
        assert_eq!(DropOldest::<u8>::new(0).capacity(), 1);
    }

    proptest! {
        #[test]
        fn rule_23_the_queue_keeps_the_newest_in_order(cap in 1usize..20, n in 0usize..100) {
            let mut q = DropOldest::new(cap);
            for i in 0..n {
                q.push(i);
            }
            let kept: Vec<usize> = std::iter::from_fn(|| q.pop()).collect();
            let expected: Vec<usize> = (n.saturating_sub(cap)..n).collect();
            prop_assert_eq!(kept, expected);
            prop_assert_eq!(q.dropped() as usize, n.saturating_sub(cap));
        }
    }
}
