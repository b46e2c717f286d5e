//! The exit report of a watched program (`watch`, or `report` of a watch
//! recording), computed from its event stream alone:
//! which objects it left alive and who made them, which it released that the
//! driver still held, how long released objects outlived their release, and
//! whether every process's agent reported completely.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

use serde::Serialize;

use crate::run::owners::Owner;
use crate::run::{ObjState, Run};
use crate::text::fit;
use crate::trace::{AgentState, EndStatus, Frame, MemorySource, NoteLevel, ObjKind};
use crate::units::mib;

pub use self::observer::ObserverCost;
pub use super::format::short_id;
use super::format::{FRAME_WIDTH, Table, md_code};
use super::frameworks::{AllocatorReport, FrameworkRefusal};
use super::holders::HoldersReport;
use super::out_of_memory::FirstToRunOut;
pub use super::out_of_memory::{KnownShares, OtherProcessReport, OutOfMemory, WatchRanOut};
use super::ranks::{GpuReport, RankReport};

mod findings;
mod misuse;
mod observer;
mod render;
pub mod suppress;
#[cfg(test)]
mod tests;

use findings::{
    alive_groups, ended, held, held_groups, kinds, notes_and_warnings, outlived, processes,
};
pub use misuse::MisuseRow;

#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct WatchReport {
    /// Where, when and by which gpulab the program was watched.
    pub recorded: super::Provenance,
    pub command: Vec<String>,
    pub pid: u32,
    /// How the program ended (`exited with status 3`), and its exit code when it
    /// exited rather than died.
    pub ended: String,
    pub exit_code: Option<i32>,
    /// How long it ran, ms.
    pub duration_ms: f64,
    pub processes: Vec<ProcessReport>,
    /// What observing cost the program, as its agents timed themselves;
    /// absent in streams written before they did.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub observer: Option<ObserverCost>,
    pub calls: usize,
    pub failed_calls: usize,
    pub kinds: Vec<KindReport>,
    /// Objects the program never released, grouped by kind and the call that made them.
    pub alive_at_exit: Vec<AliveGroup>,
    /// Objects the program released whose deletion by the driver never came.
    pub held_by_driver: Vec<HeldObject>,
    /// `held_by_driver` grouped by kind, what pins them and what made them:
    /// a loop's worth of pinned contexts in one line, with their bytes.
    pub held_by_driver_groups: Vec<HeldGroup>,
    /// Objects the driver deleted some time after the program released them.
    pub outlived_release: Vec<Outlived>,
    /// Frees of device memory that succeeded and named no allocation an
    /// agent saw made: memory made by no call gpulab watches (a CUDA
    /// graph's memory nodes allocate at the graph's launch), and freed, so
    /// in no list here. Absent when none.
    #[serde(default, skip_serializing_if = "FreedUnseen::none")]
    pub freed_unseen: FreedUnseen,
    /// The highest reading of the program's own memory (NVML's figure for its
    /// process and what the device held for its managed memory, or its RSS;
    /// device-wide when NVML does not list its process), or an agent's read
    /// that was higher (`peak_read`), or what its objects held at once when
    /// that was higher still (`peak_objects_at_ms`).
    pub peak_memory_bytes: Option<u64>,
    /// Where the peak is an agent's read of the device around a call NVML's
    /// samples fell beside (a context made and destroyed between two of
    /// them): the call, the side of it, and when. Absent where NVML's
    /// highest reading is the peak.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub peak_read: Option<PeakRead>,
    /// Where the peak is what the program's objects of a size held at once
    /// (their making calls' sizes), more than any reading caught (a program
    /// that allocated and ran out between two samples): when, in ms. The
    /// program's memory was at least that. Absent otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub peak_objects_at_ms: Option<f64>,
    /// The most device memory in use while the program ran above what was in
    /// use before it started (every process on the GPU counts): NVML's device
    /// figure and the agents' reads ([`Run::device_growth`]).
    pub peak_device_growth_bytes: Option<u64>,
    /// NVML: device memory in use before the program started.
    pub device_baseline_bytes: Option<u64>,
    pub memory_source: MemorySource,
    /// Who held the program's own memory at its peak and at exit, share by
    /// share; None without a reading of its own memory.
    pub holders: Option<HoldersReport>,
    /// The first call the driver refused for want of memory, and who held the
    /// memory then; None when none was refused.
    pub ran_out: Option<WatchRanOut>,
    /// The first allocation a framework in the program refused (PyTorch's
    /// out-of-memory observer), with the allocator's figures before it.
    pub framework_refused: Option<FrameworkRefusal>,
    /// What each framework's allocator said of its memory (`gpulab watch`'s
    /// Python startup hook): at exit and at its highest.
    pub frameworks: Vec<AllocatorReport>,
    /// Each process of a program of many (a job's ranks, a fork per GPU):
    /// its bytes on each GPU and what its objects held, at its peak and when
    /// memory ran out. Empty for one process on one GPU outside a job.
    pub ranks: Vec<RankReport>,
    /// Every NVIDIA GPU of the host, as the watch read it.
    pub gpus: Vec<GpuReport>,
    /// Calls that named an object the program had already released (a use
    /// after release, a second release), oldest first: the first
    /// [`crate::run::MISUSES_KEPT`] of them.
    pub misuse: Vec<MisuseRow>,
    /// How many such calls there were in all.
    pub misuse_count: u64,
    /// What gpulab did to watch the program (a loader preloaded, say).
    pub notes: Vec<String>,
    pub warnings: Vec<String>,
}

