//! The NVML side of a probe: finds the NVML device behind an OpenCL/CUDA device by
//! PCI bus id and reads its memory and the worker's own share of it.

use nvml_wrapper::enums::device::UsedGpuMemory;
use nvml_wrapper::error::NvmlError;
use nvml_wrapper::{Device, Nvml};

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, OnceLock};
use std::thread::JoinHandle;
use std::time::Duration;

use super::{Reading, Result, TelemetryError};
use gpulab_events::{DeviceInfo, MemorySource, OtherProcess, Sample};
use gpulab_host::clock::now_ns;

pub(crate) const UNAVAILABLE: &str =
    "NVML unavailable: libnvidia-ml.so.1 not found — no device-memory telemetry";

/// Device memory grown this far over the baseline, for `UNLISTED_FOR_NS`, with NVML
/// still not listing the worker means NVML cannot see its pid. Measured on an H100:
/// a new CUDA context shows ~20 MiB in "used" a few ms before NVML lists its process,
/// so growth alone proves nothing; a full second of it does.
const UNLISTED_SLACK: u64 = 16 << 20;
const UNLISTED_FOR_NS: u64 = 1_000_000_000;

/// What NVML's process list has told us about the worker so far.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PidState {
    /// Not listed yet; since when memory has grown without it being listed.
    NotYetListed {
        grown_since: Option<u64>,
    },
    Listed,
    /// NVML lists other pids (or none) while memory grew: inside a container the
    /// driver reports host pids, which never match the worker's.
    Unmatched,
}

/// Follows the worker's pid (or a watched program's process tree) through
/// NVML's process lists.
#[derive(Debug, Clone)]
pub(crate) struct PidTracker {
    pid: u32,
    baseline: u64,
    state: PidState,
}

impl PidTracker {
    pub(crate) fn new(pid: u32, baseline: u64) -> PidTracker {
        PidTracker {
            pid,
            baseline,
            state: PidState::NotYetListed { grown_since: None },
        }
    }

    /// The worker's own bytes from one process list (None when the list could not
    /// be read), and a note when the tracker changes its mind about what it shows.
    pub(crate) fn observe(
        &mut self,
        t_ns: u64,
        listed: Option<&[(u32, Option<u64>)]>,
        used: u64,
    ) -> (Option<u64>, Option<String>) {
        let pid = self.pid;
        self.observe_tree(t_ns, listed, used, &[pid])
    }

    /// As [`PidTracker::observe`], summing the share of every pid in `tree`.
    pub(crate) fn observe_tree(
        &mut self,
        t_ns: u64,
        listed: Option<&[(u32, Option<u64>)]>,
        used: u64,
        tree: &[u32],
    ) -> (Option<u64>, Option<String>) {
        let Some(listed) = listed else {
            return (None, None);
        };
        let pid = self.pid;
        let mut found = false;
        let mut known: Option<u64> = None;
        // A process can be listed once per MIG instance; its share is the sum,
        // and so is a process tree's.
        for &(p, bytes) in listed {
            if tree.contains(&p) {
                found = true;
                if let Some(b) = bytes {
                    known = Some(known.unwrap_or(0) + b);
                }
            }
        }
        if found {
            let note = (self.state == PidState::Unmatched).then(|| {
                format!("NVML now lists the worker (pid {pid}): showing its own memory again")
            });
            self.state = PidState::Listed;
            return (known, note);
        }
        let grown = used > self.baseline.saturating_add(UNLISTED_SLACK);
        match self.state {
            // Listed before and gone now: the worker destroyed its context.
            PidState::Listed => (Some(0), None),
            PidState::Unmatched => (None, None),
            PidState::NotYetListed { grown_since } => match (grown, grown_since) {
                (false, _) => {
                    self.state = PidState::NotYetListed { grown_since: None };
                    (None, None)
                }
                (true, None) => {
                    self.state = PidState::NotYetListed {
                        grown_since: Some(t_ns),
                    };
                    (None, None)
                }
                (true, Some(since)) if t_ns.saturating_sub(since) >= UNLISTED_FOR_NS => {
                    self.state = PidState::Unmatched;
                    let note = format!(
                        "NVML does not list the worker (pid {pid}) although device memory grew \
                         by {} MiB (inside a container NVML reports host pids): showing \
                         device-wide memory above the run's baseline of {} MiB instead of the \
                         worker's own",
                        (used - self.baseline) >> 20,
                        self.baseline >> 20,
                    );
                    (None, Some(note))
                }
                (true, Some(_)) => (None, None),
            },
        }
    }

    #[cfg(test)]
    fn state(&self) -> PidState {
        self.state
    }
}

/// NVML, initialised once per process and never shut down. Every run used to
/// init and shut it down three times in the parent (before the run, sampler,
/// after-exit watch): on the H100 each cycle left one file descriptor open
/// (the GPU soak: 15 → 110 fds over 95 runs), and each init cost 10-17 ms. A
/// failed init is not kept: the next caller tries again.
pub(crate) fn shared() -> std::result::Result<&'static Nvml, NvmlError> {
    static NVML: OnceLock<Nvml> = OnceLock::new();
    if let Some(nvml) = NVML.get() {
        return Ok(nvml);
    }
    let nvml = Nvml::init()?;
    // Two threads racing here both init; the loser's is dropped (NVML counts
    // its inits, so that is one shutdown of two).
    Ok(NVML.get_or_init(|| nvml))
}

