//! The event stream: one JSON object per line, `{"type": …, "data": …}`. Live runs,
//! recordings and replays all speak it; `docs/event-format.md` documents it.
//!
//! Events carry no lab-only assumptions: a script line is optional, pid and thread
//! are always there, so an agent inside someone else's program can emit them too.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::vocab::{BackendKind, DeviceKind, Framework, MemorySource, ObjKind};

/// Bumped when a reader of the old format would misread the new one.
pub const FORMAT_VERSION: u32 = 1;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", content = "data", rename_all = "snake_case")]
pub enum Event {
    /// First event of every stream: who ran what, where.
    Meta(Box<Meta>),
    /// A lab's call the worker is about to make. A call that never returns is
    /// the last one a `calling` named and no `call` answered (`seq`).
    Calling(Calling),
    /// One API call, with the device memory the worker read right before and after it.
    Call(Call),
    /// A lifetime change of an API object, as the ledger sees it.
    Object(ObjectEvent),
    /// Work the device did (a kernel, a copy), in host time.
    DeviceSpan(DeviceSpan),
    /// A tagged `repeat` block finished (or was stopped by the budget).
    Block(Block),
    /// A memory reading by the parent's sampler.
    Sample(Sample),
    /// Something the reader should know: a fallback taken, a budget reached.
    Note(Note),
    /// A claim's verdict, computed from this stream by the parent.
    Claim(ClaimVerdict),
    /// The worker is done (or was stopped, or died).
    End(End),
    /// An agent inside a watched program attached or detached (`gpulab watch`).
    Agent(AgentEvent),
    /// A call stack in a watched program (`gpulab watch --backtrace`), sent once;
    /// objects made from it name its id (it may arrive after the first of them).
    Stack(Stack),
    /// How busy the host's CPUs were during the run, as the parent read it.
    Load(HostLoad),
    /// A framework's own figures for the device memory it holds, in a watched
    /// Python program (`gpulab watch`'s startup hook reads them through the
    /// agent), or an allocation it refused.
    Framework(FrameworkEvent),
    /// `gpulab watch`: one GPU of the host as NVML read it, with the watched
    /// program's processes on it; sent the first time and when either changes.
    GpuReading(GpuReading),
    /// `gpulab watch`, CUDA: the device's memory as an agent read it around a
    /// call that moves much of it (a context made or destroyed, code loaded).
    DeviceRead(DeviceRead),
    /// What someone predicted a claim would show, before the run (class mode,
    /// `gpulab run --predict`): kept beside the verdict, never used to reach it.
    Prediction(Prediction),
    /// A range someone predicted a measured value would fall in (`gpulab run
    /// --predict 'host_ms(wait)=150..250'`), before the run: kept beside the
    /// value measured, never used to reach a verdict.
    Estimate(Estimate),
    /// `gpulab watch`: a call of the program named an object the program had
    /// already released (as compute-sanitizer's API checks and CLIntercept's
    /// error checks find them).
    Misuse(Misuse),
}

impl Event {
    /// When it happened (CLOCK_MONOTONIC ns): the start of a call, span or block.
    /// None for a claim's verdict, which is judged after the run.
    pub fn t_ns(&self) -> Option<u64> {
        Some(match self {
            Event::Meta(m) => m.t_ns,
            Event::Calling(c) => c.t_ns,
            Event::Call(c) => c.begin_ns,
            Event::Object(o) => o.t_ns,
            Event::DeviceSpan(s) => s.queued_ns.min(s.begin_ns),
            Event::Block(b) => b.begin_ns,
            Event::Sample(s) => s.t_ns,
            Event::Note(n) => n.t_ns,
            Event::Claim(_) => return None,
            Event::Prediction(p) => p.t_ns,
            Event::Estimate(e) => e.t_ns,
            Event::End(e) => e.t_ns,
            Event::Agent(a) => a.t_ns,
            Event::Stack(s) => s.t_ns,
            Event::Load(l) => l.t_ns,
            Event::Framework(f) => f.t_ns,
            Event::GpuReading(g) => g.t_ns,
            Event::DeviceRead(r) => r.t_ns,
            Event::Misuse(m) => m.t_ns,
        })
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Meta {
    pub format_version: u32,
    pub gpulab_version: String,
    pub t_ns: u64,
    pub pid: u32,
    pub hostname: String,
    pub backend: BackendKind,
    pub platform: String,
    pub device: DeviceMeta,
    pub lab: Option<LabMeta>,
    /// Memory in use on the device (or the worker's RSS) before the first line.
    pub baseline_bytes: Option<u64>,
    /// The run stops allocating before it would go past baseline + budget.
    pub budget_bytes: Option<u64>,
    /// Wall-clock UTC time the run started, RFC 3339 (`2026-11-22T14:03:07Z`).
    /// Absent in streams written before it existed: their date is unknown.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recorded_at: Option<String>,
    /// Present when the stream watched a program (`gpulab watch -- CMD`) instead of
    /// running a lab.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub watch: Option<WatchMeta>,
    /// A lab's worker: the kinds of object whose destruction the driver was
    /// asked to report (destructor callbacks). Absent in streams written before
    /// it existed, whose workers asked for buffers and contexts alike.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub destruction: Option<Vec<ObjKind>>,
    /// `gpulab watch`: every NVIDIA GPU of the host, in NVML's order, which
    /// the `gpu_reading` events name by position. Empty without NVML, and in
    /// streams written before it existed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub gpus: Vec<GpuMeta>,
}

/// A GPU `gpulab watch` reads, as NVML names it before the program starts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GpuMeta {
    /// NVML's index of it (not the program's CUDA ordinal, which
    /// `CUDA_VISIBLE_DEVICES` renumbers).
    pub index: u32,
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pci_bus_id: Option<String>,
    pub total_bytes: u64,
    /// Memory in use on it, by every process, before the program started.
    pub baseline_bytes: u64,
}

/// One GPU's memory while a watched program runs (NVML).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GpuReading {
    /// When it was read: right after the process list, when one was read.
    pub t_ns: u64,
    /// Its position in `meta.gpus`.
    pub gpu: u32,
    /// In use by every process.
    pub used_bytes: u64,
    /// The watched program's processes NVML lists on it, each with its bytes
    /// (`bytes` absent: NVML did not say them); None where NVML cannot list
    /// processes (some vGPU and MIG setups).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub processes: Option<Vec<ProcessBytes>>,
}