/// Frees of memory no agent saw made.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct FreedUnseen {
    /// How many (`cuMemFree`, `cuMemFreeAsync`).
    pub count: u64,
    /// The program used graph memory (the device held some for its graphs at
    /// a reading): the likely maker.
    pub graph_memory: bool,
}

impl FreedUnseen {
    fn none(&self) -> bool {
        self.count == 0
    }

    /// What the text report says of them, if anything.
    pub fn line(&self) -> Option<String> {
        if self.none() {
            return None;
        }
        let maker = if self.graph_memory {
            "its CUDA graphs' memory nodes, which allocate at the graph's launch (the program \
             used graph memory); compute-sanitizer's leak check counts graph memory freed with \
             cudaFree as leaked, where it was freed"
        } else {
            "a call gpulab does not watch"
        };
        Some(format!(
            "freed, never seen made: {} allocation(s) the program freed (cuMemFree succeeded) \
             that no call an agent watches made, so they are in no list here; made by {maker}",
            self.count
        ))
    }
}

#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct ProcessReport {
    pub pid: u32,
    pub parent_pid: u32,
    pub exe: String,
    /// The APIs the agent watched in it (`opencl`, `cuda`).
    pub apis: Vec<String>,
    /// APIs it could not watch there, and why.
    pub unwatched: Vec<String>,
    /// Tools inside it that watching made worse off, and how.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub conflicts: Vec<String>,
    /// Records that arrived from the process, counted by gpulab as it read
    /// them, and those the process dropped, from its segment's counts; None
    /// while gpulab did not see the process end (still running when gpulab
    /// stopped reading).
    pub records: Option<u64>,
    /// Call and span records it had no room for (object records are never dropped).
    pub dropped: Option<u64>,
    /// Reference changes of one object merged into its next while gpulab was behind.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub coalesced: Option<u64>,
    /// The signal it died of, when it died of one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub signal: Option<i32>,
    /// Records that never arrived: held by the process for want of room when
    /// it ended.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lost: Option<u64>,
    /// Records a thread was writing when the process ended: the calls they
    /// record had not returned to the program.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cut: Option<u64>,
    pub received: u64,
    /// The agent's own time inside the calls it timed, as the process's
    /// segment counted it (summed over its images).
    #[serde(skip)]
    pub observed: Option<crate::trace::Observed>,
}

impl ProcessReport {
    /// Did every record it sent arrive, its last one included? When not, what
    /// the report says of its objects is uncertain.
    pub fn complete(&self) -> bool {
        self.records == Some(self.received)
    }
}

#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct KindReport {
    pub kind: ObjKind,
    pub created: u64,
    pub released: u64,
    pub alive_at_exit: u64,
    pub alive_bytes: u64,
    /// The most alive at one time while the program ran.
    pub peak_alive: u64,
}

