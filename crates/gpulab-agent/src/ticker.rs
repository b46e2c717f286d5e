//! A thread that looks every [`EVERY`] for what only a regular look finds: the
//! CUDA side's device spans CUPTI holds, and another CUPTI client loaded since
//! ([`crate::cuda`]). Only a process that watches CUDA has one; it holds
//! nothing of its own, so a process may end at any moment beside it.

use std::sync::OnceLock;
use std::time::Duration;

const EVERY: Duration = Duration::from_millis(100);

static TICK: OnceLock<fn()> = OnceLock::new();

/// Calls `tick` every [`EVERY`] from a thread of the agent's, from now on.
pub fn start(tick: fn()) {
    if TICK.set(tick).is_ok() {
        spawn();
    }
}

/// In a forked child: the parent's ticker did not come along.
pub fn forked() {
    if TICK.get().is_some() {
        spawn();
    }
}

fn spawn() {
    let _ = crate::quiet::spawn("gpulab-agent", || {
        loop {
            std::thread::sleep(EVERY);
            if let Some(tick) = TICK.get() {
                tick();
            }
        }
    });
}