/// The device's memory as an agent read it (`cuMemGetInfo` in the calling
/// thread's context) right after a call made a context or loaded code, or
/// right before one destroys or resets a context: the moments a program's
/// memory moves by hundreds of MiB with no sample near (a context takes
/// 500 MiB in a call of 100 ms, and a short program destroys it 3 ms later).
/// The device's figure, every process's: the reader sets it beside NVML's
/// readings of the program's share.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DeviceRead {
    /// When it was read: after the call returned, or before it was entered.
    pub t_ns: u64,
    pub pid: u32,
    /// The call it was read around (`cuCtxCreate`), and on which side of it.
    pub api: String,
    pub side: ReadSide,
    pub free_bytes: u64,
    pub total_bytes: u64,
    /// Present for a read of the process's own resident host memory
    /// instead (`/proc/self/statm`: an OpenCL agent's, around the calls that
    /// make a context or a queue or build code), which on a CPU device
    /// (PoCL) is the memory the program's device objects take; the free and
    /// total figures are then 0. The reader sets it beside the sampler's
    /// readings of the same memory only where that is the watch's source.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resident_bytes: Option<u64>,
    /// On the after side of a resident read across a wait for a kernel's
    /// first run: the bytes of the buffers those kernels were the first to
    /// use (no transfer from the host had filled them), whose pages they may
    /// have touched meanwhile. Already the buffers' own, so no part of what
    /// the wait's step says the device compiled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_touched_bytes: Option<u64>,
}

/// Which side of its call a [`DeviceRead`] was taken on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ReadSide {
    Before,
    After,
}

impl ReadSide {
    pub fn as_str(self) -> &'static str {
        match self {
            ReadSide::Before => "before",
            ReadSide::After => "after",
        }
    }
}

impl DeviceRead {
    /// What every process held on the device then.
    pub fn used_bytes(&self) -> u64 {
        self.total_bytes.saturating_sub(self.free_bytes)
    }
}

/// A process and its bytes on one GPU.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProcessBytes {
    pub pid: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bytes: Option<u64>,
}

/// The program `gpulab watch` started.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WatchMeta {
    /// The command line, program first.
    pub command: Vec<String>,
    /// Its process id; its children report their own.
    pub pid: u32,
    /// `--torch-history`: PyTorch's memory history was asked for, so its
    /// live tensors by line are looked at (`framework` events of kind
    /// `alive`). Absent (false) otherwise and in streams written before it.
    #[serde(default, skip_serializing_if = "is_false")]
    pub torch_history: bool,
}

/// What an agent loaded into a watched process says about itself. Object ids from
/// an agent carry the process id in their upper 32 bits, so processes never clash.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AgentEvent {
    pub t_ns: u64,
    pub pid: u32,
    /// The parent process, to follow a program's children.
    pub parent_pid: u32,
    /// Which API it hooks: `opencl` (a loader layer) or `cuda`.
    pub api: String,
    pub state: AgentState,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum AgentState {
    /// Loaded and hooking calls. `exe` is the process's executable; `destruction`
    /// lists the kinds whose deletion by the driver it can see (a destructor
    /// callback the driver supports): for those, a release with no `destroyed`
    /// after it means the driver still holds the object.
    Attached {
        exe: String,
        #[serde(default)]
        destruction: Vec<ObjKind>,
        /// The process's rank in a distributed job, from the variables its
        /// launcher set (torchrun, mpirun, srun); absent outside one.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        rank: Option<Rank>,
    },
    /// The process (or its image, when it exec'd) ended; `records` records
    /// arrived from it before this, and nothing else: `dropped` call and span
    /// records had no room, `coalesced` reference changes of an object were
    /// merged into its next one while gpulab was behind, and `lost` records
    /// never arrived (held by the process for want of room when it ended);
    /// `cut` records were being written when it ended. `signal`: the
    /// process died of it, where gpulab saw that.
    Detached {
        records: u64,
        dropped: u64,
        #[serde(default)]
        coalesced: u64,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        signal: Option<i32>,
        #[serde(default, skip_serializing_if = "is_zero")]
        lost: u64,
        /// Records a thread of the process was writing when the process
        /// ended (an `_exit` or a signal while another thread was inside a
        /// watched call): the calls they record had not returned to the
        /// program.
        #[serde(default, skip_serializing_if = "is_zero")]
        cut: u64,
        /// What observing cost it: the agent's own time inside the calls it
        /// timed. Absent in streams written before gpulab measured it.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        observed: Option<Observed>,
    },
    /// Loaded, but it cannot watch this API in this process (no libcupti, another
    /// CUPTI subscriber): the program's calls of that API go unseen, and `reason`
    /// says why.
    Unavailable { reason: String },
    /// Watching, but another tool inside the process is worse off for it (the
    /// program's own CUPTI client, refused because the agent holds CUPTI's
    /// subscriber); `reason` says who and what it loses.
    Conflict { reason: String },
    /// From now on the agent watches every kernel launch of the process
    /// (`watching`), or only the calls that are not launches: it stops once
    /// the process's launches repeat functions it already saw, and looks
    /// again at regular times and wherever code is loaded (`why`). Launches
    /// made while it does not watch are neither recorded nor counted.
    Launches { watching: bool, why: LaunchesWhy },
}

