//! What a run keeps of the parent's samples however long it lasts: a window of the
//! most recent ones (the after-exit watch and the end of a run look back a few
//! milliseconds, never more), and the few figures of all of them that reports and
//! panels read, folded as each sample arrives. At 1 kHz a ten-minute run kept
//! 600,000 samples whole: 6 MB a minute in the dashboard.

use std::collections::VecDeque;

use crate::trace::{OtherProcess, Sample};

use super::Recent;

/// Samples a run keeps whole: the last ten seconds at 1 kHz.
pub const SAMPLES_KEPT: usize = 10_000;
/// Changes of the other processes' list kept (it changes when another
/// process starts, stops, or moves its memory).
const OTHERS_KEPT: usize = 1024;

/// Figures of every sample of a run.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SampleStats {
    /// Samples that arrived, from before the worker to after it.
    pub seen: u64,
    /// The first sample (from before the worker started, where NVML allows).
    pub first: Option<Sample>,
    /// The highest device-wide and own-process readings (the process's
    /// with what the device held for its managed memory, where told).
    pub max_used: Option<u64>,
    pub max_process: Option<u64>,
    /// The highest device-wide reading taken while the run ran (between its
    /// start and its end).
    pub max_used_during: Option<u64>,
    /// Samples taken between the run's start (`meta`) and its end, and the first
    /// and last of their times.
    pub during: u64,
    pub during_first: Option<u64>,
    pub during_last: Option<u64>,
    /// The latest sample taken at or before the end of the first call that ran out
    /// of memory, once there is such a call (see `Folds::ran_out`).
    pub at_ran_out: Option<Sample>,
    /// `watch`: the other processes on the device each time their list
    /// changed, oldest first (the latest `OTHERS_KEPT`).
    others: VecDeque<(u64, Vec<OtherProcess>)>,
}

impl SampleStats {
    /// Folds `s` in; `start` and `end` are the run's, when known (samples after
    /// the end describe the device, not the run).
    pub fn add(&mut self, s: &Sample, start: Option<u64>, end: Option<u64>) {
        self.seen += 1;
        if let Some(others) = &s.others {
            if self.others.len() == OTHERS_KEPT {
                self.others.pop_front();
            }
            self.others.push_back((s.t_ns, others.clone()));
        }
        if self.first.is_none() {
            self.first = Some(s.clone());
        }
        self.max_used = self.max_used.max(Some(s.used_bytes));
        self.max_process = self.max_process.max(s.process_bytes);
        if start.is_some_and(|t0| s.t_ns >= t0) && end.is_none_or(|t1| s.t_ns <= t1) {
            self.during += 1;
            self.max_used_during = self.max_used_during.max(Some(s.used_bytes));
            self.during_first = Some(self.during_first.map_or(s.t_ns, |t| t.min(s.t_ns)));
            self.during_last = Some(self.during_last.map_or(s.t_ns, |t| t.max(s.t_ns)));
        }
    }

    /// The end arrived at `end_ns`: samples counted as during the run that were
    /// taken after it (they arrived first) are taken back out, from the window.
    pub fn close(&mut self, end_ns: u64, window: &Recent<Sample>, start: Option<u64>) {
        let late = window
            .iter()
            .filter(|s| s.t_ns > end_ns && start.is_some_and(|t0| s.t_ns >= t0))
            .count() as u64;
        self.during = self.during.saturating_sub(late);
        self.during_last = window
            .iter()
            .map(|s| s.t_ns)
            .filter(|t| *t <= end_ns && start.is_some_and(|t0| *t >= t0))
            .max()
            .or(self.during_last.filter(|t| *t <= end_ns));
    }

    /// The other processes on the device as the latest list by `t_ns` said
    /// them; None when no list was said by then (or it fell out of those kept).
    pub fn others_at(&self, t_ns: u64) -> Option<&[OtherProcess]> {
        self.others
            .iter()
            .rev()
            .find(|(t, _)| *t <= t_ns)
            .map(|(_, o)| o.as_slice())
    }

    /// Keeps the latest sample taken at or before `limit` (the failing call's end).
    pub fn note_ran_out(&mut self, s: &Sample, limit: u64) {
        if s.t_ns <= limit && self.at_ran_out.as_ref().is_none_or(|a| a.t_ns <= s.t_ns) {
            self.at_ran_out = Some(s.clone());
        }
    }
}
