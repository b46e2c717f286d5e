//! `gpulab watch -- CMD`: run a program gpulab did not write, with the agent
//! library loaded into it, and turn what the agent reports into the same event
//! stream a lab makes, while the program runs.
//!
//! One thread owns the session: it starts the program, forwards the agent's
//! events (read from a pipe every process of the program writes to) and the
//! sampler's readings in arrival order, and ends the stream with the program's
//! exit status. Consumers fold the stream into [`crate::run::Run`] as for a lab.

pub mod agent;
mod pipe;
pub mod report;
pub mod symbols;

use std::os::fd::AsRawFd;
use std::os::unix::process::ExitStatusExt;
use std::process::{Child, Command};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::time::{Duration, Instant};

use crate::clock::now_ns;
use crate::machine::{LoaderPlan, Loaders, cupti, icd};
use crate::telemetry::{Gpu0, Probe, Sampler};
use crate::trace::{
    self, BackendKind, DeviceKind, DeviceMeta, End, EndStatus, Event, FORMAT_VERSION, MemorySource,
    Meta, Note, NoteLevel, WatchMeta,
};

use self::agent::AgentLibrary;

/// How long the stream stays open after the program exits, for records its
/// processes still had in flight (and children that outlive it).
const AFTER_EXIT: Duration = Duration::from_secs(2);
/// After a stop request, how long the program gets before SIGTERM, then SIGKILL.
const STOP_GRACE: Duration = Duration::from_secs(1);
/// How often the session looks whether the program has exited.
const CHECK_EVERY: Duration = Duration::from_millis(10);
const KILL_GRACE: Duration = Duration::from_secs(5);

#[derive(Debug, thiserror::Error)]
pub enum WatchError {
    #[error("nothing to watch: give a program after `--` (gpulab watch -- ./app)")]
    NoCommand,
    #[error("could not prepare the agent library: {0}")]
    Agent(std::io::Error),
    #[error("could not create the agent's pipe: {0}")]
    Pipe(std::io::Error),
    #[error("could not start {program}: {source}")]
    Spawn {
        program: String,
        source: std::io::Error,
    },
}

/// What to watch, and how.
#[derive(Debug, Clone)]
pub struct WatchRequest {
    /// The program and its arguments.
    pub command: Vec<String>,
    /// The sampler's rate, readings per second.
    pub sample_hz: f64,
    /// Where the program's stdout and stderr go; `None` leaves them on gpulab's.
    pub output: Option<std::path::PathBuf>,
    /// The libcupti for CUDA programs; `None` looks for one ([`cupti::find`]).
    pub cupti: Option<std::path::PathBuf>,
    /// CUDA: kernel activity records as device spans (opt-in: CUPTI instruments
    /// modules at load for them).
    pub device_spans: bool,
    /// The native stack of every creating call ([`symbols`] names it).
    pub backtrace: bool,
}

/// A running watch: its events, and a switch to stop the program.
pub struct Watching {
    pub events: Receiver<Event>,
    pub pid: u32,
    stop: Arc<AtomicBool>,
}

impl Watching {
    /// Asks the program to stop: SIGTERM after a grace period, SIGKILL later. The
    /// stream still ends with everything the agent reported.
    pub fn stop(&self) {
        self.stop.store(true, Ordering::SeqCst);
    }

    /// A switch another thread (a signal handler) can flip.
    pub fn stop_switch(&self) -> Arc<AtomicBool> {
        self.stop.clone()
    }
}

