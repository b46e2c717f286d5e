//! The run's part that keeps the memory readings: the worker's own around
//! each call and the parent's samples, the figures of every sample, and the
//! latest reading of the process's own memory, until it is composed
//! ([`super::Run::settle`]).

use crate::trace::{DeviceRead, MemorySource, ReadSide, Sample};

use super::reserves::PAGE;

use super::SampleStats;

/// Readings of a process not yet listed that are kept until it is.
const UNLISTED_KEPT: usize = 64;

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
    pub(super) unconverted: Vec<DeviceRead>,
    /// Agents' reads taken while other processes were on the device, with
    /// what the rest of the device held at the sample before: set against
    /// it once the next sample says the rest held the same.
    pub(super) unconfirmed: Vec<(DeviceRead, u64)>,
    /// The highest of the agents' reads of the program's memory.
    pub(super) agent_peak: Option<AgentPeak>,
    /// A watched program's resident memory (RSS) at the latest reading
    /// before any agent attached, that is before its first call of the API
    /// (an agent attaches when the program first loads the API's library):
    /// (t_ns, bytes). What the process held of its own before the API.
    pub(super) before_api: Option<(u64, u64)>,
    /// When the first agent attached: readings before it are "before the
    /// API", whenever they arrive.
    pub(super) api_from: Option<u64>,
    /// The program's managed pages on the device at its latest reading
    /// (t_ns, bytes), None where it held managed memory and they could not
    /// be told ([`super::Run::managed_on_device`]).
    pub(super) managed: (u64, Option<u64>),
    /// The program made managed memory (from then on the rest of the device
    /// is no longer taken from NVML's readings, nor agents' reads used).
    pub(super) made_managed: bool,
    /// The most the device held as an agent read it, every process's:
    /// around a call that moves much memory, or inside a refused allocation
    /// (its free memory then, against the device's total the reads say).
    pub(super) max_read_used: Option<u64>,
    /// The device's total memory as the agents' reads say it (the driver's
    /// own figure, which leaves out what it reserves).
    pub(super) read_total: Option<u64>,
    /// The most the program's objects of a size held at once, and when
    /// (their making calls' sizes): a floor for its memory when no reading
    /// caught that moment.
    pub(super) max_objects: Option<(u64, u64)>,
    /// Agents' reads of their process's resident memory before a call, each
    /// waiting for the read after it: (pid, call, t_ns, bytes), the latest
    /// few.
    resident_before: Vec<(u32, String, u64, u64)>,
    /// An agent's read of its process's resident memory right before the
    /// call that made the program's first object: (t_ns, bytes).
    pub(super) before_first_object: Option<(u64, u64)>,
}

/// Resident reads before a call kept waiting for the read after it.
const RESIDENT_KEPT: usize = 64;

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
            before_api: None,
            api_from: None,
            managed: (0, Some(0)),
            made_managed: false,
            max_read_used: None,
            read_total: None,
            max_objects: None,
            resident_before: Vec::new(),
            before_first_object: None,
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

    /// The latest reading taken before `t_ns`.
    pub(super) fn latest_before(&self, t_ns: u64) -> Option<(u64, u64)> {
        let n = self.readings.partition_point(|(t, _)| *t < t_ns);
        n.checked_sub(1).map(|i| self.readings[i])
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

    /// An agent's read of the device: the rest of the device to set it
    /// against now, or None while that waits on NVML's readings. Before any
    /// says what the rest held, the read waits for one; with other
    /// processes on the device, what they held may have moved between that
    /// reading and the read, so it waits for the next, and counts only if
    /// the rest held the same then (two tests on one GPU once made a
    /// reserve of another program's 512 MiB).
    pub(super) fn device_read(&mut self, r: &DeviceRead) -> Option<u64> {
        match self.others {
            Some(others) if self.alone => return Some(others),
            Some(others) if self.unconfirmed.len() < UNLISTED_KEPT => {
                self.unconfirmed.push((r.clone(), others));
            }
            None if self.unconverted.len() < UNLISTED_KEPT => self.unconverted.push(r.clone()),
            _ => {}
        }
        None
    }

    /// An NVML reading of the device (`used`) that listed the program's
    /// memory (`own`): what the rest of the device held is known once two
    /// readings in a row say the same. NVML reads the two figures apart,
    /// and while a context is being made they disagree (a sample read 118
    /// MiB in use on the device and 543 MiB of it the program's); settled,
    /// the rest is the driver's own and moves only with other processes.
    /// Returns the agents' reads that were waiting for it, each with the
    /// rest it is set against.
    pub(super) fn others_seen(&mut self, used: u64, own: u64) -> Vec<(DeviceRead, u64)> {
        if own == 0 || used < own {
            return Vec::new();
        }
        let rest = used - own;
        let before = self.others_seen.replace(rest);
        if before.is_none_or(|b| b.abs_diff(rest) > PAGE / 32) {
            return Vec::new();
        }
        self.others = Some(rest);
        let mut ready: Vec<(DeviceRead, u64)> = std::mem::take(&mut self.unconfirmed)
            .into_iter()
            .filter(|(_, before)| before.abs_diff(rest) <= PAGE)
            .collect();
        for r in std::mem::take(&mut self.unconverted) {
            if self.alone {
                ready.push((r, rest));
            } else {
                self.unconfirmed.push((r, rest));
            }
        }
        ready
    }

    /// The program's memory an agent's read says, the rest of the device
    /// (`others`) taken out; kept as the agents' peak when highest.
    pub(super) fn agent_read(&mut self, r: &DeviceRead, others: u64) -> u64 {
        let bytes = r.used_bytes().saturating_sub(others);
        if self.agent_peak.as_ref().is_none_or(|p| bytes > p.bytes) {
            self.agent_peak = Some(AgentPeak {
                t_ns: r.t_ns,
                bytes,
                api: r.api.clone(),
                side: r.side,
            });
        }
        bytes
    }

    /// An agent's read of its process's resident memory (`bytes`): one
    /// before a call waits; one after it returns the read before the same
    /// call of the same process, (t_ns, bytes).
    pub(super) fn resident_side(&mut self, r: &DeviceRead, bytes: u64) -> Option<(u64, u64)> {
        let same = |w: &(u32, String, u64, u64)| w.0 == r.pid && w.1 == r.api;
        match r.side {
            ReadSide::Before => {
                self.resident_before.retain(|w| !same(w));
                if self.resident_before.len() == RESIDENT_KEPT {
                    self.resident_before.remove(0);
                }
                self.resident_before
                    .push((r.pid, r.api.clone(), r.t_ns, bytes));
                None
            }
            ReadSide::After => {
                let at = self.resident_before.iter().position(same)?;
                let (_, _, t, before) = self.resident_before.remove(at);
                (t <= r.t_ns).then_some((t, before))
            }
        }
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
