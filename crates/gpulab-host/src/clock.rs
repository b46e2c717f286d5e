//! The one clock both processes share: CLOCK_MONOTONIC in nanoseconds.

/// Nanoseconds on CLOCK_MONOTONIC; the worker and the parent read the same clock,
/// so their timestamps line up without any exchange.
pub fn now_ns() -> u64 {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::Monotonic);
    (t.tv_sec as u64) * 1_000_000_000 + t.tv_nsec as u64
}

/// Where a run's wall time goes, for docs/benchmarks.md (#12): with
/// `GPULAB_TIMINGS=FILE` in the environment, each call appends `pid label t_ns`
/// to FILE. The worker inherits the variable, so one file holds both processes'
/// phases on the one clock. Without it a call costs one environment lookup.
pub fn phase(label: &str) {
    use std::io::Write;
    use std::sync::{Mutex, OnceLock};
    static FILE: OnceLock<Option<Mutex<std::fs::File>>> = OnceLock::new();
    let file = FILE.get_or_init(|| {
        let path = std::env::var_os("GPULAB_TIMINGS")?;
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .ok()
            .map(Mutex::new)
    });
    if let Some(Ok(mut f)) = file.as_ref().map(|m| m.lock()) {
        let _ = writeln!(f, "{} {label} {}", std::process::id(), now_ns());
    }
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