/// Why the agent started or stopped watching a process's kernel launches.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum LaunchesWhy {
    /// Stopped: this many launches in a row ran functions already launched.
    Repeated,
    /// Started: the regular look for functions launched for the first time.
    Look,
    /// Started: the driver loaded a module (lazily, inside a launch, or by
    /// a call), whose functions have yet to be launched.
    CodeLoaded,
}

/// A process's place in a distributed job, as its launcher told it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct Rank {
    /// Its rank among all processes of the job.
    pub rank: u32,
    /// Its rank among the job's processes on this host.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub local_rank: Option<u32>,
    /// How many processes the job has.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub world_size: Option<u32>,
    /// The variable that said the rank: `RANK` (torchrun, and what
    /// `torch.distributed` reads), `OMPI_COMM_WORLD_RANK` (Open MPI),
    /// `PMI_RANK` (MPICH, Intel MPI), `SLURM_PROCID` (srun).
    pub from: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DeviceMeta {
    pub name: String,
    pub vendor: String,
    pub driver_version: String,
    pub kind: DeviceKind,
    pub total_bytes: Option<u64>,
    /// What "device memory" means on this device: `nvml` (device memory) or
    /// `rss` (host memory of the worker, for CPU OpenCL devices).
    pub memory_source: MemorySource,
    pub pci_bus_id: Option<String>,
    /// Profiling-to-host clock mapping error bound, ns, when known.
    pub clock_error_ns: Option<u64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LabMeta {
    pub id: String,
    pub title: String,
    pub variant: String,
    pub params: BTreeMap<String, f64>,
    /// The variant's script lines as (line number, text), for replay without the file.
    pub script: Vec<(u32, String)>,
    /// The worker waited for a key before each line (`--step`, or step mode in the
    /// dashboard): device work ran on while the user read the screen.
    #[serde(default, skip_serializing_if = "is_false")]
    pub stepped: bool,
    /// `--until-failure`: no budget, and reaching a failing call is the run's point.
    #[serde(default, skip_serializing_if = "is_false")]
    pub until_failure: bool,
    /// The script makes another device current (`cudaSetDevice`): the
    /// memory figures are the worker's own bytes on every GPU of the host.
    #[serde(default, skip_serializing_if = "is_false")]
    pub every_gpu: bool,
}

/// The agent's own time inside a process's calls, on the calls it timed:
/// one in [`crate::ring::OBSERVED_EVERY`] of each thread, the time in
/// CUPTI's two callbacks of a CUDA call (not what CUPTI spends calling
/// them) or in an OpenCL hook after the driver returned.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Observed {
    /// Kernel launches timed, and the agent's ns inside them.
    pub launches: u64,
    pub launch_ns: u64,
    /// Other calls timed, and the agent's ns inside them.
    pub calls: u64,
    pub call_ns: u64,
    /// One call in this many was timed.
    pub every: u32,
}

impl Observed {
    /// `self` and `other` together (a process's images, a program's
    /// processes): counts add, saturating (the program can write them).
    pub fn and(self, other: &Observed) -> Observed {
        Observed {
            launches: self.launches.saturating_add(other.launches),
            launch_ns: self.launch_ns.saturating_add(other.launch_ns),
            calls: self.calls.saturating_add(other.calls),
            call_ns: self.call_ns.saturating_add(other.call_ns),
            every: self.every.max(other.every),
        }
    }
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

fn is_false(b: &bool) -> bool {
    !*b
}

/// The host's load while a run went on: the highest 1-minute load average the
/// parent read (`/proc/loadavg`, at the run's start and end) and the CPUs this
/// process may use. A CPU device (PoCL) runs its kernels on those CPUs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HostLoad {
    pub t_ns: u64,
    pub load_avg: f64,
    pub cores: u32,
    /// The share of the run's time (0 to 1) during which some task of the
    /// host waited for a CPU, from the kernel's pressure stall information
    /// (`/proc/pressure/cpu`, `some`) read at the run's start and end.
    /// Absent where the kernel keeps none, and in streams before it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_waiting: Option<f64>,
}

/// What a framework inside a watched process said, when the agent took it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FrameworkEvent {
    pub t_ns: u64,
    pub pid: u32,
    pub framework: Framework,
    /// The framework's device index (its own numbering, as the program sees
    /// devices).
    pub device: u32,
    pub said: FrameworkSaid,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum FrameworkSaid {
    /// Its allocator's figures at that moment.
    Memory {
        /// Bytes the program's tensors or arrays use (PyTorch
        /// `allocated_bytes.all.current`, CuPy `used_bytes()`, JAX
        /// `bytes_in_use`).
        allocated: u64,
        /// Bytes the allocator holds from the driver, used or cached (PyTorch
        /// `reserved_bytes.all.current`, CuPy `total_bytes()`, JAX `pool_bytes`,
        /// or `bytes_reserved`, or `bytes_in_use` when it keeps no pool).
        reserved: u64,
        /// The most the allocator will hold, when it has a limit (JAX
        /// `bytes_limit`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        limit: Option<u64>,
    },
    /// It refused an allocation (PyTorch's out-of-memory observer): the bytes
    /// asked for, the device's free bytes and the most it may use, as the
    /// framework read them then; and the refused thread's stack
    /// ([`Stack::id`]: the line of the program's own code that asked), when
    /// the agent took one.
    Refused {
        asked: u64,
        free: u64,
        limit: u64,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        stack: Option<u64>,
    },
    /// The hook cannot read this framework's figures (a version without what
    /// it reads, or a reading that raised): only the driver's view is left.
    Unreadable { reason: String },
    /// Its tensors alive at one moment, grouped by the line of the program's
    /// own code that allocated each, from the framework's own allocator
    /// state (PyTorch's memory history, which the hook turns on only under
    /// `gpulab watch --torch-history`).
    Alive {
        /// Why the hook looked then.
        moment: AliveMoment,
        /// Bytes the allocator's live blocks held (every group's and the
        /// others').
        allocated: u64,
        /// Most bytes first; one group per line, and one with no line where
        /// no frame of the program's own code allocated the tensor.
        groups: Vec<AliveGroup>,
        /// Tensors of lines past the most groups sent, summed.
        #[serde(default, skip_serializing_if = "is_zero")]
        other_tensors: u64,
        #[serde(default, skip_serializing_if = "is_zero")]
        other_bytes: u64,
        /// How long the look took the thread that took it (PyTorch's
        /// snapshot and the grouping), ns; it ended at `t_ns`.
        #[serde(default, skip_serializing_if = "is_zero")]
        took_ns: u64,
    },
}