#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct AliveGroup {
    pub kind: ObjKind,
    pub count: u64,
    pub bytes: u64,
    pub created_by: String,
    /// Who called the driver for them, from the making call's calling frame:
    /// `program`, `pytorch`, `nccl`, `cublas`, `cudnn`, `cuda_library`, `xla`,
    /// `cupy`, or `unknown` (no stack taken).
    pub owner: String,
    /// Made by a framework's allocator that reported its own figures: its
    /// cache and the tensors alive at exit, which the exit returns to the
    /// driver; not the program's leaks.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub kept_by_allocator: bool,
    /// A context, module or stream the CUDA runtime (its calling frame is
    /// the runtime's, static or shared) or a library that called the driver
    /// (NCCL, cuBLAS, PyTorch, XLA) made for itself: the primary context it
    /// retains, the modules of its kernels, a framework's pool of streams;
    /// or anything a CUDA library (cuBLAS, cuDNN, cuFFT, ...) made, which
    /// its handles keep (their workspaces): held for the process's life and
    /// given back at exit; not the program's leaks.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub kept_by_runtime: bool,
    pub pid: u32,
    pub thread: u64,
    /// Their process's last records never arrived: a release may be missing.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub uncertain: bool,
    /// Where the program made them (`watch --backtrace`): its native stack at
    /// the creating call, innermost first.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub backtrace: Vec<Frame>,
}

/// Which part of "alive at exit" a group is said in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AliveSection {
    /// Never released by the program: its leaks.
    Leaked,
    Allocator,
    Runtime,
    /// Its process's last records never arrived.
    Uncertain,
}

impl AliveGroup {
    pub fn section(&self) -> AliveSection {
        if self.uncertain {
            AliveSection::Uncertain
        } else if self.kept_by_allocator {
            AliveSection::Allocator
        } else if self.kept_by_runtime {
            AliveSection::Runtime
        } else {
            AliveSection::Leaked
        }
    }
}

#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct HeldObject {
    pub id: u64,
    pub kind: ObjKind,
    pub bytes: u64,
    pub released_ms: f64,
    /// A context, module, queue or stream: its measured reserve (with the
    /// objects it shares it with, made with no reading between them).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reserve: Option<HeldReserve>,
    /// Live objects that refer to it, directly or through others (`event 3 -> kernel 2`).
    pub pinned_by: Vec<String>,
    /// Its process's last records never arrived: the deletion may be missing.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub uncertain: bool,
}

/// Objects the driver holds after their release that are alike: one kind,
/// pinned by the same chain of kinds, made by the same call from one place.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct HeldGroup {
    pub kind: ObjKind,
    pub count: u64,
    /// Their own bytes and their measured reserves, together (a reserve
    /// shared with a queue and a module counted once, with the object named).
    pub bytes: u64,
    /// The smallest and largest measured reserve of one of them; absent when
    /// none was measured.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reserve_min_bytes: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reserve_max_bytes: Option<u64>,
    /// How many of them had no reserve measured.
    pub unmeasured: u64,
    /// What pins each, as kinds (`event -> queue`); empty when nothing the
    /// program holds refers to them.
    pub pinned_by: String,
    /// The call that made them, where the stream names one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub created_by: Option<String>,
    /// Its calling frame, where a stack was taken.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub made_at: Option<Frame>,
}

impl HeldGroup {
    /// `6 contexts, 3044.00 MiB with their reserves (440.00 to 532.00 MiB
    /// each), pinned by event -> queue, made by clCreateContext at ...`.
    pub fn line(&self) -> String {
        let each = match (self.reserve_min_bytes, self.reserve_max_bytes) {
            (Some(lo), Some(hi)) if self.count > 1 && lo != hi => {
                format!(" ({:.2} to {:.2} MiB each)", mib(lo), mib(hi))
            }
            (Some(lo), Some(_)) if self.count > 1 => format!(" ({:.2} MiB each)", mib(lo)),
            _ => String::new(),
        };
        let unmeasured = match self.unmeasured {
            0 => String::new(),
            n => format!(", {n} of them with no reserve measured"),
        };
        let pins = if self.pinned_by.is_empty() {
            "nothing the program holds refers to them".to_string()
        } else {
            format!("pinned by {}", self.pinned_by)
        };
        let made = match (&self.created_by, &self.made_at) {
            (Some(api), Some(f)) => {
                format!(", made by {api} at {}", fit(&f.describe(), FRAME_WIDTH))
            }
            (Some(api), None) => format!(", made by {api}"),
            (None, Some(f)) => format!(", made at {}", fit(&f.describe(), FRAME_WIDTH)),
            (None, None) => String::new(),
        };
        format!(
            "{}, {:.2} MiB with their reserves{each}{unmeasured}, {pins}{made}",
            self.what(),
            mib(self.bytes),
        )
    }

