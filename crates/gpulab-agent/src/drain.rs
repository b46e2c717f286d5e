//! The agent's own thread: takes records off the hooks' queues into a staging
//! list, and writes them to gpulab's pipe as event lines, as fast as the parent
//! reads them and never waiting on it.
//!
//! What it never loses: object records. Calls and device spans may be dropped
//! (counted) when the parent falls behind; a run of reference-count changes of
//! one object still waiting in staging is merged into its latest (counted as
//! `coalesced`), so an object's creation, its last release and its deletion by
//! the driver always go out, whatever the rate, in a staging list no longer
//! than the objects in flux. The thread blocks every signal: the program's
//! signals stay the program's threads' business, and a write to a parent that
//! is gone fails with `EPIPE` instead of raising `SIGPIPE`.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::Ordering;
use std::sync::mpsc::{Receiver, SyncSender, TryRecvError};
use std::time::{Duration, Instant};

use gpulab_events::{AgentState, ObjectAction, to_line};

use crate::pipe::{Pipe, Wrote};
use crate::transport::{self, Agent, Message, Record};

/// Writes up to this size into a pipe are atomic (POSIX guarantees 512; Linux 4096).
pub const PIPE_BUF: usize = 4096;
/// Calls and spans waiting in staging; beyond this they are dropped and counted.
const STAGED_CALLS: usize = 1 << 14;
/// Records taken off a queue before the staged ones are written again.
const PULL_BATCH: usize = 1 << 12;
/// The thread's nap while records flow, and while the program is quiet: the
/// longest a record waits before it goes out.
const POLL_MIN: Duration = Duration::from_millis(1);
const POLL_MAX: Duration = Duration::from_millis(8);
/// How often the thread asks CUPTI for the device spans it holds.
const SPAN_FLUSH_EVERY: Duration = Duration::from_millis(100);

/// Records waiting for the pipe, oldest first.
#[derive(Default)]
pub struct Staging {
    items: VecDeque<Record>,
    /// The absolute index of `items[0]`.
    base: u64,
    /// Per object id, the absolute index of its last staged reference change.
    changes: HashMap<u64, u64>,
    /// Staged calls and spans.
    calls: usize,
}

/// What staging did with a record.
#[derive(Debug, PartialEq, Eq)]
pub enum Staged {
    Queued,
    /// Merged into the object's reference change already waiting.
    Coalesced,
    /// A call or span with no room left.
    Dropped,
}

impl Staging {
    pub fn push(&mut self, record: Record) -> Staged {
        match &record {
            Record::Call { .. } | Record::Span(_) => {
                if self.calls >= STAGED_CALLS {
                    return Staged::Dropped;
                }
                self.calls += 1;
            }
            Record::Object {
                id,
                action: action @ (ObjectAction::Retained | ObjectAction::Released),
                refcount,
                t_ns,
                bytes,
                ..
            } => {
                if let Some(waiting) = self.waiting_change(*id) {
                    let Record::Object {
                        action: a,
                        refcount: r,
                        t_ns: t,
                        bytes: b,
                        ..
                    } = waiting
                    else {
                        unreachable!("`waiting_change` returns object records only")
                    };
                    (*a, *r, *t, *b) = (*action, *refcount, *t_ns, *bytes);
                    return Staged::Coalesced;
                }
                let at = self.base + self.items.len() as u64;
                self.changes.insert(*id, at);
            }
            Record::Object { id, .. } => {
                // Nothing merges across a creation or a deletion.
                self.changes.remove(id);
            }
            Record::Agent { .. } => {}
        }
        self.items.push_back(record);
        Staged::Queued
    }

    /// The object's reference change still waiting, unless it is the
    /// program's last release (a later record must not hide that).
    fn waiting_change(&mut self, id: u64) -> Option<&mut Record> {
        let at = *self.changes.get(&id)?;
        let i = usize::try_from(at.checked_sub(self.base)?).ok()?;
        match self.items.get_mut(i)? {
            r @ Record::Object { refcount: 1.., .. } => Some(r),
            _ => None,
        }
    }

