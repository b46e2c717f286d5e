//! The local run source: a `gpulab worker` child per lab run, its stdout read
//! as events, a sampler on its memory, and its memory watched coming back
//! once it is gone; a watched program through [`super::program`].

use std::collections::BTreeSet;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command as Process, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::child::Exit;
use crate::clock::now_ns;
use crate::engine::WorkerRequest;
use crate::telemetry::{BeforeRun, Pacer, Probe, SETTLE, SamplerHandle};
use crate::trace::protocol::Command;
use crate::trace::{
    self, Calling, DeviceInfo, DeviceKind, End, EndStatus, Event, InFlight, MemorySource, Note,
    NoteLevel,
};

use super::movement::Movement;
use super::{Result, RunControl, RunRequest, RunSource, Sink, SourceError, Steer, Workload};

/// The most events one batch of the worker's stdout carries.
const BATCH_EVENTS: usize = 256;

/// After the worker exits, how long the parent watches device memory come back.
const AFTER_EXIT_WATCH: Duration = Duration::from_millis(1500);
/// Device memory within this of its level at the start counts as "back".
const BACK_SLACK_BYTES: u64 = 4 << 20;

pub struct LocalSource {
    exe: PathBuf,
}

impl LocalSource {
    /// Workers are this same executable, started with the hidden `worker` command.
    pub fn new() -> Result<Self> {
        let exe = std::env::current_exe().map_err(SourceError::NoExe)?;
        Ok(LocalSource { exe })
    }

    pub fn with_exe(exe: PathBuf) -> Self {
        LocalSource { exe }
    }
}

impl RunSource for LocalSource {
    fn availability(&self, device: Option<String>) -> mpsc::Receiver<super::Availability> {
        let (tx, rx) = mpsc::channel();
        let exe = self.exe.clone();
        std::thread::spawn(move || {
            let _ = tx.send(super::Availability::probe(&exe, device.as_deref()));
        });
        rx
    }

    fn start(&self, origin: Workload, sink: Sink) -> Result<Box<dyn RunControl>> {
        match origin {
            Workload::Lab(req) => self.start_lab(*req, sink),
            Workload::Program(req) => super::program::start(req, sink),
        }
    }
}

impl LocalSource {
    fn start_lab(&self, req: RunRequest, sink: Sink) -> Result<Box<dyn RunControl>> {
        let variant = req.variant();
        let request = WorkerRequest {
            device: req.device.clone(),
            budget_bytes: req.budget_bytes,
            unbounded: req.unbounded,
            step: req.step,
            ..WorkerRequest::new(&req.lab, variant, req.params.clone())
        };
        // Device memory from before the worker exists: the run's start level, and
        // its samples while the worker makes its context.
        let before = BeforeRun::start(req.sample_hz);
        crate::clock::phase("before-run readings started");
        let load_at_start = crate::telemetry::load_avg();
        let waiting_at_start = crate::telemetry::cpu_waiting_us().map(|us| (us, now_ns()));
        let mut cmd = Process::new(&self.exe);
        // The worker dies with its parent (`engine::worker::die_with_parent`). Linux
        // sends PR_SET_PDEATHSIG when the *thread* that spawned it exits: runs are
        // started from threads that outlive them (main, the dashboard's loop).
        cmd.arg("worker").env(
            crate::engine::worker::PARENT_PID_ENV,
            std::process::id().to_string(),
        );
        // Its own process group: Ctrl-C in the terminal reaches the parent only,
        // which then decides to cancel, so a partial run is still reported.
        crate::multicast::keep_off_here(&mut cmd);
        cmd.process_group(0)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = cmd.spawn().map_err(|source| SourceError::Spawn {
            exe: self.exe.display().to_string(),
            source,
        })?;
        let pid = child.id();
        crate::clock::phase("worker spawned");
        if let Some(b) = &before {
            b.follow(pid);
        }
        let mut stdin = child.stdin.take();
        // The request is the first line. A worker that died before reading it is
        // reported by the run thread, with its exit status and stderr; one that
        // finds no request ends with a `failed` end event saying so.
        if let Some(pipe) = &mut stdin
            && pipe.write_all(request.to_line().as_bytes()).is_err()
        {
            stdin = None;
        }
        let killed = Arc::new(AtomicBool::new(false));
        let exited = Arc::new(AtomicBool::new(false));
        let limit = req.time_limit.filter(|_| !req.step);
        let (gone_tx, timed_out) = match limit {
            Some(limit) => {
                let (tx, rx) = mpsc::channel::<()>();
                let deadline = Deadline {
                    limit,
                    pid,
                    exited: exited.clone(),
                    at_ns: Arc::new(AtomicU64::new(0)),
                };
                let at_ns = deadline.at_ns.clone();
                std::thread::Builder::new()
                    .name("gpulab-deadline".into())
                    .spawn(move || deadline.keep(&rx))
                    .map_err(|source| SourceError::Spawn {
                        exe: "deadline thread".into(),
                        source,
                    })?;
                (Some(tx), Some((limit, at_ns)))
            }
            None => (None, None),
        };

        let stderr_tail = Arc::new(Mutex::new(String::new()));
        let stderr_thread = child.stderr.take().map(|err| {
            let tail = stderr_tail.clone();
            std::thread::spawn(move || collect_tail(err, &tail))
        });
        let watch = WorkerRun {
            child,
            sink,
            seen: Seen::default(),
            movement: Movement::default(),
            pacer: Pacer::default(),
            killed: killed.clone(),
            exited: exited.clone(),
            stderr_tail,
            stderr_thread,
            sample_hz: req.sample_hz,
            before,
            load_at_start,
            waiting_at_start,
            timed_out,
            _gone: gone_tx,
        };
        std::thread::Builder::new()
            .name("gpulab-run".into())
            .spawn(move || watch.run())
            .map_err(|source| SourceError::Spawn {
                exe: "run thread".into(),
                source,
            })?;
        Ok(Box::new(LocalControl {
            stdin,
            pid,
            killed,
            exited,
        }))
    }
}

