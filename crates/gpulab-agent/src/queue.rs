//! What the hooks record, in the cheapest form they can make it, and the
//! event each becomes: plain data below the writer ([`crate::transport`]).

use gpulab_events::{
    AgentEvent, AgentState, Call, CallName, CudaMemory, DeviceSpan, Event, Frame, Framework,
    FrameworkEvent, FrameworkSaid, ObjKind, ObjectAction, ObjectEvent, Refusal, Stack,
};

use crate::clock::now_ns;

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
        /// The device memory it took (`cuMemGetInfo` on each side), where read.
        memory_step: Option<i64>,
        /// What the agent read at an allocation the driver refused.
        refused: Option<Box<Refused>>,
        /// The device's stream-ordered pool after a call that may move it,
        /// once the program used it.
        pool: Option<Box<CudaMemory>>,
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
        /// The id they were named with ([`crate::stack`]), once named.
        stack_id: Option<u64>,
    },
    /// A creating call's stack, named: sent before anything names its id.
    Stack { id: u64, frames: Vec<Frame> },
    Agent {
        api: &'static str,
        state: AgentState,
    },
    /// Device work one of the program's calls enqueued, as the driver timed it.
    Span(DeviceSpan),
    /// What a framework said through the startup hook ([`crate::framework`]).
    Framework {
        t_ns: u64,
        framework: Framework,
        device: u32,
        said: FrameworkSaid,
    },
}

/// An allocation the driver refused, read inside the refused call.
pub struct Refused {
    /// The bytes it asked for, from its parameters.
    pub asked: Option<u64>,
    /// The device's free memory right after the refusal.
    pub free: Option<u64>,
    /// Return addresses of the refused call, as deep as an object's are taken.
    pub stack: Option<Box<[usize]>>,
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
            Record::Object { .. } | Record::Agent { .. } | Record::Stack { .. } => false,
        }
    }
}

/// A call's result as the API returned it (the driver's error names live as
/// long as the process).
pub type Status = gpulab_events::wire::Status<'static>;

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

/// The event a record (other than a plain call or object, which go in binary)
/// becomes, as process `pid` (child of `parent_pid`) sends it.
pub fn to_event(record: &Record, pid: u32, parent_pid: u32) -> Event {
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
            seq: *seq,
            pid,
            thread: *thread,
            // Sent, not read here: typed by the parent as it reads it.
            api: CallName::verbatim(api),
            driver: driver.to_string(),
            begin_ns: *begin_ns,
            end_ns: *end_ns,
            status: gpulab_events::wire::call_status(*status),
            object: *object,
            cuda: pool.as_deref().copied(),
            memory_step: *memory_step,
            refused: refused.as_ref().map(|r| {
                Box::new(Refusal {
                    asked_bytes: r.asked,
                    free_bytes: r.free,
                    stack: r.stack_id,
                })
            }),
            ..Call::default()
        }),
        Record::Object {
            t_ns,
            id,
            kind,
            action,
            bytes,
            refcount,
            refs,
            stack_id,
            ..
        } => Event::Object(ObjectEvent {
            t_ns: *t_ns,
            id: *id,
            kind: *kind,
            action: *action,
            handle: None,
            bytes: *bytes,
            refcount: *refcount,
            refs: refs.clone(),
            line: None,
            stack: *stack_id,
        }),
        Record::Stack { id, frames } => Event::Stack(Stack {
            t_ns: now_ns(),
            id: *id,
            frames: frames.clone(),
        }),
        Record::Span(span) => Event::DeviceSpan(span.clone()),
        Record::Framework {
            t_ns,
            framework,
            device,
            said,
        } => Event::Framework(FrameworkEvent {
            t_ns: *t_ns,
            pid,
            framework: *framework,
            device: *device,
            said: said.clone(),
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