    pub fn pop(&mut self) -> Option<Record> {
        let record = self.items.pop_front()?;
        let at = self.base;
        self.base += 1;
        match &record {
            Record::Call { .. } | Record::Span(_) => self.calls -= 1,
            Record::Object { id, .. } if self.changes.get(id) == Some(&at) => {
                self.changes.remove(id);
            }
            _ => {}
        }
        Some(record)
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.items.len()
    }
}

/// Where the write loop stands.
#[derive(Debug, PartialEq, Eq)]
enum Out {
    /// Everything staged is in the pipe.
    Idle,
    /// The pipe is full for now.
    Blocked,
    /// The parent is gone: the agent goes quiet.
    Gone,
}

pub struct Drain {
    rx: Receiver<Message>,
    overflow: Receiver<Message>,
    agent: &'static Agent,
    pipe: Option<Pipe>,
    staging: Staging,
    /// Event lines taken from staging, not yet in the pipe (at most one write).
    out: Vec<u8>,
    /// The lines of the record taken from staging that did not fit in `out`.
    next: Option<String>,
    stacks: crate::stack::Stacks,
    /// Records written, calls dropped here, reference changes merged.
    written: u64,
    dropped: u64,
    coalesced: u64,
}

impl Drain {
    pub fn new(
        rx: Receiver<Message>,
        overflow: Receiver<Message>,
        agent: &'static Agent,
        pipe: Pipe,
    ) -> Drain {
        Drain {
            rx,
            overflow,
            agent,
            pipe: Some(pipe),
            staging: Staging::default(),
            out: Vec::with_capacity(PIPE_BUF),
            next: None,
            stacks: crate::stack::Stacks::default(),
            written: 0,
            dropped: 0,
            coalesced: 0,
        }
    }

    /// The thread's body: until the process detaches or the parent is gone.
    pub fn run(mut self) {
        block_all_signals();
        crate::crash::drain_thread_is_this_one();
        let mut nap = POLL_MIN;
        let mut ticked = Instant::now();
        loop {
            if let Some((asked, last)) = crate::crash::asked() {
                let done = self.urgent(last);
                crate::crash::answered(asked);
                if done {
                    return;
                }
            }
            if ticked.elapsed() >= SPAN_FLUSH_EVERY {
                // Device spans CUPTI holds come back through `span`, into the queue.
                transport::tick();
                ticked = Instant::now();
            }
            let (got, detach) = self.pull();
            if let Some(ack) = detach {
                let deadline = Instant::now() + transport::EXIT_WAIT;
                while self.pull().0 && Instant::now() < deadline {}
                self.finish(Some(None), deadline);
                let _ = ack.try_send(());
                return;
            }
            match self.write_out() {
                Out::Gone => return self.go_quiet(),
                Out::Blocked => {
                    if let Some(p) = &self.pipe {
                        p.wait_writable(POLL_MIN.as_millis() as i32);
                    }
                }
                Out::Idle => {
                    nap = if got {
                        POLL_MIN
                    } else {
                        (nap * 2).min(POLL_MAX)
                    };
                    std::thread::sleep(nap);
                }
            }
        }
    }

    /// A crash handler waits: everything queued goes out now; when the process
    /// is dying of it (`last`), its `detached` record too. True when done.
    fn urgent(&mut self, last: Option<i32>) -> bool {
        let deadline = Instant::now() + crate::crash::WAIT;
        while self.pull().0 && Instant::now() < deadline {}
        self.finish(last.map(Some), deadline);
        last.is_some()
    }

    /// Takes what the hooks queued into staging. Returns whether anything came,
    /// and the answer a `detach` waits for once everything is out.
    fn pull(&mut self) -> (bool, Option<SyncSender<()>>) {
        let mut got = false;
        let mut detach = None;
        for from_overflow in [false, true] {
            for _ in 0..PULL_BATCH {
                let rx = if from_overflow {
                    &self.overflow
                } else {
                    &self.rx
                };
                let message = match rx.try_recv() {
                    Ok(m) => m,
                    Err(TryRecvError::Empty | TryRecvError::Disconnected) => break,
                };
                if from_overflow {
                    self.agent.overflowing.fetch_sub(1, Ordering::AcqRel);
                }
                got = true;
                match message {
                    Message::Record(record) => match self.staging.push(record) {
                        Staged::Queued => {}
                        Staged::Coalesced => self.coalesced += 1,
                        Staged::Dropped => self.dropped += 1,
                    },
                    Message::Detach(ack) => detach = Some(ack),
                }
            }
        }
        (got, detach)
    }

