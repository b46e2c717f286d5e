//! From the hooks to `gpulab watch`: each record goes straight into this
//! process's segment of the memory gpulab shares with its agents
//! ([`gpulab_events::ring`]), written by the program's thread that made the
//! call, in one reservation and one publishing store. There is no thread to
//! wake and nothing to flush: a record is gpulab's once written, so a process
//! that crashes, execs, `_exit`s, `vfork`s or is killed loses nothing it
//! recorded, and the agent needs no signal handler and no exit hook of its own.
//!
//! The memory is mapped once per image ([`crate::region`]) without a
//! descriptor the program could see, so nothing the agent writes can reach the
//! program's files.
//!
//! A full segment (gpulab is behind, or stopped) never makes the program wait:
//! a call record is dropped and counted; an object record goes into the
//! process's overflow list ([`crate::staging`]), where reference changes of
//! one object merge, and out again at the next record once there is room. The
//! counts live in the segment itself, so gpulab knows exactly what it lost
//! even of a process that died holding records.

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU8, AtomicU16, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use gpulab_events::ring::{Region, Segment};
use gpulab_events::wire::{self, CallRecord, ObjectRecord};
use gpulab_events::{
    AgentState, DeviceSpan, FrameworkSaid, MisuseKind, ObjKind, ObjectAction, to_line,
};

use crate::clock::{now_ns, thread_id};
pub use crate::queue::{Family, Record, Refused, Status};
use crate::staging::{Staged, Staging};

/// The process's agent; null until [`start`]. Agents are leaked: a hook may
/// hold one while the process forks, and a child replaces the parent's.
static AGENT: AtomicPtr<Agent> = AtomicPtr::new(std::ptr::null_mut());
/// Serialises starting, so two threads' first calls start one agent.
static STARTING: Mutex<()> = Mutex::new(());
/// Set in a child forked without exec: it writes into a segment of its own,
/// claimed at its first record.
static FORKED: AtomicBool = AtomicBool::new(false);
/// Per API (by [`Family`] bit), the kinds whose destruction it watches, as bits of
/// `ObjKind::ALL`: a forked child says it attached with the same.
static DESTRUCTION: [AtomicU16; 2] = [AtomicU16::new(0), AtomicU16::new(0)];
/// Object records the overflow list holds before the thread that adds one
/// waits for gpulab to make room (calls are dropped instead, counted).
const OVERFLOW_CAP: usize = 1 << 16;
/// How long a wait for room goes on while gpulab neither reads nor beats (it
/// is stopped, or gone): then the thread goes on, and until gpulab moves
/// again, records that find no room are given up, counted as lost.
const STALLED: Duration = Duration::from_secs(1);
/// How long a wait goes on while gpulab beats but reads nothing of this
/// process: whatever holds gpulab up, the program is never held longer.
const UNREAD: Duration = Duration::from_secs(10);
/// Where gpulab stood when a wait for it stalled: its read position, and its
/// heartbeat unless the wait gave up on an unmoving read position alone.
#[derive(Clone, Copy, PartialEq, Eq)]
struct Stall {
    read: u64,
    beat: Option<u64>,
}

impl Stall {
    /// Is gpulab still where it stalled?
    fn holds(self, (read, beat): (u64, u64)) -> bool {
        read == self.read && self.beat.is_none_or(|b| b == beat)
    }
}

/// One process's agent: its segment, and what it holds while the segment is
/// full.
struct Agent {
    segment: Segment<'static>,
    /// How far the reader's position last seen lets this process write
    /// ([`Segment::write_within`]).
    room: AtomicU64,
    pid: u32,
    parent_pid: u32,
    seq: AtomicU64,
    /// The APIs this process attached to, as [`Family`] bits.
    apis: AtomicU8,
    /// Records that found no room, oldest first; while any wait, every record
    /// that must not be lost waits behind them, so one object's changes never
    /// overtake each other.
    overflow: Mutex<Staging>,
    overflowing: AtomicBool,
    /// Where gpulab stood when a wait for room last stalled: while it stays
    /// there, nothing waits again.
    stalled: Mutex<Option<Stall>>,
    /// The stacks of creating calls, named once each.
    stacks: Mutex<crate::stack::Stacks>,
}