/// Makes the program load an OpenCL loader that reads `OPENCL_LAYERS`, and lets
/// that loader see the NVIDIA ICD: preloads another loader when the default one
/// has no layers, and points `OCL_ICD_VENDORS` at gpulab's vendors directory for a
/// loader that reads no `OCL_ICD_FILENAMES`. Returns what it did, for the stream.
fn reach_the_loader(cmd: &mut Command, plan: &LoaderPlan) -> Vec<(NoteLevel, String)> {
    let mut notes = Vec::new();
    let used = match plan {
        LoaderPlan::AsIs(loader) => loader,
        LoaderPlan::Preload { instead_of, loader } => {
            let mut preload = loader.path.clone();
            if let Ok(old) = std::env::var("LD_PRELOAD")
                && !old.is_empty()
            {
                preload = format!("{preload}:{old}");
            }
            cmd.env("LD_PRELOAD", preload);
            notes.push((
                NoteLevel::Info,
                format!(
                    "the OpenCL loader programs find first here, {}, cannot load layers; \
                     gpulab preloaded {}, which can, so the program's OpenCL calls go \
                     through it",
                    instead_of.path, loader.path
                ),
            ));
            loader
        }
        LoaderPlan::NoLayers(loader) => {
            notes.push((
                NoteLevel::Warning,
                format!(
                    "the only OpenCL loader here, {}, cannot load layers, so the agent \
                     cannot attach: install one that can (`apt-get install \
                     ocl-icd-libopencl1`, ocl-icd 2.3 or later)",
                    loader.path
                ),
            ));
            return notes;
        }
        LoaderPlan::NoLoader => return notes,
    };
    if !used.reads_filenames {
        match icd::vendors_for_ocl_icd() {
            Some(Ok(v)) => {
                cmd.env("OCL_ICD_VENDORS", &v.value);
                notes.push((
                    NoteLevel::Info,
                    format!(
                        "{} reads no OCL_ICD_FILENAMES and no .icd file in {} names {}: \
                         gpulab set OCL_ICD_VENDORS={} (the system's ICDs plus NVIDIA's) \
                         for the program",
                        used.path, v.system_dir, v.library, v.value
                    ),
                ));
            }
            Some(Err(why)) => notes.push((NoteLevel::Warning, why)),
            None => {}
        }
    }
    notes
}

/// Makes the CUDA driver load the agent inside the program's first `cuInit`
/// (`CUDA_INJECTION64_PATH`) and tells the agent which libcupti to open. With no
/// libcupti the agent still loads, and says in the stream that CUDA went unseen.
fn reach_cuda(cmd: &mut Command, agent: &str, found: &[cupti::Cupti]) -> Vec<(NoteLevel, String)> {
    let mut notes = Vec::new();
    if let Ok(theirs) = std::env::var("CUDA_INJECTION64_PATH")
        && !theirs.is_empty()
    {
        notes.push((
            NoteLevel::Warning,
            format!(
                "CUDA_INJECTION64_PATH was {theirs}; gpulab put its own agent there for \
                 the program, so that tool is not loaded"
            ),
        ));
    }
    cmd.env("CUDA_INJECTION64_PATH", agent);
    if let Some(c) = found.first() {
        cmd.env("GPULAB_CUPTI", &c.path);
    } else {
        cmd.env_remove("GPULAB_CUPTI");
    }
    notes
}

/// Starts the program with the agent loaded and returns its event stream.
pub fn start(req: &WatchRequest) -> Result<Watching, WatchError> {
    let (program, args) = req.command.split_first().ok_or(WatchError::NoCommand)?;
    let library = AgentLibrary::new().map_err(WatchError::Agent)?;
    let (reader, writer) = std::io::pipe().map_err(WatchError::Pipe)?;
    // The pipe is close-on-exec; a duplicate is not, so the program inherits it.
    // No other process is started while it is open.
    let inherited = rustix::io::dup(&writer).map_err(|e| WatchError::Pipe(e.into()))?;
    drop(writer);
    let writer_fd = inherited.as_raw_fd();

    let mut layers = std::env::var("OPENCL_LAYERS").unwrap_or_default();
    if !layers.is_empty() {
        layers.push(':');
    }
    // Last in the list is outermost: the program's calls reach the agent first.
    layers.push_str(&library.path());

    let mut cmd = Command::new(program);
    cmd.args(args)
        .env("OPENCL_LAYERS", layers)
        .env("GPULAB_AGENT_FD", writer_fd.to_string());
    if let Some(path) = &req.output {
        let log = std::fs::File::create(path).map_err(|source| WatchError::Spawn {
            program: format!("its log {}", path.display()),
            source,
        })?;
        let err = log.try_clone().map_err(WatchError::Pipe)?;
        cmd.stdout(log).stderr(err);
    }
    // NVML starts (tens of milliseconds) while the loaders and libcupti are
    // looked for; both before the program starts, so the baseline is the device
    // without it.
    let (gpu, plan, cuptis) = std::thread::scope(|s| {
        let gpu = s.spawn(Probe::nvidia_gpu0_now);
        let plan = Loaders::find().plan();
        let cuptis = cupti::find(req.cupti.as_deref());
        (gpu.join().ok().flatten(), plan, cuptis)
    });
    let mut notes = reach_the_loader(&mut cmd, &plan);
    notes.extend(reach_cuda(&mut cmd, &library.path(), &cuptis));
    for (wanted, name) in [
        (req.device_spans, "GPULAB_DEVICE_SPANS"),
        (req.backtrace, "GPULAB_BACKTRACE"),
    ] {
        if wanted {
            cmd.env(name, "1");
        } else {
            cmd.env_remove(name);
        }
    }
    let started_ns = now_ns();
    let child = cmd.spawn().map_err(|source| WatchError::Spawn {
        program: program.clone(),
        source,
    })?;
    // Only the program's processes hold the write end now: the pipe ends when
    // the last of them is gone.
    drop(inherited);
    let pid = child.id();

    let (tx, events) = mpsc::channel();
    let stop = Arc::new(AtomicBool::new(false));
    let session = Session {
        child,
        _library: library,
        escalated: 0,
        tx,
        stop: stop.clone(),
        meta: meta(req, pid, started_ns, gpu.as_ref()),
        notes,
        gpu,
        sample_hz: req.sample_hz,
    };
    let (inner_tx, inner_rx) = mpsc::channel();
    let pipe_tx = inner_tx.clone();
    std::thread::Builder::new()
        .name("gpulab-watch-pipe".into())
        .spawn(move || pipe::read_pipe(reader, pipe_tx))
        .map_err(|source| WatchError::Spawn {
            program: "pipe reader".into(),
            source,
        })?;
    std::thread::Builder::new()
        .name("gpulab-watch".into())
        .spawn(move || session.run(inner_tx, inner_rx))
        .map_err(|source| WatchError::Spawn {
            program: "watch thread".into(),
            source,
        })?;
    Ok(Watching { events, pid, stop })
}

