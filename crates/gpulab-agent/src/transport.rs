//! From the hooks to `gpulab watch`: the program's threads push records into a
//! bounded queue without ever waiting; the agent's own thread ([`crate::drain`])
//! turns them into event lines and writes them to gpulab's pipe
//! ([`crate::pipe`]), which it found by identity.
//!
//! A call record the queue has no room for is dropped and counted. An object
//! record never is: it goes into an overflow queue, which the agent's thread
//! empties into its staging list, where reference changes of one object merge.
//! Every count goes out in the process's last record (`detached`), so the parent
//! knows exactly what it lost.

use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU8, AtomicU16, AtomicU64, Ordering};
use std::sync::mpsc::{self, SyncSender, TrySendError};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use gpulab_events::{AgentState, DeviceSpan, ObjKind, ObjectAction};

use crate::clock::{now_ns, thread_id};
pub use crate::drain::on_tick;
use crate::pipe::{Pipe, PipeId};
use crate::queue::{Agent, EXIT_WAIT, Message};
pub use crate::queue::{Api, Record, Refused, Status};

/// Records waiting for the agent thread; beyond this calls are dropped (counted)
/// and objects overflow.
const QUEUE_LEN: usize = 1 << 16;
/// The process's agent; null until [`start`]. Agents are leaked: a hook may
/// hold one while the process forks, and a child replaces the parent's.
static AGENT: AtomicPtr<Agent> = AtomicPtr::new(std::ptr::null_mut());
/// Serialises starting, so two threads' first calls start one agent.
static STARTING: Mutex<()> = Mutex::new(());
/// Set in a child forked without exec: the parent's agent thread did not
/// survive the fork, so the child's first record starts one of its own.
static FORKED: AtomicBool = AtomicBool::new(false);
/// Where gpulab's pipe is, for a forked child's agent.
static PIPE: OnceLock<PipeId> = OnceLock::new();
/// Per API (by [`Api`] bit), the kinds whose destruction it watches, as bits of
/// `ObjKind::ALL`: a forked child says it attached with the same.
static DESTRUCTION: [AtomicU16; 2] = [AtomicU16::new(0), AtomicU16::new(0)];

fn agent() -> Option<&'static Agent> {
    if FORKED.load(Ordering::Relaxed) {
        after_fork();
    }
    // SAFETY: null, or an agent leaked by `launch` and never freed.
    unsafe { AGENT.load(Ordering::Acquire).as_ref() }
}

/// Starts the agent thread on the pipe `GPULAB_AGENT_PIPE` names. False (and
/// no recording) when the variable is absent or what it names is not that pipe.
pub fn start() -> bool {
    let _guard = STARTING.lock().unwrap_or_else(|e| e.into_inner());
    if agent().is_some() {
        return true;
    }
    let Some(id) = PipeId::from_env() else {
        return false;
    };
    let Some(pipe) = Pipe::open(&id) else {
        return false;
    };
    if !launch(pipe, 0) {
        return false;
    }
    let _ = PIPE.set(id);
    // SAFETY: the handler only stores to atomics and this thread's own
    // thread-local.
    unsafe { libc::pthread_atfork(None, None, Some(after_fork_in_child)) };
    crate::crash::watch(exit_now);
    true
}

/// The program is leaving by `_exit`: its last record goes out first. A forked
/// child that never used the API has no agent of its own to detach.
fn exit_now() {
    if running() {
        detach();
    }
}

/// Is this process's agent running (and not gone quiet)?
pub fn running() -> bool {
    !FORKED.load(Ordering::Relaxed)
        // SAFETY: as in `agent`.
        && unsafe { AGENT.load(Ordering::Acquire).as_ref() }
            .is_some_and(|a| !a.detached.load(Ordering::Acquire))
}