fn agent() -> Option<&'static Agent> {
    if FORKED.load(Ordering::Relaxed) {
        after_fork();
    }
    // SAFETY: null, or an agent leaked by `launch` and never freed.
    unsafe { AGENT.load(Ordering::Acquire).as_ref() }
}

/// Starts recording into the memory `GPULAB_AGENT_RING` names. False (and no
/// recording) when the variable is absent or what it names is not gpulab's.
pub fn start() -> bool {
    let _guard = STARTING.lock().unwrap_or_else(|e| e.into_inner());
    if agent().is_some() {
        return true;
    }
    let Some(region) = crate::region::map() else {
        return false;
    };
    if !launch(region) {
        return false;
    }
    crate::stack::prepare();
    // SAFETY: the handler only stores to atomics and this thread's own
    // thread-local.
    unsafe { libc::pthread_atfork(None, None, Some(after_fork_in_child)) };
    true
}

/// Is this process's agent recording?
pub fn running() -> bool {
    !FORKED.load(Ordering::Relaxed)
        // SAFETY: as in `agent`.
        && unsafe { AGENT.load(Ordering::Acquire).as_ref() }.is_some()
}

/// Claims a segment of `region` and makes it this process's agent.
fn launch(region: Region<'static>) -> bool {
    // SAFETY: getpid and getppid have no preconditions.
    let (pid, parent_pid) = unsafe { (libc::getpid() as u32, libc::getppid() as u32) };
    let Some(segment) = region.claim(pid, parent_pid) else {
        return false;
    };
    let agent: &'static Agent = Box::leak(Box::new(Agent {
        segment,
        room: AtomicU64::new(0),
        pid,
        parent_pid,
        seq: AtomicU64::new(0),
        apis: AtomicU8::new(0),
        overflow: Mutex::new(Staging::default()),
        overflowing: AtomicBool::new(false),
        stalled: Mutex::new(None),
        stacks: Mutex::new(crate::stack::Stacks::default()),
    }));
    AGENT.store(agent as *const Agent as *mut Agent, Ordering::Release);
    true
}

extern "C" fn after_fork_in_child() {
    crate::clock::forget_thread_id();
    FORKED.store(true, Ordering::Relaxed);
}

/// The first record of a child forked without exec: a segment of its own and
/// its own `attached` records, so its objects carry its pid and its report
/// names it. Its locks are new: a parent's thread may have held one at the
/// fork. (The ledger starts the child afresh on its own: [`crate::ledger`].)
fn after_fork() {
    if !FORKED.swap(false, Ordering::AcqRel) {
        return;
    }
    let Some(region) = crate::region::mapped() else {
        return;
    };
    // SAFETY: as in `agent`.
    let apis = unsafe { AGENT.load(Ordering::Acquire).as_ref() }
        .map_or(0, |a| a.apis.load(Ordering::Relaxed));
    if !launch(region) {
        AGENT.store(std::ptr::null_mut(), Ordering::Release);
        return;
    }
    crate::ticker::forked();
    for api in [Family::OpenCl, Family::Cuda] {
        if apis & api as u8 != 0 {
            attached(api, destruction_of(api));
        }
    }
}