struct LocalControl {
    stdin: Option<ChildStdin>,
    pid: u32,
    killed: Arc<AtomicBool>,
    exited: Arc<AtomicBool>,
}

impl RunControl for LocalControl {
    fn send(&mut self, steer: Steer) {
        let cmd = match steer {
            Steer::Step => Command::Step,
            Steer::Run => Command::Run,
        };
        if let Some(stdin) = &mut self.stdin
            && writeln!(stdin, "{}", cmd.word())
                .and_then(|_| stdin.flush())
                .is_err()
        {
            self.stdin = None;
        }
    }

    fn cancel(&mut self) {
        if self.exited.load(Ordering::SeqCst) {
            return;
        }
        self.killed.store(true, Ordering::SeqCst);
        if let Some(pid) = rustix::process::Pid::from_raw(self.pid as i32) {
            let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
        }
    }
}

impl Drop for LocalControl {
    /// A run nobody steers any more is cancelled, so no worker outlives its parent's
    /// interest in it.
    fn drop(&mut self) {
        self.cancel();
    }
}

/// What the run thread must know of the stream it passes on (it never folds
/// it: that is the consumer's session).
#[derive(Default)]
struct Seen {
    /// The worker's `meta`: the run started.
    meta: bool,
    /// The worker's own `end`.
    end: bool,
    /// The text of each note, so the sampler's are not said twice.
    notes: BTreeSet<String>,
    /// The call the worker went into and has not answered yet.
    in_flight: Option<Calling>,
}

impl Seen {
    fn saw(&mut self, event: &Event) {
        match event {
            Event::Meta(_) => self.meta = true,
            Event::End(_) => self.end = true,
            Event::Calling(c) => self.in_flight = Some(c.clone()),
            Event::Call(c) if self.in_flight.as_ref().is_some_and(|f| f.seq <= c.seq) => {
                self.in_flight = None;
            }
            Event::Note(n) => {
                self.notes.insert(n.text.clone());
            }
            _ => {}
        }
    }
}

