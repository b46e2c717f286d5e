//! From the hooks to `gpulab watch`: the program's threads push records into a
//! bounded queue without ever waiting; one agent thread turns them into event
//! lines and writes them to the pipe named by `GPULAB_AGENT_FD`.
//!
//! Every process of a watched program tree writes into the same pipe, so lines go
//! out in writes of at most `PIPE_BUF` bytes, which the kernel never interleaves.
//! A record the queue has no room for is counted, and the count goes out in the
//! process's last record (`detached`), so the parent knows exactly what it lost.

use std::fs::File;
use std::io::Write;
use std::os::fd::FromRawFd;
use std::sync::atomic::{
    AtomicBool, AtomicI32, AtomicPtr, AtomicU8, AtomicU16, AtomicU64, Ordering,
};
use std::sync::mpsc::{self, Receiver, SyncSender, TryRecvError, TrySendError};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use gpulab_events::{
    AgentEvent, AgentState, Call, CallStatus, DeviceSpan, Event, Frame, ObjKind, ObjectAction,
    ObjectEvent, Stack, to_line,
};

use crate::clock::{now_ns, thread_id};

/// The environment variable holding the pipe's file descriptor.
pub const FD_ENV: &str = "GPULAB_AGENT_FD";
/// Records waiting for the agent thread; beyond this they are dropped and counted.
const QUEUE_LEN: usize = 1 << 16;
/// Writes up to this size into a pipe are atomic (POSIX guarantees 512; Linux 4096).
const PIPE_BUF: usize = 4096;
/// The agent thread's nap while records flow, and while the program is quiet:
/// the longest a record waits before it goes out.
const POLL_MIN: Duration = Duration::from_millis(1);
const POLL_MAX: Duration = Duration::from_millis(8);
/// How often the agent thread asks CUPTI for the device spans it holds.
const SPAN_FLUSH_EVERY: Duration = Duration::from_millis(100);
/// How long the exiting process waits for its records to reach the pipe.
const EXIT_WAIT: Duration = Duration::from_secs(2);

/// What a hook saw, in the cheapest form that can be queued.
pub enum Record {
    Call {
        seq: u64,
        thread: u64,
        api: &'static str,
        /// The entry point the driver exports, when it differs (`cuMemAlloc_v2`).
        driver: &'static str,
        begin_ns: u64,
        end_ns: u64,
        status: Status,
        object: Option<u64>,
    },
    Object {
        t_ns: u64,
        id: u64,
        kind: ObjKind,
        action: ObjectAction,
        bytes: u64,
        refcount: u32,
        refs: Vec<u64>,
        /// Return addresses of the creating call (`--backtrace`).
        stack: Option<Box<[usize]>>,
    },
    Agent {
        api: &'static str,
        state: AgentState,
    },
    /// Device work one of the program's calls enqueued, as the driver timed it.
    Span(DeviceSpan),
}

/// What travels through the queue.
enum Message {
    Record(Record),
    /// Write out everything before this, then answer.
    Flush(SyncSender<()>),
}

/// A call's result as the API returned it.
#[derive(Clone, Copy)]
pub enum Status {
    OpenCl(i32),
    /// A `CUresult`, and for an error the driver's name for it.
    Cuda {
        code: i32,
        name: Option<&'static str>,
    },
}

/// Run by the agent thread every `SPAN_FLUSH_EVERY`: set by the CUDA side when
/// it collects device spans, so it can hand over what CUPTI holds.
static TICK: OnceLock<fn()> = OnceLock::new();

/// Has the agent thread call `tick` every `SPAN_FLUSH_EVERY`.
pub fn on_tick(tick: fn()) {
    let _ = TICK.set(tick);
}

struct Agent {
    tx: SyncSender<Message>,
    pid: u32,
    seq: AtomicU64,
    sent: AtomicU64,
    dropped: AtomicU64,
    detached: AtomicBool,
    /// The APIs this process attached to, as [`Api`] bits.
    apis: AtomicU8,
}

/// An API the agent attaches to in a process.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Api {
    OpenCl = 1,
    Cuda = 2,
}

