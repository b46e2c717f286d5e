//! A bounded window of the most recent items of a run (calls, device spans,
//! object events): what the timeline and the live panels draw. Everything a
//! report or a verdict needs of older items is folded elsewhere as they arrive
//! ([`super::fold`]); this window only forgets.

use std::collections::VecDeque;

/// The last `cap` items pushed, in arrival order, and how many were pushed in all.
#[derive(Debug, Clone, PartialEq)]
pub struct Recent<T> {
    items: VecDeque<T>,
    cap: usize,
    seen: u64,
}

impl<T> Recent<T> {
    /// A window that keeps at most `cap` items (at least one).
    pub fn new(cap: usize) -> Self {
        Recent {
            items: VecDeque::new(),
            cap: cap.max(1),
            seen: 0,
        }
    }

    /// Appends `item`; returns the oldest item when the window was full.
    pub fn push(&mut self, item: T) -> Option<T> {
        self.seen += 1;
        let old = (self.items.len() == self.cap)
            .then(|| self.items.pop_front())
            .flatten();
        self.items.push_back(item);
        old
    }

    /// Inserts `item` at `index` of the window (for the few items that arrive
    /// out of order); the oldest item goes when the window was full.
    pub fn insert(&mut self, index: usize, item: T) {
        self.seen += 1;
        self.items.insert(index.min(self.items.len()), item);
        if self.items.len() > self.cap {
            self.items.pop_front();
        }
    }

    /// Drops every item from `len` on (items counted as seen stay counted).
    pub fn truncate(&mut self, len: usize) {
        self.items.truncate(len);
    }

    /// Items pushed in all, the forgotten ones included.
    pub fn seen(&self) -> u64 {
        self.seen
    }

    /// Items pushed and no longer in the window.
    pub fn forgotten(&self) -> u64 {
        self.seen - self.items.len() as u64
    }

    pub fn cap(&self) -> usize {
        self.cap
    }

    pub fn len(&self) -> usize {
        self.items.len()
    }

    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    pub fn first(&self) -> Option<&T> {
        self.items.front()
    }

    pub fn last(&self) -> Option<&T> {
        self.items.back()
    }

    pub fn get(&self, index: usize) -> Option<&T> {
        self.items.get(index)
    }

    pub fn iter(&self) -> std::collections::vec_deque::Iter<'_, T> {
        self.items.iter()
    }

    /// The items from `index` on.
    pub fn from(&self, index: usize) -> std::collections::vec_deque::Iter<'_, T> {
        self.items.range(index.min(self.items.len())..)
    }

    /// The index of the first item for which `pred` is false (the items
    /// partitioned by it, as a slice's `partition_point`).
    pub fn partition_point(&self, pred: impl FnMut(&T) -> bool) -> usize {
        self.items.partition_point(pred)
    }
}

impl<'a, T> IntoIterator for &'a Recent<T> {
    type Item = &'a T;
    type IntoIter = std::collections::vec_deque::Iter<'a, T>;
    fn into_iter(self) -> Self::IntoIter {
        self.items.iter()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn n_plus_k_pushes_keep_the_last_n() {
        for (cap, k) in [(1, 0), (1, 5), (4, 0), (4, 1), (4, 9), (100, 357)] {
            let mut w = Recent::new(cap);
            let mut evicted = Vec::new();
            for i in 0..cap + k {
                evicted.extend(w.push(i));
            }
            assert_eq!(w.len(), cap);
            assert_eq!(w.seen(), (cap + k) as u64);
            assert_eq!(w.forgotten(), k as u64);
            assert_eq!(
                w.iter().copied().collect::<Vec<_>>(),
                (k..cap + k).collect::<Vec<_>>()
            );
            assert_eq!(evicted, (0..k).collect::<Vec<_>>());
        }
    }

    #[test]
    fn an_insert_past_the_cap_drops_the_oldest() {
        let mut w = Recent::new(3);
        for i in [10, 20, 40] {
            w.push(i);
        }
        w.insert(2, 30);
        assert_eq!(w.iter().copied().collect::<Vec<_>>(), vec![20, 30, 40]);
        assert_eq!((w.len(), w.seen()), (3, 4));
        assert_eq!(w.partition_point(|x| *x < 35), 2);
        assert_eq!(w.from(1).copied().collect::<Vec<_>>(), vec![30, 40]);
    }

    #[test]
    fn a_zero_cap_still_keeps_the_latest() {
        let mut w = Recent::new(0);
        w.push('a');
        w.push('b');
        assert_eq!(w.last(), Some(&'b'));
        assert_eq!(w.cap(), 1);
    }
}