/// When a framework's live tensors were looked at.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AliveMoment {
    /// At a reading that was the allocator's highest so far.
    Highest,
    /// As it refused an allocation (its out-of-memory observer).
    Refused,
}

impl AliveMoment {
    pub fn as_str(self) -> &'static str {
        match self {
            AliveMoment::Highest => "highest",
            AliveMoment::Refused => "refused",
        }
    }
}

/// A framework's live tensors that one line of the program allocated.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AliveGroup {
    /// The innermost frame of the program's own code that allocated them;
    /// absent for tensors no such frame allocated (another thread's, as
    /// autograd's backward, or a library's own).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub at: Option<PyLine>,
    pub tensors: u64,
    pub bytes: u64,
}

/// A line of Python source: its file, line and function.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PyLine {
    pub file: String,
    pub line: u32,
    pub function: String,
}

/// A call the worker is making: sent right before it, so a call that hangs in
/// the driver is known by name, line and iteration while it hangs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Calling {
    /// The `seq` its `call` event will have.
    pub seq: u64,
    pub line: Option<u32>,
    /// Iteration indices of the enclosing `repeat` blocks, outermost first.
    pub iter: Vec<u32>,
    pub api: crate::api::CallName,
    /// When the worker went into it (CLOCK_MONOTONIC ns).
    pub t_ns: u64,
}

/// `Default` is an empty successful call at time 0, for building one field by field.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Call {
    /// Order of the call in the run, from 0.
    pub seq: u64,
    pub pid: u32,
    pub thread: u64,
    /// Script line, when the call came from a lab.
    pub line: Option<u32>,
    /// Iteration indices of the enclosing `repeat` blocks, outermost first.
    pub iter: Vec<u32>,
    pub tag: Option<String>,
    /// The C name as the script wrote it, or the driver entry point an agent
    /// hooked: typed when the vocabulary holds it.
    pub api: crate::api::CallName,
    /// What the driver really got called with.
    pub driver: String,
    pub begin_ns: u64,
    pub end_ns: u64,
    pub status: CallStatus,
    pub expect_error: bool,
    pub mem_before: Option<u64>,
    pub mem_after: Option<u64>,
    /// Ledger object this call created, released or retained, if any.
    pub object: Option<u64>,
    /// CUDA only: who holds device memory right after the call. Absent in OpenCL
    /// streams and in streams written before it existed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cuda: Option<CudaMemory>,
    /// `gpulab watch`, CUDA: the device memory the call took, as the agent read
    /// the driver's free memory (`cuMemGetInfo`) right before and after it:
    /// for calls that make a module or stream, and a function's first launch
    /// or other first use that loads its code (an attribute read, say).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_step: Option<i64>,
    /// `gpulab watch`: what the agent read at a call the driver refused for
    /// want of memory (the size asked, the device's free memory right after,
    /// the calling stack). Absent for every other call and in older streams.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refused: Option<Box<Refusal>>,
    /// `gpulab watch`, CUDA: a free of device memory that succeeded on a
    /// pointer (not null) no allocation the agent saw made: memory made by
    /// no call it watches (a CUDA graph's memory nodes allocate at the
    /// graph's launch). Absent when not.
    #[serde(default, skip_serializing_if = "is_false")]
    pub freed_unseen: bool,
    /// A lab's call that answers with a value a claim reads: the device's free
    /// memory (`cudaMemGetInfo`, MiB), the time between two events
    /// (`cudaEventElapsedTime`, ms), whether an event had completed
    /// (`clGetEventInfo`, `cudaEventQuery`: 1 or 0), or the share of a
    /// read-back's words that hold the pattern kernel's values (0 to 1).
    /// Absent for every other call and in older streams.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub returned: Option<f64>,
}

/// An allocation the driver refused, as the agent saw it inside the call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Refusal {
    /// The bytes the call asked for, from its parameters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub asked_bytes: Option<u64>,
    /// The device's free memory as the driver said it right after the refusal
    /// (`cuMemGetInfo` on the calling thread), where it could be read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub free_bytes: Option<u64>,
    /// The refused call's native stack ([`Stack::id`]), when one was taken.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stack: Option<u64>,
}

