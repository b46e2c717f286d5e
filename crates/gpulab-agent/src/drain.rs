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

use std::sync::OnceLock;
use std::sync::atomic::Ordering;
use std::sync::mpsc::{Receiver, SyncSender, TryRecvError};
use std::time::{Duration, Instant};

use gpulab_events::{
    AgentEvent, AgentState, Call, CallName, CallStatus, Event, Frame, FrameworkEvent, ObjectEvent,
    Refusal, Stack, to_line,
};

use crate::clock::now_ns;
use crate::pipe::{Pipe, Wrote};
use crate::queue::{Agent, EXIT_WAIT, Message, Record, Status};
use crate::staging::{Staged, Staging};
use crate::urgent;

/// Writes up to this size into a pipe are atomic (POSIX guarantees 512; Linux 4096).
pub const PIPE_BUF: usize = 4096;
/// Records taken off a queue before the staged ones are written again.
const PULL_BATCH: usize = 1 << 12;
/// The thread's nap while records flow, and while the program is quiet: the
/// longest a record waits before it goes out.
const POLL_MIN: Duration = Duration::from_millis(1);
const POLL_MAX: Duration = Duration::from_millis(8);
/// How often the thread asks CUPTI for the device spans it holds.
const SPAN_FLUSH_EVERY: Duration = Duration::from_millis(100);

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
        urgent::drain_started();
        let mut nap = POLL_MIN;
        let mut ticked = Instant::now();
        loop {
            if let Some((asked, last)) = urgent::asked() {
                let done = self.urgent(last);
                urgent::answered(asked);
                if done {
                    return urgent::drain_stopped();
                }
            }
            if ticked.elapsed() >= SPAN_FLUSH_EVERY {
                // Device spans CUPTI holds come back through `span`, into the queue.
                tick();
                ticked = Instant::now();
            }
            let (got, detach) = self.pull();
            if let Some(ack) = detach {
                let deadline = Instant::now() + EXIT_WAIT;
                while self.pull().0 && Instant::now() < deadline {}
                self.finish(Some(None), deadline);
                let _ = ack.try_send(());
                return urgent::drain_stopped();
            }
            match self.write_out() {
                Out::Gone => {
                    self.go_quiet();
                    return urgent::drain_stopped();
                }
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
        let deadline = Instant::now() + urgent::WAIT;
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
        Record::Call {
            refused: Some(r), ..
        } => r.stack.take(),
        _ => None,
    };
    let event = to_event(record, pid, parent_pid);
    let Some(addrs) = stack else {
        return to_line(&event);
    };
    let (id, new) = stacks.intern(pid, addrs);
    let mut text = new
        .map(|frames| to_line(&stack_event(id, frames)))
        .unwrap_or_default();
    text.push_str(&to_line(&with_stack(event, id)));
    text
}

/// Run by the agent thread every `SPAN_FLUSH_EVERY`: set by the CUDA side when
/// it collects device spans, so it can hand over what CUPTI holds.
static TICK: OnceLock<fn()> = OnceLock::new();

/// Has the agent thread call `tick` every `SPAN_FLUSH_EVERY`.
pub fn on_tick(tick: fn()) {
    let _ = TICK.set(tick);
}

/// Runs the CUDA side's tick, if it set one.
pub fn tick() {
    if let Some(tick) = TICK.get() {
        tick();
    }
}

/// A stack's frames, trimmed from the outermost until its line fits one
/// atomic pipe write (children share the pipe).
pub fn stack_event(id: u64, mut frames: Vec<Frame>) -> Event {
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

pub fn with_stack(mut event: Event, id: u64) -> Event {
    match &mut event {
        Event::Object(o) => o.stack = Some(id),
        Event::Call(Call {
            refused: Some(r), ..
        }) => r.stack = Some(id),
        _ => {}
    }
    event
}

pub fn to_event(record: Record, pid: u32, parent_pid: u32) -> Event {
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
            memory_step,
            refused,
            pool,
        } => Event::Call(Call {
            seq,
            pid,
            thread,
            line: None,
            iter: Vec::new(),
            tag: None,
            // Sent, not read here: typed by the parent as it reads it.
            api: CallName::verbatim(api),
            driver: driver.to_string(),
            begin_ns,
            end_ns,
            status: call_status(status),
            expect_error: false,
            mem_before: None,
            mem_after: None,
            object,
            cuda: pool.map(|p| *p),
            memory_step,
            refused: refused.map(|r| {
                Box::new(Refusal {
                    asked_bytes: r.asked,
                    free_bytes: r.free,
                    stack: None,
                })
            }),
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
        Record::Framework {
            t_ns,
            framework,
            device,
            said,
        } => Event::Framework(FrameworkEvent {
            t_ns,
            pid,
            framework,
            device,
            said,
        }),
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

    /// A refused allocation goes out with what the agent read inside it, its
    /// stack named first (as an object's is), and is never dropped for room.
    #[test]
    fn a_refused_allocation_carries_its_size_free_memory_and_stack() {
        let (tx, _rx) = std::sync::mpsc::sync_channel(1);
        let (overflow, _orx) = std::sync::mpsc::channel();
        let agent = Agent {
            tx,
            overflow,
            overflowing: 0.into(),
            pid: 7,
            parent_pid: 1,
            seq: 0.into(),
            dropped: 0.into(),
            detached: false.into(),
            apis: 0.into(),
        };
        let here: fn() = a_refused_allocation_carries_its_size_free_memory_and_stack;
        let record = |stack| Record::Call {
            seq: 3,
            thread: 7,
            api: "cuMemAlloc",
            driver: "cuMemAlloc_v2",
            begin_ns: 10,
            end_ns: 20,
            status: Status::Cuda {
                code: 2,
                name: Some("CUDA_ERROR_OUT_OF_MEMORY"),
            },
            object: None,
            memory_step: None,
            pool: None,
            refused: Some(Box::new(crate::queue::Refused {
                asked: Some(8 << 30),
                free: Some(3 << 30),
                stack,
            })),
        };
        let addrs: Box<[usize]> = vec![0, here as usize + 1, here as usize + 1].into();
        assert!(!record(None).droppable());
        let mut stacks = crate::stack::Stacks::default();
        let text = lines_of(record(Some(addrs)), &mut stacks, &agent);
        let events: Vec<Event> = text
            .lines()
            .map(|l| gpulab_events::jsonl::parse_line(1, l).expect("an event line"))
            .collect();
        let [Event::Stack(stack), Event::Call(call)] = events.as_slice() else {
            panic!("a stack, then the call: {text}");
        };
        assert_eq!(
            call.refused.as_deref(),
            Some(&Refusal {
                asked_bytes: Some(8 << 30),
                free_bytes: Some(3 << 30),
                stack: Some(stack.id),
            })
        );
    }
}
