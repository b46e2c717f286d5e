//! The watched program's supervisor: samples its memory, stops the program's
//! whole process group when asked, tells the agents' reader when the program
//! has exited (it then ends once no process records), and ends the stream
//! with how the program ended. It passes no event on: the agents' reader
//! (`ring`) and the sampler send theirs into the run's sink themselves, and
//! never folds.

use std::os::unix::process::ExitStatusExt;
use std::process::{Child, ExitStatus};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Instant;

use rustix::process::{Pid, Signal};

use super::{AFTER_EXIT, CHECK_EVERY, Stopper};
use crate::child::Exit;
use crate::clock::now_ns;
use crate::telemetry::{Gpu0, Gpus, Pacer, Probe, SamplerHandle};
use crate::trace::sink::Sink;
use crate::trace::{End, EndStatus, Event, NoteLevel};

use super::agent::AgentLibrary;
use super::python::PythonHook;

/// The processes a stop signals.
#[derive(Debug, Clone, Copy)]
pub(super) enum Group {
    /// The program leads a process group of its own: the group, and every
    /// process descended from the program.
    Own(u32),
    /// The program shares gpulab's group (its stdin is gpulab's terminal, where
    /// a background group would be stopped at its first read): the program
    /// and every process descended from it.
    Tree(u32),
}

impl Group {
    fn signal(self, signal: Signal) {
        let root = match self {
            Group::Own(pid) | Group::Tree(pid) => pid,
        };
        // Every process descended from the program too: one that left the
        // group for a session or group of its own (setsid, setpgid) is no less
        // the program's, and a stop that missed it left it running. The tree
        // is read before anything is signalled: a parent that dies of the
        // signal first takes the way to its children with it.
        let tree = crate::telemetry::process_tree(root);
        if let Group::Own(pid) = self
            && let Some(pid) = Pid::from_raw(pid as i32)
        {
            let _ = rustix::process::kill_process_group(pid, signal);
        }
        for pid in tree {
            if let Some(pid) = Pid::from_raw(pid as i32) {
                let _ = rustix::process::kill_process(pid, signal);
            }
        }
    }
}

pub(super) struct Supervisor {
    pub(super) child: Child,
    pub(super) group: Group,
    /// The agent and the Python startup hook, kept open while the program's
    /// processes may still load them by path.
    pub(super) _library: (AgentLibrary, PythonHook),
    /// Steps of the stop plan taken so far.
    pub(super) escalated: usize,
    /// Whether gpulab signalled the program (it then says it stopped it).
    pub(super) signalled: bool,
    /// Kept up to date by the agents' reader.
    pub(super) agents: Arc<Mutex<super::ring::Agents>>,
    /// Told once the program has exited: the reader ends when no process
    /// of the program records any more.
    pub(super) program_end: Arc<super::ring::ProgramEnd>,
    /// Set when gpulab gives up on processes that outlive the program: the
    /// reader then ends.
    pub(super) abandoned: Arc<AtomicBool>,
    pub(super) sink: Sink,
    pub(super) stop: Arc<Stopper>,
    /// NVIDIA GPU 0, opened before the program started (its memory in use then
    /// is the baseline), when there is one: then NVML is read; else the RSS of
    /// the program's processes.
    pub(super) gpu: Option<Gpu0>,
    /// Every NVIDIA GPU of the host, read for each process of the program.
    pub(super) gpus: Option<Gpus>,
    pub(super) sample_hz: f64,
    /// Poked by the agents' reader at every batch.
    pub(super) pacer: Pacer,
}