/// The CUDA driver's view of device memory, read by the worker after each call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CudaMemory {
    /// `CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT` of the device's default pool: memory
    /// the pool holds from the device, in use or cached.
    pub pool_reserved: u64,
    /// `CU_MEMPOOL_ATTR_USED_MEM_CURRENT`: pool memory handed out and not yet freed
    /// (a `cudaFreeAsync` still pending on its stream counts here).
    pub pool_used: u64,
    /// `cuMemGetInfo` free and total bytes of the device.
    pub free: u64,
    pub total: u64,
    /// The lab's own pool (`cudaMemPoolCreate`), when exactly one is alive.
    /// Absent in streams written before custom pools existed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub custom_pool: Option<PoolMemory>,
    /// The device's graph memory (`cuDeviceGetGraphMemAttribute`,
    /// `CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT` / `USED_MEM_CURRENT`), read once
    /// the run has made a graph. Absent otherwise and in older streams.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub graph_mem: Option<PoolMemory>,
}

/// One memory pool's bookkeeping, as `CudaMemory` reads the default pool's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PoolMemory {
    /// `CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT`.
    pub reserved: u64,
    /// `CU_MEMPOOL_ATTR_USED_MEM_CURRENT`.
    pub used: u64,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum CallStatus {
    #[default]
    Ok,
    /// The driver returned an error status.
    Error { code: i64, name: String },
    /// gpulab itself did the line (sleep, mark, forget).
    Directive,
}

impl CallStatus {
    pub fn is_ok(&self) -> bool {
        !matches!(self, CallStatus::Error { .. })
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ObjectAction {
    Created,
    Retained,
    Released,
    /// The lab dropped its name without releasing (`forget`).
    Forgotten,
    /// The driver's destructor callback fired: the implementation freed it.
    Destroyed,
    /// Released by gpulab's cleanup after the script failed.
    CleanedUp,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ObjectEvent {
    pub t_ns: u64,
    pub id: u64,
    pub kind: ObjKind,
    pub action: ObjectAction,
    /// The script's name for it (`buf`), when it has one.
    pub handle: Option<String>,
    pub bytes: u64,
    /// The lab's references after this change (0 = released by the lab).
    pub refcount: u32,
    /// Objects this one refers to (an event to its queue, kernel and buffer).
    pub refs: Vec<u64>,
    pub line: Option<u32>,
    /// The native call stack that created it ([`Stack::id`]), when the watch
    /// asked for backtraces.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stack: Option<u64>,
}

/// A native call stack in a watched process, innermost frame first, starting at
/// the program's own call into the API (the agent's and the driver's frames are
/// left out). Ids carry the process id in their upper 32 bits, like objects'.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Stack {
    pub t_ns: u64,
    pub id: u64,
    pub frames: Vec<Frame>,
}

/// What a call did wrong with an object the program no longer held.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum MisuseKind {
    /// A call used it (an enqueue, a kernel's argument, a wait).
    UseAfterRelease,
    /// A release of it again.
    DoubleRelease,
    /// A retain of it: too late to keep it.
    RetainAfterRelease,
    /// A synchronous free (`cudaFree`) of memory a stream-ordered allocation
    /// made (`cudaMallocAsync`): allowed, but it waits for the device where
    /// `cudaFreeAsync` would not. The object was still the program's.
    SyncFreeOfStreamOrdered,
    /// A stream-ordered free (`cudaFreeAsync`) on one stream of memory a
    /// call on another stream used, with nothing the agent saw ordering the
    /// use before the free (an event recorded after the use and waited by
    /// the freeing stream, the host waiting for it): the memory may be freed
    /// while the use runs. The use is the misuse's `after`.
    UnorderedFree,
}

impl MisuseKind {
    /// As the stream and the report's JSON name it (`use_after_release`).
    pub fn name(self) -> &'static str {
        match self {
            MisuseKind::UseAfterRelease => "use_after_release",
            MisuseKind::DoubleRelease => "double_release",
            MisuseKind::RetainAfterRelease => "retain_after_release",
            MisuseKind::SyncFreeOfStreamOrdered => "sync_free_of_stream_ordered",
            MisuseKind::UnorderedFree => "unordered_free",
        }
    }

    pub fn words(self) -> &'static str {
        match self {
            MisuseKind::UseAfterRelease => "use after release",
            MisuseKind::DoubleRelease => "release after release",
            MisuseKind::RetainAfterRelease => "retain after release",
            MisuseKind::SyncFreeOfStreamOrdered => "synchronous free of stream-ordered memory",
            MisuseKind::UnorderedFree => "free not ordered after a use on another stream",
        }
    }
}

/// `gpulab watch`: a call named object `object` after the program's last
/// reference to it was gone. The object's history (made, released) is in
/// the stream's object events; the call's own record follows this one.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Misuse {
    pub t_ns: u64,
    pub pid: u32,
    pub thread: u64,
    /// The call that named it, as the agent hooked it.
    pub api: crate::api::CallName,
    pub what: MisuseKind,
    /// The ledger id of the released object, and its kind.
    pub object: u64,
    pub kind: ObjKind,
    /// The call's stack (`--backtrace`), as a [`Stack`]'s id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stack: Option<u64>,
    /// [`MisuseKind::UnorderedFree`]: the use the free is not ordered after.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub after: Option<UnorderedUse>,
}

/// A use of memory on one stream that a free on another is not ordered
/// after ([`MisuseKind::UnorderedFree`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UnorderedUse {
    /// The call that used it (`cuLaunchKernel`, `cuMemAllocAsync`).
    pub api: crate::api::CallName,
    /// The stream it used it on, by the stream's ledger id; absent for a
    /// default stream or one the agent did not see made.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stream: Option<u64>,
}