    /// Writes until staging is empty or the deadline passes, then (`last`)
    /// the process's `detached` record with the exact counts.
    fn finish(&mut self, last: Option<Option<i32>>, deadline: Instant) {
        loop {
            match self.write_out() {
                Out::Idle => break,
                Out::Gone => return self.go_quiet(),
                Out::Blocked if Instant::now() >= deadline => return,
                Out::Blocked => {
                    if let Some(p) = &self.pipe {
                        p.wait_writable(1);
                    }
                }
            }
        }
        let Some(signal) = last else { return };
        self.agent.detached.store(true, Ordering::Release);
        let detached = Record::Agent {
            api: self.agent.apis_name(),
            state: AgentState::Detached {
                records: self.written,
                dropped: self.dropped + self.agent.dropped.load(Ordering::Relaxed),
                coalesced: self.coalesced,
                signal,
            },
        };
        // After the last count: the record itself is not one of them.
        self.staging.push(detached);
        while self.write_out() == Out::Blocked && Instant::now() < deadline {
            if let Some(p) = &self.pipe {
                p.wait_writable(1);
            }
        }
    }

    /// Moves staged records into the pipe, a whole number of lines per write.
    fn write_out(&mut self) -> Out {
        if self.pipe.is_none() {
            return Out::Gone;
        }
        loop {
            if self.out.is_empty() {
                self.fill();
                if self.out.is_empty() {
                    return Out::Idle;
                }
            }
            let Some(pipe) = &mut self.pipe else {
                return Out::Gone;
            };
            match pipe.write(&self.out) {
                Wrote::All => self.out.clear(),
                Wrote::Blocked => return Out::Blocked,
                Wrote::Gone => return Out::Gone,
            }
        }
    }

    /// Formats staged records into `out` while the next one fits one atomic
    /// write; a record whose lines alone pass `PIPE_BUF` goes alone.
    fn fill(&mut self) {
        loop {
            if self.next.is_none() {
                let Some(record) = self.staging.pop() else {
                    return;
                };
                self.written += 1;
                self.next = Some(lines_of(record, &mut self.stacks, self.agent));
            }
            let Some(lines) = self.next.take() else {
                return;
            };
            if !self.out.is_empty() && self.out.len() + lines.len() > PIPE_BUF {
                self.next = Some(lines);
                return;
            }
            self.out.extend_from_slice(lines.as_bytes());
        }
    }

    /// The parent is gone (or the pipe is not its own any more): nothing more
    /// is recorded in this process, and the hooks stop queuing.
    fn go_quiet(&mut self) {
        self.agent.detached.store(true, Ordering::Release);
        self.pipe = None;
        self.staging = Staging::default();
        self.out.clear();
        self.next = None;
        // What the hooks still hold is dropped with the queues when this returns.
    }
}

/// One record as the lines that carry it: its stack first, the first time a
/// creating call's stack is seen.
fn lines_of(mut record: Record, stacks: &mut crate::stack::Stacks, agent: &Agent) -> String {
    let (pid, parent_pid) = (agent.pid, agent.parent_pid);
    let stack = match &mut record {
        Record::Object { stack, .. } => stack.take(),
        _ => None,
    };
    let event = transport::to_event(record, pid, parent_pid);
    let Some(addrs) = stack else {
        return to_line(&event);
    };
    let (id, new) = stacks.intern(pid, addrs);
    let mut text = new
        .map(|frames| to_line(&transport::stack_event(id, frames)))
        .unwrap_or_default();
    text.push_str(&to_line(&transport::with_stack(event, id)));
    text
}