/// Starts NVML's init on a thread of its own, so it overlaps the driver's
/// (the worker: cuInit and the context take ~225 ms on the H100, NVML ~15 ms).
pub fn warm_up() {
    let _ = std::thread::Builder::new()
        .name("gpulab-nvml-init".into())
        .spawn(|| {
            let _ = shared();
        });
}

pub(crate) struct NvmlProbe {
    // The handle, not its index: looking it up again on every reading was one
    // more trip through NVML a tick, after the sampler's sleep left it cold.
    device: Device<'static>,
    total: u64,
    baseline: u64,
    tracker: PidTracker,
    /// Sum the program's whole process tree (`watch`), not one worker's pid.
    tree: bool,
    listed: ListCache,
    /// Attribute moves to the worker between lists (its per-line readings);
    /// off for the sampler and after a list contradicted what was attributed.
    attribute: bool,
    /// Said once, when a list contradicted the moves attributed to the worker.
    contradiction: Option<String>,
    /// `watch`: the other processes last said (pid, bytes), to say them
    /// again only when they change.
    others_said: Option<Vec<(u32, Option<u64>)>>,
    /// A lab on more than one device: every other GPU, whose bytes of the
    /// worker are added to its own (see [`NvmlProbe::every_gpu`]).
    other_gpus: Vec<OtherGpu>,
    /// A lab that makes managed memory (see [`NvmlProbe::managed`]).
    managed: Option<DeviceLess>,
}

/// The worker's figure as the device's less the rest of it: what the device
/// held beyond every process NVML lists (`unlisted`), taken when the worker
/// held no managed memory yet, and what the other listed processes hold now.
/// Managed pages on the device are in NVML's device figure and in no
/// process's (an H200, driver 580: a 256 MiB prefetch moved the device's
/// figure and `cudaMemGetInfo` by 256 MiB, the process's by nothing).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct DeviceLess {
    pub(crate) unlisted: u64,
}

impl DeviceLess {
    /// From one reading of the device (`used`) and its list: what no listed
    /// process holds. None without a list.
    pub(crate) fn taken(used: u64, listed: Option<&[(u32, Option<u64>)]>) -> Option<DeviceLess> {
        let listed_bytes: u64 = listed?.iter().filter_map(|(_, b)| *b).sum();
        Some(DeviceLess {
            unlisted: used.saturating_sub(listed_bytes),
        })
    }

    /// The worker's memory at a reading: the device's figure less what no
    /// process held then and what the processes other than `pid` hold now;
    /// None where another process is listed without a figure (MIG, no
    /// permission), whose memory cannot be taken out.
    pub(crate) fn worker(&self, pid: u32, used: u64, listed: &[(u32, Option<u64>)]) -> Option<u64> {
        let others: Option<u64> = listed
            .iter()
            .filter(|(p, _)| *p != pid)
            .map(|(_, b)| *b)
            .sum();
        Some(used.saturating_sub(self.unlisted + others?))
    }
}

/// Another GPU the worker may hold memory on, and what it last held there.
struct OtherGpu {
    device: Device<'static>,
    /// Memory in use on it when its process list was last read.
    used: Option<u64>,
    /// The worker's bytes on it then.
    bytes: u64,
}

/// NVML's process list costs ~20x a memory reading (it is most of the
/// sampler's CPU), and what it says can only change when device memory does:
/// a process's share is part of `used`. So the list is read again when `used`
/// moved since the last list, and at least every `LIST_EVERY_NS` (two
/// processes' changes that cancel out, a pid that appears).
///
/// Right after a move the list costs 33 µs on an H100 (5-8 µs while memory is
/// steady), more than a whole script line may cost. So the worker's per-line
/// readings may *attribute* a move to the worker instead (`attributed`): within
/// `ATTRIBUTE_FOR_NS` of a list that listed it, the worker's share is the listed
/// share plus the device-wide change since. The next list checks every move
/// counted that way (`contradicted`): on a device nobody else touches they all
/// hold; where they do not, the probe says so and reads the list after every move.
#[derive(Debug, Clone, Default)]
pub(crate) struct ListCache {
    /// When the list was last read, device memory then, and the share found.
    last: Option<(u64, u64, Option<u64>)>,
    /// Whether a share was attributed since that list.
    attributed: bool,
}

pub(crate) const LIST_EVERY_NS: u64 = 100_000_000;

/// How long after a list moves of device memory may be attributed to the
/// worker: a tight loop of allocating lines then reads the list about once a
/// millisecond instead of after each line.
pub(crate) const ATTRIBUTE_FOR_NS: u64 = 1_000_000;

impl ListCache {
    /// The share the last list gave, if it still holds at `t_ns` with `used`.
    pub(crate) fn still(&self, t_ns: u64, used: u64) -> Option<Option<u64>> {
        let (at, was, share) = self.last?;
        (was == used && t_ns.saturating_sub(at) < LIST_EVERY_NS).then_some(share)
    }