/// Starts a drain thread on `pipe` and makes it this process's agent.
fn launch(pipe: Pipe, apis: u8) -> bool {
    let (tx, rx) = mpsc::sync_channel(QUEUE_LEN);
    let (overflow, overflow_rx) = mpsc::channel();
    // SAFETY: getpid and getppid have no preconditions.
    let (pid, parent_pid) = unsafe { (libc::getpid() as u32, libc::getppid() as u32) };
    let agent: &'static Agent = Box::leak(Box::new(Agent {
        tx,
        overflow,
        overflowing: AtomicU64::new(0),
        pid,
        parent_pid,
        seq: AtomicU64::new(0),
        dropped: AtomicU64::new(0),
        detached: AtomicBool::new(false),
        apis: AtomicU8::new(apis),
    }));
    let drain = crate::drain::Drain::new(rx, overflow_rx, agent, pipe);
    // The new thread starts with every signal blocked (it inherits this mask),
    // so not one of the program's signals is ever delivered to it.
    let mask = crate::drain::block_all_signals();
    let spawned = std::thread::Builder::new()
        .name("gpulab-agent".into())
        .spawn(move || drain.run());
    crate::drain::restore_signals(&mask);
    if spawned.is_err() {
        return false;
    }
    AGENT.store(agent as *const Agent as *mut Agent, Ordering::Release);
    true
}

extern "C" fn after_fork_in_child() {
    crate::clock::forget_thread_id();
    crate::urgent::forked();
    FORKED.store(true, Ordering::Relaxed);
}

/// The first record of a child forked without exec: a drain thread of its own
/// (the parent's did not survive the fork) and its own `attached` records, so
/// its objects carry its pid and its report names it. (The ledger starts the
/// child afresh on its own: [`crate::ledger`].)
fn after_fork() {
    if !FORKED.swap(false, Ordering::AcqRel) {
        return;
    }
    // SAFETY: as in `agent`.
    let Some(parent) = (unsafe { AGENT.load(Ordering::Acquire).as_ref() }) else {
        return;
    };
    let apis = parent.apis.load(Ordering::Relaxed);
    if parent.detached.load(Ordering::Relaxed) {
        return;
    }
    // Its own open of the pipe: the parent's descriptor was inherited, but the
    // child may close descriptors it does not know.
    let Some(pipe) = PIPE.get().and_then(Pipe::open) else {
        parent.detached.store(true, Ordering::Release);
        return;
    };
    if !launch(pipe, 0) {
        return;
    }
    for api in [Api::OpenCl, Api::Cuda] {
        if apis & api as u8 != 0 {
            attached(api, destruction_of(api));
        }
    }
}

fn destruction_of(api: Api) -> Vec<ObjKind> {
    let bits = DESTRUCTION[api as usize - 1].load(Ordering::Relaxed);
    ObjKind::ALL
        .into_iter()
        .enumerate()
        .filter(|(i, _)| bits & (1 << i) != 0)
        .map(|(_, k)| k)
        .collect()
}

/// The first record of an API: who this process is and which destructions it
/// can see.
pub fn attached(api: Api, destruction: Vec<ObjKind>) {
    let exe = std::env::current_exe()
        .map(|p| p.display().to_string())
        .unwrap_or_default();
    if let Some(agent) = agent() {
        agent.apis.fetch_or(api as u8, Ordering::Relaxed);
    }
    let bits = ObjKind::ALL
        .into_iter()
        .enumerate()
        .filter(|(_, k)| destruction.contains(k))
        .fold(0u16, |b, (i, _)| b | (1 << i));
    DESTRUCTION[api as usize - 1].store(bits, Ordering::Relaxed);
    send(Record::Agent {
        api: api.as_str(),
        state: AgentState::Attached {
            exe,
            destruction,
            rank: crate::rank::of_this_process(),
        },
    });
}

/// The agent is loaded but cannot watch `api` here; the parent says so loudly.
pub fn unavailable(api: Api, reason: String) {
    send(Record::Agent {
        api: api.as_str(),
        state: AgentState::Unavailable { reason },
    });
}

/// This process's id, once the agent runs.
pub fn pid() -> Option<u32> {
    agent().map(|a| a.pid)
}

/// Numbers calls in the order they returned to the program.
pub fn next_seq() -> u64 {
    agent().map_or(0, |a| a.seq.fetch_add(1, Ordering::Relaxed))
}

