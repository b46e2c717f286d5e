//! SIGINT, SIGTERM and SIGHUP delivered as a call on a thread of its own: how a
//! headless run stops with its partial report and the dashboard leaves the
//! alternate screen. Never prints.
//!
//! signal-hook is already in the tree (crossterm reads SIGWINCH with it), so it
//! replaces the `ctrlc` crate without adding one.

use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
use signal_hook::iterator::Signals;

/// The signals that end gpulab's work in order, with a report (exit 130).
pub const TERMINATION: [i32; 3] = [SIGINT, SIGTERM, SIGHUP];

/// Calls `on_signal` for every termination signal the process receives, instead
/// of the default of dying on the spot. The handler only wakes a thread; `on_signal`
/// runs there, so it may lock, allocate and send.
pub fn on_termination(mut on_signal: impl FnMut() + Send + 'static) -> std::io::Result<()> {
    let mut signals = Signals::new(TERMINATION)?;
    std::thread::Builder::new()
        .name("gpulab-signals".into())
        .spawn(move || {
            for _ in signals.forever() {
                on_signal();
            }
        })?;
    Ok(())
}
