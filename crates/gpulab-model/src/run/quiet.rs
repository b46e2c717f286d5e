//! A watched program's own host memory on a CPU device, where its memory
//! is its RSS: what that grew by between two readings while none of its
//! API's calls ran and no work it queued was outstanding. PoCL allocates
//! only inside the calls and the work they queue, so such a step is the
//! program's own (Hands On OpenCL's matmul wrote its 12 MiB of matrices,
//! allocated before its first OpenCL call, only after its context: 9.4 MiB
//! more resident, named nowhere else).
//!
//! A call is recorded when it returns, so a pair of readings is known quiet
//! only once a later call began after it on the process's one calling
//! thread: every call that could overlap it has arrived by then. A second
//! calling thread or process ends the measuring (its calls may be in flight
//! unseen); what was measured before stays.

use std::collections::VecDeque;

use crate::trace::{Call, CallStatus};

/// Reading pairs kept while they wait for a later call.
const PENDING_KEPT: usize = 4096;
/// Quiet steps kept; past that, every other is merged into the next (the
/// sum at each kept one stays exact).
const STEPS_KEPT: usize = 1 << 14;

#[derive(Debug, Clone, Default)]
pub(super) struct Quiet {
    /// Measuring: a watched program on a CPU device past its first object.
    on: bool,
    /// When its first object was made: readings taken before it (arriving
    /// after it, as the sampler's and the agent's streams interleave) are
    /// the runtime's, not the program's own.
    from_ns: u64,
    /// A second calling thread or process was seen: no more measuring.
    stopped: bool,
    /// The process and thread that made the calls.
    caller: Option<(u32, u64)>,
    /// The latest reading since measuring began: (t_ns, bytes).
    last: Option<(u64, u64)>,
    /// Reading pairs not yet known quiet: (from, to, step).
    pending: VecDeque<(u64, u64, i64)>,
    /// When the queue's state changed, by the calls' ends: (t_ns, work
    /// outstanding after it).
    queued: Vec<(u64, bool)>,
    /// Quiet steps by the reading they end at, summed: (t_ns, total so far).
    steps: Vec<(u64, i64)>,
    /// The spans of the latest calls that arrived: a pair of readings made
    /// after one arrived may still hold it.
    recent: VecDeque<(u64, u64)>,
}

/// Calls' spans kept to set new pairs of readings against.
const RECENT_KEPT: usize = 64;

impl Quiet {
    /// From `t_ns` on (the program's first object made), where its memory
    /// is its RSS in a watch.
    pub(super) fn start(&mut self, t_ns: u64) {
        self.on = !self.stopped;
        self.from_ns = t_ns;
    }

    /// A reading of the program's memory.
    pub(super) fn reading(&mut self, t_ns: u64, bytes: u64) {
        if !self.on || t_ns < self.from_ns {
            return;
        }
        if let Some((t0, b0)) = self.last.filter(|(t0, _)| *t0 < t_ns) {
            let ran = self.recent.iter().any(|(b, e)| *b < t_ns && *e > t0);
            if !ran {
                if self.pending.len() == PENDING_KEPT {
                    self.pending.pop_front();
                }
                self.pending.push_back((t0, t_ns, bytes as i64 - b0 as i64));
            }
        }
        if self.last.is_none_or(|(t0, _)| t_ns > t0) {
            self.last = Some((t_ns, bytes));
        }
    }

    /// A call of the program's arrived (it returned).
    pub(super) fn call(&mut self, c: &Call) {
        match self.caller {
            None => self.caller = Some((c.pid, c.thread)),
            Some(caller) if caller != (c.pid, c.thread) => {
                self.on = false;
                self.stopped = true;
                self.pending.clear();
                return;
            }
            Some(_) => {}
        }
        if !self.on {
            return;
        }
        if self.recent.len() == RECENT_KEPT {
            self.recent.pop_front();
        }
        self.recent.push_back((c.begin_ns, c.end_ns));
        let api = c.api.as_str();
        if api.starts_with("clEnqueue") && c.status == CallStatus::Ok {
            self.queued.push((c.end_ns, true));
        } else if matches!(api, "clFinish" | "clWaitForEvents") && c.status == CallStatus::Ok {
            self.queued.push((c.end_ns, false));
        }
        // Pairs the call ran between go; those before it are decided.
        let mut quiet = Vec::new();
        let queued = &self.queued;
        self.pending.retain(|&(t0, t1, step)| {
            if c.begin_ns < t1 && c.end_ns > t0 {
                return false;
            }
            if t1 <= c.begin_ns {
                if !queued_within(queued, t0, t1) {
                    quiet.push((t1, step));
                }
                return false;
            }
            true
        });
        for (t1, step) in quiet {
            self.confirmed(t1, step);
        }
        // What came before the oldest pair still waiting is no longer asked.
        if let Some(&(t0, _, _)) = self.pending.front() {
            let keep = self
                .queued
                .partition_point(|(t, _)| *t <= t0)
                .saturating_sub(1);
            self.queued.drain(..keep);
        }
    }