/// Everything the run thread owns.
struct WorkerRun {
    child: Child,
    sink: Sink,
    seen: Seen,
    /// Whether memory can move between events: paces the sampler.
    movement: Movement,
    pacer: Pacer,
    killed: Arc<AtomicBool>,
    exited: Arc<AtomicBool>,
    stderr_tail: Arc<Mutex<String>>,
    /// Joined once the worker is gone, so a crash report has all it wrote.
    stderr_thread: Option<std::thread::JoinHandle<()>>,
    sample_hz: f64,
    /// NVML's readings from before the worker started, until its `meta`.
    before: Option<BeforeRun>,
    /// The host's 1-minute load average when the run was started.
    load_at_start: Option<f64>,
    /// The host's CPU stall total (µs) and the time it was read, at the start.
    waiting_at_start: Option<(u64, u64)>,
    /// The run's time limit, and when the deadline thread ended the worker
    /// for passing it (0: it did not).
    timed_out: Option<(Duration, Arc<AtomicU64>)>,
    /// Dropped when the worker is reaped: tells the deadline thread it is gone.
    _gone: Option<mpsc::Sender<()>>,
}

/// Ends a worker that passes its time limit: SIGTERM to its process group,
/// SIGKILL if it is still there two seconds later. It waits on a channel the
/// run thread drops once the worker is reaped, so it never signals a pid that
/// may have been reused.
struct Deadline {
    limit: Duration,
    pid: u32,
    exited: Arc<AtomicBool>,
    /// When the limit passed (CLOCK_MONOTONIC ns); 0 until then.
    at_ns: Arc<AtomicU64>,
}

impl Deadline {
    /// How long a worker has after SIGTERM before SIGKILL.
    const GRACE: Duration = Duration::from_secs(2);

    fn keep(self, gone: &mpsc::Receiver<()>) {
        if gone.recv_timeout(self.limit) != Err(mpsc::RecvTimeoutError::Timeout) {
            return;
        }
        self.at_ns.store(now_ns().max(1), Ordering::SeqCst);
        self.signal(rustix::process::Signal::TERM);
        if gone.recv_timeout(Self::GRACE) == Err(mpsc::RecvTimeoutError::Timeout) {
            self.signal(rustix::process::Signal::KILL);
        }
    }

    fn signal(&self, signal: rustix::process::Signal) {
        if self.exited.load(Ordering::SeqCst) {
            return;
        }
        // The worker leads a process group of its own (`process_group(0)`).
        if let Some(pid) = rustix::process::Pid::from_raw(self.pid as i32) {
            let _ = rustix::process::kill_process_group(pid, signal);
        }
    }
}

impl WorkerRun {
    fn run(mut self) {
        let pid = self.child.id();
        let mut telemetry = self.read_events(pid);
        let status = self.reap();
        crate::clock::phase("worker exited");
        let sampler_notes = telemetry.stop();
        self.note_sampler(sampler_notes);
        if !self.seen.end {
            let end = End {
                t_ns: now_ns(),
                status: self.end_status(&status),
                leaked: Vec::new(),
            };
            self.emit(Event::End(end));
        }
        if let Some(info) = telemetry.device.take() {
            let probe = telemetry.after_exit.take();
            self.watch_after_exit(&info, probe, pid, telemetry.start_used);
            crate::clock::phase("memory back");
        }
        if !self.seen.meta {
            // It never started: there is nothing to judge.
            return;
        }
        if let Some(load) = self.host_load() {
            self.emit(Event::Load(load));
        }
    }

    /// Passes on what the worker writes until its stdout closes, a batch per
    /// read of the pipe; starts sampling once its `meta` names the device.
    fn read_events(&mut self, pid: u32) -> Telemetry {
        let mut telemetry = Telemetry::default();
        let Some(out) = self.child.stdout.take() else {
            return telemetry;
        };
        let mut out = BufReader::new(out);
        let mut batch = Vec::new();
        let mut line = String::new();
        let mut n = 0;
        loop {
            // Before a read that may wait, the batch goes on, and the sampler
            // reads once now that it has.
            if !out.buffer().contains(&b'\n') || batch.len() >= BATCH_EVENTS {
                self.pass_on(&mut batch);
            }
            line.clear();
            match out.read_line(&mut line) {
                Ok(0) | Err(_) => break,
                Ok(_) => {}
            }
            n += 1;
            if line.trim().is_empty() {
                continue;
            }
            let event = parse_event(n, &line);
            self.seen.saw(&event);
            self.movement.saw(&event);
            let meta = match &event {
                Event::Meta(m) => Some((
                    DeviceInfo::from_meta(m),
                    m.lab.as_ref().is_some_and(|l| l.every_gpu),
                )),
                _ => None,
            };
            batch.push(event);
            if let Some((info, every_gpu)) = meta {
                // The meta goes first, then the readings from before it.
                self.sink.send(std::mem::take(&mut batch));
                let pacer = self.pacer.clone();
                telemetry.start(
                    info,
                    every_gpu,
                    pid,
                    (self.sample_hz, pacer),
                    &self.sink,
                    self.before.take(),
                );
            }
        }
        self.pass_on(&mut batch);
        telemetry
    }

