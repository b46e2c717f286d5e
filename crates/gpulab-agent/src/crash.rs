//! The program's last milliseconds: what the agent still holds goes out when
//! the process crashes, is killed by a signal it does not handle, or calls
//! `_exit` (a forked child's usual way out), none of which runs the exit
//! handlers [`crate::layer`] relies on.
//!
//! Chained signal handlers, not a ring shared with the parent: records stay
//! where they are cheapest to make (a queue the hooks push to without waiting),
//! and only a dying process pays for flushing them. A handler asks the agent's
//! thread to write everything out, waits a bounded time, then hands the signal on
//! exactly as it would have gone: to the handler the program had installed, or,
//! for a default action, by restoring it and re-raising, so the process dies of
//! the same signal with the same status and core dump. Terminating signals are
//! only caught where their action is the default one (a program's own handler,
//! or `SIG_IGN`, is left alone). `SIGKILL` cannot be caught: the records of a
//! process killed so, at most the agent thread's last nap (8 ms), are lost, and
//! the parent knows it, as no `detached` record came.
//!
//! `_exit` is reached through the program's import slots ([`crate::got`]),
//! pointed at a stand-in that sends the last record and calls the real one.

use std::collections::HashSet;
use std::ffi::c_int;
use std::sync::OnceLock;

use crate::urgent;

/// Signals whose default action ends the process because of a fault: caught
/// always, and handed on to whatever was there.
const FAULTS: [c_int; 6] = [
    libc::SIGSEGV,
    libc::SIGBUS,
    libc::SIGILL,
    libc::SIGFPE,
    libc::SIGABRT,
    libc::SIGSYS,
];
/// Signals whose default action ends the process: caught only while default.
const TERMINATING: [c_int; 9] = [
    libc::SIGTERM,
    libc::SIGINT,
    libc::SIGHUP,
    libc::SIGQUIT,
    libc::SIGPIPE,
    libc::SIGUSR1,
    libc::SIGUSR2,
    libc::SIGALRM,
    libc::SIGXCPU,
];

/// What `_exit` runs first: the agent's detach.
static ON_EXIT: OnceLock<fn()> = OnceLock::new();
/// The actions the program had for the signals caught, read by the handler.
static PREVIOUS: OnceLock<Vec<(c_int, libc::sigaction)>> = OnceLock::new();

/// Installs the handlers and the `_exit` stand-in, which runs `on_exit` first;
/// once per process (a forked child inherits both).
pub fn watch(on_exit: fn()) {
    let _ = ON_EXIT.set(on_exit);
    let mut previous = Vec::new();
    for (sig, always) in FAULTS
        .iter()
        .map(|s| (*s, true))
        .chain(TERMINATING.iter().map(|s| (*s, false)))
    {
        if let Some(old) = install(sig, always) {
            previous.push((sig, old));
        }
    }
    if PREVIOUS.set(previous).is_err() {
        return;
    }
    let ours = crate::loaded::agent_path();
    let skip = |path: &str| {
        let file = path.rsplit('/').next().unwrap_or(path);
        path == ours || file.starts_with("libc.so") || file.starts_with("ld-linux")
    };
    let mut done = HashSet::new();
    for name in ["_exit", "_Exit"] {
        crate::got::redirect(name, exit_now as *const () as usize, skip, &mut done);
    }
}

/// Puts the agent's handler on `sig`, unless (`always` false) the program has
/// its own action there. Returns the action it replaced.
fn install(sig: c_int, always: bool) -> Option<libc::sigaction> {
    // SAFETY: sigaction is plain data; a null new action only reads the old.
    let mut old: libc::sigaction = unsafe { std::mem::zeroed() };
    // SAFETY: as above.
    if unsafe { libc::sigaction(sig, std::ptr::null(), &mut old) } != 0 {
        return None;
    }
    if !always && old.sa_sigaction != libc::SIG_DFL {
        return None;
    }
    if old.sa_sigaction == libc::SIG_IGN {
        return None;
    }
    // SAFETY: as above.
    let mut new: libc::sigaction = unsafe { std::mem::zeroed() };
    new.sa_sigaction = on_signal as *const () as usize;
    // SA_RESTART: the program's interrupted calls resume as they would have.
    new.sa_flags = libc::SA_SIGINFO | libc::SA_ONSTACK | libc::SA_RESTART;
    // SAFETY: `new` is initialised; its mask is emptied by sigemptyset.
    unsafe {
        libc::sigemptyset(&mut new.sa_mask);
        (libc::sigaction(sig, &new, std::ptr::null_mut()) == 0).then_some(old)
    }
}

extern "C" fn on_signal(sig: c_int, info: *mut libc::siginfo_t, context: *mut libc::c_void) {
    // SAFETY: errno is this thread's; the handler leaves it as it found it.
    let errno = unsafe { *libc::__errno_location() };
    let previous = PREVIOUS
        .get()
        .and_then(|p| p.iter().find(|(s, _)| *s == sig))
        .map(|(_, old)| *old);
    let default = previous.is_none_or(|old| old.sa_sigaction == libc::SIG_DFL);
    urgent::flush_now(if default { sig } else { 0 });
    // SAFETY: restores errno, as read above.
    unsafe { *libc::__errno_location() = errno };
    match previous {
        Some(old) if !default => chain(sig, &old, info, context),
        _ => die_of(sig, info),
    }
}

/// Calls the handler the program had installed, as the kernel would have.
fn chain(
    sig: c_int,
    old: &libc::sigaction,
    info: *mut libc::siginfo_t,
    context: *mut libc::c_void,
) {
    let handler = old.sa_sigaction;
    if old.sa_flags & libc::SA_SIGINFO != 0 {
        // SAFETY: the program installed this three-argument handler for `sig`.
        let f: extern "C" fn(c_int, *mut libc::siginfo_t, *mut libc::c_void) =
            unsafe { std::mem::transmute(handler) };
        f(sig, info, context);
    } else {
        // SAFETY: the program installed this one-argument handler for `sig`.
        let f: extern "C" fn(c_int) = unsafe { std::mem::transmute(handler) };
        f(sig);
    }
}

/// Puts the default action back and lets it happen: a fault returns to the
/// faulting instruction and faults again; a sent signal is sent again, and is
/// delivered, to the default action, once this handler returns.
fn die_of(sig: c_int, info: *mut libc::siginfo_t) {
    // SAFETY: restoring SIG_DFL; sigaction is async-signal-safe.
    unsafe {
        let mut dfl: libc::sigaction = std::mem::zeroed();
        dfl.sa_sigaction = libc::SIG_DFL;
        libc::sigemptyset(&mut dfl.sa_mask);
        libc::sigaction(sig, &dfl, std::ptr::null_mut());
    }
    // SAFETY: the kernel's siginfo for this delivery.
    let sent = info.is_null() || unsafe { (*info).si_code } <= 0;
    if sent || !FAULTS.contains(&sig) {
        // SAFETY: raise is async-signal-safe; the signal is blocked in its own
        // handler, so it is delivered when the handler returns.
        unsafe { libc::raise(sig) };
    }
}

/// The program's `_exit`: the process's last record goes out first.
extern "C" fn exit_now(status: c_int) -> ! {
    if let Some(on_exit) = ON_EXIT.get() {
        on_exit();
    }
    // SAFETY: the real `_exit`, which the agent's own import reaches.
    unsafe { libc::_exit(status) }
}