    /// The worker's share if every byte `used` moved since the last list was
    /// the worker's; None when that list is older than `ATTRIBUTE_FOR_NS`, did
    /// not list the worker, or the move is larger than what it held.
    pub(crate) fn attributed(&mut self, t_ns: u64, used: u64) -> Option<u64> {
        let (at, was, share) = self.last?;
        if t_ns.saturating_sub(at) >= ATTRIBUTE_FOR_NS {
            return None;
        }
        let share = share?.checked_add(used)?.checked_sub(was)?;
        self.attributed = true;
        Some(share)
    }

    /// How far a fresh list's `share` is from what the moves attributed since
    /// the last list added up to (bytes, signed), when it is not.
    pub(crate) fn contradicted(&self, used: u64, share: Option<u64>) -> Option<i128> {
        let (_, was, Some(before)) = self.last? else {
            return None;
        };
        if !self.attributed {
            return None;
        }
        let counted = i128::from(before) + i128::from(used) - i128::from(was);
        let listed = i128::from(share?);
        (listed != counted).then_some(listed - counted)
    }

    pub(crate) fn read(&mut self, t_ns: u64, used: u64, share: Option<u64>) {
        self.last = Some((t_ns, used, share));
        self.attributed = false;
    }
}

/// NVIDIA GPU 0 as NVML names it, with its memory in use when it was opened.
/// `watch` opens it before it starts the program (so `used` is the device
/// without it) and turns it into the sampling probe afterwards, so NVML starts
/// once per watch (it takes tens of milliseconds). NVML stays open across the
/// program's spawn: its exec leaves every NVML state behind.
pub struct Gpu0 {
    device: Device<'static>,
    pub info: DeviceInfo,
    pub used: u64,
}

pub(crate) fn first_gpu() -> Option<Gpu0> {
    let nvml = shared().ok()?;
    let device = nvml.device_by_index(0).ok()?;
    let mem = device.memory_info().ok()?;
    let info = DeviceInfo {
        name: device.name().unwrap_or_else(|_| "NVIDIA GPU 0".into()),
        vendor: "NVIDIA Corporation".into(),
        driver_version: nvml.sys_driver_version().unwrap_or_default(),
        platform: String::new(),
        kind: gpulab_events::DeviceKind::Gpu,
        total_bytes: Some(mem.total),
        pci_bus_id: device.pci_info().ok().map(|p| p.bus_id),
    };
    Some(Gpu0 {
        device,
        info,
        used: mem.used,
    })
}

impl NvmlProbe {
    /// The probe for `info`, or None with the reason in `notes`.
    pub(crate) fn open(info: &DeviceInfo, pid: u32, notes: &mut Vec<String>) -> Option<NvmlProbe> {
        let nvml = match shared() {
            Ok(nvml) => nvml,
            Err(e) => {
                notes.push(unavailable_note(&e));
                return None;
            }
        };
        let index = pick_device(nvml, info, notes)?;
        let device = match nvml.device_by_index(index) {
            Ok(device) => device,
            Err(e) => {
                notes.push(format!(
                    "NVML cannot open device {index}: {e} — no device-memory telemetry"
                ));
                return None;
            }
        };
        let mem = match device.memory_info() {
            Ok(mem) => mem,
            Err(e) => {
                notes.push(format!(
                    "NVML cannot read memory of device {index}: {e} — no device-memory telemetry"
                ));
                return None;
            }
        };
        Some(NvmlProbe {
            device,
            total: mem.total,
            baseline: mem.used,
            tracker: PidTracker::new(pid, mem.used),
            tree: false,
            listed: ListCache::default(),
            attribute: false,
            contradiction: None,
            others_said: None,
            other_gpus: Vec::new(),
            managed: None,
        })
    }

    /// NVIDIA GPU 0, for a program that does not say which GPU it uses (`watch`),
    /// read on behalf of `pid` against the memory in use when it was opened.
    pub(crate) fn of_gpu0(gpu: Gpu0, pid: u32) -> NvmlProbe {
        NvmlProbe {
            device: gpu.device,
            total: gpu.info.total_bytes.unwrap_or(0),
            baseline: gpu.used,
            tracker: PidTracker::new(pid, gpu.used),
            tree: true,
            listed: ListCache::default(),
            attribute: false,
            contradiction: None,
            others_said: None,
            other_gpus: Vec::new(),
            managed: None,
        }
    }

    pub(crate) fn total(&self) -> u64 {
        self.total
    }

    /// Device-wide memory in use when the probe was made.
    pub(crate) fn baseline(&self) -> u64 {
        self.baseline
    }

    /// Let moves of device memory count as the worker's until the next list
    /// (see `ListCache`): for the worker's own readings around its lines.
    pub(crate) fn attribute_moves(&mut self) {
        self.attribute = !self.tree && self.other_gpus.is_empty() && self.managed.is_none();
    }

    /// From now on the worker's figure is the device's less the rest of it
    /// ([`DeviceLess`]), the rest taken now: a lab that makes managed memory,
    /// whose pages on the device NVML counts in no process. Returns what no
    /// listed process held, or None (and no change) without a list. Moves
    /// are no longer attributed between lists.
    pub(crate) fn managed(&mut self) -> Option<u64> {
        let used = self.device.memory_info().ok()?.used;
        let rest = DeviceLess::taken(used, compute_processes(&self.device).as_deref())?;
        self.managed = Some(rest);
        self.attribute = false;
        self.listed = ListCache::default();
        Some(rest.unlisted)
    }

