//! Who held the process's memory over time: each composition the run takes
//! ([`super::holders`]), kept as a series the dashboard's memory chart stacks
//! under its curve. Appended as the fold composes, never recomputed; bounded by
//! keeping every other point once it is full, so a long run keeps its whole
//! span at a coarser step.

use super::holders::Holders;

/// Points kept before the series is thinned.
const KEPT: usize = 1 << 15;

/// The named shares of one reading, in bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SharePoint {
    pub t_ns: u64,
    /// The reading: the process's own memory then.
    pub total: u64,
    /// Objects it held (less its allocators' cache).
    pub held: u64,
    /// What its frameworks' allocators cached.
    pub cached: u64,
    /// Measured reserves of what it held.
    pub reserves: u64,
    /// Objects and reserves it had released that the driver kept, its
    /// stream-ordered pool's retention and its graphs' memory included.
    pub kept: u64,
}

impl SharePoint {
    fn of(h: &Holders) -> SharePoint {
        SharePoint {
            t_ns: h.at_ns,
            total: h.total,
            // Managed pages on the device are the objects' own memory.
            held: h.held + h.managed_on_device.unwrap_or(0),
            cached: h.cached,
            reserves: h.reserves_held,
            kept: h.released + h.reserves_released + h.pool_kept + h.graphs,
        }
    }

    /// The shares bottom to top, as the chart stacks them.
    pub fn stacked(&self) -> [u64; 4] {
        [self.held, self.cached, self.reserves, self.kept]
    }

    fn same_shares(&self, other: &SharePoint) -> bool {
        (self.total, self.stacked()) == (other.total, other.stacked())
    }
}

/// The series, in time order.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Composition {
    points: Vec<SharePoint>,
}

impl Composition {
    /// A composition was taken. A stretch of equal ones keeps its first and
    /// last point, as the readings do.
    pub fn push(&mut self, h: &Holders) {
        let p = SharePoint::of(h);
        if let [.., a, b] = self.points.as_mut_slice()
            && a.same_shares(&p)
            && b.same_shares(&p)
        {
            b.t_ns = p.t_ns;
            return;
        }
        if self.points.len() == KEPT {
            let mut i = 0;
            self.points.retain(|_| {
                i += 1;
                i % 2 == 1
            });
        }
        self.points.push(p);
    }

    /// The composition taken at `t_ns` was taken back.
    pub fn take_back(&mut self, t_ns: u64) {
        if self.points.last().is_some_and(|p| p.t_ns == t_ns) {
            self.points.pop();
        }
    }

    /// Compositions taken after the program was gone describe no program.
    pub fn cut_after(&mut self, t_ns: u64) {
        while self.points.last().is_some_and(|p| p.t_ns > t_ns) {
            self.points.pop();
        }
    }

    pub fn points(&self) -> &[SharePoint] {
        &self.points
    }

    /// The latest composition at or before `t_ns`.
    pub fn at(&self, t_ns: u64) -> Option<&SharePoint> {
        let i = self.points.partition_point(|p| p.t_ns <= t_ns);
        i.checked_sub(1).map(|i| &self.points[i])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn h(t: u64, total: u64, held: u64) -> Holders {
        Holders {
            at_ns: t,
            total,
            held,
            ..Holders::default()
        }
    }

    #[test]
    fn a_steady_stretch_keeps_its_ends_and_a_lookup_finds_the_latest() {
        let mut c = Composition::default();
        for t in 0..100 {
            c.push(&h(t, 10, 4));
        }
        c.push(&h(100, 20, 4));
        assert_eq!(c.points().len(), 3);
        assert_eq!(c.at(50).map(|p| p.t_ns), Some(0));
        assert_eq!(c.at(99).map(|p| p.total), Some(10));
        assert_eq!(c.at(100).map(|p| p.total), Some(20));
        assert!(c.at(0).is_some() && Composition::default().at(5).is_none());
        c.take_back(100);
        assert_eq!(c.points().last().map(|p| p.t_ns), Some(99));
        c.cut_after(10);
        assert_eq!(c.points().len(), 1);
    }

    #[test]
    fn a_full_series_keeps_its_span_at_a_coarser_step() {
        let mut c = Composition::default();
        for t in 0..(KEPT as u64 + 10) {
            c.push(&h(t, t, t / 2));
        }
        assert!(c.points().len() <= KEPT);
        assert_eq!(c.points().first().map(|p| p.t_ns), Some(0));
        assert_eq!(c.points().last().map(|p| p.t_ns), Some(KEPT as u64 + 9));
    }
}
