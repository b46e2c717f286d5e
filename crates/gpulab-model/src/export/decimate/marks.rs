//! One lane of a chart's marks (host calls, one queue's device work, the calls'
//! readings) merged by pixel column: whatever falls in the columns a mark already
//! covers becomes part of it, so a lane draws at most one mark a column however
//! many calls it holds. A mark keeps what it stands for (how many, when, their
//! names, failures, the range of their values), for its title to say.

use std::collections::BTreeMap;

/// Names a mark lists one by one; the rest are counted together.
const NAMES_KEPT: usize = 4;

/// One item as a lane takes it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Item<'a> {
    /// Where it is drawn, in the chart's units.
    pub x0: f64,
    pub x1: f64,
    pub begin_ns: u64,
    pub end_ns: u64,
    pub name: &'a str,
    pub failed: bool,
    pub tagged: bool,
    /// A value it carries (a call's reading after it).
    pub value: Option<u64>,
}

/// Items merged into one mark.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Mark {
    /// What its items' bars covered, each at least the lane's narrowest.
    pub x0: f64,
    pub x1: f64,
    pub count: u64,
    pub begin_ns: u64,
    pub end_ns: u64,
    /// The items' own lengths, summed.
    pub busy_ns: u64,
    pub failed: u64,
    pub tagged: bool,
    /// The first few names and how many items carried each, in the order they
    /// first came, and how many items carried another name.
    pub names: Vec<(String, u64)>,
    pub other_names: u64,
    /// The lowest and highest value of the items that carried one.
    pub values: Option<(u64, u64)>,
    /// The item with the highest value: where a mark of values is drawn.
    pub high_x: f64,
}

impl Mark {
    fn of(i: &Item) -> Mark {
        Mark {
            x0: i.x0,
            x1: i.x1,
            count: 1,
            begin_ns: i.begin_ns,
            end_ns: i.end_ns,
            busy_ns: i.end_ns.saturating_sub(i.begin_ns),
            failed: u64::from(i.failed),
            tagged: i.tagged,
            names: vec![(i.name.to_string(), 1)],
            other_names: 0,
            values: i.value.map(|v| (v, v)),
            high_x: i.x1,
        }
    }

    fn merge(&mut self, m: Mark) {
        if m.values
            .is_some_and(|(_, h)| self.values.is_none_or(|(_, mine)| h > mine))
        {
            self.high_x = m.high_x;
        }
        self.values = match (self.values, m.values) {
            (Some((a, b)), Some((c, d))) => Some((a.min(c), b.max(d))),
            (a, b) => a.or(b),
        };
        self.x0 = self.x0.min(m.x0);
        self.x1 = self.x1.max(m.x1);
        self.count += m.count;
        self.begin_ns = self.begin_ns.min(m.begin_ns);
        self.end_ns = self.end_ns.max(m.end_ns);
        self.busy_ns += m.busy_ns;
        self.failed += m.failed;
        self.tagged |= m.tagged;
        self.other_names += m.other_names;
        for (name, n) in m.names {
            match self.names.iter().position(|(mine, _)| *mine == name) {
                Some(i) => self.names[i].1 += n,
                None if self.names.len() < NAMES_KEPT => self.names.push((name, n)),
                None => self.other_names += n,
            }
        }
    }
}

/// A lane's marks, by the first pixel column each covers.
#[derive(Debug, Clone, Default)]
pub(crate) struct Marks {
    /// Each mark with the last column it covers; no two share a column.
    marks: BTreeMap<i64, (i64, Mark)>,
    /// The narrowest a mark is drawn: it covers the columns under that width.
    min_width: f64,
}

impl Marks {
    /// Marks drawn at least `min_width` wide.
    pub fn new(min_width: f64) -> Marks {
        Marks {
            marks: BTreeMap::new(),
            min_width,
        }
    }

    /// The columns a mark from `x0` to `x1` covers as drawn.
    fn columns(&self, x0: f64, x1: f64) -> (i64, i64) {
        let end = x1.max(x0 + self.min_width);
        (
            x0.floor() as i64,
            (end.floor() as i64).max(x0.floor() as i64),
        )
    }

