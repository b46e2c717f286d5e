//! A memory series at a chart's width. While a run has few readings the series
//! keeps them all and draws each; past that it keeps, per pixel column, the
//! column's first, last, lowest and highest reading (the min/max decimation of
//! plotting tools), which draws the same line at that width: every peak and dip
//! stays, and the series costs the chart's columns, not the run's readings.

use std::collections::BTreeMap;

/// One reading: its time, its place in arrival order (readings of equal time
/// keep it, as the run's do) and its value.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Point {
    t: u64,
    arrival: u64,
    v: u64,
}

impl Point {
    fn key(&self) -> (u64, u64) {
        (self.t, self.arrival)
    }
}

/// What one pixel column keeps of its readings.
#[derive(Debug, Clone, Copy)]
struct Bucket {
    first: Point,
    last: Point,
    low: Point,
    high: Point,
}

impl Bucket {
    fn of(p: Point) -> Bucket {
        Bucket {
            first: p,
            last: p,
            low: p,
            high: p,
        }
    }

    fn add(&mut self, p: Point) {
        if p.key() < self.first.key() {
            self.first = p;
        }
        if p.key() > self.last.key() {
            self.last = p;
        }
        if (p.v, p.key()) < (self.low.v, self.low.key()) {
            self.low = p;
        }
        if (p.v, std::cmp::Reverse(p.key())) > (self.high.v, std::cmp::Reverse(self.high.key())) {
            self.high = p;
        }
    }

    /// Its distinct readings in time order: two to four points, one where the
    /// column had one reading.
    fn points(&self, out: &mut Vec<(u64, u64)>) {
        let mut ps = [self.first, self.low, self.high, self.last];
        ps.sort_by_key(Point::key);
        let mut prev = None;
        for p in ps {
            if prev != Some(p.arrival) {
                out.push((p.t, p.v));
            }
            prev = Some(p.arrival);
        }
    }
}

/// Readings `(t_ns, value)` as a chart draws them.
#[derive(Debug, Clone)]
pub(crate) struct Series {
    /// Every reading in time order, while no more than `budget` came.
    whole: Vec<(u64, u64)>,
    budget: usize,
    seen: u64,
    buckets: BTreeMap<i64, Bucket>,
    peak: Option<u64>,
}

impl Series {
    /// A series drawn reading by reading up to `budget` readings.
    pub fn new(budget: usize) -> Series {
        Series {
            whole: Vec::new(),
            budget,
            seen: 0,
            buckets: BTreeMap::new(),
            peak: None,
        }
    }

    /// One reading, and the pixel column its time falls in.
    pub fn push(&mut self, t: u64, v: u64, column: i64) {
        let p = Point {
            t,
            arrival: self.seen,
            v,
        };
        self.seen += 1;
        self.peak = self.peak.max(Some(v));
        if self.seen <= self.budget as u64 {
            // Readings arrive nearly in time order (a worker's lag the sampler's
            // by a call at most): an append almost always.
            let at = self.whole.partition_point(|(lt, _)| *lt <= t);
            self.whole.insert(at, (t, v));
        } else if !self.whole.is_empty() {
            self.whole = Vec::new();
        }
        match self.buckets.get_mut(&column) {
            Some(b) => b.add(p),
            None => {
                self.buckets.insert(column, Bucket::of(p));
            }
        }
    }

    /// The highest reading.
    pub fn peak(&self) -> Option<u64> {
        self.peak
    }

    /// Whether the readings are drawn as columns, not one by one.
    pub fn decimated(&self) -> bool {
        self.seen > self.budget as u64
    }

    /// The points to draw, in time order: every reading, or each column's.
    pub fn points(&self) -> Vec<(u64, u64)> {
        if !self.decimated() {
            return self.whole.clone();
        }
        let mut out = Vec::with_capacity(self.buckets.len() * 4);
        for b in self.buckets.values() {
            b.points(&mut out);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::Rng;

    fn column(t: u64) -> i64 {
        (t / 1_000) as i64
    }

    /// Readings nearly in time order (now and then one a little late), with
    /// spikes and repeated times, as a worker and a sampler send them.
    fn readings(rng: &mut Rng, n: usize) -> Vec<(u64, u64)> {
        let mut t = 0;
        (0..n)
            .map(|_| {
                t += rng.below(300);
                let at = t.saturating_sub(if rng.below(10) == 0 {
                    rng.below(900)
                } else {
                    0
                });
                let v = if rng.below(50) == 0 {
                    rng.below(1 << 30)
                } else {
                    1_000 + rng.below(100)
                };
                (at, v)
            })
            .collect()
    }

    #[test]
    fn each_columns_low_and_high_are_its_readings_min_and_max() {
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
        for round in 0..40 {
            let n = 1 + rng.below(5_000) as usize;
            let raw = readings(&mut rng, n);
            let mut s = Series::new(if round % 2 == 0 { 0 } else { 64 });
            for (t, v) in &raw {
                s.push(*t, *v, column(*t));
            }
            let mut by_column: BTreeMap<i64, Vec<u64>> = BTreeMap::new();
            for (t, v) in &raw {
                by_column.entry(column(*t)).or_default().push(*v);
            }
            let points = s.points();
            assert!(
                points.is_sorted_by_key(|p| p.0),
                "round {round}: time order"
            );
            assert_eq!(s.peak(), raw.iter().map(|r| r.1).max());
            if !s.decimated() {
                let mut sorted = raw.clone();
                sorted.sort_by_key(|r| r.0);
                assert_eq!(points, sorted, "round {round}: a short series is whole");
                continue;
            }
            for (col, values) in &by_column {
                let drawn: Vec<u64> = points
                    .iter()
                    .filter(|p| column(p.0) == *col)
                    .map(|p| p.1)
                    .collect();
                assert!((1..=4).contains(&drawn.len()), "round {round} column {col}");
                assert_eq!(drawn.iter().min(), values.iter().min(), "column {col}");
                assert_eq!(drawn.iter().max(), values.iter().max(), "column {col}");
            }
            // The line starts and ends where the readings do.
            let mut sorted = raw.clone();
            sorted.sort_by_key(|r| r.0);
            assert_eq!(points.first().map(|p| p.0), sorted.first().map(|r| r.0));
            assert_eq!(points.last().map(|p| p.0), sorted.last().map(|r| r.0));
            assert!(points.len() <= 4 * by_column.len());
        }
    }

    /// Readings of one time keep their arrival order, decimated or not.
    #[test]
    fn equal_times_keep_their_order() {
        let mut whole = Series::new(10);
        let mut columns = Series::new(0);
        for (t, v) in [(5, 1), (5, 9), (5, 3), (7, 4)] {
            whole.push(t, v, 0);
            columns.push(t, v, 0);
        }
        assert_eq!(whole.points(), vec![(5, 1), (5, 9), (5, 3), (7, 4)]);
        assert_eq!(columns.points(), vec![(5, 1), (5, 9), (7, 4)]);
    }
}
