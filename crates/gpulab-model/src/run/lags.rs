//! A multiset of durations that answers its count, median and longest in
//! O(log n) as values come and go: how long released objects outlived their
//! release, which a dashboard frame shows without sorting them all.

use std::collections::BTreeMap;

/// The values in two halves: `low` the smallest `len / 2`, `high` the rest,
/// so the median (the value at `len / 2` in order) is the least of `high`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Lags {
    low: BTreeMap<u64, usize>,
    high: BTreeMap<u64, usize>,
    n_low: usize,
    n_high: usize,
}

impl Lags {
    pub fn len(&self) -> usize {
        self.n_low + self.n_high
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn insert(&mut self, v: u64) {
        match self.high.keys().next() {
            Some(&least) if v >= least => {
                add(&mut self.high, v);
                self.n_high += 1;
            }
            None if self.n_low == 0 => {
                add(&mut self.high, v);
                self.n_high += 1;
            }
            _ => {
                add(&mut self.low, v);
                self.n_low += 1;
            }
        }
        self.balance();
    }

    /// Takes one `v` out; false when there was none.
    pub fn remove(&mut self, v: u64) -> bool {
        if take(&mut self.low, v) {
            self.n_low -= 1;
        } else if take(&mut self.high, v) {
            self.n_high -= 1;
        } else {
            return false;
        }
        self.balance();
        true
    }

    /// The value at `len / 2` in order (the upper one of an even count).
    pub fn median(&self) -> Option<u64> {
        self.high.keys().next().copied()
    }

    pub fn max(&self) -> Option<u64> {
        self.high
            .keys()
            .next_back()
            .or_else(|| self.low.keys().next_back())
            .copied()
    }

    /// Every value in order (for tests and small sets).
    pub fn sorted(&self) -> Vec<u64> {
        let mut out = Vec::with_capacity(self.len());
        for (v, n) in self.low.iter().chain(&self.high) {
            out.extend(std::iter::repeat_n(*v, *n));
        }
        out
    }

    fn balance(&mut self) {
        let want_low = self.len() / 2;
        while self.n_low > want_low {
            if let Some(v) = self.low.keys().next_back().copied() {
                take(&mut self.low, v);
                add(&mut self.high, v);
                self.n_low -= 1;
                self.n_high += 1;
            }
        }
        while self.n_low < want_low {
            if let Some(v) = self.high.keys().next().copied() {
                take(&mut self.high, v);
                add(&mut self.low, v);
                self.n_high -= 1;
                self.n_low += 1;
            }
        }
    }
}

fn add(m: &mut BTreeMap<u64, usize>, v: u64) {
    *m.entry(v).or_default() += 1;
}

fn take(m: &mut BTreeMap<u64, usize>, v: u64) -> bool {
    match m.get_mut(&v) {
        Some(n) if *n > 1 => *n -= 1,
        Some(_) => {
            m.remove(&v);
        }
        None => return false,
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Random inserts and removals of a few values (many repeats): after
    /// each, the count, median and longest are what the sorted values say.
    #[test]
    fn median_and_max_are_those_of_the_sorted_values() {
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = |n: u64| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed % n
        };
        let mut lags = Lags::default();
        let mut all: Vec<u64> = Vec::new();
        for step in 0..4_000 {
            let v = next(50);
            if next(3) == 0 {
                let had = all.iter().position(|x| *x == v).map(|i| all.swap_remove(i));
                assert_eq!(lags.remove(v), had.is_some(), "step {step}");
            } else {
                lags.insert(v);
                all.push(v);
            }
            all.sort_unstable();
            assert_eq!(lags.len(), all.len());
            assert_eq!(
                lags.median(),
                all.get(all.len() / 2).copied(),
                "step {step}"
            );
            assert_eq!(lags.max(), all.last().copied());
            assert_eq!(lags.sorted(), all);
        }
    }
}