    fn confirmed(&mut self, t_ns: u64, step: i64) {
        let total = self.steps.last().map_or(0, |(_, s)| *s) + step;
        if self.steps.len() == STEPS_KEPT {
            let merged: Vec<(u64, i64)> = self.steps.iter().skip(1).step_by(2).copied().collect();
            self.steps = merged;
        }
        self.steps.push((t_ns, total));
    }

    /// The program's own memory grown between calls by a reading at `t_ns`.
    pub(super) fn own_at(&self, t_ns: u64) -> u64 {
        let i = self.steps.partition_point(|(t, _)| *t <= t_ns);
        i.checked_sub(1)
            .map_or(0, |i| u64::try_from(self.steps[i].1).unwrap_or(0))
    }
}

/// Whether work the program queued (`queued`: its changes, in time order)
/// was outstanding at any moment from `from` to `to`.
fn queued_within(queued: &[(u64, bool)], from: u64, to: u64) -> bool {
    let i = queued.partition_point(|(t, _)| *t <= from);
    (i > 0 && queued[i - 1].1)
        || queued[i..]
            .iter()
            .take_while(|(t, _)| *t < to)
            .any(|(_, q)| *q)
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: u64 = 1 << 20;

    fn call(api: &str, thread: u64, begin: u64, end: u64) -> Call {
        Call {
            pid: 7,
            thread,
            api: api.into(),
            begin_ns: begin,
            end_ns: end,
            status: CallStatus::Ok,
            ..Call::default()
        }
    }

    /// matmul on PoCL: its context at 340 ms, its matrices written by 393,
    /// its next call at 5,758.
    #[test]
    fn growth_while_no_call_ran_is_the_programs_once_a_later_call_says_so() {
        let mut q = Quiet::default();
        q.call(&call("clCreateContext", 1, 339, 341));
        q.start(0);
        q.reading(343, 75 * MIB);
        q.reading(393, 84 * MIB);
        q.reading(443, 84 * MIB);
        assert_eq!(q.own_at(443), 0, "not before a later call");
        q.call(&call("clCreateBuffer", 1, 5758, 5761));
        assert_eq!(q.own_at(443), 9 * MIB);
        assert_eq!(q.own_at(390), 0);
    }

    #[test]
    fn a_call_between_the_readings_or_queued_work_makes_them_no_quiet_pair() {
        let mut q = Quiet::default();
        q.call(&call("clCreateContext", 1, 1, 2));
        q.start(0);
        q.reading(10, 10 * MIB);
        q.reading(20, 14 * MIB);
        // A build ran from 15 to 30: the 4 MiB are its.
        q.call(&call("clBuildProgram", 1, 15, 30));
        q.reading(40, 14 * MIB);
        q.call(&call("clEnqueueNDRangeKernel", 1, 41, 42));
        q.reading(50, 18 * MIB);
        q.reading(60, 22 * MIB);
        // The kernel's work was outstanding until the finish.
        q.call(&call("clFinish", 1, 65, 70));
        q.reading(80, 22 * MIB);
        q.reading(90, 23 * MIB);
        q.call(&call("clReleaseKernel", 1, 95, 96));
        assert_eq!(q.own_at(100), MIB, "only the pair after the finish");
    }

    #[test]
    fn a_second_calling_thread_ends_the_measuring() {
        let mut q = Quiet::default();
        q.call(&call("clCreateContext", 1, 1, 2));
        q.start(0);
        q.reading(10, 10 * MIB);
        q.reading(20, 12 * MIB);
        q.call(&call("clCreateBuffer", 1, 25, 26));
        assert_eq!(q.own_at(30), 2 * MIB);
        q.reading(30, 12 * MIB);
        q.reading(40, 20 * MIB);
        q.call(&call("clFinish", 2, 5, 50));
        q.call(&call("clCreateBuffer", 1, 55, 56));
        assert_eq!(q.own_at(60), 2 * MIB, "what came before stays, no more");
    }
}
