//! A flush asked for from where nothing may block or allocate (a signal
//! handler): atomics the agent's thread reads once per pass, and a bounded wait
//! with `nanosleep`. Below both the handlers ([`crate::crash`]) and the thread
//! that answers ([`crate::drain`]).

use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

/// The longest a dying process waits for its records to reach the pipe.
pub const WAIT: Duration = Duration::from_millis(500);

/// Flushes asked for, and answered, by the agent's thread.
static ASKED: AtomicU64 = AtomicU64::new(0);
static ANSWERED: AtomicU64 = AtomicU64::new(0);
/// The signal the process is dying of, for the `detached` record; 0 when the
/// flush asked for is not the last (the program's own handler runs next).
static DYING_OF: AtomicI32 = AtomicI32::new(0);
/// The agent's thread, so a crash on it never waits for itself.
static DRAIN_THREAD: AtomicUsize = AtomicUsize::new(0);
/// Whether this process has an agent thread that answers.
static ANSWERING: AtomicBool = AtomicBool::new(false);

/// The agent's thread starts answering, on itself.
pub fn drain_started() {
    // SAFETY: pthread_self has no preconditions.
    DRAIN_THREAD.store(unsafe { libc::pthread_self() } as usize, Ordering::Release);
    ANSWERING.store(true, Ordering::Release);
}

/// The agent's thread is done (detached, or its parent is gone).
pub fn drain_stopped() {
    ANSWERING.store(false, Ordering::Release);
}

/// In a child forked without exec: the parent's thread did not come along.
pub fn forked() {
    ANSWERING.store(false, Ordering::Release);
}

/// The agent's thread asks, once per pass: is a flush waited for, and is it
/// the last one? Returns the request's number and the signal when last.
pub fn asked() -> Option<(u64, Option<i32>)> {
    let asked = ASKED.load(Ordering::Acquire);
    (asked > ANSWERED.load(Ordering::Acquire)).then(|| {
        let sig = DYING_OF.load(Ordering::Acquire);
        (asked, (sig != 0).then_some(sig))
    })
}

pub fn answered(asked: u64) {
    ANSWERED.fetch_max(asked, Ordering::AcqRel);
}

/// Asks the agent's thread to write out everything, and the `detached` record
/// when `dying_of` is a signal, then waits for it (at most [`WAIT`]) with
/// nothing but atomics and `nanosleep`, both safe in a signal handler.
pub fn flush_now(dying_of: i32) {
    if !ANSWERING.load(Ordering::Acquire) {
        return;
    }
    // SAFETY: pthread_self has no preconditions.
    if DRAIN_THREAD.load(Ordering::Acquire) == unsafe { libc::pthread_self() } as usize {
        return;
    }
    DYING_OF.store(dying_of, Ordering::Release);
    let want = ASKED.fetch_add(1, Ordering::AcqRel) + 1;
    let nap = libc::timespec {
        tv_sec: 0,
        tv_nsec: 1_000_000,
    };
    for _ in 0..WAIT.as_millis() {
        if ANSWERED.load(Ordering::Acquire) >= want {
            return;
        }
        // SAFETY: a valid timespec; nanosleep is async-signal-safe.
        unsafe { libc::nanosleep(&nap, std::ptr::null_mut()) };
    }
}