/// The stream's `meta`: the device is NVIDIA GPU 0 when NVML sees one (the program
/// may use another; the memory figures are GPU 0's), else "the devices the program
/// chooses" with the program's RSS as its memory.
fn meta(req: &WatchRequest, pid: u32, t_ns: u64, gpu: Option<&Gpu0>) -> Meta {
    let (device, baseline_bytes) = match gpu.map(|g| (&g.info, g.used)) {
        Some((info, used)) => (
            DeviceMeta {
                name: info.name.clone(),
                vendor: info.vendor.clone(),
                driver_version: info.driver_version.clone(),
                kind: info.kind,
                total_bytes: info.total_bytes,
                memory_source: MemorySource::Nvml,
                pci_bus_id: info.pci_bus_id.clone(),
                clock_error_ns: None,
            },
            Some(used),
        ),
        None => (
            DeviceMeta {
                name: "the devices the program chooses".into(),
                vendor: String::new(),
                driver_version: String::new(),
                kind: DeviceKind::Other,
                total_bytes: None,
                memory_source: MemorySource::Rss,
                pci_bus_id: None,
                clock_error_ns: None,
            },
            None,
        ),
    };
    Meta {
        format_version: FORMAT_VERSION,
        gpulab_version: env!("CARGO_PKG_VERSION").into(),
        t_ns,
        pid,
        hostname: rustix::system::uname()
            .nodename()
            .to_string_lossy()
            .into_owned(),
        backend: BackendKind::OpenCl,
        platform: String::new(),
        device,
        lab: None,
        baseline_bytes,
        budget_bytes: None,
        recorded_at: Some(trace::wallclock::Utc::now().rfc3339()),
        watch: Some(WatchMeta {
            command: req.command.clone(),
            pid,
        }),
    }
}

struct Session {
    child: Child,
    /// Kept open while the program may still load it.
    _library: AgentLibrary,
    /// Signals sent so far after a stop request (SIGTERM, then SIGKILL).
    escalated: u8,
    tx: Sender<Event>,
    stop: Arc<AtomicBool>,
    meta: Meta,
    /// What was done to reach the program's OpenCL loader, said after `meta`.
    notes: Vec<(NoteLevel, String)>,
    /// NVIDIA GPU 0, opened before the program started (its memory in use then
    /// is the baseline), when there is one: then NVML is read; else the
    /// program's RSS.
    gpu: Option<Gpu0>,
    sample_hz: f64,
}

