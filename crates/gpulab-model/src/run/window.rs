//! A bounded window of the most recent items of a run (calls, device spans,
//! object events): what the timeline and the live panels draw. Everything a
//! report or a verdict needs of older items is folded elsewhere as they arrive
//! ([`super::fold`]); this window only forgets.

use std::collections::VecDeque;

use crate::trace::{Block, Call, Calling, DeviceSpan, ObjectEvent, Sample};

/// The run's part that keeps the latest events whole: the most recent calls,
/// object events, device spans and samples, every `repeat` block (a lab's
/// few), and the call the worker is in now.
#[derive(Debug, Clone)]
pub(super) struct Window {
    pub(super) calls: Recent<Call>,
    pub(super) objects: Recent<ObjectEvent>,
    pub(super) spans: Recent<DeviceSpan>,
    pub(super) samples: Recent<Sample>,
    pub(super) blocks: Vec<Block>,
    /// The call the worker went into and has not come back from yet: what a
    /// run that hangs is stuck in.
    pub(super) in_flight: Option<Calling>,
    /// The latest end, and the highest call seq, of the device spans no
    /// longer in `spans`.
    spans_forgotten: Option<(u64, u64)>,
}

impl Window {
    pub(super) fn new(calls: usize, spans: usize, objects: usize, samples: usize) -> Window {
        Window {
            calls: Recent::new(calls),
            objects: Recent::new(objects),
            spans: Recent::new(spans),
            samples: Recent::new(samples),
            blocks: Vec::new(),
            in_flight: None,
            spans_forgotten: None,
        }
    }

    /// `c` returned: the worker is no longer in it (nor in an earlier call).
    pub(super) fn returned(&mut self, c: &Call) {
        if self.in_flight.as_ref().is_some_and(|f| f.seq <= c.seq) {
            self.in_flight = None;
        }
    }

    pub(super) fn span(&mut self, s: &DeviceSpan) {
        if let Some(old) = self.spans.push(s.clone()) {
            let (end, seq) = self.spans_forgotten.unwrap_or((0, 0));
            self.spans_forgotten = Some((end.max(old.end_ns), seq.max(old.call_seq)));
        }
    }

    /// The latest end of the device spans of calls before `seq`, forgotten
    /// ones included.
    pub(super) fn busy_before(&self, seq: u64) -> Option<u64> {
        self.spans
            .iter()
            .filter(|s| s.call_seq < seq)
            .map(|s| s.end_ns)
            .chain(self.spans_forgotten.map(|(end, _)| end))
            .max()
    }

    /// The latest call, when it is the one that made or let go of `id`: a
    /// lab's worker sends the call first, then the object.
    pub(super) fn call_of(&self, id: u64) -> Option<&Call> {
        self.calls.last().filter(|c| c.object == Some(id))
    }

    /// See [`super::Run::window_holds`].
    pub(super) fn holds(&self, lo: u64, calls: &[u64]) -> bool {
        let calls_whole =
            self.calls.forgotten() == 0 || self.calls.first().is_some_and(|c| c.begin_ns < lo);
        let spans_whole = match (self.spans_forgotten, calls.iter().min()) {
            (Some((_, gone)), Some(first)) => gone < *first,
            _ => true,
        };
        calls_whole && spans_whole
    }
}

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
