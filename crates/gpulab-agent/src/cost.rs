//! What observing costs the program: the agent's own time inside the
//! program's calls, timed on one call in [`EVERY`] of each thread (two clock
//! reads per callback on every call would cost a tenth of what they measure),
//! and counted in the process's segment header, where gpulab reads it when the
//! process ends, however it ends ([`gpulab_events::ring::Segment::observed`]).
//!
//! For a CUDA call that is the time in both of CUPTI's callbacks, on entry and
//! on return; what CUPTI itself spends calling them is not in it. For an
//! OpenCL call, the layer's work after the driver returned (the ledger and the
//! record).

use std::cell::Cell;

use crate::clock::now_ns;

/// One call in this many of a thread is timed.
pub const EVERY: u32 = gpulab_events::ring::OBSERVED_EVERY;

thread_local! {
    /// Calls seen since the last timed one, whether this one is timed, and
    /// its agent time so far.
    static STATE: Cell<(u32, bool, u64)> = const { Cell::new((0, false, 0)) };
}

/// A CUDA callback starts; `entry`: CUPTI's entry callback (a new call).
/// Some(now) when this call is timed.
pub fn callback_begins(entry: bool) -> Option<u64> {
    STATE.with(|s| {
        let (mut seen, mut timed, ns) = s.get();
        if entry {
            seen += 1;
            timed = seen >= EVERY;
            if timed {
                seen = 0;
            }
            s.set((seen, timed, 0));
        } else {
            s.set((seen, timed, ns));
        }
        timed.then(now_ns)
    })
}

/// A CUDA callback that began at `t0` returns; after the return callback,
/// the call's time goes to the segment under `launch` or not.
pub fn callback_ends(t0: Option<u64>, entry: bool, launch: bool) {
    let Some(t0) = t0 else {
        return;
    };
    let spent = now_ns().saturating_sub(t0);
    STATE.with(|s| {
        let (seen, timed, ns) = s.get();
        if entry {
            s.set((seen, timed, ns + spent));
        } else {
            s.set((seen, false, 0));
            crate::transport::observed(launch, ns + spent);
        }
    });
}

/// An OpenCL hook's target returned: Some(now) when this call is timed.
pub fn after_target() -> Option<u64> {
    callback_begins(true)
}

/// The hook that began its work at `t0` is done.
pub fn hook_done(t0: Option<u64>) {
    callback_ends(t0, false, false);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_call_in_every_is_timed_across_both_callbacks() {
        let timed: Vec<bool> = (0..3 * EVERY)
            .map(|_| {
                let t0 = callback_begins(true);
                callback_ends(t0, true, false);
                let t1 = callback_begins(false);
                assert_eq!(t0.is_some(), t1.is_some(), "a call is timed whole");
                callback_ends(t1, false, false);
                t0.is_some()
            })
            .collect();
        assert_eq!(timed.iter().filter(|t| **t).count(), 3);
        assert!(timed[EVERY as usize - 1]);
    }
}
