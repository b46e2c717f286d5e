//! `gpulab watch -- CMD`: run a program gpulab did not write, with the agent
//! library loaded into it, and turn what the agent reports into the same event
//! stream a lab makes, while the program runs.
//!
//! The run source starts it (`source::Workload::Program`): the stream opens with
//! gpulab's `meta`; the agents' events (read from the memory gpulab shares
//! with every process of the program, `ring`) and the sampler's readings go into the run's sink from
//! the threads that read them; the supervisor ends the stream with the
//! program's exit status. Consumers fold the stream into [`crate::run::Run`]
//! as for a lab.

pub mod agent;
mod gpus;
mod program;
mod python;
mod ring;
mod setup;
mod supervisor;
pub mod symbols;

use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::clock::now_ns;
use crate::machine::platforms;
use crate::machine::{Loaders, cupti, icd};
use crate::telemetry::{Gpu0, Gpus, Pacer, Probe};
use crate::trace::sink::Sink;
use crate::trace::{
    self, BackendKind, DeviceKind, DeviceMeta, Event, FORMAT_VERSION, MemorySource, Meta, Note,
    NoteLevel, WatchMeta,
};

use self::agent::AgentLibrary;
use self::python::PythonHook;
use self::ring::Agents;
use self::setup::{multicast_note, reach_cuda, reach_the_loader, same_platforms_as_bare};
use self::supervisor::{Group, Supervisor};
use gpulab_host::shared::{RING_ENV, SharedRegion};

/// How long the stream stays open after the program exits, for records its
/// processes still had in flight (and children that outlive it).
const AFTER_EXIT: Duration = Duration::from_secs(2);
/// After a forwarded SIGINT (Ctrl-C), how long the program gets before SIGTERM.
const STOP_GRACE: Duration = Duration::from_secs(1);
/// How often the session looks whether the program has exited.
const CHECK_EVERY: Duration = Duration::from_millis(10);
const KILL_GRACE: Duration = Duration::from_secs(5);
/// Stacks waiting to be named at most (a few MiB).
pub(crate) const STACKS_WAITING: usize = 4096;

#[derive(Debug, thiserror::Error)]
pub enum WatchError {
    #[error("nothing to watch: give a program after `--` (gpulab watch -- ./app)")]
    NoCommand,
    #[error("could not prepare the agent library: {0}")]
    Agent(std::io::Error),
    #[error("could not create the memory shared with the agents: {0}")]
    Shared(std::io::Error),
    #[error("could not open the program's output: {0}")]
    Output(std::io::Error),
    #[error("cannot start {program}: {}", program::why_not(source))]
    Spawn {
        program: String,
        source: std::io::Error,
    },
}

/// Where the program's stdin, stdout and stderr are.
#[derive(Debug)]
pub enum Stdio {
    /// gpulab's own.
    Inherit,
    /// Its stdout and stderr go to this file and its stdin is /dev/null: the
    /// dashboard has the terminal.
    Log(std::fs::File),
}

/// What to watch, and how.
#[derive(Debug)]
pub struct WatchRequest {
    /// The program and its arguments.
    pub command: Vec<String>,
    /// The sampler's rate, readings per second.
    pub sample_hz: f64,
    /// Where the program's stdin, stdout and stderr are.
    pub stdio: Stdio,
    /// The libcupti for CUDA programs; `None` looks for one ([`cupti::find`]).
    pub cupti: Option<std::path::PathBuf>,
    /// CUDA: kernel activity records as device spans (opt-in: CUPTI instruments
    /// modules at load for them).
    pub device_spans: bool,
    /// CUDA: every kernel launch watched, not only those of functions new to
    /// the program (the agent's `GPULAB_LAUNCHES`).
    pub every_launch: bool,
    /// PyTorch: its memory history on, for its live tensors by line (the
    /// startup hook's `GPULAB_TORCH_HISTORY`).
    pub torch_history: bool,
    /// How much of the native stack of every creating call the agent takes
    /// ([`symbols`] names it).
    pub stacks: Stacks,
    /// The program's stop switch, made before it starts: a signal handler
    /// installed before the program starts leaves no moment in which SIGINT or
    /// SIGTERM would kill gpulab and leave the program running.
    pub stop: Arc<Stopper>,
}

/// How much of the native stack of each creating call the agent takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Stacks {
    Off,
    /// The calling frame alone: who made the object (the program, or the
    /// library that called the driver).
    #[default]
    Caller,
    Full,
}

