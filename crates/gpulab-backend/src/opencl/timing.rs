//! Device-to-host clock mapping for OpenCL profiling stamps.
//!
//! OpenCL profiling stamps (`CL_PROFILING_COMMAND_QUEUED/SUBMIT/START/END`) count
//! nanoseconds on a device timer whose origin is unspecified. gpulab reports every
//! time on the host's CLOCK_MONOTONIC (`clock::now_ns`), so it needs
//! `host = device + offset`.
//!
//! `clGetDeviceAndHostTimer` would give the offset directly, but it returns
//! `CL_INVALID_OPERATION` on NVIDIA (driver 580) and on PoCL, so the offset is
//! derived from the enqueues themselves: gpulab reads `now_ns()` right before (`h0`)
//! and right after (`h1`) each enqueue call, and the command's QUEUED stamp `q` is
//! taken inside that call, so `h0 <= q + offset <= h1`, i.e.
//! `offset ∈ [h0 − q, h1 − q]`. The intervals of all enqueues (the calibration runs
//! at open included) are intersected; the offset used is the midpoint of the
//! intersection and the error bound (`clock_error_ns`) is half its width. A device
//! that stamps QUEUED outside the call, or a timer that drifts against the host's,
//! would make the intervals disjoint: then the map widens to the hull of both and
//! counts the conflict, so the error bound stays honest instead of collapsing.

/// The intersection of all `[h0 − q, h1 − q]` intervals seen so far.
#[derive(Debug, Clone, Default)]
pub struct ClockMap {
    lo: i128,
    hi: i128,
    known: bool,
    samples: u64,
    conflicts: u64,
}

impl ClockMap {
    /// One enqueue: host stamps before/after the call and the command's QUEUED stamp.
    pub fn observe(&mut self, h0: u64, h1: u64, queued: u64) {
        let lo = i128::from(h0) - i128::from(queued);
        let hi = i128::from(h1.max(h0)) - i128::from(queued);
        self.samples += 1;
        if !self.known {
            (self.lo, self.hi, self.known) = (lo, hi, true);
            return;
        }
        let (nlo, nhi) = (self.lo.max(lo), self.hi.min(hi));
        if nlo <= nhi {
            (self.lo, self.hi) = (nlo, nhi);
        } else {
            self.conflicts += 1;
            (self.lo, self.hi) = (self.lo.min(lo), self.hi.max(hi));
        }
    }

    /// `host − device` in ns, the midpoint of the interval.
    pub fn offset(&self) -> Option<i128> {
        self.known.then(|| self.lo + (self.hi - self.lo) / 2)
    }

    /// Half the interval width: the most the mapped host time can be off.
    pub fn error_ns(&self) -> Option<u64> {
        self.known
            .then(|| u64::try_from((self.hi - self.lo + 1) / 2).unwrap_or(u64::MAX))
    }

    /// A device stamp on the host clock (0 when the map is still unknown and the
    /// stamp would land before the clock's origin).
    pub fn to_host(&self, device_ns: u64) -> Option<u64> {
        let host = i128::from(device_ns) + self.offset()?;
        Some(u64::try_from(host.max(0)).unwrap_or(u64::MAX))
    }

    pub fn samples(&self) -> u64 {
        self.samples
    }

    /// Enqueues whose interval did not meet the others (0 on a sane device).
    pub fn conflicts(&self) -> u64 {
        self.conflicts
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn intervals_intersect_to_the_tightest_bound() {
        let mut m = ClockMap::default();
        assert_eq!(m.offset(), None);
        // true offset 1000: q = h - 1000 somewhere inside each call
        m.observe(5_000, 5_100, 4_050); // [950, 1050]
        m.observe(9_000, 9_040, 7_990); // [1010, 1050]
        m.observe(12_000, 12_500, 11_000); // [1000, 1500]
        assert_eq!((m.lo, m.hi), (1010, 1050));
        assert_eq!(m.offset(), Some(1030));
        assert_eq!(m.error_ns(), Some(20));
        assert_eq!(m.to_host(100), Some(1130));
        assert_eq!(m.conflicts(), 0);
    }

    #[test]
    fn disjoint_intervals_widen_instead_of_lying() {
        let mut m = ClockMap::default();
        m.observe(1_000, 1_010, 0); // [1000, 1010]
        m.observe(2_000, 2_010, 0); // [2000, 2010]
        assert_eq!(m.conflicts(), 1);
        assert_eq!((m.lo, m.hi), (1000, 2010));
        assert!(m.error_ns().is_some_and(|e| e >= 500));
    }
}