impl Session {
    fn run(mut self, inner_tx: Sender<Event>, inner: Receiver<Event>) {
        let pid = self.child.id();
        let _ = self.tx.send(Event::Meta(Box::new(self.meta.clone())));
        for (level, text) in std::mem::take(&mut self.notes) {
            self.note(level, text);
        }
        let probe = match self.gpu.take() {
            Some(gpu) => Ok(Probe::nvidia_gpu0(pid, gpu)),
            None => Probe::rss(pid),
        };
        let mut sampler = match probe {
            Ok(probe) => {
                let (batch_tx, batch_rx) = mpsc::channel::<Vec<trace::Sample>>();
                let forward = inner_tx.clone();
                std::thread::spawn(move || {
                    for batch in batch_rx {
                        for s in batch {
                            if forward.send(Event::Sample(s)).is_err() {
                                return;
                            }
                        }
                    }
                });
                Some(Sampler::spawn(probe, self.sample_hz, batch_tx))
            }
            Err(e) => {
                self.note(
                    NoteLevel::Warning,
                    format!("no memory readings of pid {pid}: {e}"),
                );
                None
            }
        };
        drop(inner_tx);

        let mut stop_asked: Option<Instant> = None;
        let mut exited: Option<(Instant, std::io::Result<std::process::ExitStatus>)> = None;
        // The program's state is looked at every CHECK_EVERY whatever arrives: a
        // sampler that never fails (NVML reads the device, not the process) keeps
        // events coming faster than any receive would time out.
        let mut checked = Instant::now();
        loop {
            match inner.recv_timeout(CHECK_EVERY) {
                Ok(event) => {
                    if self.tx.send(event).is_err() {
                        // Nobody listens any more: stop the program too.
                        self.stop.store(true, Ordering::SeqCst);
                    }
                    if checked.elapsed() < CHECK_EVERY {
                        continue;
                    }
                }
                Err(RecvTimeoutError::Disconnected) => break,
                Err(RecvTimeoutError::Timeout) => {}
            }
            checked = Instant::now();
            if exited.is_none() {
                match self.child.try_wait() {
                    Ok(Some(status)) => {
                        exited = Some((Instant::now(), Ok(status)));
                        if let Some(mut s) = sampler.take() {
                            s.stop();
                        }
                    }
                    Ok(None) => self.escalate(&mut stop_asked),
                    Err(e) => exited = Some((Instant::now(), Err(e))),
                }
            } else if exited
                .as_ref()
                .is_some_and(|(t, _)| t.elapsed() >= AFTER_EXIT)
            {
                self.note(
                    NoteLevel::Warning,
                    "a process the program started still holds the agent's pipe after the \
                     program exited; what it does from here on is not shown"
                        .into(),
                );
                break;
            }
        }
        // The sampler may still run if the pipe closed before the exit was seen.
        let status = match exited {
            Some((_, status)) => status,
            None => self.child.wait(),
        };
        if let Some(mut s) = sampler.take() {
            s.stop();
        }
        // Readings already forwarded may still sit in `inner`.
        while let Ok(event) = inner.try_recv() {
            let _ = self.tx.send(event);
        }
        let status = match status {
            Ok(s) => match (s.code(), s.signal()) {
                (Some(0), _) => EndStatus::Finished,
                (Some(code), _) => EndStatus::Exited { code },
                (None, signal) => EndStatus::Crashed {
                    signal,
                    detail: format!("killed by signal {}", signal.unwrap_or(0)),
                },
            },
            Err(e) => EndStatus::Crashed {
                signal: None,
                detail: format!("could not wait for the program: {e}"),
            },
        };
        let _ = self.tx.send(Event::End(End {
            t_ns: now_ns(),
            status,
            leaked: Vec::new(),
        }));
    }

    /// Stop requested: SIGTERM after a grace period, SIGKILL after a longer one.
    fn escalate(&mut self, asked: &mut Option<Instant>) {
        if !self.stop.load(Ordering::SeqCst) {
            return;
        }
        let since = asked.get_or_insert_with(Instant::now).elapsed();
        let signal = match self.escalated {
            0 if since >= STOP_GRACE => rustix::process::Signal::TERM,
            1 if since >= KILL_GRACE => rustix::process::Signal::KILL,
            _ => return,
        };
        self.escalated += 1;
        if let Some(pid) = rustix::process::Pid::from_raw(self.child.id() as i32) {
            let _ = rustix::process::kill_process(pid, signal);
        }
    }