    /// `6 contexts`.
    pub fn what(&self) -> String {
        format!("{} {}", self.count, self.kind.counted(self.count))
    }
}

#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct HeldReserve {
    pub bytes: u64,
    /// The other objects of the measurement (`queue #2`), if any.
    pub with: Vec<String>,
}

/// Chains of a held object's `pinned_by` listed in full; past that, the
/// rest is counted by shape.
const PINS_SHOWN: usize = 3;

impl HeldObject {
    /// What pins it, in one line of bounded length: up to [`PINS_SHOWN`]
    /// chains in full; more are summed by their shape (the kinds along the
    /// chain), the commonest first: `400 chains (398 event -> queue, 2
    /// kernel): event #12 -> queue #3, event #13 -> queue #3, event #14 ->
    /// queue #3, … and 397 more`. Empty when nothing pins it.
    pub fn pins_text(&self) -> String {
        let n = self.pinned_by.len();
        if n <= PINS_SHOWN {
            return self.pinned_by.join(", ");
        }
        let mut shapes: Vec<(String, usize)> = Vec::new();
        for chain in &self.pinned_by {
            let shape = chain
                .split(" -> ")
                .map(|link| link.split(' ').next().unwrap_or(link))
                .collect::<Vec<_>>()
                .join(" -> ");
            match shapes.iter_mut().find(|(s, _)| *s == shape) {
                Some((_, c)) => *c += 1,
                None => shapes.push((shape, 1)),
            }
        }
        shapes.sort_by_key(|s| std::cmp::Reverse(s.1));
        let by_shape = shapes
            .iter()
            .map(|(s, c)| format!("{c} {s}"))
            .collect::<Vec<_>>()
            .join(", ");
        format!(
            "{n} chains ({by_shape}): {}, … and {} more",
            self.pinned_by[..PINS_SHOWN].join(", "),
            n - PINS_SHOWN
        )
    }

    /// `buffer #31 (64.00 MiB), released at 12.5 ms`; a context says its
    /// measured reserve: `context #1 (reserve 532.00 MiB, with queue #2),
    /// released at 1.2 ms`.
    pub fn what(&self) -> String {
        let size = match &self.reserve {
            Some(r) if r.with.is_empty() => format!("reserve {:.2} MiB", mib(r.bytes)),
            Some(r) => format!(
                "reserve {:.2} MiB, with {}",
                mib(r.bytes),
                r.with.join(" + ")
            ),
            None => format!("{:.2} MiB", mib(self.bytes)),
        };
        format!(
            "{} {} ({size}), released at {:.1} ms",
            self.kind.as_str(),
            short_id(self.id),
            self.released_ms
        )
    }
}

/// An agent's read of the device taken as the program's memory: the device's
/// free memory (`cuMemGetInfo`) around `api`, less what the rest of the
/// device held at NVML's latest sample that listed the program.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct PeakRead {
    pub api: String,
    /// `before` or `after` the call.
    pub side: String,
    pub at_ms: f64,
}

impl PeakRead {
    /// The agent's peak, when it is above NVML's highest reading.
    fn of(run: &Run, nvml_peak: Option<u64>, start_ns: u64) -> Option<(u64, PeakRead)> {
        let p = run
            .agent_peak()
            .filter(|p| nvml_peak.is_none_or(|n| p.bytes > n))?;
        Some((
            p.bytes,
            PeakRead {
                api: p.api.clone(),
                side: p.side.as_str().into(),
                at_ms: p.t_ns.saturating_sub(start_ns) as f64 / 1e6,
            },
        ))
    }
}

#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Outlived {
    pub kind: ObjKind,
    pub count: u64,
    pub median_ms: f64,
    pub max_ms: f64,
}