/// Queues a record; never waits. A full queue drops a call (counted) and hands
/// an object record to the overflow queue.
pub fn send(record: Record) {
    let Some(agent) = agent() else { return };
    if agent.detached.load(Ordering::Acquire) {
        return;
    }
    let object = !record.droppable() && !matches!(record, Record::Agent { .. });
    let record = if object && agent.overflowing.load(Ordering::Acquire) > 0 {
        record
    } else {
        match agent.tx.try_send(Message::Record(record)) {
            Ok(()) => return,
            Err(TrySendError::Full(Message::Record(r))) if object => r,
            Err(_) => {
                agent.dropped.fetch_add(1, Ordering::Relaxed);
                return;
            }
        }
    };
    agent.overflowing.fetch_add(1, Ordering::AcqRel);
    if agent.overflow.send(Message::Record(record)).is_err() {
        // The agent's thread is gone (the parent went away): nothing is recorded.
        agent.overflowing.fetch_sub(1, Ordering::AcqRel);
    }
}

/// The process is exiting: everything queued and the last record, with the
/// exact counts, go out; waits (a bounded time) until they reached the pipe.
pub fn detach() {
    let Some(agent) = agent() else { return };
    if agent.detached.load(Ordering::Acquire) {
        return;
    }
    let deadline = Instant::now() + EXIT_WAIT;
    let (ack_tx, ack_rx) = mpsc::sync_channel(1);
    if push_until(&agent.tx, Message::Detach(ack_tx), deadline) {
        let _ = ack_rx.recv_timeout(deadline.saturating_duration_since(Instant::now()));
    }
    agent.detached.store(true, Ordering::Release);
}

fn push_until(tx: &SyncSender<Message>, mut message: Message, deadline: Instant) -> bool {
    loop {
        match tx.try_send(message) {
            Ok(()) => return true,
            Err(TrySendError::Disconnected(_)) => return false,
            Err(TrySendError::Full(r)) => {
                if Instant::now() >= deadline {
                    return false;
                }
                message = r;
                std::thread::sleep(Duration::from_millis(1));
            }
        }
    }
}

/// Records an object's lifetime change.
pub fn object(
    id: u64,
    kind: ObjKind,
    action: ObjectAction,
    bytes: u64,
    refcount: u32,
    refs: Vec<u64>,
) {
    let stack = if action == ObjectAction::Created {
        crate::stack::capture(kind)
    } else {
        None
    };
    send(Record::Object {
        t_ns: now_ns(),
        id,
        kind,
        action,
        bytes,
        refcount,
        refs,
        stack,
    });
}

/// Records one call that returned to the program.
pub fn call(api: &'static str, begin_ns: u64, status: Status, object: Option<u64>) {
    call_as(api, api, begin_ns, status, object);
}

thread_local! {
    /// This thread is the Python startup hook's ([`crate::framework`]): its
    /// driver calls are not the program's.
    static QUIET: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Marks the calling thread as the startup hook's.
pub fn quiet_thread() {
    QUIET.with(|q| q.set(true));
}

/// Whether the calling thread's driver calls go unrecorded.
pub fn quiet() -> bool {
    QUIET.with(std::cell::Cell::get)
}

/// Records device work the driver timed.
pub fn span(span: DeviceSpan) {
    send(Record::Span(span));
}

/// Records one call the program made as `api` and the driver exports as `driver`;
/// returns its sequence number (0, and nothing recorded, on the startup
/// hook's own thread).
pub fn call_as(
    api: &'static str,
    driver: &'static str,
    begin_ns: u64,
    status: Status,
    object: Option<u64>,
) -> u64 {
    call_measured(api, driver, begin_ns, status, object, None, None, None)
}

/// [`call_as`], with the device memory the call took when it was read on each
/// side of it, what was read at a refused allocation, and the device's pool
/// after the call.
#[expect(
    clippy::too_many_arguments,
    reason = "one record's fields, each read by the hook that made the call"
)]
pub fn call_measured(
    api: &'static str,
    driver: &'static str,
    begin_ns: u64,
    status: Status,
    object: Option<u64>,
    memory_step: Option<i64>,
    refused: Option<Box<Refused>>,
    pool: Option<Box<gpulab_events::CudaMemory>>,
) -> u64 {
    if quiet() {
        return 0;
    }
    let end_ns = now_ns();
    let seq = next_seq();
    send(Record::Call {
        seq,
        thread: thread_id(),
        api,
        driver,
        begin_ns,
        end_ns,
        status,
        object,
        memory_step,
        refused,
        pool,
    });
    seq
}