fn destruction_of(api: Family) -> Vec<ObjKind> {
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
pub fn attached(api: Family, destruction: Vec<ObjKind>) {
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
pub fn unavailable(api: Family, reason: String) {
    send(Record::Agent {
        api: api.as_str(),
        state: AgentState::Unavailable { reason },
    });
}

/// Watching `api`, but the program or a tool inside it is worse off for it;
/// the parent says who and what it loses.
pub fn conflict(api: Family, reason: String) {
    send(Record::Agent {
        api: api.as_str(),
        state: AgentState::Conflict { reason },
    });
}

/// The agent watches the process's kernel launches from now on, or stops.
pub fn launches(watching: bool, why: gpulab_events::LaunchesWhy) {
    send(Record::Agent {
        api: Family::Cuda.as_str(),
        state: AgentState::Launches { watching, why },
    });
}

/// The program is CPython, whose frames the agent cannot read: said once,
/// as what it could not name.
pub fn python_unread(reason: String) {
    send(Record::Agent {
        api: "python",
        state: AgentState::Unavailable { reason },
    });
}

/// The agent cannot look for another CUPTI client in this process (it was
/// built for a machine whose files it cannot read): said once, as what goes
/// unseen.
pub fn rivals_unseen(reason: String) {
    send(Record::Agent {
        api: "cupti-clients",
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

/// Writes a record into the segment; never waits. A full segment drops a call
/// (counted) and keeps an object record in the overflow list.
pub fn send(mut record: Record) {
    let Some(agent) = agent() else { return };
    name_stack(agent, &mut record);
    if agent.overflowing.load(Ordering::Acquire) {
        push_overflow(agent, record);
        move_overflow(agent);
        return;
    }
    if write(agent, &record) {
        return;
    }
    if record.droppable() {
        agent.segment.count_dropped(1);
    } else {
        push_overflow(agent, record);
    }
}

/// The stack a record carries, as an id: named (and sent) the first time.
fn name_stack(agent: &Agent, record: &mut Record) {
    let (addrs, id) = match record {
        Record::Object { object, stack } => (stack.take(), &mut object.stack),
        Record::Call {
            refused: Some(r), ..
        } => (r.stack.take(), &mut r.stack_id),
        Record::Framework {
            said: FrameworkSaid::Refused { stack: id, .. },
            stack,
            ..
        } => (stack.take(), id),
        Record::Misuse {
            stack, stack_id, ..
        } => (stack.take(), stack_id),
        _ => return,
    };
    let Some(addrs) = addrs else { return };
    // Taken with the stack: a Python whose lines the agent cannot read.
    if let Some(reason) = crate::python::take_unread() {
        python_unread(reason);
    }
    let (interned, frames) = match agent.stacks.lock() {
        Ok(mut s) => s.intern(agent.pid, addrs),
        Err(p) => p.into_inner().intern(agent.pid, addrs),
    };
    *id = Some(interned);
    if let Some(frames) = frames {
        send(Record::Stack {
            id: interned,
            frames,
        });
    }
}

fn push_overflow(agent: &Agent, record: Record) {
    let keep = !record.droppable();
    let mut overflow = agent.overflow.lock().unwrap_or_else(|e| e.into_inner());
    if keep && overflow.kept() >= OVERFLOW_CAP && stalled(agent) {
        // gpulab has not moved since a wait for it stalled: the record is
        // given up rather than held without bound, and said lost.
        agent.segment.pending(1);
        return;
    }
    let staged = overflow.push(record);
    agent.overflowing.store(true, Ordering::Release);
    let full = match staged {
        Staged::Queued if keep => {
            agent.segment.pending(1);
            overflow.kept() > OVERFLOW_CAP
        }
        Staged::Queued => false,
        Staged::Coalesced => {
            agent.segment.count_coalesced(1);
            false
        }
        Staged::Dropped => {
            agent.segment.count_dropped(1);
            false
        }
    };
    drop(overflow);
    if full {
        // gpulab is behind by more than the list holds: this thread waits for
        // it, as long as it runs, so nothing kept is lost and the list's
        // memory stays bounded.
        wait_for_room(agent, |o| o.kept() <= OVERFLOW_CAP / 2);
    }
}

/// Whether gpulab is where it was when a wait for it last stalled.
fn stalled(agent: &Agent) -> bool {
    let mut at = agent.stalled.lock().unwrap_or_else(|e| e.into_inner());
    match *at {
        Some(stall) if stall.holds(agent.segment.progress()) => true,
        _ => {
            *at = None;
            false
        }
    }
}

/// Moves the overflow list into the segment until `enough` says so, waiting
/// as long as gpulab runs (it reads, or its heartbeat moves); true when it got
/// there. A wait that stalls is remembered, so no thread waits again until
/// gpulab moves.
fn wait_for_room(agent: &Agent, enough: impl Fn(&Staging) -> bool) -> bool {
    if stalled(agent) {
        return false;
    }
    let mut seen = agent.segment.progress();
    let (mut moved_at, mut read_at) = (Instant::now(), Instant::now());
    loop {
        move_overflow(agent);
        if enough(&agent.overflow.lock().unwrap_or_else(|e| e.into_inner())) {
            return true;
        }
        let now = agent.segment.progress();
        if now.0 != seen.0 {
            read_at = Instant::now();
        }
        if now != seen {
            (seen, moved_at) = (now, Instant::now());
        } else if moved_at.elapsed() >= STALLED {
            *agent.stalled.lock().unwrap_or_else(|e| e.into_inner()) = Some(Stall {
                read: now.0,
                beat: Some(now.1),
            });
            return false;
        }
        if read_at.elapsed() >= UNREAD {
            // Marked by the read position alone: the heartbeat moves on.
            *agent.stalled.lock().unwrap_or_else(|e| e.into_inner()) = Some(Stall {
                read: now.0,
                beat: None,
            });
            return false;
        }
        std::thread::sleep(Duration::from_micros(200));
    }
}

/// Writes what the overflow list holds while there is room; true when it is
/// empty. Another thread already at it is left to it.
fn move_overflow(agent: &Agent) -> bool {
    let Ok(mut overflow) = agent.overflow.try_lock() else {
        return false;
    };
    while let Some(record) = overflow.front() {
        if !write(agent, record) {
            return false;
        }
        if let Some(r) = overflow.pop()
            && !r.droppable()
        {
            agent.segment.pending(-1);
        }
    }
    agent.overflowing.store(false, Ordering::Release);
    true
}

/// The process is ending (its last library finaliser, or the loader unloading
/// the layer): what the overflow list holds goes out, waiting for gpulab as
/// long as it reads. What cannot stays counted as pending, which gpulab
/// reports as lost.
pub fn at_exit() {
    // SAFETY: as in `agent`; a forked child that never recorded has nothing.
    let Some(agent) = (unsafe { AGENT.load(Ordering::Acquire).as_ref() }) else {
        return;
    };
    if FORKED.load(Ordering::Relaxed) || !agent.overflowing.load(Ordering::Acquire) {
        return;
    }
    wait_for_room(agent, |o| o.front().is_none());
}

thread_local! {
    /// The thread's buffer for encoding its records: a record no longer
    /// costs an allocation and a free.
    static BYTES: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// What a thread's buffer may keep between records (a long stack's line
/// is let go after).
const BYTES_KEPT: usize = 4096;

/// One record into the segment.
fn write(agent: &Agent, record: &Record) -> bool {
    let into = |bytes: &mut Vec<u8>| {
        bytes.clear();
        let kind = encode(agent, record, bytes);
        let written = agent.segment.write_within(kind, bytes, &agent.room);
        if bytes.capacity() > BYTES_KEPT {
            *bytes = Vec::new();
        }
        written
    };
    // A thread whose buffer is in use below (or gone, as it exits) takes a
    // fresh one.
    BYTES
        .try_with(|b| b.try_borrow_mut().ok().map(|mut b| into(&mut b)))
        .ok()
        .flatten()
        .unwrap_or_else(|| into(&mut Vec::with_capacity(128)))
}

/// A record's kind in the ring and its payload: calls and objects in their
/// binary form, everything else as its event's line.
fn encode(agent: &Agent, record: &Record, out: &mut Vec<u8>) -> u16 {
    match record {
        Record::Call {
            call,
            refused: None,
            pool: None,
        } => {
            call.encode(out);
            wire::CALL
        }
        Record::Object { object, .. } => {
            object.encode(out);
            wire::OBJECT
        }
        other => {
            let line = to_line(&crate::queue::to_event(other, agent.pid, agent.parent_pid));
            out.extend_from_slice(line.trim_end().as_bytes());
            wire::JSON
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
        object: ObjectRecord {
            t_ns: now_ns(),
            id,
            kind,
            action,
            bytes,
            refcount,
            stack: None,
            refs,
        },
        stack,
    });
}

/// A misuse a hook found: what, of which object and kind, and the call's stacks.
type Found = (MisuseKind, u64, ObjKind, Option<crate::stack::Captured>);

thread_local! {
    /// What this thread's hook found the call it is in doing to objects the
    /// program had released: sent, named by the call, when its record goes.
    static MISUSED: std::cell::RefCell<Vec<Found>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// The call this thread's hook is in named object `object` (of `kind`),
/// which the program had released: `what` it did. Said with the call's
/// record ([`call_measured`]), with the caller's stack as an object's.
pub fn misused(what: MisuseKind, object: u64, kind: ObjKind) {
    if quiet() {
        return;
    }
    let said = MISUSED.try_with(|m| {
        m.borrow()
            .iter()
            .any(|(w, o, ..)| *w == what && *o == object)
    });
    if said == Ok(true) {
        return;
    }
    let stack = crate::stack::capture_misuse();
    // After the thread's locals are destroyed (a call from a static
    // destructor at exit), nothing could carry it to the call's record: it
    // goes now, ahead of the record, as the record's would.
    if MISUSED
        .try_with(|m| m.borrow_mut().push((what, object, kind, stack.clone())))
        .is_err()
    {
        send_misuse(what, object, kind, stack);
    }
}

/// [`misused`], sent now rather than with the call's record: the call may
/// not return (a driver that dereferences a destroyed stream crashes the
/// program), and what was found must reach gpulab before it does, as
/// valgrind says an invalid access before the fault it causes.
pub fn misused_now(api: &'static str, what: MisuseKind, object: u64, kind: ObjKind) {
    send_now(api, what, object, kind, None);
}

/// A stream-ordered free not ordered after a use on another stream
/// ([`MisuseKind::UnorderedFree`]), found as the free returns: sent now, so
/// the use goes with it; the free's own record follows.
pub fn unordered_free(api: &'static str, object: u64, after: gpulab_events::UnorderedUse) {
    let (what, kind) = (MisuseKind::UnorderedFree, ObjKind::Buffer);
    send_now(api, what, object, kind, Some(after));
}

/// A misuse by the call `api`, with this thread's stack, sent now.
fn send_now(
    api: &'static str,
    what: MisuseKind,
    object: u64,
    kind: ObjKind,
    after: Option<gpulab_events::UnorderedUse>,
) {
    if quiet() {
        return;
    }
    let stack = crate::stack::capture_misuse();
    send(misuse_record(
        now_ns(),
        api,
        (what, object, kind),
        stack,
        after,
    ));
}

/// The record of a misuse by the call `api` on this thread: what it did,
/// to which object of which kind.
fn misuse_record(
    t_ns: u64,
    api: &'static str,
    (what, object, kind): (MisuseKind, u64, ObjKind),
    stack: Option<crate::stack::Captured>,
    after: Option<gpulab_events::UnorderedUse>,
) -> Record {
    Record::Misuse {
        t_ns,
        thread: thread_id(),
        api,
        what,
        object,
        kind,
        stack,
        stack_id: None,
        after,
    }
}

/// A misuse whose call is not known here, sent now.
fn send_misuse(
    what: MisuseKind,
    object: u64,
    kind: ObjKind,
    stack: Option<crate::stack::Captured>,
) {
    // The hook that found it is not known here: only that it ran at exit.
    let api = "(a call at exit)";
    send(misuse_record(
        now_ns(),
        api,
        (what, object, kind),
        stack,
        None,
    ));
}

/// What this thread's hooks found and no call record has said yet (tests).
#[cfg(test)]
pub fn take_misused() -> Vec<(MisuseKind, u64, ObjKind)> {
    MISUSED
        .try_with(|m| {
            std::mem::take(&mut *m.borrow_mut())
                .into_iter()
                .map(|(w, o, k, _)| (w, o, k))
                .collect()
        })
        .unwrap_or_default()
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

/// The agent spent `ns` inside a call of the program's it timed
/// ([`crate::cost`]).
pub fn observed(launch: bool, ns: u64) {
    if let Some(agent) = agent() {
        agent.segment.observed(launch, ns);
    }
}

/// Records device work the driver timed.
pub fn span(span: DeviceSpan) {
    send(Record::Span(span));
}

/// Records the device's memory, `(free, total)` as read now around `api`
/// (none on the startup hook's own thread).
pub fn read(api: &'static str, side: gpulab_events::ReadSide, (free, total): (u64, u64)) {
    send_read(api, side, (free, total), None, None);
}

/// Records the process's resident memory, read on `side` of the call `api`
/// ([`crate::resident`]).
pub fn read_resident(
    api: &'static str,
    side: gpulab_events::ReadSide,
    bytes: u64,
    first_touched: Option<u64>,
) {
    send_read(api, side, (0, 0), Some(bytes), first_touched);
}

fn send_read(
    api: &'static str,
    side: gpulab_events::ReadSide,
    (free, total): (u64, u64),
    resident: Option<u64>,
    first_touched: Option<u64>,
) {
    if quiet() {
        return;
    }
    send(Record::Read {
        t_ns: now_ns(),
        api,
        side,
        free,
        total,
        resident,
        first_touched,
    });
}

/// Has the ticker call `tick` regularly (the CUDA side's look for device spans).
pub fn on_tick(tick: fn()) {
    crate::ticker::start(tick);
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
    call_measured(
        api, driver, begin_ns, status, object, None, false, None, None,
    )
}

/// [`call_as`], with the device memory the call took when it was read on each
/// side of it, whether it freed memory no allocation the agent saw made,
/// what was read at a refused allocation, and the device's pool after the
/// call.
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
    freed_unseen: bool,
    refused: Option<Box<Refused>>,
    pool: Option<Box<gpulab_events::CudaMemory>>,
) -> u64 {
    if quiet() {
        return 0;
    }
    let end_ns = now_ns();
    let misused = MISUSED
        .try_with(|m| std::mem::take(&mut *m.borrow_mut()))
        .unwrap_or_default();
    for (what, object, kind, stack) in misused {
        send(misuse_record(
            begin_ns,
            api,
            (what, object, kind),
            stack,
            None,
        ));
    }
    let seq = next_seq();
    send(Record::Call {
        call: CallRecord {
            seq,
            thread: thread_id(),
            api,
            driver,
            begin_ns,
            end_ns,
            status,
            object,
            memory_step,
            freed_unseen,
        },
        refused,
        pool,
    });
    seq
}

#[cfg(test)]
mod tests {
    use super::Stall;

    #[test]
    fn a_stall_holds_while_gpulab_stands_where_it_stalled() {
        let stopped = Stall {
            read: 10,
            beat: Some(5),
        };
        assert!(stopped.holds((10, 5)));
        assert!(!stopped.holds((10, 6)), "it beats again");
        assert!(!stopped.holds((11, 5)), "it reads again");
        // Given up on an unmoving read position: the heartbeat does not count.
        let unread = Stall {
            read: 10,
            beat: None,
        };
        assert!(unread.holds((10, 99)));
        assert!(!unread.holds((11, 99)));
    }
}