impl WatchReport {
    /// The report of `run` as it stands. Reads the run's live index (kept as
    /// each object event arrives), so it costs what the findings hold, not a
    /// walk of every object: the dashboard builds it once per change of its run
    /// (`RunState::watch_report`).
    pub fn from_run(run: &Run) -> WatchReport {
        let meta = run.meta();
        let start = meta.map_or(0, |m| m.t_ns);
        let (misuse_rows, misuse_count) = misuse::rows(run, start);
        let watch = meta.and_then(|m| m.watch.as_ref());
        let processes = processes(run);
        let incomplete: BTreeSet<u32> = processes
            .iter()
            .filter(|p| !p.complete())
            .map(|p| p.pid)
            .collect();
        let (notes, warnings) = notes_and_warnings(run, &processes);
        let (ended, exit_code) = ended(run);
        let end_ns = run.end().map_or(start, |e| e.t_ns);
        let pins = findings::Pins::of(run.ledger(), &run.live_index().referring);
        let held_objects = held(run, &incomplete, &pins);
        // Spread over GPUs, the sampler's figures are GPU 0's alone: they
        // give way to each GPU's and each process's.
        let spread = run.ranks().spread();
        let one_gpu = |v: Option<u64>| v.filter(|_| !spread);
        let nvml_peak = run
            .sample_stats()
            .max_process
            .or(run.sample_stats().max_used);
        let peak_read = PeakRead::of(run, nvml_peak, start);
        let measured_peak = peak_read.as_ref().map(|(b, _)| *b).or(nvml_peak);
        // Only where the program's memory is the device's: on a CPU device
        // its objects' sizes are host memory a buffer takes when first used.
        let peak_objects = run
            .objects_peak()
            .filter(|(_, b)| measured_peak.is_none_or(|p| *b > p))
            .filter(|_| {
                run.meta()
                    .is_some_and(|m| m.device.memory_source == MemorySource::Nvml)
            });
        WatchReport {
            recorded: super::Provenance::of(run),
            command: watch.map(|w| w.command.clone()).unwrap_or_default(),
            pid: watch.map_or(0, |w| w.pid),
            ended,
            exit_code,
            duration_ms: end_ns.saturating_sub(start) as f64 / 1e6,
            calls: run.calls().seen() as usize,
            failed_calls: run.folds().failed_calls as usize,
            kinds: kinds(run),
            alive_at_exit: alive_groups(run, &incomplete),
            held_by_driver_groups: held_groups(run, &held_objects, &pins),
            held_by_driver: held_objects,
            outlived_release: outlived(run),
            freed_unseen: FreedUnseen {
                count: run.folds().freed_unseen,
                graph_memory: run.folds().graph_memory_seen,
            },
            misuse: misuse_rows,
            misuse_count,
            observer: ObserverCost::of(run, &processes),
            processes,
            peak_memory_bytes: one_gpu(peak_objects.map(|(_, b)| b).or(measured_peak)),
            peak_read: peak_read
                .filter(|_| !spread && peak_objects.is_none())
                .map(|(_, r)| r),
            peak_objects_at_ms: peak_objects
                .filter(|_| !spread)
                .map(|(t, _)| t.saturating_sub(start) as f64 / 1e6),
            peak_device_growth_bytes: one_gpu(run.device_growth()),
            device_baseline_bytes: one_gpu(run.baseline()),
            memory_source: meta.map_or(MemorySource::Unavailable, |m| m.device.memory_source),
            holders: HoldersReport::of(run).filter(|_| !spread),
            ran_out: WatchRanOut::of(run).map(|r| if spread { r.on_its_gpu(run) } else { r }),
            framework_refused: super::frameworks::refusal(run),
            frameworks: super::frameworks::allocators(run),
            ranks: super::ranks::ranks(run),
            gpus: super::ranks::gpus(run),
            notes,
            warnings,
        }
    }

    /// Objects the program never released, and objects the driver still held.
    pub fn leaked(&self) -> u64 {
        self.kinds.iter().map(|k| k.alive_at_exit).sum()
    }
}

impl WatchReport {
    /// What `watch --oom FILE` writes.
    pub fn out_of_memory(&self) -> OutOfMemory<'_> {
        OutOfMemory {
            recorded: &self.recorded,
            command: &self.command,
            pid: self.pid,
            ran_out: self.ran_out.as_ref(),
            framework_refused: self.framework_refused.as_ref(),
            first_to_run_out: self
                .ranks
                .iter()
                .find(|r| r.ran_out.as_ref().is_some_and(|o| o.first))
                .map(|r| FirstToRunOut {
                    pid: r.pid,
                    rank: r.rank.as_ref().map(|k| k.rank),
                }),
            ranks: if self.ranks.iter().any(|r| r.ran_out.is_some()) {
                self.ranks.iter().collect()
            } else {
                Vec::new()
            },
        }
    }
}