    /// Why attributing moves stopped, once: a list contradicted them.
    pub(crate) fn take_contradiction(&mut self) -> Option<String> {
        self.contradiction.take()
    }

    /// From now on the worker's figure is its bytes on every GPU of the host:
    /// a lab that makes another device current (`cudaSetDevice`) holds a
    /// context there, and its buffers. Moves are no longer attributed between
    /// lists (another GPU's list is read whenever its memory moves).
    pub(crate) fn every_gpu(&mut self) {
        let Ok(nvml) = shared() else { return };
        let own = self.device.index().ok();
        let count = nvml.device_count().unwrap_or(0);
        self.other_gpus = (0..count)
            .filter(|i| Some(*i) != own)
            .filter_map(|i| nvml.device_by_index(i).ok())
            .map(|device| OtherGpu {
                device,
                used: None,
                bytes: 0,
            })
            .collect();
        self.attribute = false;
    }

    /// One reading, and a note the first time NVML turns out not to see the
    /// worker; with [`NvmlProbe::every_gpu`], its bytes on the other GPUs added.
    pub(crate) fn read(&mut self) -> Result<(Reading, Option<String>)> {
        let (mut reading, note) = self.read_own()?;
        if !self.other_gpus.is_empty() {
            let pid = self.tracker.pid;
            let mut elsewhere = 0;
            for gpu in &mut self.other_gpus {
                let Ok(mem) = gpu.device.memory_info() else {
                    continue;
                };
                if gpu.used != Some(mem.used) {
                    gpu.bytes = compute_processes(&gpu.device)
                        .unwrap_or_default()
                        .iter()
                        .filter(|(p, _)| *p == pid)
                        .filter_map(|(_, b)| *b)
                        .sum();
                    gpu.used = Some(mem.used);
                }
                elsewhere += gpu.bytes;
            }
            reading.process_bytes = reading.process_bytes.map(|b| b + elsewhere);
        }
        Ok((reading, note))
    }

    fn read_own(&mut self) -> Result<(Reading, Option<String>)> {
        let t_ns = now_ns();
        let device = &self.device;
        let mem = device.memory_info().map_err(nvml_error)?;
        let kept = match self.listed.still(t_ns, mem.used) {
            Some(share) => Some(share),
            None if self.attribute => self.listed.attributed(t_ns, mem.used).map(Some),
            None => None,
        };
        if let Some(process_bytes) = kept {
            let reading = Reading {
                t_ns,
                used_bytes: mem.used,
                total_bytes: Some(mem.total),
                process_bytes,
                others: None,
            };
            return Ok((reading, None));
        }
        let listed = compute_processes(device);
        // The process's figure is of the list's moment, not of `t_ns`: on an
        // H200 a list read 2 µs after `t_ns` already held an 8 GiB block whose
        // cuMemAlloc began after it, and a reading stamped before that call
        // measured the block into the context's reserve. So the reading takes
        // the list's time; the device's figure (read first) is at most that
        // read's length older.
        let listed_ns = now_ns();
        // The tree is walked only when NVML lists a process other than the
        // program itself: a single-process program costs no /proc reads.
        let others = listed
            .as_deref()
            .is_some_and(|l| l.iter().any(|(p, _)| *p != self.tracker.pid));
        let mut others_now = None;
        let (mut process_bytes, note) = if self.tree && others {
            let tree = super::procfs::process_tree(self.tracker.pid);
            others_now = listed.as_deref().map(|l| other_processes(l, &tree));
            self.tracker
                .observe_tree(t_ns, listed.as_deref(), mem.used, &tree)
        } else {
            if self.tree && listed.is_some() {
                others_now = Some(Vec::new());
            }
            self.tracker.observe(t_ns, listed.as_deref(), mem.used)
        };
        // Said the first time, then when they change; named (a read of /proc
        // each) only then.
        let others = others_now.and_then(|now| {
            let news = self.others_said.as_ref() != Some(&now);
            news.then(|| {
                self.others_said = Some(now.clone());
                now.into_iter()
                    .map(|(pid, bytes)| OtherProcess {
                        pid,
                        name: std::fs::read_to_string(format!("/proc/{pid}/comm"))
                            .ok()
                            .map(|n| n.trim_end().to_string())
                            .filter(|n| !n.is_empty()),
                        bytes,
                    })
                    .collect()
            })
        });
        if let Some(rest) = self.managed
            && let Some(worker) = listed
                .as_deref()
                .and_then(|l| rest.worker(self.tracker.pid, mem.used, l))
        {
            process_bytes = Some(worker);
        }
        if let Some(off) = self.listed.contradicted(mem.used, process_bytes) {
            self.attribute = false;
            self.contradiction = Some(format!(
                "device memory moved outside the worker while its lines ran: NVML's process \
                 list gives the worker {} than its lines since the list before (at most {} ms \
                 earlier) counted, so those lines' figures include another process's memory. \
                 From here on every line that moves memory reads the list",
                signed_mib(off),
                ATTRIBUTE_FOR_NS / 1_000_000,
            ));
        }
        self.listed.read(t_ns, mem.used, process_bytes);
        let reading = Reading {
            t_ns: listed_ns,
            used_bytes: mem.used,
            total_bytes: Some(mem.total),
            process_bytes,
            others,
        };
        Ok((reading, note))
    }

