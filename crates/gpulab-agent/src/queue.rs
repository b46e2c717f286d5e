//! What the hooks hand to the agent's thread: the records, the messages that
//! carry them, and the process's agent (its two queues and its counts). Plain
//! data, below both the hooks' side ([`crate::transport`]) and the writer's
//! ([`crate::drain`]).

use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU64, Ordering};
use std::sync::mpsc::{Sender, SyncSender};
use std::time::Duration;

use gpulab_events::{
    AgentState, CudaMemory, DeviceSpan, Framework, FrameworkSaid, ObjKind, ObjectAction,
};

/// How long the exiting process waits for its records to reach the pipe.
pub const EXIT_WAIT: Duration = Duration::from_secs(2);

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
    },
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
            Record::Object { .. } | Record::Agent { .. } => false,
        }
    }
}

/// What travels through the queues.
pub enum Message {
    Record(Record),
    /// The process is exiting: write out everything before this and the
    /// `detached` record, then answer.
    Detach(SyncSender<()>),
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

/// The process's agent: the queues its hooks push to, and what they counted.
pub struct Agent {
    pub tx: SyncSender<Message>,
    /// Object records the queue had no room for; never dropped.
    pub overflow: Sender<Message>,
    /// Object records in `overflow` not yet taken: while any are, every object
    /// record goes there too, so records of one object never overtake each other.
    pub overflowing: AtomicU64,
    pub pid: u32,
    pub parent_pid: u32,
    pub seq: AtomicU64,
    /// Call records the queue had no room for.
    pub dropped: AtomicU64,
    /// Set once the last record is queued, or the parent is gone: hooks stop.
    pub detached: AtomicBool,
    /// The APIs this process attached to, as [`Api`] bits.
    pub apis: AtomicU8,
}

impl Agent {
    /// The APIs attached, as the `detached` record names them.
    pub fn apis_name(&self) -> &'static str {
        match self.apis.load(Ordering::Relaxed) {
            1 => "opencl",
            2 => "cuda",
            3 => "opencl+cuda",
            _ => "none",
        }
    }
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