/// Blocks every signal on the calling thread; returns the mask it had.
pub fn block_all_signals() -> libc::sigset_t {
    // SAFETY: sigset_t is plain data, filled by sigfillset; the old mask is
    // written by pthread_sigmask.
    unsafe {
        let mut all: libc::sigset_t = std::mem::zeroed();
        let mut old: libc::sigset_t = std::mem::zeroed();
        libc::sigfillset(&mut all);
        libc::pthread_sigmask(libc::SIG_BLOCK, &all, &mut old);
        old
    }
}

/// Gives the calling thread back the mask [`block_all_signals`] returned.
pub fn restore_signals(old: &libc::sigset_t) {
    // SAFETY: a mask pthread_sigmask filled.
    unsafe { libc::pthread_sigmask(libc::SIG_SETMASK, old, std::ptr::null_mut()) };
}

#[cfg(test)]
mod tests {
    use super::*;
    use gpulab_events::ObjKind;

    fn object(id: u64, action: ObjectAction, refcount: u32) -> Record {
        Record::Object {
            t_ns: u64::from(refcount),
            id,
            kind: ObjKind::Buffer,
            action,
            bytes: 64,
            refcount,
            refs: Vec::new(),
            stack: None,
        }
    }

    fn call() -> Record {
        Record::Call {
            seq: 0,
            thread: 1,
            api: "clRetainMemObject",
            driver: "clRetainMemObject",
            begin_ns: 0,
            end_ns: 0,
            status: transport::Status::OpenCl(0),
            object: None,
        }
    }

    fn state(r: &Record) -> (u64, ObjectAction, u32) {
        match r {
            Record::Object {
                id,
                action,
                refcount,
                ..
            } => (*id, *action, *refcount),
            _ => panic!("not an object record"),
        }
    }

    #[test]
    fn reference_changes_waiting_merge_into_the_latest_and_the_last_release_stays() {
        use ObjectAction::*;
        let mut s = Staging::default();
        assert_eq!(s.push(object(1, Created, 1)), Staged::Queued);
        assert_eq!(s.push(object(1, Retained, 2)), Staged::Queued);
        assert_eq!(s.push(object(1, Released, 1)), Staged::Coalesced);
        for _ in 0..1000 {
            assert_eq!(s.push(object(1, Retained, 2)), Staged::Coalesced);
            assert_eq!(s.push(object(1, Released, 1)), Staged::Coalesced);
        }
        assert_eq!(s.push(object(1, Released, 0)), Staged::Coalesced);
        // The last release is never merged away, nor what follows it.
        assert_eq!(s.push(object(1, Retained, 1)), Staged::Queued);
        assert_eq!(s.push(object(1, Destroyed, 0)), Staged::Queued);
        assert_eq!(s.len(), 4);
        let out: Vec<_> = std::iter::from_fn(|| s.pop()).map(|r| state(&r)).collect();
        assert_eq!(
            out,
            vec![
                (1, Created, 1),
                (1, Released, 0),
                (1, Retained, 1),
                (1, Destroyed, 0)
            ]
        );
    }

    #[test]
    fn objects_never_merge_across_one_another_and_are_never_dropped() {
        use ObjectAction::*;
        let mut s = Staging::default();
        for _ in 0..STAGED_CALLS {
            assert_eq!(s.push(call()), Staged::Queued);
        }
        assert_eq!(s.push(call()), Staged::Dropped, "calls beyond the room");
        for id in 0..50_000u64 {
            assert_eq!(s.push(object(id, Created, 1)), Staged::Queued);
        }
        assert_eq!(s.push(object(7, Retained, 2)), Staged::Queued);
        assert_eq!(s.push(object(8, Retained, 2)), Staged::Queued);
        assert_eq!(s.push(object(7, Released, 1)), Staged::Coalesced);
        assert_eq!(s.len(), STAGED_CALLS + 50_002);
        // Once written, a change is no longer merged into.
        while s.len() > 2 {
            s.pop();
        }
        assert_eq!(state(&s.pop().expect("7")), (7, Released, 1));
        assert_eq!(s.push(object(8, Released, 1)), Staged::Coalesced);
        assert_eq!(s.push(object(7, Retained, 2)), Staged::Queued);
        assert_eq!(s.calls, 0);
    }
}