    pub(crate) fn free_bytes(&self) -> Option<u64> {
        self.device.memory_info().ok().map(|m| m.free)
    }
}

/// "2.0 MiB more" / "512.0 MiB less".
fn signed_mib(bytes: i128) -> String {
    let mib = bytes.unsigned_abs() as f64 / gpulab_events::units::MIB_F64;
    let side = if bytes > 0 { "more" } else { "less" };
    format!("{mib:.1} MiB {side}")
}

/// The processes of `listed` outside `tree` (the watched program's), each
/// once (a process listed once per MIG instance: its share is the sum).
fn other_processes(listed: &[(u32, Option<u64>)], tree: &[u32]) -> Vec<(u32, Option<u64>)> {
    let mut others: Vec<(u32, Option<u64>)> = listed
        .iter()
        .filter(|(pid, _)| !tree.contains(pid))
        .copied()
        .collect();
    others.sort_by_key(|(pid, _)| *pid);
    others.dedup_by(|a, b| {
        if a.0 == b.0 {
            b.1 = match (a.1, b.1) {
                (Some(x), Some(y)) => Some(x + y),
                (x, y) => x.or(y),
            };
            true
        } else {
            false
        }
    });
    others
}

/// The processes NVML lists on `device` with their bytes. None where it cannot
/// list them (some vGPU and MIG setups): then device-wide only.
pub(crate) fn compute_processes(device: &nvml_wrapper::Device) -> Option<Vec<(u32, Option<u64>)>> {
    device.running_compute_processes().ok().map(|list| {
        list.into_iter()
            .map(|p| {
                let bytes = match p.used_gpu_memory {
                    UsedGpuMemory::Used(b) => Some(b),
                    UsedGpuMemory::Unavailable => None,
                };
                (p.pid, bytes)
            })
            .collect()
    })
}

/// Every NVIDIA GPU's memory from before a worker is started until its `meta`
/// names the device it uses. A worker reports in only after it made its context
/// (tens to hundreds of milliseconds): without this the run's first samples, and
/// the level its after-exit figure is compared with, would come after that.
pub struct BeforeRun {
    stop: Arc<AtomicBool>,
    pid: Arc<AtomicU32>,
    thread: Option<JoinHandle<Vec<GpuSamples>>>,
}

/// One GPU's PCI bus id (normalised) and its readings.
type GpuSamples = (Option<String>, Vec<Sample>);

/// How long `BeforeRun::start` waits for NVML's first readings.
const BEFORE_RUN_READY: Duration = Duration::from_millis(500);

impl BeforeRun {
    /// Opens NVML and reads every GPU once before returning, then reads on at
    /// `hz` until [`BeforeRun::finish`]. None (at once) where there is no NVML.
    pub fn start(hz: f64) -> Option<BeforeRun> {
        let stop = Arc::new(AtomicBool::new(false));
        let pid = Arc::new(AtomicU32::new(0));
        let (ready_tx, ready_rx) = std::sync::mpsc::sync_channel(1);
        let (s, p) = (stop.clone(), pid.clone());
        let period = Duration::from_secs_f64(1.0 / hz.clamp(1.0, super::MAX_HZ));
        let thread = std::thread::Builder::new()
            .name("gpulab-before-run".into())
            .spawn(move || before_run(&s, &p, period, &ready_tx))
            .ok()?;
        let mut me = BeforeRun {
            stop,
            pid,
            thread: Some(thread),
        };
        match ready_rx.recv_timeout(BEFORE_RUN_READY) {
            Ok(true) => Some(me),
            _ => {
                me.finish(None);
                None
            }
        }
    }

    /// The worker now exists: read its own share too.
    pub fn follow(&self, pid: u32) {
        self.pid.store(pid, Ordering::SeqCst);
    }

    /// Stops reading; the readings of the GPU at `pci_bus_id` (None: none).
    pub fn finish(&mut self, pci_bus_id: Option<&str>) -> Vec<Sample> {
        self.stop.store(true, Ordering::SeqCst);
        let all = self
            .thread
            .take()
            .and_then(|t| t.join().ok())
            .unwrap_or_default();
        let Some(want) = pci_bus_id.and_then(normalize_pci_bus_id) else {
            return Vec::new();
        };
        all.into_iter()
            .find(|(bus, _)| bus.as_deref() == Some(want.as_str()))
            .map(|(_, samples)| samples)
            .unwrap_or_default()
    }
}

impl Drop for BeforeRun {
    fn drop(&mut self) {
        self.finish(None);
    }
}