/// One return address of a [`Stack`], as the process had it mapped.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct Frame {
    /// The file mapped there (executable or shared library); empty if none.
    pub module: String,
    /// The address in the module's own address space (what `addr2line -e
    /// MODULE` takes): the runtime address less the module's load bias.
    pub address: u64,
    /// The module's GNU build id (hex), so a symbolizer can tell that the file
    /// on disk is the one that ran.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub build_id: Option<String>,
    /// The function, from the module's symbols (demangled), if named.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub function: Option<String>,
    /// `file:line` from the module's debug information, if it has any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub location: Option<String>,
    /// A Python frame of the program (CPython): `function` is its code's
    /// qualified name and `location` its `file.py:line`; no module or
    /// address. Absent (false) for a native frame.
    #[serde(default, skip_serializing_if = "is_false")]
    pub python: bool,
}

impl Frame {
    /// `main (leak.cu:42)`, `main`, or `app+0x1a2b` where nothing names it.
    pub fn describe(&self) -> String {
        let module = self.module.rsplit('/').next().unwrap_or(&self.module);
        let module = if module.is_empty() { "?" } else { module };
        match (&self.function, &self.location) {
            (Some(f), Some(l)) => format!("{f} ({l})"),
            (Some(f), None) => format!("{f} in {module}"),
            (None, Some(l)) => format!("{module}+{:#x} ({l})", self.address),
            (None, None) => format!("{module}+{:#x}", self.address),
        }
    }
}

impl ObjectEvent {
    /// The program's last reference is gone: a release or cleanup to 0. (The
    /// driver may still hold the object; a `destroyed` event says when it let go.)
    pub fn ends_life(&self) -> bool {
        matches!(
            self.action,
            ObjectAction::Released | ObjectAction::CleanedUp
        ) && self.refcount == 0
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DeviceSpan {
    /// Ledger id of the queue or stream, and its script name.
    pub queue: u64,
    pub queue_name: Option<String>,
    pub name: String,
    /// Seq of the call that enqueued it.
    pub call_seq: u64,
    pub line: Option<u32>,
    pub queued_ns: u64,
    pub begin_ns: u64,
    pub end_ns: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Block {
    pub line: u32,
    pub tag: Option<String>,
    pub iterations: u32,
    pub planned: u32,
    pub begin_ns: u64,
    pub end_ns: u64,
    pub mem_before: Option<u64>,
    pub mem_after: Option<u64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Sample {
    pub t_ns: u64,
    pub source: MemorySource,
    /// Device memory in use (all processes), or the worker's RSS.
    pub used_bytes: u64,
    pub total_bytes: Option<u64>,
    /// The worker process's own usage, where the source can tell.
    pub process_bytes: Option<u64>,
    /// `gpulab watch`: the other processes NVML listed on the device with
    /// their bytes, the first time the list is read and whenever it changes
    /// (absent: no change, or not read).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub others: Option<Vec<OtherProcess>>,
}

/// A process outside the watched program that held device memory.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OtherProcess {
    pub pid: u32,
    /// Its name (`/proc/<pid>/comm`), where this host can read it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Its bytes on the device, when NVML says them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bytes: Option<u64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Note {
    pub t_ns: u64,
    pub level: NoteLevel,
    pub text: String,
    pub line: Option<u32>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NoteLevel {
    Info,
    Warning,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct ClaimVerdict {
    pub name: String,
    pub text: String,
    pub expr: String,
    pub requires: Option<String>,
    /// Every metric and parameter the claim read, by the name it was written with.
    #[serde(with = "values_serde")]
    #[cfg_attr(
        feature = "schema",
        schemars(with = "BTreeMap<String, values_serde::Value>")
    )]
    pub values: BTreeMap<String, f64>,
    pub verdict: Verdict,
    /// Why the verdict is inconclusive; empty otherwise.
    pub reason: Option<String>,
    /// What the lab's lesson expects the claim to show in this variant, where
    /// it says: shown beside the verdict, never used to reach it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expected: Option<Expected>,
}

impl ClaimVerdict {
    /// How the verdict stands to the lesson; `None` where the lab states no
    /// expectation for the variant.
    pub fn lesson(&self) -> Option<Lesson> {
        let expected = self.expected?;
        Some(match self.verdict {
            Verdict::Inconclusive => Lesson::Untested,
            _ if expected == Expected::Either => Lesson::Either,
            v if expected.matches(v) => Lesson::AsExpected,
            _ => Lesson::Unlike,
        })
    }
}

impl ClaimVerdict {
    /// The mark before the verdict's words. Against a lesson it says how the
    /// two stand (✓ as expected, whichever the verdict; ◆ a finding of this
    /// device; ? untested), so an expected "does not hold" never reads as a
    /// failure; without one it is the verdict's own (✓ ✗ ?).
    pub fn mark(&self) -> &'static str {
        match (self.lesson(), self.verdict) {
            (Some(l), _) => l.mark(),
            (None, Verdict::Holds) => "✓",
            (None, Verdict::DoesNotHold) => "✗",
            (None, Verdict::Inconclusive) => "?",
        }
    }
}

impl ClaimVerdict {
    /// How the verdict reads at a glance, which each screen gives its colour:
    /// against a lesson by how it stands to it, else by the verdict itself.
    pub fn tone(&self) -> Tone {
        match (self.lesson(), self.verdict) {
            (Some(Lesson::AsExpected), _) | (None, Verdict::Holds) => Tone::Good,
            (Some(Lesson::Unlike), _) => Tone::Finding,
            (Some(Lesson::Either), _) => Tone::Neutral,
            (None, Verdict::DoesNotHold) => Tone::Bad,
            (Some(Lesson::Untested), _) | (None, Verdict::Inconclusive) => Tone::Unsure,
        }
    }
}

/// See [`ClaimVerdict::tone`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tone {
    /// Holds, or shows what the lesson expects.
    Good,
    /// Contradicts the lesson: a finding about this device, not a failure.
    Finding,
    /// Does not hold, where no lesson is stated.
    Bad,
    /// Either outcome is the lesson's (implementations differ): this
    /// device's finding, neither good nor bad.
    Neutral,
    /// Inconclusive.
    Unsure,
}

/// A claim's outcome as someone predicted it before the run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Prediction {
    /// When it was made (CLOCK_MONOTONIC ns): before the run's first line.
    pub t_ns: u64,
    /// The claim's name, in the run's variant.
    pub claim: String,
    pub predicted: Predicted,
}