    /// Sends the batch and tells the sampler: a reading now (the events are
    /// news), fast for a moment after, and fast for as long as the driver still
    /// owes a release.
    fn pass_on(&mut self, batch: &mut Vec<Event>) {
        if batch.is_empty() {
            return;
        }
        self.sink.send(std::mem::take(batch));
        self.pacer.hold(self.movement.can_move());
        self.pacer.poke(SETTLE);
    }

    /// The host's load over the run: the higher of the load averages read at its
    /// start and now (a 1-minute average moves slowly, so a loaded minute shows
    /// at one end or both), against the CPUs this process may use.
    fn host_load(&self) -> Option<trace::HostLoad> {
        let load_avg = [self.load_at_start, crate::telemetry::load_avg()]
            .into_iter()
            .flatten()
            .reduce(f64::max)?;
        let cores = std::thread::available_parallelism().ok()?.get();
        let t_ns = now_ns();
        // What the run itself met, unlike the slow 1-minute average.
        let cpu_waiting = self.waiting_at_start.and_then(|(us, at)| {
            let waited_ns = crate::telemetry::cpu_waiting_us()?.checked_sub(us)? * 1000;
            let wall_ns = t_ns.checked_sub(at).filter(|w| *w > 0)?;
            Some((waited_ns as f64 / wall_ns as f64).clamp(0.0, 1.0))
        });
        Some(trace::HostLoad {
            t_ns,
            load_avg,
            cores: u32::try_from(cores).unwrap_or(u32::MAX),
            cpu_waiting,
        })
    }

    /// Waits for the worker to exit, then for the rest of what it wrote on stderr.
    fn reap(&mut self) -> io::Result<ExitStatus> {
        let status = self.child.wait();
        self.exited.store(true, Ordering::SeqCst);
        drop(self._gone.take());
        if let Some(t) = self.stderr_thread.take() {
            let _ = t.join();
        }
        status
    }

    /// Notes from the sampler that the stream did not carry yet, as warnings.
    fn note_sampler(&mut self, sampler_notes: Vec<String>) {
        for text in sampler_notes {
            if !self.seen.notes.contains(&text) {
                let note = Note {
                    t_ns: now_ns(),
                    level: NoteLevel::Warning,
                    text: format!("telemetry: {text}"),
                    line: None,
                };
                self.emit(Event::Note(note));
            }
        }
    }

    /// How a run ended that sent no end event: cancelled, or crashed with why.
    fn end_status(&self, waited: &io::Result<ExitStatus>) -> EndStatus {
        if let Some((limit, at)) = &self.timed_out
            && let at_ns = at.load(Ordering::SeqCst)
            && at_ns > 0
        {
            return EndStatus::TimedOut {
                limit_ms: u64::try_from(limit.as_millis()).unwrap_or(u64::MAX),
                in_flight: self.seen.in_flight.as_ref().map(|c| InFlight {
                    seq: c.seq,
                    line: c.line,
                    iter: c.iter.clone(),
                    api: c.api.as_str().to_string(),
                    for_ms: at_ns.saturating_sub(c.t_ns) / 1_000_000,
                }),
            };
        }
        if self.killed.load(Ordering::SeqCst) {
            return EndStatus::Cancelled;
        }
        let tail = self
            .stderr_tail
            .lock()
            .map(|t| t.clone())
            .unwrap_or_default();
        Exit::of(waited).worker_crash(&tail)
    }

    fn emit(&mut self, event: Event) {
        self.seen.saw(&event);
        self.sink.event(event);
    }