fn before_run(
    stop: &AtomicBool,
    pid: &AtomicU32,
    period: Duration,
    ready: &std::sync::mpsc::SyncSender<bool>,
) -> Vec<GpuSamples> {
    let Ok(nvml) = shared() else {
        let _ = ready.send(false);
        return Vec::new();
    };
    let count = nvml.device_count().unwrap_or(0);
    let mut gpus: Vec<(Option<String>, Vec<Sample>, Option<PidTracker>)> = (0..count)
        .map(|i| {
            let bus = nvml
                .device_by_index(i)
                .and_then(|d| d.pci_info())
                .ok()
                .and_then(|p| normalize_pci_bus_id(&p.bus_id));
            (bus, Vec::new(), None)
        })
        .collect();
    let mut first = true;
    loop {
        let worker = pid.load(Ordering::SeqCst);
        for (i, (_, samples, tracker)) in gpus.iter_mut().enumerate() {
            let Ok(device) = nvml.device_by_index(i as u32) else {
                continue;
            };
            let Ok(mem) = device.memory_info() else {
                continue;
            };
            let t_ns = now_ns();
            // Before the worker exists, its share is nothing; after, NVML's
            // list says, read as the run's own probe reads it.
            let process_bytes = if worker == 0 {
                Some(0)
            } else {
                let before = samples.first().map_or(mem.used, |s: &Sample| s.used_bytes);
                let tracker = tracker.get_or_insert_with(|| PidTracker::new(worker, before));
                tracker
                    .observe(t_ns, compute_processes(&device).as_deref(), mem.used)
                    .0
            };
            samples.push(Sample {
                t_ns,
                source: MemorySource::Nvml,
                used_bytes: mem.used,
                total_bytes: Some(mem.total),
                process_bytes,
                others: None,
            });
        }
        if first {
            first = false;
            let _ = ready.send(true);
        }
        if stop.load(Ordering::SeqCst) {
            break;
        }
        std::thread::sleep(period);
    }
    gpus.into_iter().map(|(bus, s, _)| (bus, s)).collect()
}

/// The NVML device for `info`: by PCI bus id, else device 0 with a note when the
/// device is NVIDIA's; None with a note otherwise.
fn pick_device(nvml: &Nvml, info: &DeviceInfo, notes: &mut Vec<String>) -> Option<u32> {
    let raw = info.pci_bus_id.as_deref();
    if let Some(index) = raw
        .and_then(normalize_pci_bus_id)
        .and_then(|id| find_by_bus(nvml, &id))
    {
        return Some(index);
    }
    let nvidia = info.vendor.to_ascii_lowercase().contains("nvidia");
    let count = nvml.device_count().unwrap_or(0);
    if !nvidia || count == 0 {
        notes.push(match raw {
            Some(id) => format!(
                "NVML has no device at PCI bus id {id} ({}) — no device-memory telemetry",
                info.name
            ),
            None => "NVML sees no NVIDIA device — no device-memory telemetry".to_string(),
        });
        return None;
    }
    let first = nvml
        .device_by_index(0)
        .and_then(|d| d.name())
        .unwrap_or_else(|_| "unknown".into());
    let which = if count > 1 {
        format!("NVML device 0 ({first}) of {count}; it may be another GPU")
    } else {
        format!("NVML device 0 ({first}), the only one")
    };
    notes.push(match raw {
        Some(id) => format!("NVML has no device at PCI bus id {id}; reading {which}"),
        None => format!("no PCI bus id for {}; reading {which}", info.name),
    });
    Some(0)
}

fn find_by_bus(nvml: &Nvml, id: &str) -> Option<u32> {
    if let Ok(index) = nvml.device_by_pci_bus_id(id).and_then(|d| d.index()) {
        return Some(index);
    }
    // NVML's own parser is picky about some spellings; compare normalised ids too.
    let count = nvml.device_count().ok()?;
    (0..count).find(|&i| {
        nvml.device_by_index(i)
            .and_then(|d| d.pci_info())
            .ok()
            .and_then(|p| normalize_pci_bus_id(&p.bus_id))
            .is_some_and(|bus| bus == id)
    })
}

/// A PCI address in NVML's spelling, `00000000:01:00.0` (8-digit domain, upper-case
/// hex), from any of `0000:01:00.0`, `01:00.0` or NVML's own. None when `raw` is
/// not a PCI address.
pub fn normalize_pci_bus_id(raw: &str) -> Option<String> {
    let raw = raw.trim().trim_end_matches('\0');
    let (rest, function) = raw.rsplit_once('.')?;
    let mut parts = rest.rsplit(':');
    let device = parts.next()?;
    let bus = parts.next()?;
    let domain = parts.next().unwrap_or("0");
    if parts.next().is_some() {
        return None;
    }
    let hex = |s: &str, max_digits: usize| -> Option<u32> {
        if s.is_empty() || s.len() > max_digits {
            return None;
        }
        u32::from_str_radix(s, 16).ok()
    };
    let domain = hex(domain, 8)?;
    let bus = hex(bus, 2)?;
    let device = hex(device, 2).filter(|d| *d < 32)?;
    let function = hex(function, 1).filter(|f| *f < 8)?;
    Some(format!("{domain:08X}:{bus:02X}:{device:02X}.{function:X}"))
}

fn unavailable_note(e: &NvmlError) -> String {
    match e {
        NvmlError::LibloadingError(_) | NvmlError::LibraryNotFound => UNAVAILABLE.to_string(),
        NvmlError::DriverNotLoaded => {
            "NVML unavailable: the NVIDIA driver is not loaded — no device-memory telemetry".into()
        }
        NvmlError::NoPermission => {
            "NVML unavailable: no permission to talk to the NVIDIA driver — no device-memory \
             telemetry"
                .into()
        }
        e => format!("NVML unavailable: {e} — no device-memory telemetry"),
    }
}