/// A measured value's range, as someone predicted it before the run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Estimate {
    /// When it was made (CLOCK_MONOTONIC ns): before the run's first line.
    pub t_ns: u64,
    /// The value, as a claim of the lab reads it (`host_ms(wait)`).
    pub value: String,
    /// The range predicted, both ends in it, in the value's own unit.
    pub lo: f64,
    pub hi: f64,
}

impl Estimate {
    /// The estimates made before a run, as the events that follow its
    /// header (`header`, a `meta`), at its time; none after any other event.
    pub fn after(header: &Event, made: &[(String, f64, f64)]) -> Vec<Event> {
        let Event::Meta(m) = header else {
            return Vec::new();
        };
        made.iter()
            .map(|(value, lo, hi)| {
                Event::Estimate(Estimate {
                    t_ns: m.t_ns,
                    value: value.clone(),
                    lo: *lo,
                    hi: *hi,
                })
            })
            .collect()
    }

    /// Whether `measured` is in the range (both ends in it).
    pub fn holds(&self, measured: f64) -> bool {
        self.lo <= measured && measured <= self.hi
    }
}

/// What a claim was predicted to show.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum Predicted {
    Holds,
    DoesNotHold,
    NotSure,
}

impl Prediction {
    /// The predictions made before a run, as the events that follow its
    /// header (`header`, a `meta`), at its time; none after any other event.
    pub fn after(header: &Event, predicted: &[(String, Predicted)]) -> Vec<Event> {
        let Event::Meta(m) = header else {
            return Vec::new();
        };
        predicted
            .iter()
            .map(|(claim, p)| {
                Event::Prediction(Prediction {
                    t_ns: m.t_ns,
                    claim: claim.clone(),
                    predicted: *p,
                })
            })
            .collect()
    }
}

impl Predicted {
    pub const ALL: [Predicted; 3] = [Predicted::Holds, Predicted::DoesNotHold, Predicted::NotSure];

    /// Its word on the command line and in files: `holds`, `does_not_hold`,
    /// `not_sure`.
    pub fn as_str(self) -> &'static str {
        match self {
            Predicted::Holds => "holds",
            Predicted::DoesNotHold => "does_not_hold",
            Predicted::NotSure => "not_sure",
        }
    }

    pub fn parse(word: &str) -> Option<Predicted> {
        Predicted::ALL.into_iter().find(|p| p.as_str() == word)
    }

    /// The words shown beside the verdict.
    pub fn label(self) -> &'static str {
        match self {
            Predicted::Holds => "holds",
            Predicted::DoesNotHold => "does not hold",
            Predicted::NotSure => "not sure",
        }
    }

    /// Whether it names this verdict: a "not sure" names none, and an
    /// inconclusive run bears no prediction out.
    pub fn matches(self, verdict: Verdict) -> bool {
        matches!(
            (self, verdict),
            (Predicted::Holds, Verdict::Holds) | (Predicted::DoesNotHold, Verdict::DoesNotHold)
        )
    }
}

/// What a lab's lesson expects a claim to show in a variant: an outcome, or
/// either one where the lesson teaches that implementations differ (then
/// the verdict is this device's finding, shown neutral).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum Expected {
    Holds,
    DoesNotHold,
    Either,
}

impl Expected {
    pub fn label(self) -> &'static str {
        match self {
            Expected::Holds => "holds",
            Expected::DoesNotHold => "does not hold",
            Expected::Either => "either (implementations differ)",
        }
    }

    /// Whether `verdict` is what was expected; either outcome is, where the
    /// lesson expects either.
    pub fn matches(self, verdict: Verdict) -> bool {
        matches!(
            (self, verdict),
            (Expected::Holds, Verdict::Holds)
                | (Expected::DoesNotHold, Verdict::DoesNotHold)
                | (Expected::Either, Verdict::Holds | Verdict::DoesNotHold)
        )
    }
}

/// A verdict beside the lesson's expectation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lesson {
    /// The device showed what the lesson expects.
    AsExpected,
    /// The device showed the opposite: a finding about this device and driver.
    Unlike,
    /// The run could not decide the claim, so it neither bears the lesson out nor contradicts it.
    Untested,
    /// The lesson expects either outcome (implementations differ): the
    /// verdict is this device's finding.
    Either,
}

impl Lesson {
    pub fn mark(self) -> &'static str {
        match self {
            Lesson::AsExpected => "✓",
            Lesson::Unlike => "◆",
            Lesson::Untested => "?",
            Lesson::Either => "◇",
        }
    }

    /// The words shown beside the verdict.
    pub fn label(self) -> &'static str {
        match self {
            Lesson::AsExpected => "as the lesson expects",
            Lesson::Unlike => "unlike the lesson, on this device",
            Lesson::Untested => "the lesson is untested here",
            Lesson::Either => "implementations differ: this device's finding",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    Holds,
    DoesNotHold,
    Inconclusive,
}