impl Api {
    pub fn as_str(self) -> &'static str {
        match self {
            Api::OpenCl => "opencl",
            Api::Cuda => "cuda",
        }
    }
}

/// The process's agent; null until [`start`]. Agents are leaked: a hook may
/// hold one while the process forks, and a child replaces the parent's.
static AGENT: AtomicPtr<Agent> = AtomicPtr::new(std::ptr::null_mut());
/// Serialises starting, so two threads' first calls start one agent.
static STARTING: Mutex<()> = Mutex::new(());
/// Set in a child forked without exec: the parent's agent thread did not
/// survive the fork, so the child's first record starts one of its own.
static FORKED: AtomicBool = AtomicBool::new(false);
/// The pipe, for a forked child's agent.
static FD: AtomicI32 = AtomicI32::new(-1);
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

/// Starts the agent thread on the pipe `GPULAB_AGENT_FD` names. False (and no
/// recording) when the variable is absent or not a number.
pub fn start() -> bool {
    let _guard = STARTING.lock().unwrap_or_else(|e| e.into_inner());
    if agent().is_some() {
        return true;
    }
    let Some(fd) = std::env::var(FD_ENV)
        .ok()
        .and_then(|v| v.trim().parse::<i32>().ok())
    else {
        return false;
    };
    // SAFETY: F_GETFD only inspects the descriptor table.
    if fd < 0 || unsafe { libc::fcntl(fd, libc::F_GETFD) } < 0 {
        return false;
    }
    if !launch(fd, 0) {
        return false;
    }
    FD.store(fd, Ordering::Relaxed);
    // SAFETY: the handler only stores to an atomic and this thread's own
    // thread-local.
    unsafe { libc::pthread_atfork(None, None, Some(after_fork_in_child)) };
    true
}

/// Starts a drain thread on `fd` and makes it this process's agent.
fn launch(fd: i32, apis: u8) -> bool {
    // The descriptor stays open across exec: a child the program starts inherits
    // it with the environment, loads its own agent and writes into the same pipe.
    // SAFETY: `gpulab watch` handed this descriptor to the process for the agent.
    let out = unsafe { File::from_raw_fd(fd) };
    let (tx, rx) = mpsc::sync_channel(QUEUE_LEN);
    // SAFETY: getpid and getppid have no preconditions.
    let (pid, parent_pid) = unsafe { (libc::getpid() as u32, libc::getppid() as u32) };
    let spawned = std::thread::Builder::new()
        .name("gpulab-agent".into())
        .spawn(move || drain(rx, out, pid, parent_pid));
    if spawned.is_err() {
        return false;
    }
    let agent = Box::leak(Box::new(Agent {
        tx,
        pid,
        seq: AtomicU64::new(0),
        sent: AtomicU64::new(0),
        dropped: AtomicU64::new(0),
        detached: AtomicBool::new(false),
        apis: AtomicU8::new(apis),
    }));
    AGENT.store(agent, Ordering::Release);
    true
}