impl Supervisor {
    /// Runs until the program has exited and the agents' records are read to
    /// their end (or given up on), then ends the stream. `reading` is the
    /// agents' reader; it
    /// returns false when nobody listens any more.
    pub(super) fn run(mut self, reading: JoinHandle<bool>) {
        let mut sampler = self.sampler();
        // Fast from the start: a short program makes its context and lets
        // it go before the idle period's next reading.
        self.pacer.poke(super::ring::YOUNG);
        let agents = self.agents.clone();
        let reported: super::gpus::Reported = Box::new(move |pid| match agents.lock() {
            Ok(a) => a.reported(pid),
            Err(p) => p.into_inner().reported(pid),
        });
        let mut gpus = self.gpus.take().and_then(|gpus| {
            super::gpus::GpuWatch::start(
                gpus,
                self.child.id(),
                reported,
                self.sample_hz,
                self.sink.clone(),
            )
        });
        let mut stop_asked: Option<Instant> = None;
        let mut exited: Option<(Instant, std::io::Result<ExitStatus>)> = None;
        let mut reading = Some(reading);
        // What the reader said when it ended: false, nobody listens.
        let mut listened: Option<bool> = None;
        loop {
            std::thread::sleep(CHECK_EVERY);
            if let Some(r) = reading.take_if(|r| r.is_finished()) {
                listened = Some(r.join().unwrap_or(true));
            }
            if exited.is_none() {
                match self.child.try_wait() {
                    Ok(Some(status)) => {
                        self.program_end.exited(status.signal());
                        exited = Some((Instant::now(), Ok(status)));
                        if let Some(mut s) = sampler.take() {
                            s.stop();
                        }
                        if let Some(mut g) = gpus.take() {
                            g.stop();
                        }
                    }
                    Ok(None) => {
                        if listened == Some(false) {
                            // Nobody listens any more: stop the program too.
                            self.stop.stop(None);
                        }
                        self.escalate(&mut stop_asked);
                    }
                    Err(e) => {
                        exited = Some((Instant::now(), Err(e)));
                        self.program_end.exited(None);
                    }
                }
            } else if reading.is_none() {
                break;
            } else if exited
                .as_ref()
                .is_some_and(|(t, _)| t.elapsed() >= AFTER_EXIT)
            {
                self.note(
                    NoteLevel::Warning,
                    "a process the program started is still running after the program exited \
                     and records on; what it does from here on is not shown"
                        .into(),
                );
                break;
            }
        }
        // What the reader holds goes into the stream before the end.
        self.abandoned.store(true, Ordering::SeqCst);
        if let Some(r) = reading {
            let _ = r.join();
        }
        let status = match exited {
            Some((_, status)) => status,
            None => self.child.wait(),
        };
        if let Some(mut s) = sampler.take() {
            s.stop();
        }
        if let Some(mut g) = gpus.take() {
            g.stop();
        }
        if self.signalled {
            // Stopped by gpulab: nothing of the program's group outlives it
            // (a `sh -c` whose children would run on with parent 1).
            self.group.signal(Signal::KILL);
        }
        let status = self.end_status(status);
        self.sink.event(Event::End(End {
            t_ns: now_ns(),
            status,
            leaked: Vec::new(),
        }));
    }

    /// Readings of the memory of the program's processes, each batch whole
    /// into the sink; None (said) when there are none.
    fn sampler(&mut self) -> Option<SamplerHandle> {
        let pid = self.child.id();
        let probe = match self.gpu.take() {
            Some(gpu) => Ok(Probe::nvidia_gpu0(pid, gpu)),
            None => Probe::rss_tree(pid),
        };
        match probe {
            Ok(probe) => Some(crate::child::sample_into(
                probe,
                self.sample_hz,
                self.pacer.clone(),
                &self.sink,
            )),
            Err(e) => {
                self.note(
                    NoteLevel::Warning,
                    format!("no memory readings of pid {pid}: {e}"),
                );
                None
            }
        }
    }

    /// How the program ended; "cancelled" when gpulab stopped it (the program's
    /// own status then goes into a note).
    fn end_status(&self, status: std::io::Result<ExitStatus>) -> EndStatus {
        let status = Exit::of(&status).program_end();
        if !self.signalled {
            return status;
        }
        let how = match &status {
            EndStatus::Finished => "exited with status 0".to_string(),
            EndStatus::Exited { code } => format!("exited with status {code}"),
            EndStatus::Crashed { detail, .. } => format!("was {detail}"),
            other => other.label(),
        };
        self.note(
            NoteLevel::Info,
            format!("stopped by gpulab: signalled, the program {how}"),
        );
        EndStatus::Cancelled
    }

    /// Stop requested: each signal of the plan to the program's group, in turn.
    fn escalate(&mut self, asked: &mut Option<Instant>) {
        if !self.stop.asked() {
            return;
        }
        let since = asked.get_or_insert_with(Instant::now).elapsed();
        let Some(&(after, signal)) = self.stop.plan().get(self.escalated) else {
            return;
        };
        if since >= after {
            self.escalated += 1;
            // A program sharing gpulab's terminal group got the terminal's
            // SIGINT already: a second one could mean "force" to it.
            if !(signal == Signal::INT && matches!(self.group, Group::Tree(_))) {
                self.signalled = true;
                self.group.signal(signal);
            }
        }
    }

    fn note(&self, level: NoteLevel, text: String) {
        self.sink.event(super::note(level, text));
    }
}