impl Verdict {
    pub fn label(self) -> &'static str {
        match self {
            Verdict::Holds => "holds",
            Verdict::DoesNotHold => "does not hold",
            Verdict::Inconclusive => "inconclusive",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct End {
    pub t_ns: u64,
    pub status: EndStatus,
    /// Lab objects still alive when the script ended (leaked on purpose or not).
    pub leaked: Vec<Leak>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Leak {
    pub id: u64,
    pub kind: ObjKind,
    pub handle: Option<String>,
    pub bytes: u64,
    /// True when the lab said `forget`: the leak is the lesson.
    pub forgotten: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum EndStatus {
    /// Every line ran.
    Finished,
    /// A line failed that was not expected to.
    Failed { line: Option<u32>, error: String },
    /// Stopped on request (Esc, Ctrl-C, `stop`).
    Cancelled,
    /// The worker died (a signal, or it exited without an `end`).
    Crashed { signal: Option<i32>, detail: String },
    /// A watched program exited with a status other than 0.
    Exited { code: i32 },
    /// gpulab ended the run when its time limit passed (`--time-limit`).
    TimedOut {
        limit_ms: u64,
        /// The call the worker was in, if it was in one.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        in_flight: Option<InFlight>,
    },
}

/// The call a run was in when it was ended.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct InFlight {
    pub seq: u64,
    pub line: Option<u32>,
    pub iter: Vec<u32>,
    /// The C name as the script wrote it.
    pub api: String,
    /// How long it had been in that call, in ms.
    pub for_ms: u64,
}

impl InFlight {
    /// `clReleaseContext at line 84 (iteration 17) has not returned after 30.0 s`.
    pub fn says(&self) -> String {
        let at = match self.line {
            Some(l) => format!(" at line {l}"),
            None => String::new(),
        };
        let iter = match self.iter.as_slice() {
            [] => String::new(),
            [i] => format!(" (iteration {})", u64::from(*i) + 1),
            many => format!(
                " (iterations {})",
                many.iter()
                    .map(|i| (u64::from(*i) + 1).to_string())
                    .collect::<Vec<_>>()
                    .join(".")
            ),
        };
        format!(
            "{}{at}{iter} has not returned after {:.1} s",
            self.api,
            self.for_ms as f64 / 1000.0
        )
    }
}

impl EndStatus {
    pub fn label(&self) -> String {
        match self {
            EndStatus::Finished => "finished".into(),
            EndStatus::Failed {
                line: Some(l),
                error,
            } => format!("failed at line {l}: {error}"),
            EndStatus::Failed { line: None, error } => format!("failed: {error}"),
            EndStatus::Cancelled => "cancelled".into(),
            EndStatus::Crashed { detail, .. } => format!("crashed: {detail}"),
            EndStatus::Exited { code } => format!("exited with status {code}"),
            EndStatus::TimedOut {
                limit_ms,
                in_flight,
            } => {
                let limit = *limit_ms as f64 / 1000.0;
                match in_flight {
                    Some(c) => format!("timed out after {limit:.1} s: {}", c.says()),
                    None => format!("timed out after {limit:.1} s"),
                }
            }
        }
    }
}

/// Claim values as JSON: finite numbers as numbers, infinities (memory that never
/// came back) as the strings `"inf"`/`"-inf"` and NaN as `"nan"`. serde_json would
/// otherwise write `null`, which reads back as an error.
mod values_serde {
    use std::collections::BTreeMap;

    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    /// A value as the JSON holds it: a number, or a string for one that is not
    /// finite (JSON has no infinity); the schema names those three strings.
    #[derive(Serialize, Deserialize)]
    #[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
    #[serde(untagged)]
    pub enum Value {
        Num(f64),
        #[cfg_attr(feature = "schema", schemars(with = "NotFinite"))]
        Text(String),
    }

    /// The strings a value that is not finite is written as.
    #[cfg(feature = "schema")]
    #[derive(schemars::JsonSchema)]
    #[allow(dead_code)] // Only its schema is used: `Value::Text` holds the string.
    enum NotFinite {
        #[serde(rename = "inf")]
        Inf,
        #[serde(rename = "-inf")]
        NegInf,
        #[serde(rename = "nan")]
        Nan,
    }

    pub fn serialize<S: Serializer>(map: &BTreeMap<String, f64>, s: S) -> Result<S::Ok, S::Error> {
        let out: BTreeMap<&String, Value> = map
            .iter()
            .map(|(k, v)| {
                let v = if v.is_finite() {
                    Value::Num(*v)
                } else if v.is_nan() {
                    Value::Text("nan".into())
                } else if *v > 0.0 {
                    Value::Text("inf".into())
                } else {
                    Value::Text("-inf".into())
                };
                (k, v)
            })
            .collect();
        out.serialize(s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<BTreeMap<String, f64>, D::Error> {
        let raw = BTreeMap::<String, Value>::deserialize(d)?;
        raw.into_iter()
            .map(|(k, v)| {
                let v = match v {
                    Value::Num(n) => n,
                    Value::Text(t) => match t.as_str() {
                        "inf" => f64::INFINITY,
                        "-inf" => f64::NEG_INFINITY,
                        "nan" => f64::NAN,
                        other => {
                            return Err(serde::de::Error::custom(format!(
                                "claim value `{other}` is not a number"
                            )));
                        }
                    },
                };
                Ok((k, v))
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::MisuseKind;

    /// `name` is what serde writes: a suppression rule and the JSON agree.
    #[test]
    fn a_misuse_is_named_as_the_stream_names_it() {
        for what in [
            MisuseKind::UseAfterRelease,
            MisuseKind::DoubleRelease,
            MisuseKind::RetainAfterRelease,
            MisuseKind::SyncFreeOfStreamOrdered,
            MisuseKind::UnorderedFree,
        ] {
            let json = serde_json::to_string(&what).unwrap_or_default();
            assert_eq!(json, format!("\"{}\"", what.name()));
        }
    }
}
