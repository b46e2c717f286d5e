//! CUDA event times to host CLOCK_MONOTONIC. CUDA events have no absolute time,
//! only `cuEventElapsedTime` between two events, so gpulab records one reference
//! event when the backend opens and brackets it on the host: `h0` before
//! `cuEventRecord`, `h1` after `cuEventSynchronize` returned. The reference's device
//! time lies in [h0, h1]; gpulab takes the midpoint and keeps the narrowest of a few
//! tries. Any event `e` then maps to `mid + elapsed(ref, e)`.
//!
//! Error bound: half the narrowest bracket (typically 5–30 µs), plus the 0.5 µs
//! resolution of elapsed times and float rounding of a 32-bit millisecond count
//! (under 8 µs within the first 100 s of a run). docs/event-format.md says the same.

use cudarc::driver::{result, sys};

use crate::DriverError;
use gpulab_host::clock::now_ns;

pub struct EventClock {
    pub reference: sys::CUevent,
    pub mid_ns: u64,
    pub half_window_ns: u64,
}

impl EventClock {
    /// Records the reference event on `stream` (idle) `tries` times.
    pub fn new(stream: sys::CUstream, tries: u32) -> Result<EventClock, DriverError> {
        let mut best: Option<EventClock> = None;
        for _ in 0..tries.max(1) {
            let ev = result::event::create(sys::CUevent_flags::CU_EVENT_DEFAULT)?;
            let h0 = now_ns();
            // SAFETY: `ev` and `stream` are live and belong to the current context.
            let rec = unsafe { result::event::record(ev, stream) }
                // SAFETY: as above.
                .and_then(|()| unsafe { result::event::synchronize(ev) });
            let h1 = now_ns();
            if let Err(e) = rec {
                // SAFETY: `ev` is ours and unused from here.
                let _ = unsafe { result::event::destroy(ev) };
                return Err(e.into());
            }
            let cand = EventClock {
                reference: ev,
                mid_ns: h0 + (h1 - h0) / 2,
                half_window_ns: (h1 - h0).div_ceil(2),
            };
            match &best {
                Some(b) if b.half_window_ns <= cand.half_window_ns => {
                    // SAFETY: the candidate's event is ours and unused from here.
                    let _ = unsafe { result::event::destroy(cand.reference) };
                }
                _ => {
                    if let Some(b) = best.take() {
                        // SAFETY: the old best's event is ours and unused from here.
                        let _ = unsafe { result::event::destroy(b.reference) };
                    }
                    best = Some(cand);
                }
            }
        }
        best.ok_or_else(|| super::load::driver_error(sys::CUresult::CUDA_ERROR_UNKNOWN))
    }

    /// Host time of a completed event recorded after the reference.
    pub fn to_host(&self, ev: sys::CUevent) -> Result<u64, DriverError> {
        // SAFETY: both events are live, completed and from the same context.
        let ms = unsafe { result::event::elapsed(self.reference, ev) }?;
        Ok(map(self.mid_ns, ms))
    }

    pub fn error_ns(&self) -> u64 {
        self.half_window_ns + 500
    }
}

/// `mid + ms`, in ns, never below zero.
pub fn map(mid_ns: u64, elapsed_ms: f32) -> u64 {
    let off = (f64::from(elapsed_ms) * 1e6).round() as i64;
    mid_ns.saturating_add_signed(off)
}

#[cfg(test)]
mod tests {
    #[test]
    fn elapsed_milliseconds_map_onto_host_nanoseconds() {
        assert_eq!(super::map(1_000_000_000, 2.5), 1_002_500_000);
        assert_eq!(super::map(1_000_000_000, -1.0), 999_000_000);
        assert_eq!(super::map(10, -1.0), 0);
    }
}
