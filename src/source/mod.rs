//! The run source: starts workers, steers them, samples telemetry, and hands one
//! stream of events to whoever listens (the headless CLI today, the dashboard
//! next). Local today; the same interface can start `gpulab worker` over ssh, since
//! the stream is already text on a pipe.

mod availability;
mod local;
mod session;

use std::collections::VecDeque;
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::time::Duration;

use crate::lab::{Lab, LabError, Params};
use crate::trace::Event;

pub use availability::Availability;
pub use local::LocalSource;
pub use session::{Recorded, Recording, Session};

pub type Result<T, E = SourceError> = std::result::Result<T, E>;

#[derive(Debug, thiserror::Error)]
pub enum SourceError {
    #[error("cannot start the worker process ({exe}): {source}")]
    Spawn { exe: String, source: std::io::Error },
    #[error("cannot find gpulab's own executable to start a worker: {0}")]
    NoExe(std::io::Error),
    #[error(transparent)]
    Lab(#[from] LabError),
}

/// One run to start.
#[derive(Debug, Clone)]
pub struct RunRequest {
    pub lab: Lab,
    pub variant: String,
    /// Every parameter of the lab, resolved (`catalog::resolve_params`).
    pub params: Params,
    pub device: Option<String>,
    pub budget_bytes: Option<u64>,
    pub unbounded: bool,
    /// Start paused; `Steer::Step` runs one line, `Steer::Run` the rest.
    pub step: bool,
    /// Telemetry rate while the worker runs.
    pub sample_hz: f64,
}

/// Something that can run labs: a local child process, later a remote host.
pub trait RunSource {
    fn start(&self, req: RunRequest) -> Result<RunHandle>;
    /// Asks the worker side which devices it can run on, and which one a run with
    /// `device` (`--device`) would use. The answer comes on the channel once, when
    /// known (it takes a child process a moment).
    fn availability(&self, device: Option<String>) -> Receiver<Availability>;
}

/// How a user steers a paused run. The source turns it into whatever its
/// worker speaks, so a UI never knows the worker's protocol.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Steer {
    /// Do one more line, then wait.
    Step,
    /// Run the rest without pausing.
    Run,
}

/// Steering a started run.
pub trait RunControl: Send {
    fn send(&mut self, steer: Steer);
    /// Kill the worker now; the stream ends with a cancelled `end` event.
    fn cancel(&mut self);
}

/// A started run: its events (worker's, samples, then claim verdicts) and its
/// controls. Events come in batches, in arrival order: a worker's event alone, a
/// sampler's batch whole (at 1 kHz that is ~30 messages a second, not 1,000). The
/// channel closes after the last event.
pub struct RunHandle {
    pub events: Receiver<Vec<Event>>,
    pub control: Box<dyn RunControl>,
    /// Events of a batch `next_event` has not handed out yet.
    pending: VecDeque<Event>,
}

impl RunHandle {
    pub fn new(events: Receiver<Vec<Event>>, control: Box<dyn RunControl>) -> RunHandle {
        RunHandle {
            events,
            control,
            pending: VecDeque::new(),
        }
    }

    /// The next event, one at a time, waiting at most `wait` for a batch.
    pub fn next_event(&mut self, wait: Duration) -> Result<Event, RecvTimeoutError> {
        loop {
            if let Some(e) = self.pending.pop_front() {
                return Ok(e);
            }
            self.pending = self.events.recv_timeout(wait)?.into();
        }
    }

    pub fn step(&mut self) {
        self.control.send(Steer::Step);
    }

    pub fn run_to_end(&mut self) {
        self.control.send(Steer::Run);
    }

    pub fn cancel(&mut self) {
        self.control.cancel();
    }
}