impl Stacks {
    /// The agent's word for it.
    fn as_str(self) -> &'static str {
        match self {
            Stacks::Off => "off",
            Stacks::Caller => "caller",
            Stacks::Full => "full",
        }
    }
}

/// A request to stop the program, from any thread.
#[derive(Debug, Default)]
pub struct Stopper {
    asked: AtomicBool,
    interrupted: AtomicBool,
}

impl Stopper {
    /// Stops the program and every process of its group: with `signal` SIGINT
    /// (Ctrl-C in gpulab's terminal, which no longer reaches a program in a
    /// group of its own), SIGINT is passed on, then SIGTERM after a grace
    /// period; otherwise SIGTERM at once. SIGKILL follows if it still runs.
    pub fn stop(&self, signal: Option<i32>) {
        if signal == Some(signal_hook::consts::SIGINT) {
            self.interrupted.store(true, Ordering::SeqCst);
        }
        self.asked.store(true, Ordering::SeqCst);
    }

    fn asked(&self) -> bool {
        self.asked.load(Ordering::SeqCst)
    }

    /// The signals to send, each after how long since the request.
    fn plan(&self) -> &'static [(Duration, rustix::process::Signal)] {
        use rustix::process::Signal;
        if self.interrupted.load(Ordering::SeqCst) {
            &[
                (Duration::ZERO, Signal::INT),
                (STOP_GRACE, Signal::TERM),
                (KILL_GRACE, Signal::KILL),
            ]
        } else {
            &[(Duration::ZERO, Signal::TERM), (KILL_GRACE, Signal::KILL)]
        }
    }
}

/// Starts the program with the agent loaded; its events go into `sink`, and
/// `req.stop` stops it. Returns the program's pid.
pub fn start(req: WatchRequest, sink: Sink) -> Result<u32, WatchError> {
    let program = req.command.first().ok_or(WatchError::NoCommand)?;
    let library = AgentLibrary::new().map_err(WatchError::Agent)?;
    let hook = PythonHook::new().map_err(WatchError::Agent)?;
    // Close-on-exec: the program inherits no descriptor. Each of its
    // processes that records maps the memory by path, on a thread with a
    // descriptor table of its own (crates/gpulab-agent/src/region.rs).
    let shared = Arc::new(SharedRegion::new().map_err(WatchError::Shared)?);
    let ring_env = shared.env_value().map_err(WatchError::Shared)?;
    let Prepared {
        mut cmd,
        own_group,
        notes,
        gpu,
        gpus,
    } = prepare(&req, &library, &hook, ring_env)?;
    let reading = Reading::start(shared, &sink).map_err(|source| WatchError::Spawn {
        program: "agents' reader".into(),
        source,
    })?;
    let started_ns = now_ns();
    // A program that cannot start drops `reading`: its thread ends unheard.
    let child = cmd.spawn().map_err(|source| WatchError::Spawn {
        program: program.clone(),
        source,
    })?;
    let pid = child.id();
    // gpulab's header first, then what was done to reach the program; only
    // then does the reader pass on what the program's agents write.
    sink.event(Event::Meta(Box::new(meta(
        &req,
        pid,
        started_ns,
        gpu.as_ref(),
        gpus.as_ref(),
    ))));
    for (level, text) in notes {
        sink.event(note(level, text));
    }
    let supervisor = Supervisor {
        child,
        group: match own_group {
            true => Group::Own(pid),
            false => Group::Tree(pid),
        },
        _library: (library, hook),
        escalated: 0,
        signalled: false,
        agents: reading.agents.clone(),
        program_end: reading.program_end.clone(),
        abandoned: reading.abandoned.clone(),
        sink,
        stop: req.stop,
        gpu,
        gpus,
        sample_hz: req.sample_hz,
        pacer: reading.pacer.clone(),
    };
    let thread = reading.go(pid);
    std::thread::Builder::new()
        .name("gpulab-watch".into())
        .spawn(move || supervisor.run(thread))
        .map_err(|source| WatchError::Spawn {
            program: "watch thread".into(),
            source,
        })?;
    Ok(pid)
}

