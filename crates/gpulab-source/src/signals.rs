//! SIGINT, SIGTERM and SIGHUP delivered as a call on a thread of its own: how a
//! headless run stops with its partial report and the dashboard leaves the
//! alternate screen. Never prints.
//!
//! signal-hook is already in the tree (crossterm reads SIGWINCH with it), so it
//! replaces the `ctrlc` crate without adding one.

use std::sync::atomic::{AtomicI32, Ordering};

use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
use signal_hook::iterator::Signals;

/// How a process killed by `signal` is said, in a lab's end and a watched
/// program's alike: "killed by signal 11 (SIGSEGV)".
pub fn killed_by(signal: i32) -> String {
    let name = match signal {
        1 => "SIGHUP",
        2 => "SIGINT",
        3 => "SIGQUIT",
        4 => "SIGILL",
        5 => "SIGTRAP",
        6 => "SIGABRT",
        7 => "SIGBUS",
        8 => "SIGFPE",
        9 => "SIGKILL",
        10 => "SIGUSR1",
        11 => "SIGSEGV",
        12 => "SIGUSR2",
        13 => "SIGPIPE",
        14 => "SIGALRM",
        15 => "SIGTERM",
        24 => "SIGXCPU",
        25 => "SIGXFSZ",
        _ => "signal",
    };
    format!("killed by signal {signal} ({name})")
}

/// The signals that end gpulab's work in order, with a report (exit 128 + the
/// signal: 130, 143, 129).
pub const TERMINATION: [i32; 3] = [SIGINT, SIGTERM, SIGHUP];

/// The first termination signal this process received; 0 before any.
static RECEIVED: AtomicI32 = AtomicI32::new(0);

/// The exit status of work cancelled by a signal, as shells, systemd and CI
/// runners read it: 128 + the first signal that came (SIGINT 130, SIGTERM
/// 143, SIGHUP 129); 130 for work cancelled without one (Ctrl-C read as a
/// key by the dashboard, which is SIGINT's meaning).
pub fn cancelled_status() -> i32 {
    match RECEIVED.load(Ordering::SeqCst) {
        0 => 128 + SIGINT,
        signal => 128 + signal,
    }
}

/// Calls `on_signal` for every termination signal the process receives, instead
/// of the default of dying on the spot. The handler only wakes a thread; `on_signal`
/// runs there, so it may lock, allocate and send.
pub fn on_termination(mut on_signal: impl FnMut() + Send + 'static) -> std::io::Result<()> {
    on_termination_signal(move |_| on_signal())
}

/// [`on_termination`], told which signal came (`watch` passes SIGINT on to a
/// program that no longer shares gpulab's terminal group).
pub fn on_termination_signal(
    mut on_signal: impl FnMut(Option<i32>) + Send + 'static,
) -> std::io::Result<()> {
    let mut signals = Signals::new(TERMINATION)?;
    std::thread::Builder::new()
        .name("gpulab-signals".into())
        .spawn(move || {
            for signal in signals.forever() {
                let _ = RECEIVED.compare_exchange(0, signal, Ordering::SeqCst, Ordering::SeqCst);
                on_signal(Some(signal));
            }
        })?;
    Ok(())
}

/// A write past `ulimit -f` fails with EFBIG instead of killing gpulab with
/// SIGXFSZ. A handler, not SIG_IGN: an ignored signal is inherited through
/// exec, a handler is reset, so a program gpulab starts keeps the default.
pub fn survive_file_size_limit() -> std::io::Result<()> {
    let seen = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    signal_hook::flag::register(signal_hook::consts::SIGXFSZ, seen).map(drop)
}