    fn note(&self, level: NoteLevel, text: String) {
        let _ = self.tx.send(Event::Note(Note {
            t_ns: now_ns(),
            level,
            text,
            line: None,
        }));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::machine::Loader;

    fn loader(path: &str, layers: bool) -> Loader {
        Loader {
            path: path.into(),
            layers,
            // So the ICD environment of the machine running the test plays no part.
            reads_filenames: true,
        }
    }

    fn env_of(cmd: &Command, name: &str) -> Option<String> {
        cmd.get_envs()
            .find(|(k, _)| *k == name)
            .and_then(|(_, v)| v.map(|v| v.to_string_lossy().into_owned()))
    }

    #[test]
    fn a_loader_without_layers_is_replaced_by_preloading_one_with_them_and_said_so() {
        let mut cmd = Command::new("true");
        let plan = LoaderPlan::Preload {
            instead_of: loader("/usr/local/cuda/lib64/libOpenCL.so.1", false),
            loader: loader("/usr/lib/x86_64-linux-gnu/libOpenCL.so.1", true),
        };
        let notes = reach_the_loader(&mut cmd, &plan);
        let preload = env_of(&cmd, "LD_PRELOAD").unwrap_or_default();
        assert!(
            preload.starts_with("/usr/lib/x86_64-linux-gnu/libOpenCL.so.1"),
            "{preload}"
        );
        assert_eq!(notes.len(), 1, "{notes:?}");
        assert_eq!(notes[0].0, NoteLevel::Info);
        assert!(notes[0].1.contains("/usr/local/cuda/lib64/libOpenCL.so.1"));
    }

    #[test]
    fn no_loader_with_layers_is_a_warning_and_changes_nothing() {
        let mut cmd = Command::new("true");
        let notes = reach_the_loader(
            &mut cmd,
            &LoaderPlan::NoLayers(loader("/x/libOpenCL.so.1", false)),
        );
        assert_eq!(env_of(&cmd, "LD_PRELOAD"), None);
        assert_eq!(notes.len(), 1);
        assert_eq!(notes[0].0, NoteLevel::Warning);
        let mut cmd = Command::new("true");
        assert!(reach_the_loader(&mut cmd, &LoaderPlan::AsIs(loader("/y", true))).is_empty());
        assert_eq!(env_of(&cmd, "LD_PRELOAD"), None);
    }

    /// A stream that never pauses (NVML samples the device, not the process, so
    /// they go on after the program exits) must not hide the program's exit.
    #[test]
    fn the_exit_is_seen_while_events_keep_coming() {
        let child = Command::new("sleep").arg("0.1").spawn();
        let (Ok(child), Ok(library)) = (child, AgentLibrary::new()) else {
            return; // no `sleep` here, or no memfd: nothing to test against
        };
        let pid = child.id();
        let req = WatchRequest {
            command: vec!["sleep".into(), "0.1".into()],
            sample_hz: 0.0,
            output: None,
            cupti: None,
            device_spans: false,
            backtrace: false,
        };
        let (tx, events) = mpsc::channel();
        let session = Session {
            child,
            _library: library,
            escalated: 0,
            tx,
            stop: Arc::new(AtomicBool::new(false)),
            meta: meta(&req, pid, 0, None),
            notes: Vec::new(),
            gpu: None,
            sample_hz: 0.0,
        };
        let (inner_tx, inner_rx) = mpsc::channel();
        let flood_tx = inner_tx.clone();
        let flooding = Arc::new(AtomicBool::new(true));
        let still = flooding.clone();
        let flood = std::thread::spawn(move || {
            // Far longer than the program lives; ends only when told or unheard.
            let deadline = Instant::now() + Duration::from_secs(60);
            while still.load(Ordering::SeqCst) && Instant::now() < deadline {
                let note = Event::Note(Note {
                    t_ns: now_ns(),
                    level: NoteLevel::Info,
                    text: "tick".into(),
                    line: None,
                });
                if flood_tx.send(note).is_err() {
                    return;
                }
                std::thread::sleep(Duration::from_millis(5));
            }
        });
        let runner = std::thread::spawn(move || session.run(inner_tx, inner_rx));
        let end = events.iter().find_map(|e| match e {
            Event::End(end) => Some(end.status),
            _ => None,
        });
        // The end came while events still flowed (before the fix it came only
        // once the flood had stopped), with the program's own status.
        let flood_still_ran = !flood.is_finished();
        flooding.store(false, Ordering::SeqCst);
        let _ = flood.join();
        let _ = runner.join();
        assert!(flood_still_ran, "the end waited for the events to stop");
        assert_eq!(end, Some(EndStatus::Finished));
    }
}