/// The program's command, set up to load the agent, before it starts.
struct Prepared {
    cmd: Command,
    /// The program leads a process group of its own.
    own_group: bool,
    /// What was done to reach it, said after `meta`.
    notes: Vec<(NoteLevel, String)>,
    /// NVIDIA GPU 0, opened before the program starts: its memory in use now
    /// is the baseline.
    gpu: Option<Gpu0>,
    /// Every NVIDIA GPU of the host, opened then too.
    gpus: Option<Gpus>,
}

fn prepare(
    req: &WatchRequest,
    library: &AgentLibrary,
    hook: &PythonHook,
    ring_env: String,
) -> Result<Prepared, WatchError> {
    let (program, args) = req.command.split_first().ok_or(WatchError::NoCommand)?;
    // Inside another `gpulab watch`, the outer agent is in the inherited
    // layers: both would count every call. This watch takes the program over.
    let nested = program::inside_another_watch();
    let mut layers =
        program::without_gpulab_agents(&std::env::var("OPENCL_LAYERS").unwrap_or_default());
    if !layers.is_empty() {
        layers.push(':');
    }
    // Last in the list is outermost: the program's calls reach the agent first.
    layers.push_str(&library.path());

    let mut cmd = Command::new(program);
    cmd.args(args)
        .env("OPENCL_LAYERS", layers)
        .env(RING_ENV, ring_env)
        .env_remove("GPULAB_AGENT_FD")
        .env_remove("GPULAB_AGENT_PIPE")
        // Python processes of the program read their frameworks' own figures.
        .env(
            "PYTHONPATH",
            hook.python_path(std::env::var_os("PYTHONPATH").as_deref()),
        );
    let own_group = program::set_stdio(&mut cmd, &req.stdio).map_err(WatchError::Output)?;
    let mut notes = program::notes(program, nested);
    notes.push(multicast_note(&crate::multicast::keep_off_here(&mut cmd)));
    // NVML starts (tens of milliseconds) while the loaders and libcupti are
    // looked for; both before the program starts, so the baseline is the device
    // without it.
    let (gpu, gpus, plan, cuptis) = std::thread::scope(|s| {
        let gpu = s.spawn(|| (Probe::nvidia_gpu0_now(), Gpus::open()));
        let plan = Loaders::find().plan();
        let cuptis = cupti::find(req.cupti.as_deref());
        let (gpu, gpus) = gpu.join().unwrap_or((None, None));
        (gpu, gpus, plan, cuptis)
    });
    // First: what gpulab set for itself alone is not the program's, and the
    // preloaded loader's vendors folder is set after it.
    notes.extend(same_platforms_as_bare(&mut cmd));
    let exe = std::env::current_exe().map_err(|e| e.to_string());
    notes.extend(reach_the_loader(&mut cmd, &plan, |own| {
        platforms::ask_for_watch(&exe?, Path::new(&own.path), icd::set_for_gpulab_only())
    }));
    notes.extend(reach_cuda(&mut cmd, &library.path(), &cuptis, nested));
    if req.device_spans {
        cmd.env("GPULAB_DEVICE_SPANS", "1");
    } else {
        cmd.env_remove("GPULAB_DEVICE_SPANS");
    }
    // The agent's `GPULAB_LAUNCHES` (crates/gpulab-agent/src/launches.rs).
    cmd.env(
        "GPULAB_LAUNCHES",
        if req.every_launch { "all" } else { "new" },
    );
    // The agent's `GPULAB_BACKTRACE` (crates/gpulab-agent/src/stack.rs).
    cmd.env("GPULAB_BACKTRACE", req.stacks.as_str());
    // The Python hook's (python/sitecustomize.py).
    if req.torch_history {
        cmd.env("GPULAB_TORCH_HISTORY", "1");
    } else {
        cmd.env_remove("GPULAB_TORCH_HISTORY");
    }
    Ok(Prepared {
        cmd,
        own_group,
        notes,
        gpu,
        gpus,
    })
}

/// The agents' reader, started before the program and held until the
/// stream's `meta` is out ([`Reading::go`]), so nothing the program's agents
/// write can come before it.
struct Reading {
    go: std::sync::mpsc::Sender<()>,
    thread: std::thread::JoinHandle<bool>,
    agents: Arc<Mutex<Agents>>,
    program_end: Arc<ring::ProgramEnd>,
    abandoned: Arc<AtomicBool>,
    pacer: Pacer,
}

