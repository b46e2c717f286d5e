//! The readings of every GPU of the host while the program runs: each of its
//! processes' bytes on each GPU (NVML), which is how a job of many ranks shows
//! each rank's memory on its own device.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

use crate::telemetry::{Gpus, process_tree};
use crate::trace::Event;
use crate::trace::sink::Sink;

/// Whether a pid's agent reported (the supervisor's record of them).
pub(super) type Reported = Box<dyn Fn(u32) -> bool + Send>;

/// The fastest the GPUs are read: NVML's process list costs tens of
/// microseconds a GPU, and the readings say only changes.
const FASTEST: Duration = Duration::from_millis(10);
const SLOWEST: Duration = Duration::from_secs(1);

/// The thread reading the GPUs; [`GpuWatch::stop`] takes one last reading
/// (the program's processes gone from every GPU) and ends it.
pub(super) struct GpuWatch {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl GpuWatch {
    /// Reads `gpus` every 1/`hz` seconds (10 ms to 1 s) on behalf of the
    /// process tree of `root` and every process `reported` names, sending
    /// each reading into `sink`.
    pub(super) fn start(
        mut gpus: Gpus,
        root: u32,
        reported: Reported,
        hz: f64,
        sink: Sink,
    ) -> Option<GpuWatch> {
        let every = Duration::from_secs_f64(1.0 / hz.max(1e-3)).clamp(FASTEST, SLOWEST);
        let stop = Arc::new(AtomicBool::new(false));
        let stopped = stop.clone();
        let thread = std::thread::Builder::new()
            .name("gpulab-watch-gpus".into())
            .spawn(move || {
                let mut program = Program::new(root, reported);
                loop {
                    let last = stopped.load(Ordering::SeqCst);
                    let readings = gpus.read(&mut |pid| program.holds(pid));
                    if !readings.is_empty()
                        && !sink.send(readings.into_iter().map(Event::GpuReading).collect())
                    {
                        return;
                    }
                    if last {
                        return;
                    }
                    std::thread::sleep(every);
                }
            })
            .ok()?;
        Some(GpuWatch {
            stop,
            thread: Some(thread),
        })
    }

    pub(super) fn stop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for GpuWatch {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Which pids are the program's: its process tree, walked again only when
/// NVML lists a pid not yet placed, and every process whose agent reported
/// (one that left the tree, reparented, is still the program's).
struct Program {
    root: u32,
    reported: Reported,
    ours: BTreeSet<u32>,
    theirs: BTreeSet<u32>,
}

impl Program {
    fn new(root: u32, reported: Reported) -> Program {
        Program {
            root,
            reported,
            ours: BTreeSet::from([root]),
            theirs: BTreeSet::new(),
        }
    }

    fn holds(&mut self, pid: u32) -> bool {
        if self.ours.contains(&pid) {
            return true;
        }
        if (self.reported)(pid) {
            self.ours.insert(pid);
            return true;
        }
        if self.theirs.contains(&pid) {
            return false;
        }
        self.ours.extend(process_tree(self.root));
        if self.ours.contains(&pid) {
            true
        } else {
            self.theirs.insert(pid);
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A pid is the program's when it is in the tree of its root (walked again
    /// only for a pid not placed yet) or its agent reported; any other is not.
    #[test]
    fn the_programs_pids_are_its_tree_and_its_reporting_processes() {
        let Ok(mut child) = std::process::Command::new("sleep").arg("5").spawn() else {
            return; // no `sleep` here: nothing to test against
        };
        let me = std::process::id();
        let mut program = Program::new(me, Box::new(|pid| pid == 4_000_000));
        assert!(program.holds(me));
        assert!(program.holds(child.id()), "a child of the root");
        assert!(program.holds(4_000_000), "a process whose agent reported");
        assert!(!program.holds(1), "init is not the program's");
        assert!(program.theirs.contains(&1));
        let _ = child.kill();
        let _ = child.wait();
    }
}