    /// Device memory after the worker is gone: the driver takes back everything
    /// the process held, leaks included. Samples until it is back near the level
    /// seen at the start, or a short while has passed.
    fn watch_after_exit(
        &mut self,
        info: &DeviceInfo,
        probe: Option<Probe>,
        pid: u32,
        start_used: Option<u64>,
    ) {
        if info.kind == DeviceKind::Cpu {
            self.emit(Event::Note(Note {
                t_ns: now_ns(),
                level: NoteLevel::Info,
                text: "the worker has exited; its host memory (all this CPU device held) went back to the OS with it".into(),
                line: None,
            }));
            return;
        }
        let mut probe = probe.unwrap_or_else(|| Probe::for_device(info, pid).0);
        let deadline = Instant::now() + AFTER_EXIT_WATCH;
        loop {
            let Some(r) = probe.read() else { return };
            let back = start_used.is_some_and(|s| r.used_bytes <= s + BACK_SLACK_BYTES);
            let mut sample = r.into_sample(probe.source());
            // The process is gone: only the device-wide figure means anything now.
            sample.process_bytes = None;
            self.emit(Event::Sample(sample));
            if back || Instant::now() >= deadline {
                return;
            }
            // One NVML read costs microseconds; a coarse poll would add its period
            // to what the report shows as the driver's time to hand memory back.
            std::thread::sleep(Duration::from_millis(2));
        }
    }
}

/// What the parent measures of the worker once its `meta` names the device.
#[derive(Default)]
struct Telemetry {
    sampler: Option<SamplerHandle>,
    /// Memory in use on the device when sampling started.
    start_used: Option<u64>,
    device: Option<DeviceInfo>,
    /// The probe that watches memory come back after the worker exits, made with
    /// the sampler's so NVML stays initialised in between: shutting it down when
    /// the sampler stops and initialising it again cost every run milliseconds.
    after_exit: Option<Probe>,
}

impl Telemetry {
    fn start(
        &mut self,
        info: DeviceInfo,
        every_gpu: bool,
        pid: u32,
        (hz, pacer): (f64, Pacer),
        sink: &Sink,
        before: Option<BeforeRun>,
    ) {
        // The worker made the same probe and already reported its notes.
        let (mut probe, _notes) = Probe::for_device(&info, pid);
        if every_gpu {
            probe.every_gpu();
        }
        // NVML's readings of this device from before the worker existed: the start
        // level is the device without the worker, context and all.
        let early = match before {
            Some(mut b) if probe.source() == MemorySource::Nvml => {
                b.finish(info.pci_bus_id.as_deref())
            }
            _ => Vec::new(),
        };
        self.start_used = early
            .first()
            .map(|s| s.used_bytes)
            .or_else(|| probe.read().map(|r| r.used_bytes));
        sink.send(early.into_iter().map(Event::Sample).collect());
        self.sampler = Some(crate::child::sample_into(probe, hz, pacer, sink));
        if info.kind != DeviceKind::Cpu {
            self.after_exit = Some(Probe::for_device(&info, pid).0);
        }
        self.device = Some(info);
    }

    /// Stops the sampler; returns the notes it made while sampling.
    fn stop(&mut self) -> Vec<String> {
        let Some(mut s) = self.sampler.take() else {
            return Vec::new();
        };
        s.stop();
        // A fallback the sampler only found while sampling (NVML listing other
        // pids than the worker's, in a container) belongs in the report.
        s.take_notes()
    }
}

/// Line `n` of the worker's stdout as an event, or a warning that it could not be read.
fn parse_event(n: usize, line: &str) -> Event {
    match trace::jsonl::parse_line(n, line) {
        Ok(e) => e,
        Err(e) => Event::Note(Note {
            t_ns: now_ns(),
            level: NoteLevel::Warning,
            text: format!("worker sent an unreadable event: {e}"),
            line: None,
        }),
    }
}

fn collect_tail(mut err: impl Read, tail: &Mutex<String>) {
    let mut buf = [0u8; 4096];
    while let Ok(n) = err.read(&mut buf) {
        if n == 0 {
            break;
        }
        if let Ok(mut t) = tail.lock() {
            t.push_str(&String::from_utf8_lossy(&buf[..n]));
            if t.len() > 4096 {
                let cut = t.len() - 4096;
                let cut = (cut..t.len())
                    .find(|i| t.is_char_boundary(*i))
                    .unwrap_or(t.len());
                t.replace_range(..cut, "");
            }
        }
    }
}
