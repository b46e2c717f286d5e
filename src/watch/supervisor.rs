//! The watched program's supervisor: forwards the agent's events and the
//! sampler's readings in arrival order, stops the program's whole process
//! group when asked, and ends the stream with how the program ended. Never
//! reads the pipe itself (`pipe` does) and never folds.

use std::os::unix::process::ExitStatusExt;
use std::process::{Child, ExitStatus};
use std::sync::Arc;
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, SyncSender};
use std::time::Instant;

use rustix::process::{Pid, Signal};

use super::{AFTER_EXIT, CHECK_EVERY, Stopper};
use crate::clock::now_ns;
use crate::telemetry::{Gpu0, Probe, Sampler, SamplerHandle};
use crate::trace::{self, End, EndStatus, Event, Meta, Note, NoteLevel};

use super::agent::AgentLibrary;

/// The processes a stop signals.
#[derive(Debug, Clone, Copy)]
pub(super) enum Group {
    /// The program leads a process group of its own: the group.
    Own(u32),
    /// The program shares gpulab's group (its stdin is gpulab's terminal, where
    /// a background group would be stopped at its first read): the program
    /// and every process descended from it.
    Tree(u32),
}

impl Group {
    fn signal(self, signal: Signal) {
        match self {
            Group::Own(pid) => {
                if let Some(pid) = Pid::from_raw(pid as i32) {
                    let _ = rustix::process::kill_process_group(pid, signal);
                }
            }
            Group::Tree(root) => {
                for pid in crate::telemetry::process_tree(root) {
                    if let Some(pid) = Pid::from_raw(pid as i32) {
                        let _ = rustix::process::kill_process(pid, signal);
                    }
                }
            }
        }
    }
}

/// The processes whose agent reported, and those that sent their last record.
#[derive(Default)]
pub(super) struct Agents {
    attached: std::collections::BTreeSet<u32>,
    detached: std::collections::BTreeSet<u32>,
}

impl Agents {
    fn saw(&mut self, event: &Event) {
        if let Event::Agent(a) = event {
            match a.state {
                trace::AgentState::Detached { .. } => self.detached.insert(a.pid),
                _ => self.attached.insert(a.pid),
            };
        }
    }

    /// Every process that attached has sent its last record or is gone (a
    /// zombie is gone: its descriptors are closed, so its pipe is too).
    fn all_done(&self) -> bool {
        self.attached
            .iter()
            .filter(|pid| !self.detached.contains(pid))
            .all(|pid| !alive(*pid))
    }
}

/// Is `pid` a process that has not exited?
fn alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        // The state follows the command name, which is in parentheses and may
        // hold any character.
        Ok(stat) => stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().next())
            .is_some_and(|state| state != "Z" && state != "X"),
        Err(_) => false,
    }
}

pub(super) struct Supervisor {
    pub(super) child: Child,
    pub(super) group: Group,
    /// Kept open while the program may still load it.
    pub(super) _library: AgentLibrary,
    /// Steps of the stop plan taken so far.
    pub(super) escalated: usize,
    /// Whether gpulab signalled the program (it then says it stopped it).
    pub(super) signalled: bool,
    /// gpulab's own write end of the agents' pipe: held until every agent is
    /// done, then closed, so the reader's end of file means all is read.
    pub(super) writer: Option<std::io::PipeWriter>,
    pub(super) agents: Agents,
    pub(super) tx: SyncSender<Event>,
    pub(super) stop: Arc<Stopper>,
    pub(super) meta: Meta,
    /// What was done to reach the program's OpenCL loader, said after `meta`.
    pub(super) notes: Vec<(NoteLevel, String)>,
    /// NVIDIA GPU 0, opened before the program started (its memory in use then
    /// is the baseline), when there is one: then NVML is read; else the RSS of
    /// the program's processes.
    pub(super) gpu: Option<Gpu0>,
    pub(super) sample_hz: f64,
}

impl Supervisor {
    pub(super) fn run(mut self, inner_tx: SyncSender<Event>, inner: Receiver<Event>) {
        let _ = self.tx.send(Event::Meta(Box::new(self.meta.clone())));
        for (level, text) in std::mem::take(&mut self.notes) {
            self.note(level, text);
        }
        let mut sampler = self.sampler(inner_tx);
        let mut stop_asked: Option<Instant> = None;
        let mut exited: Option<(Instant, std::io::Result<ExitStatus>)> = None;
        // The program's state is looked at every CHECK_EVERY whatever arrives: a
        // sampler that never fails (NVML reads the device, not the process) keeps
        // events coming faster than any receive would time out.
        let mut checked = Instant::now();
        loop {
            match inner.recv_timeout(CHECK_EVERY) {
                Ok(event) => {
                    self.agents.saw(&event);
                    if self.tx.send(event).is_err() {
                        // Nobody listens any more: stop the program too.
                        self.stop.stop(None);
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
            } else if self.writer.is_some() && self.agents.all_done() {
                self.writer = None;
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
        if self.signalled {
            // Stopped by gpulab: nothing of the program's group outlives it
            // (a `sh -c` whose children would run on with parent 1).
            self.group.signal(Signal::KILL);
        }
        // Readings already forwarded may still sit in `inner`.
        while let Ok(event) = inner.try_recv() {
            let _ = self.tx.send(event);
        }
        let status = self.end_status(status);
        let _ = self.tx.send(Event::End(End {
            t_ns: now_ns(),
            status,
            leaked: Vec::new(),
        }));
    }

    /// Readings of the memory of the program's processes, forwarded into
    /// `inner_tx` by a thread of their own; None (said) when there are none.
    fn sampler(&mut self, inner_tx: SyncSender<Event>) -> Option<SamplerHandle> {
        let pid = self.child.id();
        let probe = match self.gpu.take() {
            Some(gpu) => Ok(Probe::nvidia_gpu0(pid, gpu)),
            None => Probe::rss_tree(pid),
        };
        match probe {
            Ok(probe) => {
                let (batch_tx, batch_rx) = mpsc::channel::<Vec<trace::Sample>>();
                std::thread::spawn(move || {
                    for batch in batch_rx {
                        for s in batch {
                            if inner_tx.send(Event::Sample(s)).is_err() {
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
        }
    }

    /// How the program ended; "cancelled" when gpulab stopped it (the program's
    /// own status then goes into a note).
    fn end_status(&self, status: std::io::Result<ExitStatus>) -> EndStatus {
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
        let _ = self.tx.send(Event::Note(Note {
            t_ns: now_ns(),
            level,
            text,
            line: None,
        }));
    }
}
