//! The run's part that keeps the memory readings: the worker's own around
//! each call and the parent's samples, the figures of every sample, and the
//! latest reading of the process's own memory, until it is composed
//! ([`super::Run::settle`]).

use crate::trace::{MemorySource, Sample};

use super::SampleStats;

/// Readings of a process not yet listed that are kept until it is.
pub(super) const UNLISTED_KEPT: usize = 64;

/// The highest reading of the program's memory an agent took, and around
/// which call: the header's peak when NVML's samples missed it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentPeak {
    pub t_ns: u64,
    pub bytes: u64,
    pub api: String,
    pub side: crate::trace::ReadSide,
}

#[derive(Debug, Clone)]
pub(super) struct Readings {
    /// Memory readings in time order, (t_ns, bytes): the worker's own (around
    /// each call) and the parent's samples until the run ended. Values are
    /// what the run calls "device memory" (the worker's own share where the
    /// source tells it).
    pub(super) readings: Vec<(u64, u64)>,
    /// Device-wide readings the parent took after the worker was gone.
    pub(super) after_exit: Vec<(u64, u64)>,
    /// Figures of every sample.
    pub(super) stats: SampleStats,
    /// Equal readings in a row are kept as the first and the last of them.
    thin: bool,
    /// The latest reading of the process's own memory during the run.
    pub(super) process: Option<(u64, u64)>,
    /// The latest reading of the process's memory, until it is composed.
    pub(super) pending: Option<(u64, u64)>,
    /// A reading listed the process's own memory.
    listed: bool,
    /// The latest NVML readings before the process was first listed.
    unlisted: Vec<u64>,
    /// What the device held beyond the program's own memory at the latest
    /// NVML sample that listed the program with some: what an agent's read
    /// of the whole device is set against.
    pub(super) others: Option<u64>,
    /// What the rest of the device held at NVML's latest reading that
    /// listed the program: taken as `others` once the next says the same.
    pub(super) others_seen: Option<u64>,
    /// NVML's latest list of the device's other processes was empty: what
    /// the rest of the device holds moves only with the driver's own.
    pub(super) alone: bool,
    /// Agents' reads of the device taken before any such sample (the first
    /// `UNLISTED_KEPT`).
    pub(super) unconverted: Vec<crate::trace::DeviceRead>,
    /// Agents' reads taken while other processes were on the device, with
    /// what the rest of the device held at the sample before: set against
    /// it once the next sample says the rest held the same.
    pub(super) unconfirmed: Vec<(crate::trace::DeviceRead, u64)>,
    /// The highest of the agents' reads of the program's memory.
    pub(super) agent_peak: Option<AgentPeak>,
}

impl Readings {
    pub(super) fn new(thin: bool) -> Readings {
        Readings {
            readings: Vec::new(),
            after_exit: Vec::new(),
            stats: SampleStats::default(),
            thin,
            process: None,
            pending: None,
            listed: false,
            unlisted: Vec::new(),
            others: None,
            others_seen: None,
            alone: false,
            unconverted: Vec::new(),
            unconfirmed: Vec::new(),
            agent_peak: None,
        }
    }

    /// Arrivals are nearly in time order (worker readings lag the sampler by a
    /// call at most), so this is an append almost always.
    pub(super) fn insert(&mut self, t: u64, v: u64) {
        if self.readings.last().is_none_or(|(lt, _)| *lt <= t) {
            // In a stretch of equal readings only its first and its last are
            // kept: the last one moves on. Every change stays, at its time.
            let n = self.readings.len();
            if self.thin && n >= 2 && self.readings[n - 1].1 == v && self.readings[n - 2].1 == v {
                self.readings[n - 1].0 = t;
                return;
            }
            self.readings.push((t, v));
        } else {
            let pos = self.readings.partition_point(|(lt, _)| *lt <= t);
            self.readings.insert(pos, (t, v));
        }
    }

    /// A sample that listed no memory of the process's own. NVML lists a
    /// process once it has a context on the device: before the first
    /// listing, it held none of the device's memory, and the latest such
    /// reading is the "before" of its first context (taken only once a
    /// listing shows NVML lists processes here at all). The times of the
    /// latest few are kept until then.
    pub(super) fn not_listed(&mut self, s: &Sample) {
        if s.source == MemorySource::Nvml && !self.listed {
            if self.unlisted.len() == UNLISTED_KEPT {
                self.unlisted.remove(0);
            }
            self.unlisted.push(s.t_ns);
        }
    }

    /// A sample listed the process's own memory: the times of the readings
    /// before, when it held none.
    pub(super) fn listed(&mut self) -> Vec<u64> {
        self.listed = true;
        std::mem::take(&mut self.unlisted)
    }

    /// Samples that arrived before the `end` event but were taken after it
    /// belong to the device after the run, as later ones do. (Calls all end
    /// before it.)
    pub(super) fn split_at_end<'a>(
        &mut self,
        end_ns: u64,
        samples: impl Iterator<Item = &'a Sample>,
    ) {
        let cut = self.readings.partition_point(|(t, _)| *t <= end_ns);
        if cut == self.readings.len() {
            return;
        }
        self.readings.truncate(cut);
        self.after_exit = samples
            .filter(|s| s.t_ns > end_ns)
            .map(|s| (s.t_ns, s.used_bytes))
            .collect();
    }
}