fn nvml_error(e: NvmlError) -> TelemetryError {
    TelemetryError::Nvml(e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A watched program's children (a launcher's worker, a DataLoader) hold
    /// device memory of their own: the program's share is its tree's.
    #[test]
    fn a_process_trees_share_is_the_sum_of_its_processes() {
        let mut t = PidTracker::new(10, 0);
        let listed = [
            (10, Some(100)),
            (11, Some(50)),
            (12, Some(999)),
            (11, Some(1)),
        ];
        assert_eq!(
            t.observe_tree(1, Some(&listed), 2000, &[10, 11]).0,
            Some(151)
        );
        assert_eq!(t.observe(2, Some(&listed), 2000).0, Some(100));
    }

    /// The H200's figures around a lab's managed memory (the probe in
    /// `.dev`, no gpulab): 1,141.9 MiB used on the device with the worker's
    /// context, 518 MiB of it listed as the worker's; a prefetch of 256 MiB
    /// moved the device's figure and not the worker's. Another process
    /// making 1 GiB meanwhile is its own.
    #[test]
    fn a_workers_managed_pages_are_the_device_less_the_rest() {
        const MIB: u64 = 1 << 20;
        let (worker, other) = (10, 11);
        let at_start = [(worker, Some(518 * MIB))];
        let rest = DeviceLess::taken(1_142 * MIB, Some(&at_start)).expect("a list");
        assert_eq!(rest.unlisted, 624 * MIB);
        let prefetched = [(worker, Some(518 * MIB))];
        assert_eq!(
            rest.worker(worker, 1_398 * MIB, &prefetched),
            Some(774 * MIB)
        );
        let neighbour = [(worker, Some(518 * MIB)), (other, Some(1_024 * MIB))];
        assert_eq!(
            rest.worker(worker, 2_422 * MIB, &neighbour),
            Some(774 * MIB)
        );
        // A list with no figure for a process (MIG, no permission) cannot
        // take what it holds out: the reading keeps the worker's listed figure.
        let unknown = [(worker, Some(518 * MIB)), (other, None)];
        assert_eq!(rest.worker(worker, 2_422 * MIB, &unknown), None);
        assert_eq!(DeviceLess::taken(1_142 * MIB, None), None);
    }

    #[test]
    fn bus_ids_normalise_to_nvml_spelling() {
        let n = |s| normalize_pci_bus_id(s);
        assert_eq!(n("00000000:01:00.0").as_deref(), Some("00000000:01:00.0"));
        assert_eq!(n("0000:01:00.0").as_deref(), Some("00000000:01:00.0"));
        assert_eq!(n("01:00.0").as_deref(), Some("00000000:01:00.0"));
        assert_eq!(n("0000:3b:00.0").as_deref(), Some("00000000:3B:00.0"));
        assert_eq!(n(" 0001:c1:1f.7\0\0").as_deref(), Some("00000001:C1:1F.7"));
        assert_eq!(n("0000:3b:00.0"), n("00000000:3B:00.0"));
    }

    #[test]
    fn bad_bus_ids_are_rejected() {
        for bad in [
            "",
            "garbage",
            "01:00",
            "0000:01:00.8",
            "0000:01:20.0",
            "0000:001:00.0",
            "000000000:01:00.0",
            "0:0000:01:00.0",
            "0000:zz:00.0",
            "0000::00.0",
        ] {
            assert_eq!(normalize_pci_bus_id(bad), None, "{bad:?}");
        }
    }

    use gpulab_events::units::MIB;

    const SEC: u64 = 1_000_000_000;

    #[test]
    fn worker_listed_gives_its_own_bytes() {
        let mut t = PidTracker::new(42, 500 * MIB);
        let listed = [(7, Some(100 * MIB)), (42, Some(300 * MIB))];
        assert_eq!(
            t.observe(0, Some(&listed), 900 * MIB),
            (Some(300 * MIB), None)
        );
        assert_eq!(t.state(), PidState::Listed);
        // The worker's context is gone: it holds nothing on the device any more.
        let others = [(7, Some(MIB))];
        assert_eq!(t.observe(1, Some(&others), 0), (Some(0), None));
        // NVML cannot say how much (WDDM): the worker is there, its bytes unknown.
        let mut t = PidTracker::new(42, 0);
        assert_eq!(t.observe(0, Some(&[(42, None)]), 0), (None, None));
    }

    #[test]
    fn a_context_being_made_is_not_a_container() {
        // As measured on an H100: used grows before NVML lists the new process.
        let mut t = PidTracker::new(42, 0);
        assert_eq!(t.observe(0, Some(&[]), 19 * MIB), (None, None));
        assert_eq!(t.observe(SEC / 50, Some(&[]), 21 * MIB), (None, None));
        let listed = [(42, Some(14 * MIB))];
        assert_eq!(
            t.observe(SEC / 25, Some(&listed), 21 * MIB),
            (Some(14 * MIB), None)
        );
    }

    #[test]
    fn host_pids_fall_back_to_device_wide_with_one_note() {
        let mut t = PidTracker::new(42, 500 * MIB);
        let listed = [(81234, Some(400 * MIB))];
        // Before the worker touches the device nothing is concluded.
        assert_eq!(t.observe(0, Some(&listed), 500 * MIB), (None, None));
        assert_eq!(t.observe(SEC, Some(&listed), 900 * MIB), (None, None));
        assert_eq!(
            t.observe(SEC + SEC / 2, Some(&listed), 900 * MIB),
            (None, None)
        );
        let (bytes, note) = t.observe(2 * SEC, Some(&listed), 900 * MIB);
        assert_eq!(bytes, None);
        let note = note.unwrap_or_default();
        assert!(
            note.contains("pid 42") && note.contains("baseline of 500 MiB"),
            "{note}"
        );
        assert_eq!(t.state(), PidState::Unmatched);
        // Said once.
        assert_eq!(t.observe(3 * SEC, Some(&listed), 950 * MIB), (None, None));
        // And taken back if NVML lists the worker after all.
        let (bytes, note) = t.observe(4 * SEC, Some(&[(42, Some(MIB))]), 950 * MIB);
        assert_eq!(bytes, Some(MIB));
        assert!(note.is_some_and(|n| n.contains("now lists")));
    }

    #[test]
    fn the_process_list_is_read_again_when_memory_moves_or_it_is_old() {
        let mut cache = ListCache::default();
        assert_eq!(cache.still(0, 100), None, "nothing read yet");
        cache.read(1_000, 100, Some(40));
        assert_eq!(cache.still(2_000, 100), Some(Some(40)));
        assert_eq!(cache.still(2_000, 101), None, "memory moved");
        assert_eq!(cache.still(1_000 + LIST_EVERY_NS, 100), None, "too old");
        cache.read(5_000, 100, None);
        assert_eq!(
            cache.still(6_000, 100),
            Some(None),
            "an unlisted share holds too"
        );
    }

    #[test]
    fn moves_soon_after_a_list_count_as_the_workers_until_the_next_list() {
        let mut cache = ListCache::default();
        assert_eq!(cache.attributed(0, 100), None, "nothing listed yet");
        cache.read(1_000, 100, Some(40));
        assert_eq!(cache.attributed(2_000, 110), Some(50), "10 more");
        assert_eq!(cache.attributed(3_000, 95), Some(35), "5 less than listed");
        assert_eq!(cache.attributed(4_000, 50), None, "more than it held");
        assert_eq!(
            cache.attributed(1_000 + ATTRIBUTE_FOR_NS, 110),
            None,
            "the list is too old"
        );
        // The next list agrees with every move counted: nothing to say.
        assert_eq!(cache.contradicted(120, Some(60)), None);
        // It does not: the difference, signed.
        assert_eq!(cache.contradicted(120, Some(55)), Some(-5));
        assert_eq!(cache.contradicted(120, Some(70)), Some(10));
        // A list after which nothing was attributed contradicts nothing.
        cache.read(5_000, 120, Some(70));
        assert_eq!(cache.contradicted(200, Some(70)), None);
        // An unlisted worker gets nothing attributed.
        cache.read(6_000, 120, None);
        assert_eq!(cache.attributed(7_000, 130), None);
    }

    #[test]
    fn attributed_moves_add_up_to_the_device_wide_change() {
        // Any walk of device memory after a list: each attributed share is the
        // listed share plus the change since, and a list that saw the worker
        // make exactly those moves contradicts none of them.
        let mut rng = fastrand::Rng::with_seed(12);
        for _ in 0..1_000 {
            let mut cache = ListCache::default();
            let share = rng.u64(0..1 << 30);
            let others = rng.u64(0..1 << 30);
            cache.read(0, share + others, Some(share));
            let mut mine = share;
            for step in 1..20u64 {
                let delta = rng.i64(-(1 << 20)..(1 << 20));
                mine = mine.saturating_add_signed(delta);
                let used = mine + others;
                assert_eq!(cache.attributed(step, used), Some(mine));
            }
            assert_eq!(cache.contradicted(mine + others, Some(mine)), None);
            let stranger = rng.u64(1..1 << 20);
            assert_eq!(
                cache.contradicted(mine + others + stranger, Some(mine)),
                Some(-i128::from(stranger)),
                "another process's bytes were counted as the worker's"
            );
        }
    }

    #[test]
    fn signed_mib_says_which_way() {
        assert_eq!(signed_mib(2 * i128::from(MIB)), "2.0 MiB more");
        assert_eq!(signed_mib(-512 * i128::from(MIB)), "512.0 MiB less");
    }

    #[test]
    fn growth_must_last_to_count() {
        let mut t = PidTracker::new(42, 0);
        assert_eq!(t.observe(0, Some(&[]), 900 * MIB), (None, None));
        // Memory went back down: the clock restarts.
        assert_eq!(t.observe(SEC / 2, Some(&[]), 0), (None, None));
        assert_eq!(t.observe(SEC, Some(&[]), 900 * MIB), (None, None));
        assert_eq!(t.observe(SEC + SEC / 2, Some(&[]), 900 * MIB), (None, None));
        assert!(t.observe(2 * SEC, Some(&[]), 900 * MIB).1.is_some());
        // No list at all (not supported): nothing to conclude.
        let mut t = PidTracker::new(42, 0);
        assert_eq!(t.observe(0, None, 900 * MIB), (None, None));
        assert_eq!(t.observe(5 * SEC, None, 900 * MIB), (None, None));
    }

    #[test]
    fn missing_library_note_names_it() {
        assert_eq!(unavailable_note(&NvmlError::LibraryNotFound), UNAVAILABLE);
        assert!(unavailable_note(&NvmlError::DriverNotLoaded).starts_with("NVML unavailable"));
    }
}