impl Reading {
    fn start(shared: Arc<SharedRegion>, sink: &Sink) -> std::io::Result<Reading> {
        let agents = Arc::new(Mutex::new(Agents::default()));
        let program_end = Arc::new(ring::ProgramEnd::default());
        let abandoned = Arc::new(AtomicBool::new(false));
        let pacer = Pacer::default();
        let (go, wait) = std::sync::mpsc::channel::<()>();
        let (sink, shared_agents, pacing) = (sink.clone(), agents.clone(), pacer.clone());
        let (end, given_up) = (program_end.clone(), abandoned.clone());
        let thread = std::thread::Builder::new()
            .name("gpulab-watch-agents".into())
            .spawn(move || {
                let out = ring::Out {
                    sink: &sink,
                    pacer: &pacing,
                };
                wait.recv().is_ok()
                    && ring::read_ring(shared.region(), &out, &shared_agents, &end, &given_up)
            })?;
        Ok(Reading {
            go,
            thread,
            agents,
            program_end,
            abandoned,
            pacer,
        })
    }

    /// Lets the reader pass events on, of the program started as `pid`; its
    /// thread, for the supervisor.
    fn go(self, pid: u32) -> std::thread::JoinHandle<bool> {
        self.program_end.started(pid);
        let _ = self.go.send(());
        self.thread
    }
}

fn note(level: NoteLevel, text: String) -> Event {
    Event::Note(Note {
        t_ns: now_ns(),
        level,
        text,
        line: None,
    })
}

/// The stream's `meta`: the device is NVIDIA GPU 0 when NVML sees one (the program
/// may use another; the memory figures are GPU 0's), else "the devices the program
/// chooses" with the program's RSS as its memory.
fn meta(req: &WatchRequest, pid: u32, t_ns: u64, gpu: Option<&Gpu0>, gpus: Option<&Gpus>) -> Meta {
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
        hostname: crate::hostname(),
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
            torch_history: req.torch_history,
        }),
        destruction: None,
        gpus: gpus.map(Gpus::metas).unwrap_or_default(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::EndStatus;
    use std::time::Instant;

    /// A reader that never ends (a process the program left behind goes on
    /// recording) must not keep the stream open: the
    /// program's exit ends it, with the program's own status, once the reader
    /// has been given up on.
    #[test]
    fn the_exit_ends_the_stream_while_a_process_left_behind_keeps_recording() {
        let child = Command::new("sleep").arg("0.1").spawn();
        let (Ok(child), Ok(library), Ok(hook)) = (child, AgentLibrary::new(), PythonHook::new())
        else {
            return; // no `sleep` here, or no memfd: nothing to test against
        };
        let pid = child.id();
        let (sink, events) = Sink::channel(64);
        let abandoned = Arc::new(AtomicBool::new(false));
        let reading = {
            let (sink, abandoned) = (sink.clone(), abandoned.clone());
            std::thread::spawn(move || {
                // Far longer than the program lives; ends only when given up
                // on or unheard.
                let deadline = Instant::now() + Duration::from_secs(60);
                while !abandoned.load(Ordering::SeqCst) && Instant::now() < deadline {
                    if !sink.event(note(NoteLevel::Info, "tick".into())) {
                        return false;
                    }
                    std::thread::sleep(Duration::from_millis(5));
                }
                true
            })
        };
        let supervisor = Supervisor {
            group: Group::Own(pid),
            child,
            _library: (library, hook),
            escalated: 0,
            signalled: false,
            agents: Arc::default(),
            program_end: Arc::default(),
            abandoned,
            sink,
            stop: Arc::new(Stopper::default()),
            gpu: None,
            gpus: None,
            sample_hz: 0.0,
            pacer: Pacer::default(),
        };
        let runner = std::thread::spawn(move || supervisor.run(reading));
        let mut end = None;
        let (mut given_up, mut after_end) = (false, 0);
        for batch in events.iter() {
            for e in batch {
                match e {
                    Event::End(e) => end = Some(e.status),
                    _ if end.is_some() => after_end += 1,
                    Event::Note(n) => {
                        given_up |= n.text.contains("still running after the program exited")
                    }
                    _ => {}
                }
            }
        }
        let _ = runner.join();
        // The channel closed, so the reader was given up on (and said so) and
        // let go; nothing came after the end.
        assert!(given_up, "the reader was waited for, not given up on");
        assert_eq!(end, Some(EndStatus::Finished));
        assert_eq!(after_end, 0);
    }
}
