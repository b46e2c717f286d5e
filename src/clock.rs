//! The one clock both processes share: CLOCK_MONOTONIC in nanoseconds.

/// Nanoseconds on CLOCK_MONOTONIC; the worker and the parent read the same clock,
/// so their timestamps line up without any exchange.
pub fn now_ns() -> u64 {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::Monotonic);
    (t.tv_sec as u64) * 1_000_000_000 + t.tv_nsec as u64
}

pub fn ms(ns: u64) -> f64 {
    ns as f64 / 1e6
}

#[cfg(test)]
mod tests {
    #[test]
    fn monotonic_never_goes_back() {
        let a = super::now_ns();
        let b = super::now_ns();
        assert!(b >= a);
        assert!(a > 0);
    }
}