extern "C" fn after_fork_in_child() {
    crate::clock::forget_thread_id();
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
    if parent.detached.load(Ordering::Relaxed) || !launch(FD.load(Ordering::Relaxed), 0) {
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
        state: AgentState::Attached { exe, destruction },
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

/// Queues a record; never waits. A full queue drops it and counts the drop.
pub fn send(record: Record) {
    let Some(agent) = agent() else { return };
    if agent.detached.load(Ordering::Acquire) {
        return;
    }
    match agent.tx.try_send(Message::Record(record)) {
        Ok(()) => agent.sent.fetch_add(1, Ordering::Relaxed),
        Err(TrySendError::Full(_) | TrySendError::Disconnected(_)) => {
            agent.dropped.fetch_add(1, Ordering::Relaxed)
        }
    };
}

/// The process is exiting: send the last record with the exact counts, and wait
/// (a bounded time) until everything queued reached the pipe.
pub fn detach() {
    let Some(agent) = agent() else { return };
    if agent.detached.swap(true, Ordering::AcqRel) {
        return;
    }
    let deadline = Instant::now() + EXIT_WAIT;
    let api = match agent.apis.load(Ordering::Relaxed) {
        1 => "opencl",
        2 => "cuda",
        3 => "opencl+cuda",
        _ => "none",
    };
    let last = Message::Record(Record::Agent {
        api,
        state: AgentState::Detached {
            records: agent.sent.load(Ordering::Relaxed),
            dropped: agent.dropped.load(Ordering::Relaxed),
        },
    });
    if !push_until(&agent.tx, last, deadline) {
        return;
    }
    let (ack_tx, ack_rx) = mpsc::sync_channel(1);
    if push_until(&agent.tx, Message::Flush(ack_tx), deadline) {
        let _ = ack_rx.recv_timeout(deadline.saturating_duration_since(Instant::now()));
    }
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

/// The agent thread: records in, event lines out. It polls rather than blocks:
/// a thread blocked on the queue must be woken by every record sent to it (a
/// futex wake, microseconds inside the program's call), while a polling one is
/// never waited for. It naps briefly while records flow and longer, up to
/// `POLL_MAX`, while the program is quiet.
fn drain(rx: Receiver<Message>, out: File, pid: u32, parent_pid: u32) {
    let mut out = Lines::new(out);
    let mut stacks = crate::stack::Stacks::default();
    let mut nap = POLL_MIN;
    let mut flushed = Instant::now();
    loop {
        if flushed.elapsed() >= SPAN_FLUSH_EVERY {
            // Device spans CUPTI holds come back through `span`, into the queue.
            if let Some(tick) = TICK.get() {
                tick();
            }
            flushed = Instant::now();
        }
        let mut got = false;
        loop {
            match rx.try_recv() {
                Ok(Message::Flush(ack)) => {
                    out.flush();
                    let _ = ack.try_send(());
                }
                Ok(Message::Record(mut record)) => {
                    got = true;
                    if let Record::Object { stack, .. } = &mut record
                        && let Some(addrs) = stack.take()
                    {
                        let (id, new) = stacks.intern(pid, addrs);
                        if let Some(frames) = new {
                            out.push(&stack_event(id, frames));
                        }
                        out.push(&with_stack(to_event(record, pid, parent_pid), id));
                    } else {
                        out.push(&to_event(record, pid, parent_pid));
                    }
                }
                Err(TryRecvError::Empty) => break,
                Err(TryRecvError::Disconnected) => {
                    out.flush();
                    return;
                }
            }
        }
        out.flush();
        nap = if got {
            POLL_MIN
        } else {
            (nap * 2).min(POLL_MAX)
        };
        std::thread::sleep(nap);
    }
}

/// A stack's frames, trimmed from the outermost until its line fits one
/// atomic pipe write (children share the pipe).
fn stack_event(id: u64, mut frames: Vec<Frame>) -> Event {
    loop {
        let event = Event::Stack(Stack {
            t_ns: now_ns(),
            id,
            frames: frames.clone(),
        });
        if to_line(&event).len() < PIPE_BUF || frames.pop().is_none() {
            return event;
        }
    }
}

fn with_stack(mut event: Event, id: u64) -> Event {
    if let Event::Object(o) = &mut event {
        o.stack = Some(id);
    }
    event
}

fn to_event(record: Record, pid: u32, parent_pid: u32) -> Event {
    match record {
        Record::Call {
            seq,
            thread,
            api,
            driver,
            begin_ns,
            end_ns,
            status,
            object,
        } => Event::Call(Call {
            seq,
            pid,
            thread,
            line: None,
            iter: Vec::new(),
            tag: None,
            api: api.to_string(),
            driver: driver.to_string(),
            begin_ns,
            end_ns,
            status: call_status(status),
            expect_error: false,
            mem_before: None,
            mem_after: None,
            object,
            cuda: None,
        }),
        Record::Object {
            t_ns,
            id,
            kind,
            action,
            bytes,
            refcount,
            refs,
            stack: _,
        } => Event::Object(ObjectEvent {
            t_ns,
            id,
            kind,
            action,
            handle: None,
            bytes,
            refcount,
            refs,
            line: None,
            stack: None,
        }),
        Record::Span(span) => Event::DeviceSpan(span),
        Record::Agent { api, state } => Event::Agent(AgentEvent {
            t_ns: now_ns(),
            pid,
            parent_pid,
            api: api.into(),
            state,
        }),
    }
}

fn call_status(status: Status) -> CallStatus {
    match status {
        Status::OpenCl(0) => CallStatus::Ok,
        Status::OpenCl(code) => CallStatus::Error {
            code: i64::from(code),
            name: gpulab_events::vocab::opencl_status_name(code)
                .map_or_else(|| format!("CL_UNKNOWN_ERROR_{code}"), str::to_string),
        },
        Status::Cuda { code: 0, .. } => CallStatus::Ok,
        Status::Cuda { code, name } => CallStatus::Error {
            code: i64::from(code),
            name: name.map_or_else(|| format!("CUDA_ERROR_{code}"), str::to_string),
        },
    }
}

/// Event lines, written in whole lines of at most `PIPE_BUF` bytes per write.
struct Lines {
    out: Option<File>,
    buf: Vec<u8>,
}

impl Lines {
    fn new(out: File) -> Self {
        Lines {
            out: Some(out),
            buf: Vec::with_capacity(PIPE_BUF),
        }
    }

    fn push(&mut self, event: &Event) {
        let line = to_line(event);
        if self.buf.len() + line.len() + 1 > PIPE_BUF {
            self.flush();
        }
        self.buf.extend_from_slice(line.as_bytes());
    }

    fn flush(&mut self) {
        if self.buf.is_empty() {
            return;
        }
        if let Some(out) = &mut self.out
            && out.write_all(&self.buf).is_err()
        {
            // The parent is gone: stop writing, keep draining so the program
            // never notices.
            self.out = None;
        }
        self.buf.clear();
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
        crate::stack::capture()
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

/// Records device work the driver timed.
pub fn span(span: DeviceSpan) {
    send(Record::Span(span));
}

/// Records one call the program made as `api` and the driver exports as `driver`;
/// returns its sequence number.
pub fn call_as(
    api: &'static str,
    driver: &'static str,
    begin_ns: u64,
    status: Status,
    object: Option<u64>,
) -> u64 {
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
    });
    seq
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_written_whole_and_never_above_pipe_buf() {
        let (r, w) = std::io::pipe().expect("pipe");
        let mut lines = Lines::new(File::from(std::os::fd::OwnedFd::from(w)));
        for i in 0..200 {
            lines.push(&to_event(
                Record::Object {
                    t_ns: i,
                    id: i,
                    kind: ObjKind::Event,
                    action: ObjectAction::Created,
                    bytes: 0,
                    refcount: 1,
                    refs: vec![1, 2, 3],
                    stack: None,
                },
                7,
                1,
            ));
            assert!(lines.buf.len() <= PIPE_BUF);
        }
        lines.flush();
        drop(lines);
        let text = std::io::read_to_string(r).expect("read");
        let events: Vec<Event> = text
            .lines()
            .map(|l| serde_json::from_str(l).expect("a whole event per line"))
            .collect();
        assert_eq!(events.len(), 200);
    }

    #[test]
    fn an_error_status_carries_its_spec_name() {
        assert_eq!(call_status(Status::OpenCl(0)), CallStatus::Ok);
        assert_eq!(
            call_status(Status::OpenCl(-38)),
            CallStatus::Error {
                code: -38,
                name: "CL_INVALID_MEM_OBJECT".into()
            }
        );
        assert!(
            matches!(call_status(Status::OpenCl(-9999)), CallStatus::Error { name, .. } if name == "CL_UNKNOWN_ERROR_-9999")
        );
        let cuda = |code, name| call_status(Status::Cuda { code, name });
        assert_eq!(cuda(0, None), CallStatus::Ok);
        assert_eq!(
            cuda(2, Some("CUDA_ERROR_OUT_OF_MEMORY")),
            CallStatus::Error {
                code: 2,
                name: "CUDA_ERROR_OUT_OF_MEMORY".into()
            }
        );
        assert!(matches!(cuda(2, None), CallStatus::Error { name, .. } if name == "CUDA_ERROR_2"));
    }
}
