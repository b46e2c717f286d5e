//! The exit report of a watched program (`watch`, or `report` of a watch
//! recording), computed from its event stream alone:
//! which objects it left alive and who made them, which it released that the
//! driver still held, how long released objects outlived their release, and
//! whether every process's agent reported completely.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

use schemars::JsonSchema;
use serde::Serialize;

use crate::run::owners::Owner;
use crate::run::{ObjState, Run};
use crate::text::fit;
use crate::trace::{AgentState, EndStatus, Frame, MemorySource, NoteLevel, ObjKind};
use crate::units::mib;

pub use super::format::short_id;
use super::format::{Table, md_code};
use super::frameworks::{AllocatorReport, FrameworkRefusal};
use super::holders::HoldersReport;
pub use super::out_of_memory::{KnownShares, OtherProcessReport, OutOfMemory, WatchRanOut};
use super::ranks::{GpuReport, RankReport};

#[derive(Debug, Clone, Serialize, JsonSchema)]
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
    /// The highest reading of the program's own memory (NVML's figure for its
    /// process, or its RSS); device-wide when NVML does not list its process.
    pub peak_memory_bytes: Option<u64>,
    /// NVML: the most device memory in use above what was in use before the
    /// program started (every process on the GPU counts).
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
    /// What gpulab did to watch the program (a loader preloaded, say).
    pub notes: Vec<String>,
    pub warnings: Vec<String>,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
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
}

impl ProcessReport {
    /// Did every record it sent arrive, its last one included? When not, what
    /// the report says of its objects is uncertain.
    pub fn complete(&self) -> bool {
        self.records == Some(self.received)
    }
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct KindReport {
    pub kind: ObjKind,
    pub created: u64,
    pub released: u64,
    pub alive_at_exit: u64,
    pub alive_bytes: u64,
    /// The most alive at one time while the program ran.
    pub peak_alive: u64,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
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
    /// retains, the modules of its kernels, a framework's pool of streams,
    /// held for the process's life and given back at exit; not the
    /// program's leaks.
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

#[derive(Debug, Clone, Serialize, JsonSchema)]
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
#[derive(Debug, Clone, Serialize, JsonSchema)]
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
        let kind = if self.count == 1 {
            self.kind.as_str()
        } else {
            self.kind.plural()
        };
        format!("{} {kind}", self.count)
    }
}

