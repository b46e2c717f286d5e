//! An agent's step across a call is the whole device's: `cuMemGetInfo` on
//! each side of it. On a GPU the process shares (another rank of its job,
//! another program), what the others made or let go while the call ran is in
//! it: two ranks of a torchrun job on one H200 creating their 128 streams
//! each at once had their steps name 130 MiB more than the rank held.
//!
//! So on a shared GPU a step is held back until NVML's readings on each side
//! of the call say the rest of the GPU (everything but the calling process)
//! held the same: then the step is the process's own, and measures. Where
//! the rest moved, the step is dropped and the readings measure what the
//! call made, as they do where no agent reads. On a GPU the process has to
//! itself, a step measures at once, as before.

use std::collections::{BTreeMap, VecDeque};

use crate::trace::{Call, GpuReading};

use super::reserves::PAGE;

/// GPU 0's readings kept to decide held-back steps by.
const READINGS_KEPT: usize = 256;
/// Steps held back at once, at most; past it the oldest is dropped.
const HELD_KEPT: usize = 4_096;

/// GPU 0's readings (the sampler's GPU, where the agents' reads are set
/// against NVML's) and the steps held back on them.
#[derive(Debug, Clone, Default)]
pub(super) struct Steps {
    /// (t_ns, memory in use, each listed process's bytes), oldest first.
    readings: VecDeque<(u64, u64, BTreeMap<u32, u64>)>,
    held: VecDeque<(Call, i64)>,
    /// Steps dropped because the rest of the GPU moved while their call ran
    /// (or no reading was left to tell).
    pub(super) dropped: u64,
}

impl Steps {
    /// A reading of GPU 0, in the order it arrived: the held steps it
    /// decides, to be measured (each with its step).
    pub(super) fn reading(&mut self, g: &GpuReading) -> Vec<(Call, i64)> {
        let listed = g
            .processes
            .iter()
            .flatten()
            .filter_map(|p| Some((p.pid, p.bytes?)))
            .collect();
        let at = self.readings.partition_point(|(t, _, _)| *t <= g.t_ns);
        self.readings.insert(at, (g.t_ns, g.used_bytes, listed));
        if self.readings.len() > READINGS_KEPT {
            self.readings.pop_front();
        }
        let mut ready = Vec::new();
        let mut waiting = VecDeque::new();
        for (c, step) in std::mem::take(&mut self.held) {
            match self.stood_still(&c) {
                Some(true) => ready.push((c, step)),
                Some(false) => self.dropped += 1,
                None => waiting.push_back((c, step)),
            }
        }
        self.held = waiting;
        ready
    }

    /// Whether GPU 0 was read at all (a watch with NVML; a lab's stream has
    /// no such readings, and its steps measure at once).
    pub(super) fn read(&self) -> bool {
        !self.readings.is_empty()
    }

    /// Whether process `pid` shares GPU 0 at the latest reading: another
    /// process listed there with memory of its own.
    pub(super) fn shared(&self, pid: u32) -> bool {
        self.readings
            .back()
            .is_some_and(|(_, _, listed)| listed.iter().any(|(p, b)| *p != pid && *b > 0))
    }

    /// Holds a step back until the readings around its call decide it.
    pub(super) fn hold(&mut self, c: &Call, step: i64) {
        if self.held.len() == HELD_KEPT {
            self.held.pop_front();
            self.dropped += 1;
        }
        self.held.push_back((c.clone(), step));
    }

    /// Whether the rest of GPU 0 (all but the call's process) held the same
    /// at the latest reading by the call's start and the first after its
    /// end; None while that reading has not arrived.
    fn stood_still(&self, c: &Call) -> Option<bool> {
        let rest = |(_, used, listed): &(u64, u64, BTreeMap<u32, u64>)| {
            used.saturating_sub(listed.get(&c.pid).copied().unwrap_or(0))
        };
        let after = self.readings.iter().find(|(t, _, _)| *t >= c.end_ns)?;
        let Some(before) = self
            .readings
            .iter()
            .rev()
            .find(|(t, _, _)| *t <= c.begin_ns)
        else {
            return Some(false);
        };
        Some(rest(before).abs_diff(rest(after)) < PAGE)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: u64 = 1 << 20;

    fn reading(t: u64, listed: &[(u32, u64)]) -> GpuReading {
        crate::testing::gpu_reading(t, 0, 8 * MIB, listed)
    }

    fn call(pid: u32, begin: u64, end: u64) -> Call {
        Call {
            pid,
            begin_ns: begin,
            end_ns: end,
            ..Call::default()
        }
    }

    /// Rank 1's 4 MiB stream while rank 2 stood still is rank 1's; while
    /// rank 2 made 6 MiB of its own, it is dropped.
    #[test]
    fn a_step_measures_only_where_the_rest_of_the_gpu_stood_still() {
        let mut s = Steps::default();
        assert!(
            s.reading(&reading(10, &[(1, 530 * MIB), (2, 530 * MIB)]))
                .is_empty()
        );
        assert!(s.shared(1) && s.shared(2));
        s.hold(&call(1, 20, 30), (4 * MIB) as i64);
        let ready = s.reading(&reading(40, &[(1, 534 * MIB), (2, 530 * MIB)]));
        assert_eq!(ready.len(), 1);
        s.hold(&call(1, 50, 60), (4 * MIB) as i64);
        assert!(
            s.reading(&reading(70, &[(1, 538 * MIB), (2, 536 * MIB)]))
                .is_empty()
        );
        assert_eq!(s.dropped, 1);
    }

    /// A reading taken before the call that arrives after it still decides;
    /// a step with no reading after its call waits.
    #[test]
    fn readings_decide_in_time_order_not_arrival_order() {
        let mut s = Steps::default();
        s.reading(&reading(5, &[(1, 530 * MIB), (2, 530 * MIB)]));
        s.hold(&call(1, 20, 30), (4 * MIB) as i64);
        assert!(
            s.reading(&reading(15, &[(1, 530 * MIB), (2, 530 * MIB)]))
                .is_empty()
        );
        assert_eq!(s.held.len(), 1);
        assert_eq!(
            s.reading(&reading(35, &[(1, 534 * MIB), (2, 530 * MIB)]))
                .len(),
            1
        );
    }

    #[test]
    fn a_process_alone_on_the_gpu_does_not_share_it() {
        let mut s = Steps::default();
        s.reading(&reading(5, &[(1, 530 * MIB), (2, 0)]));
        assert!(!s.shared(1));
        assert!(s.shared(2));
    }
}
