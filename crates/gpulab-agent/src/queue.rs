//! What the hooks record, in the cheapest form they can make it, and the
//! event each becomes: plain data below the writer ([`crate::transport`]).

use gpulab_events::wire::{CallRecord, ObjectRecord};
use gpulab_events::{
    AgentEvent, AgentState, CudaMemory, DeviceRead, DeviceSpan, Event, Frame, Framework,
    FrameworkEvent, FrameworkSaid, Misuse, MisuseKind, ObjKind, ReadSide, Refusal, Stack,
    UnorderedUse,
};

use crate::clock::now_ns;

/// What a hook saw, in the cheapest form that can be queued: a call or an
/// object change as the ring carries it ([`gpulab_events::wire`]), with what
/// only some of them have.
pub enum Record {
    Call {
        call: CallRecord<'static>,
        /// What the agent read at an allocation the driver refused.
        refused: Option<Box<Refused>>,
        /// The device's stream-ordered pool after a call that may move it,
        /// once the program used it.
        pool: Option<Box<CudaMemory>>,
    },
    Object {
        /// Its stack's id (`object.stack`) is set once `stack` is named.
        object: ObjectRecord,
        /// The creating call's stacks (`--backtrace`).
        stack: Option<crate::stack::Captured>,
    },
    /// A creating call's stack, named: sent before anything names its id.
    Stack { id: u64, frames: Vec<Frame> },
    Agent {
        api: &'static str,
        state: AgentState,
    },
    /// Device work one of the program's calls enqueued, as the driver timed it.
    Span(DeviceSpan),
    /// The device's memory, read around a call that moves much of it.
    Read {
        t_ns: u64,
        api: &'static str,
        side: ReadSide,
        free: u64,
        total: u64,
        /// The process's resident memory, for a read of it instead.
        resident: Option<u64>,
        /// Bytes of buffers first used by the kernels a wait waited for.
        first_touched: Option<u64>,
    },
    /// What a framework said through the startup hook ([`crate::framework`]).
    Framework {
        t_ns: u64,
        framework: Framework,
        device: u32,
        /// A refusal's stack id (`said`'s `stack`) is set once `stack` is named.
        said: FrameworkSaid,
        /// The refused thread's stacks, as deep as an object's are taken.
        stack: Option<crate::stack::Captured>,
    },
    /// A call named an object the program had released ([`Misuse`]).
    Misuse {
        t_ns: u64,
        thread: u64,
        api: &'static str,
        what: MisuseKind,
        object: u64,
        kind: ObjKind,
        /// The call's stacks; its id is set once they are named.
        stack: Option<crate::stack::Captured>,
        stack_id: Option<u64>,
        /// An unordered free's use ([`MisuseKind::UnorderedFree`]).
        after: Option<UnorderedUse>,
    },
}

/// An allocation the driver refused, read inside the refused call.
pub struct Refused {
    /// The bytes it asked for, from its parameters.
    pub asked: Option<u64>,
    /// The device's free memory right after the refusal.
    pub free: Option<u64>,
    /// The refused call's stacks, as deep as an object's are taken.
    pub stack: Option<crate::stack::Captured>,
    pub stack_id: Option<u64>,
}

impl Record {
    /// Whether it may be dropped when there is no room (counted): calls, spans
    /// and a framework's periodic figures (the next reading says them again).
    /// Objects never are, nor a refused allocation, nor what else a framework
    /// said: a refusal lost would be an out-of-memory nobody saw.
    pub fn droppable(&self) -> bool {
        match self {
            Record::Call { refused, .. } => refused.is_none(),
            Record::Span(_) => true,
            Record::Framework { said, .. } => matches!(said, FrameworkSaid::Memory { .. }),
            Record::Object { .. }
            | Record::Misuse { .. }
            | Record::Agent { .. }
            | Record::Stack { .. }
            | Record::Read { .. } => false,
        }
    }
}

/// A call's result as the API returned it (the driver's error names live as
/// long as the process).
pub type Status = gpulab_events::wire::Status<'static>;

/// The family of API the agent attaches to in a process (not one call of it:
/// that is `gpulab_events::api::Api`).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Family {
    OpenCl = 1,
    Cuda = 2,
}

impl Family {
    pub fn as_str(self) -> &'static str {
        match self {
            Family::OpenCl => "opencl",
            Family::Cuda => "cuda",
        }
    }
}

/// The event a record (other than a plain call or object, which go in binary)
/// becomes, as process `pid` (child of `parent_pid`) sends it.
pub fn to_event(record: &Record, pid: u32, parent_pid: u32) -> Event {
    match record {
        Record::Call {
            call,
            refused,
            pool,
        } => {
            let mut event = call.clone().into_event(pid);
            if let Event::Call(c) = &mut event {
                c.cuda = pool.as_deref().copied();
                c.refused = refused.as_ref().map(|r| {
                    Box::new(Refusal {
                        asked_bytes: r.asked,
                        free_bytes: r.free,
                        stack: r.stack_id,
                    })
                });
            }
            event
        }
        Record::Object { object, .. } => object.clone().into_event(),
        Record::Stack { id, frames } => Event::Stack(Stack {
            t_ns: now_ns(),
            id: *id,
            frames: frames.clone(),
        }),
        Record::Span(span) => Event::DeviceSpan(span.clone()),
        Record::Read {
            t_ns,
            api,
            side,
            free,
            total,
            resident,
            first_touched,
        } => Event::DeviceRead(DeviceRead {
            t_ns: *t_ns,
            pid,
            api: (*api).into(),
            side: *side,
            free_bytes: *free,
            total_bytes: *total,
            resident_bytes: *resident,
            first_touched_bytes: *first_touched,
        }),
        Record::Framework {
            t_ns,
            framework,
            device,
            said,
            ..
        } => Event::Framework(FrameworkEvent {
            t_ns: *t_ns,
            pid,
            framework: *framework,
            device: *device,
            said: said.clone(),
        }),
        Record::Misuse {
            t_ns,
            thread,
            api,
            what,
            object,
            kind,
            stack_id,
            after,
            ..
        } => Event::Misuse(Misuse {
            t_ns: *t_ns,
            pid,
            thread: *thread,
            api: (*api).into(),
            what: *what,
            object: *object,
            kind: *kind,
            stack: *stack_id,
            after: after.clone(),
        }),
        Record::Agent { api, state } => Event::Agent(AgentEvent {
            t_ns: now_ns(),
            pid,
            parent_pid,
            api: (*api).into(),
            state: state.clone(),
        }),
    }
}