    pub fn push(&mut self, item: &Item) {
        let (mut first, mut last) = self.columns(item.x0, item.x1);
        // A mark reaches as far as its items' bars did, each at least
        // `min_width` wide: a gap between two marks is one the items had.
        let mut mark = Mark::of(&Item {
            x1: item.x1.max(item.x0 + self.min_width),
            ..*item
        });
        // The marks it touches lie together: the last one starting at or before
        // its last column, and those before it that reach its first column.
        while let Some((&start, &(end, _))) = self.marks.range(..=last).next_back() {
            if end < first {
                break;
            }
            if let Some((_, mut m)) = self.marks.remove(&start) {
                m.merge(mark);
                mark = m;
            }
            first = first.min(start);
            last = last.max(end);
        }
        self.marks.insert(first, (last, mark));
    }

    /// The marks from left to right.
    pub fn iter(&self) -> impl Iterator<Item = &Mark> {
        self.marks.values().map(|(_, m)| m)
    }

    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.marks.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn item(x0: f64, x1: f64, name: &str) -> Item<'_> {
        Item {
            x0,
            x1,
            begin_ns: (x0 * 1000.0) as u64,
            end_ns: (x1 * 1000.0) as u64,
            name,
            failed: false,
            tagged: false,
            value: None,
        }
    }

    #[test]
    fn n_calls_in_one_pixel_draw_one_mark_of_n() {
        let mut lane = Marks::new(1.5);
        for i in 0..10_000 {
            let x = 300.0 + i as f64 * 1e-5;
            let name = if i % 100 == 0 {
                "clEnqueueNDRangeKernel"
            } else {
                "clFinish"
            };
            lane.push(&Item {
                failed: i == 7,
                value: Some(i),
                ..item(x, x + 1e-6, name)
            });
        }
        assert_eq!(lane.len(), 1);
        let m = lane.iter().next().unwrap();
        assert_eq!(m.count, 10_000);
        assert_eq!(m.failed, 1);
        assert_eq!(
            m.names,
            vec![
                ("clEnqueueNDRangeKernel".to_string(), 100),
                ("clFinish".to_string(), 9_900)
            ]
        );
        assert_eq!(m.values, Some((0, 9_999)));
    }

    /// However many calls, and in whatever order they come, a lane holds at
    /// most one mark a column, every call counted once.
    #[test]
    fn a_lane_draws_at_most_one_mark_a_column() {
        let mut lane = Marks::new(1.5);
        let width = 1410;
        let mut seed = 7u64;
        for _ in 0..200_000 {
            seed = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
            let x0 = (seed >> 33) as f64 / (1u64 << 31) as f64 * width as f64;
            let long = (seed >> 20).is_multiple_of(1000);
            let x1 = x0 + if long { 40.0 } else { 0.01 };
            lane.push(&item(x0, x1, "clFinish"));
        }
        assert!(lane.len() <= width, "{} marks", lane.len());
        assert_eq!(lane.iter().map(|m| m.count).sum::<u64>(), 200_000);
        // Marks never overlap, and come left to right.
        let marks: Vec<&Mark> = lane.iter().collect();
        for pair in marks.windows(2) {
            assert!(pair[0].x1.max(pair[0].x0 + 1.5).floor() < pair[1].x0.floor());
        }
    }

    #[test]
    fn calls_apart_stay_apart_and_a_long_one_swallows_those_under_it() {
        let mut lane = Marks::new(1.5);
        lane.push(&item(10.0, 10.1, "a"));
        lane.push(&item(20.0, 20.1, "b"));
        lane.push(&item(30.0, 30.1, "c"));
        assert_eq!(lane.len(), 3);
        lane.push(&item(9.5, 25.0, "long"));
        let counts: Vec<u64> = lane.iter().map(|m| m.count).collect();
        assert_eq!(counts, vec![3, 1]);
        let first = lane.iter().next().unwrap();
        assert_eq!((first.x0, first.x1), (9.5, 25.0));
        for name in ["e", "f", "g", "h"] {
            lane.push(&item(30.05, 30.06, name));
        }
        let last = lane.iter().last().unwrap();
        assert_eq!(last.names.len(), NAMES_KEPT);
        assert_eq!(last.other_names, 1);
    }
}