/// The held objects grouped: the chain's kinds without the objects' numbers,
/// the making call and its calling frame make the key.
fn held_groups(run: &Run, held: &[HeldObject]) -> Vec<HeldGroup> {
    type Key = (ObjKind, String, Option<String>, Option<u64>);
    let mut groups: BTreeMap<Key, HeldGroup> = BTreeMap::new();
    for h in held {
        let life = run.ledger.get(&h.id);
        // The first chain that pins it, by kind: read from the ledger, not
        // from the words `pinned_by` says it in.
        let pins = run
            .live_index
            .referring
            .iter()
            .find_map(|&from| path_to(from, h.id, &run.ledger, 0))
            .map(|path| {
                path.iter()
                    .filter_map(|i| run.ledger.get(i).map(|o| o.kind.as_str()))
                    .collect::<Vec<_>>()
                    .join(" -> ")
            })
            .unwrap_or_default();
        let created_by = life.and_then(|l| l.made_by.as_ref()).map(|m| m.api.clone());
        let stack = life.and_then(|l| l.stack);
        let g = groups
            .entry((h.kind, pins.clone(), created_by.clone(), stack))
            .or_insert_with(|| HeldGroup {
                kind: h.kind,
                count: 0,
                bytes: 0,
                reserve_min_bytes: None,
                reserve_max_bytes: None,
                unmeasured: 0,
                pinned_by: pins,
                created_by,
                made_at: stack
                    .and_then(|id| run.stacks.get(&id))
                    .and_then(|frames| frames.first().cloned()),
            });
        g.count += 1;
        g.bytes += h.bytes + h.reserve.as_ref().map_or(0, |r| r.bytes);
        match &h.reserve {
            Some(r) => {
                g.reserve_min_bytes = Some(g.reserve_min_bytes.map_or(r.bytes, |m| m.min(r.bytes)));
                g.reserve_max_bytes = Some(g.reserve_max_bytes.map_or(r.bytes, |m| m.max(r.bytes)));
            }
            None => g.unmeasured += 1,
        }
    }
    let mut out: Vec<HeldGroup> = groups.into_values().collect();
    out.sort_by_key(|g| std::cmp::Reverse(g.bytes));
    out
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct HeldReserve {
    pub bytes: u64,
    /// The other objects of the measurement (`queue #2`), if any.
    pub with: Vec<String>,
}

impl HeldObject {
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

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct Outlived {
    pub kind: ObjKind,
    pub count: u64,
    pub median_ms: f64,
    pub max_ms: f64,
}

impl WatchReport {
    /// The report of `run` as it stands. Reads the run's live index (kept as
    /// each object event arrives), so it costs what the findings hold, not a
    /// walk of every object: the dashboard builds it every frame.
    pub fn from_run(run: &Run) -> WatchReport {
        let meta = run.meta.as_ref();
        let start = meta.map_or(0, |m| m.t_ns);
        let watch = meta.and_then(|m| m.watch.as_ref());
        let processes = processes(run);
        let incomplete: BTreeSet<u32> = processes
            .iter()
            .filter(|p| !p.complete())
            .map(|p| p.pid)
            .collect();
        let watched = &run.deletion_watched;
        let (notes, warnings) = notes_and_warnings(run, &processes);
        let (ended, exit_code) = ended(run);
        let end_ns = run.end.as_ref().map_or(start, |e| e.t_ns);
        let held_objects = held(run, watched, &incomplete);
        // Spread over GPUs, the sampler's figures are GPU 0's alone: they
        // give way to each GPU's and each process's.
        let spread = run.ranks.spread();
        let one_gpu = |v: Option<u64>| v.filter(|_| !spread);
        WatchReport {
            recorded: super::Provenance::of(run),
            command: watch.map(|w| w.command.clone()).unwrap_or_default(),
            pid: watch.map_or(0, |w| w.pid),
            ended,
            exit_code,
            duration_ms: end_ns.saturating_sub(start) as f64 / 1e6,
            calls: run.calls.seen() as usize,
            failed_calls: run.folds.failed_calls as usize,
            kinds: kinds(run),
            alive_at_exit: alive_groups(run, &incomplete),
            held_by_driver_groups: held_groups(run, &held_objects),
            held_by_driver: held_objects,
            outlived_release: outlived(run, watched),
            processes,
            peak_memory_bytes: one_gpu(run.sample_stats.max_process.or(run.sample_stats.max_used)),
            peak_device_growth_bytes: one_gpu(run.peak_above_baseline()),
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

    /// The command on one line: a newline or other control character in an
    /// argument (`python3 -c "…"`) is written as its escape.
    fn command_line(&self) -> String {
        self.command
            .join(" ")
            .chars()
            .map(|c| {
                if c.is_control() {
                    c.escape_default().to_string()
                } else {
                    c.to_string()
                }
            })
            .collect()
    }

    /// What the report leads with: the refused call and what a framework
    /// said of its refusal.
    fn ran_out_lines(&self) -> Vec<String> {
        let mut out = self
            .ran_out
            .as_ref()
            .map(WatchRanOut::lines)
            .unwrap_or_default();
        if let Some(f) = &self.framework_refused {
            out.extend(f.lines());
        }
        out
    }

    /// Objects the program never released, and objects the driver still held.
    pub fn leaked(&self) -> u64 {
        self.kinds.iter().map(|k| k.alive_at_exit).sum()
    }

    /// The APIs watched in any process: `opencl`, `cuda`, `cuda+opencl`, `none`.
    fn apis(&self) -> String {
        let apis: BTreeSet<&str> = self
            .processes
            .iter()
            .flat_map(|p| p.apis.iter().map(String::as_str))
            .collect();
        if apis.is_empty() {
            "none".into()
        } else {
            apis.into_iter().collect::<Vec<_>>().join("+")
        }
    }

    pub fn text(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(
            s,
            "gpulab watch: {} (pid {}) {} after {:.2} s",
            self.command_line(),
            self.pid,
            self.ended,
            self.seconds()
        );
        let records: u64 = self.processes.iter().filter_map(|p| p.records).sum();
        let dropped: u64 = self.processes.iter().filter_map(|p| p.dropped).sum();
        let _ = writeln!(
            s,
            "agent: {} process(es) ({}), {} calls ({} failed), {records} records sent, {dropped} dropped",
            self.processes.len(),
            self.apis(),
            self.calls,
            self.failed_calls
        );
        for line in self.ran_out_lines() {
            let _ = writeln!(s, "{line}");
        }
        for line in self.memory_lines() {
            let _ = writeln!(s, "{line}");
        }
        if let Some(h) = &self.holders {
            let _ = write!(
                s,
                "\nwho holds it ({}):\n{}",
                self.memory_source_label(),
                h.table().text()
            );
            for line in h.lines() {
                let _ = writeln!(s, "{line}");
            }
        }
        for a in &self.frameworks {
            let _ = writeln!(s, "{}", a.line());
        }
        if !self.ranks.is_empty() {
            let _ = writeln!(s, "\n{}:", self.ranks_heading());
            for r in &self.ranks {
                for line in r.lines(!self.gpus.is_empty()) {
                    let _ = writeln!(s, "{line}");
                }
            }
        }
        if !self.kinds.is_empty() {
            let _ = write!(s, "\n{}", self.kinds_table().text());
        }
        self.alive_text(&mut s);
        self.held_text(&mut s);
        for o in &self.outlived_release {
            let _ = writeln!(
                s,
                "\n{} {} deleted by the driver after the program released them: median {:.2} ms, \
                 longest {:.2} ms after the release",
                o.count,
                o.kind.plural(),
                o.median_ms,
                o.max_ms
            );
        }
        for n in &self.notes {
            let _ = writeln!(s, "\nnote: {n}");
        }
        for w in &self.warnings {
            let _ = writeln!(s, "\nwarning: {w}");
        }
        s
    }

    /// What the program left alive, by maker (the uncertain ones apart).
    fn alive_text(&self, s: &mut String) {
        for section in [
            AliveSection::Leaked,
            AliveSection::Allocator,
            AliveSection::Runtime,
            AliveSection::Uncertain,
        ] {
            let groups: Vec<&AliveGroup> = self
                .alive_at_exit
                .iter()
                .filter(|g| g.section() == section)
                .collect();
            if groups.is_empty() {
                continue;
            }
            let _ = writeln!(
                s,
                "\n{}",
                match section {
                    AliveSection::Leaked => "alive at exit, never released by the program:",
                    AliveSection::Allocator =>
                        "alive at exit, held by a framework's allocator (its cache and the \
                         tensors alive then, which the exit returns to the driver; its own \
                         figures are above):",
                    AliveSection::Runtime =>
                        "alive at exit, held for the process's life by the CUDA runtime or \
                         a library that called the driver (the primary context it retained, \
                         the modules of its kernels, its pool of streams; the exit gives them \
                         back, not the program's leaks):",
                    AliveSection::Uncertain =>
                        "alive at exit as far as seen (uncertain: the process's last records \
                         never arrived, a release may be missing):",
                }
            );
            for g in groups {
                let by = match g.owner.as_str() {
                    "program" | "unknown" => String::new(),
                    _ => format!(", through {}", Owner::label_of(&g.owner)),
                };
                let _ = writeln!(
                    s,
                    "  {:>5} {:<12} {:>10.2} MiB  made by {}",
                    g.count,
                    g.kind.plural(),
                    mib(g.bytes),
                    crate::run::maker_text(&g.created_by, &by, g.pid, g.thread),
                );
                for f in &g.backtrace {
                    let _ = writeln!(s, "          at {}", fit(&f.describe(), FRAME_WIDTH));
                }
            }
        }
    }

    /// What the program released and the driver still holds, and what pins it.
    fn held_text(&self, s: &mut String) {
        if !self.held_by_driver.is_empty() {
            let _ = writeln!(s, "\nreleased by the program, never deleted by the driver:");
            if self.held_by_driver.len() > 1 {
                for g in &self.held_by_driver_groups {
                    let _ = writeln!(s, "  {}", g.line());
                }
            }
            for h in &self.held_by_driver {
                let pins = if h.pinned_by.is_empty() {
                    "nothing the program holds refers to it".to_string()
                } else {
                    format!("pinned by {}", h.pinned_by.join(", "))
                };
                let _ = writeln!(
                    s,
                    "  {}: {pins}{}",
                    h.what(),
                    if h.uncertain {
                        " (uncertain: its process's last records never arrived)"
                    } else {
                        ""
                    }
                );
            }
        }
    }

    /// The Markdown section of what the driver still holds: the groups, then
    /// each object.
    fn held_markdown(&self, s: &mut String) {
        if self.held_by_driver.is_empty() {
            return;
        }
        let _ = writeln!(s, "\n## Released, never deleted by the driver\n");
        if self.held_by_driver.len() > 1 {
            for g in &self.held_by_driver_groups {
                let _ = writeln!(s, "- {}", g.line());
            }
        }
        for h in &self.held_by_driver {
            let _ = writeln!(
                s,
                "- {}; pinned by: {}",
                h.what(),
                if h.pinned_by.is_empty() {
                    "nothing the program holds".to_string()
                } else {
                    h.pinned_by.join(", ")
                }
            );
        }
    }

    /// How long the program ran, in the seconds the text reports say.
    fn seconds(&self) -> f64 {
        self.duration_ms / 1e3
    }

    pub fn markdown(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(
            s,
            "# gpulab watch: {}\n",
            md_code(&self.command_line(), false)
        );
        let _ = writeln!(
            s,
            "- pid {}, {} after {:.2} s",
            self.pid,
            self.ended,
            self.seconds()
        );
        let _ = writeln!(
            s,
            "- {} calls ({} failed) from {} process(es) ({})",
            self.calls,
            self.failed_calls,
            self.processes.len(),
            self.apis()
        );
        for line in self.ran_out_lines() {
            let _ = writeln!(s, "- {}", line.trim_start());
        }
        for line in self.memory_lines() {
            let _ = writeln!(s, "- {line}");
        }
        if let Some(h) = &self.holders {
            let _ = write!(
                s,
                "\n## Who holds it ({})\n\n{}",
                self.memory_source_label(),
                h.table().markdown()
            );
            for line in h.lines() {
                let _ = writeln!(s, "- {line}");
            }
        }
        for a in &self.frameworks {
            let _ = writeln!(s, "- {}", a.line());
        }
        if !self.ranks.is_empty() {
            let _ = writeln!(s, "\n## {}\n", upper_first(&self.ranks_heading()));
            for r in &self.ranks {
                let mut lines = r.lines(!self.gpus.is_empty()).into_iter();
                if let Some(head) = lines.next() {
                    let _ = writeln!(s, "- {}", head.trim_start());
                }
                for line in lines {
                    let _ = writeln!(s, "  - {}", line.trim_start());
                }
            }
        }
        let _ = write!(s, "\n{}", self.kinds_table().markdown());
        self.alive_markdown(&mut s);
        self.held_markdown(&mut s);
        for n in &self.notes {
            let _ = writeln!(s, "\n> note: {n}");
        }
        for w in &self.warnings {
            let _ = writeln!(s, "\n> warning: {w}");
        }
        s
    }

    /// The objects alive at exit, as a Markdown table, then the stacks that made them.
    fn alive_markdown(&self, s: &mut String) {
        if !self.alive_at_exit.is_empty() {
            let _ = writeln!(
                s,
                "\n## Alive at exit\n\n| count | kind | MiB | made by | pid | thread |\n|---:|---|---:|---|---:|---:|"
            );
            for g in &self.alive_at_exit {
                let _ = writeln!(
                    s,
                    "| {} | {}{} | {:.2} | {} | {} | {} |",
                    g.count,
                    g.kind.plural(),
                    match g.section() {
                        AliveSection::Leaked => "",
                        AliveSection::Allocator => " (its allocator's)",
                        AliveSection::Runtime => " (the runtime's or a library's)",
                        AliveSection::Uncertain => " (uncertain)",
                    },
                    mib(g.bytes),
                    md_code(&g.created_by, true),
                    g.pid,
                    g.thread
                );
            }
            for (i, g) in self.alive_at_exit.iter().enumerate() {
                if g.backtrace.is_empty() {
                    continue;
                }
                let _ = writeln!(
                    s,
                    "\nRow {}: {} {} made at\n",
                    i + 1,
                    g.count,
                    g.kind.plural()
                );
                for f in &g.backtrace {
                    let _ = writeln!(s, "- {}", md_code(&f.describe(), false));
                }
            }
        }
    }

    /// Per kind of object: made, released, most alive at once, alive at exit.
    fn kinds_table(&self) -> Table {
        Table {
            columns: &[
                ("objects", 12, false),
                ("created", 8, true),
                ("released", 9, true),
                ("most alive", 11, true),
                ("alive at exit", 14, true),
                ("MiB alive", 10, true),
            ],
            rows: self
                .kinds
                .iter()
                .map(|k| {
                    vec![
                        k.kind.plural().to_string(),
                        k.created.to_string(),
                        k.released.to_string(),
                        k.peak_alive.to_string(),
                        k.alive_at_exit.to_string(),
                        format!("{:.2}", mib(k.alive_bytes)),
                    ]
                })
                .collect(),
        }
    }

    /// What the program's memory did, each figure with what it is measured against.
    fn memory_lines(&self) -> Vec<String> {
        let mut out = Vec::new();
        let used: Vec<&GpuReport> = self.gpus.iter().filter(|g| !g.pids.is_empty()).collect();
        if used.len() > 1 {
            out.push(format!(
                "the program held memory on {} GPUs: each is measured apart, and who holds it \
                 is said per process below (one GPU's reading set against objects on all of \
                 them would explain nothing)",
                used.len()
            ));
            out.extend(used.iter().map(|g| g.line()));
        } else if let [g] = used.as_slice()
            && g.index != self.gpus.first().map_or(0, |f| f.index)
        {
            out.push(format!(
                "the program held memory on GPU {} alone: its figures are that GPU's, per \
                 process below",
                g.index
            ));
            out.push(g.line());
        }
        if let Some(peak) = self.peak_memory_bytes {
            out.push(format!(
                "peak memory ({}): {:.1} MiB",
                self.memory_source_label(),
                mib(peak)
            ));
        }
        if let (Some(growth), Some(base)) =
            (self.peak_device_growth_bytes, self.device_baseline_bytes)
        {
            out.push(format!(
                "device memory: at most {:.1} MiB above the {:.1} MiB in use before the program \
                 started (all processes on the GPU)",
                mib(growth),
                mib(base)
            ));
        }
        out
    }

    /// What the per-process section says and measures against.
    fn ranks_heading(&self) -> String {
        let named: Vec<String> = self
            .gpus
            .iter()
            .filter(|g| !g.pids.is_empty())
            .map(|g| format!("GPU {} {}", g.index, g.name))
            .collect();
        format!(
            "per process ({} of the program; {}objects as each process's agent reported \
             them){}",
            self.ranks.len(),
            if self.gpus.is_empty() {
                ""
            } else {
                "bytes on each GPU are NVML's per-process figure, "
            },
            if named.is_empty() {
                String::new()
            } else {
                format!("; {}", named.join(", "))
            }
        )
    }

    fn memory_source_label(&self) -> &str {
        match self.memory_source {
            MemorySource::Rss => "the program's resident host memory",
            MemorySource::Nvml => "the program's own device memory, NVML",
            MemorySource::Unavailable => "not measured",
        }
    }
}

/// `text` with its first letter in capitals.
fn upper_first(text: &str) -> String {
    let mut chars = text.chars();
    chars
        .next()
        .map(|c| c.to_uppercase().chain(chars).collect())
        .unwrap_or_default()
}

/// Per kind: made, released, alive and its bytes, the peak alive at once.
fn kinds(run: &Run) -> Vec<KindReport> {
    let index = &run.live_index;
    let mut kinds: BTreeMap<ObjKind, KindReport> = BTreeMap::new();
    for (&kind, &created) in index.made_count.iter().filter(|(_, n)| **n > 0) {
        let released = index.released_count.get(&kind).copied().unwrap_or(0);
        let peak = run.peak_live.get(&kind).copied().unwrap_or(0);
        kinds.insert(
            kind,
            KindReport {
                kind,
                created,
                released,
                alive_at_exit: created.saturating_sub(released),
                alive_bytes: 0,
                peak_alive: u64::try_from(peak).unwrap_or(0),
            },
        );
    }
    for ((kind, ..), (_, bytes)) in &index.unreleased {
        if let Some(k) = kinds.get_mut(kind) {
            k.alive_bytes += bytes;
        }
    }
    kinds.into_values().collect()
}

/// What the program never released, grouped by who made it.
fn alive_groups(run: &Run, incomplete: &BTreeSet<u32>) -> Vec<AliveGroup> {
    let reporting = run.frameworks.names();
    run.live_index
        .unreleased
        .iter()
        .map(|((kind, created_by, pid, thread, stack), (count, bytes))| {
            let owner = stack
                .and_then(|id| run.owners.get(&id).copied())
                .unwrap_or(Owner::Unknown);
            AliveGroup {
                kind: *kind,
                count: *count,
                bytes: *bytes,
                created_by: created_by.clone(),
                owner: owner.as_str().into(),
                kept_by_allocator: matches!(
                    kind,
                    ObjKind::Buffer | ObjKind::MemHandle | ObjKind::HostBuffer
                ) && owner.framework().is_some_and(|f| reporting.contains(&f)),
                kept_by_runtime: matches!(
                    kind,
                    ObjKind::Context | ObjKind::Program | ObjKind::Stream
                ) && (!matches!(owner, Owner::Program | Owner::Unknown)
                    || stack
                        .and_then(|id| run.stacks.get(&id))
                        .and_then(|frames| frames.first())
                        .is_some_and(runtime_frame)),
                pid: *pid,
                thread: *thread,
                uncertain: incomplete.contains(pid),
                backtrace: stack
                    .and_then(|id| run.stacks.get(&id))
                    .cloned()
                    .unwrap_or_default(),
            }
        })
        .collect()
}

/// A frame in the CUDA runtime: its shared library, or its static copy linked
/// into the program or a library (named `libcudart_static_<hash>`).
fn runtime_frame(f: &Frame) -> bool {
    let file = f.module.rsplit('/').next().unwrap_or(&f.module);
    file.starts_with("libcudart")
        || f.function
            .as_deref()
            .is_some_and(|name| name.starts_with("libcudart_static"))
}

/// Objects the program released that the driver has not destroyed yet, and
/// what the program still holds that pins each.
fn held(run: &Run, watched: &BTreeSet<ObjKind>, incomplete: &BTreeSet<u32>) -> Vec<HeldObject> {
    let start = run.meta.as_ref().map_or(0, |m| m.t_ns);
    let (lives, index) = (&run.ledger, &run.live_index);
    let reserves: BTreeMap<u64, crate::run::reserves::Reserve> = run
        .reserves
        .measured()
        .flat_map(|r| r.ids.clone().into_iter().map(move |id| (id, r.clone())))
        .collect();
    let reserve_of = |id: u64| {
        reserves.get(&id).map(|r| HeldReserve {
            bytes: r.bytes,
            with: r
                .ids
                .iter()
                .filter(|other| **other != id)
                .map(|other| {
                    let kind = lives.get(other).map_or("object", |o| o.kind.as_str());
                    format!("{kind} {}", short_id(*other))
                })
                .collect(),
        })
    };
    index
        .owed
        .iter()
        .filter_map(|id| Some((*id, lives.get(id)?)))
        .filter(|(_, life)| watched.contains(&life.kind))
        .map(|(id, life)| HeldObject {
            id,
            kind: life.kind,
            bytes: life.bytes,
            released_ms: life.released_ns.unwrap_or(start).saturating_sub(start) as f64 / 1e6,
            reserve: reserve_of(id),
            pinned_by: pinned_by(id, lives, &index.referring),
            // Ids carry their process's pid in the upper half.
            uncertain: incomplete.contains(&((id >> 32) as u32)),
        })
        .collect()
}

/// Per kind, how long destroyed objects outlived their release: the count,
/// median and longest the live index keeps, no list sorted.
fn outlived(run: &Run, watched: &BTreeSet<ObjKind>) -> Vec<Outlived> {
    run.live_index
        .outlived_ns
        .iter()
        .filter(|(kind, _)| watched.contains(kind))
        .filter_map(|(kind, lags)| {
            Some(Outlived {
                kind: *kind,
                count: lags.len() as u64,
                median_ms: lags.median()? as f64 / 1e6,
                max_ms: lags.max()? as f64 / 1e6,
            })
        })
        .collect()
}

/// The stream's notes, and the warnings about what the report cannot vouch for.
fn notes_and_warnings(run: &Run, processes: &[ProcessReport]) -> (Vec<String>, Vec<String>) {
    let (infos, warned): (Vec<_>, Vec<_>) =
        run.notes_said().partition(|n| n.level == NoteLevel::Info);
    let mut notes: Vec<String> = infos.into_iter().map(|n| n.text.clone()).collect();
    let mut warnings: Vec<String> = warned.into_iter().map(|n| n.text.clone()).collect();
    if processes.is_empty() {
        warnings.push(
            "the agent never reported: the program made no OpenCL call through the ICD \
             loader and initialised no CUDA driver, or its loader ignores OPENCL_LAYERS \
             (ocl-icd before 2.3, or a vendor libOpenCL linked directly), or the processes \
             that made the calls could not reach gpulab (one that changed its user and then \
             started another program cannot map gpulab's memory; a daemon that detached \
             made its calls more than 2 s after the program ended). This report is empty because nothing was seen, not because nothing \
             leaked; `gpulab doctor` checks the loader and libcupti"
                .into(),
        );
    }
    for (framework, why) in run.frameworks.unreadable() {
        warnings.push(format!(
            "{}: gpulab's Python hook cannot read all of its figures, {why}; the driver's view \
             stands without them",
            framework.label()
        ));
    }
    for p in processes {
        for why in p.unwatched.iter().chain(&p.conflicts) {
            warnings.push(format!("pid {}: {why}", p.pid));
        }
        match (p.records, p.dropped) {
            (Some(_), _) if !p.complete() => warnings.push(format!(
                "pid {}: the agent sent {} records but {} arrived; what this report says \
                 of its objects is uncertain",
                p.pid,
                p.records.unwrap_or(0),
                p.received
            )),
            (Some(_), Some(d)) if d > 0 => warnings.push(format!(
                "pid {}: {d} call records were dropped while gpulab was behind (object \
                 records never are): call counts above miss them",
                p.pid
            )),
            (Some(_), _) => {}
            (None, _) => warnings.push(format!(
                "pid {}: still running when gpulab stopped reading its records; what it did \
                 after that is not shown, so what this report says of its objects is uncertain",
                p.pid
            )),
        }
        if let Some(lost) = p.lost {
            warnings.push(format!(
                "pid {}: {lost} records never arrived (the process ended holding them while \
                 gpulab was behind); what this report says of its objects may miss them",
                p.pid
            ));
        }
        if let Some(cut) = p.cut {
            notes.push(format!(
                "pid {}: {cut} record{} a thread was writing when the process ended (it \
                 exited or was killed while that thread was inside a watched call, which \
                 never returned to the program) {} not in this report",
                p.pid,
                if cut == 1 { "" } else { "s" },
                if cut == 1 { "is" } else { "are" },
            ));
        }
    }
    (notes, warnings)
}

/// How the program ended, and its exit code when it exited.
fn ended(run: &Run) -> (String, Option<i32>) {
    match run.end.as_ref().map(|e| &e.status) {
        Some(EndStatus::Finished) => ("exited with status 0".to_string(), Some(0)),
        Some(EndStatus::Exited { code }) => (format!("exited with status {code}"), Some(*code)),
        Some(EndStatus::Cancelled) => ("stopped by gpulab".to_string(), None),
        Some(s) => (s.label(), None),
        None => ("still running when the stream ended".to_string(), None),
    }
}

/// Live objects whose references reach `target`, as `event #3 -> kernel #2`.
fn pinned_by(target: u64, lives: &BTreeMap<u64, ObjState>, live: &BTreeSet<u64>) -> Vec<String> {
    let mut out = Vec::new();
    for &id in live {
        if let Some(path) = path_to(id, target, lives, 0) {
            out.push(
                path.iter()
                    .filter_map(|i| {
                        let kind = lives.get(i)?.kind;
                        Some(format!("{} {}", kind.as_str(), short_id(*i)))
                    })
                    .collect::<Vec<_>>()
                    .join(" -> "),
            );
        }
    }
    out
}

/// References form short chains (event -> kernel -> buffer -> context); the depth
/// limit keeps a malformed stream from recursing deep.
fn path_to(from: u64, to: u64, lives: &BTreeMap<u64, ObjState>, depth: usize) -> Option<Vec<u64>> {
    if depth > 6 {
        return None;
    }
    let life = lives.get(&from)?;
    if life.refs.contains(&to) {
        return Some(vec![from]);
    }
    life.refs.iter().find_map(|r| {
        let mut rest = path_to(*r, to, lives, depth + 1)?;
        rest.insert(0, from);
        Some(rest)
    })
}

fn processes(run: &Run) -> Vec<ProcessReport> {
    let mut by_pid: BTreeMap<u32, ProcessReport> = BTreeMap::new();
    for a in &run.agents {
        let p = by_pid.entry(a.pid).or_insert(ProcessReport {
            pid: a.pid,
            parent_pid: a.parent_pid,
            exe: String::new(),
            apis: Vec::new(),
            unwatched: Vec::new(),
            conflicts: Vec::new(),
            records: None,
            dropped: None,
            coalesced: None,
            signal: None,
            lost: None,
            cut: None,
            received: 0,
        });
        match &a.state {
            AgentState::Attached { exe, .. } => {
                p.exe = exe.clone();
                p.apis.push(a.api.clone());
            }
            // A process that exec'd ends each image: the counts add up.
            AgentState::Detached {
                records,
                dropped,
                coalesced,
                signal,
                lost,
                cut,
            } => {
                p.records = Some(p.records.unwrap_or(0) + records);
                p.dropped = Some(p.dropped.unwrap_or(0) + dropped);
                p.coalesced = Some(p.coalesced.unwrap_or(0) + coalesced);
                p.lost = Some(p.lost.unwrap_or(0) + lost).filter(|n| *n > 0);
                p.cut = Some(p.cut.unwrap_or(0) + cut).filter(|n| *n > 0);
                p.signal = *signal;
            }
            AgentState::Unavailable { reason } => {
                p.unwatched.push(format!("{}: {reason}", a.api));
            }
            AgentState::Conflict { reason } => p.conflicts.push(reason.clone()),
        }
    }
    // What arrived of each process's records: its calls, the objects whose ids
    // carry its pid, its device spans, what its frameworks said, and its
    // `attached` and `unavailable`
    // records (`detached` counts none of itself).
    // (A device span's queue is a stream id of its process, or its default
    // stream, id 0 there: the fold counts it for the pid in its upper half.)
    for (pid, n) in &run.folds.received {
        if let Some(p) = by_pid.get_mut(pid) {
            p.received += n;
        }
    }
    let agents = run
        .agents
        .iter()
        .filter(|a| !matches!(a.state, AgentState::Detached { .. }));
    for a in agents {
        if let Some(p) = by_pid.get_mut(&a.pid) {
            p.received += 1;
        }
    }
    by_pid.into_values().collect()
}

/// A text report's frame is cut to this many characters (C++ template names
/// run to thousands); JSON and Markdown keep it whole.
pub(crate) const FRAME_WIDTH: usize = 160;

#[cfg(test)]
mod tests {
    use super::{WatchReport, md_code};
    use crate::run::{OPENCL_SET_UP, Run};
    use crate::trace::{AgentEvent, AgentState, Event, Note, NoteLevel};

    fn note(text: String) -> Event {
        Event::Note(Note {
            t_ns: 1,
            level: NoteLevel::Info,
            text,
            line: None,
        })
    }

    fn attached(api: &str) -> Event {
        Event::Agent(AgentEvent {
            t_ns: 2,
            pid: 7,
            parent_pid: 1,
            api: api.into(),
            state: AgentState::Attached {
                exe: "app".into(),
                destruction: Vec::new(),
                rank: None,
            },
        })
    }

    /// What the agent read inside a refused allocation leads the report: the
    /// size asked, who called the driver and from where, the driver's free
    /// memory then; `--oom FILE` holds the same moment.
    #[test]
    fn a_refused_allocation_says_its_size_its_caller_and_the_free_memory() {
        use crate::trace::{Call, CallName, CallStatus, Frame, Refusal, Stack};
        let stack = (7u64 << 32) | 1;
        let frame = Frame {
            module: "/venv/torch/lib/libc10_cuda.so".into(),
            address: 0x1234,
            build_id: None,
            function: Some("c10::cuda::alloc_block".into()),
            location: None,
        };
        let refused = Event::Call(Call {
            seq: 0,
            pid: 7,
            thread: 7,
            line: None,
            iter: Vec::new(),
            tag: None,
            api: CallName::verbatim("cuMemAlloc"),
            driver: "cuMemAlloc_v2".into(),
            begin_ns: 10,
            end_ns: 20,
            status: CallStatus::Error {
                code: 2,
                name: "CUDA_ERROR_OUT_OF_MEMORY".into(),
            },
            expect_error: false,
            mem_before: None,
            mem_after: None,
            object: None,
            cuda: None,
            memory_step: None,
            refused: Some(Box::new(Refusal {
                asked_bytes: Some(8 << 30),
                free_bytes: Some(3 << 30),
                stack: Some(stack),
            })),
        });
        let named = Event::Stack(Stack {
            t_ns: 5,
            id: stack,
            frames: vec![frame.clone()],
        });
        let run = Run::from_events(&[attached("cuda"), named, refused]);
        let report = WatchReport::from_run(&run);
        let r = report.ran_out.as_ref().expect("a refusal");
        assert_eq!(
            (r.asked_bytes, r.driver_free_bytes, r.owner.as_deref()),
            (Some(8 << 30), Some(3 << 30), Some("pytorch"))
        );
        assert_eq!(r.backtrace, vec![frame]);
        let text = report.text();
        let lead: Vec<&str> = text
            .lines()
            .skip_while(|l| !l.starts_with("ran out of memory"))
            .take(3)
            .collect();
        assert!(
            lead[0].starts_with("ran out of memory: cuMemAlloc of 8192.0 MiB, through PyTorch"),
            "{text}"
        );
        assert!(lead[1].contains("c10::cuda::alloc_block"), "{text}");
        assert!(lead[2].contains("3072.0 MiB free right after"), "{text}");
        let oom = serde_json::to_value(report.out_of_memory()).expect("json");
        assert_eq!(oom["ran_out"]["asked_bytes"], 8u64 << 30);
        assert!(oom["framework_refused"].is_null());
    }

    /// The modules the CUDA runtime registers for a library's kernels (NCCL
    /// links its own copy) and a framework's streams are theirs for the
    /// process's life; a module the program's own code loaded and never
    /// unloaded, and one with no stack to tell, stay its leaks.
    #[test]
    fn what_the_runtime_or_a_library_made_for_itself_is_not_the_programs_leak() {
        use super::AliveSection;
        use crate::trace::{Frame, ObjKind, ObjectAction, ObjectEvent, Stack};
        let frame = |module: &str, function: &str| Frame {
            module: module.into(),
            address: 1,
            build_id: None,
            function: Some(function.into()),
            location: None,
        };
        let stacks = [
            (
                1,
                frame("/venv/nccl/lib/libnccl.so.2", "libcudart_static_7585"),
            ),
            (2, frame("/usr/bin/app", "load_kernels")),
            (
                3,
                frame("/venv/torch/lib/libc10_cuda.so", "initSingleStream"),
            ),
        ];
        let mut events = vec![attached("cuda")];
        for (n, f) in &stacks {
            events.push(Event::Stack(Stack {
                t_ns: 3,
                id: (7 << 32) | n,
                frames: vec![f.clone()],
            }));
        }
        let made = |id: u64, kind: ObjKind, stack: Option<u64>| {
            Event::Object(ObjectEvent {
                t_ns: 4,
                id: (7 << 32) | id,
                kind,
                action: ObjectAction::Created,
                handle: None,
                bytes: 0,
                refcount: 1,
                refs: Vec::new(),
                line: None,
                stack: stack.map(|n| (7 << 32) | n),
            })
        };
        events.push(made(10, ObjKind::Program, Some(1)));
        events.push(made(11, ObjKind::Program, Some(2)));
        events.push(made(12, ObjKind::Stream, Some(3)));
        events.push(made(13, ObjKind::Program, None));
        // The process ended with all its records in (its `attached` and four
        // objects): none of its groups is uncertain.
        events.push(Event::Agent(AgentEvent {
            t_ns: 5,
            pid: 7,
            parent_pid: 1,
            api: "cuda".into(),
            state: AgentState::Detached {
                records: 5,
                dropped: 0,
                coalesced: 0,
                signal: None,
                lost: 0,
                cut: 0,
            },
        }));
        let report = WatchReport::from_run(&Run::from_events(&events));
        let mut sections: Vec<(ObjKind, String, AliveSection)> = report
            .alive_at_exit
            .iter()
            .map(|g| (g.kind, g.owner.clone(), g.section()))
            .collect();
        sections.sort_by_key(|(k, o, _)| (*k, o.clone()));
        assert_eq!(
            sections,
            [
                (ObjKind::Program, "nccl".into(), AliveSection::Runtime),
                (ObjKind::Program, "program".into(), AliveSection::Leaked),
                (ObjKind::Program, "unknown".into(), AliveSection::Leaked),
                (ObjKind::Stream, "pytorch".into(), AliveSection::Runtime),
            ]
        );
        assert!(super::runtime_frame(&frame(
            "/usr/lib/libcudart.so.13",
            "cudaMalloc"
        )));
        assert!(!super::runtime_frame(&frame("/usr/bin/app", "main")));
    }

    #[test]
    fn opencl_set_up_is_said_only_to_a_program_that_called_opencl() {
        let set_up = note(format!("{OPENCL_SET_UP}gpulab preloaded a loader"));
        let other = note("the agent was built for CUDA 13".into());
        let cuda = Run::from_events(&[set_up.clone(), other.clone(), attached("cuda")]);
        assert_eq!(
            WatchReport::from_run(&cuda).notes,
            vec!["the agent was built for CUDA 13".to_string()]
        );
        let opencl = Run::from_events(&[set_up, other, attached("opencl")]);
        assert_eq!(WatchReport::from_run(&opencl).notes.len(), 2);
    }

    #[test]
    fn code_spans_hold_backticks_and_table_bars() {
        assert_eq!(md_code("./app", false), "`./app`");
        assert_eq!(md_code("echo `x` | wc", false), "``echo `x` | wc``");
        assert_eq!(md_code("`a|b", true), "`` `a\\|b ``");
    }
}
