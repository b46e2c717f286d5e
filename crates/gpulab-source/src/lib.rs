//! The run source: starts a lab's worker or a watched program, steers it,
//! samples its memory, and hands its events, batch by batch, to whoever listens
//! (the headless `run` and `watch`, the dashboard, tests). Local today; the same
//! interface can start `gpulab worker` over ssh, since the stream is already
//! text on a pipe.
//!
//! The source never folds what it sends: each consumer drives one
//! [`Session`], which folds the one `Run`, records with one policy and judges
//! a lab's claims once the stream has ended.
//!
//! Also here, what starting a run needs: `watch` (a program run with the
//! agent inside it, its supervisor and the ring it writes into), `child` (how
//! a child ended), `signals` (gpulab's own), `history` (the recordings on
//! disk). The crate's manifest is its layer: it knows the model, the lab
//! language, the worker and the host, and no screen.

pub mod child;
pub mod history;
pub mod signals;
pub mod watch;

// The names the code has always used for the crates below this one.
use gpulab_backend as backend;
use gpulab_engine as engine;
use gpulab_host::{clock, dirs, hostname, machine, multicast};
use gpulab_lab as lab;
use gpulab_model::{run, trace, verdict};
use gpulab_telemetry as telemetry;

mod availability;
mod local;
mod movement;
mod program;
mod session;

use std::collections::VecDeque;
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::time::Duration;

use crate::lab::{Lab, LabError, Params, Variant};
use crate::trace::Event;
use crate::watch::{WatchError, WatchRequest};

pub use crate::trace::sink::Sink;
pub use availability::Availability;
pub use local::LocalSource;
pub use session::{Keeper, Recorded, Recorder, Session, is_stdout};

pub type Result<T, E = SourceError> = std::result::Result<T, E>;

#[derive(Debug, thiserror::Error)]
pub enum SourceError {
    #[error("cannot start the worker process ({exe}): {source}")]
    Spawn { exe: String, source: std::io::Error },
    #[error("cannot find gpulab's own executable to start a worker: {0}")]
    NoExe(std::io::Error),
    #[error(transparent)]
    Lab(#[from] LabError),
    #[error(transparent)]
    Program(#[from] WatchError),
}

/// What a run runs: a lab's variant in a worker, or a program gpulab did not
/// write, with the agent inside it.
#[derive(Debug)]
pub enum Workload {
    Lab(Box<RunRequest>),
    Program(WatchRequest),
}

/// One run to start. Its variant is looked up once, when it is made
/// ([`RunRequest::new`]): a request always names one its lab has.
#[derive(Debug, Clone)]
pub struct RunRequest {
    pub lab: Lab,
    /// The variant of `lab` it runs, found when the request was made.
    variant: Variant,
    /// Every parameter of the lab, resolved (`catalog::resolve_params`).
    pub params: Params,
    pub device: Option<String>,
    pub budget_bytes: Option<u64>,
    pub unbounded: bool,
    /// Start paused; `Steer::Step` runs one line, `Steer::Run` the rest.
    pub step: bool,
    /// Telemetry rate while the worker runs.
    pub sample_hz: f64,
    /// The worker is ended (SIGTERM, then SIGKILL) once it has run this long
    /// and the run ends `timed_out`, naming the call it was in. Not applied to
    /// a stepped run, which waits for its user.
    pub time_limit: Option<Duration>,
}

impl RunRequest {
    /// A run of `lab`'s variant `variant` with `params` (every parameter,
    /// resolved) at `sample_hz`: no device asked for, no budget, no time
    /// limit, not stepped. An unknown variant is the lab's error, naming the
    /// nearest one.
    pub fn new(
        lab: Lab,
        variant: &str,
        params: Params,
        sample_hz: f64,
    ) -> Result<RunRequest, LabError> {
        let variant = lab.find_variant(variant)?.clone();
        Ok(RunRequest {
            lab,
            variant,
            params,
            device: None,
            budget_bytes: None,
            unbounded: false,
            step: false,
            sample_hz,
            time_limit: None,
        })
    }

    /// The variant it runs.
    pub fn variant(&self) -> &Variant {
        &self.variant
    }

    /// The variant's name.
    pub fn variant_name(&self) -> &str {
        &self.variant().name
    }
}

/// Something that can run labs and programs: local child processes, later a
/// remote host.
pub trait RunSource {
    /// Starts `origin`; its events go into `sink` in batches, in arrival order,
    /// from the threads that make them (no thread of the source's own between),
    /// and `sink` closes after the last.
    fn start(&self, origin: Workload, sink: Sink) -> Result<Box<dyn RunControl>>;
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

/// Steering a started run. Dropping it cancels the run.
pub trait RunControl: Send {
    /// A program runs as it likes: only a lab's worker can be steered.
    fn send(&mut self, steer: Steer);
    /// Stops the run: a worker is killed now; a program gets SIGTERM, then
    /// SIGKILL if it still runs a few seconds later. The stream ends with a
    /// cancelled `end` event.
    fn cancel(&mut self);
}

/// Batches a run's channel holds at most: a consumer slower than the run (a
/// recording on a slow disk) holds the run's reading back instead of growing
/// gpulab's memory. A batch is what one read of a pipe brought (at most a few
/// hundred events) or a sampler's readings of ~33 ms.
pub const CHANNEL_BATCHES: usize = 64;

/// A started run read from a channel: its events (the worker's or the
/// program's agents', samples, notes, `end`, readings after the exit) and its
/// controls. Events come in batches, in arrival order: what one read of a pipe
/// brought, a sampler's batch whole (at 1 kHz that is ~30 messages a second,
/// not 1,000). The channel closes after the last event.
pub struct RunHandle {
    pub events: Receiver<Vec<Event>>,
    pub control: Box<dyn RunControl>,
    /// Events of a batch `next_event` has not handed out yet.
    pending: VecDeque<Event>,
}

impl RunHandle {
    /// Starts `origin` on `source`, its events into a channel of its own.
    pub fn start(source: &dyn RunSource, origin: Workload) -> Result<RunHandle> {
        let (sink, events) = Sink::channel(CHANNEL_BATCHES);
        let control = source.start(origin, sink)?;
        Ok(RunHandle {
            events,
            control,
            pending: VecDeque::new(),
        })
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
