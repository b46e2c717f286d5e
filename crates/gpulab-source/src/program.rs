//! A watched program as a run: started by [`crate::watch`] with the agent
//! inside, its events into the run's sink, steered by the one [`RunControl`]
//! every run has.

use std::sync::Arc;

use crate::trace::sink::Sink;
use crate::watch::{Stopper, WatchRequest};

use super::{Result, RunControl, Steer};

pub(super) fn start(req: WatchRequest, sink: Sink) -> Result<Box<dyn RunControl>> {
    let stop = req.stop.clone();
    crate::watch::start(req, sink)?;
    Ok(Box::new(ProgramControl { stop }))
}

/// A program runs as it likes; cancelling it stops its whole process group
/// (SIGTERM, then SIGKILL: [`Stopper::stop`]).
struct ProgramControl {
    stop: Arc<Stopper>,
}

impl RunControl for ProgramControl {
    fn send(&mut self, _steer: Steer) {}

    fn cancel(&mut self) {
        self.stop.stop(None);
    }
}

impl Drop for ProgramControl {
    /// A program nobody follows any more is stopped, as a worker is.
    fn drop(&mut self) {
        self.cancel();
    }
}
